"""Tool calling in plain text, for models without native tool calls.

The model is told about the tools in its system prompt and calls them by writing
``<tool_call>{"name": "...", "arguments": {...}}</tool_call>`` blocks; results come back as
``<tool_result name="..." id="...">...</tool_result>`` in a user message. A block that cannot be
read still becomes a ToolCall, so the loop answers it with an error the model can act on.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .messages import Message, ToolCall
from .base import LLMError

# How a client passes tools to the model: the server's native tool calls, or this text protocol.
TOOL_PROTOCOLS = ("native", "text")
CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
# A closed block, or an unclosed one that runs to the end of the text (a reply cut short).
CALL_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
NAME_FIELD = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
CODE_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)

INSTRUCTIONS = """\
# Tools

You can call the tools listed below. To call a tool, write a block exactly like this in your reply:

<tool_call>{"name": "TOOL_NAME", "arguments": {"PARAMETER": "VALUE"}}</tool_call>

The block holds one JSON object with the tool's "name" and its "arguments" (a JSON object that \
follows the tool's parameter schema). You may write several blocks in one reply; they run in \
order. Each result comes back in the next user message as \
<tool_result name="TOOL_NAME" id="CALL_ID">...</tool_result>. Do not write tool results \
yourself. A reply without any <tool_call> block ends your turn."""


def check_tool_protocol(protocol: str) -> None:
    if protocol not in TOOL_PROTOCOLS:
        raise LLMError(f"Unknown tool protocol {protocol!r}; choose one of {', '.join(TOOL_PROTOCOLS)}.")


def render_tools(tools: list[dict[str, Any]]) -> str:
    """A system-prompt section describing each tool and the exact call format."""
    sections = [INSTRUCTIONS]
    for tool in tools:
        function = tool.get("function", tool)
        parameters = json.dumps(function.get("parameters", {}), indent=1, ensure_ascii=False)
        sections.append(f"## {function['name']}\n\n{function.get('description', '').strip()}\n\n"
                        f"Parameters (JSON Schema):\n{parameters}")
    return "\n\n".join(sections)


def parse_tool_calls(text: str) -> tuple[str, list[ToolCall]]:
    """Split a reply into its prose (blocks removed) and its tool calls, with ids ``call_0``, ..."""
    calls = [read_block(match.group(1), f"call_{index}")
             for index, match in enumerate(CALL_BLOCK.finditer(text))]
    content = CALL_BLOCK.sub("", text)
    content = re.sub(r"\n{3,}", "\n\n", content).strip()
    return content, calls


def read_block(block: str, call_id: str) -> ToolCall:
    """One block's call; unreadable blocks keep what name can be found and the raw text."""
    raw = block.strip()
    fenced = CODE_FENCE.match(raw)
    body = fenced.group(1) if fenced else raw
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("name"), str) and data["name"]:
        arguments = data.get("arguments", data.get("parameters", {}))
        if isinstance(arguments, str):  # some models encode the arguments twice
            return ToolCall(call_id, data["name"], arguments)
        return ToolCall(call_id, data["name"], json.dumps(arguments, ensure_ascii=False))
    name = NAME_FIELD.search(body)
    return ToolCall(call_id, json_unescape(name.group(1)) if name else "", raw)


def json_unescape(text: str) -> str:
    try:
        return str(json.loads(f'"{text}"'))
    except json.JSONDecodeError:
        return text


def render_call(call: ToolCall) -> str:
    """A call as the block the model would have written; unreadable blocks as their raw text."""
    if is_raw_block(call):
        return f"{CALL_OPEN}{call.arguments}{CALL_CLOSE}"
    try:
        arguments: Any = json.loads(call.arguments)
    except json.JSONDecodeError:
        arguments = call.arguments  # invalid JSON from a native call: keep it, as a string
    payload = json.dumps({"name": call.name, "arguments": arguments}, ensure_ascii=False)
    return f"{CALL_OPEN}{payload}{CALL_CLOSE}"


def is_raw_block(call: ToolCall) -> bool:
    """Whether ``arguments`` holds a whole unreadable block, as ``read_block`` leaves it."""
    if not call.name:
        return True
    try:
        json.loads(call.arguments)
        return False
    except json.JSONDecodeError:
        found = NAME_FIELD.search(call.arguments)
        return found is not None and json_unescape(found.group(1)) == call.name


def render_result(message: Message) -> str:
    name = attribute(message.name or "")
    call_id = attribute(message.tool_call_id or "")
    return f'<tool_result name="{name}" id="{call_id}">\n{message.content}\n</tool_result>'


def attribute(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;")


def to_text_messages(messages: list[Message], tools: list[dict[str, Any]]) -> list[Message]:
    """The conversation as plain system/user/assistant messages carrying the text protocol.

    Tool descriptions join the system message, tool calls become ``<tool_call>`` blocks, tool
    results user messages; consecutive messages of one role are merged, since many chat
    templates insist that user and assistant alternate.
    """
    plain = [to_plain(message) for message in messages]
    if tools:
        plain = with_tools_section(plain, render_tools(tools))
    return merge_same_role(plain)


def to_plain(message: Message) -> Message:
    if message.role == "tool":
        return Message("user", render_result(message))
    if message.role == "assistant" and message.tool_calls:
        parts = [message.content.strip()] if message.content.strip() else []
        parts.extend(render_call(call) for call in message.tool_calls)
        return Message("assistant", "\n\n".join(parts))
    return Message(message.role, message.content)


def with_tools_section(messages: list[Message], section: str) -> list[Message]:
    for index, message in enumerate(messages):
        if message.role == "system":
            joined = f"{message.content.rstrip()}\n\n{section}" if message.content.strip() else section
            return messages[:index] + [Message("system", joined)] + messages[index + 1:]
    return [Message("system", section)] + messages


def merge_same_role(messages: list[Message]) -> list[Message]:
    merged: list[Message] = []
    for message in messages:
        if merged and merged[-1].role == message.role:
            merged[-1] = Message(message.role, f"{merged[-1].content}\n\n{message.content}")
        else:
            merged.append(message)
    return merged
