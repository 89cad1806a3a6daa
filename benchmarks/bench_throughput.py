"""Solutions judged per minute by `cuda-agent bench` on one machine, baselines cached.

A warm-up run checks every problem's reference (determinism, eager and compile baselines into
the judge's cache). Then ``--copies`` copies of every solution are judged together, as samples
of their problem (the agent's output layout), so the judge pools stay full as in a real run.
Each copy has a comment appended to each of its files: its hash changes and it is built
afresh, as every new candidate of an RL run is. Throughput is candidates per minute of wall
time; the mean seconds of each judge stage show where the time goes.

Prints a table and writes JSON. Absolute figures mean something only on the GPU machine.

    python benchmarks/bench_throughput.py --kernelbench KB_CHECKOUT --solutions examples/kernelbench \
        --levels 1,2 --copies 3 [--device cuda|cpu] [--jobs N]
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
from cuda_agent.bench.pipeline import BenchOptions, default_jobs_per_gpu, run_benchmark  # noqa: E402
from cuda_agent.bench.runner import RESULTS_FILE, BenchRun, ResultsLog  # noqa: E402
from cuda_agent.cluster.pool import LocalJudgePool  # noqa: E402
from cuda_agent.device import resolve_backend  # noqa: E402
from cuda_agent.bench.solutions import BEST_DIR, find_candidates  # noqa: E402
from cuda_agent.judge.config import JudgeConfig  # noqa: E402

COMMENTS = {".py": "#", ".cu": "//", ".cpp": "//", ".cuh": "//", ".h": "//"}
STAGES = ("build", "start", "verify", "profile", "total")


def copies_as_samples(kernelbench: Path, levels: list[int], selection, solutions: Path, destination: Path,
                      copies: int) -> int:
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
                        path.write_text(path.read_text() + f"\n{COMMENTS[path.suffix]} throughput copy {copy}\n")
                written += 1
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernelbench", type=Path, required=True)
    parser.add_argument("--solutions", type=Path, required=True)
    parser.add_argument("--levels", default="1,2")
    parser.add_argument("--problems", action="append", default=None, help="as cuda-agent bench --problems")
    parser.add_argument("--copies", type=int, default=3, help="copies of every solution judged together")
    parser.add_argument("--device", default=None)
    parser.add_argument("--jobs", type=int, default=None, help="evaluations at once per GPU")
    parser.add_argument("--timing-seconds", type=float, default=None)
    parser.add_argument("--cache-dir", type=Path, default=None, help="judge cache (default: a fresh one)")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "bench_throughput.json")
    args = parser.parse_args()

    console = Console(stderr=True)
    work = Path(tempfile.mkdtemp(prefix="bench-throughput-"))
    config = JudgeConfig(backend=args.device, cache_dir=args.cache_dir or work / "cache")
    if args.timing_seconds:
        config = replace(config, timing=replace(config.timing, target_seconds=args.timing_seconds))
    levels, selection = parse_levels(args.levels), parse_selection(args.problems)
    out = work / "run"
    samples = work / "samples"
    count = copies_as_samples(args.kernelbench, levels, selection, args.solutions, samples, args.copies)
    try:
        measure(args, config, levels, selection, out, samples, count, console)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(args, config, levels, selection, out: Path, samples: Path, count: int, console: Console) -> None:

    # Warm-up: every reference checked and its baselines cached, in the run's own results file.
    started = time.perf_counter()
    backend = resolve_backend(config.backend)
    jobs = args.jobs or default_jobs_per_gpu(backend, 1)
    with LocalJudgePool(replace(config, backend=backend), jobs) as pool:
        asyncio.run(BenchRun(out, discover(args.kernelbench, levels, selection), {}).run([pool], jobs, console))
    warm_s = time.perf_counter() - started

    options = BenchOptions(kernelbench=args.kernelbench, out=out, levels=levels, problem_ids=selection,
                           solutions=samples, judge=config, gpus=1, jobs_per_gpu=jobs)
    started = time.perf_counter()
    report, _ = run_benchmark(options, console=console)
    seconds = time.perf_counter() - started
    records = [r for r in ResultsLog(out / RESULTS_FILE).read() if r["kind"] == "solution"]
    judged = [r for r in records if r.get("stage_seconds")]
    # Each stage's mean over the judge runs that reached it (a wrong solution never profiles).
    stages = {s: statistics.mean(values) for s in STAGES
              if (values := [r["stage_seconds"][s] for r in judged if s in r["stage_seconds"]])}
    settings = report["settings"]
    result = {"device": report.get("device"), "backend": settings["backend"], "gpus": settings["gpus"],
              "jobs_per_gpu": settings["jobs_per_gpu"], "levels": levels, "copies": args.copies,
              "candidates": count, "judged": len(records), "correct": sum(bool(r.get("correct")) for r in records),
              "warm_up_seconds": warm_s, "seconds": seconds, "per_minute": 60.0 * len(records) / seconds, "mean_stage_seconds": stages}
    table = Table(title=f"bench throughput ({settings['backend']}, {settings['gpus']} device(s), "
                        f"{settings['jobs_per_gpu']} jobs each)")
    for column in ("candidates", "correct", "wall s", "per minute",
                   *(f"mean {s} s" for s in STAGES)):
        table.add_column(column)
    Console().print(f"warm-up (reference checks, baselines into the cache): {warm_s:.1f} s")
    table.add_row(str(len(records)), str(result["correct"]), f"{seconds:.1f}", f"{result['per_minute']:.2f}",
                  *(f"{stages.get(s, 0.0):.1f}" for s in STAGES))
    Console().print(table)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
