"""What the parts of a judging run share: the exception that ends a run, its failure and reply
checks, and small helpers for timing placement and verdict figures."""

from __future__ import annotations

import math
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, NoReturn

from ..device import cpu_list
from .config import JudgeConfig
from .correctness import CheckResult, compare_outputs
from .verdict import Verdict
from .worker_process import WorkerError

STAGES = ("compile", "verify", "profile")
# How each check varies the inputs (see worker_main.transform_inputs); weights are perturbed from the
# second check on. The GPU-kernel record is taken on the last check: the profiler it needs starts
# in the background when the candidate process starts (about a second), and by then it is ready.
CHECK_TRANSFORMS = ("none", "none", "scale_up", "shift", "scale_down")
Progress = Callable[[str], None]


class RunStopped(Exception):
    """Ends a run early; the verdict already says why."""


@contextmanager
def pinned_thread(core: int | None) -> Iterator[None]:
    """Run the calling thread (only) on ``core`` for the duration; no-op for None."""
    if core is None:
        yield
        return
    previous = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, previous)


def smt_siblings(core: int) -> set[int]:
    """Hardware threads sharing ``core``'s physical core (empty if the OS does not say)."""
    path = Path(f"/sys/devices/system/cpu/cpu{core}/topology/thread_siblings_list")
    try:
        return set(cpu_list(path.read_text()))
    except OSError:
        return set()


def shared_runs_dir() -> Path:
    """Run directories that an unprivileged candidate can reach (it sees only its own)."""
    path = Path(tempfile.gettempdir()) / f"cuda-agent-runs-{os.geteuid()}"
    path.mkdir(mode=0o711, exist_ok=True)
    os.chmod(path, 0o711)
    return path


def add_seconds(verdict: Verdict, part: str, since: float) -> None:
    verdict.seconds[part] = verdict.seconds.get(part, 0.0) + time.perf_counter() - since


def add_call_seconds(verdict: Verdict, call: str, since: float) -> None:
    verdict.call_seconds[call] = verdict.call_seconds.get(call, 0.0) + time.perf_counter() - since


def foreign_processes(count: int) -> str | None:
    """Why a timing is not believed when other candidates' processes ran through it."""
    if count:
        return f"{count} process(es) that other candidates left running were alive during this timing"
    return None


def median_ms(verdict: Verdict, which: str) -> float | None:
    stats = verdict.timings.get(which)
    return stats.median_ms if stats else None


def fault_note(fault: str) -> str:
    """The note a verdict carries where its failure is not the candidate's."""
    return f"this failure is the {fault}'s, not the candidate's"


def fail(verdict: Verdict, status: str, error: str, details: str = "", fault: str = "candidate") -> NoReturn:
    verdict.status = status
    verdict.correct = False
    verdict.error = error
    if details:
        verdict.details = details
    if fault != "candidate":
        verdict.notes.append(fault_note(fault))
    verdict.settings["fault"] = fault
    raise RunStopped


def check_inputs(ref: dict, got: dict, index: int, cfg: JudgeConfig) -> CheckResult | None:
    """A failed check if the candidate's forward left its inputs other than the reference's
    forward left them: unchanged where the reference changes nothing, the reference's values
    (within tolerance) where it does. None when they agree."""
    before, after, cand = ref["inputs_before"], ref["inputs_after"], got["inputs_after"]
    if len(cand) != len(after):
        return CheckResult(index, False, message="the candidate reported the wrong number of inputs", phase="inputs")
    for k, (b, a, c) in enumerate(zip(before, after, cand)):
        if b == a:
            if c != a:
                return CheckResult(index, False, phase="inputs", message=(
                    f"forward changed its input {k} (argument {k + 1}), which the reference leaves as it "
                    "was: compute into memory of your own, never into the inputs"))
            continue
        got_value = got["inputs"].get(str(k))
        if got_value is None:
            return CheckResult(index, False, phase="inputs",
                               message=f"the candidate did not report input {k}, which forward changes")
        check = compare_outputs(got_value, ref["inputs"][str(k)], index, cfg.atol, cfg.rtol,
                                norm_rtol=cfg.norm_rtol)
        if not check.passed:
            check.phase = "inputs"
            check.message = f"input {k} after forward (the reference changes it in place): {check.message}"
            return check
    return None


def check_aliases(ref: dict, got: dict, index: int) -> CheckResult | None:
    """A failed check if an output of the candidate shares memory with an input where the
    reference's output does not: the caller's output and input would change together, and
    handing an input back is no computation of the output at all."""
    own = {tuple(pair) for pair in ref["aliases"]}
    for output, argument in got["aliases"]:
        if (output, argument) not in own:
            return CheckResult(index, False, phase="aliases", message=(
                f"output {output} shares memory with input {argument} (argument {argument + 1}), where the "
                "reference returns memory of its own: write the output into a tensor you allocate"))
    return None


def _matches(value: Any, kind: Any) -> bool:
    if kind is object:
        return True
    if kind is float:  # JSON may carry a whole number; booleans are not numbers here
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def check_reply(reply: dict, expect: dict[str, Any], what: str) -> None:
    """A worker's reply must carry every expected field with the expected type."""
    for key, kind in expect.items():
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if key not in reply or not any(_matches(reply[key], k) for k in kinds):
            raise WorkerError("runtime_error", f"malformed reply to `{what}`: field `{key}` is missing "
                              "or of the wrong type (something wrote on the judge's channel)")
