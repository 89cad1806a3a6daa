"""The conversation's data: messages, tool calls, token usage and one model completion.

Provider-neutral: the LLM clients translate these to and from their wire formats, the loop and
the tools only ever see these. Every type round-trips through plain JSON (``to_dict`` /
``from_dict``), which is how trajectories store them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
CHARS_PER_TOKEN = 3.5  # a cautious estimate for code-heavy text where no tokenizer is at hand


def estimate_tokens(text: str) -> int:
    """Tokens in ``text`` by length; used only where the model's own count is not known."""
    return int(len(text) / CHARS_PER_TOKEN) + 1


@dataclass
class ToolCall:
    """One call the model asked for. ``arguments`` is the raw JSON text it wrote, possibly invalid."""

    id: str
    name: str
    arguments: str

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ToolCall":
        return cls(id=str(data["id"]), name=str(data["name"]), arguments=str(data.get("arguments", "")))


@dataclass
class Message:
    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)  # assistant messages only
    tool_call_id: str | None = None                           # tool messages: which call answered
    name: str | None = None                                   # tool messages: the tool's name

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [asdict(c) for c in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            data["name"] = self.name
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Message":
        return cls(role=data["role"], content=data.get("content") or "",
                   tool_calls=[ToolCall.from_dict(c) for c in data.get("tool_calls") or []],
                   tool_call_id=data.get("tool_call_id"), name=data.get("name"))

    def estimated_tokens(self) -> int:
        return estimate_tokens(self.content) + sum(estimate_tokens(c.name + c.arguments) for c in self.tool_calls) + 4


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens)


@dataclass
class Completion:
    """The model's answer to one request.

    ``finish_reason`` is normalised to ``stop`` (a final answer), ``tool_calls`` or ``length``
    (cut off by the output limit). ``retries`` counts requests repeated after rate limits or
    server errors; ``latency_s`` includes them.
    """

    message: Message
    usage: Usage
    finish_reason: str = "stop"
    latency_s: float = 0.0
    retries: int = 0
    model: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"message": self.message.to_dict(), "usage": asdict(self.usage),
                "finish_reason": self.finish_reason, "latency_s": self.latency_s,
                "retries": self.retries, "model": self.model}


def call_arguments(text: Any) -> Any:
    """A call's arguments as chat templates want them: the object its JSON text holds, or the
    text as written where that is not a JSON object (a malformed call stays visible as it was)."""
    if not isinstance(text, str):
        return text
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    return value if isinstance(value, dict) else text


def openai_message(message: Message, *, object_arguments: bool = False, request: bool = False) -> dict[str, Any]:
    """``message`` in OpenAI's chat format, the one form every converter of the project uses.

    ``object_arguments``: tool-call arguments as objects (``call_arguments``), as chat templates
    render them (Qwen's applies ``tojson``, so JSON text would be encoded twice); otherwise the
    JSON text itself (the API's wire format, and Parquet rows, which cannot hold differing
    objects). ``request``: the chat-completions request form, whose tool messages carry no name
    and whose content is null beside tool calls."""
    data: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        data["tool_calls"] = [{"id": c.id, "type": "function", "function": {
            "name": c.name, "arguments": call_arguments(c.arguments) if object_arguments else c.arguments}}
            for c in message.tool_calls]
        if request:
            data["content"] = message.content or None
    if message.role == "tool":
        data["tool_call_id"] = message.tool_call_id or ""
        if not request:
            data["name"] = message.name or ""
    return data


def with_object_arguments(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-format message dicts with every tool call's arguments as an object (``call_arguments``)."""
    out = []
    for m in messages:
        if m.get("tool_calls"):
            m = {**m, "tool_calls": [{**c, "function": {**c["function"],
                                                        "arguments": call_arguments(c["function"].get("arguments"))}}
                                     for c in m["tool_calls"]]}
        out.append(m)
    return out


def tool_schema(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """A tool in OpenAI's function-calling format, the one every client receives."""
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}
