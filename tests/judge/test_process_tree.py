"""Nothing a candidate starts outlives its judge, and the judge says when something tried.

A solution that forks a process and detaches it into a session of its own (``setsid``, double
fork) must be caught while its checks run, and the process must be gone when the judge returns,
with the candidate's PID namespace (as root) or, without one, by the environment token its
children inherit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from cuda_agent.judge.process_tree import (TOKEN_VARIABLE, ProcessTree, RunqueueWait, launched, new_token,
                                           only_child, strays_elsewhere)
from cuda_agent.solution import load_solution
from cuda_agent.task import load_task

DETACH = '''
import os


def _detach(seconds):
    """Start `sleep` in a session of its own, orphaned by a double fork."""
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv("/bin/sleep", ["sleep", seconds])
        os._exit(0)
    os.waitpid(pid, 0)
'''


# A candidate's process may not run programs (seccomp refuses execve once it has started): there
# the detached process is a copy of the worker itself, named after the marker (PR_SET_NAME).
DETACH_WITHOUT_EXEC = DETACH.replace(
    'os.execv("/bin/sleep", ["sleep", seconds])',
    'import ctypes, time; ctypes.CDLL(None).prctl(15, seconds.encode(), 0, 0, 0); time.sleep(float(seconds))')


def _alive_with_argument(argument: str) -> list[int]:
    """Processes with ``argument`` in their command line, or as their name."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
            with open(f"/proc/{entry.name}/comm", "rb") as fh:
                argv.append(fh.read().strip())
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if argument.encode() in argv and state not in (b"Z", b"X"):
            found.append(int(entry.name))
    return found


@pytest.fixture
def marker() -> str:
    # A unique duration for `sleep`, so that the test finds exactly the processes it started.
    return f"{3000 + uuid.uuid4().int % 5000}.{uuid.uuid4().int % 10**6}"


def test_a_detached_process_is_found_by_its_token_and_killed(marker):
    token = new_token()
    script = DETACH + f"\n_detach({marker!r})\nimport time\ntime.sleep(60)\n"
    env = {**os.environ, TOKEN_VARIABLE: token}
    worker = subprocess.Popen([sys.executable, "-c", script], env=env, start_new_session=True)
    try:
        tree = ProcessTree(worker.pid, token)
        deadline = time.monotonic() + 10
        while not _alive_with_argument(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        detached = _alive_with_argument(marker)
        assert detached, "the detached sleep never started"
        assert os.getsid(detached[0]) != os.getsid(worker.pid)  # really in a session of its own
        assert set(detached) <= set(tree.strays())
        assert tree.kill() == []
        assert _alive_with_argument(marker) == []
    finally:
        worker.kill()
        worker.wait()


def _exec_done(proc: subprocess.Popen, marker: str) -> subprocess.Popen:
    """``proc`` once it runs its program: until its exec, a forked child still has this process's
    environment (without its token), which a loaded machine made visible."""
    deadline = time.monotonic() + 30
    while marker.encode() not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline, "the child did not exec within 30 s"
        time.sleep(0.01)
    return proc


def test_only_candidates_strays_disturb_other_timings(marker):
    """A trusted reference's helpers (torch.compile's compile workers) are nobody's strays."""
    token = new_token()
    before = strays_elsewhere(None)
    helper = _exec_done(subprocess.Popen(["/bin/sleep", marker], env={**os.environ, TOKEN_VARIABLE: token}), marker)
    try:
        reference = ProcessTree(os.getpid(), token, watched=False)
        assert helper.pid in reference.strays()
        assert strays_elsewhere(None) == before  # a reference's helper disturbs nobody
        candidate = ProcessTree(os.getpid(), token)  # the same process, as a candidate's
        assert strays_elsewhere(None) == before + 1
        assert strays_elsewhere(candidate) == before
    finally:
        helper.kill()
        helper.wait()


def test_other_processes_are_not_members(marker):
    tree = ProcessTree(os.getpid(), new_token())
    bystander = subprocess.Popen(["/bin/sleep", marker])
    try:
        assert bystander.pid not in tree.strays()
    finally:
        bystander.kill()
        bystander.wait()


@pytest.fixture
def detaching_solution(tmp_path, fixtures_dir, marker) -> Path:
    root = tmp_path / "detach"
    shutil.copytree(fixtures_dir / "solutions" / "cpu" / "correct", root)
    model = root / "model_new.py"
    source = model.read_text().replace("class ModelNew", DETACH_WITHOUT_EXEC + "\n\nclass ModelNew")
    source = source.replace("    def forward(self, x):\n",
                            f"    def forward(self, x):\n        _detach({marker!r})\n")
    model.write_text(source)
    return root


@pytest.mark.slow
def test_the_judge_forbids_a_detached_process_and_leaves_none_behind(judge_config, fixtures_dir,
                                                                     detaching_solution, marker):
    from cuda_agent.judge.judge import Judge

    judge = Judge(judge_config(static_checks=False))
    task = load_task(fixtures_dir / "tasks" / "scale_bias_relu.py")
    verdict = judge.evaluate(task, load_solution(detaching_solution), stage="verify")
    assert verdict.status == "forbidden", verdict.error
    assert "process_left_running" in {v.rule for v in verdict.violations}
    assert verdict.reward == -1
    assert _alive_with_argument(marker) == [], "a process of the candidate's outlived its judge"
    method = verdict.isolation["candidate"]["processes"]
    if os.geteuid() == 0:
        assert "PID namespace" in method, method
    else:
        assert "token" in method, method


@pytest.mark.slow
def test_an_honest_candidate_has_no_strays_and_its_isolation_is_recorded(cpu_judge, fixtures_dir):
    task = load_task(fixtures_dir / "tasks" / "scale_bias_relu.py")
    verdict = cpu_judge.evaluate(task, load_solution(fixtures_dir / "solutions" / "cpu" / "correct"),
                                 stage="verify")
    assert verdict.status == "ok", verdict.error
    record = verdict.isolation["candidate"]
    assert record["processes"]
    if os.geteuid() == 0:
        assert record["ipc_isolated"] is True


def test_the_launcher_keeps_a_detached_process_that_dropped_its_token(marker):
    """Without a PID namespace (not root), the launcher is a subreaper: a process that detaches
    and clears its environment is still below it, found, and ended with the worker."""
    script = DETACH.replace('os.execv("/bin/sleep", ["sleep", seconds])',
                            'os.execve("/bin/sleep", ["sleep", seconds], {})') + f"\n_detach({marker!r})\nimport time\ntime.sleep(60)\n"
    token = new_token()
    launcher = subprocess.Popen(launched([sys.executable, "-c", script], sys.executable),
                                env={**os.environ, TOKEN_VARIABLE: token}, start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not _alive_with_argument(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        detached = _alive_with_argument(marker)
        assert detached, "the detached sleep never started"
        worker = only_child(launcher.pid)
        assert worker is not None and worker not in detached
        assert set(detached) <= set(ProcessTree(worker, token, own=(launcher.pid,), subreaper=launcher.pid).strays())
        assert not set(detached) & set(ProcessTree(worker, token, own=(launcher.pid,)).strays())  # the token alone misses it
        os.kill(worker, 9)  # the worker dies: the launcher ends what it left
        launcher.wait(timeout=30)
        deadline = time.monotonic() + 5
        while _alive_with_argument(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _alive_with_argument(marker) == []
    finally:
        launcher.kill()
        launcher.wait()
        for pid in _alive_with_argument(marker):
            os.kill(pid, 9)


@pytest.mark.parametrize("signal_number", [9, 11, 15])
def test_the_launcher_dies_as_its_worker_did(signal_number):
    """A worker killed by a signal (the kernel's out-of-memory killer sends SIGKILL) is reported
    as killed by it, not as an exit with code 1."""
    worker = f"import os; os.kill(os.getpid(), {signal_number})"
    done = subprocess.run(launched([sys.executable, "-c", worker], sys.executable), capture_output=True, timeout=60)
    assert done.returncode == -signal_number, done.stderr.decode()[-2000:]
    exited = subprocess.run(launched([sys.executable, "-c", "raise SystemExit(3)"], sys.executable), timeout=60)
    assert exited.returncode == 3


def test_a_process_kept_from_the_cpu_by_others_is_seen_to_wait():
    # Three busy processes on one core: each runs about a third of the time and waits the rest,
    # which the kernel counts and the judge reads (RunqueueWait); sleeping is not waiting. Each
    # child says when it is past its interpreter's start-up, which on a loaded machine itself
    # waits for a CPU, so the window measures only the spinning and the sleeping.
    core = min(os.sched_getaffinity(0))
    busy = ("import os, sys, time\nos.sched_setaffinity(0, {%d})\nprint(flush=True)\n"
            "end = time.time() + 30\nwhile time.time() < end: pass\n" % core)
    sleeper_code = "import time\nprint(flush=True)\ntime.sleep(30)\n"
    children = [subprocess.Popen([sys.executable, "-c", busy], stdout=subprocess.PIPE) for _ in range(3)]
    sleeper = subprocess.Popen([sys.executable, "-c", sleeper_code], stdout=subprocess.PIPE)
    try:
        for child in (*children, sleeper):
            child.stdout.readline()
        deadline = time.monotonic() + 30
        while open(f"/proc/{sleeper.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "S":
            assert time.monotonic() < deadline, "the sleeper never went to sleep"
            time.sleep(0.01)  # from its print to its sleep
        waits = [RunqueueWait(f"/proc/{child.pid}/schedstat") for child in (*children, sleeper)]
        before = [w.read() for w in waits]
        if None in before or not any(int(open(f"/proc/{c.pid}/schedstat").read().split()[0]) for c in children):
            pytest.skip("this kernel keeps no scheduler statistics (/proc/PID/schedstat)")
        time.sleep(0.4)
        waited = [w.read() - b for w, b in zip(waits, before)]
    finally:
        for child in (*children, sleeper):
            child.kill()
            child.wait()
            child.stdout.close()
    assert all(w > 50 for w in waited[:3]), waited
    assert waited[3] < 5, waited
    for wait in waits:
        wait.close()
    assert waits[0].read() is None
