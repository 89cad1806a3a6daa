"""A judging run's worker processes: each one's sandbox and environment, starting them and
talking to them (a part of ``judge._Run``, on its ``run_state.RunState``)."""

from __future__ import annotations

import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NoReturn

from ..solution import MODEL_FILE
from . import linked_symbols, memory
from .inline_extension import MAX_CALLS as MAX_INLINE_CALLS
from .inline_extension import InlineCall, InlineCallError
from .landlock import build_ruleset
from .sandbox import ProcessKind, own_namespace, policy_for, writable_devices
from .worker_process import PACKAGE_PARENT, WorkerError, WorkerProcess, WorkerSpec, home_of
from .run_state import RunState
from .run_support import add_call_seconds, check_reply, fail
from .session import STEP_SPIN_S

# How long a run waits for memory to come free (another judge's workers ending) before it is refused.
MEMORY_WAIT_S = 30.0


class RunWorkers:
    """Starting a run's worker processes, each under the sandbox policy of its kind, and talking
    to them: every exchange's reply checked, every failure turned into the verdict's reason."""

    def __init__(self, run: RunState) -> None:
        self.run = run
        self.judge, self.cfg, self.verdict = run.judge, run.cfg, run.verdict
        self.arena_fd = -1  # the input arena's memfd, once made (cpu backend)
        self.inline_builds: list[dict[str, Any]] = []  # what the candidate's load_inline calls built
        self.inline_failure: tuple[str, str] | None = None  # (status, why) of a load_inline not built

    # -- the candidate's confinement ------------------------------------------------------------
    def _candidate_home(self) -> Path:
        return home_of(self.run.dir, worker_name(ProcessKind.CANDIDATE, "eager"))

    def _landlock(self) -> tuple[int, str]:
        """A Landlock ruleset for the candidate (fd, description), or (-1, why there is none)."""
        if not self.cfg.confine_filesystem:
            return -1, "not confined: switched off"
        home = self._candidate_home()
        home.mkdir(exist_ok=True)
        writable = [home]
        hidden = [self.judge.cache_dir, *self.judge.hidden_paths()] + ([self.run.dir.parent] if self.run.run_as else [])
        try:
            ruleset = build_ruleset(writable, readable=[self.run.dir, Path(PACKAGE_PARENT)], hidden=hidden,
                                    devices=writable_devices())
        except OSError as exc:
            return -1, f"not confined: {exc}"
        self.run.stack.callback(ruleset.close)
        return ruleset.fd, ruleset.description

    def _op_counter_copy(self) -> tuple[Path | None, str]:
        """A private copy of the op counter in this run's directory (which the candidate may
        read; the judge's cache it may not), and what it does."""
        built, what = self.judge.op_counter()
        if built is None:
            return None, what
        with self.run.lock:
            copy = self.run.dir / "op_counter" / built.name
            if not copy.exists():
                copy.parent.mkdir(mode=0o755, exist_ok=True)
                shutil.copyfile(built, copy)
                os.chmod(copy, 0o755)
        return copy, what

    def _inline_build(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer the candidate's ``load_inline`` (inline_extension): the exact sources it passed
        are scanned, then built by the judge's builder; the answer names a private copy of the
        module, or says why there is none. Called while the candidate's setup waits."""
        with self.run.lock:
            self.inline_builds.append({})
            record = self.inline_builds[-1]
            count = len(self.inline_builds)
        if count > MAX_INLINE_CALLS:
            return self._inline_refused("compile_error", f"more than {MAX_INLINE_CALLS} load_inline calls")
        try:
            call = InlineCall.from_message(request.get("call"))
        except InlineCallError as exc:
            return self._inline_refused("compile_error", str(exc))
        record["name"] = call.name
        if problems := call.flag_problems():
            return self._inline_refused("compile_error", (
                "load_inline was given compiler flags the judge does not pass on: " + ", ".join(problems)
                + ". Allowed: optimisation levels, -std, -D/-U, -march/-m/-f code-generation options, "
                "warnings, and for nvcc --use_fast_math, -lineinfo, -Xptxas, -maxrregcount, -arch/-gencode"))
        if self.cfg.static_checks:
            from .static_checks import scan_inline_build

            if found := scan_inline_build(call.sources(), call.extra_ldflags, self.run.task, self.judge.backend):
                with self.run.lock:
                    self.verdict.violations.extend(found)
                return self._inline_refused("forbidden", (
                    f"{len(found)} violation(s) of the judge's rules in the sources load_inline was given: "
                    + "; ".join(v.render() for v in found[:4])))
        self.judge.progress(f"building {call.name} (load_inline)")
        result = self.judge.builder.build_inline(call)
        record.update({"cache_hit": result.cache_hit, "objects_compiled": result.objects_compiled,
                       "objects_total": result.objects_total, "seconds": result.seconds,
                       "step_seconds": result.step_seconds or {}})
        with self.run.lock:
            self.verdict.seconds["build"] = self.verdict.seconds.get("build", 0.0) + result.seconds
            self.verdict.isolation["compile"] = result.confinement or {"note": "nothing compiled: the module was cached"}
            self.verdict.build = {"built": True, "load_inline": [dict(r) for r in self.inline_builds],
                                  "toolchain": self.judge.builder.toolchain.identity,
                                  "arch": self.judge.builder.toolchain.arch}
        if not result.ok:
            return self._inline_refused("compile_error", f"load_inline's build of {call.name} failed:\n{result.errors}")
        if self.cfg.runtime_checks and (refused := linked_symbols.refusal(result.module_path, self.judge.backend)):
            status, error, found = refused
            with self.run.lock:
                self.verdict.violations.extend(found)
            return self._inline_refused(status, error)
        copy = self.run.dir / "inline" / f"{count}-{call.name}.so"
        copy.parent.mkdir(mode=0o755, exist_ok=True)
        shutil.copyfile(result.module_path, copy)
        os.chmod(copy, 0o755)
        return {"path": str(copy)}

    def _inline_refused(self, kind: str, message: str) -> dict[str, Any]:
        """The answer to a load_inline the judge did not build; the run ends with it once the
        candidate's setup returns, whatever the candidate's code does with the answer."""
        with self.run.lock:
            self.inline_failure = self.inline_failure or (kind, message)
        return {"error": kind, "message": message}

    def _arena_fd(self) -> int:
        """The run's input arena on the cpu backend (input_arena): a memfd both the candidate and
        the reference map. The reference sizes it; the judge then seals its size, so that the
        candidate, which holds it too, cannot shrink it under the reference's writes."""
        with self.run.lock:
            if self.arena_fd < 0:
                self.arena_fd = os.memfd_create("cuda-agent-inputs", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
                self.run.stack.callback(os.close, self.arena_fd)
            return self.arena_fd

    def _spawn(self, kind: ProcessKind, mode: str, cap: tuple[int | None, str]) -> WorkerProcess:
        """Start and set up a worker of ``kind`` (a reference or the candidate) under the
        memory ``cap`` (bytes, and how it was decided); raises WorkerError. Safe to call from
        several threads. Whatever depends on trust follows from ``kind``."""
        trusted = kind.trusted
        fd, filesystem, program, syscalls = -1, "not confined: a trusted reference process", None, ""
        if not trusted:
            fd, filesystem = self._landlock()
            # The worker adds the Unix-socket rule once the CUDA driver, which needs a socket, is up.
            program, syscalls = self.judge.syscall_filter(unix_sockets=False)
        policy = policy_for(kind, backend=self.judge.backend, isolate_network=self.cfg.isolate_network,
                            landlock_fd=fd, seccomp_program=program, run_as=self.run.run_as,
                            drop_privileges=self.cfg.drop_privileges)
        name = worker_name(kind, mode)
        staged = self.judge.backend == "cpu" and mode in ("eager", "stager")  # who maps the input arena
        spec = WorkerSpec(name=name, run_dir=self.run.dir, policy=policy, env=self.judge.worker_env(kind),
                          memory_limit_bytes=cap[0], python=self.judge.python,
                          fork=self.cfg.fork_workers, arena_fd=self._arena_fd() if staged else -1,
                          compiles=trusted and mode == "compile")
        worker = WorkerProcess(spec)
        with self.run.lock:
            self.run.stack.callback(worker.close)
            self.run.processes.append(worker)
        setup = {"role": "reference" if trusted else "candidate", "device": self.judge.backend, "mode": mode,
                 "task_path": str(self.run.task_path),
                 "threads": self.judge.cpu_threads, "flush_cache": self.cfg.timing.flush_cache,
                 "flush_bytes": self.cfg.timing.flush_bytes,
                 "hide_paths": [str(self.run.dir), str(Path(__file__).resolve().parents[2])]}
        if (shared := self.judge.shared_flush()) is not None:
            setup["private_cache_bytes"] = shared.private_bytes
        counted = "not counted"
        if not trusted:
            counter, counted = self._op_counter_copy()
            setup["op_counter"] = str(counter) if counter else None
            setup["warm_profiler"] = self.cfg.runtime_checks  # the kernel record needs it soon
            setup["solution_path"] = str(self.run.solution_dir / MODEL_FILE)
            setup["module_path"] = str(self.run.module) if self.run.module else None
            setup["refuse_late"] = program is not None  # Unix sockets and programs, once started
            setup["subreaper"] = policy.subreaper == "worker"
            setup["inline_builds"] = self.run.solution.layout == "single_file"
        # A single-file candidate asks for its load_inline builds while it imports model_new.py.
        try:
            reply = worker.request("setup", self.cfg.load_timeout_s, **setup,
                                   on_request=None if trusted else self._inline_build)
        finally:  # the judge's own reason, not what the candidate's process made of it
            if not trusted and self.inline_failure:
                fail(self.verdict, *self.inline_failure)
        check_reply(reply, {"device": dict, "network_isolated": bool, "filesystem_confined": bool, "uid": int},
                    "setup")
        with self.run.lock:
            if trusted:  # device facts key the baseline cache: never the candidate's word
                self.run.device_info = reply["device"]
                self.verdict.device = reply["device"]
            record = {"separate_process": True, "network_isolated": reply["network_isolated"],
                      "uid": reply["uid"], "environment": "scrubbed",
                      "filesystem_confined": reply["filesystem_confined"],
                      "capabilities": reply.get("capabilities")}
            if not trusted:
                record.update({"filesystem": filesystem, "privileges": self.run.privileges,
                               "writable_outside": [str(p) for p in reply.get("writable_outside", [])],
                               "ipc_isolated": own_namespace(worker.pid, "ipc"),
                               "processes": worker.tree.method,
                               "ops": counted,
                               "syscalls": _syscalls(syscalls, program, reply),
                               "limits": {"open_files": policy.max_open_files, "file_bytes": policy.max_file_bytes,
                                          "memory_bytes": cap[0], "memory": cap[1],
                                          "processes": policy.max_processes if self.run.run_as else None,
                                          "call_timeout_s": self.cfg.call_timeout_s}})
            self.verdict.isolation[name] = record
        return worker

    def start(self, *kinds: tuple[ProcessKind, str]) -> list[WorkerProcess]:
        """Start workers in parallel, each a (kind, mode): ``(ProcessKind.REFERENCE, "eager")``,
        ``(ProcessKind.CANDIDATE, "eager")``; if any fails, the candidate's failure is reported first."""
        machine = self._room_for(len(kinds))
        cap = memory.resolve_cap(self.cfg.memory_limit_bytes, self.run.judges_sharing, machine)
        with self.judge.beside_timing(host=True), ThreadPoolExecutor(len(kinds)) as pool:
            futures = [pool.submit(self._spawn, kind, mode, cap) for kind, mode in kinds]
        failures = [(kind, worker_name(kind, mode), f.exception())
                    for (kind, mode), f in zip(kinds, futures) if f.exception()]
        failures.sort(key=lambda item: item[0].trusted)
        for kind, name, exc in failures:
            if isinstance(exc, WorkerError):
                self.failed(exc, kind, name)
            raise exc
        return [f.result() for f in futures]

    def _room_for(self, workers: int) -> memory.MachineMemory | None:
        """The machine's memory, once it has room for ``workers`` more workers to start: a run
        waits a while for memory to come free, then is refused with the figures rather than
        started to be killed. None where the machine does not say (nothing is refused). The
        refusal is the machine's fault unless this run's candidate is running: then it may be
        what holds the memory, and fails closed."""
        need, deadline, said = workers * memory.WORKER_MINIMUM, time.monotonic() + MEMORY_WAIT_S, False
        while (machine := memory.machine_memory()) is not None and machine.available_bytes < need:
            if time.monotonic() >= deadline:
                candidate = any(not w.spec.trusted and w.proc.poll() is None for w in self.run.processes)
                fail(self.verdict, "runtime_error", (
                    f"out of memory: not started, since {workers} worker process(es) need at least "
                    f"{memory.gib(need)} free to start, and for {MEMORY_WAIT_S:.0f} s only "
                    f"{memory.gib(machine.available_bytes)} of {machine.describe()} was: judge fewer at once, "
                    "or end what else holds the machine's memory"), fault="candidate" if candidate else "machine")
            if not said:
                self.judge.progress(f"waiting for memory: {memory.gib(machine.available_bytes)} free, "
                                    f"{memory.gib(need)} needed to start")
                said = True
            time.sleep(1.0)
        return machine

    def failed(self, exc: WorkerError, kind: ProcessKind, name: str) -> NoReturn:
        """End the run on the failure of the worker ``name``, of ``kind``: a candidate's
        failure is the candidate's (the machine running out of memory included: fail closed, with
        the figures); a reference's is the task's."""
        if exc.out_of_memory is not None:
            self.verdict.settings["out_of_memory"] = {"process": name, **exc.out_of_memory}
        if not kind.trusted:
            fail(self.verdict, exc.kind, exc.message, exc.log_tail)
        hint = ""
        # (the judge's own account of running out of memory says what to do already)
        if exc.out_of_memory is None and ("out of memory" in exc.message.lower() or "MemoryError" in exc.message):
            hint = (" (the task's inputs, outputs and model do not fit in the device's memory beside what else "
                    "runs on it: judge fewer at once, e.g. --jobs 1, or use a device with more memory)")
        fail(self.verdict, "runtime_error", f"the reference ({name}) failed{hint}: {exc.message}",
             exc.log_tail, fault="task")

    def failed_worker(self, worker: WorkerProcess, exc: WorkerError) -> NoReturn:
        """End the run on ``worker``'s failure (``failed``)."""
        self.failed(exc, worker.spec.policy.kind, worker.spec.name)

    def call(self, worker: WorkerProcess, cmd: str | None, timeout: float, fields: dict[str, Any],
             expect: dict[str, Any] | None = None, spin_s: float | None = None) -> dict:
        """One exchange: a command (``cmd``) or a timing step (``cmd`` None), reply checked.

        Timing steps poll for their reply (``spin_s``, default ``STEP_SPIN_S``) rather than
        sleep, which keeps the judge's clock on each step close to the step itself.
        """
        message = {"cmd": cmd, **fields} if cmd else fields
        if spin_s is None:
            spin_s = 0.0 if cmd else STEP_SPIN_S
        started = time.perf_counter()
        try:
            reply = worker.exchange(message, timeout, spin_s=spin_s)
            check_reply(reply, expect or {}, cmd or str(fields.get("step")))
            if cmd:  # not timing steps: nothing is added between timed calls
                add_call_seconds(self.verdict, f"{worker.spec.name}.{cmd}", started)
            return reply
        except WorkerError as exc:
            worker.kill()
            self.failed_worker(worker, exc)

    def post(self, worker: WorkerProcess, message: dict[str, Any]) -> None:
        try:
            worker.post(message, self.cfg.call_timeout_s)
        except WorkerError as exc:
            self.failed_worker(worker, exc)


def worker_name(kind: ProcessKind, mode: str) -> str:
    """What the verdict calls a run's worker: ``candidate``, or ``reference-`` and its mode."""
    return f"reference-{mode}" if kind.trusted else "candidate"


def _syscalls(described: str, program: bytes | None, reply: dict) -> str:
    """What the candidate's seccomp filter is, as its worker reports it installed."""
    if program is None:
        return described
    if reply.get("seccomp_filters", 0) <= 0:
        return "a seccomp filter was asked for, but installing it failed"
    if reply.get("late_rules") is not True:
        return f"{described}; but the rules on Unix sockets and programs could not be added: {reply.get('late_rules')}"
    return f"{described}; once started, no program may run (execve refused)"
