"""Scripted loopback model servers that speak the OpenAI and Anthropic wire protocols.

Real HTTP on 127.0.0.1, so the real SDKs talk to them. A script says what each request gets back:
a ``Reply`` (text and tool calls), an ``HttpError`` or a ``Delay``; either a list of steps, one
per request, or a callable ``(messages, index) -> step``. Every request body is kept in
``.requests`` and, read back into neutral messages, in ``.conversations``. Anything that went wrong
on the server's side (script exhausted, bad request, unknown path) is kept in ``.errors``.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Union

from cuda_agent.llm.messages import Message, ToolCall, Usage, estimate_tokens


@dataclass
class Reply:
    """The model's answer. ``tool_calls`` are ``(name, args)``: a dict is JSON-encoded, a str sent
    verbatim (to script malformed JSON; the Anthropic server needs it to be a JSON object)."""

    content: str = ""
    tool_calls: list[tuple[str, Union[dict[str, Any], str]]] = field(default_factory=list)
    usage: Usage | None = None
    finish_reason: str | None = None  # OpenAI's words; "length" maps to Anthropic's max_tokens


@dataclass
class HttpError:
    status: int
    message: str = ""
    retry_after: float | None = None
    code: str | None = None  # OpenAI's error code, e.g. "context_length_exceeded"


@dataclass
class Delay:
    seconds: float
    then: "Step"


Step = Union[Reply, HttpError, Delay]
Script = Union[list[Step], Callable[[list[Message], int], Step]]

ANTHROPIC_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
ANTHROPIC_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                         404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                         529: "overloaded_error"}


class ScriptedServer:
    """The protocol-independent part: the HTTP plumbing, the script and the records."""

    path = ""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.conversations: list[list[Message]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None, "start the server first (use it as a context manager)"
        return self._server.server_address[1]

    def __enter__(self) -> "ScriptedServer":
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, str], dict[str, Any]]:
        """Status, headers and JSON body for one request."""
        conversation = self.read_conversation(body)
        with self._lock:
            index = len(self.requests)
            self.requests.append(body)
            self.conversations.append(conversation)
        try:
            step = self.next_step(conversation, index)
        except Exception as exc:  # a broken script must show up in .errors, not as a hang
            return self.fail(500, f"script raised on request {index}: {exc!r}")
        if step is None:
            return self.fail(500, f"script exhausted: no step for request {index}")
        while isinstance(step, Delay):
            time.sleep(step.seconds)
            step = step.then
        if isinstance(step, HttpError):
            headers = {"Retry-After": format_seconds(step.retry_after)} if step.retry_after is not None else {}
            return step.status, headers, self.error_body(step)
        try:
            return 200, {}, self.reply_body(step, body, index)
        except (TypeError, ValueError) as exc:
            return self.fail(500, f"bad scripted reply for request {index}: {exc}")

    def next_step(self, conversation: list[Message], index: int) -> Step | None:
        if callable(self.script):
            return self.script(conversation, index)
        return self.script[index] if index < len(self.script) else None

    def fail(self, status: int, message: str) -> tuple[int, dict[str, str], dict[str, Any]]:
        with self._lock:
            self.errors.append(message)
        return status, {}, self.error_body(HttpError(status, message))

    def read_conversation(self, body: dict[str, Any]) -> list[Message]:
        raise NotImplementedError

    def reply_body(self, reply: Reply, body: dict[str, Any], index: int) -> dict[str, Any]:
        raise NotImplementedError

    def error_body(self, error: HttpError) -> dict[str, Any]:
        raise NotImplementedError


def make_handler(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' connection pools expect

        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.split("?")[0] != server.path:
                self.send(*server.fail(404, f"unknown path {self.path}"))
                return
            try:
                body = json.loads(raw)
            except json.JSONDecodeError as exc:
                self.send(*server.fail(400, f"request body is not JSON: {exc}"))
                return
            self.send(*server.answer(body))

        def send(self, status: int, headers: dict[str, str], payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (a scripted Delay past its timeout)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    return Handler


def format_seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def arguments_text(args: Union[dict[str, Any], str]) -> str:
    return args if isinstance(args, str) else json.dumps(args)


def default_usage(conversation: list[Message], reply: Reply) -> Usage:
    prompt = sum(m.estimated_tokens() for m in conversation)
    output = estimate_tokens(reply.content) + sum(estimate_tokens(n + arguments_text(a)) for n, a in reply.tool_calls)
    return Usage(prompt, output)


def text_of(content: Any) -> str:
    """Text of a message content that is a string or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def name_tool_results(conversation: list[Message]) -> list[Message]:
    """Fill in each tool result's tool name from the call it answers."""
    names: dict[str, str] = {}
    for message in conversation:
        for call in message.tool_calls:
            names[call.id] = call.name
        if message.role == "tool" and message.tool_call_id in names:
            message.name = names[message.tool_call_id]
    return conversation


class OpenAIServer(ScriptedServer):
    """``POST /v1/chat/completions``; ``.url`` is the base URL for the SDK (ends in /v1)."""

    path = "/v1/chat/completions"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def read_conversation(self, body: dict[str, Any]) -> list[Message]:
        conversation = []
        for item in body.get("messages", []):
            calls = [ToolCall(c["id"], c["function"]["name"], c["function"].get("arguments", ""))
                     for c in item.get("tool_calls") or []]
            conversation.append(Message(item["role"], text_of(item.get("content")), tool_calls=calls,
                                        tool_call_id=item.get("tool_call_id")))
        return name_tool_results(conversation)

    def reply_body(self, reply: Reply, body: dict[str, Any], index: int) -> dict[str, Any]:
        calls = [{"id": f"call_{index}_{k}", "type": "function",
                  "function": {"name": name, "arguments": arguments_text(args)}}
                 for k, (name, args) in enumerate(reply.tool_calls)]
        usage = reply.usage or default_usage(self.conversations[index], reply)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
        if calls:
            message["tool_calls"] = calls
        return {"id": f"chatcmpl-{index}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", ""),
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": reply.finish_reason or ("tool_calls" if calls else "stop")}],
                "usage": {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
                          "total_tokens": usage.input_tokens + usage.output_tokens}}

    def error_body(self, error: HttpError) -> dict[str, Any]:
        kind = "invalid_request_error" if error.status < 500 else "server_error"
        return {"error": {"message": error.message, "type": kind, "param": None, "code": error.code}}


class AnthropicServer(ScriptedServer):
    """``POST /v1/messages``; ``.url`` is the base URL for the SDK."""

    path = "/v1/messages"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def read_conversation(self, body: dict[str, Any]) -> list[Message]:
        conversation = []
        system = body.get("system")
        if system:
            conversation.append(Message("system", text_of(system)))
        for turn in body.get("messages", []):
            conversation.extend(read_turn(turn))
        return name_tool_results(conversation)

    def reply_body(self, reply: Reply, body: dict[str, Any], index: int) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": reply.content}] if reply.content else []
        for k, (name, args) in enumerate(reply.tool_calls):
            parsed = json.loads(args) if isinstance(args, str) else args
            if not isinstance(parsed, dict):
                raise ValueError(f"tool_use input must be a JSON object, got {args!r}")
            content.append({"type": "tool_use", "id": f"toolu_{index}_{k}", "name": name, "input": parsed})
        usage = reply.usage or default_usage(self.conversations[index], reply)
        reason = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        return {"id": f"msg_{index}", "type": "message", "role": "assistant", "model": body.get("model", ""),
                "content": content, "stop_reason": ANTHROPIC_STOP.get(reason, reason), "stop_sequence": None,
                "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}}

    def error_body(self, error: HttpError) -> dict[str, Any]:
        kind = ANTHROPIC_ERROR_TYPES.get(error.status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": error.message}}


def read_turn(turn: dict[str, Any]) -> list[Message]:
    """One Anthropic turn as neutral messages: tool_result blocks become tool messages."""
    content = turn.get("content")
    if isinstance(content, str):
        return [Message(turn["role"], content)]
    if turn["role"] == "assistant":
        text = "".join(b.get("text", "") for b in content if b["type"] == "text")
        calls = [ToolCall(b["id"], b["name"], json.dumps(b["input"])) for b in content if b["type"] == "tool_use"]
        return [Message("assistant", text, tool_calls=calls)]
    messages = []
    for block in content:
        if block["type"] == "tool_result":
            messages.append(Message("tool", text_of(block.get("content")), tool_call_id=block["tool_use_id"]))
        elif block["type"] == "text":
            messages.append(Message("user", block["text"]))
    return messages
