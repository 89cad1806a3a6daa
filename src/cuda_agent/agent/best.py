"""The best solution an episode has produced, as the paper's evaluation takes it.

A solution counts once the judge found it correct. Profiled solutions rank by speedup over
torch.compile; a solution only verified (correct, never timed) ranks below every profiled one,
so an episode that never profiled still exports its correct kernel. The best is written to disk
the moment it is found, so a crash loses nothing.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..files import write_atomic
from ..solution import Solution

VERDICT_FILE = "verdict.json"


@dataclass
class BestSolution:
    turn: int
    stage: str
    verdict: dict[str, Any]
    files: dict[str, str]

    @property
    def speedup_vs_compile(self) -> float | None:
        return self.verdict.get("speedup_vs_compile")

    @property
    def rank(self) -> tuple[int, float]:
        speedup = self.speedup_vs_compile
        return (1, speedup) if speedup is not None else (0, 0.0)

    def summary(self) -> dict[str, Any]:
        v = self.verdict
        return {"turn": self.turn, "stage": self.stage, "correct": bool(v.get("correct")),
                "speedup_vs_compile": v.get("speedup_vs_compile"),
                "speedup_vs_eager": v.get("speedup_vs_eager"), "reward": v.get("reward"),
                "reward_continuous": v.get("reward_continuous"), "reward_sol": v.get("reward_sol")}

    def event(self) -> dict[str, Any]:
        return {"type": "best", **self.summary(), "files": self.files}

    @classmethod
    def from_event(cls, event: dict[str, Any]) -> "BestSolution":
        keys = ("correct", "speedup_vs_compile", "speedup_vs_eager", "reward", "reward_continuous", "reward_sol")
        verdict = {k: event.get(k) for k in keys}
        return cls(turn=event["turn"], stage=event["stage"], verdict=verdict, files=dict(event["files"]))


def better(candidate: BestSolution, incumbent: BestSolution | None) -> bool:
    return incumbent is None or candidate.rank > incumbent.rank


def candidate_from_verdict(verdict: dict[str, Any], solution: Solution, turn: int) -> BestSolution | None:
    """A BestSolution for a correct verify/profile verdict, else None."""
    if not verdict.get("correct") or verdict.get("stage") not in ("verify", "profile"):
        return None
    return BestSolution(turn=turn, stage=verdict["stage"], verdict=verdict, files=dict(solution.files))


def export_solution(best: BestSolution, directory: Path) -> Path:
    """Write the solution's files and its verdict to ``directory`` (replacing what was there)."""
    staging = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for rel, text in best.files.items():
        (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(staging / rel, text)
    write_atomic(staging / VERDICT_FILE, json.dumps({"turn": best.turn, **best.verdict}, indent=2, default=str))
    # Move the old one aside before the new one goes in, so a crash never leaves neither.
    retired = directory.with_name(directory.name + ".old")
    shutil.rmtree(retired, ignore_errors=True)
    if directory.exists():
        directory.rename(retired)
    staging.rename(directory)
    shutil.rmtree(retired, ignore_errors=True)
    return directory
