"""What the judge learns about a task's reference alone, before any solution is judged.

Benchmarks need to tell a solution's failure from a task that cannot be judged fairly: a
reference that does not reproduce its own output (random numbers drawn in ``forward``) fails
every solution, and one too short to time makes every speed-up mostly noise. The same run
measures (or reads from the cache) the eager and torch.compile baselines that verdicts use.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .timing import TimingStats

NONDETERMINISTIC = "reference_nondeterministic"
TOO_FAST = "too_fast_to_time"
FAILED = "reference_failed"
IMPORTED_MISMATCH = "imported_baseline_mismatch"

FLAG_MEANINGS = {
    NONDETERMINISTIC: "the reference does not reproduce its own output for the same inputs and weights, "
                      "so a solution is unlikely to pass: not the solution's fault",
    TOO_FAST: "the eager baseline is too short to time reliably, so speed-ups are dominated by noise "
              "and launch overhead",
    FAILED: "the reference itself does not build, run or time on this machine: the task's fault",
    IMPORTED_MISMATCH: "the imported baseline is over 2x away from the eager time measured here: the problem "
                       "likely changed since that file was made, so speed-ups against it mean little",
}


@dataclass
class ReferenceReport:
    task: str
    task_sha256: str
    backend: str
    ok: bool = True                 # the reference built, ran and was timed
    error: str | None = None        # why not, when not ok
    deterministic: bool | None = None
    self_max_abs_diff: float | None = None   # between two forwards of the same inputs and weights
    eager: TimingStats | None = None
    compile: TimingStats | None = None
    device: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    roofline: dict[str, Any] = field(default_factory=dict)  # eager's and compile's (judge/roofline.py)
    # Host memory: the most any of the check's worker processes held (its own resident set, not
    # its children's), and the judging process's most over its life so far (a pool reuses it).
    worker_peak_bytes: int | None = None
    judge_peak_bytes: int | None = None

    def flags(self, min_baseline_ms: float) -> list[str]:
        """The reasons this task cannot be judged fairly, as flag names (see FLAG_MEANINGS)."""
        found = []
        if self.deterministic is False:
            found.append(NONDETERMINISTIC)
        if self.eager is not None and self.eager.median_ms < min_baseline_ms:
            found.append(TOO_FAST)
        return found

    def to_dict(self) -> dict:
        data = asdict(self)
        data["eager"] = self.eager.to_dict() if self.eager else None
        data["compile"] = self.compile.to_dict() if self.compile else None
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "ReferenceReport":
        data = dict(data)
        for mode in ("eager", "compile"):
            data[mode] = TimingStats.from_dict(data[mode]) if data.get(mode) else None
        return cls(**data)
