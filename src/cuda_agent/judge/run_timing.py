"""A judging run's profile stage and baselines: timing sessions, the eager and torch.compile
baselines, the physical floor and the rechecks of timed outputs (a part of ``judge._Run``, on its
``run_state.RunState``)."""

from __future__ import annotations

import json
import os
import time
from contextlib import nullcontext
from functools import partial
from typing import Any, NoReturn

from ..files import write_atomic
from ..solution import MODEL_FILE
from . import evidence
from .baselines import baseline_stats, settled
from .cpu_samples import ProcessSampler, SamplesUnavailable, unavailable as sampling_unavailable
from .floor import WORKLOAD, Peaks, floor_ms
from .roofline import NOT_ON_CPU, device_peaks, floor_peaks, not_drawn, roofline
from .reference import ReferenceReport
from .process_tree import cpu_seconds, machine_stall_ms, stalled_fraction, strays_elsewhere
from .session import TimedSession, interleave
from .timing import (Session, TimingStats, consistency_problem, drift_problem, integrity_problem, load_excuse,
                     resolution_problem, stability_problem)
from .verdict import Violation
from .worker_process import WorkerError, WorkerProcess
from .run_state import RunState
from .sandbox import ProcessKind
from .run_support import add_seconds, fail, pinned_thread, foreign_processes
from .run_verify import RunVerification
from .run_workers import RunWorkers


class RunTiming:
    """The profile stage and the baselines: the candidate timed beside the trusted reference's
    calibration calls, its time held to that reference's overheads and to the physical floor, the
    outputs of timed calls checked, and eager and torch.compile timed in trusted processes."""

    def __init__(self, run: RunState, workers: RunWorkers, checks: RunVerification) -> None:
        self.run, self.workers, self.checks = run, workers, checks
        self.judge, self.cfg, self.verdict = run.judge, run.cfg, run.verdict
        self.arena: dict[str, Any] | None = None  # how the candidate's timed inputs are staged, once asked
        self.stager: WorkerProcess | None = None  # the trusted process that stages them
        self.sampling: str | None = None  # why the CPU sample record was not taken, if it was not
        self.sampling_refused = False  # this host samples, but refused the candidate's process
        self.workload: dict[str, float] | None = None  # the task's FLOPs and bytes, once counted

    # -- stage 3 ------------------------------------------------------------------------------
    def _timed(self, worker: WorkerProcess, label: str, keep: bool, follows: TimedSession | None = None,
               flusher: WorkerProcess | None = None, stager: WorkerProcess | None = None,
               overtime_calls: int = 0) -> TimedSession:
        """A timing session for ``worker``; one that ``follows`` another ends with it; a
        ``flusher`` flushes the shared cache before each of its calls (``session``); a baseline's
        may go on past ``max_calls`` up to ``overtime_calls`` (``TimedSession``). A
        candidate's CPU clock is read around its untimed steps on the cpu backend, where all its
        work is CPU time (on cuda a thread can queue device work for next to none), and with the
        runtime checks on, the kernel samples where that time goes (``cpu_samples``)."""
        t, cfg = self.run.timing_config, self.cfg
        worker_cores, _ = self.judge.timing_placement()
        watch_cpu = not worker.spec.trusted and self.judge.backend == "cpu"
        sampler = self._sampler(worker) if watch_cpu and cfg.runtime_checks else None
        return TimedSession(worker, label, keep=keep, warmup=t.warmup_calls, min_calls=t.min_calls,
                            max_calls=t.max_calls, precision=t.precision, target_seconds=t.target_seconds,
                            window=self.judge.backend == "cuda", exchange=self.workers.call, post=self.workers.post,
                            seed=self.run.seed, call_timeout_s=cfg.call_timeout_s,
                            warm_timeout_s=cfg.timing_timeout_s, cores=worker_cores, follows=follows,
                            flusher=flusher, cpu_clock=partial(cpu_seconds, worker.pid) if watch_cpu else None,
                            stager=stager, arena=self.arena if stager is not None else None, sampler=sampler,
                            overtime_calls=overtime_calls)

    def _sampler(self, worker: WorkerProcess) -> ProcessSampler | None:
        """The judge's CPU sample record of the candidate's process, or None with the reason in
        ``sampling``: where this host refuses sampling altogether, the record is not taken (the
        verdict says so); where it samples and refuses this process, the timing claims nothing."""
        why = sampling_unavailable()
        if why:
            self.sampling = f"not taken: this host refuses sampling ({why})"
            return None
        try:
            # The judge's copies of the solution's builds and of the op counter: code it built.
            sampler = ProcessSampler(worker.pid, own_dirs=tuple(str(self.run.dir / d) for d in
                                                                ("extension", "inline", "op_counter")))
        except SamplesUnavailable as exc:
            self.sampling = f"refused for the candidate's process: {exc}"
            self.sampling_refused = True
            return None
        self.sampling, self.sampling_refused = None, False
        return sampler

    def _stage_inputs(self) -> WorkerProcess | None:
        """The trusted process that stages every timed call's inputs (input_arena), the
        candidate's and the reference's beside it, started once the arena is laid out and sized;
        None where they cannot be staged (the verdict says why). A process of its own, so that
        both sides' calls follow another process's work alike."""
        if self.arena is None:
            if not self.cfg.stage_inputs:
                self.arena = {"staged": False, "why": "switched off (JudgeConfig.stage_inputs)"}
            else:
                (self.stager,) = self.workers.start((ProcessKind.REFERENCE, "stager"))
                self.arena = self.workers.call(self.stager, "arena", self.cfg.call_timeout_s,
                                               {"seed": self.run.seed(), "check_seed": self.run.seed()},
                                               expect={"staged": bool})
                problem = self.arena.get("tampered")
                if problem:  # the memfd the candidate holds too was sealed or resized under the stager
                    problem += ": the candidate's process changed the buffer its inputs are staged in"
                elif self.arena["staged"] and self.workers.arena_fd >= 0:
                    problem = _seal_arena(self.workers.arena_fd, int(self.arena["nbytes"]))
                if problem:
                    self.workers.failed_worker(self.run.cand, WorkerError("runtime_error", problem))
        return self.stager if self.arena["staged"] else None

    def _time_sessions(self, sessions: list[TimedSession]) -> float | None:
        """Run sessions interleaved call by call, with the device to themselves; fail the run if
        a session's numbers contradict themselves. Returns the share of that time the machine
        stalled for a CPU or memory (None where the kernel does not say)."""
        self.judge.progress("timing " + " and ".join(s.label for s in sessions))
        _, judge_core = self.judge.timing_placement()

        def overran(session: TimedSession) -> None:
            session.worker.kill()
            self.workers.failed_worker(session.worker, WorkerError(
                "timeout", f"timing did not finish within {self.cfg.timing_timeout_s:.0f} s"))

        with self.judge.timing_lock(), pinned_thread(judge_core):
            stalls, started = machine_stall_ms(), time.perf_counter()
            interleave(sessions, self.cfg.timing_timeout_s, overran)
            pressure = stalled_fraction(stalls, machine_stall_ms(), time.perf_counter() - started)
            kept = [s.finish() for s in sessions]
        for s in sessions:
            if not s.worker.spec.trusted and self.cfg.runtime_checks and s.ops is not None:
                try:
                    found = self.checks.assess_counted(s.ops, s.counter_watching)
                except (TypeError, ValueError, AttributeError):
                    found = [Violation("timing_integrity", MODEL_FILE, None, "a malformed op count after timing")]
                self.checks.forbid(found, "during its timed calls: ")
        for s, calls in zip(sessions, kept):
            problem = consistency_problem(s.session)
            if calls != (len(s.seeds) if s.keep else 0):
                problem = f"the worker kept {calls} outputs of {len(s.seeds)} timed calls"
            if problem:
                if not s.worker.spec.trusted:
                    self.verdict.violations.append(Violation("timing_integrity", MODEL_FILE, None, problem))
                self.workers.failed_worker(s.worker, WorkerError(
                    "runtime_error", f"timing of {s.label} is not credible: {problem}"))
        return pressure

    def profile(self) -> None:
        v, cfg, backend = self.verdict, self.cfg, self.judge.backend
        v.stage = "profile"
        t0 = time.perf_counter()
        self.checks.load_weights(self.run.seed())
        # The candidate is timed with the trusted reference's calibration calls interleaved, so
        # that both see the same load: the reference's overheads (prepare, channel, gap) bound
        # the candidate's (timing.integrity_problem), and where a settled eager baseline exists,
        # the reference's time shows whether the machine is as it was when that was taken. A pair
        # that fails either is timed again (up to timing_attempts); only an attempt that passes
        # counts. Each attempt is held to the smallest reference overheads seen so far, so
        # retrying never loosens the bound, and every failed attempt is recorded in the verdict.
        # A failure on a machine the kernel saw contended (timing.load_excuse) is not a refusal:
        # such a timing claims no speedup.
        eager = self._settled_baseline("eager")
        self.sampling = "not taken: runtime checks are off" if backend == "cpu" else "not taken on cuda"
        self.sampling_refused = False
        calibrations: list[Session] = []
        failed_attempts: list[str] = []
        problem = unsteady = None
        # Where the workers share a last-level cache, the trusted reference flushes it before
        # every call of both, so that the candidate's prepare step, held to the reference's, is
        # not mostly a flush whose length hides work moved into it (cpu).
        flusher = self.run.ref if self.judge.shared_flush() else None
        stager = self._stage_inputs()
        for attempt in range(1, max(1, cfg.timing_attempts) + 1):
            cand = self._timed(self.run.cand, "candidate", keep=True, flusher=flusher, stager=stager)
            # Its inputs staged too: its prepare step is then the candidate's (views and a flush), and
            # holding the candidate's to it leaves no room for work a call leaves running.
            calibration = self._timed(self.run.ref, "reference (calibration)", keep=True, follows=cand, flusher=flusher,
                                      stager=stager)
            started = time.perf_counter()
            try:
                pressure = self._time_sessions([cand, calibration])
            finally:
                if cand.sampler is not None:
                    cand.sampler.close()
            add_seconds(v, "timing", started)
            session, seeds = cand.session, cand.seeds
            self.checks.check_processes("after its timed calls")
            v.timings["candidate"] = TimingStats.from_session(session, cfg.keep_samples)
            if cfg.runtime_checks and session.threads_grown:
                v.timings["candidate"] = None
                v.violations += evidence.assess_threads(0, session.threads_grown, MODEL_FILE)
                fail(v, "forbidden", f"{session.threads_grown} timed call(s) returned with a thread still running")
            if cand.sampler is not None:
                self.checks.forbid(evidence.assess_cpu_samples(cand.sampler.count, MODEL_FILE),
                                   "during its sampled calls: ")
            started = time.perf_counter()
            self._recheck(seeds)
            add_seconds(v, "recheck", started)

            calibrations.append(calibration.session)
            reference = TimingStats.from_session(calibration.session)
            problem = integrity_problem(session, calibrations, backend)
            excuse = load_excuse(problem, session, calibrations, backend, pressure) if problem else None
            if excuse:
                problem = None
            unsteady = (excuse or stability_problem(v.timings["candidate"], self.run.timing_config.max_uncertainty)
                        or resolution_problem(calibrations)
                        or drift_problem(reference, eager, self.run.timing_config.drift_tolerance)
                        or foreign_processes(strays_elsewhere(self.run.cand.tree))
                        or (f"the CPU sample record was {self.sampling}" if self.sampling_refused else None))
            v.timing_integrity = {
                "candidate_prepare_ms": v.timings["candidate"].prepare_median_ms,
                "reference_prepare_ms": reference.prepare_median_ms,
                "candidate_channel_ms": v.timings["candidate"].channel_median_ms,
                "reference_channel_ms": reference.channel_median_ms,
                "candidate_gap_ms": v.timings["candidate"].gap_median_ms,
                "reference_gap_ms": reference.gap_median_ms,
                "candidate_background_cpu_ms": session.background_cpu_mean_ms,
                "candidate_wait_ms": session.wait_median_ms,
                "reference_wait_ms": calibration.session.wait_median_ms,
                "judge_wait_ms": session.judge_wait_median_ms,
                "machine_stalled": pressure,
                "inputs_staged": True if stager is not None else f"no: {self.arena.get('why')}",
                "reference_ms": reference.median_ms,
                "precision": v.timings["candidate"].precision,
                "cpu_samples": ({**cand.sampler.count.to_dict(), "sampled_calls": cand.sampled_calls}
                                if cand.sampler is not None else self.sampling),
                "attempts": attempt, "failed_attempts": list(failed_attempts),
            }
            if problem is None and unsteady is None:
                break
            failed_attempts.append(problem or unsteady)
            self.judge.progress(f"timing not believed ({problem or unsteady}); timing again")
        if problem:
            v.timings["candidate"] = None
            v.timing_integrity["failed_attempts"] = failed_attempts
            v.violations.append(Violation("timing_integrity", MODEL_FILE, None, problem))
            fail(v, "runtime_error", f"the candidate's timing is not credible in {attempt} attempt(s): "
                                     f"{problem}")
        v.timing_integrity["stable"] = unsteady is None
        if unsteady:
            v.timing_integrity["failed_attempts"] = failed_attempts
            v.notes.append(f"no speedup is claimed: {unsteady}")
        if cfg.floor_slack:
            started = time.perf_counter()
            self._check_floor(seeds[0])
            add_seconds(v, "floor", started)

        self.run.cand.close()  # nothing it left behind may run while the baselines are timed
        if self.run.cand.survivors:
            v.notes.append(f"{len(self.run.cand.survivors)} process(es) of the candidate's could not be killed: "
                           "timings taken on this machine until they end are not trustworthy")
        started = time.perf_counter()
        self.baselines()
        add_seconds(v, "baselines", started)
        v.seconds["profile"] = time.perf_counter() - t0
        # The ratios even of an unsteady time: evaluate() withholds them (verdict.speedup_withheld)
        # and keeps them aside as what was measured, as for every other time it does not pay.
        cand_ms = v.timings["candidate"].median_ms
        v.speedup_vs_eager = v.timings["eager"].median_ms / cand_ms
        v.speedup_vs_compile = v.timings["compile"].median_ms / cand_ms
        v.roofline = self._roofline()

    def _settled_baseline(self, mode: str) -> TimingStats | None:
        """A cached baseline whose sessions agree, or None (never cached, or not settled)."""
        if not self.cfg.use_baseline_cache:
            return None
        key = self.judge.baseline_key(self.run.task, self.run.device_info)
        sessions = self.judge.baselines.get(key, mode)
        t = self.run.timing_config
        stats = baseline_stats(sessions, t.baseline_tolerance, 0, t.precision) if sessions else None
        return stats if stats is not None and stats.stable else None

    def baselines(self) -> None:
        """Eager and torch.compile timings of the reference with the current weights, each in
        fresh trusted processes (timing.py: several, until their medians agree), from the cache
        when this device has settled them for the task before."""
        v, cfg, t = self.verdict, self.cfg, self.run.timing_config
        key = self.judge.baseline_key(self.run.task, self.run.device_info)
        for mode in ("eager", "compile"):
            label = "eager" if mode == "eager" else "torch.compile"
            turn = (self.judge.baselines.turn(key, mode, lambda: self.judge.progress(
                        f"waiting for another judge timing this task's {label} baseline"))
                    if cfg.use_baseline_cache else nullcontext())
            with turn:  # read after the turn: what the judge before it timed
                sessions = self.judge.baselines.get(key, mode) if cfg.use_baseline_cache else []
                fresh = 0
                # an unsettled baseline timed minutes ago stands as it is: no speedup over it
                reuse = bool(sessions) and self.judge.baselines.recently_timed(key, mode)
                while not reuse and not settled(sessions, t.baseline_tolerance, t.baseline_sessions,
                                                t.max_baseline_sessions, t.precision):
                    (worker,) = self.workers.start((ProcessKind.REFERENCE, mode))
                    self.workers.call(worker, "init_model", cfg.call_timeout_s,
                                      {"weight_seed": self.run.weight_seed, "return_state": False})
                    if mode == "compile":
                        # torch.compile compiles on its first call: here, not inside the timing lock,
                        # where every other judge's timing on the device would wait behind it.
                        with self.judge.beside_timing():
                            self.workers.call(worker, "run", cfg.timing_timeout_s, {"input_seed": self.run.seed()},
                                              expect={"output": object})
                    timed = self._timed(worker, label, keep=False, overtime_calls=t.max_baseline_calls)
                    self._time_sessions([timed])
                    worker.close()
                    sessions.append(TimingStats.from_session(timed.session, cfg.keep_samples))
                    fresh += 1
                    self.judge.baselines.put(key, mode, sessions)  # each session kept as it comes
            v.timings[mode] = baseline_stats(sessions, t.baseline_tolerance, fresh, t.precision)

    def check_reference(self, report: ReferenceReport) -> None:
        """Two forwards of the same inputs and weights, the second from another random state,
        then the baselines. A difference beyond the tolerance means no solution can match."""
        cfg = self.cfg
        (self.run.ref,) = self.workers.start((ProcessKind.REFERENCE, "eager"))
        self.run.weight_seed = self.run.seed()
        self.workers.call(self.run.ref, "init_model", cfg.call_timeout_s,
                          {"weight_seed": self.run.weight_seed, "return_state": False})
        seed = self.run.seed()
        # Both outputs stay in the reference's process and are compared there, on the device
        # where there is one: a KernelBench output can be several GB.
        with self.judge.beside_timing():
            for name in ("first", "second"):
                self.workers.call(self.run.ref, "run", cfg.call_timeout_s,
                                  {"input_seed": seed, "reseed": self.run.seed(), "hold": name,
                                   "copy": name == "first"},
                                  expect={"output": object})
            check = self.workers.call(self.run.ref, "compare_held", cfg.call_timeout_s,
                                      {"candidate": "second", "reference": "first",
                                       "tolerance": {"atol": cfg.atol, "rtol": cfg.rtol, "norm_rtol": cfg.norm_rtol}},
                                      expect={"check": dict})["check"]
            if self.judge.backend == "cuda":  # the baselines' roofline: the workload, while it runs
                self._workload(seed)
        if self.judge.backend == "cuda":  # and the peaks, timed alone
            self._peaks()
        self.run.ref.close()
        report.deterministic = bool(check.get("passed"))
        report.self_max_abs_diff = check.get("max_abs_error")
        self.baselines()
        report.eager, report.compile = self.verdict.timings.get("eager"), self.verdict.timings.get("compile")
        report.roofline = self._roofline()

    def _wrong_outputs(self) -> NoReturn:
        self.workers.failed_worker(self.run.cand, WorkerError(
            "runtime_error", "the candidate returned the wrong number of kept outputs"))

    def _roofline(self) -> dict:
        """Where the candidate and the baselines stand against the device's peaks."""
        if self.judge.backend != "cuda":
            return not_drawn(NOT_ON_CPU)
        workload = self.workload
        if workload is None:
            return not_drawn("the task's workload was not measured (the physical floor is off)")
        peaks = device_peaks(str(self.run.device_info.get("name", "")), self._peaks())
        timings = {name: stats.median_ms for name, stats in self.verdict.timings.items() if stats}
        return roofline(workload, peaks, timings)

    def _peaks(self) -> Peaks:
        """The device's bandwidth and matmul rate, measured once by a reference process."""
        path = self.judge.peaks_path(self.run.device_info)
        try:
            return Peaks(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            pass
        with self.judge.timing_lock():  # no other judge's timing on the device meanwhile
            reply = self.workers.call(self.run.ref, "peaks", self.cfg.timing_timeout_s, {},
                                      expect={"bytes_per_s": float, "flops_per_s": float})
        peaks = Peaks(reply["bytes_per_s"], reply["flops_per_s"])
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(peaks.to_dict()))
        return peaks

    def _check_floor(self, seed: int) -> None:
        """Fail closed on a time no correct forward can take on this device."""
        v = self.verdict
        workload = self._workload(seed)
        peaks = floor_peaks(str(self.run.device_info.get("name", "")), self._peaks())
        floor = floor_ms(workload, peaks, self.cfg.floor_slack)
        v.timing_integrity.update({"floor_ms": floor, "flops": workload["flops"],
                                   "output_bytes": workload["output_bytes"]})
        median = v.timings["candidate"].median_ms
        if median < floor:
            v.timings["candidate"] = None
            message = (f"{median:.4g} ms is below the physical floor of {floor:.4g} ms for this task "
                       f"(writing its {workload['output_bytes']:.3g} output bytes)")
            v.violations.append(Violation("impossible_time", MODEL_FILE, None, message))
            fail(v, "runtime_error", f"the candidate's time is impossible: {message}")

    def _workload(self, seed: int) -> dict[str, float]:
        """The task's FLOPs and bytes (floor.count_workload), counted once per task by the
        reference process and cached; kept for the roofline."""
        path = self.judge.cache_dir / "workloads" / f"{self.run.task.sha256}-{self.judge.backend}.json"
        try:
            workload = {k: float(json.loads(path.read_text())[k]) for k in WORKLOAD}
        except (OSError, ValueError, TypeError, AttributeError, KeyError):  # KeyError: an older record
            workload = self.workers.call(self.run.ref, "workload", self.cfg.call_timeout_s, {"input_seed": seed},
                                         expect=dict.fromkeys(WORKLOAD, float))
            workload = {k: workload[k] for k in WORKLOAD}
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, json.dumps(workload))
        self.workload = workload
        return workload

    def _recheck(self, seeds: list[int]) -> None:
        """Check outputs of timed calls chosen after timing, so every call must be real."""
        cfg = self.cfg
        picks = sorted(self.run.rng.sample(range(len(seeds)), min(cfg.recheck_calls, len(seeds))))
        if self.checks.hold():
            outputs = None  # one at a time, through the exchange buffer, each beside its reference output
        else:
            outputs = self.workers.call(self.run.cand, "outputs", cfg.call_timeout_s, {"indices": picks},
                                        expect={"outputs": list})["outputs"]
            if len(outputs) != len(picks):
                self._wrong_outputs()
        for n, pick in enumerate(picks):
            expected = self.workers.call(self.run.ref, "run", cfg.call_timeout_s,
                                         {"input_seed": seeds[pick], "float64": cfg.check_precision,
                                          **self.checks.hold()},
                                         expect={"output": object})
            if outputs is not None:
                got = {"output": outputs[n]}
            else:
                reply = self.workers.call(self.run.cand, "outputs", cfg.call_timeout_s,
                                          {"indices": [pick],
                                           **({"exchange": expected["exchange"]} if "exchange" in expected else {})},
                                          expect={"outputs": list})
                if len(reply["outputs"]) != 1:
                    self._wrong_outputs()
                got = {**reply, "output": reply["outputs"][0]}  # and "exchange_error", where there is one
            check, errors = self.checks.compare(got, expected, pick, "timing")
            self.verdict.checks.append(check)
            if not check.passed:
                self.verdict.timings["candidate"] = None
                fail(self.verdict, "incorrect", f"timed call {pick + 1}: {check.message}")
            self.checks.add_precision(expected, errors)
        self.checks.report_precision()


def _seal_arena(fd: int, nbytes: int) -> str | None:
    """Fix the arena's size now that the stager has set it: the candidate holds the memfd too,
    and a file shrunk under the stager's mapping would kill the stager mid-write.
    A candidate that sealed or resized it first has tampered with its own inputs: why, or None."""
    import fcntl

    try:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
        size = os.fstat(fd).st_size
    except OSError as exc:
        return (f"the input arena could not be sealed ({exc}): the candidate's process changed the buffer "
                "its inputs are staged in")
    if size != nbytes:
        return (f"the input arena holds {size} bytes, not the {nbytes} laid out: the candidate's process "
                "resized the buffer its inputs are staged in")
    return None
