"""The seccomp filter on candidates and their compiles, and the compile step's sandbox.

The filter refuses namespaces, tracing, Unix-domain sockets and the rest of ``seccomp.REFUSED``
while threads, forks, subprocesses and socket pairs keep working; the compilers, which expand the candidate's preprocessor
directives, cannot read the judge's files.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from cuda_agent.judge.landlock import abi_version
from cuda_agent.judge.sandbox import SandboxPolicy, make_preexec
from cuda_agent.judge.seccomp import REFUSED, SeccompUnavailable, compiled_filter
from cuda_agent.solution import load_solution
from cuda_agent.task import load_task

try:
    FILTER = compiled_filter()
except SeccompUnavailable as exc:  # pragma: no cover - hosts without libseccomp
    FILTER = None
    WHY = str(exc)
needs_filter = pytest.mark.skipif(FILTER is None, reason="libseccomp is not available here")
needs_landlock = pytest.mark.skipif(abi_version() < 1, reason="Landlock is not available in this kernel")

PROBE = r"""
import ctypes, json, os, socket, subprocess, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
result = {}
def call(name, *args):
    value = getattr(libc, name)(*args)
    return [value, ctypes.get_errno() if value != 0 else 0]
result["unshare_nothing"] = call("unshare", 0)  # harmless, allowed unless unshare is refused
if "filtered" in sys.argv:  # unfiltered, these would succeed and change the process
    result["unshare"] = call("unshare", 0x20000000)
    result["ptrace_traceme"] = call("ptrace", 0, 0, 0, 0)
if "x86_64" in sys.argv:
    result["clone_newnet"] = call("syscall", 56, 0x40000000 | 17, 0, 0, 0, 0)  # clone, x86_64 numbering
try:  # a Unix-domain socket could reach root's daemons; a connected pair of its own is harmless
    socket.socket(socket.AF_UNIX).close()
    result["unix_socket"] = 0
except OSError as exc:
    result["unix_socket"] = exc.errno
pair = socket.socketpair()
pair[0].sendall(b"x")
result["socketpair"] = pair[1].recv(1) == b"x"
done = []
t = threading.Thread(target=lambda: done.append(1)); t.start(); t.join()
result["thread"] = bool(done)
result["subprocess"] = subprocess.run(["true"]).returncode
pid = os.fork()
if pid == 0:
    os._exit(7)
result["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
status = open("/proc/self/status").read()
result["filters"] = int(status.split("Seccomp_filters:")[1].split()[0])
print(json.dumps(result))
"""


def _probe(policy: SandboxPolicy, *argv: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=60,
                         preexec_fn=make_preexec(policy))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@needs_filter
def test_the_filter_refuses_namespaces_and_tracing_but_not_threads_or_forks():
    import errno
    import platform

    argv = ("filtered", platform.machine())
    result = _probe(SandboxPolicy(isolate_network=False, seccomp_program=FILTER.program), *argv)
    assert result["filters"] >= 1
    assert result["ptrace_traceme"] == [-1, errno.EPERM]
    assert result["unshare"] == [-1, errno.EPERM] and result["unshare_nothing"] == [-1, errno.EPERM]
    if "clone_newnet" in result:
        assert result["clone_newnet"] == [-1, errno.EPERM]
    assert result["unix_socket"] == errno.EACCES and result["socketpair"] is True
    assert result["thread"] is True and result["subprocess"] == 0 and result["fork"] == 7


@needs_filter
def test_without_the_filter_the_same_probe_is_allowed():
    result = _probe(SandboxPolicy(isolate_network=False))
    assert result["filters"] == 0
    assert result["unshare_nothing"] == [0, 0] and result["unix_socket"] == 0


@needs_filter
def test_the_filter_names_what_it_refuses():
    assert {"ptrace", "unshare", "setns", "mount", "bpf", "process_vm_readv"} <= set(FILTER.refused)
    assert set(FILTER.refused) <= set(REFUSED)
    assert "seccomp" in FILTER.description


LATE_RULE = r"""
import errno, json, socket, subprocess, sys, threading
sys.path[:0] = sys.argv[1:]
from cuda_agent.judge.seccomp import refuse_late
def unix_socket():
    try:
        socket.socket(socket.AF_UNIX).close()
        return 0
    except OSError as exc:
        return exc.errno
def run_program():
    try:
        return subprocess.run(["true"]).returncode
    except OSError as exc:
        return exc.errno
def prctl(option, value):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    return 0 if libc.prctl(option, value, 0, 0, 0) == 0 else ctypes.get_errno()
# PR_TASK_PERF_EVENTS_DISABLE (31) and PR_SET_DUMPABLE (4): either would blind the judge's samples
result = {"before": unix_socket(), "program_before": run_program(), "perf_before": prctl(31, 0)}
go, seen = threading.Event(), {}
def thread():  # started before the rule, as the CUDA driver's threads are
    go.wait()
    seen["thread"] = unix_socket()
t = threading.Thread(target=thread); t.start()
refuse_late()
go.set(); t.join()
result.update(after=unix_socket(), thread=seen["thread"], socketpair=len(socket.socketpair()) == 2,
              program_after=run_program(), perf_after=prctl(31, 0), dumpable_after=prctl(4, 0),
              filters=int(open("/proc/self/status").read().split("Seccomp_filters:")[1].split()[0]))
print(json.dumps(result))
"""


@needs_filter
def test_a_worker_adds_the_late_rules_to_every_thread_once_started():
    import errno

    import cuda_agent

    without = compiled_filter(unix_sockets=False)
    assert without.program != FILTER.program
    src = str(__import__("pathlib").Path(cuda_agent.__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", LATE_RULE, src], capture_output=True, text=True, timeout=60,
                         preexec_fn=make_preexec(SandboxPolicy(isolate_network=False, seccomp_program=without.program)))
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["before"] == 0  # what the CUDA driver needs while it starts
    assert result["after"] == errno.EACCES and result["thread"] == errno.EACCES
    assert result["socketpair"] is True and result["filters"] == 2
    assert result["program_before"] == 0 and result["program_after"] == errno.EACCES  # no compiler, no linker
    # the judge's CPU sample record of the process can be neither switched off nor locked out
    assert result["perf_before"] == 0
    assert result["perf_after"] == errno.EPERM and result["dumpable_after"] == errno.EPERM


@pytest.fixture(scope="module")
def task(fixtures_dir):
    return load_task(fixtures_dir / "tasks" / "scale_bias_relu.py")


@pytest.mark.slow
@needs_filter
def test_an_honest_candidate_runs_under_the_filter(cpu_judge, task, fixtures_dir):
    verdict = cpu_judge.evaluate(task, load_solution(fixtures_dir / "solutions" / "cpu" / "correct"), stage="verify")
    assert verdict.status == "ok", verdict.error
    assert verdict.isolation["candidate"]["syscalls"].startswith("seccomp:")
    assert "could not be added" not in verdict.isolation["candidate"]["syscalls"]
    assert "no program may run" in verdict.isolation["candidate"]["syscalls"]


@pytest.mark.slow
@needs_landlock
def test_the_compile_cannot_read_the_judges_cache(judge_config, judge_cache, task, fixtures_dir, tmp_path):
    from cuda_agent.judge.judge import Judge

    (judge_cache / "compile-probe-secret.h").write_text("// the judge's own file\n")
    root = tmp_path / "include-probe"
    shutil.copytree(fixtures_dir / "solutions" / "cpu" / "correct", root)
    kernel = root / "kernels" / "scale_bias_relu.cpp"
    # From the build directory's kernels/: build-XXXX, work, build, then the judge's cache.
    kernel.write_text('#include "../../../../compile-probe-secret.h"\n' + kernel.read_text())

    confined = Judge(judge_config(static_checks=False)).evaluate(task, load_solution(root), stage="compile")
    assert confined.status == "compile_error", confined.status
    assert "Permission denied" in confined.details + confined.error
    compile_record = confined.isolation["compile"]
    assert compile_record["filesystem"].startswith("Landlock")
    if FILTER is not None:
        assert compile_record["syscalls"].startswith("seccomp:")

    open_judge = Judge(judge_config(static_checks=False, confine_filesystem=False))
    unconfined = open_judge.evaluate(task, load_solution(root), stage="compile")
    assert unconfined.status == "ok", unconfined.error  # the same include, when nothing stops it
