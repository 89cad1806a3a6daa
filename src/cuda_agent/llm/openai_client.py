"""A client for OpenAI-compatible chat completion endpoints: vLLM, SGLang, OpenAI and the many
hosted services that speak the same API. Native tool calls, or the text protocol for models
served without a tool-call parser."""

from __future__ import annotations

import os
from typing import Any

from .messages import Completion, Message, ToolCall, Usage, estimate_tokens, openai_message
from .base import LLMError
from .retry import RetryPolicy, SdkClient, send_translated
from .text_protocol import check_tool_protocol, parse_tool_calls, to_text_messages

KEY_VARIABLE = "OPENAI_API_KEY"
FINISH_REASONS = {"stop": "stop", "tool_calls": "tool_calls", "function_call": "tool_calls",
                  "length": "length"}


class OpenAIClient(SdkClient):
    """Chat completions through the ``openai`` SDK, retried by ``RetryPolicy``."""

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None, *,
                 tool_protocol: str = "native", max_tokens: int | None = None,
                 temperature: float | None = None, timeout_s: float = 600,
                 retry: RetryPolicy = RetryPolicy(), extra_body: dict[str, Any] | None = None) -> None:
        check_tool_protocol(tool_protocol)
        openai = import_sdk()

        self.model = model
        self.base_url = base_url
        self.tool_protocol = tool_protocol
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.retry = retry
        self.timeout_s = timeout_s
        self.extra_body = extra_body
        self.provider = f"the OpenAI-compatible server at {base_url}" if base_url else "the OpenAI API"
        # The SDK's own retries are off so that every retry is counted, and paced, here.
        self._client = openai.AsyncOpenAI(api_key=resolve_key(api_key, base_url), base_url=base_url,
                                          timeout=timeout_s, max_retries=0)

    def _read(self, response: Any, request: dict[str, Any]) -> Completion:
        return self.read_response(response, request["messages"])

    def request_body(self, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model}
        if self.tool_protocol == "text":
            body["messages"] = [wire_message(m) for m in to_text_messages(messages, tools)]
        else:
            body["messages"] = [wire_message(m) for m in messages]
            if tools:
                body["tools"] = tools
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.extra_body:
            body["extra_body"] = self.extra_body
        return body

    async def _send(self, request: dict[str, Any]) -> Any:
        import openai

        return await send_translated(lambda: self._client.chat.completions.create(**request), openai,
                                     provider=self.provider, timeout_s=self.timeout_s,
                                     key_variable=KEY_VARIABLE)

    def read_response(self, response: Any, sent: list[dict[str, Any]]) -> Completion:
        if not response.choices:
            raise LLMError(f"{self.provider} answered with no choices; the server may be misconfigured.")
        choice = response.choices[0]
        content = choice.message.content or ""
        if self.tool_protocol == "text":
            content, calls = parse_tool_calls(content)
        else:
            calls = [read_tool_call(call, index) for index, call in enumerate(choice.message.tool_calls or [])]
        message = Message("assistant", content, tool_calls=calls)
        return Completion(message=message, usage=read_usage(response.usage, sent, message),
                          finish_reason=finish_reason(choice.finish_reason, bool(calls)),
                          model=response.model or self.model)


def resolve_key(api_key: str | None, base_url: str | None) -> str:
    key = api_key or os.environ.get(KEY_VARIABLE)
    if key:
        return key
    if base_url:
        return "EMPTY"  # local servers (vLLM, SGLang) accept any key
    raise LLMError(f"No API key for the OpenAI API: pass api_key or set {KEY_VARIABLE}. "
                   "For a local server (vLLM, SGLang) pass its base_url instead.")


def wire_message(message: Message) -> dict[str, Any]:
    """One of our messages in the chat completions request format."""
    return openai_message(message, request=True)


def read_tool_call(call: Any, index: int) -> ToolCall:
    function = call.function
    return ToolCall(id=call.id or f"call_{index}", name=function.name or "", arguments=function.arguments or "")


def read_usage(usage: Any, sent: list[dict[str, Any]], message: Message) -> Usage:
    if usage is not None and usage.prompt_tokens is not None:
        return Usage(usage.prompt_tokens, usage.completion_tokens or 0)
    # Some servers leave usage out; an estimate is better than zero for context accounting.
    prompt = sum(estimate_tokens(str(m.get("content") or "")) for m in sent)
    return Usage(prompt, message.estimated_tokens())


def finish_reason(reason: str | None, has_calls: bool) -> str:
    normalised = FINISH_REASONS.get(reason or "", "stop")
    if normalised == "stop" and has_calls:
        return "tool_calls"  # some servers say "stop" even when the reply holds tool calls
    if normalised == "tool_calls" and not has_calls:
        return "stop"
    return normalised


def import_sdk() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise LLMError("This client needs the openai package: pip install openai") from exc
    return openai
