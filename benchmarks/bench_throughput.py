"""Solutions judged per minute by `cuda-agent bench` on one machine, baselines cached.

A warm-up run checks every problem's reference (determinism, eager and compile baselines into
the judge's cache). Then ``--copies`` copies of every solution are judged together, as samples
of their problem (the agent's output layout), so the judge pools stay full as in a real run.
Each copy has a comment appended to each of its files: its hash changes and it is built
afresh, as every new candidate of an RL run is. Throughput is candidates per minute of wall
time; the mean seconds of each judge stage show where the time goes.

``--pools local,ray,local`` measures like candidates with the local pool, the Ray pool (a Ray
instance started on this machine, or ``--ray-address``) and the local pool again, and ``--jobs
1,2,4`` with that many judges per GPU: each pair is one row, and Ray's overhead is its throughput
against the last local row's at the same jobs (the first row also builds what later rows reuse).

Prints a table and writes JSON. Absolute figures mean something only on the GPU machine.

    python benchmarks/bench_throughput.py --kernelbench KB_CHECKOUT --solutions examples/kernelbench \
        --levels 1,2 --copies 3 [--device cuda|cpu] [--jobs 1,2,4] [--pools local,ray,local]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cuda_agent.bench.kernelbench import discover, parse_levels, parse_selection  # noqa: E402
from cuda_agent.bench.benchmark import BenchOptions, default_jobs_per_gpu, run_benchmark  # noqa: E402
from cuda_agent.bench.runner import RESULTS_FILE, BenchRun, ResultsLog  # noqa: E402
from cuda_agent.cluster import make_pool  # noqa: E402
from cuda_agent.device import resolve_backend  # noqa: E402
from cuda_agent.bench.solutions import BEST_DIR, find_candidates  # noqa: E402
from cuda_agent.judge.config import JudgeConfig  # noqa: E402

COMMENTS = {".py": "#", ".cu": "//", ".cpp": "//", ".cuh": "//", ".h": "//"}
STAGES = ("build", "start", "verify", "profile", "total")


def copies_as_samples(kernelbench: Path, levels: list[int], selection, solutions: Path, destination: Path,
                      copies: int, tag: str = "") -> int:
    """Every solution ``copies`` times as agent-layout samples (level{N}/{stem}/{NN}/best/), each
    with a comment of its own appended to every source file. Returns the candidates written."""
    problems = [p for ps in discover(kernelbench, levels, selection).values() for p in ps]
    found, _ = find_candidates(solutions, problems)
    written = 0
    for problem in problems:
        for index, candidate in enumerate(c for c in found[problem.key] if c.path.exists()):
            for copy in range(copies):
                target = destination / f"level{problem.level}" / problem.stem / f"{index * copies + copy:02d}" / BEST_DIR
                if candidate.path.is_dir():
                    shutil.copytree(candidate.path, target)
                else:
                    target.mkdir(parents=True)
                    shutil.copy(candidate.path, target / "model_new.py")
                for path in target.rglob("*"):
                    if path.is_file() and path.suffix in COMMENTS:
                        path.write_text(path.read_text() + f"\n{COMMENTS[path.suffix]} throughput copy {copy}{tag}\n")
                written += 1
    return written


def add_candidate_options(parser: argparse.ArgumentParser, copies_help: str) -> None:
    """The options ``copies_as_samples`` takes: which problems, which solutions, how many copies."""
    parser.add_argument("--kernelbench", type=Path, required=True)
    parser.add_argument("--solutions", type=Path, required=True)
    parser.add_argument("--levels", default="1,2")
    parser.add_argument("--problems", action="append", default=None, help="as cuda-agent bench --problems")
    parser.add_argument("--copies", type=int, default=3, help=copies_help)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_candidate_options(parser, "copies of every solution judged together")
    parser.add_argument("--device", default=None)
    parser.add_argument("--jobs", default=None, help="evaluations at once per GPU, or a list: 1,2,4")
    parser.add_argument("--pools", default="local", help="pools in order, e.g. local,ray,local (the first row warms caches)")
    parser.add_argument("--ray-address", default=None, help="with the ray pool: HOST:PORT (default: start one here)")
    parser.add_argument("--timing-seconds", type=float, default=None)
    parser.add_argument("--exclusive-timing", action="store_true",
                        help="other judges' checks wait while one times (JudgeConfig.exclusive_timing)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="judge cache (default: a fresh one)")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "bench_throughput.json")
    args = parser.parse_args()

    console = Console(stderr=True)
    work = Path(tempfile.mkdtemp(prefix="bench-throughput-"))
    config = JudgeConfig(backend=args.device, cache_dir=args.cache_dir or work / "cache",
                         exclusive_timing=args.exclusive_timing)
    if args.timing_seconds:
        config = replace(config, timing=replace(config.timing, target_seconds=args.timing_seconds))
    levels, selection = parse_levels(args.levels), parse_selection(args.problems)
    backend = resolve_backend(config.backend)
    jobs_list = [int(j) for j in args.jobs.split(",")] if args.jobs else [default_jobs_per_gpu(backend, 1)]
    rows = []
    try:
        for jobs in jobs_list:
            for kind in args.pools.split(","):
                # Every row judges copies of its own (another comment, another hash): none finds
                # its builds cached by an earlier row, nor by a row of an earlier run that shared
                # --cache-dir (this run's folder name is unique).
                row = f"{len(rows)}-{kind}-{jobs}"
                out, samples = work / f"run-{row}", work / f"samples-{row}"
                count = copies_as_samples(args.kernelbench, levels, selection, args.solutions, samples, args.copies,
                                          tag=f" row {row} of {work.name}")
                rows.append(measure(args, replace(config, backend=backend), kind, jobs, levels, selection, out,
                                    samples, count, console))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    table = Table(title=f"bench throughput ({backend}, {rows[0]['candidates']} candidates a row)")
    for column in ("pool", "jobs per GPU", "correct", "wall s", "per minute", "vs local",
                   *(f"mean {s} s" for s in STAGES)):
        table.add_column(column)
    for row in rows:
        # against the last local row at these jobs: "--pools local,ray,local" lets the first row
        # pay for what every later one finds built (the precompiled header, the baselines)
        local = next((r for r in reversed(rows) if r["pool"] == "local" and r["jobs_per_gpu"] == row["jobs_per_gpu"]),
                     None)
        row["vs_local"] = row["per_minute"] / local["per_minute"] if local else None
        table.add_row(row["pool"], str(row["jobs_per_gpu"]), f"{row['correct']}/{row['judged']}", f"{row['seconds']:.1f}",
                      f"{row['per_minute']:.2f}", f"{row['vs_local']:.3f}" if row["vs_local"] else "-",
                      *(f"{row['mean_stage_seconds'].get(s, 0.0):.1f}" for s in STAGES))
    Console().print(table)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=1, default=str))


def measure(args, config, kind: str, jobs: int, levels, selection, out: Path, samples: Path, count: int,
            console: Console) -> dict:
    """One row: the candidates judged with ``kind`` pool at ``jobs`` per GPU."""
    # Warm-up: every reference checked and its baselines cached, in the run's own results file;
    # a local pool's processes and their fork servers started, and the row judged in that pool,
    # as a long run's judges are (a Ray pool is made again by the row).
    started = time.perf_counter()
    pool = make_pool(kind, config, jobs, args.ray_address if kind == "ray" else None)
    try:
        feeders = pool.max_concurrent if kind == "ray" else jobs
        asyncio.run(BenchRun(out, discover(args.kernelbench, levels, selection), {}).run([pool], feeders, console))
        if kind == "local":
            pool.warm()
        warm_s = time.perf_counter() - started

        options = BenchOptions(kernelbench=args.kernelbench, out=out, levels=levels, problem_ids=selection,
                               solutions=samples, judge=config, gpus=None if kind == "ray" else 1,
                               jobs_per_gpu=jobs, pool=kind, ray_address=args.ray_address if kind == "ray" else None)
        if kind == "ray":
            pool.close()
        started = time.perf_counter()
        report, _ = run_benchmark(options, console=console, pools=[pool] if kind == "local" else None)
        seconds = time.perf_counter() - started
    finally:
        pool.close()
    records = [r for r in ResultsLog(out / RESULTS_FILE).read() if r["kind"] == "solution"]
    judged = [r for r in records if r.get("stage_seconds")]
    # Each stage's mean over the judge runs that reached it (a wrong solution never profiles).
    stages = {s: statistics.mean(values) for s in STAGES
              if (values := [r["stage_seconds"][s] for r in judged if s in r["stage_seconds"]])}
    settings = report["settings"]
    Console().print(f"{kind} pool, {jobs} job(s) per GPU: warm-up (reference checks, baselines) {warm_s:.1f} s, "
                    f"{len(records)} candidates in {seconds:.1f} s")
    return {"pool": kind, "device": report.get("device"), "backend": settings["backend"], "gpus": settings["gpus"],
            "jobs_per_gpu": jobs, "exclusive_timing": args.exclusive_timing, "levels": levels, "copies": args.copies,
            "candidates": count,
            "judged": len(records), "correct": sum(bool(r.get("correct")) for r in records),
            "warm_up_seconds": warm_s, "seconds": seconds, "per_minute": 60.0 * len(records) / seconds,
            "mean_stage_seconds": stages, "outcomes": [outcome(r, out) for r in records]}


def outcome(record: dict, out: Path) -> dict:
    """What a candidate's verdict decided, without its timings' noise beside it, and why where
    it paid no speedup (its error, or the notes of a timing it did not believe)."""
    decided = {field: record.get(field) for field in ("key", "sample", "status", "correct", "reward",
                                                      "speedup_vs_eager", "speedup_vs_compile")}
    try:
        verdict = json.loads((out / record["verdict"]).read_text())
    except (KeyError, TypeError, OSError, ValueError):
        verdict = {}
    notes = verdict.get("notes") or []
    return {**decided, "why": record.get("error") or "; ".join(notes) or None,
            "seconds": record.get("stage_seconds"), "call_seconds": verdict.get("call_seconds"),
            "build_steps": _build_steps(verdict.get("build") or {})}


def _build_steps(build: dict) -> dict | None:
    """Seconds of each compiler run of the candidate's build (a workspace's, or its load_inline
    calls'), by source."""
    steps = dict(build.get("step_seconds") or {})
    for call in build.get("load_inline") or []:
        steps.update({f"{call.get('name')}/{rel}": s for rel, s in (call.get("step_seconds") or {}).items()})
    return steps or None


if __name__ == "__main__":
    main()
