"""Cutting long text to fit: keep the head and the tail, say how much went from the middle."""

from __future__ import annotations

CUT_NOTICE = "\n\n[... {cut} characters cut from the middle of the output ...]\n\n"


def cap_text(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its head and tail with a notice between."""
    if len(text) <= limit:
        return text
    room = max(limit - len(CUT_NOTICE.format(cut=len(text))), 2)
    head = room // 2
    tail = room - head
    return text[:head] + CUT_NOTICE.format(cut=len(text) - head - tail) + text[-tail:]
