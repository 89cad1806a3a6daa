"""One judging run's state: what it judges, where its files are, who the candidate runs as, its
secret seeds and what it has found so far. The parts of a run hold this object, and the parts
they use, which they are handed: ``run_workers.RunWorkers`` starts and talks to its processes,
``run_verify.RunVerification`` checks the candidate (through the workers), ``run_timing.RunTiming``
times it (through both). ``judge._Run`` puts them together."""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import threading
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..solution import Solution
from ..task import Task
from ..workloads import tolerance_of
from .config import JudgeConfig, TimingConfig
from .run_support import shared_runs_dir
from .sandbox import unprivileged_ids
from .timing import for_backend
from .verdict import Verdict
from .worker_process import WorkerProcess

if TYPE_CHECKING:
    from .judge import Judge


class RunState:
    """The state of one verify/profile run (or of a reference run alone: ``solution`` None). Its
    directory, and every process the run started, go when it is closed."""

    ref: WorkerProcess  # the trusted reference process the checks use, once started
    cand: WorkerProcess  # the candidate's process, once started

    def __init__(self, judge: Judge, task: Task, solution: Solution | None, module: Path | None,
                 verdict: Verdict) -> None:
        self.judge, self.task, self.solution, self.verdict = judge, task, solution, verdict
        # The judge's settings, with the tolerance a task's workload sets for itself (workloads.py).
        tolerance = tolerance_of(task)
        self.cfg: JudgeConfig = replace(judge.config, **tolerance) if tolerance else judge.config
        # how many judges' workers share the machine's memory, for the workers' caps (a group's
        # candidates count as judges of their own)
        self.judges_sharing = self.cfg.judges_at_once
        self.timing_config: TimingConfig = for_backend(self.cfg.timing, judge.backend)  # tolerances for this backend
        self.rng: random.Random = judge._rng
        self.stack = ExitStack()  # what closing the run closes: its processes, descriptors, rulesets
        self.lock = threading.Lock()  # for what workers started in parallel record
        self.run_as, self.privileges = candidate_user(judge)
        # An unprivileged candidate must reach its run directory, which the judge's cache (often
        # under a private home) may not allow: such runs live in the system's temporary directory.
        runs = judge.cache_dir / "runs" if self.run_as is None else shared_runs_dir()
        runs.mkdir(exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix="cuda-agent-run-", dir=runs))
        os.chmod(self.dir, 0o700 if self.run_as is None else 0o711)
        (self.dir / "task").mkdir(mode=0o755)
        self.task_path = self.dir / "task" / "reference_task.py"
        self.task_path.write_text(task.source)
        self.solution_dir = self.dir / "solution"
        if solution is not None:
            solution.write_to(self.solution_dir)
        self.module: Path | None = None
        if module is not None:  # a private copy: the candidate never needs the judge's cache
            (self.dir / "extension").mkdir(mode=0o755)
            self.module = self.dir / "extension" / module.name
            shutil.copyfile(module, self.module)
            os.chmod(self.module, 0o755)
        self.device_info: dict[str, Any] = {}  # the reference's word on the device, never the candidate's
        self.processes: list[WorkerProcess] = []  # every worker started, for their peak memory
        self.weight_seed: int | None = None  # the weights the candidate holds now
        self.buffer: str | None = None  # in a group: the name of the reference's exchange buffer for this candidate

    def seed(self) -> int:
        """A fresh secret seed (weights, inputs, digest keys), never told to the candidate first."""
        return self.rng.getrandbits(63)

    def close(self) -> None:
        self.stack.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def candidate_user(judge: Judge) -> tuple[tuple[int, int] | None, str]:
    """Which user a candidate runs as, when the judge is root: the (uid, gid), or None to stay
    uid 0 (without capabilities unless that is switched off: ``sandbox.policy_for``), and what
    was decided, in words."""
    if os.geteuid() != 0:
        return None, f"not elevated (uid {os.geteuid()})"
    if not judge.config.drop_privileges:
        return None, "root: dropping privileges is switched off"
    ids = unprivileged_ids()
    if ids is None:
        return None, "uid 0 without capabilities (no unprivileged user)"
    unreachable = judge.unreachable_for_candidates()
    if unreachable:
        return None, ("uid 0 without capabilities: an unprivileged user cannot reach "
                      + ", ".join(unreachable[:4]) + (" and more" if len(unreachable) > 4 else "")
                      + ". To run candidates as another user, let other users reach the Python "
                      "installation (chmod o+rx on it and o+x on every directory above it), or "
                      "install Python outside a private home, or name such an interpreter with "
                      "JudgeConfig(worker_python=...)")
    return ids, f"dropped to uid {ids[0]}"
