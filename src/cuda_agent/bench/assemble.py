"""From a run's recorded results to the report: one scored record per problem, and metrics.

Per problem the paper's rule picks the best sample; a problem without any solution counts as
failed. Flags from the reference check (a nondeterministic reference, one too fast to time, one
that does not run) travel with the problem's record, so a report can tell a task's fault from
the solution's. With imported KernelBench baselines, speed-ups are recomputed against their
means; the judge's own measured speed-ups stay in the record beside them.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from ..judge.reference import FAILED as REFERENCE_FAILED, IMPORTED_MISMATCH, ReferenceReport
from .metrics import Metrics, level_metrics, overall_metrics, select_best
from .runner import BenchRun, Job, failure_record, no_speedup_reason


def problem_records(run: BenchRun, min_baseline_ms: float,
                    imported: dict[str, dict[str, dict]] | None = None) -> tuple[list[dict], list[dict]]:
    """(the scored record of every problem, the reference checks), for the current sources only."""
    recorded = {(r["key"], r.get("fingerprint")): r for r in run.log.read()}
    scored, references = [], []
    for level in sorted(run.problems):
        for problem in run.problems[level]:
            task = problem.task()
            reference = recorded.get((Job(problem, task).key, task.sha256))
            flags: list[str] = []
            if reference is not None:
                report = ReferenceReport.from_dict(reference["report"])
                flags = report.flags(min_baseline_ms) + ([] if report.ok else [REFERENCE_FAILED])
                references.append({"level": level, "problem_id": problem.problem_id, "name": problem.name,
                                   "flags": flags, **report.to_dict()})
            samples = []
            for candidate in run.candidates.get(problem.key, []):
                job = Job(problem, task, candidate)
                if (record := recorded.get((job.key, run.fingerprint(job)))) is not None:
                    samples.append(_rebased(record, imported, problem.key) if imported else dict(record))
            if imported and reference is not None:
                flags += _imported_mismatch(reference["report"], imported, problem.key)
            candidates = run.candidates.get(problem.key, [])
            best = select_best(samples) if samples else _missing(problem, judged_none=bool(candidates))
            scored.append({**best, "samples": len(samples), "flags": flags, "no_speedup": _no_speedup(run, best)})
    return scored, references


def _no_speedup(run: BenchRun, record: dict) -> str | None:
    """Why a correct result has no speed-up: recorded with it, or (for a result recorded before
    the reason was) read from its verdict."""
    if "no_speedup" in record or not record.get("correct") or not record.get("verdict"):
        return record.get("no_speedup")
    try:
        return no_speedup_reason(json.loads((run.out / record["verdict"]).read_text()))
    except (OSError, ValueError):
        return None


def _missing(problem: Any, judged_none: bool = False) -> dict:
    """A failed problem without a result: no solution, or solutions the judge has not yet judged
    (it failed on them, or the run was stopped); either counts as a failure until a rerun."""
    failure = (failure_record("not_judged", "not judged yet: rerun the same command") if judged_none
               else failure_record("missing", "no solution"))
    return {"level": problem.level, "problem_id": problem.problem_id, "name": problem.name, "sample": None, **failure}


def _imported_mismatch(reference: dict, imported: dict[str, dict[str, dict]], key: str) -> list[str]:
    """An imported eager time far from the one measured here: the problem's source likely changed
    since the imported file was made, so its speed-ups against it mean little."""
    entry = imported.get("eager", {}).get(key)
    measured = (reference.get("eager") or {}).get("median_ms")
    if entry and measured and not 0.5 <= entry["mean"] / measured <= 2.0:
        return [IMPORTED_MISMATCH]
    return []


def _rebased(record: dict, imported: dict[str, dict[str, dict]], key: str) -> dict:
    """Speed-ups against imported baselines (KernelBench's means) instead of the judge's medians.
    A candidate the judge timed and paid nothing over eager had its own time disbelieved (unstable,
    or bought with precision): no imported baseline pays it either."""
    record = dict(record)
    withheld = bool(record.get("correct") and record.get("candidate_ms") and record.get("speedup_vs_eager") is None)
    for mode in ("eager", "compile"):
        record[f"measured_speedup_vs_{mode}"] = record.get(f"speedup_vs_{mode}")
        entry = imported.get(mode, {}).get(key)
        candidate = record.get("candidate_ms")
        if withheld:
            continue
        if record.get("correct") and candidate and entry:
            record[f"speedup_vs_{mode}"] = entry["mean"] / candidate
            record[f"{mode}_ms"] = entry["mean"]
        elif record.get("correct") and candidate:
            record[f"speedup_vs_{mode}"] = None  # no imported baseline: not comparable
            record["no_speedup"] = f"no speed-up vs {mode}: the imported baselines have no time for this problem"
    return record


def build_report(run: BenchRun, label: str, min_baseline_ms: float, settings: dict[str, Any],
                 imported: dict[str, dict[str, dict]] | None = None) -> dict[str, Any]:
    scored, references = problem_records(run, min_baseline_ms, imported)
    levels = {}
    for level in sorted(run.problems):
        records = [r for r in scored if r["level"] == level]
        levels[str(level)] = level_metrics(level, records, problems=len(run.problems[level])).to_dict()
    overall = overall_metrics([Metrics.from_dict(m) for m in levels.values()]).to_dict()
    device = next((r["device"] for r in references if r.get("device")), None)
    return {"label": label, "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "device": device, "settings": settings, "levels": levels, "overall": overall,
            "baselines": baseline_summary(references, run.problems), "problems": scored, "references": references}


def baseline_summary(references: list[dict], problems: dict[int, list]) -> dict[str, dict[str, Any]]:
    """Per level and overall: problems, references checked and timed, and the check's cost (the sum
    of each check's own seconds, which overlap when checks run at once, and its host memory: the
    largest worker process, with its problem, and the largest judging process)."""
    def summary(items: list[dict], total: int) -> dict[str, Any]:
        timed = [r for r in items if r.get("ok")]
        largest = max((r for r in items if r.get("worker_peak_bytes")), key=lambda r: r["worker_peak_bytes"],
                      default=None)
        return {"problems": total, "checked": len(items), "timed": len(timed),
                "worker_peak_bytes": largest["worker_peak_bytes"] if largest else None,
                "worker_peak_problem": largest["name"] if largest else None,
                "judge_peak_bytes": max((r.get("judge_peak_bytes") or 0 for r in items), default=0) or None,
                "failed": [r["name"] for r in items if not r.get("ok")],
                "flagged": sum(1 for r in timed if r.get("flags")),  # a failed one is counted as failed
                "eager_ms_total": sum((r.get("eager") or {}).get("mean_ms", 0.0) for r in timed),
                "compile_ms_total": sum((r.get("compile") or {}).get("mean_ms", 0.0) for r in timed),
                "check_seconds": sum(r.get("seconds") or 0.0 for r in items)}

    found = {str(level): summary([r for r in references if r["level"] == level], len(problems[level]))
             for level in sorted(problems)}
    found["all"] = summary(references, sum(len(p) for p in problems.values()))
    return found
