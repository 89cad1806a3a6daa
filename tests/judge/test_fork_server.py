"""Workers forked from the fork server are the same workers an exec starts: sandboxed alike,
found by their token, reported with their exit status, and refused with a reason when their
sandbox cannot be set up."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from cuda_agent.judge import fork_server
from cuda_agent.judge.process_tree import TOKEN_VARIABLE
from cuda_agent.judge.sandbox import SandboxPolicy, ProcessKind
from cuda_agent.judge.worker_process import WorkerError, WorkerProcess, WorkerSpec
from cuda_agent.solution import load_solution


def _worker(tmp_path: Path, fork: bool, **policy) -> WorkerProcess:
    spec = WorkerSpec(name="candidate", run_dir=tmp_path, policy=SandboxPolicy(isolate_network=False, **policy),
                      env={"OMP_NUM_THREADS": "1"}, memory_limit_bytes=None, fork=fork)
    return WorkerProcess(spec)


def _status(pid: int, field: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    raise KeyError(field)


def test_a_forked_worker_is_a_fresh_process_with_its_own_session_and_token(tmp_path):
    worker = _worker(tmp_path, fork=True)
    try:
        server = next(s for s in fork_server._servers.values() if s.alive)
        assert isinstance(worker.proc, fork_server.ForkedProcess)
        assert worker.pid != server.proc.pid and os.getpgid(worker.pid) == worker.pid  # its own session
        # /proc/PID/environ carries its token (the judge finds it and its children by it) ...
        environ = Path(f"/proc/{worker.pid}/environ").read_bytes()
        assert f"{TOKEN_VARIABLE}={worker.token}".encode() in environ.split(b"\0")
        # ... and no other worker's: a second one has a token of its own.
        other = _worker(tmp_path / "other", fork=True)
        try:
            assert other.token != worker.token
            assert f"{TOKEN_VARIABLE}={other.token}".encode() in Path(f"/proc/{other.pid}/environ").read_bytes()
            assert worker.tree.strays() == [] and other.tree.strays() == []
        finally:
            other.close()
        assert _status(worker.pid, "Threads") != "0"
    finally:
        worker.close()
    # It was asked to exit, then its group killed (as every worker's is): the server said which came first.
    assert worker.proc.returncode in (0, -signal.SIGKILL)


def test_the_exit_status_of_a_killed_forked_worker_is_its_signal(tmp_path):
    worker = _worker(tmp_path, fork=True)
    os.kill(worker.pid, signal.SIGKILL)
    assert worker.proc.wait(timeout=10) == -signal.SIGKILL
    with pytest.raises(WorkerError, match="killed by SIGKILL"):
        worker.request("run", 10)
    worker.close()


def test_a_sandbox_that_cannot_be_set_up_is_a_start_error_with_the_reason(tmp_path):
    # A user the kernel refuses to switch to: the sandbox step fails in the child, before any of
    # the worker's code runs, and the judge is told why (as Popen reports a failed preexec).
    with pytest.raises(WorkerError, match="could not start the candidate process as uid 4294967295 .*Error"):
        _worker(tmp_path, fork=True, run_as=(2**32 - 1, 2**32 - 1))


@pytest.mark.slow
def test_forked_and_execd_workers_give_the_same_verdict_and_isolation(judge_config, task, fixtures_dir):
    from cuda_agent.judge.judge import Judge

    solution = load_solution(fixtures_dir / "solutions" / "cpu" / "correct")
    verdicts = {fork: Judge(judge_config(fork_workers=fork)).verify(task, solution) for fork in (True, False)}
    assert verdicts[True].status == verdicts[False].status == "ok", verdicts[True].feedback
    # The workers' records (not the compile's: the first judge built, the second found it built),
    # each run's private directory aside.
    same_run = {fork: re.sub(r"cuda-agent-run-\w+", "RUN", json.dumps(
        {k: r for k, r in v.isolation.items() if k != "compile"}, sort_keys=True)) for fork, v in verdicts.items()}
    assert same_run[True] == same_run[False]
    assert verdicts[True].feedback == verdicts[False].feedback


def test_a_dead_server_is_replaced_on_the_next_start(tmp_path):
    first = _worker(tmp_path, fork=True)
    first.close()
    server = next(s for s in fork_server._servers.values() if s.alive)
    server.proc.kill()
    server.proc.wait()
    deadline = time.monotonic() + 10
    while server.alive and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not server.alive
    again = _worker(tmp_path / "again", fork=True)
    try:
        assert again.proc.poll() is None
    finally:
        again.close()
    assert next(s for s in fork_server._servers.values() if s.alive) is not server


@pytest.mark.slow
def test_the_compilers_cpu_probe_is_compiled_into_the_judges_cache_once(tmp_path):
    # Before its first compile baseline, a fork server probes the CPU's vector instructions, which
    # compiles a program per instruction set: into the cache the compiling workers use, so that the
    # next server (another process's) finds them there, and its own environment is left as it was.
    torch = pytest.importorskip("torch")
    if torch.version.cuda is not None:
        pytest.skip("a CUDA build of torch: the server does not preload the compiler (it would start the driver)")
    import subprocess
    import sys

    cache = tmp_path / "inductor"
    variable = fork_server.INDUCTOR_CACHE_VARIABLE
    preload = ("import os, sys; from cuda_agent.judge import fork_server; "
               f"fork_server._preload_compiler({{{variable!r}: sys.argv[1]}}); "
               f"print(os.environ.get({variable!r}))")

    def probe() -> dict[Path, int]:
        env = {k: v for k, v in os.environ.items() if k != variable}
        done = subprocess.run([sys.executable, "-c", preload, str(cache)], capture_output=True, text=True, env=env,
                              timeout=600)
        assert done.returncode == 0 and done.stdout.strip() == "None", done.stderr[-2000:]
        return {p: p.stat().st_mtime_ns for p in cache.rglob("*.so")}

    first = probe()
    assert first, "the probe compiled nothing into the judge's cache"
    assert probe() == first  # the next server compiled none of them again


def test_a_workers_records_import_nothing_of_torch_compile():
    # torch.compile's front end (torch._dynamo, with sympy) costs as much to import as torch itself.
    # The fork server leaves it to the compile baselines' workers, so the records every candidate
    # makes (its ops, through a dispatch mode) must not import it behind the server's back.
    import subprocess
    import sys

    code = ("import importlib, sys, torch; from cuda_agent.judge import fork_server, recording; "
            "[importlib.import_module(m) for m in fork_server.PRELOAD]; "
            "recording.record_ops(lambda: torch.ones(3) + 1); "
            "print(sorted(m for m in ('torch._dynamo', 'torch._inductor', 'sympy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", done.stdout


def test_the_server_a_judge_starts_early_is_the_one_its_workers_fork_from(judge_config):
    # A judge starts its fork server while the solution builds; its reference and candidate
    # workers must then find that server, not start another one.
    from cuda_agent.judge import Judge

    judge = Judge(judge_config())
    before = set(fork_server._servers)
    fork_server.start_soon(judge.python, judge.worker_env(ProcessKind.REFERENCE))
    for_candidate = fork_server.server_for(judge.python, judge.worker_env(ProcessKind.CANDIDATE))
    for_reference = fork_server.server_for(judge.python, judge.worker_env(ProcessKind.REFERENCE))
    assert for_candidate is not None and for_candidate is for_reference and for_candidate.alive
    assert len(set(fork_server._servers) - before) <= 1
