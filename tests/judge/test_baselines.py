"""The baseline cache: a settled baseline is reused, an unsettled one is never taken as settled."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator

import pytest

from cuda_agent.judge import baselines as baselines_module
from cuda_agent.judge.baselines import (BaselineCache, BaselineKey, baseline_stats, settled,
                                        unsettled_reason)
from cuda_agent.judge.judge import Judge
from cuda_agent.judge.timing import TimingStats
from cuda_agent.task import load_task

KEY = BaselineKey("0" * 64, "cpu", "a cpu", "2.x", "settings")
TOLERANCE, MINIMUM, MAXIMUM, PRECISION = 0.08, 2, 4, 0.03


def session(median: float, spread: float = 0.0) -> TimingStats:
    """A session of 40 calls around ``median``, spread evenly over ``median * (1 +- spread)``."""
    return TimingStats.from_samples([median * (1 + spread * (2 * i / 39 - 1)) for i in range(40)])


def time_baseline(cache: BaselineCache, timer: Iterator[TimingStats]) -> TimingStats:
    """A judge's baseline as the profile stage takes it: the cached sessions, and more from
    ``timer`` while they have not settled, each stored as it comes."""
    sessions, fresh = cache.get(KEY, "eager"), 0
    while not settled(sessions, TOLERANCE, MINIMUM, MAXIMUM, PRECISION):
        sessions.append(next(timer))
        fresh += 1
        cache.put(KEY, "eager", sessions)
    return baseline_stats(sessions, TOLERANCE, fresh, PRECISION)


def test_a_settled_baseline_is_timed_once_and_then_read(tmp_path):
    cache = BaselineCache(tmp_path)
    first = time_baseline(cache, iter([session(10.0), session(10.1)]))
    assert first.stable is True and first.source == "measured" and first.sessions_ms == [10.0, 10.1]
    second = time_baseline(cache, iter([]))  # nothing more to time: the cached sessions settle
    assert second.stable is True and second.source == "cache"
    assert second.median_ms == first.median_ms


def test_unsettled_baselines_not_cached_as_settled(tmp_path):
    # A noisy machine: every session's median is far apart from the last. The first judge gives up
    # at the most sessions it may time; a second one times the baseline again from the start,
    # rather than reading the first's sessions as a baseline.
    cache = BaselineCache(tmp_path)
    first = time_baseline(cache, iter([session(m) for m in (100.0, 140.0, 80.0, 190.0)]))
    assert first.stable is False and len(first.sessions_ms) == MAXIMUM
    assert not settled(cache.get(KEY, "eager"), TOLERANCE, MINIMUM, MAXIMUM, PRECISION)
    second = time_baseline(cache, iter([session(120.0), session(121.0)]))
    assert second.source == "measured" and second.stable is True
    assert second.sessions_ms == [120.0, 121.0]  # the first judge's sessions are not part of it
    assert [s.median_ms for s in cache.get(KEY, "eager")] == [120.0, 121.0]


def test_a_baseline_of_imprecise_sessions_is_timed_again(tmp_path):
    # Their medians agree, but each is known only to about +-20%, not the 3% asked for.
    cache = BaselineCache(tmp_path)
    first = time_baseline(cache, iter([session(50.0, spread=0.6) for _ in range(MAXIMUM)]))
    assert first.stable is False and first.precision > PRECISION
    second = time_baseline(cache, iter([session(50.0, spread=0.6) for _ in range(MAXIMUM)]))
    assert second.source == "measured" and second.stable is False  # timed again: still unsettled
    assert len(cache.get(KEY, "eager")) == MAXIMUM  # replaced, not grown


def test_an_interrupted_judges_sessions_are_not_a_baseline(tmp_path):
    # One session stored, then the judge was stopped: too few to settle, so timed anew.
    cache = BaselineCache(tmp_path)
    cache.put(KEY, "eager", [session(10.0)])
    stats = time_baseline(cache, iter([session(12.0), session(12.1)]))
    assert stats.sessions_ms == [12.0, 12.1] and stats.source == "measured"


def test_a_cache_entry_written_before_sessions_were_marked_is_judged_by_its_sessions(tmp_path):
    # Entries store each session as timed ("measured"); read back, they are the cache's, whatever they say.
    cache = BaselineCache(tmp_path)
    cache.put(KEY, "eager", [session(m) for m in (100.0, 140.0, 80.0, 190.0)])
    path = next(cache.dir.glob("*-eager.json"))
    assert {s["source"] for s in json.loads(path.read_text())["sessions"]} == {"measured"}
    assert all(s.source == "cache" for s in cache.get(KEY, "eager"))
    assert not settled(cache.get(KEY, "eager"), TOLERANCE, MINIMUM, MAXIMUM, PRECISION)


def test_the_pooled_baseline_is_as_uncertain_as_its_least_certain_session():
    # The pooled session is the one whose median is the middle one: here a calm one.
    calm, noisy = session(50.0, spread=0.01), session(50.5, spread=0.6)
    stats = baseline_stats([calm, noisy, session(49.8, spread=0.01)], TOLERANCE, fresh=3, precision=PRECISION)
    assert stats.precision == pytest.approx(noisy.precision) and stats.stable is False


def test_the_reason_names_what_did_not_settle_and_by_how_much():
    apart = baseline_stats([session(100.0), session(140.0), session(190.0)], TOLERANCE, 3, PRECISION)
    reason = unsettled_reason("eager", apart, TOLERANCE, PRECISION)
    assert reason.startswith("the eager baseline is unsettled: its median moved 35.7% between the 3 fresh")
    assert "(100 to 190 ms), more than the 8% a baseline may move" in reason
    noisy = baseline_stats([session(50.0, spread=0.6)], TOLERANCE, 1, PRECISION)
    reason = unsettled_reason("torch.compile", noisy, TOLERANCE, PRECISION)
    assert f"spread {noisy.spread * 100:.3g}% (IQR/median)" in reason
    assert f"known only to ±{noisy.precision * 100:.3g}%, where a baseline needs ±3%" in reason


@pytest.mark.slow
def test_a_real_judge_re_times_a_baseline_that_did_not_settle(judge_config, task, fixture_solution, tmp_path,
                                                              monkeypatch):
    # Baseline sessions asked to know their medians to a billionth never settle: a judge times its
    # two sessions, pays no speedup over them and says why; a judge soon after uses them as they
    # are (still no speedup); one after RETIME_UNSETTLED_AFTER_S times them again. Each session
    # goes on past the candidate's max_calls (10) while its median is not known well enough, for
    # as long as its wall time (target_seconds) allows.
    timing = dataclasses.replace(judge_config().timing, precision=1e-9, baseline_sessions=1,
                                 max_baseline_sessions=2, max_baseline_calls=30, target_seconds=5.0)
    judge = Judge(judge_config(timing=timing))
    path = tmp_path / "scale_bias_relu_unsettled.py"
    path.write_text(task.source + f"\n# variant for the unsettled baseline test: {uuid.uuid4()}\n")
    variant = load_task(path)
    first, soon = (judge.judge(variant, fixture_solution("cpu/correct")) for _ in range(2))
    monkeypatch.setattr(baselines_module, "RETIME_UNSETTLED_AFTER_S", 0.0)
    second = judge.judge(variant, fixture_solution("cpu/correct"))
    for verdict, source in ((first, "measured"), (soon, "cache"), (second, "measured")):
        assert verdict.status == "ok" and verdict.correct, verdict.feedback
        for mode in ("eager", "compile"):
            stats = verdict.timings[mode]
            assert stats.source == source and stats.stable is False and len(stats.sessions_ms) == 2
        assert verdict.reward == 1 and verdict.speedup_vs_eager is None and verdict.speedup_vs_compile is None
        assert verdict.timings["candidate"].calls <= timing.max_calls
        if source == "measured":  # the timed sessions' calls, pooled
            assert timing.max_calls * 2 < verdict.timings["eager"].calls <= timing.max_baseline_calls * 2
        assert "the eager baseline is unsettled" in verdict.speedup_withheld
        assert "the torch.compile baseline is unsettled" in verdict.speedup_withheld
        assert f"reward 1: correct, but {verdict.speedup_withheld}" in verdict.feedback
    cached = judge.baselines.get(judge.baseline_key(variant, second.device), "eager")
    assert [s.median_ms for s in cached] == second.timings["eager"].sessions_ms
