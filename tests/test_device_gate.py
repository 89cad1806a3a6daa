"""The device gate: checks hold it shared, a timing run alone, a waiting timer goes before later
checks, a dead holder frees it, and judges with ``exclusive_timing`` never check while another times."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from cuda_agent.judge.device_gate import DeviceGate
from cuda_agent.judge.judge import Judge


def _hold(gate: DeviceGate, how: str, log: list, name: str, seconds: float, entered: threading.Event | None = None):
    with getattr(gate, how)():
        log.append((name, "in", time.monotonic()))
        if entered:
            entered.set()
        time.sleep(seconds)
        log.append((name, "out", time.monotonic()))


def _start(*args) -> threading.Thread:
    thread = threading.Thread(target=_hold, args=args)
    thread.start()
    return thread


def test_shared_holds_overlap_and_a_timer_waits_for_them(tmp_path):
    gate, log = DeviceGate(tmp_path, "cuda-0"), []
    first, second = threading.Event(), threading.Event()
    a = _start(gate, "shared", log, "a", 0.4, first)
    b = _start(gate, "shared", log, "b", 0.4, second)
    assert first.wait(5) and second.wait(5)  # both inside at once
    timer = _start(gate, "alone", log, "timer", 0.05)
    for thread in (a, b, timer):
        thread.join(10)
    order = [(name, what) for name, what, _ in log]
    assert order.index(("timer", "in")) > max(order.index(("a", "out")), order.index(("b", "out")))


def test_a_waiting_timer_goes_before_checks_that_come_after_it(tmp_path):
    gate, log = DeviceGate(tmp_path, "cuda-0"), []
    inside = threading.Event()
    check = _start(gate, "shared", log, "check", 0.5, inside)
    assert inside.wait(5)
    timer = _start(gate, "alone", log, "timer", 0.2)
    time.sleep(0.15)  # the timer now waits at the gate, holding the turnstile
    later = _start(gate, "shared", log, "later", 0.01)
    for thread in (check, timer, later):
        thread.join(10)
    order = [(name, what) for name, what, _ in log]
    assert order.index(("later", "in")) > order.index(("timer", "out")), order


def _hold_alone_forever(directory: str, ready) -> None:
    with DeviceGate(Path(directory), "cuda-0").alone():
        ready.set()
        time.sleep(60)


def test_a_holder_that_dies_frees_the_gate(tmp_path):
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    holder = context.Process(target=_hold_alone_forever, args=(str(tmp_path), ready))
    holder.start()
    try:
        assert ready.wait(30)
        os.kill(holder.pid, signal.SIGKILL)
        holder.join(10)
        started = time.monotonic()
        with DeviceGate(tmp_path, "cuda-0").shared():
            pass
        assert time.monotonic() - started < 5
    finally:
        if holder.is_alive():
            holder.kill()


def test_judges_with_exclusive_timing_never_check_while_another_times(judge_config, task, fixture_solution,
                                                                       monkeypatch, tmp_path):
    spans: list[tuple[str, str, float, float]] = []  # (thread, shared or alone, start, end)
    lock = threading.Lock()

    def logged(original, kind):
        @contextmanager
        def hold(self):
            with original(self):
                start = time.monotonic()
                try:
                    yield
                finally:
                    with lock:
                        spans.append((threading.current_thread().name, kind, start, time.monotonic()))
        return hold

    monkeypatch.setattr(DeviceGate, "shared", logged(DeviceGate.shared, "shared"))
    monkeypatch.setattr(DeviceGate, "alone", logged(DeviceGate.alone, "alone"))
    config = judge_config(exclusive_timing=True, cache_dir=tmp_path / "cache")
    solution = fixture_solution("cpu/correct")
    verdicts = {}

    def judge(name: str) -> None:
        verdicts[name] = Judge(config).evaluate(task, solution, "profile")

    threads = [threading.Thread(target=judge, args=(name,), name=name) for name in ("one", "two")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    assert all(v.status == "ok" and v.correct and v.timings.get("candidate") for v in verdicts.values()), \
        {k: (v.status, v.error) for k, v in verdicts.items()}
    assert {s[0] for s in spans if s[1] == "shared"} == {"one", "two"}  # both checked through the gate
    assert {s[0] for s in spans if s[1] == "alone"} == {"one", "two"}  # and timed through it
    for who, kind, start, end in spans:
        if kind != "alone":
            continue
        for other, other_kind, other_start, other_end in spans:
            if other != who:
                assert other_end <= start or other_start >= end, (who, kind, other, other_kind)
