"""A client for Anthropic's Messages API, with native tool use."""

from __future__ import annotations

import json
import os
from typing import Any

from .messages import Completion, Message, ToolCall, Usage
from .base import LLMError
from .retry import RetryPolicy, SdkClient, send_translated

KEY_VARIABLE = "ANTHROPIC_API_KEY"
STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
                "max_tokens": "length", "model_context_window_exceeded": "length"}


class AnthropicClient(SdkClient):
    """Messages through the ``anthropic`` SDK, retried by ``RetryPolicy``."""

    def __init__(self, model: str, api_key: str | None = None, base_url: str | None = None, *,
                 max_tokens: int = 8192, temperature: float | None = None, timeout_s: float = 600,
                 retry: RetryPolicy = RetryPolicy()) -> None:
        anthropic = import_sdk()

        key = api_key or os.environ.get(KEY_VARIABLE)
        if not key:
            raise LLMError(f"No API key for the Anthropic API: pass api_key or set {KEY_VARIABLE}.")
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.retry = retry
        self.timeout_s = timeout_s
        self.provider = f"the Anthropic-compatible server at {base_url}" if base_url else "the Anthropic API"
        # The SDK's own retries are off so that every retry is counted, and paced, here.
        self._client = anthropic.AsyncAnthropic(api_key=key, base_url=base_url, timeout=timeout_s,
                                                max_retries=0)

    def _read(self, response: Any, request: dict[str, Any]) -> Completion:
        return read_response(response, self.model)

    def request_body(self, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens,
                                "messages": wire_messages(messages)}
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [wire_tool(tool) for tool in tools]
        if self.temperature is not None:
            # Through extra_body: some SDK releases no longer take temperature as an argument.
            body["extra_body"] = {"temperature": self.temperature}
        return body

    async def _send(self, request: dict[str, Any]) -> Any:
        import anthropic

        return await send_translated(lambda: self._client.messages.create(**request), anthropic,
                                     provider=self.provider, timeout_s=self.timeout_s,
                                     key_variable=KEY_VARIABLE)


def wire_tool(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function", tool)
    return {"name": function["name"], "description": function.get("description", ""),
            "input_schema": function.get("parameters") or {"type": "object", "properties": {}}}


def wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Our conversation as alternating user/assistant turns of content blocks.

    Tool results travel as ``tool_result`` blocks in user turns; consecutive turns of one role
    are merged, since the API insists on alternation.
    """
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = content_blocks(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":  # the API wants tool results before any text in a turn
            turn["content"].sort(key=lambda block: block["type"] != "tool_result")
    return turns


def content_blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [{"type": "tool_result", "tool_use_id": message.tool_call_id or "",
                 "content": message.content}]
    blocks: list[dict[str, Any]] = []
    if message.content.strip():  # the API rejects empty text blocks
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name,
                       "input": tool_input(call.arguments)})
    return blocks


def tool_input(arguments: str) -> dict[str, Any]:
    """The arguments as the JSON object the API requires.

    Invalid JSON keeps its leading object when there is one (a model that wrote trailing text
    after the arguments), else becomes ``{}``; the tool result already told the model what was
    wrong with it.
    """
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        start = arguments.find("{")
        try:
            value, _ = json.JSONDecoder().raw_decode(arguments[start:]) if start >= 0 else ({}, 0)
        except json.JSONDecodeError:
            value = {}
    return value if isinstance(value, dict) else {}


def read_response(response: Any, model: str) -> Completion:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in response.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            calls.append(ToolCall(block.id, block.name, json.dumps(block.input, ensure_ascii=False)))
    reason = STOP_REASONS.get(response.stop_reason or "", "stop")
    if reason == "stop" and calls:
        reason = "tool_calls"
    return Completion(message=Message("assistant", "".join(texts), tool_calls=calls),
                      usage=read_usage(response.usage), finish_reason=reason,
                      model=response.model or model)


def read_usage(usage: Any) -> Usage:
    # Cached prompt tokens are reported apart from input_tokens but still fill the context.
    cached = (getattr(usage, "cache_read_input_tokens", None) or 0) + \
             (getattr(usage, "cache_creation_input_tokens", None) or 0)
    return Usage(usage.input_tokens + cached, usage.output_tokens)


def import_sdk() -> Any:
    try:
        import anthropic
    except ImportError as exc:
        raise LLMError("This client needs the anthropic package: pip install anthropic") from exc
    return anthropic
