"""Memory bounded for the machine: the default cap per worker is sized from the machine's RAM or
its cgroup's limit, a worker the kernel's out-of-memory killer ends is reported as out of memory
with the figures, a worker over its cap likewise, and a run with no room to start is refused."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from cuda_agent.errors import ConfigError
from cuda_agent.judge import memory, run_workers
from cuda_agent.judge.config import JudgeConfig
from cuda_agent.judge.judge import Judge
from cuda_agent.judge.memory import GIB, Cgroup, MachineMemory
from cuda_agent.judge.sandbox import SandboxPolicy
from cuda_agent.judge.worker_process import WorkerError, WorkerProcess, WorkerSpec

MIB = 1024**2


def _meminfo(tmp_path: Path, total: int, available: int) -> Path:
    path = tmp_path / "meminfo"
    path.write_text(f"MemTotal:       {total // 1024} kB\nMemFree:        {available // 2048} kB\n"
                    f"MemAvailable:   {available // 1024} kB\nBuffers:          1024 kB\n")
    return path


def _v2_group(root: Path, limits: dict[str, str], current: int = 0, file: int = 0) -> Cgroup:
    """A cgroup v2 tree under ``root``: ``limits`` maps each level's path (``a``, ``a/b``) to its
    memory.max; the group is the deepest level."""
    for relative, limit in limits.items():
        level = root / relative
        level.mkdir(parents=True, exist_ok=True)
        (level / "memory.max").write_text(limit + "\n")
        (level / "memory.current").write_text(f"{current}\n")
        (level / "memory.stat").write_text(f"anon {current - file}\nfile {file}\n")
    return Cgroup(root / max(limits, key=len), root, 2)


# -- the default cap ---------------------------------------------------------------------------
def test_the_default_cap_shares_the_machines_ram_among_the_workers_of_the_judges(tmp_path):
    machine = memory.machine_memory(_meminfo(tmp_path, 24 * GIB, 20 * GIB), cgroup=None)
    assert machine == MachineMemory(24 * GIB, 20 * GIB, "RAM")
    assert JudgeConfig().memory_limit_bytes == memory.AUTO
    cap, why = memory.resolve_cap(memory.AUTO, 1, machine)
    assert cap == 12 * GIB  # a reference and a candidate at once
    assert "the machine's 24.0 GiB, shared by 2 workers" in why
    assert memory.resolve_cap(memory.AUTO, 2, machine)[0] == 6 * GIB  # two judges at once: four workers


def test_a_cgroup_limit_below_the_ram_is_the_machine(tmp_path):
    group = _v2_group(tmp_path / "cg", {"a": "8589934592", "a/b": "max"}, current=3 * GIB, file=1 * GIB)
    machine = memory.machine_memory(_meminfo(tmp_path, 64 * GIB, 60 * GIB), cgroup=group)
    # the limit is the ancestor's; the room under it counts page cache as free
    assert machine == MachineMemory(8 * GIB, 6 * GIB, "cgroup")
    assert machine.describe() == "the 8.0 GiB its cgroup allows"
    assert memory.resolve_cap(memory.AUTO, 1, machine)[0] == 4 * GIB


def test_a_cgroup_above_the_ram_changes_nothing(tmp_path):
    group = _v2_group(tmp_path / "cg", {"a": str(128 * GIB)}, current=1 * GIB)
    machine = memory.machine_memory(_meminfo(tmp_path, 16 * GIB, 10 * GIB), cgroup=group)
    assert machine == MachineMemory(16 * GIB, 10 * GIB, "RAM")


@pytest.mark.parametrize("total, judges, cap", [
    (3 * GIB, 1, memory.CAP_FLOOR),        # a small machine: the floor, above the fair share
    (1 * GIB, 1, 1 * GIB),                 # never more than the machine has
    (32 * GIB, 16, memory.CAP_FLOOR),      # many judges on a mid-sized machine
    (1024 * GIB, 1, memory.CAP_CEILING),   # a large machine: the ceiling
])
def test_the_default_cap_keeps_within_its_floor_and_ceiling(total, judges, cap):
    assert memory.default_cap(MachineMemory(total, total, "RAM"), judges) == cap


def test_a_cap_can_be_fixed_or_switched_off():
    machine = MachineMemory(24 * GIB, 20 * GIB, "RAM")
    assert memory.resolve_cap(512 * MIB, 1, machine)[0] == 512 * MIB
    assert memory.resolve_cap(None, 1, machine)[0] is None
    assert memory.resolve_cap(memory.AUTO, 1, None)[0] == memory.CAP_CEILING  # nothing to size it from
    for wrong in ("unlimited", 0, -1, True, 2.5e9):
        with pytest.raises(ValueError, match="memory_limit_bytes"):
            memory.resolve_cap(wrong, 1, machine)
        with pytest.raises(ConfigError, match="memory_limit_bytes"):
            JudgeConfig(memory_limit_bytes=wrong)
    with pytest.raises(ConfigError, match="judges_at_once"):
        JudgeConfig(judges_at_once=0)


def test_the_cgroup_is_found_from_the_process_own_entry(tmp_path):
    root = tmp_path / "unified"
    group = _v2_group(root, {"user.slice": "max", "user.slice/judge": "4294967296"})
    (tmp_path / "cgroup").write_text("0::/user.slice/judge\n")
    (tmp_path / "mounts").write_text(f"proc /proc proc rw 0 0\ncgroup2 {root} cgroup2 rw,nosuid 0 0\n")
    assert memory.memory_cgroup(tmp_path / "cgroup", tmp_path / "mounts") == group
    # cgroup v1: the memory controller's hierarchy, its "no limit" a number near 2**63
    v1 = tmp_path / "v1"
    (v1 / "pod").mkdir(parents=True)
    (v1 / "pod" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (tmp_path / "cgroup").write_text("5:memory:/pod\n4:cpu,cpuacct:/pod\n0::/\n")
    (tmp_path / "mounts").write_text(f"cgroup {v1} cgroup rw,memory 0 0\n")
    found = memory.memory_cgroup(tmp_path / "cgroup", tmp_path / "mounts")
    assert found == Cgroup(v1 / "pod", v1, 1)
    assert memory.machine_memory(_meminfo(tmp_path, 16 * GIB, 9 * GIB), cgroup=found).limited_by == "RAM"


def test_the_kernels_oom_kills_are_counted_per_cgroup_else_per_machine(tmp_path):
    group = _v2_group(tmp_path / "cg", {"a": "max"})
    (group.path / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 2\noom_kill 1\n")
    (tmp_path / "vmstat").write_text("pgfault 100\noom_kill 7\n")
    before = memory.oom_kills(group, tmp_path / "vmstat")
    assert before == memory.OomCounter("cgroup", 1)
    assert memory.oom_kills(None, tmp_path / "vmstat") == memory.OomCounter("machine", 7)
    (group.path / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 3\noom_kill 2\n")
    assert memory.killed_for_memory(before, memory.oom_kills(group, tmp_path / "vmstat"))
    assert not memory.killed_for_memory(before, before)
    assert not memory.killed_for_memory(None, before)


# -- a worker the kernel kills ----------------------------------------------------------------
@pytest.fixture
def kernel(tmp_path, monkeypatch) -> Path:
    """The judge's cgroup, as files the test writes: its OOM-kill counter (memory.events) and a
    machine of 16 GiB. Returns the counter's file."""
    group = _v2_group(tmp_path / "cg", {"judge": "max"})
    events = group.path / "memory.events"
    events.write_text("oom 0\noom_kill 0\n")
    monkeypatch.setattr(memory, "memory_cgroup", lambda *args: group)
    monkeypatch.setattr(memory, "PROC_MEMINFO", _meminfo(tmp_path, 16 * GIB, 12 * GIB))
    return events


@pytest.fixture
def watched_worker(tmp_path: Path, kernel: Path):
    """A real worker, waiting for its first command, under a cap far above what it holds, so
    that the memory watcher measures it; started once the kernel's counter is in place."""
    spec = WorkerSpec(name="candidate", run_dir=tmp_path / "run", policy=SandboxPolicy(isolate_network=False),
                      env={"OMP_NUM_THREADS": "1"}, memory_limit_bytes=64 * GIB)
    worker = WorkerProcess(spec)
    deadline = time.monotonic() + 30
    while worker.rss_seen_bytes == 0:
        assert time.monotonic() < deadline, "the memory watcher never measured the worker"
        time.sleep(0.05)
    yield worker
    worker.close()


def _killed_from_outside(worker: WorkerProcess) -> WorkerError:
    os.kill(worker.pid, signal.SIGKILL)  # as the kernel's out-of-memory killer does
    worker.proc.wait(timeout=10)
    with pytest.raises(WorkerError) as info:
        worker.request("run", 10)
    return info.value


def test_a_worker_the_oom_killer_ends_is_out_of_memory_with_the_figures(kernel, watched_worker):
    kernel.write_text("oom 1\noom_kill 1\n")
    error = _killed_from_outside(watched_worker)
    held = memory.gib(watched_worker.rss_seen_bytes)
    assert error.kind == "runtime_error"
    assert error.message.startswith(f"out of memory: the candidate process held {held} of the machine's 16.0 GiB "
                                    "when the kernel's out-of-memory killer ended it"), error.message
    assert "below its own cap of 64.0 GiB" in error.message
    assert "Judge fewer at once" in error.message and "lower cap" in error.message
    assert error.out_of_memory == {"by": "kernel", "held_bytes": watched_worker.rss_seen_bytes,
                                   "machine_bytes": 16 * GIB, "limit_bytes": 64 * GIB}


def test_a_sigkill_without_an_oom_kill_is_not_called_out_of_memory(kernel, watched_worker):
    error = _killed_from_outside(watched_worker)
    assert "out of memory" not in error.message
    assert error.message.startswith("the candidate process was killed by SIGKILL, which the judge did not send; "
                                    "it held "), error.message
    assert error.out_of_memory is None


# -- whole runs ---------------------------------------------------------------------------------
@pytest.fixture
def small_machine(tmp_path, monkeypatch) -> None:
    """A machine of 1 GiB with no cgroup limit, as the judge reads it."""
    monkeypatch.setattr(memory, "memory_cgroup", lambda *args: None)
    monkeypatch.setattr(memory, "PROC_MEMINFO", _meminfo(tmp_path, 1 * GIB, 900 * MIB))


@pytest.mark.slow
def test_a_candidate_over_the_sized_cap_is_out_of_memory_with_the_figure(judge_config, task, fixture_solution,
                                                                         small_machine):
    judge = Judge(judge_config(memory_limit_bytes=memory.AUTO))
    v = judge.verify(task, fixture_solution("cpu/memory_hog"))  # its forward fills 2 GiB
    assert v.status == "runtime_error" and not v.correct and v.reward == -1, v.feedback
    assert v.error.startswith("out of memory: the candidate process exceeded its memory limit of 1.0 GiB and was "
                              "killed (it held "), v.error
    assert "use less memory" in v.error
    assert "out of memory" in v.feedback and "1.0 GiB" in v.feedback
    assert v.settings["fault"] == "candidate"
    oom = v.settings["out_of_memory"]
    assert oom["process"] == "candidate" and oom["by"] == "judge" and oom["limit_bytes"] == GIB
    assert oom["held_bytes"] > GIB
    assert v.isolation["candidate"]["limits"]["memory_bytes"] == GIB
    assert "the machine's 1.0 GiB" in v.isolation["candidate"]["limits"]["memory"]


@pytest.mark.slow
def test_a_run_with_no_room_to_start_is_refused_with_the_figures(judge_config, task, fixture_solution,
                                                                  tmp_path, monkeypatch):
    monkeypatch.setattr(memory, "memory_cgroup", lambda *args: None)
    monkeypatch.setattr(memory, "PROC_MEMINFO", _meminfo(tmp_path, 8 * GIB, 300 * MIB))
    monkeypatch.setattr(run_workers, "MEMORY_WAIT_S", 1.0)
    judge = Judge(judge_config())
    v = judge.verify(task, fixture_solution("cpu/correct"))
    assert v.status == "runtime_error" and not v.correct, v.feedback
    assert v.error.startswith("out of memory: not started, since 2 worker process(es) need at least 0.5 GiB free "
                              "to start, and for 1 s only 0.3 GiB of the machine's 8.0 GiB was"), v.error
    assert v.settings["fault"] == "machine"
    assert "candidate" not in v.isolation  # no worker was started


@pytest.mark.slow
def test_a_run_waits_for_memory_to_come_free(judge_config, task, fixture_solution, tmp_path, monkeypatch):
    """Another judge's workers end while this run waits: it starts then, and is judged."""
    monkeypatch.setattr(memory, "memory_cgroup", lambda *args: None)
    monkeypatch.setattr(memory, "PROC_MEMINFO", _meminfo(tmp_path, 8 * GIB, 300 * MIB))
    (tmp_path / "later").mkdir()
    freed = _meminfo(tmp_path / "later", 8 * GIB, 6 * GIB)
    said: list[str] = []

    def progress(message: str) -> None:
        said.append(message)
        if message.startswith("waiting for memory"):
            monkeypatch.setattr(memory, "PROC_MEMINFO", freed)

    judge = Judge(judge_config(), progress=progress)
    v = judge.verify(task, fixture_solution("cpu/correct"))
    assert v.status == "ok" and v.correct, v.feedback
    assert "waiting for memory: 0.3 GiB free, 0.5 GiB needed to start" in said


@pytest.mark.slow
def test_a_refusal_while_the_candidate_runs_is_the_candidates(judge_config, task, fixture_solution, tmp_path,
                                                              monkeypatch):
    """Memory runs short once the candidate's process is up: what it holds may be the cause, so
    the refusal to start the timing's staging process fails it closed, not the machine."""
    monkeypatch.setattr(memory, "memory_cgroup", lambda *args: None)
    monkeypatch.setattr(memory, "PROC_MEMINFO", _meminfo(tmp_path, 8 * GIB, 6 * GIB))
    monkeypatch.setattr(run_workers, "MEMORY_WAIT_S", 1.0)
    (tmp_path / "later").mkdir()
    short = _meminfo(tmp_path / "later", 8 * GIB, 200 * MIB)

    def progress(message: str) -> None:
        if message.startswith("check 5/"):
            monkeypatch.setattr(memory, "PROC_MEMINFO", short)

    judge = Judge(judge_config(), progress=progress)
    v = judge.judge(task, fixture_solution("cpu/correct"))
    assert v.status == "runtime_error" and not v.correct and v.reward == -1, v.feedback
    assert v.error.startswith("out of memory: not started, since 1 worker process(es) need at least 0.2 GiB"), v.error
    assert v.settings["fault"] == "candidate"
    assert len(v.checks) == 5 and all(c.passed for c in v.checks)  # verified, then refused
