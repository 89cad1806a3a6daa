"""Judging a task that declares workloads (``cuda_agent.workloads``): one verdict over them all.

Each workload is judged as a task of its own (``workloads.variant``), so every check, guard and
timing rule holds at each one as it does for any task. Held-out workloads come first, checked
only (verify): drawn afresh for every judgement and never shown to the candidate, they are where a
kernel hard-wired to the shapes it saw fails, and they cost no timing. The declared workloads
follow, at the stage asked; a candidate stops at its first failing workload, which the verdict
names. A correct candidate's speedups are the geometric means of its speedups over the declared
workloads, and its reward comes from those (Eq. 1 on the means); a speedup withheld at any
workload (an unsteady time, reduced precision) is withheld for the whole.
"""

from __future__ import annotations

import copy
import statistics
from typing import TYPE_CHECKING, Any

from ..errors import TaskFormatError
from ..solution import Solution
from ..task import Task
from ..workloads import Workload, WorkloadPlan, held_out, read_plan, variant
from .reward import rewards
from .run_support import fault_note, median_ms
from .verdict import Verdict

if TYPE_CHECKING:
    from .judge import Judge

TASKS_FAULT_NOTE = fault_note("task")


def judge_over_workloads(judge: "Judge", task: Task, solutions: list[Solution], stage: str) -> list[Verdict]:
    """One verdict per solution over every workload of ``task``."""
    try:
        plan = read_plan(task)
    except TaskFormatError as exc:
        return [_task_fault(judge, task, solution, str(exc)) for solution in solutions]
    # One draw for the candidates judged together here, compared alike. (A training reward may
    # split a GRPO group over several calls, and does not judge again what it has cached.)
    hidden = held_out(plan, judge._rng)
    order = [(w, "verify") for w in hidden] + [(w, stage) for w in plan.workloads]
    results: list[list[tuple[Workload, Verdict]]] = [[] for _ in solutions]
    live = list(range(len(solutions)))
    for workload, at in order:
        if not live:
            break
        judge.progress(f"{workload.describe()}: {len(live)} candidate(s)")
        sub = variant(task, workload)
        verdicts = judge.evaluate_many(sub, [solutions[k] for k in live], at) if len(live) > 1 else \
            [judge.evaluate(sub, solutions[live[0]], at)]
        for k, verdict in zip(live, verdicts):
            results[k].append((workload, verdict))
        if any(_not_held_against(workload, verdict) for verdict in verdicts):
            _confirm_alone(judge, sub, verdicts)
        live = [k for k, verdict in zip(live, verdicts) if verdict.status == "ok" or _not_held_against(workload, verdict)]
    return [combine(task, plan, results[k], stage, judge.config.margin) for k in range(len(solutions))]


def _not_held_against(workload: Workload, verdict: Verdict) -> bool:
    """A held-out workload whose failure is the task's (its reference fails at the size drawn):
    the judge's draw, not the candidate's doing, so it is passed over."""
    return workload.held_out and verdict.status != "ok" and verdict.settings.get("fault") == "task"


def _confirm_alone(judge: "Judge", sub: Task, verdicts: list[Verdict]) -> None:
    """A reference that failed at a held-out size beside the candidates, run again alone. A
    candidate can make the reference beside it fail (by taking the device's memory, say), and so
    have passed over the very size that catches a kernel hard-wired to the sizes it saw: the size
    is passed over only where the reference fails alone too. Where it runs alone, the failure
    stands against each candidate it happened beside, as a reference's failure does at any task."""
    alone = judge.check_reference(sub)
    if not alone.ok:
        return
    beside = "the task's reference failed at this size only beside the candidate; alone, it ran"
    for verdict in verdicts:
        if verdict.settings.get("fault") == "task":
            verdict.settings["fault"] = "candidate"
            verdict.notes = [beside if n == TASKS_FAULT_NOTE else n for n in verdict.notes]
            verdict.feedback = verdict.feedback.replace(TASKS_FAULT_NOTE, beside)


# Failures that do not depend on the workload (the solution's files, its build, its rules): said
# as they are, without a workload to blame.
ANY_WORKLOAD = ("compile_error", "forbidden")


def combine(task: Task, plan: WorkloadPlan, results: list[tuple[Workload, Verdict]], stage: str,
            margin: float) -> Verdict:
    """The verdict over the workloads judged: the first failure's, naming its workload; else the
    first declared workload's, with speedups and rewards from the geometric means."""
    passed_over = [(w, v) for w, v in results if _not_held_against(w, v)]
    failed = next(((w, v) for w, v in results if v.status != "ok" and (w, v) not in passed_over), None)
    declared = [(w, v) for w, v in results if not w.held_out]
    workload, first = failed or declared[0]
    out = copy.deepcopy(first)
    out.task, out.task_sha256 = task.name, task.sha256
    out.workloads = [summary(w, v) for w, v in results]
    out.seconds = {"total": sum(v.seconds.get("total", 0.0) for _, v in results),
                   **{f"workload {w.name}": v.seconds.get("total", 0.0) for w, v in results}}
    out.notes = _notes(results) + [f"{w.describe()} was passed over: the task's reference failed there "
                                   f"({v.error})" for w, v in passed_over]
    if failed is not None:
        if first.status in ANY_WORKLOAD:
            return out
        out.error = f"{workload.describe()}: {first.error}"
        hint = (" (a size the task did not show: the kernel must handle other values of "
                f"{', '.join(plan.varying)})" if workload.held_out and first.status == "incorrect" else "")
        out.feedback = f"on {workload.describe()}{hint}:\n{first.feedback}"
        return out
    if stage == "profile":
        _pay_means(out, declared, margin)
    out.feedback = render(out, results)
    return out


def _pay_means(out: Verdict, declared: list[tuple[Workload, Verdict]], margin: float) -> None:
    """Speedups, rewards and what was withheld, from every declared workload's."""
    withheld = [f"{w.name}: {v.speedup_withheld}" for w, v in declared if v.speedup_withheld]
    compile_withheld = [f"{w.name}: {v.compile_speedup_withheld}" for w, v in declared
                        if v.compile_speedup_withheld]
    out.speedup_withheld = "; ".join(withheld) or None
    out.compile_speedup_withheld = None if withheld else ("; ".join(compile_withheld) or None)
    eager = None if withheld else geometric_mean([v.speedup_vs_eager for _, v in declared])
    compiled = None if withheld or compile_withheld else geometric_mean([v.speedup_vs_compile for _, v in declared])
    if withheld or compile_withheld:
        unpaid = ("eager", "compile") if withheld else ("compile",)
        out.timing_integrity["unpaid_speedups"] = {
            b: geometric_mean([_measured(v, b) for _, v in declared]) for b in unpaid}
    out.speedup_vs_eager, out.speedup_vs_compile = eager, compiled
    # The mean share of the gap to the device's limit closed, over the declared workloads.
    out.sol_score = {b: mean([v.sol_score.get(b) for _, v in declared]) for b in ("eager", "compile")}
    # Eq. 1 (and the others) on the means: the candidate's time is 1, each baseline's its mean speedup.
    out.reward, out.reward_continuous, out.reward_sol = rewards(True, 1.0, eager, compiled, out.sol_score["compile"],
                                                                margin)


def _measured(v: Verdict, baseline: str) -> float | None:
    """A workload's speedup over ``baseline``, paid or kept aside as unpaid."""
    paid = v.speedup_vs_eager if baseline == "eager" else v.speedup_vs_compile
    return paid if paid is not None else (v.timing_integrity.get("unpaid_speedups") or {}).get(baseline)


def mean(values: list[float | None]) -> float | None:
    """The arithmetic mean, or None where any value is missing."""
    if not values or any(v is None for v in values):
        return None
    return statistics.fmean(values)


def geometric_mean(values: list[float | None]) -> float | None:
    """The geometric mean, or None where any value is missing or not positive."""
    if not values or any(v is None or not v > 0 for v in values):
        return None
    return statistics.geometric_mean(values)


def summary(workload: Workload, v: Verdict) -> dict[str, Any]:
    """One workload's outcome, for the verdict's ``workloads``."""
    return {"name": workload.name, "axes": workload.axes, "held_out": workload.held_out,
            "atol": workload.atol, "rtol": workload.rtol, "stage": v.stage, "status": v.status,
            "correct": v.correct, "error": v.error, "reward": v.reward,
            "speedup_vs_eager": v.speedup_vs_eager, "speedup_vs_compile": v.speedup_vs_compile,
            "speedup_withheld": v.speedup_withheld, "sol_score": v.sol_score, "reward_sol": v.reward_sol,
            "candidate_ms": median_ms(v, "candidate"), "eager_ms": median_ms(v, "eager"),
            "compile_ms": median_ms(v, "compile"), "seconds": v.seconds.get("total")}


def _notes(results: list[tuple[Workload, Verdict]]) -> list[str]:
    seen: list[str] = []
    for w, v in results:
        for note in v.notes:
            if note not in seen:
                seen.append(note)
    return seen


def render(out: Verdict, results: list[tuple[Workload, Verdict]]) -> str:
    """Feedback over the workloads: one line each, then the means and the reward."""
    judged = [(w, v) for w, v in results if v.status == "ok"]
    hidden = sum(w.held_out for w, _ in judged)
    lines = [f"correct on all {len(judged)} workloads ({hidden} held out, checked only)"]
    for w, v in judged:
        cells = [w.describe()]
        if median_ms(v, "candidate") is not None:
            cells.append(f"candidate {median_ms(v, 'candidate'):.4g} ms")
            for name, key in (("eager", "speedup_vs_eager"), ("torch.compile", "speedup_vs_compile")):
                base, speedup = median_ms(v, name.replace("torch.", "")), getattr(v, key)
                if base is not None:
                    cells.append(f"{name} {base:.4g} ms" + (f" ({speedup:.2f}x)" if speedup else ""))
        lines.append("  " + "  ".join(cells))
    if out.stage == "profile":
        if out.speedup_withheld:
            lines.append(f"no speedup is paid: {out.speedup_withheld}")
        else:
            means = [f"{label} {value:.2f}x" for label, value in (("eager", out.speedup_vs_eager),
                                                                  ("torch.compile", out.speedup_vs_compile)) if value]
            lines.append("geometric mean over the declared workloads: " + (", ".join(means) or "n/a"))
        lines.append(f"reward {out.reward} (Eq. 1 on those means)")
    lines += [f"note: {n}" for n in out.notes]
    return "\n".join(lines)


def _task_fault(judge: "Judge", task: Task, solution: Solution, error: str) -> Verdict:
    verdict = judge.new_verdict(task, solution)
    verdict.status, verdict.error = "runtime_error", error
    verdict.settings["fault"] = "task"
    verdict.feedback = f"the task's workloads cannot be read: {error}"
    return verdict
