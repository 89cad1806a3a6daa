"""The verdict: fixed JSON fields, round trips, and feedback text for each outcome."""

from __future__ import annotations

import json

import pytest

from cuda_agent.judge.correctness import CheckResult
from cuda_agent.judge.timing import TimingStats
from cuda_agent.judge.baselines import baseline_stats
from cuda_agent.judge.verdict import (STATUSES, Verdict, Violation, compile_speedup_withheld, render_feedback,
                                      speedup_withheld, timing_setting)

FIXED_FIELDS = ("status", "correct", "reward", "speedup_vs_eager", "speedup_vs_compile", "timings",
                "violations", "checks", "feedback")


def test_statuses_are_the_documented_ones():
    assert STATUSES == ("ok", "compile_error", "forbidden", "runtime_error", "timeout", "incorrect")


def test_unknown_status_is_refused():
    with pytest.raises(ValueError, match="unknown status"):
        Verdict(status="passed")


def test_defaults_fail_closed():
    v = Verdict(status="ok")
    assert v.correct is False and v.reward == -1
    assert v.speedup_vs_eager is None and v.speedup_vs_compile is None
    assert v.timings == {"candidate": None, "eager": None, "compile": None}


def test_json_has_the_fixed_fields_and_round_trips():
    stats = TimingStats.from_samples([1.0, 2.0, 3.0])
    v = Verdict(status="forbidden", timings={"candidate": stats, "eager": stats, "compile": None},
                violations=[Violation("aten-compute", "model_new.py", 12, "calls torch.matmul")],
                checks=[CheckResult(index=0, passed=True, max_abs_error=0.0, max_rel_error=0.0,
                                    elements=4)],
                notes=["a note"], settings={"timing": {"warmup_calls": 2}})
    v.feedback = render_feedback(v)
    data = json.loads(v.to_json())
    for key in FIXED_FIELDS:
        assert key in data
    assert data["timings"]["candidate"]["spread"] == pytest.approx(stats.spread)
    assert data["timings"]["compile"] is None
    assert data["violations"][0] == {"rule": "aten-compute", "file": "model_new.py", "line": 12,
                                     "message": "calls torch.matmul"}
    restored = Verdict.from_dict(data)
    assert restored == v
    assert Verdict.from_dict({**data, "a_field_from_the_future": 1}) == v


def test_feedback_for_each_outcome():
    compile_error = Verdict(status="compile_error", error="kernels/k.cpp:3: error: boom")
    assert render_feedback(compile_error) == "compile error:\nkernels/k.cpp:3: error: boom"

    forbidden = Verdict(status="forbidden", violations=[Violation("r", "kernels/k.cpp", None, "no")])
    assert render_feedback(forbidden).splitlines() == ["rejected: the solution breaks the rules",
                                                       "  kernels/k.cpp: [r] no"]

    crash = Verdict(status="runtime_error", error="killed by SIGSEGV", details="log line")
    assert render_feedback(crash) == "runtime error: killed by SIGSEGV\n\nlog line"
    assert render_feedback(Verdict(status="timeout", error="too slow")) == "timeout: too slow"

    bad = CheckResult(index=1, passed=False, max_abs_error=2.0, max_rel_error=1.0, elements=8,
                      mismatched=3, message="output: 3 of 8 values outside")
    incorrect = Verdict(status="incorrect", checks=[CheckResult(index=0, passed=True, elements=8), bad])
    assert render_feedback(incorrect).splitlines() == [
        "incorrect: 1 of 2 checks failed",
        "  check 2: output: 3 of 8 values outside",
        "  max abs error 2, max rel error 1",
    ]


def test_feedback_of_a_correct_timed_candidate():
    fast = TimingStats.from_samples([1.0])
    slow = TimingStats.from_samples([2.0])
    v = Verdict(status="ok", correct=True, reward=3, speedup_vs_eager=2.0, speedup_vs_compile=2.0,
                timings={"candidate": fast, "eager": slow, "compile": slow},
                checks=[CheckResult(index=i, passed=True, max_abs_error=0.001 * i) for i in range(5)],
                notes=["hello"])
    lines = render_feedback(v).splitlines()
    assert lines[0] == "correct: 5/5 checks passed (max abs error 0.004)"
    assert lines[1] == "candidate 1 ms  eager 2 ms (2.00x)  torch.compile 2 ms (2.00x)"
    assert lines[2] == "reward 3: more than 5% faster than eager and torch.compile"
    assert lines[3] == "note: hello"


@pytest.mark.parametrize("field, value, why", [
    ("timing_integrity", {"stable": False}, "not stable enough"),
    ("precision", {"reduced": True, "unmeasured": None}, "less precision"),
    ("precision", {"reduced": False, "unmeasured": "the float64 run ran out of memory"}, "could not be measured"),
])
def test_a_speedup_is_withheld_for_each_reason_and_the_feedback_says_it(field, value, why):
    v = Verdict(status="ok", correct=True, reward=1, **{field: value},
                timings={"candidate": TimingStats.from_samples([1.0]), "eager": None, "compile": None})
    assert why in speedup_withheld(v)
    v.speedup_withheld = speedup_withheld(v)
    assert f"reward 1: correct, but {v.speedup_withheld}" in render_feedback(v)
    assert speedup_withheld(Verdict(status="ok", correct=True, timing_integrity={"stable": True})) is None


def _settled(median: float) -> TimingStats:
    return baseline_stats([TimingStats.from_samples([median] * 20)], 0.08, fresh=1, precision=0.03)


def _unsettled(*medians: float) -> TimingStats:
    return baseline_stats([TimingStats.from_samples([m] * 20) for m in medians], 0.08, fresh=len(medians),
                          precision=0.03)


def test_no_speedup_is_claimed_over_a_baseline_that_did_not_settle():
    # The reported case: eager's sessions 3590 and 1827 ms apart; the candidate "beats" it.
    v = Verdict(status="ok", correct=True, backend="cpu", settings={"timing": {"baseline_tolerance": None}},
                timings={"candidate": TimingStats.from_samples([150.0] * 20), "eager": _unsettled(3590.0, 1827.0),
                         "compile": _settled(174.7)})
    why = speedup_withheld(v)
    assert why == ("the eager baseline is unsettled: its median moved 32.5% between the 2 fresh processes it was "
                   "timed in (1827 to 3590 ms), more than the 8% a baseline may move "
                   "(run on a quieter machine, or time for longer)")
    v.timings["compile"] = _unsettled(170.0, 260.0)
    both = speedup_withheld(v)
    assert "the eager baseline is unsettled" in both and "; the torch.compile baseline is unsettled" in both
    assert both.count("quieter machine") == 1
    v.timings["eager"], v.timings["compile"] = _settled(3590.0), _settled(174.7)
    assert speedup_withheld(v) is None


def test_an_unsettled_compile_baseline_withholds_only_the_speedup_over_compile():
    v = Verdict(status="ok", correct=True, backend="cpu", reward=2, speedup_vs_eager=2.7,
                timings={"candidate": TimingStats.from_samples([1.334] * 20), "eager": _settled(3.589),
                         "compile": _unsettled(1.654, 2.195)})
    assert speedup_withheld(v) is None  # eager settled: its milestone stands
    v.compile_speedup_withheld = compile_speedup_withheld(v)
    assert v.compile_speedup_withheld.startswith("the torch.compile baseline is unsettled: its median moved")
    assert ("reward 2: more than 5% faster than eager; no speedup over torch.compile is claimed, as the "
            "torch.compile baseline is unsettled") in render_feedback(v)
    v.timings["compile"] = _settled(1.7)
    assert compile_speedup_withheld(v) is None


def test_every_timing_reason_and_a_precision_reason_are_given_together():
    v = Verdict(status="ok", correct=True, backend="cpu", timing_integrity={"stable": False},
                precision={"reduced": True, "dtype": "float32"},
                timings={"candidate": TimingStats.from_samples([1.0] * 20), "eager": _unsettled(1.0, 2.0),
                         "compile": None})
    assert speedup_withheld(v) == (
        "the timing was not stable enough to claim a speedup; the eager baseline is unsettled: its median moved "
        "33.3% between the 2 fresh processes it was timed in (1 to 2 ms), more than the 8% a baseline may move "
        "(run on a quieter machine, or time for longer); computed in less precision than the task's float32, "
        "so no speedup is paid")


def test_a_verdicts_timing_settings_are_its_own_else_its_backends_defaults():
    v = Verdict(status="ok", backend="cuda", settings={"timing": {"precision": 0.2, "baseline_tolerance": None}})
    assert timing_setting(v, "precision") == 0.2
    assert timing_setting(v, "baseline_tolerance") == 0.02  # timing.BASELINE_TOLERANCE["cuda"]
    assert timing_setting(Verdict(status="ok"), "precision") is None  # no backend: not known


def test_violation_render():
    assert Violation("rule", "f.py", 3, "msg").render() == "f.py:3: [rule] msg"
    assert Violation("rule", "f.py", None, "msg").render() == "f.py: [rule] msg"
