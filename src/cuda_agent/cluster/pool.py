"""Judge runs shared by many concurrent episodes.

Each judge run already works in fresh processes of its own; what a pool adds is a bound on how
many run at once (compilation and verification use CPU cores and memory) and an ``async`` face
for the agent's event loop. Timing is serialised per device by the judge itself, so a pool never
lets two candidates be timed on one GPU at the same time.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from ..judge.config import JudgeConfig
from ..judge.verdict import Verdict
from ..solution import Solution
from ..task import Task


class JudgePool(Protocol):
    backend: str
    cache_dir: Path  # the judge's builds, baselines and workspace registry

    async def evaluate(self, task: Task, solution: Solution, stage: str) -> Verdict:
        ...

    def close(self) -> None:
        ...


def default_concurrency() -> int:
    """Judge runs at once on this machine: one per two cores, at least two."""
    return max(2, (os.cpu_count() or 2) // 2)


class LocalJudgePool:
    """Runs judge evaluations in threads of this process, at most ``max_concurrent`` at a time."""

    def __init__(self, config: JudgeConfig | None = None, max_concurrent: int | None = None):
        from ..judge.pipeline import Judge

        self.judge = Judge(config)
        self.backend = self.judge.backend
        self.cache_dir = self.judge.cache_dir
        self.max_concurrent = max_concurrent or default_concurrency()
        self._executor = ThreadPoolExecutor(self.max_concurrent, thread_name_prefix="judge")
        self._closed = False

    async def evaluate(self, task: Task, solution: Solution, stage: str) -> Verdict:
        if self._closed:
            raise RuntimeError("the judge pool is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.judge.evaluate, task, solution, stage)

    def close(self) -> None:
        self._closed = True
        self._executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "LocalJudgePool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
