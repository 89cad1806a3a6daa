"""KernelBench metrics as the CUDA Agent paper and KernelBench define them.

Input records are plain dicts, one per problem (after :func:`select_best`), with at least
``level``, ``problem_id``, ``sample``, ``status``, ``correct``, ``speedup_vs_eager``,
``speedup_vs_compile`` and ``flags``. A speed-up is baseline time / candidate time and is ``None``
unless the solution is correct and was profiled.

Definitions (``n`` = the number of problems in the subset; problems without a record, or with
status ``"missing"``, count as failures):

- **pass rate** = #correct / n.
- **faster rate** vs a baseline = #(correct and speed-up > 1.0) / n; strictly greater, with no
  5% margin, as in the paper.
- **speed-up** vs a baseline = the geometric mean of the speed-ups of correct solutions only,
  computed in log space; ``None`` when no correct solution has one.
- **fast_p** (KernelBench) = #(correct and speed-up > p) / n, for each p, against eager and
  against torch.compile.

A correct record without speed-ups (verified but not profiled) counts for the pass rate but not
for faster rates, fast_p or geomeans; so fast_0 equals the pass rate only when every correct
record has speed-ups.

The Overall row weights each level by its problem count, as the paper's Table 1 does (L1, L2 and
L3 have 100, 100 and 50 problems there).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)  # the p values KernelBench prints
BASELINES = ("eager", "compile")


def select_best(samples: list[dict]) -> dict:
    """The record that scores a problem: the paper takes the best solution per task.

    That is the correct sample with the highest ``speedup_vs_compile``; correct samples without
    it rank below those with it (then by ``speedup_vs_eager``); ties go to the lower sample
    index. If no sample is correct, the first sample (lowest index) is returned.
    """
    if not samples:
        raise ValueError("select_best needs at least one sample")
    keys = {(s.get("level"), s.get("problem_id")) for s in samples}
    if len(keys) > 1:
        raise ValueError(f"samples of different problems: {sorted(keys, key=str)}")

    def rank(s: dict) -> tuple:
        correct = bool(s.get("correct"))
        vc = s.get("speedup_vs_compile") if correct else None
        ve = s.get("speedup_vs_eager") if correct else None
        sample = s.get("sample")
        return (not correct, vc is None, -(vc or 0.0), ve is None, -(ve or 0.0),
                sample if sample is not None else 0)

    return min(samples, key=rank)  # min keeps the first of equal keys


def _speedup(record: dict, baseline: str) -> float | None:
    """The record's speed-up over ``baseline``, or None if it is not correct or not profiled."""
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {BASELINES}, not {baseline!r}")
    if not record.get("correct"):
        return None
    value = record.get(f"speedup_vs_{baseline}")
    if value is None:
        return None
    value = float(value)
    if not (value > 0 and math.isfinite(value)):  # a geomean needs positive, finite values
        raise ValueError(f"bad speedup_vs_{baseline} {value!r} in problem "
                         f"{record.get('level')}/{record.get('problem_id')}")
    return value


def _rate(count: int | float, n: int | float) -> float:
    return count / n if n else 0.0  # an empty subset has no successes


def _geomean(values: list[float]) -> float | None:
    return statistics.geometric_mean(values) if values else None


def _p_key(p: float) -> str:
    return str(float(p))  # "0.0", "0.5", ...: string keys survive JSON


def fast_p_curve(results: Iterable[dict], problems: int, baseline: str,
                 ps: Iterable[float]) -> list[float]:
    """fast_p for each p in ``ps``: #(correct and speed-up over ``baseline`` > p) / ``problems``."""
    speedups = [s for s in (_speedup(r, baseline) for r in results) if s is not None]
    return [_rate(sum(s > p for s in speedups), problems) for p in ps]


@dataclass(frozen=True)
class Metrics:
    """One row of Table 1 plus KernelBench's fast_p, for a level or for Overall.

    ``fast_p`` is ``{"eager": {"0.0": x, ...}, "compile": {...}}``; rates are fractions in [0, 1].
    """

    subset: str
    problems: int
    attempted: int
    correct: int
    pass_rate: float
    faster_vs_eager: float
    faster_vs_compile: float
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None
    fast_p: dict[str, dict[str, float]] = field(default_factory=dict)
    flagged: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Metrics":
        return cls(
            subset=str(data["subset"]), problems=int(data["problems"]),
            attempted=int(data["attempted"]), correct=int(data["correct"]),
            pass_rate=float(data["pass_rate"]), faster_vs_eager=float(data["faster_vs_eager"]),
            faster_vs_compile=float(data["faster_vs_compile"]),
            speedup_vs_eager=_opt_float(data.get("speedup_vs_eager")),
            speedup_vs_compile=_opt_float(data.get("speedup_vs_compile")),
            fast_p={b: {k: float(v) for k, v in row.items()}
                    for b, row in (data.get("fast_p") or {}).items()},
            flagged=int(data.get("flagged", 0)))


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def level_metrics(level: int, results: list[dict], problems: int | None = None,
                  ps: Iterable[float] = FAST_P) -> Metrics:
    """Metrics of one level from one (already selected) record per problem.

    ``problems`` is the denominator (default ``len(results)``); problems without a record count
    as failures. Raises ValueError for records of another level, duplicate problems, or more
    records than ``problems``.
    """
    n = len(results) if problems is None else int(problems)
    if len(results) > n:
        raise ValueError(f"{len(results)} records for {n} problems in level {level}")
    seen: set[tuple[int, int]] = set()
    for r in results:
        if r.get("level") != level:
            raise ValueError(f"record of level {r.get('level')} in level {level}: "
                             f"problem {r.get('problem_id')}")
        key = (r["level"], r.get("problem_id"))
        if key in seen:
            raise ValueError(f"duplicate record for level {level} problem {key[1]}")
        seen.add(key)

    ps = tuple(ps)
    speedups = {b: [s for s in (_speedup(r, b) for r in results) if s is not None]
                for b in BASELINES}
    return Metrics(
        subset=f"Level {level}",
        problems=n,
        attempted=sum(r.get("status") != "missing" for r in results),
        correct=sum(bool(r.get("correct")) for r in results),
        pass_rate=_rate(sum(bool(r.get("correct")) for r in results), n),
        faster_vs_eager=_rate(sum(s > 1.0 for s in speedups["eager"]), n),
        faster_vs_compile=_rate(sum(s > 1.0 for s in speedups["compile"]), n),
        speedup_vs_eager=_geomean(speedups["eager"]),
        speedup_vs_compile=_geomean(speedups["compile"]),
        fast_p={b: dict(zip(map(_p_key, ps), fast_p_curve(results, n, b, ps)))
                for b in BASELINES},
        flagged=sum(bool(r.get("flags")) for r in results),
    )


def overall_metrics(levels: list[Metrics], ps: Iterable[float] = FAST_P) -> Metrics:
    """The paper's Overall row: levels weighted by their problem counts.

    Rates (and fast_p) are sum(n_l * r_l) / sum(n_l). Speed-ups are
    exp(sum(n_l * ln g_l) / sum(n_l)) over the levels that have a geomean; e.g. the paper's
    exp[(100 ln 1.87 + 100 ln 2.80 + 50 ln 1.52) / 250] = 2.11. (This weights by problems, not
    by correct solutions, so it is the paper's figure rather than a pooled geomean.) Counts are
    summed.
    """
    if not levels:
        raise ValueError("overall_metrics needs at least one level")
    total = sum(m.problems for m in levels)

    def weighted(get) -> float:
        return _rate(sum(m.problems * get(m) for m in levels), total)

    def weighted_geomean(get) -> float | None:
        pairs = [(m.problems, get(m)) for m in levels if get(m) is not None]
        weight = sum(w for w, _ in pairs)
        if not weight:
            return None
        return math.exp(sum(w * math.log(g) for w, g in pairs) / weight)

    keys = [_p_key(p) for p in ps]
    for m in levels:
        for b in BASELINES:
            lacking = set(keys) - set(m.fast_p.get(b, {}))
            if lacking:
                raise ValueError(f"{m.subset} has no fast_p vs {b} for p = {sorted(lacking)}")
    return Metrics(
        subset="Overall",
        problems=total,
        attempted=sum(m.attempted for m in levels),
        correct=sum(m.correct for m in levels),
        pass_rate=weighted(lambda m: m.pass_rate),
        faster_vs_eager=weighted(lambda m: m.faster_vs_eager),
        faster_vs_compile=weighted(lambda m: m.faster_vs_compile),
        speedup_vs_eager=weighted_geomean(lambda m: m.speedup_vs_eager),
        speedup_vs_compile=weighted_geomean(lambda m: m.speedup_vs_compile),
        fast_p={b: {k: weighted(lambda m, b=b, k=k: m.fast_p[b][k]) for k in keys}
                for b in BASELINES},
        flagged=sum(m.flagged for m in levels),
    )
