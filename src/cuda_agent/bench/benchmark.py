"""``cuda-agent bench`` end to end: problems, solutions (given or from the agent), runs, report."""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from rich.console import Console

from ..errors import BenchmarkError
from ..files import write_atomic
from ..judge.config import JudgeConfig
from .assemble import build_report
from .baseline_comparison import compare, mode_dependent, write_comparison
from .kb_timing import export_baselines, import_baselines
from .kernelbench import Problem, discover
from .report import no_speedup_table, write_report
from .runner import BenchRun, check_candidates_exist
from .solutions import find_candidates

AGENT_DIR = "agent"


@dataclass
class BenchOptions:
    kernelbench: Path
    out: Path
    levels: list[int]
    problem_ids: set[int] | dict[int | None, set[int]] | None = None   # see kernelbench.discover
    solutions: Path | None = None          # or run the agent: see ``agent``
    agent: Callable[[dict[int, list[Problem]], Path, Any], None] | None = None
    label: str | None = None
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    gpus: int | None = None                # None: every visible GPU (one on the cpu backend)
    jobs_per_gpu: int | None = None        # evaluations at once per GPU
    pool: str = "local"                    # local processes, or "ray": every GPU of a Ray cluster
    ray_address: str | None = None         # with pool="ray": HOST:PORT, or None to start one here
    min_baseline_ms: float = 0.1
    import_baselines: Path | None = None
    export_baselines: Path | None = None
    compare_baselines: Path | None = None  # a KernelBench timing folder to compare our baselines with
    baselines_only: bool = False           # check and time the references only: no solutions
    report_only: bool = False


def default_jobs_per_gpu(backend: str, gpus: int) -> int:
    """On a GPU: enough evaluations to keep the cores building and verifying while one times.
    On the CPU backend: one, since anything running beside a timing session is in its numbers."""
    if backend != "cuda":
        return 1
    return max(2, (os.cpu_count() or 2) // (2 * gpus))


def visible_gpus(backend: str) -> int:
    if backend != "cuda":
        return 1
    import torch

    return max(1, torch.cuda.device_count())


def run_benchmark(options: BenchOptions, console: Console | None = None,
                  pools: list[Any] | None = None) -> tuple[dict, dict[str, Path]]:
    """Judge what is not yet judged, then write the report; returns (report, written files).
    ``pools``: local pools already started, one per GPU, to judge with (their processes warm);
    they stay the caller's to close."""
    from ..cluster import make_pool
    from ..cluster.pool import SpreadJudgePool
    from ..device import resolve_backend

    if options.baselines_only and (options.solutions is not None or options.agent is not None):
        raise BenchmarkError("--baselines-only times the references alone: drop --solutions and --model")
    if not options.baselines_only and (options.solutions is None) == (options.agent is None):
        raise BenchmarkError("give either a solutions folder (--solutions) or a model to run (--model): one of the "
                             "two, or --baselines-only to time the references alone")
    problems = discover(options.kernelbench, options.levels, options.problem_ids)
    imported = import_baselines(options.import_baselines) if options.import_baselines else None
    theirs = import_baselines(options.compare_baselines) if options.compare_baselines else None
    judging = list(pools or [])  # what judges; ``pools`` then holds those made here, closed here
    pools = []
    if judging and options.pool != "local":
        raise BenchmarkError("pools given to run_benchmark must be local pools")
    if options.pool == "ray" and not options.report_only:
        if options.gpus:
            raise BenchmarkError("--gpus applies to the local pool; a Ray pool uses every GPU of its cluster")
        # The cluster decides the backend (the driver may have no GPU) and the number of GPUs.
        pool = make_pool("ray", options.judge, options.jobs_per_gpu, options.ray_address)
        pools = judging = [pool]
        backend = pool.backend
        gpus = int(pool.workers.resources.get("GPU", 0)) if backend == "cuda" else 1
        jobs = pool.max_concurrent  # one feeder per actor
    else:
        # Rebuilding a report needs no device: take the backend the user names for it.
        backend = options.judge.backend if options.report_only and options.judge.backend else \
            resolve_backend(options.judge.backend)
        gpus = options.gpus or visible_gpus(backend)
        if backend == "cuda" and gpus > visible_gpus(backend):
            raise BenchmarkError(f"--gpus {gpus} asked for, but {visible_gpus(backend)} GPU(s) are visible")
        jobs = options.jobs_per_gpu or default_jobs_per_gpu(backend, gpus)
    failure: BenchmarkError | None = None
    try:
        if not options.report_only:
            _check_run_settings(options.out, backend, options.judge)
            # How this call judges, for a report rebuilt later with --report-only.
            write_atomic(options.out / LAST_RUN_FILE, json.dumps({
                "gpus": gpus, "jobs_per_gpu": jobs, "pool": options.pool,
                "exclusive_timing": options.judge.exclusive_timing}))
        if console is not None and backend == "cpu" and not options.report_only:
            warning = cpu_warning(BenchRun(options.out, problems, {}), options.agent is not None)
            if warning:
                console.print(warning)
        if not judging and not options.report_only:
            judging = pools = [make_pool("local", replace(options.judge, backend=backend, device_index=i), jobs)
                               for i in range(gpus)]
        solutions = options.solutions
        if options.agent is not None:
            solutions = options.out / AGENT_DIR
            if not options.report_only:
                # every GPU's pool: the episodes' judges spread over all of them
                options.agent(problems, solutions, judging[0] if len(judging) == 1 else SpreadJudgePool(judging))
        candidates, unmatched = ({}, []) if solutions is None else \
            find_candidates(solutions, [p for ps in problems.values() for p in ps])
        if console is not None and unmatched:
            console.print(f"[yellow]not matched to any selected problem:[/] {', '.join(unmatched[:10])}"
                          + (" ..." if len(unmatched) > 10 else ""))
        if options.agent is None and not options.baselines_only:
            check_candidates_exist(candidates)
        run = BenchRun(options.out, problems, candidates, solutions_root=Path(solutions) if solutions else None)
        if not options.report_only:
            try:
                asyncio.run(run.run(judging, jobs, console))
            except BenchmarkError as exc:  # some jobs failed: report what was recorded, then say so
                failure = exc
    finally:
        for pool in pools:
            pool.close()

    settings = {"backend": backend, "gpus": gpus, "jobs_per_gpu": jobs, "pool": options.pool,
                "exclusive_timing": options.judge.exclusive_timing, "levels": options.levels,
                "problems": {str(level): [p.problem_id for p in items] for level, items in problems.items()},
                "min_baseline_ms": options.min_baseline_ms, "baselines_only": options.baselines_only,
                "baselines": f"imported from {options.import_baselines} (KernelBench means)" if imported
                             else "measured by the judge (medians)",
                "judge": _judge_settings(options.judge),
                "unmatched_solution_entries": unmatched}
    if options.report_only:  # how the results were produced is the earlier run's, not this call's
        settings.update(_earlier_run_settings(options.out))
    label = options.label or (Path(solutions).name if solutions else "baselines")
    report = build_report(run, label, options.min_baseline_ms, settings, imported)
    written = write_report(options.out, report)
    if console is not None and (table := no_speedup_table(report)) is not None:
        console.print(table)
    if options.export_baselines:
        hardware = (report.get("device") or {}).get("name", backend)
        entries = [{"level": r["level"], "name": r["name"], "eager": r.get("eager"), "compile": r.get("compile"),
                    "device": f"{backend}:0"} for r in report["references"]]
        written.update({f"baselines_{k}": v for k, v in
                        export_baselines(Path(options.export_baselines), entries, hardware).items()})
    if theirs is not None:
        differs = {problem.key for items in problems.values() for problem in items
                   if mode_dependent(problem.task().source)}
        comparison = compare(report["references"], theirs, options.min_baseline_ms, differs)
        written.update(write_comparison(options.out, comparison))
    if failure is not None:
        raise failure
    return report, written


# Three KernelBench level-1 references took 42 minutes to check on a two-core machine: their inputs
# are sized for a GPU, so one eager or torch.compile call of them can take seconds on a CPU.
CPU_MINUTES_EACH = "a quarter of an hour or more"


def cpu_warning(run: BenchRun, agent: bool = False) -> str | None:
    """What a CPU run of the problems still to check is in for, said before it starts (None when
    every reference is already checked). Past checks in the same folder give the estimate."""
    pending, _ = run.jobs()
    if not pending:
        return None
    done = [r["seconds"] for r in run.log.read() if r.get("kind") == "reference" and r.get("seconds")]
    if done:
        each = sum(done) / len(done)
        expect = (f"the {len(done)} reference(s) already checked here took {each / 60:.1f} min each, so about "
                  f"{len(pending) * each / 3600:.1f} h more for these")
    else:
        expect = f"each can take {CPU_MINUTES_EACH} on a CPU"
    return ("[yellow]On the CPU:[/] KernelBench's inputs are sized for GPUs. "
            f"{len(pending)} problem(s) have baselines (eager and torch.compile) to time first; {expect}"
            + (", on top of the agent's episodes" if agent else "") + ". "
            "Limit the run with --levels and --problems (e.g. --levels 1 --problems 1-5), "
            "and --timing-seconds for shorter timing sessions; stopping is safe, and the same command resumes "
            "where it stopped.")


def _earlier_run_settings(out: Path) -> dict:
    """The settings the recorded results were judged with: the backend and judge settings
    (OUT/run.json), and the last judging call's pool, GPUs and evaluations at once."""
    found = {}
    try:  # an older run's folder has no last_run.json: its report says how it ran
        earlier = json.loads((out / "report.json").read_text())["settings"]
        found.update({key: earlier[key] for key in HOW_IT_RAN if key in earlier})
    except (OSError, ValueError, KeyError, TypeError):
        pass
    for name in (RUN_FILE, LAST_RUN_FILE):
        try:
            found.update(json.loads((out / name).read_text()))
        except (OSError, ValueError, TypeError):
            continue
    judge = {key: value for key, value in found.items() if key not in ("backend", *HOW_IT_RAN)}
    return {**{key: found[key] for key in ("backend", *HOW_IT_RAN) if key in found},
            **({"judge": judge} if judge else {})}


RUN_FILE = "run.json"
LAST_RUN_FILE = "last_run.json"
HOW_IT_RAN = ("gpus", "jobs_per_gpu", "pool", "exclusive_timing")  # the last call's, in LAST_RUN_FILE


def _check_run_settings(out: Path, backend: str, judge: JudgeConfig) -> None:
    """Results in one folder must be comparable: the first run's backend and judge settings are
    kept in OUT/run.json, and a later run with others is refused rather than mixed in."""
    path = out / RUN_FILE
    settings = {"backend": backend, **_judge_settings(judge)}
    if path.exists():
        earlier = json.loads(path.read_text())
        if earlier != settings:
            changed = sorted(k for k in settings.keys() | earlier.keys() if settings.get(k) != earlier.get(k))
            raise BenchmarkError(f"{out} holds results judged with other settings ({', '.join(changed)} differ); "
                                 "use another --out, or the same settings to resume")
        return
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(settings, indent=1))


def _judge_settings(judge: JudgeConfig) -> dict:
    """The judge settings that decide a result, as JSON reads them back (tuples become lists)."""
    return json.loads(json.dumps({
        "num_checks": judge.num_checks, "atol": judge.atol, "rtol": judge.rtol, "norm_rtol": judge.norm_rtol,
        "margin": judge.margin, "timing": judge.timing.__dict__, "timing_attempts": judge.timing_attempts,
        "static_checks": judge.static_checks, "runtime_checks": judge.runtime_checks,
        "floor_slack": judge.floor_slack, "fast_math": judge.fast_math}))
