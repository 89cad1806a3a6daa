"""KernelBench metrics against values worked out by hand."""

from __future__ import annotations

import json
import math

import pytest

from cuda_agent.bench.metrics import (FAST_P, Metrics, fast_p_curve, level_metrics,
                                      overall_metrics, select_best)


def rec(level, pid, *, correct=False, eager=None, compile=None, status=None, sample=0,
        flags=()):
    return {"level": level, "problem_id": pid, "name": f"{pid}_P.py", "sample": sample,
            "status": status or ("ok" if correct else "incorrect"), "correct": correct,
            "speedup_vs_eager": eager, "speedup_vs_compile": compile, "candidate_ms": None,
            "eager_ms": None, "compile_ms": None, "reward": 0, "flags": list(flags),
            "error": None}


# Level 1, 5 problems; problem 5 has no record at all (a failure).
L1 = [
    rec(1, 1, correct=True, eager=2.0, compile=1.5),   # faster than both
    rec(1, 2, correct=True, eager=1.5, compile=0.8),   # faster than eager only
    rec(1, 3, correct=True, eager=0.5, compile=0.25),  # slower than both
    rec(1, 4),                                         # incorrect
]
# Level 2, 4 problems.
L2 = [
    rec(2, 1, correct=True, eager=1.0, compile=1.0),   # exactly 1x: not faster (strict >)
    rec(2, 2, correct=True, eager=4.0, compile=2.0),
    rec(2, 3, correct=True, flags=["too_fast_to_time"]),  # verified only: no speed-ups
    rec(2, 4, status="missing"),
]
# Level 3, 2 problems, none correct.
L3 = [
    rec(3, 1, status="runtime_error", flags=["reference_nondeterministic"]),
    rec(3, 2),
]


def fast(m: Metrics, baseline: str) -> list[float]:
    return [m.fast_p[baseline][str(p)] for p in FAST_P]


def test_level_1_by_hand():
    m = level_metrics(1, L1, problems=5)
    assert (m.subset, m.problems, m.attempted, m.correct, m.flagged) == ("Level 1", 5, 4, 3, 0)
    assert m.pass_rate == pytest.approx(3 / 5)
    assert m.faster_vs_eager == pytest.approx(2 / 5)    # 2.0 and 1.5
    assert m.faster_vs_compile == pytest.approx(1 / 5)  # 1.5 only
    assert m.speedup_vs_eager == pytest.approx((2.0 * 1.5 * 0.5) ** (1 / 3))
    assert m.speedup_vs_compile == pytest.approx((1.5 * 0.8 * 0.25) ** (1 / 3))
    # p:                       0.0    0.5    0.8    1.0    1.5    2.0   (strict >)
    assert fast(m, "eager") == pytest.approx([3 / 5, 2 / 5, 2 / 5, 2 / 5, 1 / 5, 0.0])
    assert fast(m, "compile") == pytest.approx([3 / 5, 2 / 5, 1 / 5, 1 / 5, 0.0, 0.0])


def test_level_2_strict_and_verified_only():
    m = level_metrics(2, L2)  # problems defaults to len(results) = 4
    assert (m.problems, m.attempted, m.correct, m.flagged) == (4, 3, 3, 1)
    assert m.pass_rate == pytest.approx(3 / 4)           # verified-only counts as correct
    assert m.faster_vs_eager == pytest.approx(1 / 4)     # 1.0 is not > 1.0
    assert m.faster_vs_compile == pytest.approx(1 / 4)
    assert m.speedup_vs_eager == pytest.approx((1.0 * 4.0) ** (1 / 2))  # verified-only excluded
    assert m.speedup_vs_compile == pytest.approx((1.0 * 2.0) ** (1 / 2))
    # fast_0 is not the pass rate here: the verified-only record has no speed-up.
    assert fast(m, "eager") == pytest.approx([2 / 4, 2 / 4, 2 / 4, 1 / 4, 1 / 4, 1 / 4])
    assert fast(m, "compile") == pytest.approx([2 / 4, 2 / 4, 2 / 4, 1 / 4, 1 / 4, 0.0])


def test_level_without_correct_solutions():
    m = level_metrics(3, L3, problems=2)
    assert (m.correct, m.attempted, m.flagged) == (0, 2, 1)
    assert m.pass_rate == m.faster_vs_eager == m.faster_vs_compile == 0.0
    assert m.speedup_vs_eager is None and m.speedup_vs_compile is None
    assert fast(m, "eager") == [0.0] * len(FAST_P)


def test_speedups_of_incorrect_records_are_ignored():
    bogus = rec(1, 1, correct=False, eager=10.0, compile=10.0)
    m = level_metrics(1, [bogus])
    assert m.faster_vs_eager == 0.0 and m.speedup_vs_eager is None


def test_overall_weights_by_problem_count():
    levels = [level_metrics(1, L1, 5), level_metrics(2, L2, 4), level_metrics(3, L3, 2)]
    o = overall_metrics(levels)
    assert (o.subset, o.problems, o.attempted, o.correct, o.flagged) == ("Overall", 11, 9, 6, 2)
    assert o.pass_rate == pytest.approx((5 * 3 / 5 + 4 * 3 / 4 + 2 * 0) / 11)  # = 6/11
    assert o.faster_vs_eager == pytest.approx((2 + 1 + 0) / 11)
    assert o.faster_vs_compile == pytest.approx((1 + 1 + 0) / 11)
    # Level 3 has no geomean, so only levels 1 and 2 (weights 5 and 4) enter.
    g1e, g2e = 1.5 ** (1 / 3), 2.0
    g1c, g2c = 0.3 ** (1 / 3), 2.0 ** 0.5
    assert o.speedup_vs_eager == pytest.approx(
        math.exp((5 * math.log(g1e) + 4 * math.log(g2e)) / 9))
    assert o.speedup_vs_compile == pytest.approx(
        math.exp((5 * math.log(g1c) + 4 * math.log(g2c)) / 9))
    assert o.fast_p["eager"]["1.0"] == pytest.approx((2 + 1) / 11)
    assert o.fast_p["compile"]["0.0"] == pytest.approx((3 + 2) / 11)


def _published(subset, n, pass_rate, faster_compile, g_compile):
    keys = {str(p): 0.0 for p in FAST_P}
    return Metrics(subset=subset, problems=n, attempted=n, correct=round(pass_rate * n),
                   pass_rate=pass_rate, faster_vs_eager=0.0, faster_vs_compile=faster_compile,
                   speedup_vs_eager=None, speedup_vs_compile=g_compile,
                   fast_p={"eager": dict(keys), "compile": dict(keys)})


def test_overall_reproduces_the_papers_consistency_check():
    # CUDA Agent, Table 1: L1/L2/L3 with 100/100/50 problems.
    levels = [_published("Level 1", 100, 1.00, 0.97, 1.87),
              _published("Level 2", 100, 1.00, 1.00, 2.80),
              _published("Level 3", 50, 0.94, 0.90, 1.52)]
    o = overall_metrics(levels)
    assert o.problems == 250 and o.correct == 247
    assert o.faster_vs_compile == pytest.approx((97 + 100 + 45) / 250)  # 96.8%
    assert round(100 * o.faster_vs_compile, 1) == 96.8
    assert round(100 * o.pass_rate, 1) == 98.8                           # (100+100+47)/250
    # exp[(100 ln 1.87 + 100 ln 2.80 + 50 ln 1.52) / 250] = 2.11
    assert round(o.speedup_vs_compile, 2) == 2.11
    assert o.speedup_vs_eager is None  # no level has one


def test_select_best_prefers_fastest_correct_vs_compile():
    samples = [rec(1, 7, correct=True, eager=3.0, compile=1.2, sample=0),
               rec(1, 7, correct=True, eager=1.1, compile=2.0, sample=1),
               rec(1, 7, correct=False, eager=9.0, compile=9.0, sample=2)]
    assert select_best(samples)["sample"] == 1


def test_select_best_ranks_verified_only_below_timed():
    samples = [rec(1, 7, correct=True, sample=0),
               rec(1, 7, correct=True, eager=0.4, compile=0.5, sample=1)]
    assert select_best(samples)["sample"] == 1
    assert select_best([rec(1, 7, sample=0), rec(1, 7, correct=True, sample=1)])["sample"] == 1


def test_select_best_ties_and_no_correct():
    tied = [rec(1, 7, correct=True, compile=1.5, sample=3),
            rec(1, 7, correct=True, compile=1.5, sample=1)]
    assert select_best(tied)["sample"] == 1
    failed = [rec(1, 7, sample=2), rec(1, 7, status="timeout", sample=0), rec(1, 7, sample=1)]
    assert select_best(failed)["sample"] == 0


def test_errors():
    with pytest.raises(ValueError):
        select_best([])
    with pytest.raises(ValueError):
        select_best([rec(1, 1), rec(1, 2)])
    with pytest.raises(ValueError, match="duplicate"):
        level_metrics(1, [rec(1, 1), rec(1, 1)], problems=5)
    with pytest.raises(ValueError):
        level_metrics(1, L1, problems=3)
    with pytest.raises(ValueError, match="level"):
        level_metrics(1, [rec(2, 1)])
    with pytest.raises(ValueError):
        level_metrics(1, [rec(1, 1, correct=True, eager=0.0, compile=1.0)])
    with pytest.raises(ValueError):
        overall_metrics([])


def test_fast_p_curve():
    assert fast_p_curve(L1, 5, "eager", [0.0, 1.0, 1.9, 2.0]) == pytest.approx([0.6, 0.4, 0.2, 0.0])
    assert fast_p_curve([], 4, "compile", [0.0]) == [0.0]
    with pytest.raises(ValueError):
        fast_p_curve(L1, 5, "cudnn", [0.0])


def test_metrics_round_trip_through_json():
    m = level_metrics(1, L1, problems=5)
    assert Metrics.from_dict(json.loads(json.dumps(m.to_dict()))) == m
    assert set(m.to_dict()["fast_p"]["eager"]) == {"0.0", "0.5", "0.8", "1.0", "1.5", "2.0"}
