"""Keeping a conversation inside the model's context window.

The size of the next request is known exactly up to the last completion (the model reported its
prompt and output tokens) and estimated for what came after (tool results). When the estimate
passes the budget, the oldest messages are shrunk first (they are stale: the files and verdicts
they describe have moved on): tool results become a notice, and the long strings of old write and
edit calls a placeholder; the latest ``keep_recent`` messages are always kept whole.
A single tool result is also capped (``text.cap_text``), so one huge output cannot crowd out
everything else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .. import paper
from ..llm.messages import CHARS_PER_TOKEN, Message, Usage

ELIDED = "[older tool output elided to fit the context window ({chars} characters)]"
ELIDED_PREFIX = ELIDED.split("(")[0]
ELIDED_ARGUMENT = "[elided to fit the context window: {chars} characters; read the file for its current text]"
LONG_ARGUMENT = 200  # characters: shorter tool results and argument strings (paths) are kept


def elide_arguments(arguments: str) -> str:
    """A tool call's JSON arguments with every long string replaced by a placeholder; the keys and
    short values (the path) stay, so the history still says what was done where."""
    if len(arguments) <= LONG_ARGUMENT:
        return arguments
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return json.dumps({"elided": ELIDED_ARGUMENT.format(chars=len(arguments))})

    def shrink(item):
        if isinstance(item, str) and len(item) > LONG_ARGUMENT:
            return ELIDED_ARGUMENT.format(chars=len(item))
        if isinstance(item, dict):
            return {k: shrink(v) for k, v in item.items()}
        if isinstance(item, list):
            return [shrink(v) for v in item]
        return item

    return json.dumps(shrink(value))


@dataclass
class ContextBudget:
    """``window``: the model's context in tokens; ``reserve``: kept free for its reply;
    ``max_tool_tokens``: one tool result, before it is cut in the middle; ``keep_recent``: the
    latest messages that eliding old ones leaves whole."""

    window: int = paper.CONTEXT_TOKENS
    reserve: int = 8_192
    max_tool_tokens: int = 8_000
    keep_recent: int = 6

    @property
    def limit(self) -> int:
        return max(1, self.window - self.reserve)

    @property
    def max_tool_chars(self) -> int:
        return int(self.max_tool_tokens * CHARS_PER_TOKEN)

    def estimate(self, messages: list[Message], known: tuple[int, Usage] | None, schema_tokens: int = 0) -> int:
        """Tokens of ``messages`` as a prompt. ``known`` = (how many leading messages the last
        completion covered, including its reply, and that completion's usage), whose reported
        count already includes the tool schemas; without it they add ``schema_tokens``."""
        if known is None or known[0] > len(messages):
            return schema_tokens + sum(m.estimated_tokens() for m in messages)
        covered, usage = known
        return usage.input_tokens + usage.output_tokens + sum(m.estimated_tokens() for m in messages[covered:])

    def elide(self, messages: list[Message], excess_tokens: int, keep_recent: int | None = None) -> dict[int, int]:
        """Shrink the oldest messages until about ``excess_tokens`` are freed: tool results become a
        notice, and long strings in the arguments of old tool calls (the contents of write and
        edit calls) become a placeholder. Edits ``messages`` in place; returns {index: tokens freed}."""
        keep = self.keep_recent if keep_recent is None else keep_recent
        freed: dict[int, int] = {}
        for index, message in enumerate(messages[: max(0, len(messages) - keep)]):
            if sum(freed.values()) >= excess_tokens:
                break
            before = message.estimated_tokens()
            if message.role == "tool" and len(message.content) > LONG_ARGUMENT:
                message.content = ELIDED.format(chars=len(message.content))
            elif message.role == "assistant":
                for call in message.tool_calls:
                    call.arguments = elide_arguments(call.arguments)
            if (saved := before - message.estimated_tokens()) > 0:
                freed[index] = saved
        return freed

    @staticmethod
    def after_elision(known: tuple[int, Usage] | None, freed: dict[int, int]) -> tuple[int, Usage] | None:
        """The model's last count, less what was elided from the messages it covered."""
        if known is None:
            return None
        covered, usage = known
        less = sum(tokens for index, tokens in freed.items() if index < covered)
        return covered, Usage(max(0, usage.input_tokens - less), usage.output_tokens)
