"""Timing statistics, and the judge's cross-check of reported timings against its own clock."""

from __future__ import annotations

import math

import pytest

from cuda_agent.errors import ConfigError
from cuda_agent.judge.config import TimingConfig
from cuda_agent.judge.process_tree import machine_stall_ms, stalled_fraction
from cuda_agent.judge.timing import (Session, TimingStats, consistency_problem, integrity_problem, load_excuse,
                                     resolution_problem)


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
def session(host, go=None, device=(), prepare=(), window=None, call=None):
    return Session(host_ms=list(host), go_ms=list(go if go is not None else [h + 0.05 for h in host]),
                   device_ms=list(device), prepare_ms=list(prepare),
                   window_ms=list(window if window is not None else [0.0] * len(device)),
                   call_ms=list(call if call is not None else [0.0] * len(host)))


def calls(n: int, host: float, go: float, prepare: float, waits: tuple[float, float] | None = None,
          judge_waits: tuple[float, float] | None = None) -> Session:
    """``n`` calls alike; ``waits``: each prepare and go step's counted waiting for a CPU of the
    worker (None: the kernel counted none); ``judge_waits``: the same of the judge's thread."""
    s = session([host] * n, go=[go] * n, prepare=[prepare] * n)
    if waits is not None:
        s.prepare_wait_ms, s.go_wait_ms = [waits[0]] * n, [waits[1]] * n
    if judge_waits is not None:
        s.judge_prepare_wait_ms, s.judge_go_wait_ms = [judge_waits[0]] * n, [judge_waits[1]] * n
    return s


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
    assert problem == "a call reported 2.000 ms on the device after a wait of 0.000 ms, but 1.000 ms on the host"
    assert consistency_problem(session([1.0], device=[1.1])) is None  # within 5% + 0.05 ms


def test_the_window_and_the_device_time_both_fit_in_the_host_time():
    # 0.5 ms of waiting before a 0.4 ms call fits in 1.0 ms on the host; 0.8 ms of waiting does not.
    assert consistency_problem(session([1.0], device=[0.4], window=[0.5])) is None
    assert "after a wait of 0.800 ms" in consistency_problem(session([1.0], device=[0.4], window=[0.8]))


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


def test_cpu_the_candidate_used_while_it_was_not_timed_is_caught():
    reference = session([2.0] * 10, go=[2.1] * 10, prepare=[1.0] * 10)
    honest = session([2.0] * 50, go=[2.1] * 50, prepare=[1.0] * 50)
    honest.background_cpu_ms = [0.003, 0.01, 0.0, 0.05] * 10
    assert integrity_problem(honest, reference, backend="cpu") is None
    precomputing = session([0.1] * 50, go=[0.2] * 50, prepare=[1.0] * 50)
    precomputing.background_cpu_ms = [20.0] * 50
    problem = integrity_problem(precomputing, reference, backend="cpu")
    assert "20.000 ms of CPU per call while it was not being timed" in problem
    # Work on every other call is work all the same: the mean counts it.
    precomputing.background_cpu_ms = [0.0, 0.5] * 25
    assert "0.250 ms of CPU per call" in integrity_problem(precomputing, reference, backend="cpu")
    # A share of a long call is allowed: 2% of 100 ms, plus 0.1 ms.
    slow = session([100.0] * 50, go=[100.1] * 50, prepare=[1.0] * 50)
    slow.background_cpu_ms = [2.0] * 50
    assert integrity_problem(slow, reference, backend="cpu") is None
    slow.background_cpu_ms = [2.2] * 50
    assert "at most 2.100 ms" in integrity_problem(slow, reference, backend="cpu")


def test_stats_from_a_session_carry_the_judges_overheads():
    stats = TimingStats.from_session(session([1.0, 2.0, 3.0], go=[1.1, 2.1, 3.1], prepare=[0.5, 0.6, 0.7]))
    assert stats.median_ms == 2.0
    assert stats.prepare_median_ms == pytest.approx(0.6)
    assert stats.channel_median_ms == pytest.approx(0.1)


def test_timing_config_key_changes_with_every_setting():
    base = TimingConfig()
    keys = {base.key(), TimingConfig(warmup_calls=1).key(), TimingConfig(min_calls=1).key(),
            TimingConfig(max_calls=1).key(), TimingConfig(target_seconds=0.5).key(),
            TimingConfig(flush_cache=False).key(), TimingConfig(cpu_threads=4).key(),
            TimingConfig(precision=0.05).key(), TimingConfig(baseline_sessions=3).key(),
            TimingConfig(max_uncertainty=0.2).key(), TimingConfig(flush_bytes=1 << 24).key()}
    assert len(keys) == 11
    assert TimingConfig().key() == base.key()


def test_the_flush_reads_twice_the_cache_or_the_bytes_asked_for():
    from cuda_agent.judge.worker_main import flush_lengths

    mib = 1 << 20
    assert flush_lengths({}, 300 * mib) == (600 * mib // 4, 0)
    assert flush_lengths({"private_cache_bytes": 4 * mib}, 300 * mib) == (600 * mib // 4, 8 * mib // 4)
    assert flush_lengths({"flush_bytes": 16 * mib, "private_cache_bytes": 4 * mib}, 300 * mib) == (4 * mib, 2 * mib)
    assert flush_lengths({"flush_bytes": 4 * mib, "private_cache_bytes": 4 * mib}, 300 * mib) == (mib, mib)
    with pytest.raises(ConfigError, match="flush_bytes"):
        TimingConfig(flush_bytes=100)


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


def test_steps_longer_only_by_waiting_for_a_cpu_are_excused_and_nothing_else_is():
    # Under load the scheduler made the candidate's worker wait 9 ms in each prepare step and
    # the reference's not at all: the kernel's count of that waiting explains the longer step.
    reference = calls(20, 2.0, go=2.1, prepare=1.0, waits=(0.0, 0.0))
    waited = calls(20, 2.0, go=2.1, prepare=10.0, waits=(9.0, 0.0))
    problem = integrity_problem(waited, reference)
    assert "outside the timed calls" in problem
    excuse = load_excuse(problem, waited, [reference])
    assert excuse.startswith(problem) and "waited 9.000 ms each for a CPU" in excuse and "too loaded" in excuse
    # On a quiet machine (a wake-up's waiting, no stall), the same longer step while the worker
    # was running all along is work: no excuse.
    worked = calls(20, 2.0, go=2.1, prepare=10.0, waits=(0.2, 0.0))
    assert load_excuse(integrity_problem(worked, reference), worked, [reference], pressure=0.01) is None
    # A channel longer than the waiting explains, or waits the kernel did not count: no excuse.
    faked = calls(20, 0.001, go=20.0, prepare=1.0, waits=(0.0, 0.3))
    assert load_excuse(integrity_problem(faked, reference), faked, [reference]) is None
    uncounted = calls(20, 2.0, go=2.1, prepare=10.0)
    assert load_excuse(integrity_problem(uncounted, reference), uncounted, [reference]) is None


def test_a_reply_the_judge_saw_late_because_it_waited_for_a_cpu_is_excused():
    # Measured on two cores with another process busy 4 ms in every 10: the candidate's go steps
    # ran about 5 ms longer than its clock said while its worker never waited, and the judge's
    # own thread had waited as long for a CPU in each of them; its reply was read late.
    reference = calls(20, 2.0, go=2.4, prepare=1.0, waits=(0.0, 0.0), judge_waits=(0.0, 0.0))
    seen_late = calls(20, 2.0, go=7.4, prepare=1.0, waits=(0.0, 0.0), judge_waits=(0.0, 5.0))
    problem = integrity_problem(seen_late, reference)
    assert "longer than the candidate's own clock says" in problem
    excuse = load_excuse(problem, seen_late, [reference])
    assert excuse.startswith(problem) and "the judge timing them 5.000 ms" in excuse
    # The same channel with a judge that was running all along is hidden time: refused.
    not_waited = calls(20, 2.0, go=7.4, prepare=1.0, waits=(0.0, 0.0), judge_waits=(0.0, 0.1))
    assert load_excuse(integrity_problem(not_waited, reference), not_waited, [reference]) is None


def test_a_step_that_waited_may_lose_twice_its_wait_and_a_stalled_machine_withholds():
    # A step that waited for a CPU then runs on a cold core, read by a judge that may have waited
    # too: up to twice its counted waiting is excused (with no speedup paid), no more; and where
    # the machine stalled for a CPU or memory half the session, the judge cannot tell at all.
    reference = calls(20, 2.0, go=2.1, prepare=1.0, waits=(0.0, 0.0))
    cold = calls(20, 2.0, go=2.1, prepare=6.0, waits=(3.0, 0.0))
    problem = integrity_problem(cold, reference)
    assert "waited 3.000 ms each for a CPU" in load_excuse(problem, cold, [reference])
    # 20 ms hidden in each call, 2.7 ms of waiting (an attack seen so): refused.
    faked = calls(20, 0.001, go=21.5, prepare=1.0, waits=(0.0, 2.7))
    problem = integrity_problem(faked, reference)
    assert load_excuse(problem, faked, [reference]) is None
    assert load_excuse(problem, faked, [reference], pressure=0.45) is None
    excuse = load_excuse(problem, faked, [reference], pressure=0.6)
    assert excuse.startswith(problem) and "stalled for a CPU or memory 60% of the time" in excuse
    # CPU the candidate's own threads used between its steps is not load: never excused.
    busy = calls(20, 2.0, go=2.1, prepare=1.0, waits=(5.0, 5.0))
    busy.background_cpu_ms = [3.0] * 20
    problem = integrity_problem(busy, reference, backend="cpu")
    assert "a thread of its own" in problem
    assert load_excuse(problem, busy, [reference], backend="cpu", pressure=0.9) is None


def test_the_machines_stall_is_read_from_the_kernel_where_it_keeps_one():
    before = machine_stall_ms()
    if before is None:
        pytest.skip("this kernel keeps no pressure-stall counts (PSI)")
    assert len(before) == 2 and all(b >= 0 for b in before)
    after = [b + 50.0 for b in before[:1]] + [before[1] + 200.0]
    assert stalled_fraction(before, after, 1.0) == pytest.approx(0.2)
    assert stalled_fraction(before, None, 1.0) is None


def test_a_machine_too_loaded_to_bound_hidden_time_claims_nothing():
    # 20 ms hidden in every call passes the channel check when the reference's own channel is
    # 12 ms (the allowance is a multiple of it): such a machine cannot pay a speedup at all.
    loaded = session([0.3] * 10, go=[12.3] * 10)
    faked = session([0.002] * 10, go=[20.0] * 10)
    assert integrity_problem(faked, loaded, backend="cpu") is None
    assert "too loaded" in resolution_problem([loaded])
    # A quiet attempt among them is enough; a quiet machine, or a long channel that a large
    # output's copy explains (its call is long too), is not loaded.
    quiet = session([0.3] * 10, go=[1.1] * 10)
    assert resolution_problem([loaded, quiet]) is None
    assert resolution_problem([session([20.0] * 10, go=[28.0] * 10)]) is None
    assert resolution_problem([]) is None


def test_the_cpu_backend_allows_wider_overheads_for_host_memory_work():
    # Measured for an honest 64 MB output on the CPU backend: prepare 1.5x, channel 2.3x.
    reference = session([2.0] * 10, go=[6.4] * 10, prepare=[50.0] * 10)
    honest = session([10.0] * 50, go=[20.0] * 50, prepare=[75.0] * 50)
    assert integrity_problem(honest, reference, backend="cpu") is None
    assert "longer than the candidate's own clock says" in integrity_problem(honest, reference, backend="cuda")
    hidden = session([10.0] * 50, go=[10.1] * 50, prepare=[120.0] * 50)
    assert "outside the timed calls" in integrity_problem(hidden, reference, backend="cpu")


def test_the_cpu_backend_lets_a_long_calls_steps_exceed_the_references_by_a_share_of_it():
    # Measured for an honest 95 ms call beside a 3.5 ms reference call: its next prepare step
    # 1.5-10 ms longer, its channel 2-3 ms longer (the host evicts a worker's data while it computes).
    reference = session([3.5] * 10, go=[4.5] * 10, prepare=[2.0] * 10)
    honest = session([95.0] * 10, go=[98.5] * 10, prepare=[8.0] * 10)
    assert integrity_problem(honest, reference, backend="cpu") is None
    # On cuda the share is not given: there the same steps are not compared with a long call's.
    assert integrity_problem(honest, reference, backend="cuda") is not None
    # Allowed: 2x the reference's prepare (so 2 ms more), 0.1 ms, and 5% of the 95 ms call.
    moved = session([95.0] * 10, go=[96.0] * 10, prepare=[2.0 + 2.0 + 0.1 + 4.75 + 0.2] * 10)
    assert "at most 6.850 ms" in integrity_problem(moved, reference, backend="cpu")
    # Work moved out of a call shortens the call the share is taken of: a short call gets little.
    hidden = session([5.0] * 10, go=[6.0] * 10, prepare=[12.0] * 10)
    assert "outside the timed calls" in integrity_problem(hidden, reference, backend="cpu")
    forged = session([50.0] * 10, go=[98.5] * 10, prepare=[2.0] * 10)
    assert "longer than the candidate's own clock says" in integrity_problem(forged, reference, backend="cpu")


# -- the figure: device time behind a window (cuda), host time (cpu) ------------------------------
def test_the_figure_is_device_time_where_there_is_a_device():
    cuda = session([0.30, 0.31, 0.29], device=[0.010, 0.011, 0.012], window=[0.25] * 3, call=[0.04] * 3)
    stats = TimingStats.from_session(cuda)
    assert stats.method == "device_events"
    assert stats.median_ms == pytest.approx(0.011) and stats.device_median_ms == pytest.approx(0.011)
    assert stats.host_median_ms == pytest.approx(0.30) and stats.window_ms == pytest.approx(0.25)
    # host beyond window (0.25), device and host path: the launch and wake-up latency
    assert stats.gap_median_ms == pytest.approx(0.30 - 0.25 - 0.010)  # the median of each call's gap
    cpu = TimingStats.from_session(session([2.0, 3.0, 4.0]))
    assert cpu.method == "host_clock" and cpu.median_ms == 3.0 and cpu.gap_median_ms is None


def test_time_outside_the_events_is_caught_by_the_gap():
    # The reference's host clock runs 0.02 ms beyond window and device time; a candidate whose
    # calls leave 0.5 ms unexplained (work on a stream the events do not see) fails.
    reference = session([0.32] * 20, device=[0.05] * 20, window=[0.25] * 20, call=[0.03] * 20)
    honest = session([0.33] * 50, device=[0.06] * 50, window=[0.25] * 50, call=[0.02] * 50)
    hidden = session([0.81] * 50, device=[0.06] * 50, window=[0.25] * 50, call=[0.02] * 50)
    assert integrity_problem(honest, reference) is None
    assert "outside the timed events" in integrity_problem(hidden, reference)


def test_a_host_path_longer_than_the_window_is_not_a_gap():
    # The call's own host path (0.6 ms) outlasted the 0.25 ms window: the device idled, and the
    # events counted that, so nothing is unexplained.
    reference = session([0.32] * 20, device=[0.05] * 20, window=[0.25] * 20, call=[0.03] * 20)
    slow_host = session([0.68] * 50, device=[0.40] * 50, window=[0.25] * 50, call=[0.60] * 50)
    assert slow_host.gap_ms[0] < 0.1
    assert integrity_problem(slow_host, reference) is None


def test_the_window_covers_the_warm_up_host_path():
    from cuda_agent.judge.timing import WINDOW_MAX_MS, WINDOW_MIN_MS, window_for

    assert window_for([5.0, 0.2, 0.1, 0.12]) == pytest.approx(2 * 0.12 + 0.02)  # the last three calls' median
    assert window_for([0.1, 0.1, 9.0]) == pytest.approx(2 * 0.1 + 0.02)  # one slow call does not set it
    assert window_for([0.001]) == WINDOW_MIN_MS
    assert window_for([1000.0]) == WINDOW_MAX_MS


def test_median_interval_shrinks_with_calls_and_grows_with_noise():
    import random

    from cuda_agent.judge.timing import median_interval

    rng = random.Random(0)
    quiet = [1.0 + rng.gauss(0, 0.01) for _ in range(100)]
    noisy = [1.0 + abs(rng.gauss(0, 0.5)) for _ in range(100)]
    assert median_interval(quiet) < 0.005
    assert median_interval(noisy) > 0.05
    assert median_interval(quiet[:20]) > median_interval(quiet)
    assert median_interval([1.0, 1.0]) == math.inf  # too few calls to say


def test_an_imprecise_median_is_not_believed():
    from cuda_agent.judge.timing import stability_problem

    stats = TimingStats.from_samples([1.0, 1.5, 0.7, 2.0, 1.1, 0.9, 1.8, 0.6] * 3)
    assert stability_problem(stats, max_uncertainty=0.05) is not None
    assert "too noisy" in stability_problem(stats, max_uncertainty=0.05)
    assert stability_problem(stats, max_uncertainty=2.0) is None


def test_baseline_sessions_settle_when_their_medians_agree():
    from cuda_agent.judge.baselines import baseline_stats, settled

    def s(median):
        return TimingStats.from_samples([median] * 20)

    agree, apart = [s(1.00), s(1.01)], [s(1.00), s(1.30)]
    assert not settled([s(1.0)], 0.02, 2, 5)
    assert settled(agree, 0.02, 2, 5)
    assert not settled(apart, 0.02, 2, 5)
    assert settled(apart + [s(1.1), s(1.2), s(1.05)], 0.02, 2, 5)  # the most sessions there will be
    assert settled([s(1.0)], 0.02, 1, 5)
    pooled = baseline_stats(apart + [s(1.02)], 0.02, fresh=1)
    assert pooled.median_ms == pytest.approx(1.02) and pooled.sessions_ms == [1.0, 1.3, 1.02]
    assert pooled.stable is False and pooled.source == "measured"
    assert baseline_stats(agree, 0.02, fresh=0).stable is True
    assert baseline_stats(agree, 0.02, fresh=0).source == "cache"


def test_a_pooled_baseline_keeps_its_median_inside_its_range():
    # Two sessions: the pooled median lies between theirs, outside the range of either one.
    low = TimingStats.from_samples([0.30, 0.33, 0.36] * 5)
    high = TimingStats.from_samples([0.55, 0.59, 0.62] * 5)
    pooled = TimingStats.pooled([low, high])
    assert pooled.median_ms == pytest.approx(0.46)
    assert pooled.min_ms == pytest.approx(0.30) and pooled.max_ms == pytest.approx(0.62)
    assert pooled.min_ms <= pooled.p25_ms <= pooled.median_ms <= pooled.p75_ms <= pooled.max_ms
    assert pooled.calls == 30 and pooled.mean_ms == pytest.approx((low.mean_ms + high.mean_ms) / 2)


def test_a_reference_far_from_its_baseline_means_the_machine_changed():
    from cuda_agent.judge.timing import DRIFT_TOLERANCE, drift_problem

    eager = TimingStats.from_samples([1.0] * 20)
    assert drift_problem(TimingStats.from_samples([1.05] * 20), eager, DRIFT_TOLERANCE["cuda"]) is None
    assert "not in the state" in drift_problem(TimingStats.from_samples([1.3] * 20), eager, DRIFT_TOLERANCE["cuda"])
    assert "not in the state" in drift_problem(TimingStats.from_samples([0.8] * 20), eager, DRIFT_TOLERANCE["cuda"])
    assert drift_problem(TimingStats.from_samples([1.3] * 20), eager, DRIFT_TOLERANCE["cpu"]) is None
    assert drift_problem(TimingStats.from_samples([1.3] * 20), None, DRIFT_TOLERANCE["cuda"]) is None


def test_load_that_hits_both_processes_is_not_hidden_work():
    # Interleaved calls: each pair saw the same burst of load (0 to 8 ms, at random), so the
    # candidate's overheads are as noisy as the reference's but no larger: it passes. The same
    # candidate with 3 ms of work hidden in every call's channel does not.
    import random

    rng = random.Random(1)
    bursts = [rng.choice([0.0, 0.0, 0.5, 3.0, 8.0]) for _ in range(80)]
    ref = Session(host_ms=[1.0] * 80, go_ms=[1.3 + b for b in bursts], prepare_ms=[2.0 + b for b in bursts[::-1]])
    cand_bursts = [b + rng.uniform(-0.2, 0.2) for b in bursts]
    honest = Session(host_ms=[0.5] * 80, go_ms=[0.8 + b for b in cand_bursts],
                     prepare_ms=[2.0 + b for b in cand_bursts[::-1]])
    assert integrity_problem(honest, ref, backend="cpu") is None
    hidden = Session(host_ms=[0.5] * 80, go_ms=[0.8 + 3.0 + b for b in cand_bursts],
                     prepare_ms=[2.0 + b for b in cand_bursts[::-1]])
    assert "longer than the candidate's own clock says" in integrity_problem(hidden, ref, backend="cpu")
