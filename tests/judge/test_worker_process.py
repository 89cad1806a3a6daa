"""Supervision of worker processes: every failure becomes a WorkerError that says what happened."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cuda_agent.judge import protocol
from cuda_agent.judge.sandbox import SandboxPolicy
from cuda_agent.judge.worker_process import WorkerError, WorkerProcess, WorkerSpec

LIMIT = 512 * 1024**2


@pytest.fixture
def idle_worker(tmp_path: Path):
    """A real worker process, waiting for its first command, with no memory watcher running."""
    spec = WorkerSpec(name="candidate", run_dir=tmp_path, policy=SandboxPolicy(isolate_network=False),
                      env={}, memory_limit_bytes=None)
    worker = WorkerProcess(spec)
    yield worker
    worker.close()


def _channel_closes_mid_request(worker: WorkerProcess, monkeypatch, memory_flagged: bool) -> WorkerError:
    """The worker's channel closes during a request while the process has not been reaped yet.

    This is the state the memory watcher leaves behind: it flags the overrun, kills the process
    group, and the request's reader sees the pipe close before anyone has waited for the child.
    """
    worker.spec.memory_limit_bytes = LIMIT

    def receive(fd, max_bytes, deadline=None, spin_s=0.0):
        if memory_flagged:
            worker._oom.set()
        worker.kill()  # what the memory watcher does
        raise protocol.ProtocolError("the worker closed its channel")

    monkeypatch.setattr(protocol, "receive", receive)
    with pytest.raises(WorkerError) as info:
        worker.request("run", 30)
    return info.value


def test_a_killed_worker_is_reported_with_its_signal(idle_worker, monkeypatch):
    error = _channel_closes_mid_request(idle_worker, monkeypatch, memory_flagged=False)
    assert error.kind == "runtime_error"
    assert error.message == "the candidate process was killed by SIGKILL"
    assert idle_worker.proc.returncode is not None


def test_requests_to_a_dead_worker_fail_at_once(idle_worker, monkeypatch):
    _channel_closes_mid_request(idle_worker, monkeypatch, memory_flagged=False)
    monkeypatch.undo()
    with pytest.raises(WorkerError, match="killed by SIGKILL"):
        idle_worker.request("run", 30)


def test_memory_limit_reason_survives_the_closed_channel(idle_worker, monkeypatch):
    error = _channel_closes_mid_request(idle_worker, monkeypatch, memory_flagged=True)
    assert error.kind == "runtime_error"
    assert "exceeded its memory limit of 0.5 GiB" in error.message


def test_closing_twice_leaves_descriptors_opened_since_alone(idle_worker):
    """The judge closes a worker early (before the baselines) and again when its run ends; the
    second close must not close whatever has reused the channel's descriptor numbers."""
    channel = {idle_worker._send_fd, idle_worker._recv_fd}
    idle_worker.close()
    opened = []
    while not channel & {fd for pair in opened for fd in pair}:  # the lowest free numbers come back first
        opened.append(os.pipe())
    try:
        idle_worker.close()
        for pair in opened:
            for fd in pair:
                os.fstat(fd)  # raises EBADF if the second close took it
    finally:
        for pair in opened:
            for fd in pair:
                os.close(fd)
