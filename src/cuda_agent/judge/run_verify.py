"""A judging run's verify stage: the checks on fresh inputs and weights, and what the candidate's
process recorded while it ran them (a part of ``judge._Run``, on its ``run_state.RunState``)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..solution import MODEL_FILE
from . import evidence
from .audit import TaskAudit
from .correctness import CheckResult, compare_and_measure, precision_report
from .verdict import Violation
from .worker_process import WorkerError
from .run_state import RunState
from .sandbox import ProcessKind
from .run_support import fail, CHECK_TRANSFORMS, check_aliases, check_inputs
from .run_workers import RunWorkers

REDUCED_PRECISION_NOTE = "reduced precision"
UNMEASURED_PRECISION_NOTE = "the precision of the outputs could not be measured on every call checked"
UNCHECKED_PRECISION_NOTE = "precision not checked"
PRECISION_NOTES = (REDUCED_PRECISION_NOTE, UNMEASURED_PRECISION_NOTE, UNCHECKED_PRECISION_NOTE)
PROFILE_ATTEMPTS = 3  # calls of forward under the profiler before an empty kernel record counts
HELD = "expected"  # the name the reference holds a check's output under, on the GPU


@dataclass
class CheckDraw:
    """One check's secrets and the reference's side of it: drawn once, and every candidate
    judged against it (one, or a group's: ``judge.evaluate_many``) is checked on the same."""

    index: int
    weight_seed: int
    weights: dict  # the reference's reply to init_model: its weights, or where they wait on the device
    input_seed: int
    digest_key: int
    reply: dict  # the reference's reply to ``run``: its output (or where it holds it), inputs, audit

    def reference_for(self, buffer: str | None) -> dict:
        """The reference's reply as one candidate is checked against it: with that candidate's
        own exchange buffer where the reference made one for each of a group's (``buffer``)."""
        if buffer is None or "exchanges" not in self.reply:
            return self.reply
        offers = self.reply["exchanges"]
        if not isinstance(offers, dict) or not isinstance(offers.get(buffer), dict):
            raise WorkerError("runtime_error", "malformed reply to `run`: no exchange buffer for a candidate "
                              "(something wrote on the judge's channel)")
        return {**{k: v for k, v in self.reply.items() if k != "exchanges"}, "exchange": offers[buffer]}

    def add_to(self, audit: TaskAudit) -> None:
        """The reference's output (its sample, where the output stays on the GPU) to the task audit."""
        audit.add(self.reply["sample"] if "sample" in self.reply else self.reply["output"],
                  self.reply["identity_passes"])


class RunVerification:
    """The verify stage: the candidate checked against the trusted reference on fresh secret
    weights and inputs, and judged on what its process recorded meanwhile."""

    def __init__(self, run: RunState, workers: RunWorkers) -> None:
        self.run, self.workers = run, workers
        self.judge, self.cfg, self.verdict = run.judge, run.cfg, run.verdict
        self.precision_errors: list[tuple[str, float, float]] = []  # (dtype, candidate's, reference's), per check
        self.precision_unmeasured: str | None = None  # why a call's precision could not be measured
        self.precision_unchecked: str | None = None  # why the task offers no yardstick for some outputs

    # -- stage 2 ------------------------------------------------------------------------------
    def verify(self) -> None:
        v, cfg = self.verdict, self.cfg
        v.stage = "verify"
        self.judge.progress("starting reference and candidate processes")
        t0 = time.perf_counter()
        self.run.ref, self.run.cand = self.workers.start((ProcessKind.REFERENCE, "eager"),
                                                         (ProcessKind.CANDIDATE, "eager"))
        v.seconds["start"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        audit = self.new_audit()
        with self.judge.beside_timing():  # the checks wait while another judge times, where that is asked
            for i in range(cfg.num_checks):
                self.judge.progress(f"check {i + 1}/{cfg.num_checks}")
                draw = self.draw_check(i)
                self.check_candidate(draw)
                draw.add_to(audit)
        v.seconds["verify"] = time.perf_counter() - t0
        self.end_verify(audit)

    def new_audit(self) -> TaskAudit:
        return TaskAudit(self.cfg.atol, self.cfg.rtol, self.cfg.norm_rtol)

    def draw_check(self, index: int, buffers: list[str] | None = None) -> CheckDraw:
        """The reference's side of check ``index``: fresh weights (moved off their default init
        after the first check) and inputs from secret seeds, and its output, held on the GPU where
        it is compared; with ``buffers``, one exchange buffer for each of a group's candidates."""
        cfg = self.cfg
        weight_seed = self.run.seed()
        weights = self._init_reference(weight_seed, index > 0, buffers)
        seed = self.run.seed()
        transform = CHECK_TRANSFORMS[index % len(CHECK_TRANSFORMS)]
        key = self.run.seed()
        ref = self.workers.call(self.run.ref, "run", cfg.call_timeout_s,
                                {"input_seed": seed, "transform": transform, "audit": True,
                                 "tolerance": [cfg.atol, cfg.rtol], "digest_key": key, "float64": cfg.check_precision,
                                 **self.hold(buffers)},
                                expect={"output": object, "transform": str, "identity_passes": bool, "aliases": list,
                                        "inputs_before": list, "inputs_after": list, "inputs": dict})
        return CheckDraw(index, weight_seed, weights, seed, key, ref)

    def check_candidate(self, draw: CheckDraw) -> None:
        """The candidate's side of a check: the reference's weights loaded, its call on the same
        inputs with its records, its output compared, its aliases and what it left of its inputs.
        In a group (``self.run.buffer`` named) the reference holds one output for every candidate,
        and keeps it for the others."""
        v, cfg, i = self.verdict, self.cfg, draw.index
        self._load_candidate(draw.weight_seed, i > 0, draw.weights)
        try:
            ref = draw.reference_for(self.run.buffer)
        except WorkerError as exc:
            self.workers.failed_worker(self.run.ref, exc)
        record = {"ops": cfg.runtime_checks,
                  "kernels": cfg.runtime_checks and self.judge.backend == "cuda" and i == cfg.num_checks - 1}
        changed = [int(k) for k in ref["inputs"]]
        got = self._run_candidate(draw.input_seed, ref["transform"], record, ref.get("exchange"))
        if cfg.runtime_checks:
            self._assess(got["evidence"], record, warm=i > 0 or self.judge.backend == "cpu")
        check, errors = self.compare(got, ref, i, "verify", keep=self.run.buffer is not None)
        v.checks.append(check)
        if v.checks[-1].passed and (aliased := check_aliases(ref, got, i)):
            v.checks.append(aliased)
        if v.checks[-1].passed:
            self.add_precision(ref, errors)
            left = self.workers.call(self.run.cand, "inputs", cfg.call_timeout_s,
                                     {"digest_key": draw.digest_key, "return_inputs": changed},
                                     expect={"inputs_after": list, "inputs": dict})
            if changed_inputs := check_inputs(ref, left, i, cfg):
                v.checks.append(changed_inputs)

    def end_verify(self, audit: TaskAudit) -> None:
        """After the last check: no process of the candidate's left running, the task audit's
        findings noted, and the verdict: incorrect at the first failed check, else correct."""
        v = self.verdict
        self.check_processes("after its checks")
        if findings := audit.findings():
            v.task_audit = {"null_solutions_that_pass": findings}
            v.notes.append(audit.explain(findings))
        failed = [c for c in v.checks if not c.passed]
        if failed:
            fail(v, "incorrect", failed[0].message)
        v.correct = True
        self.report_precision()

    # -- comparison: on the GPU where the outputs are, or on the host -------------------------
    def hold(self, buffers: list[str] | None = None) -> dict:
        """What asks the reference to keep its output on the GPU and open the exchange buffer: this
        candidate's (``self.run.buffer`` in a group, else the one), or one for each of ``buffers``."""
        if self.judge.backend == "cuda" and self.cfg.compare_on_device:
            return {"hold": HELD, "exchange": list(buffers) if buffers is not None else (self.run.buffer or True)}
        return {}

    def compare(self, got: dict, ref: dict, index: int, phase: str,
                keep: bool = False) -> tuple[CheckResult, list[tuple[str, float, float]]]:
        """The candidate's output (``got["output"]``) against the reference's, and its precision
        errors where the check passed: in the reference's process on the GPU when both sides used
        the exchange buffer, else here. ``keep``: the reference keeps its output, for the other
        candidates of a group."""
        cfg = self.cfg
        held = {"hold": HELD, **({"buffer": self.run.buffer} if self.run.buffer else {}),
                **({"keep": True} if keep else {})}
        if "exchange" in ref and "exchange_error" not in got:
            reply = self.workers.call(self.run.ref, "compare_exchanged", cfg.call_timeout_s,
                                      {"output": got["output"], "index": index, "phase": phase, **held,
                                       "tolerance": {"atol": cfg.atol, "rtol": cfg.rtol, "norm_rtol": cfg.norm_rtol}},
                                      expect={"check": dict, "precision_errors": list})
            self.verdict.settings.setdefault("outputs_compared_on", "gpu")
            errors = [(str(d), float(c), float(r)) for d, c, r in reply["precision_errors"]]
            return CheckResult(**reply["check"]), errors
        expected = ref["output"]
        if "exchange" in ref or "exchange_error" in ref:
            self._note_exchange(str(got.get("exchange_error") or ref.get("exchange_error")))
            if "exchange" in ref:  # the reference holds its output: it comes whole, as the candidate's did
                expected = self.workers.call(self.run.ref, "held_output", cfg.call_timeout_s, held,
                                             expect={"output": object})["output"]
        self.verdict.settings["outputs_compared_on"] = "host"  # once on the host, reported so
        return compare_and_measure(got["output"], expected, index, cfg.atol, cfg.rtol, ref.get("float64"),
                                   phase=phase, norm_rtol=cfg.norm_rtol)

    def _note_exchange(self, why: str) -> None:
        note = f"outputs compared on the host: the GPU exchange buffer could not be used ({why})"
        if note not in self.verdict.notes:
            self.verdict.notes.append(note)

    # -- precision: each floating output against its yardstick --------------------------------
    # Every check and every recheck of a timed call is measured, so a solution cannot compute at
    # its task's precision while it is verified and in less once it is timed.
    def add_precision(self, ref: dict, errors: list[tuple[str, float, float]]) -> None:
        norms = ref.get("float64")
        if isinstance(norms, dict) and norms.get("unmeasured"):
            self.precision_unmeasured = str(norms["unmeasured"])
        if isinstance(norms, dict) and norms.get("unchecked"):
            self.precision_unchecked = str(norms["unchecked"])
        self.precision_errors.extend(errors)

    def report_precision(self) -> None:
        v = self.verdict
        unchecked = f"{self.precision_unchecked}: those outputs' precision is not checked" \
            if self.precision_unchecked else None
        v.precision = precision_report(self.precision_errors, self.precision_unmeasured, unchecked)
        v.notes = [n for n in v.notes if not n.startswith(PRECISION_NOTES)]
        if v.precision.get("unmeasured"):
            v.notes.append(f"{UNMEASURED_PRECISION_NOTE} ({v.precision['unmeasured']}), so no speedup is paid")
        if v.precision.get("unchecked"):
            v.notes.append(f"{UNCHECKED_PRECISION_NOTE}: {v.precision['unchecked']}")
        if v.precision.get("reduced"):
            p = v.precision
            v.notes.append(f"{REDUCED_PRECISION_NOTE}: the {p['dtype']} outputs are off {p['against']} by "
                           f"{p['candidate_error']:.2g} (normwise), where {p['dtype']} arithmetic leaves at most "
                           f"{p['allowed']:.2g} (the reference's own: {p['reference_error']:.2g}): computed in less "
                           f"precision than the task's {p['dtype']}, so no speedup is paid")

    def _run_candidate(self, seed: int, transform: str, record: dict, exchange: dict | None = None) -> dict:
        """The candidate's call on a check's inputs, its output and records in the reply.

        A kernel record that holds no GPU activity at all, or none because the profiler failed,
        or none of the kernels the solution defines, may be lost rather than evidence: the GPU
        profiler now and then drops a session's records when several processes share the GPU
        (honest one-kernel solutions were refused for "kernels idle" under the pool's load, once
        with a record that was empty, three times in 35 with one that held other activity).
        Such a call is made again, up to ``PROFILE_ATTEMPTS`` times, and the check uses the
        output and records of the last. A call made again is still judged on everything but
        the missing kernels (other kernels, ops, flags): a solution cannot discard a record that
        shows it cheating by leaving its own kernels out of it. A forward that never runs its
        kernels records none of them every time and is judged on that; a profiler that fails
        every time refuses the solution.
        """
        lost = 0
        for attempt in range(1, PROFILE_ATTEMPTS + 1):
            got = self.workers.call(self.run.cand, "run", self.cfg.call_timeout_s,
                                    {"input_seed": seed, "transform": transform, "record": record,
                                     **({"exchange": exchange} if exchange else {})},
                                    expect={"output": object, "evidence": dict, "aliases": list})
            if not (record.get("kernels") and self._kernels_lost(got["evidence"])):
                break
            lost += 1
            if self.cfg.runtime_checks and attempt < PROFILE_ATTEMPTS:  # the last is judged in full
                recorded = isinstance(got["evidence"].get("kernels"), list)
                self._assess(got["evidence"], {"kernels": recorded}, warm=False, excused=("own_kernels_idle",))
        if lost:
            self.verdict.notes.append(f"the GPU profiler recorded none of the solution's kernels in {lost} of "
                                      f"{attempt} call(s) of forward; the check used the last")
        if "kernels" in got["evidence"] and got["evidence"]["kernels"] is None:
            fail(self.verdict, "runtime_error", f"the GPU profiler failed in {PROFILE_ATTEMPTS} calls of "
                 "forward, so the judge cannot see which kernels ran")
        return got

    def _kernels_lost(self, records: dict) -> bool:
        """Whether a kernel record shows nothing of the solution's (malformed ones are _assess's)."""
        kernels = records.get("kernels")
        if not isinstance(kernels, list):
            return "kernels" in records and kernels is None  # None: the profiler failed
        if not kernels:
            return True
        try:
            return evidence.own_kernels_missing([{"name": str(k["name"]), "op": str(k["op"])} for k in kernels],
                                                self.run.solution)
        except (KeyError, TypeError):
            return False

    def _assess(self, records: dict, asked: dict, warm: bool, excused: tuple[str, ...] = ()) -> None:
        """Turn the candidate's records of one forward into violations (but those of the
        ``excused`` rules); forbidden if any.

        Thread counts are compared on calls without the profiler, which starts threads of its
        own, and on the cuda backend only from the second call, since the first may start the
        driver's or a library's threads.
        """
        where = MODEL_FILE
        try:
            found = []
            if warm and not asked.get("kernels"):
                found += evidence.assess_threads(int(records["threads_before"]), int(records["threads_after"]), where)
            found += evidence.assess_flags(dict(records["flags_before"]), dict(records["flags_after"]), where)
            if asked.get("kernels") and "kernels" in records:
                kernels = [{"name": str(k["name"]), "device_ms": float(k["device_ms"]), "op": str(k["op"])}
                           for k in records["kernels"]]
                found += evidence.assess_kernels(kernels, self.run.solution, where)
            elif asked.get("ops"):
                found += evidence.assess_ops({str(k): int(n) for k, n in dict(records["ops"]).items()}, where)
            if "counted_ops" in records:
                found += self.assess_counted(records["counted_ops"], records.get("counter_watching"))
        except (KeyError, TypeError, ValueError, AttributeError):
            self.workers.failed_worker(self.run.cand, WorkerError(
                "runtime_error", "malformed evidence in the reply to `run` (something wrote on the judge's channel)"))
        self.forbid([x for x in found if x.rule not in excused])

    def forbid(self, found: list[Violation], context: str = "") -> None:
        """Fail the run as forbidden, naming the first violations, if there are any."""
        if found:
            self.verdict.violations.extend(found)
            fail(self.verdict, "forbidden", context + "; ".join(f"[{x.rule}] {x.message}" for x in found[:3]))

    def check_processes(self, when: str) -> None:
        """Forbidden: any process the candidate started still running at a checkpoint (it could
        work on after its call has been timed, or disturb other timings)."""
        if strays := self.run.cand.tree.strays():
            message = (f"{len(strays)} process(es) the candidate started were still running {when} "
                       f"({self.run.cand.tree.method})")
            self.verdict.violations.append(Violation("process_left_running", MODEL_FILE, None, message))
            fail(self.verdict, "forbidden", message)

    def assess_counted(self, ops: Any, watching: Any) -> list[Violation]:
        """What the op counter saw in the candidate's calls (checks or a timing session)."""
        # Operators are namespaced (aten::add, or a solution's own registered op); other entries
        # are the dispatcher's own bookkeeping (the check's dispatch mode, say).
        found = evidence.assess_ops({str(k): int(n) for k, n in dict(ops).items() if "::" in str(k)}, MODEL_FILE)
        if watching is not True:
            found.append(Violation("records_disabled", MODEL_FILE, None,
                                   "the judge's op counter stopped seeing the candidate's ops (RecordFunction "
                                   "callbacks removed or switched off in its process)"))
        return found

    def load_weights(self, weight_seed: int) -> None:
        """Fresh weights from the reference, at their default init, loaded into the candidate."""
        self._load_candidate(weight_seed, False, self._init_reference(weight_seed, False))

    def _init_reference(self, weight_seed: int, perturb: bool, buffers: list[str] | None = None,
                        on_device: bool = True) -> dict:
        """The reference's model with fresh weights; its reply says where they are to be loaded
        from: on the GPU, an exchange buffer of this candidate's (``self.run.buffer`` in a group), or
        one for each of ``buffers``; else (or without ``on_device``) the weights themselves."""
        share = {}
        if on_device and self.judge.backend == "cuda" and self.cfg.compare_on_device:
            share = {"share": list(buffers) if buffers is not None else [self.run.buffer or ""]}
        return self.workers.call(self.run.ref, "init_model", self.cfg.call_timeout_s,
                                 {"weight_seed": weight_seed, "perturb": perturb, **share}, expect={"state_dict": dict})

    def _load_candidate(self, weight_seed: int, perturb: bool, weights: dict) -> None:
        """The reference's weights (its reply to ``_init_reference``) loaded into the candidate."""
        timeout, fields = self.cfg.call_timeout_s, {"state_dict": weights["state_dict"]}
        if "weights" in weights:
            offer = weights["weights"].get(self.run.buffer or "") if isinstance(weights["weights"], dict) else None
            if not isinstance(offer, dict):
                self.workers.failed_worker(self.run.ref, WorkerError(
                    "runtime_error", "malformed reply to `init_model`: no weights for a candidate "
                                     "(something wrote on the judge's channel)"))
            fields = {"state_dict": {}, "weights": offer}
        reply = self.workers.call(self.run.cand, "load_weights", timeout, {"weight_seed": weight_seed, **fields})
        on = "gpu" if "weights" in fields else "host"
        if "weights_error" in reply:  # its process could not map the buffer: the weights go whole
            state = self._init_reference(weight_seed, perturb, on_device=False)["state_dict"]
            self.workers.call(self.run.cand, "load_weights", timeout, {"weight_seed": weight_seed, "state_dict": state})
            on = "host"
        if self.verdict.settings.get("weights_loaded_from") != "host":  # once on the host, reported so
            self.verdict.settings["weights_loaded_from"] = on
        self.run.weight_seed = weight_seed
