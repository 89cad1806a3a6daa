"""Timing statistics, and the judge's cross-check of reported timings against its own clock."""

from __future__ import annotations

import math

import pytest

from cuda_agent.judge.config import TimingConfig
from cuda_agent.judge.timing import Session, TimingStats, consistency_problem, integrity_problem


def test_stats_from_samples():
    stats = TimingStats.from_samples([4.0, 1.0, 3.0, 2.0, 5.0])
    assert stats.median_ms == 3.0
    assert stats.mean_ms == 3.0
    assert stats.min_ms == 1.0 and stats.max_ms == 5.0
    assert stats.p25_ms == 2.0 and stats.p75_ms == 4.0
    assert stats.std_ms == pytest.approx(math.sqrt(2.0))
    assert stats.calls == 5
    assert stats.device_median_ms is None
    assert stats.source == "measured"
    assert stats.spread == pytest.approx((4.0 - 2.0) / 3.0)


def test_even_count_median_and_device_median():
    stats = TimingStats.from_samples([1.0, 2.0, 3.0, 10.0], device_ms=[0.5, 0.7, 0.9, 5.0])
    assert stats.median_ms == 2.5
    assert stats.device_median_ms == pytest.approx(0.8)


def test_a_single_sample():
    stats = TimingStats.from_samples([2.5])
    assert stats.median_ms == stats.min_ms == stats.max_ms == stats.p25_ms == stats.p75_ms == 2.5
    assert stats.std_ms == 0.0 and stats.spread == 0.0 and stats.calls == 1


def test_no_samples_is_an_error():
    with pytest.raises(ValueError):
        TimingStats.from_samples([])


def test_median_resists_outliers():
    stats = TimingStats.from_samples([1.0] * 9 + [1000.0])
    assert stats.median_ms == 1.0 and stats.max_ms == 1000.0


def test_dict_round_trip_ignores_derived_fields():
    stats = TimingStats.from_samples([1.0, 2.0, 3.0], [0.5, 0.5, 0.5])
    data = stats.to_dict()
    assert data["spread"] == pytest.approx(stats.spread)
    assert TimingStats.from_dict(data) == stats
    assert TimingStats.from_dict({**data, "unknown": 1}) == stats


def test_zero_median_has_infinite_spread():
    assert TimingStats(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1).spread == float("inf")


# -- consistency with the judge's own clock ----------------------------------------------------
def session(host, go=None, device=(), prepare=()):
    return Session(host_ms=list(host), go_ms=list(go if go is not None else [h + 0.05 for h in host]),
                   device_ms=list(device), prepare_ms=list(prepare))


def test_plausible_timings_pass():
    assert consistency_problem(session([1.0, 1.1, 0.9])) is None
    assert consistency_problem(session([1.0, 1.0], device=[0.8, 1.0])) is None


def test_no_calls_is_a_problem():
    assert consistency_problem(Session()) == "no timed calls were reported"


def test_non_positive_durations_are_refused():
    assert "non-positive" in consistency_problem(session([1.0, 0.0]))
    assert "non-positive" in consistency_problem(session([1.0, -2.0]))
    assert "non-positive" in consistency_problem(session([float("nan")], go=[1.0]))


def test_a_call_cannot_outlast_the_judges_step_around_it():
    problem = consistency_problem(session([5.0], go=[1.0]))
    assert problem == "a call reported 5.000 ms inside a step the judge measured at 1.000 ms"
    assert consistency_problem(session([1.01], go=[1.0])) is None  # 0.02 ms of clock slack


def test_device_time_cannot_exceed_host_time():
    problem = consistency_problem(session([1.0, 1.0], device=[0.9, 2.0]))
    assert problem == "a call reported 2.000 ms on the device but 1.000 ms on the host"
    assert consistency_problem(session([1.0], device=[1.1])) is None  # within 5% + 0.05 ms


def test_honest_overheads_pass_the_integrity_check():
    reference = session([2.0] * 10, go=[2.1] * 10, prepare=[1.0] * 10)
    candidate = session([1.0] * 50, go=[1.12] * 50, prepare=[1.1] * 50)
    assert integrity_problem(candidate, reference) is None


def test_time_the_candidates_clock_did_not_count_is_caught():
    reference = session([2.0] * 10, go=[2.1] * 10, prepare=[1.0] * 10)
    faked = session([0.001] * 50, go=[20.0] * 50, prepare=[1.0] * 50)
    assert "longer than the candidate's own clock says" in integrity_problem(faked, reference)


def test_work_in_the_prepare_step_is_caught():
    reference = session([2.0] * 10, go=[2.1] * 10, prepare=[1.0] * 10)
    hidden = session([0.1] * 50, go=[0.2] * 50, prepare=[21.0] * 50)
    assert "outside the timed calls" in integrity_problem(hidden, reference)


def test_stats_from_a_session_carry_the_judges_overheads():
    stats = TimingStats.from_session(session([1.0, 2.0, 3.0], go=[1.1, 2.1, 3.1], prepare=[0.5, 0.6, 0.7]))
    assert stats.median_ms == 2.0
    assert stats.prepare_median_ms == pytest.approx(0.6)
    assert stats.channel_median_ms == pytest.approx(0.1)


def test_timing_config_key_changes_with_every_setting():
    base = TimingConfig()
    keys = {base.key(), TimingConfig(warmup_calls=1).key(), TimingConfig(min_calls=1).key(),
            TimingConfig(max_calls=1).key(), TimingConfig(target_seconds=0.5).key(),
            TimingConfig(flush_cache=False).key(), TimingConfig(cpu_threads=4).key()}
    assert len(keys) == 7
    assert TimingConfig().key() == base.key()


def test_several_references_hold_the_candidate_to_the_smallest_overheads():
    # A noisy calibration (prepare 4 ms) would let 2 ms of hidden work through; a quiet one
    # from another attempt (1 ms) does not: timing again can only tighten the bound.
    quiet = session([2.0] * 10, go=[2.1] * 10, prepare=[1.0] * 10)
    noisy = session([2.0] * 10, go=[2.9] * 10, prepare=[4.0] * 10)
    candidate = session([1.0] * 50, go=[1.1] * 50, prepare=[2.0] * 50)
    assert integrity_problem(candidate, noisy) is None
    assert "outside the timed calls" in integrity_problem(candidate, [noisy, quiet])
    assert "longer than the candidate's own clock says" in integrity_problem(
        session([1.0] * 50, go=[1.5] * 50, prepare=[1.0] * 50), [noisy, quiet])


def test_the_cpu_backend_allows_wider_overheads_for_host_memory_work():
    # Measured for an honest 64 MB output on the CPU backend: prepare 1.5x, channel 2.3x.
    reference = session([2.0] * 10, go=[6.4] * 10, prepare=[50.0] * 10)
    honest = session([10.0] * 50, go=[20.0] * 50, prepare=[75.0] * 50)
    assert integrity_problem(honest, reference, backend="cpu") is None
    assert "longer than the candidate's own clock says" in integrity_problem(honest, reference, backend="cuda")
    hidden = session([10.0] * 50, go=[10.1] * 50, prepare=[120.0] * 50)
    assert "outside the timed calls" in integrity_problem(hidden, reference, backend="cpu")
