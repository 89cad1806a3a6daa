"""Group judging: the candidates of one task judged together, against one reference run.

A GRPO group (or a benchmark problem's samples) is many candidates for one task. Judged one by
one, each would start its own reference process and have it draw weights, compute every check's
output and its float64 yardstick again, on seeds no other candidate sees. ``judge_group`` shares
that: one reference process for the group, one draw of secret seeds per check, one reference
forward per check whose output stays on the GPU, and every candidate's output compared with it
there, each through an exchange buffer of its own (``device_exchange``), so that no candidate can
see or touch another's claim. Everything that is the candidate's stays its own: its build, a
fresh sandboxed process, its records, its verdict. The candidates run each check at the same
time. Those that pass are then profiled one at a time, as ``Judge.evaluate`` profiles one (a
device times one candidate at a time anyway, and no other thread of the judge then shares its
interpreter with the one that keeps the clock): each with a stager of its own, beside the
group's reference, already warm, for the calibration and the rechecks of timed calls on the cuda
backend; on the cpu backend, where the input arena is handed to a process as it starts, beside a
reference of its own. Each candidate's processes end as soon as its run does (a timed candidate
holds device memory for the rechecks of its timed calls); the reference keeps one exchange buffer
per candidate (an output's size each) until the group ends. A group run is one judge's work: to
spread a large group over a pool's judges, judge it as several (``cluster.pool.split_group``; the
training reward does).

Seeds shared within a group give a candidate nothing it would not have alone: a check's seeds
are drawn only once every candidate has finished the check before, and a candidate learns them
only in the call it is checked with. The verdicts are those ``evaluate`` gives, but for the
wall-clock figures (``seconds``: start and verify are the group's).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Callable

from ..solution import Solution
from ..task import Task
from . import fork_server
from .sandbox import ProcessKind
from .run_support import RunStopped
from .run_verify import HELD
from .verdict import Verdict

REFERENCE_FAILURE_FIELDS = ("status", "correct", "error", "details")


def judge_group(judge, task: Task, solutions: list[Solution], stage: str) -> list[Verdict]:
    """One verdict per solution, in order (``Judge.evaluate_many``)."""
    from .judge import _unexplained

    started = time.perf_counter()
    verdicts = [judge.new_verdict(task, s) for s in solutions]
    if not solutions:
        return []
    if stage != "compile" and judge.config.fork_workers:
        fork_server.start_soon(judge.python, judge.worker_env(ProcessKind.REFERENCE))
    modules: dict[int, Path | None] = {}

    def build(k: int) -> None:
        try:
            modules[k] = judge.compile_stage(task, solutions[k], verdicts[k])
        except RunStopped:
            pass
        except Exception as exc:  # fail closed, as evaluate does
            _unexplained(verdicts[k], exc)

    if any(s.layout == "workspace" for s in solutions):
        try:
            judge.builder  # made once, before the threads that share it
        except Exception:
            pass  # each build meets the same error and says it in its verdict
    # The builder takes its own turns per source; its compilers use every core as they can.
    with ThreadPoolExecutor(min(len(solutions), os.cpu_count() or 1)) as pool:
        list(pool.map(build, range(len(solutions))))
    if stage != "compile" and modules:
        try:
            _GroupRun(judge, task, {k: (solutions[k], modules[k], verdicts[k]) for k in sorted(modules)}).run(stage)
        except Exception as exc:  # the group's own machinery: every candidate still judged is told
            for k in modules:
                if verdicts[k].status == "ok":
                    _unexplained(verdicts[k], exc)
    for solution, verdict in zip(solutions, verdicts):
        judge.settle(verdict, stage, solution, started)
    return verdicts


class _GroupRun:
    """One reference run shared by the runs of a group's candidates (``judge._Run`` each)."""

    def __init__(self, judge, task: Task, members: dict[int, tuple[Solution, Path | None, Verdict]]):
        self.judge, self.task, self.members = judge, task, members

    def run(self, stage: str) -> None:
        from .judge import _Run

        judge = self.judge
        scratch = Verdict(status="ok", task=self.task.name, task_sha256=self.task.sha256, solution_sha256="",
                          backend=judge.backend)
        with ExitStack() as stack:
            reference = stack.enter_context(_Run(judge, self.task, None, None, scratch))
            runs = {k: stack.enter_context(_Run(judge, self.task, s, m, v)) for k, (s, m, v) in self.members.items()}
            for run in (reference, *runs.values()):
                run.state.judges_sharing = judge.config.judges_at_once * len(runs)  # each candidate a judge's share
            for k, run in runs.items():
                run.state.buffer = str(k)  # its own exchange buffer in the reference, for its checks and rechecks
            live = self._start(reference, runs)
            if live:
                live = self._verify(reference, runs, live, last=stage == "verify")
            if stage == "profile" and live:
                self._profile(reference, runs, live)

    # -- the parts ----------------------------------------------------------------------------
    def _each(self, runs: dict, keys: list[int], step: Callable, at_once: int | None = None,
              last: bool = False) -> list[int]:
        """``step(key, run)`` for each run of ``keys`` at the same time (``at_once`` at most); the keys
        of those it did not stop. A run that fails has its verdict say why, and its processes end
        then, not with the group; so do all with ``last`` (the run's last step): a timed run's
        processes hold device memory for the rechecks of its timed calls."""
        from .judge import _unexplained

        def one(k: int) -> bool:
            ended = last
            try:
                step(k, runs[k])
                return True
            except RunStopped:
                ended = True
                return False
            except Exception as exc:
                _unexplained(runs[k].state.verdict, exc)
                ended = True
                return False
            finally:
                if ended:
                    runs[k].__exit__(None, None, None)

        if not keys:
            return []
        with ThreadPoolExecutor(min(len(keys), at_once or len(keys))) as pool:
            kept = list(pool.map(one, keys))
        return [k for k, ok in zip(keys, kept) if ok]

    def _start(self, reference, runs: dict) -> list[int]:
        """The group's reference and every candidate's process, all at once."""
        judge = self.judge
        judge.progress(f"starting the reference and {len(runs)} candidate processes")

        def start_candidate(k: int, run) -> None:
            (run.state.cand,) = run.workers.start((ProcessKind.CANDIDATE, "eager"))

        t0 = time.perf_counter()
        with ThreadPoolExecutor(1) as pool:
            started = pool.submit(reference.workers.start, (ProcessKind.REFERENCE, "eager"))
            live = self._each(runs, list(runs), start_candidate)
            try:
                (reference.state.ref,) = started.result()
            except RunStopped:
                self._reference_failed(reference, runs, live)
                return []
        seconds = time.perf_counter() - t0
        for k in live:
            run, shared = runs[k].state, reference.state
            run.ref, run.device_info = shared.ref, shared.device_info
            run.verdict.device = shared.device_info
            run.verdict.isolation["reference-eager"] = shared.verdict.isolation.get("reference-eager")
            run.verdict.seconds["start"] = seconds
        return live

    def _verify(self, reference, runs: dict, live: list[int], last: bool) -> list[int]:
        """Every check drawn once and made by every candidate still running; those judged
        correct. A candidate is checked on every check, as alone, whatever it failed before."""
        judge, cfg = self.judge, self.judge.config
        t0 = time.perf_counter()
        audit = reference.checks.new_audit()
        with judge.beside_timing():
            for i in range(cfg.num_checks):
                judge.progress(f"check {i + 1}/{cfg.num_checks} of {len(live)} candidate(s)")
                try:
                    draw = reference.checks.draw_check(i, buffers=[str(k) for k in live])
                except RunStopped:
                    self._reference_failed(reference, runs, live)
                    return []
                live = self._each(runs, live, lambda k, run: run.checks.check_candidate(draw))
                draw.add_to(audit)
                if reference.checks.hold():
                    try:
                        reference.workers.call(reference.state.ref, "release", cfg.call_timeout_s, {"hold": HELD})
                    except RunStopped:
                        self._reference_failed(reference, runs, live)
                        return []
                if not live:
                    return []
        seconds = time.perf_counter() - t0
        for k in live:
            runs[k].state.verdict.seconds["verify"] = seconds
        return self._each(runs, live, lambda k, run: run.checks.end_verify(audit), last=last)

    def _profile(self, reference, runs: dict, correct: list[int]) -> None:
        """Each correct candidate profiled in turn, beside the group's reference (cuda) or one of
        its own (cpu)."""
        shared = self.judge.backend == "cuda"
        if not shared:
            reference.state.ref.close()

        def profile(k: int, run) -> None:
            if not shared:
                (run.state.ref,) = run.workers.start((ProcessKind.REFERENCE, "eager"))
            run.timing.profile()

        self._each(runs, correct, profile, at_once=1, last=True)

    def _reference_failed(self, reference, runs: dict, live: list[int]) -> None:
        """The group's reference failed: so has every candidate's run that was still going, for
        the task's reason."""
        failed = reference.state.verdict
        for k in live:
            verdict = runs[k].state.verdict
            for name in REFERENCE_FAILURE_FIELDS:
                setattr(verdict, name, getattr(failed, name))
            verdict.notes.extend(n for n in failed.notes if n not in verdict.notes)
            verdict.settings["fault"] = failed.settings.get("fault", "task")
            if "out_of_memory" in failed.settings:
                verdict.settings["out_of_memory"] = failed.settings["out_of_memory"]
