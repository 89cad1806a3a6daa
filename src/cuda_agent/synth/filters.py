"""The filters' decisions: each turns measurements into a FilterResult with the numbers kept.

The paper's rules (runs in eager and under torch.compile, no inherent randomness, outputs neither
constant nor indistinguishable across inputs, eager time between 1 and 100 ms), plus no NaN/Inf,
decontamination against KernelBench and deduplication. Thresholds live in FilterSettings so a run
records exactly what it applied. "Indistinguishable" uses the judge's own comparison (its
tolerance and its L2-norm bound): if two different inputs give outputs the judge would accept for
each other, a policy could return one fixed output and pass, which is what the rule prevents.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from .records import SIMILARITY_THRESHOLD, FilterResult


@dataclass(frozen=True)
class FilterSettings:
    window_ms: tuple[float, float] = (1.0, 100.0)
    max_similarity: float = SIMILARITY_THRESHOLD
    atol: float = 1e-2                   # the judge's tolerance (paper: 1e-2)
    rtol: float = 1e-2
    rerun_rtol: float = 1e-5             # reruns must agree this closely to count as identical
    rerun_atol: float = 1e-6
    constant_rtol: float = 1e-6          # spread below this fraction of |max| counts as constant

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def result(name: str, passed: bool, measurement: dict[str, Any], reason: str = "") -> FilterResult:
    return FilterResult(name=name, passed=passed, measurement=measurement, reason="" if passed else reason)


def deterministic_ops(code: str, ops: list[str], stochastic_names: set[str]) -> FilterResult:
    """No operator with inherent randomness, by the seed list and by name in the code.

    The composer never picks a stochastic seed; a model-written task may add one on its own, so
    the code is scanned for the call names of every stochastic seed (``dropout``, ``bernoulli``...).
    """
    found = sorted({op for op in ops if op in stochastic_names})
    tails = {name.rsplit(".", 1)[-1] for name in stochastic_names}
    called = set(re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(", code))
    found += sorted(t for t in tails & called if t not in {o.rsplit(".", 1)[-1] for o in found})
    return result("deterministic_ops", not found, {"stochastic_ops": found},
                  f"uses operators with inherent randomness: {', '.join(found)}")


def duplicate(first_seen: str | None) -> FilterResult:
    return result("duplicate", first_seen is None, {"duplicate_of": first_seen},
                  f"the same program as {first_seen}")


def kernelbench_similarity(score: float | None, closest: str | None, settings: FilterSettings) -> FilterResult:
    if score is None:
        return result("kernelbench_similarity", True, {"checked": False})
    return result("kernelbench_similarity", score <= settings.max_similarity,
                  {"checked": True, "max_similarity": round(score, 4), "most_similar": closest,
                   "threshold": settings.max_similarity},
                  f"AST similarity {score:.3f} to KernelBench {closest} exceeds {settings.max_similarity}")


def workload_window(ms: float, source: str, settings: FilterSettings) -> FilterResult:
    """``source`` says where ``ms`` comes from: "measured" on the GPU, or "estimate" (no GPU)."""
    low, high = settings.window_ms
    passed = low <= ms <= high
    side = "below" if ms < low else "above"
    return result("workload_window", passed, {"eager_ms": round(ms, 4), "source": source,
                                              "window_ms": [low, high]},
                  f"eager time {ms:.3g} ms ({source}) is {side} the window [{low:g}, {high:g}] ms")


# -- decisions on outputs (lists of tensors, one per output of forward) ---------------------------

def _max_abs_diff(a, b) -> float:
    if a.shape != b.shape:
        return float("inf")
    if a.numel() == 0:
        return 0.0
    return float((a.double() - b.double()).abs().max())


def finite(outputs: list) -> FilterResult:
    import torch

    bad = [i for i, t in enumerate(outputs) if not bool(torch.isfinite(t).all())]
    counts = {"nonfinite_outputs": bad,
              "nan": sum(int(torch.isnan(t).sum()) for t in outputs),
              "inf": sum(int(torch.isinf(t).sum()) for t in outputs)}
    return result("finite", not bad, counts,
                  f"output {bad[0] if bad else ''} holds {counts['nan']} NaN and {counts['inf']} Inf values")


def deterministic_runs(first: list, rerun: list, settings: FilterSettings) -> FilterResult:
    """The same inputs and weights, run again from another RNG state, must give the same output."""
    import torch

    diffs = [_max_abs_diff(a, b) for a, b in zip(first, rerun)]
    same = len(first) == len(rerun) and all(
        a.shape == b.shape and torch.allclose(a, b, rtol=settings.rerun_rtol, atol=settings.rerun_atol)
        for a, b in zip(first, rerun))
    worst = max(diffs, default=0.0)
    return result("deterministic_runs", same, {"max_abs_diff": worst},
                  f"a rerun on the same inputs differs by up to {worst:.3g}")


def not_constant(outputs: list, settings: FilterSettings) -> FilterResult:
    """Some output must vary. A single-element output (a loss) cannot vary within itself, so it
    passes here and is judged by ``input_dependent`` instead."""
    spreads, constant = [], []
    for i, t in enumerate(outputs):
        if t.numel() <= 1:
            spreads.append(None)
            continue
        t = t.double()
        spread = float(t.max() - t.min())
        scale = float(t.abs().max())
        spreads.append(spread)
        if spread <= settings.constant_rtol * max(scale, 1e-30):
            constant.append(i)
    passed = not outputs or len(constant) < sum(s is not None for s in spreads) or all(s is None for s in spreads)
    return result("not_constant", passed, {"spread": spreads, "constant_outputs": constant},
                  "every output holds one value everywhere")


def _judge_accepts(candidate: list, reference: list, settings: FilterSettings):
    """The judge's own comparison (elementwise tolerance and its L2-norm bound)."""
    from ..judge.correctness import compare_outputs

    return compare_outputs(tuple(candidate), tuple(reference), 0, settings.atol, settings.rtol)


def input_dependent(first: list, other_inputs: list, settings: FilterSettings) -> FilterResult:
    """Outputs for different inputs must be told apart by the judge's own check, or one fixed
    output would pass it."""
    check = _judge_accepts(other_inputs, first, settings)
    return result("input_dependent", not check.passed,
                  {"max_abs_diff": check.max_abs_error, "norm_rel_diff": check.norm_rel_error,
                   "elements_outside_tolerance": check.mismatched, "elements": check.elements},
                  "the judge's check accepts the output for one input as the output for another "
                  f"(atol {settings.atol:g}, rtol {settings.rtol:g}, and its L2 bound)")


def compile_matches(eager: list, compiled: list, settings: FilterSettings) -> FilterResult:
    """The compiled model's output must pass the judge's check against eager's."""
    check = _judge_accepts(compiled, eager, settings)
    return result("compile_matches", check.passed,
                  {"max_abs_diff": check.max_abs_error, "norm_rel_diff": check.norm_rel_error},
                  f"torch.compile output fails the judge's check against eager: {check.message}")
