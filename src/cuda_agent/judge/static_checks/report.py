"""Collecting violations: one per (rule, file, line), in the order the files were scanned."""

from __future__ import annotations

from ..rules import STATIC_RULES
from ..verdict import Violation


class Report:
    def __init__(self) -> None:
        self._seen: set[tuple[str, str, int | None]] = set()
        self.violations: list[Violation] = []

    def add(self, rule: str, file: str, line: int | None, message: str) -> None:
        if rule not in STATIC_RULES:
            raise ValueError(f"unknown static rule {rule!r}")
        key = (rule, file, line)
        if key in self._seen:
            return
        self._seen.add(key)
        self.violations.append(Violation(rule, file, line, message))

    def sorted(self, file_order: list[str]) -> list[Violation]:
        rank = {name: i for i, name in enumerate(file_order)}
        return sorted(self.violations,
                      key=lambda v: (rank.get(v.file, len(rank)), v.line or 0, v.rule))
