"""The verdict: what the judge found, as JSON for programs and as text for people.

The field names ``status``, ``correct``, ``reward``, ``speedup_vs_eager``, ``speedup_vs_compile``,
``timings``, ``violations``, ``checks`` and ``feedback`` are fixed; fields may be added.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from .baselines import unsettled_reason
from .correctness import CheckResult
from .roofline import render as render_roofline
from .timing import BACKEND_DEFAULTS, TimingStats

STATUSES = ("ok", "compile_error", "forbidden", "runtime_error", "timeout", "incorrect")


@dataclass(frozen=True)
class Violation:
    rule: str
    file: str
    line: int | None
    message: str

    def render(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: [{self.rule}] {self.message}"


@dataclass
class Verdict:
    status: str
    correct: bool = False
    reward: int = -1
    reward_continuous: float = -1.0
    reward_sol: float = -1.0                  # SOL score against torch.compile (reward.sol_reward)
    # SOL-ExecBench's score against each baseline (roofline.sol_score), where that speedup is paid
    sol_score: dict[str, float | None] = field(default_factory=dict)
    speedup_vs_eager: float | None = None     # paid speedups only: None where ``speedup_withheld`` says why
    speedup_vs_compile: float | None = None
    speedup_withheld: str | None = None       # why a correct, timed candidate is paid no speedup
    # why one paid a speedup over eager is paid none over torch.compile (its baseline unsettled)
    compile_speedup_withheld: str | None = None
    timings: dict[str, TimingStats | None] = field(
        default_factory=lambda: {"candidate": None, "eager": None, "compile": None})
    violations: list[Violation] = field(default_factory=list)
    checks: list[CheckResult] = field(default_factory=list)
    feedback: str = ""
    stage: str = "compile"              # the last stage reached: compile | verify | profile
    error: str = ""                     # the reason for a non-ok status, short
    details: str = ""                   # compiler output, traceback or worker log tail
    task: str = ""
    task_sha256: str = ""
    solution_sha256: str = ""
    backend: str = ""
    device: dict[str, Any] = field(default_factory=dict)
    build: dict[str, Any] = field(default_factory=dict)
    isolation: dict[str, Any] = field(default_factory=dict)
    timing_integrity: dict[str, Any] = field(default_factory=dict)
    task_audit: dict[str, Any] = field(default_factory=dict)
    precision: dict[str, Any] = field(default_factory=dict)  # each floating output against its yardstick
    roofline: dict[str, Any] = field(default_factory=dict)   # against the device's peaks (roofline.py)
    seconds: dict[str, float] = field(default_factory=dict)
    # Where the stages' time went: seconds of each kind of exchange with a worker, in all, by
    # "worker.command", the worker as the verdict names it (``candidate.run``, ``reference-eager.init_model``;
    # the timed calls' own steps are not counted here).
    call_seconds: dict[str, float] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # A task that declares workloads (workloads.py): each one's outcome, in the order judged,
    # held-out ones first. The verdict's speedups are then the geometric means over the declared
    # workloads, and its ``timings``, ``checks`` and ``roofline`` are its first declared workload's.
    workloads: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")

    def to_dict(self) -> dict[str, Any]:
        """Plain data; non-finite numbers (an error of inf, say) become None, as JSON has none."""
        data = asdict(self)
        data["timings"] = {k: (v.to_dict() if v else None) for k, v in self.timings.items()}
        return finite(data)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False, default=str)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Verdict":
        data = dict(data)
        data["timings"] = {k: (TimingStats.from_dict(v) if v else None) for k, v in data.get("timings", {}).items()}
        data["violations"] = [Violation(**v) for v in data.get("violations", [])]
        data["checks"] = [CheckResult(**c) for c in data.get("checks", [])]
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in known})


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (nan, inf) as None: JSON has no such numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


BASELINES = {"eager": "eager", "compile": "torch.compile"}
# What a user can do about times the machine could not settle.
QUIETER = "run on a quieter machine, or time for longer"


def timing_setting(v: Verdict, name: str) -> float | None:
    """The timing setting ``name`` the verdict was judged with: its own, else the backend's default."""
    value = (v.settings.get("timing") or {}).get(name)
    return value if value else BACKEND_DEFAULTS.get(name, {}).get(v.backend)


def _unsettled_baselines(v: Verdict) -> dict[str, str]:
    """Why each baseline that did not settle backs no speedup, by mode."""
    tolerance, precision = timing_setting(v, "baseline_tolerance"), timing_setting(v, "precision")
    return {mode: unsettled_reason(label, stats, tolerance, precision) for mode, label in BASELINES.items()
            if (stats := v.timings.get(mode)) is not None and stats.stable is False}


def speedup_withheld(v: Verdict) -> str | None:
    """Why the judge pays no speedup for this verdict's time (None: it pays what it measured).

    The one place that decides it: the reward, the speedup fields and every reader of them (the
    bench's metrics, the agent's best solution, training) follow from it."""
    # Every reason that holds, so that what the candidate can fix is said whatever the load was.
    reasons = []
    if v.timing_integrity.get("stable") is False:
        reasons.append("the timing was not stable enough to claim a speedup")  # its cause is in the notes
    # A speedup over a baseline whose sessions did not settle would depend on which run one got.
    # Eager is the first rung: without it no milestone stands (torch.compile's alone: see below).
    unsettled = _unsettled_baselines(v)
    if "eager" in unsettled:
        reasons.append(f"{'; '.join(unsettled.values())} ({QUIETER})")
    if v.precision.get("reduced"):
        reasons.append(f"computed in less precision than the task's {v.precision.get('dtype', 'dtype')}, "
                       "so no speedup is paid")
    elif v.precision.get("unmeasured"):
        reasons.append("its precision could not be measured, so no speedup is paid")
    return "; ".join(reasons) or None


def compile_speedup_withheld(v: Verdict) -> str | None:
    """Why a verdict paid its speedup over eager is paid none over torch.compile: that baseline's
    sessions did not settle (None: it pays what it measured). Only where ``speedup_withheld`` is None."""
    reason = _unsettled_baselines(v).get("compile")
    return f"{reason} ({QUIETER})" if reason else None


def _ms(stats: TimingStats | None) -> str:
    return f"{stats.median_ms:.4g} ms" if stats else "n/a"


def _times(speedup: float | None) -> str:
    return f" ({speedup:.2f}x)" if speedup is not None else ""


def render_feedback(v: Verdict) -> str:
    """A short report for the candidate's author: what happened and what to look at."""
    lines: list[str] = []
    if v.status == "compile_error":
        lines += ["compile error:", v.error]
    elif v.status == "forbidden":
        lines.append("rejected: the solution breaks the rules")
        lines += [f"  {x.render()}" for x in v.violations]
    elif v.status in ("runtime_error", "timeout"):
        lines += [f"{v.status.replace('_', ' ')}: {v.error}"]
        if v.details:
            lines += ["", v.details.strip()[-1500:]]
    elif v.status == "incorrect":
        failed = [c for c in v.checks if not c.passed]
        verify = [c for c in v.checks if c.phase == "verify"]
        first = failed[0] if failed else None
        if first is not None and first.phase == "timing":
            lines.append("incorrect: an output produced during timing does not match the reference "
                         "(every timed call must compute the real result)")
        elif first is not None and first.phase == "inputs":
            lines.append("incorrect: forward leaves its inputs other than the reference does")
        elif first is not None and first.phase == "aliases":
            lines.append("incorrect: an output is (part of) an input's memory, where the reference's is not")
        else:
            lines.append(f"incorrect: {len(failed)} of {len(verify)} checks failed")
        if first is not None:
            lines.append(f"  check {first.index + 1}: {first.message}")
            if first.max_abs_error is not None and first.elements:
                lines.append(f"  max abs error {first.max_abs_error:.3g}, max rel error {first.max_rel_error:.3g}")
        if v.error and first is None:
            lines.append(f"  {v.error}")
    else:
        passed = [c for c in v.checks if c.passed and c.phase == "verify"]
        worst = max((c.max_abs_error or 0.0 for c in passed), default=0.0)
        lines.append(f"correct: {len(passed)}/{len(passed)} checks passed (max abs error {worst:.3g})")
        t = v.timings
        if t.get("candidate"):
            parts = [f"candidate {_ms(t['candidate'])}"]
            if t.get("eager"):
                parts.append(f"eager {_ms(t['eager'])}{_times(v.speedup_vs_eager)}")
            if t.get("compile"):
                parts.append(f"torch.compile {_ms(t['compile'])}{_times(v.speedup_vs_compile)}")
            lines.append("  ".join(parts))
            meaning = {3: "more than 5% faster than eager and torch.compile",
                       2: "more than 5% faster than eager, not than torch.compile",
                       1: "correct, but not more than 5% faster than eager"}
            if v.speedup_withheld:
                meaning[1] = f"correct, but {v.speedup_withheld}"
            if v.compile_speedup_withheld:
                meaning[2] = (f"more than 5% faster than eager; no speedup over torch.compile is claimed, as "
                              f"{v.compile_speedup_withheld}")
            lines.append(f"reward {v.reward}: {meaning[v.reward]}")
            lines += render_roofline(v.roofline)
    if v.violations and v.status != "forbidden":
        lines.append("warnings:")
        lines += [f"  {x.render()}" for x in v.violations]
    lines += [f"note: {n}" for n in v.notes]
    return "\n".join(lines)
