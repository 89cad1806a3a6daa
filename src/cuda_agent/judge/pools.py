"""What a judge pool offers the layers above the judge (the agent, bench, synthesis, training and
the MCP server), typed once. The pools themselves are in ``cluster`` (local processes, Ray
actors, one per GPU) and ``train.pools`` (runs that a time limit really stops)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from ..solution import Solution
from ..task import Task
from .reference import ReferenceReport
from .verdict import Verdict


class JudgePool(Protocol):
    backend: str
    cache_dir: Path  # the judge's builds, baselines and workspace registry

    async def evaluate(self, task: Task, solution: Solution, stage: str) -> Verdict:
        ...

    async def evaluate_many(self, task: Task, solutions: list[Solution], stage: str) -> list[Verdict]:
        """The candidates of one task judged together (``Judge.evaluate_many``), in one run."""
        ...

    async def check_reference(self, task: Task) -> ReferenceReport:
        ...

    def close(self) -> None:
        ...


def stops_overdue_runs(pool: Any) -> bool:
    """Whether ``pool``'s ``evaluate`` and ``evaluate_many`` take ``timeout_s`` and stop a run that
    outlives it themselves (its slot is free only once the judge really is), as the pools that
    say so with ``stops_overdue_runs = True`` do; with any other pool a caller's wait ends and the
    run goes on in the background."""
    return bool(getattr(pool, "stops_overdue_runs", False))
