"""What a timing session does between the timed calls.

The cpu backend's cache flush, split between a worker and the trusted reference:
``device.shared_cache_flush`` reads the cache layout from sysfs (here a fake one) and ``session``
sends the split flush's steps. And the candidate's CPU clock, read after its prepare step and
before its call, so that work its threads do while it is not timed shows.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cuda_agent.device import cpu_caches, shared_cache_flush
from cuda_agent.judge.session import TimedSession


def fake_sysfs(root: Path, cpus: dict[int, list[tuple[int, str, str, str]]]) -> Path:
    """``cpus``: for each CPU, its caches as (level, type, size, shared_cpu_list)."""
    for cpu, caches in cpus.items():
        for i, (level, kind, size, shared) in enumerate(caches):
            index = root / f"cpu{cpu}" / "cache" / f"index{i}"
            index.mkdir(parents=True)
            for name, value in (("level", str(level)), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
                (index / name).write_text(value + "\n")
    return root


def core(cpu: int, l3: str, l3_size: str = "480M") -> list[tuple[int, str, str, str]]:
    return [(1, "Data", "48K", str(cpu)), (1, "Instruction", "64K", str(cpu)),
            (3, "Unified", l3_size, l3), (2, "Unified", "2048K", str(cpu))]  # listed out of order


def test_cache_sizes_and_sharing_are_read_innermost_first(tmp_path):
    sysfs = fake_sysfs(tmp_path, {0: core(0, "0-3")})
    assert cpu_caches(0, sysfs) == [(48 * 1024, {0}), (2 << 20, {0}), (480 << 20, {0, 1, 2, 3})]


def test_one_last_level_cache_shared_by_every_core_splits_the_flush(tmp_path):
    sysfs = fake_sysfs(tmp_path, {0: core(0, "0-1"), 1: core(1, "0-1")})
    plan = shared_cache_flush([0, 1], sysfs)
    assert plan is not None and plan.private_bytes == 2 << 20 and plan.cpus == {0, 1}


def test_no_split_where_the_cores_have_separate_last_level_caches(tmp_path):
    # Two chiplets, each with its own L3: a flush on one does not reach the other's.
    sysfs = fake_sysfs(tmp_path, {0: core(0, "0"), 1: core(1, "1")})
    assert shared_cache_flush([0, 1], sysfs) is None
    assert shared_cache_flush([0], sysfs) is None  # nothing below it is private: no split either


def test_no_split_where_sysfs_says_nothing(tmp_path):
    assert cpu_caches(0, tmp_path) == []
    assert shared_cache_flush([0], tmp_path) is None


class Worker:
    def __init__(self, name: str) -> None:
        self.name = name
        self.pid = 0  # no process: the session counts no waiting for a CPU


def run_pair(flusher: bool, cpu: dict[str, float] | None = None,
             go_s: float = 0.0) -> tuple[list[tuple[str, dict]], TimedSession]:
    """A candidate and a calibration session interleaved against scripted workers: the steps
    each worker was sent, in order, and the candidate's session. ``cpu``: CPU ms the candidate's
    process uses in each kind of step, its own (``prepare``, ``go``) or the reference's
    (``reference``), read by the candidate session's CPU clock. ``go_s``: how long each call takes."""
    from cuda_agent.judge.session import interleave

    sent: list[tuple[str, dict]] = []
    cand_worker, ref_worker = Worker("candidate"), Worker("reference")
    used = [0.0]

    def exchange(worker, cmd, timeout, fields, expect=None, spin_s=None):
        sent.append((worker.name, dict(fields, spin_s=spin_s)))
        step = fields.get("step")
        if cpu is not None:
            used[0] += cpu.get(step if worker is cand_worker else "reference", 0.0) / 1e3
        if step == "prepare":
            return {"ok": True, "full": False}
        if step == "go":
            time.sleep(go_s)
            return {"ok": True, "host_ms": 1.0, "call_ms": 1.0, "device_ms": None, "window_ms": None, "threads": 0}
        if step == "stop":
            return {"calls": 0}
        return {"ok": True}

    seeds = iter(range(10**6))
    common = dict(keep=False, warmup=1, min_calls=3, max_calls=3, precision=1.0, target_seconds=1.0, window=False,
                  exchange=exchange, post=lambda worker, message: sent.append((worker.name, message)),
                  seed=lambda: next(seeds), call_timeout_s=5.0, warm_timeout_s=5.0, cores=[])
    cand = TimedSession(cand_worker, "candidate", flusher=ref_worker if flusher else None,
                        cpu_clock=(lambda: used[0]) if cpu is not None else None, **common)
    calibration = TimedSession(ref_worker, "calibration", follows=cand, flusher=ref_worker if flusher else None,
                               **common)
    interleave([cand, calibration], 60.0, lambda session: None)
    return sent, cand


def test_the_trusted_reference_flushes_right_before_every_call_of_both():
    sent, _ = run_pair(flusher=True)
    steps = [(name, fields.get("step")) for name, fields in sent if "step" in fields]
    gos = [i for i, (_, step) in enumerate(steps) if step == "go"]
    assert {steps[i][0] for i in gos} == {"candidate", "reference"} and len(gos) >= 6
    assert all(steps[i - 1] == ("reference", "flush") for i in gos)
    # The workers flush only their private caches in their own prepare step.
    prepares = [fields for _, fields in sent if fields.get("step") == "prepare"]
    assert prepares and all(fields["flush"] == "private" for fields in prepares)
    # The reference sleeps after every flush, before its own call as before the candidate's: each
    # call starts in a worker woken by its go, so the wake-up counts alike in both channels.
    flushes = [(steps[i + 1][0], fields["linger_s"]) for i, fields in
               enumerate(f for _, f in sent if "step" in f) if fields.get("step") == "flush"]
    assert set(flushes) == {("candidate", 0.0), ("reference", 0.0)}


def test_without_a_flusher_each_worker_flushes_all_of_its_cache_in_its_prepare_step():
    sent, _ = run_pair(flusher=False)
    assert not [fields for _, fields in sent if fields.get("step") == "flush"]
    assert not [fields for _, fields in sent if "flush" in fields]


def test_the_candidates_cpu_is_counted_between_its_prepare_step_and_its_call_only():
    # 2 ms of its own work per prepare step, 5 per call, and 3 ms per step of the reference's
    # (a thread of its own at work meanwhile): the reference's flush, call, prepare and flush for
    # the candidate come between (and its warm-up steps before the first timed call).
    _, cand = run_pair(flusher=True, cpu={"prepare": 2.0, "go": 5.0, "reference": 3.0})
    counted = [ms / 3.0 for ms in cand.session.background_cpu_ms]
    assert counted and all(abs(n - round(n)) < 1e-6 and round(n) >= 4 for n in counted), counted
    _, cand = run_pair(flusher=False, cpu={"prepare": 2.0, "go": 5.0})
    assert cand.session.background_cpu_ms and set(cand.session.background_cpu_ms) == {0.0}
    _, cand = run_pair(flusher=False)
    assert cand.session.background_cpu_ms == []  # no clock: nothing recorded


def test_the_judge_polls_for_a_calls_reply_about_as_long_as_the_previous_call_took():
    # A judge that slept through a long call would add its wake-up to that call's channel only.
    from cuda_agent.judge.session import GO_SPIN_MAX_S, STEP_SPIN_S, go_spin_s

    assert go_spin_s(None) == STEP_SPIN_S and go_spin_s(0.001) == STEP_SPIN_S
    assert go_spin_s(0.1) == pytest.approx(0.15) and go_spin_s(30.0) == GO_SPIN_MAX_S
    sent, _ = run_pair(flusher=True, go_s=0.06)
    for name in ("candidate", "reference"):
        spins = [fields["spin_s"] for worker, fields in sent if worker == name and fields.get("step") == "go"]
        # The first call waits the step default; each later one 1.5 times the call before (60 ms).
        assert len(spins) >= 3 and spins[0] == STEP_SPIN_S, spins
        assert all(0.09 <= spin <= 0.2 for spin in spins[1:]), spins
