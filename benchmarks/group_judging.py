"""One task's candidates judged as a group against one reference run, or as separate judges.

A GRPO group is many candidates for one task. ``Judge.evaluate_many`` judges them in one run:
one reference process and one reference forward per check for the whole group, every
candidate's process started and checked at the same time, and the correct ones profiled a few
at a time (``judge/group.py``). This script judges ``--sizes`` copies of an example's solution
(each with a comment of its own in ``model_new.py``: a new candidate, its kernels already built)
in a local judge pool of ``--concurrency`` judges (the training reward's default), after a warm-up
that builds the kernels and caches the baselines: as one group run; split into ``--concurrency``
group runs at once, as the training reward judges a group (``cluster.pool.split_group``); and as
separate judges, ``--concurrency`` at a time. Every copy is profiled, as a group whose candidates
are all correct is.

Prints a table and writes JSON. Absolute times mean something only on the GPU machine.

    python benchmarks/group_judging.py [--device cuda|cpu] [--example fused_elementwise] \
        [--sizes 4,16] [--concurrency 4] [--stage profile|verify] [--out results.json]
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
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cuda_agent.cluster.pool import LocalJudgePool, split_group  # noqa: E402
from cuda_agent.device import resolve_backend  # noqa: E402
from cuda_agent.judge.config import JudgeConfig  # noqa: E402
from cuda_agent.solution import MODEL_FILE, Solution, load_solution  # noqa: E402
from cuda_agent.task import load_task  # noqa: E402


def copies(solution: Solution, count: int, tag: str) -> list[Solution]:
    """``count`` candidates that differ from ``solution`` only by a comment in model_new.py."""
    made = []
    for k in range(count):
        files = dict(solution.files)
        files[MODEL_FILE] += f"\n# candidate {tag}-{k}\n"
        made.append(Solution(files, solution.layout, solution.origin))
    return made


STAGES = ("build", "start", "verify", "timing", "recheck", "profile", "total")


def summary(verdicts: list, wall: float) -> dict:
    paid = [v for v in verdicts if v.reward >= 1]
    stable = [v for v in verdicts if v.correct and v.timing_integrity.get("stable")]
    return {"candidates": len(verdicts), "wall_s": wall, "per_candidate_s": wall / max(1, len(verdicts)),
            "correct": sum(v.correct for v in verdicts), "paid": len(paid), "timing_believed": len(stable),
            "statuses": sorted({v.status for v in verdicts}),
            "errors": sorted({str(v.error)[:300] for v in verdicts if v.error}),
            "mean_seconds": {s: statistics.fmean(v.seconds.get(s, 0.0) for v in verdicts) for s in STAGES},
            "candidate_ms": sorted(v.timings["candidate"].median_ms for v in verdicts
                                   if v.timings.get("candidate"))}


async def measure(pool: LocalJudgePool, task, solution: Solution, sizes: list[int], concurrency: int,
                  stage: str) -> list[dict]:
    rows = []
    for size in sizes:
        group = copies(solution, size, f"group{size}")
        started = time.perf_counter()
        verdicts = await pool.evaluate_many(task, group, stage)
        rows.append({"size": size, "mode": "one group run", **summary(verdicts, time.perf_counter() - started)})

        parts = split_group(copies(solution, size, f"split{size}"), concurrency)
        started = time.perf_counter()
        verdicts = [v for part in await asyncio.gather(*(pool.evaluate_many(task, p, stage) for p in parts))
                    for v in part]
        rows.append({"size": size, "mode": f"{len(parts)} group runs at once",
                     **summary(verdicts, time.perf_counter() - started)})

        separate = copies(solution, size, f"separate{size}")
        gate = asyncio.Semaphore(concurrency)

        async def one(candidate: Solution):
            async with gate:
                return await pool.evaluate(task, candidate, stage)

        started = time.perf_counter()
        verdicts = await asyncio.gather(*(one(c) for c in separate))
        rows.append({"size": size, "mode": f"separate, {concurrency} at once",
                     **summary(list(verdicts), time.perf_counter() - started)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None)
    parser.add_argument("--example", default="fused_elementwise")
    parser.add_argument("--sizes", default="4,16", help="group sizes, comma-separated")
    parser.add_argument("--concurrency", type=int, default=4, help="separate judges at once (the reward's default)")
    parser.add_argument("--stage", default="profile", choices=("verify", "profile"))
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = parser.parse_args()

    backend = resolve_backend(args.device)
    example = ROOT / "examples" / args.example
    task = load_task(example / "model.py")
    solution = load_solution(example / backend)
    sizes = [int(s) for s in args.sizes.split(",")]
    cache = Path(tempfile.mkdtemp(prefix="group-judging-"))
    console = Console()
    try:
        with LocalJudgePool(JudgeConfig(backend=backend, cache_dir=cache), max_concurrent=args.concurrency) as pool:
            async def run() -> tuple[float, list[dict]]:
                started = time.perf_counter()
                # warm-up: the kernels built, the baselines cached, every pool process's fork server up
                warm = await asyncio.gather(*(pool.evaluate(task, c, "profile")
                                              for c in copies(solution, args.concurrency, "warm")))
                if not all(v.correct for v in warm):
                    sys.exit("the warm-up's judges failed: " + "; ".join(str(v.error) for v in warm if not v.correct))
                return time.perf_counter() - started, await measure(pool, task, solution, sizes, args.concurrency,
                                                                    args.stage)

            warm_s, rows = asyncio.run(run())
    finally:
        shutil.rmtree(cache, ignore_errors=True)

    table = Table(title=f"{args.example}, {backend}, stage {args.stage} (warm-up {warm_s:.1f} s)")
    for column in ("candidates", "judged as", "wall", "per candidate", "correct", "paid", "timing believed"):
        table.add_column(column)
    for r in rows:
        table.add_row(str(r["size"]), r["mode"], f"{r['wall_s']:.2f} s", f"{r['per_candidate_s']:.2f} s",
                      str(r["correct"]), str(r["paid"]), str(r["timing_believed"]))
    console.print(table)
    for r in rows:
        console.print(f"{r['size']} {r['mode']}: mean seconds " + ", ".join(
            f"{s} {x:.2f}" for s, x in r["mean_seconds"].items()) + "".join(f"\n  error: {e}" for e in r["errors"]))
    for mode in ("one group run", "group runs at once", "separate"):
        walls = {r["size"]: r["wall_s"] for r in rows if mode in r["mode"]}
        if len(walls) > 1:
            small, large = min(walls), max(walls)
            console.print(f"{mode}: {large} candidates took {walls[large] / walls[small]:.2f}x the time of {small}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"backend": backend, "example": args.example, "stage": args.stage,
                                        "concurrency": args.concurrency,
                                        "warm_up_s": warm_s, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
