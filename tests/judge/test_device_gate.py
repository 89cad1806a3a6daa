"""The device gate: checks hold it shared, a timing run alone, a waiting timer goes before later
checks, a dead holder frees it, and judges with ``exclusive_timing`` never check while another times."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

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


def _judge_logging_the_gate(config, task, solution, log: str) -> None:
    """One judge in a process of its own, as the pools run them; every hold of the gate logged
    with the machine-wide monotonic clock."""
    spans = []

    def logged(original, kind):
        @contextmanager
        def hold(self):
            with original(self):
                start = time.monotonic()
                try:
                    yield
                finally:
                    spans.append((kind, start, time.monotonic()))
        return hold

    DeviceGate.shared = logged(DeviceGate.shared, "shared")
    DeviceGate.alone = logged(DeviceGate.alone, "alone")
    verdict = Judge(config).evaluate(task, solution, "profile")
    Path(log).write_text(json.dumps({"spans": spans, "ok": verdict.status == "ok" and verdict.correct,
                                     "timed": bool(verdict.timings.get("candidate")), "error": verdict.error}))


@pytest.mark.slow
def test_judges_with_exclusive_timing_never_check_while_another_times(judge_config, task, fixture_solution, tmp_path):
    config = judge_config(exclusive_timing=True)
    solution = fixture_solution("cpu/correct")
    context = multiprocessing.get_context("spawn")
    logs = {name: tmp_path / f"{name}.json" for name in ("one", "two")}
    judges = [context.Process(target=_judge_logging_the_gate, args=(config, task, solution, str(log)))
              for log in logs.values()]
    for judge in judges:
        judge.start()
    for judge in judges:
        judge.join(600)
        assert judge.exitcode == 0
    results = {name: json.loads(log.read_text()) for name, log in logs.items()}
    assert all(r["ok"] and r["timed"] for r in results.values()), results
    for name, result in results.items():  # each checked and timed through the gate
        assert {kind for kind, _, _ in result["spans"]} == {"shared", "alone"}, (name, result["spans"])
    (one, two) = (results[name]["spans"] for name in ("one", "two"))
    for mine, theirs in ((one, two), (two, one)):
        for kind, start, end in mine:
            if kind == "alone":  # nothing of the other judge's inside this judge's timing
                assert all(other_end <= start or other_start >= end for _, other_start, other_end in theirs)
