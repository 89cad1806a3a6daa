"""The judge: build, verify and time a candidate, and return a verdict with the paper's reward.

One judging run:

1. **compile**: check the solution's format, scan its sources for forbidden constructs
   (``static_checks``), and build its extension (workspace layout) in a judge-owned directory.
2. **verify**: a reference process and a candidate process start fresh. For each check the
   reference draws new weights from a secret seed (moved off their default init after the first
   check) and returns its state dict, which the judge loads into ``ModelNew``; both processes
   build the same inputs from another secret seed (rescaled or shifted on later checks) and
   return their outputs; the judge compares them. The candidate never sees expected outputs.
   The candidate's process records the ATen ops, GPU kernels, threads and numerics flags of
   each forward (``recording``), which the judge turns into violations (``evidence``); and the
   reference outputs show whether a null solution would pass the task (``audit``).
3. **profile**: the candidate is timed on fresh inputs per call; the outputs of a few timed
   calls, picked after timing, are checked against the reference too, and its time must be
   credible next to the trusted reference's overheads and above the physical floor (``floor``).
   Eager and torch.compile baselines are timed the same way in fresh processes, or read from the
   baseline cache.

Any failure of the candidate's process (crash, hang, memory, protocol) ends the run with the
reason; failures of the reference are reported as the task's fault. Nothing raises out of
``evaluate`` for a bad candidate.
"""

from __future__ import annotations

import os
import random
import resource
import sys
import threading
import time
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Iterator

from filelock import FileLock

from ..device import SharedCacheFlush, machine_gpu, resolve_backend, shared_cache_flush
from ..errors import SolutionFormatError
from ..solution import Solution, validate_solution
from ..task import Task
from ..workloads import declares_workloads, tolerance_of
from . import fork_server, linked_symbols
from .baselines import BaselineCache, BaselineKey
from .build import ExtensionBuilder
from .config import JudgeConfig
from .device_gate import DeviceGate
from .fork_server import INDUCTOR_CACHE_VARIABLE
from .op_counter import OpCounterUnavailable
from .op_counter import build as build_op_counter
from .over_workloads import judge_over_workloads
from .reference import ReferenceReport
from .reward import rewards
from .sandbox import CompileSandbox, ProcessKind, unreachable_for_others
from .seccomp import SeccompUnavailable, compiled_filter
from .toolchain import Toolchain, detect_toolchain, find_cuda_home
from .verdict import Verdict, compile_speedup_withheld, render_feedback, speedup_withheld
from .worker_process import PACKAGE_PARENT
from .run_support import RunStopped, fail, median_ms, shared_runs_dir, smt_siblings, STAGES, Progress
from .run_state import RunState
from .run_timing import RunTiming
from .run_verify import RunVerification
from .run_workers import RunWorkers

NOT_BUILT_AT_COMPILE = ("format and rules checked, nothing built yet: the judge builds a single-file "
                        "solution's load_inline sources when verify imports model_new.py, and its build errors "
                        "show there")


class Judge:
    """Judges candidate solutions for tasks. Reusable and safe to share across threads."""

    def __init__(self, config: JudgeConfig | None = None, progress: Progress | None = None):
        self.config = config or JudgeConfig()
        self.backend = resolve_backend(self.config.backend)
        self.cache_dir = self.config.cache_dir
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.progress = progress or (lambda message: None)
        self.baselines = BaselineCache(self.cache_dir)
        self._builder: ExtensionBuilder | None = None
        self._op_counter: tuple[Path | None, str] | None = None
        self._counter_lock = threading.Lock()
        self._rng = random.Random(self.config.seed) if self.config.seed is not None else random.SystemRandom()
        self._unreachable: list[str] | None = None
        self._shared_flush: tuple[SharedCacheFlush | None] | None = None

    # -- public API ---------------------------------------------------------------------------
    def compile(self, task: Task, solution: Solution) -> Verdict:
        return self.evaluate(task, solution, stage="compile")

    def verify(self, task: Task, solution: Solution) -> Verdict:
        return self.evaluate(task, solution, stage="verify")

    def judge(self, task: Task, solution: Solution) -> Verdict:
        return self.evaluate(task, solution, stage="profile")

    def check_reference(self, task: Task) -> ReferenceReport:
        """Run the task's reference alone: does it reproduce its own output, and what are its
        eager and torch.compile baselines (timed once per device, then cached)?"""
        started = time.perf_counter()
        report = ReferenceReport(task=task.name, task_sha256=task.sha256, backend=self.backend)
        scratch = Verdict(status="ok", task=task.name, task_sha256=task.sha256, solution_sha256="",
                          backend=self.backend)
        try:
            with _Run(self, task, None, None, scratch) as run:
                run.timing.check_reference(report)
        except RunStopped:
            report.ok, report.error = False, scratch.error
        # every worker has ended here, each with its high-water mark read before it did
        report.worker_peak_bytes = max((w.peak_rss_bytes for w in run.state.processes), default=0) or None
        report.judge_peak_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        report.device = scratch.device
        report.seconds = time.perf_counter() - started
        return report

    @property
    def cpu_threads(self) -> int | None:
        """Threads every model runs with on the cpu backend; None on cuda."""
        return self.config.timing.cpu_threads if self.backend == "cpu" else None

    @property
    def builder(self) -> ExtensionBuilder:
        if self._builder is None:
            capability = None
            if self.backend == "cuda":
                import torch

                capability = torch.cuda.get_device_capability(self.config.device_index)
            toolchain: Toolchain = detect_toolchain(self.backend, capability, self.config.fast_math)
            program, note = self.syscall_filter()
            sandbox = CompileSandbox(hidden=(self.cache_dir, shared_runs_dir(), *self.hidden_paths()),
                                     confine_filesystem=self.config.confine_filesystem,
                                     isolate_network=self.config.isolate_network,
                                     seccomp_program=program, seccomp_note=note)
            self._builder = ExtensionBuilder(toolchain, self.cache_dir, self.config.build_timeout_s, sandbox=sandbox)
        return self._builder

    def op_counter(self) -> tuple[Path | None, str]:
        """The op counter candidates load (built once into the cache), and what it does; or None
        and why there is none."""
        if not self.config.runtime_checks:
            return None, "not counted: runtime checks are off"
        with self._counter_lock:
            if self._op_counter is None:
                try:
                    self._op_counter = (build_op_counter(self.cache_dir),
                                        "every call's ATen ops counted, checks and timed calls alike")
                except OpCounterUnavailable as exc:
                    self._op_counter = (None, f"timed calls' ATen ops not counted: the counter did not build ({exc})")
        return self._op_counter

    def syscall_filter(self, unix_sockets: bool = True) -> tuple[bytes | None, str]:
        """The seccomp program for candidates and their compiles (or None), and what it is;
        ``unix_sockets=False``: without the Unix-socket rule, which a worker adds itself."""
        if not self.config.filter_syscalls:
            return None, "no seccomp filter: switched off"
        try:
            found = compiled_filter(unix_sockets)
        except (SeccompUnavailable, OSError) as exc:
            return None, f"no seccomp filter: {exc}"
        return found.program, found.description

    def evaluate(self, task: Task, solution: Solution, stage: str = "profile") -> Verdict:
        if stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}")
        if stage != "compile" and declares_workloads(task):
            return judge_over_workloads(self, task, [solution], stage)[0]
        verdict = self.new_verdict(task, solution)
        started = time.perf_counter()
        if stage != "compile" and self.config.fork_workers:
            # The workers' fork server imports torch while the solution is checked and built.
            fork_server.start_soon(self.python, self.worker_env(ProcessKind.REFERENCE))
        try:
            module = self.compile_stage(task, solution, verdict)
            if stage != "compile":
                with _Run(self, task, solution, module, verdict) as run:
                    run.checks.verify()
                    if stage == "profile":
                        run.timing.profile()
        except RunStopped:
            pass
        except Exception as exc:  # fail closed: whatever the candidate's files or replies set off, a verdict
            _unexplained(verdict, exc)
        self.settle(verdict, stage, solution, started)
        return verdict

    def evaluate_many(self, task: Task, solutions: list[Solution], stage: str = "profile") -> list[Verdict]:
        """Judge the candidates of one task together (a GRPO group, a problem's samples): one
        verdict each, as ``evaluate`` gives it, against one reference run for the group's checks
        (``group``). Never raises for a bad candidate."""
        if stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}")
        if stage != "compile" and declares_workloads(task):
            return judge_over_workloads(self, task, list(solutions), stage)
        from .group import judge_group

        return judge_group(self, task, list(solutions), stage)

    def new_verdict(self, task: Task, solution: Solution) -> Verdict:
        """A verdict about to be judged: ok until a stage says otherwise, with the settings."""
        cfg = self.config
        verdict = Verdict(status="ok", task=task.name, task_sha256=task.sha256,
                          solution_sha256=solution.sha256, backend=self.backend,
                          settings={"num_checks": cfg.num_checks, "atol": cfg.atol, "rtol": cfg.rtol,
                                    "norm_rtol": cfg.norm_rtol, "static_checks": cfg.static_checks,
                                    "runtime_checks": cfg.runtime_checks,
                                    "margin": cfg.margin, "recheck_calls": cfg.recheck_calls,
                                    "timing_attempts": cfg.timing_attempts,
                                    "timing": cfg.timing.__dict__, "layout": solution.layout})
        verdict.settings.update(tolerance_of(task))  # a workload's own, where it sets one (workloads.py)
        if solution.ignored:
            verdict.notes.append("ignored workspace files (the judge supplies its own infrastructure): "
                                 + ", ".join(solution.ignored[:12]))
        return verdict

    def settle(self, verdict: Verdict, stage: str, solution: Solution, started: float) -> None:
        """What every verdict ends with: its total time, which speedups are paid, the rewards
        and the feedback."""
        cfg = self.config
        verdict.seconds["total"] = time.perf_counter() - started
        # A time the judge does not believe (timing.stability_problem) earns no speed milestone, and
        # neither does speed bought with precision the task did not offer, or precision not measured:
        # nor does it show as a speedup anywhere (the measured ratios stay, as diagnostics).
        if verdict.correct and median_ms(verdict, "candidate") is not None:
            verdict.speedup_withheld = speedup_withheld(verdict)
            if not verdict.speedup_withheld:
                verdict.compile_speedup_withheld = compile_speedup_withheld(verdict)
        if verdict.speedup_withheld:
            verdict.timing_integrity["unpaid_speedups"] = {"eager": verdict.speedup_vs_eager,
                                                           "compile": verdict.speedup_vs_compile}
            verdict.speedup_vs_eager = verdict.speedup_vs_compile = None
        elif verdict.compile_speedup_withheld:
            verdict.timing_integrity["unpaid_speedups"] = {"compile": verdict.speedup_vs_compile}
            verdict.speedup_vs_compile = None
        candidate = median_ms(verdict, "candidate") if not verdict.speedup_withheld else None
        compile_ms = None if verdict.compile_speedup_withheld else median_ms(verdict, "compile")
        scores = verdict.roofline.get("sol_score") or {}
        verdict.sol_score = {"eager": scores.get("eager") if candidate else None,
                             "compile": scores.get("compile") if candidate and compile_ms else None}
        verdict.reward, verdict.reward_continuous, verdict.reward_sol = rewards(
            verdict.correct, candidate, median_ms(verdict, "eager"), compile_ms, verdict.sol_score["compile"], cfg.margin)
        if stage == "compile" and verdict.status == "ok":
            verdict.feedback = "compiled successfully (not yet verified)" if solution.layout == "workspace" else \
                NOT_BUILT_AT_COMPILE
        else:
            verdict.feedback = render_feedback(verdict)

    # -- stage 1 ------------------------------------------------------------------------------
    def compile_stage(self, task: Task, solution: Solution, verdict: Verdict) -> Path | None:
        self.progress("checking the solution's format")
        try:
            validate_solution(solution, task, self.backend)
        except SolutionFormatError as exc:
            fail(verdict, "compile_error", str(exc))
        if self.config.static_checks:
            from .static_checks import scan_solution

            t0 = time.perf_counter()
            violations = scan_solution(solution, task, self.backend)
            verdict.seconds["static_checks"] = time.perf_counter() - t0
            if violations:
                verdict.violations.extend(violations)
                rules = sorted({v.rule for v in violations})
                fail(verdict, "forbidden", f"{len(violations)} violation(s) of the judge's rules: "
                      + ", ".join(rules))
        if solution.layout != "workspace":
            # a single-file solution's load_inline is built when model_new.py is imported, at verify
            verdict.build = {"built": False, "note": NOT_BUILT_AT_COMPILE}
            return None
        self.progress("building the extension")
        with self.beside_timing(host=True):
            result = self.builder.build(solution)
        verdict.seconds["build"] = result.seconds
        verdict.isolation["compile"] = result.confinement or {"note": "nothing compiled: the module was cached"}
        verdict.build = {"cache_hit": result.cache_hit, "objects_compiled": result.objects_compiled,
                         "objects_total": result.objects_total, "seconds": result.seconds,
                         "step_seconds": result.step_seconds or {},
                         "toolchain": self.builder.toolchain.identity, "arch": self.builder.toolchain.arch}
        if not result.ok:
            verdict.details = result.log
            fail(verdict, "compile_error", result.errors)
        if self.config.runtime_checks and (refused := linked_symbols.refusal(result.module_path, self.backend)):
            status, error, found = refused
            verdict.violations.extend(found)
            fail(verdict, status, error, fault="candidate" if found else "judge")
        return result.module_path

    def unreachable_for_candidates(self) -> list[str]:
        """What an unprivileged candidate process would need and could not reach (checked once
        per judge: the interpreter, its import path, the package, the torch install)."""
        if self._unreachable is None:
            import torch

            self._unreachable = unreachable_for_others(
                self.python, [Path(PACKAGE_PARENT), Path(torch.__file__).parent])
        return self._unreachable

    @property
    def python(self) -> str:
        """The interpreter every worker runs."""
        return self.config.worker_python or sys.executable

    def hidden_paths(self) -> list[Path]:
        """Places beside the judge's cache that candidates and their compiles may not read."""
        return [Path(p) for p in self.config.hidden_paths]

    def worker_env(self, step: ProcessKind) -> dict[str, str]:
        """What a worker of kind ``step`` (``ProcessKind.REFERENCE`` or ``ProcessKind.CANDIDATE``) adds to the
        sandbox's environment: the same for every run of this judge, so its fork server can start
        early."""
        env: dict[str, str] = {}
        if self.backend == "cuda":
            env["CUDA_VISIBLE_DEVICES"] = self.visible_device()
            if cuda_home := find_cuda_home():
                env["CUDA_HOME"] = str(cuda_home)
                env["PATH"] = f"{cuda_home / 'bin'}:" + os.environ.get("PATH", "/usr/bin:/bin")
        if threads := self.cpu_threads:
            env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
        if step.trusted:
            # Trusted reference processes share torch.compile's caches across runs.
            env[INDUCTOR_CACHE_VARIABLE] = str(self.cache_dir / "inductor")  # the fork server's probe too
            env["TRITON_CACHE_DIR"] = str(self.cache_dir / "triton")
        return env

    def visible_device(self) -> str:
        """The device as this machine names it (``device.machine_gpu``)."""
        index = self.config.device_index
        return machine_gpu(index) if self.backend == "cuda" else str(index)

    def device_slot(self) -> int:
        """Which of the machine's devices this judge times on, for choosing cores."""
        name = self.visible_device()
        return int(name) if name.isdigit() else self.config.device_index

    def timing_placement(self) -> tuple[list[int], int | None]:
        """Cores for a timing session: the worker's timing thread, and the judge's own thread.

        The worker gets cores chosen per device (two GPUs timed at once do not share one), as
        many as the cpu backend's thread count there. The judge, which polls its channel during
        the session, is kept off those cores and their SMT siblings, where it would slow the
        very calls being timed. On machines with too few cores nothing is pinned.
        """
        cores = sorted(os.sched_getaffinity(0))
        want = self.cpu_threads or 1
        if len(cores) < 2 * want + 2:
            return [], None
        end = len(cores) - self.device_slot() * want
        worker = cores[max(1, end - want):end] if end > want else cores[-want:]
        busy = set(worker).union(*(smt_siblings(c) for c in worker))
        judge = next((c for c in cores if c not in busy), None)
        return worker, judge

    def shared_flush(self) -> SharedCacheFlush | None:
        """How the cpu backend's timing flush is split between each worker and the trusted
        reference (``session``), or None where it is not: on cuda, with the flush off, or where
        the cores the workers time on do not share one last-level cache."""
        if self.backend != "cpu" or not self.config.timing.flush_cache:
            return None
        if self._shared_flush is None:
            cores = self.timing_placement()[0] or sorted(os.sched_getaffinity(0))
            self._shared_flush = (shared_cache_flush(cores),)
        return self._shared_flush[0]

    @contextmanager
    def timing_lock(self) -> Iterator[None]:
        """Timing runs on one device never overlap, across threads and processes; with
        ``exclusive_timing``, no other judge's checks run on the device meanwhile either
        (``beside_timing``)."""
        with FileLock(str(self._device_locks() / f"{self._device_name()}.lock")):
            with self._device_gate().alone() if self.config.exclusive_timing else nullcontext():
                yield

    def beside_timing(self, host: bool = False) -> AbstractContextManager:
        """Device work that other judges' timing must not overlap, with ``exclusive_timing``.
        ``host``: work on the host's cores (a build, a process start), which is device work on the
        cpu backend only, where those cores are what is timed."""
        if not self.config.exclusive_timing or (host and self.backend != "cpu"):
            return nullcontext()
        return self._device_gate().shared()

    def _device_gate(self) -> DeviceGate:
        return DeviceGate(self._device_locks(), self._device_name())

    def _device_locks(self) -> Path:
        locks = self.cache_dir / "locks"
        locks.mkdir(exist_ok=True)
        return locks

    def _device_name(self) -> str:
        return f"{self.backend}-{self.visible_device()}"

    def peaks_path(self, device: dict) -> Path:
        import torch

        name = "".join(c if c.isalnum() else "-" for c in str(device.get("name", "unknown")))
        return self.cache_dir / "peaks" / f"{self.backend}-{name}-{torch.__version__}.json"

    def baseline_key(self, task: Task, device: dict) -> BaselineKey:
        import torch

        return BaselineKey(task.sha256, self.backend, device.get("name", "?"), torch.__version__,
                           self.config.timing.key(), self.cpu_threads)


def _unexplained(verdict: Verdict, exc: Exception) -> None:
    """A failure no stage turned into a verdict: not correct, with the reason and the traceback."""
    import traceback

    verdict.status, verdict.correct = "runtime_error", False
    verdict.error = (f"the judge could not finish with this solution ({type(exc).__name__}: {str(exc)[:300]}); "
                     "nothing is paid")
    verdict.details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:]
    verdict.settings["fault"] = "unexplained"
    verdict.timings["candidate"] = None


class _Run:
    """One verify/profile run: its state (``run_state``) and the parts that work on it, each in a
    file of its own: ``workers`` starts its processes and talks to them (``run_workers``),
    ``checks`` verifies the candidate (``run_verify``), ``timing`` times it (``run_timing``)."""

    def __init__(self, judge: Judge, task: Task, solution: Solution | None, module: Path | None,
                 verdict: Verdict):
        self.state = RunState(judge, task, solution, module, verdict)
        self.workers = RunWorkers(self.state)
        self.checks = RunVerification(self.state, self.workers)
        self.timing = RunTiming(self.state, self.workers, self.checks)

    def __enter__(self) -> "_Run":
        return self

    def __exit__(self, *exc) -> None:
        self.state.close()
