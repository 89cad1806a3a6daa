"""The paper's milestone reward (Eq. 1) and its continuous variant."""

from __future__ import annotations

import pytest

from cuda_agent.judge.reward import MARGIN, beats, continuous_reward, milestone_reward, sol_reward


def test_margin_is_five_percent():
    assert MARGIN == 0.05


@pytest.mark.parametrize("correct, t, eager, compile_, expected", [
    (False, 0.1, 1.0, 1.0, -1),     # wrong is -1, however fast
    (False, None, None, None, -1),
    (True, 0.5, 1.0, 1.0, 3),       # faster than both
    (True, 0.5, 1.0, 0.4, 2),       # faster than eager only
    (True, 1.0, 1.0, 2.0, 1),       # faster than compile only: still 1
    (True, 1.0, 1.0, 1.0, 1),       # as fast as both
    (True, 2.0, 1.0, 1.0, 1),       # slower than both
    (True, 94.0, 100.0, 100.0, 3),  # 6% faster than both
    (True, 95.0, 100.0, 100.0, 1),  # exactly 5% faster is not "faster"
    (True, 19.0, 20.0, 20.0, 1),    # exactly 5% again, other exact numbers
    (True, 9.5, 10.0, 10.0, 1),
    (True, 95.0, 100.0, 94.0, 1),
    (True, 90.0, 100.0, 95.0, 3),   # the margin is relative to each baseline: (95 - 90) / 95 > 5%
    (True, 90.0, 100.0, 93.0, 2),   # (93 - 90) / 93 < 5%
])
def test_milestone_reward_table(correct, t, eager, compile_, expected):
    assert milestone_reward(correct, t, eager, compile_) == expected


def test_verify_only_correct_gets_one():
    assert milestone_reward(True, None, None, None) == 1
    assert milestone_reward(True, 0.5, None, None) == 1


def test_missing_compile_baseline_caps_at_two():
    assert milestone_reward(True, 0.5, 1.0, None) == 2


def test_custom_margin():
    assert milestone_reward(True, 0.85, 1.0, 1.0, margin=0.1) == 3
    assert milestone_reward(True, 0.95, 1.0, 1.0, margin=0.1) == 1
    assert milestone_reward(True, 1.0, 1.0, 1.0, margin=-0.01) == 3  # "not slower by 1%"


def test_beats_requires_strictly_more_than_the_margin():
    assert beats(94.0, 100.0) and not beats(95.0, 100.0) and not beats(96.0, 100.0)
    assert not beats(0.5, 0.0)  # no baseline time: nothing to beat


def test_continuous_reward():
    assert continuous_reward(True, 0.5, 1.0) == 2.0
    assert continuous_reward(True, 2.0, 1.0) == 0.5
    assert continuous_reward(False, 0.5, 1.0) == -1.0
    assert continuous_reward(True, None, 1.0) == -1.0  # not timed
    assert continuous_reward(True, 0.5, None) == -1.0


def test_a_withheld_speedup_pays_the_correct_but_not_faster_reward():
    # The judge gives no candidate time where it claims no speedup (an unsettled baseline, a time it
    # cannot pin down): times that would pay 3 then pay 1, as the verdict's reason says.
    from cuda_agent.judge.baselines import baseline_stats
    from cuda_agent.judge.timing import TimingStats
    from cuda_agent.judge.verdict import Verdict, speedup_withheld

    def baseline(*medians):
        return baseline_stats([TimingStats.from_samples([m] * 20) for m in medians], 0.08, len(medians), 0.03)

    candidate = TimingStats.from_samples([149.5] * 20)
    v = Verdict(status="ok", correct=True, backend="cpu",
                timings={"candidate": candidate, "eager": baseline(3590.0, 1827.0), "compile": baseline(174.7)})
    measured = milestone_reward(True, candidate.median_ms, v.timings["eager"].median_ms, v.timings["compile"].median_ms)
    assert measured == 3 and speedup_withheld(v)
    assert milestone_reward(True, None, v.timings["eager"].median_ms, v.timings["compile"].median_ms) == 1


def test_sol_reward_is_the_share_of_the_gap_closed_within_zero_and_one():
    assert sol_reward(False, 0.9) == -1.0
    assert sol_reward(True, None) == 0.0  # correct, with no measured share (no roofline, no paid time)
    assert sol_reward(True, 0.5) == 0.5
    assert sol_reward(True, 1.3) == 1.0 and sol_reward(True, -0.1) == 0.0
