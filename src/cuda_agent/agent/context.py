"""Keeping a conversation inside the model's context window.

The size of the next request is known exactly up to the last completion (the model reported its
prompt and output tokens) and estimated for what came after (tool results). When the estimate
passes the budget, the oldest tool results are elided first (they are stale: the files and
verdicts they describe have moved on), always keeping the latest ``keep_recent`` messages whole.
A single tool result is also capped, so one huge output cannot crowd out everything else.
"""

from __future__ import annotations

from dataclasses import dataclass

from .messages import CHARS_PER_TOKEN, Message, Usage

ELIDED = "[older tool output elided to fit the context window ({chars} characters)]"


def truncate_middle(text: str, max_chars: int) -> tuple[str, int]:
    """``text`` cut to about ``max_chars``, keeping its head and tail; returns (text, chars cut)."""
    if len(text) <= max_chars:
        return text, 0
    head = max_chars * 2 // 3
    tail = max_chars - head
    cut = len(text) - head - tail
    notice = f"\n[... {cut} characters cut from the middle of this output ...]\n"
    return text[:head] + notice + text[len(text) - tail:], cut


@dataclass
class ContextBudget:
    """``window``: the model's context in tokens; ``reserve``: kept free for its reply."""

    window: int = 131_072
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
        """Replace the oldest tool results with a notice until about ``excess_tokens`` are freed.
        Edits ``messages`` in place; returns {message index: tokens freed}."""
        keep = self.keep_recent if keep_recent is None else keep_recent
        freed: dict[int, int] = {}
        for index, message in enumerate(messages[: max(0, len(messages) - keep)]):
            if sum(freed.values()) >= excess_tokens:
                break
            if message.role != "tool" or message.content.startswith("[older tool output elided"):
                continue
            before = message.estimated_tokens()
            message.content = ELIDED.format(chars=len(message.content))
            freed[index] = before - message.estimated_tokens()
        return freed

    @staticmethod
    def after_elision(known: tuple[int, Usage] | None, freed: dict[int, int]) -> tuple[int, Usage] | None:
        """The model's last count, less what was elided from the messages it covered."""
        if known is None:
            return None
        covered, usage = known
        less = sum(tokens for index, tokens in freed.items() if index < covered)
        return covered, Usage(max(0, usage.input_tokens - less), usage.output_tokens)
