"""Honest kernels refused under load: the timing integrity checks' false-refusal rate.

One honest example solution is judged ``--n`` times (default 100) through the local judge pool
at its default concurrency (or ``--concurrency``), as an RL run judges its candidates: several
judges at once, on one machine. Each judge compares the candidate's timing session with the
trusted reference's, call by call; on a loaded machine an honest kernel can look like one that
hides work. Counted: refusals (an honest, exact solution paid -1 because its timing was "not
credible"), withheld speedups (timing believed unstable: reward 1 instead of its milestone),
and any other failure. Goal: no refusal in 100.

Prints a table and writes JSON. Run it on the GPU machine for the GPU figure.

    python benchmarks/false_refusals.py [--device cuda|cpu] [--n 100] [--concurrency N] [--example fused_elementwise]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cuda_agent.cluster.pool import LocalJudgePool, default_concurrency  # noqa: E402
from cuda_agent.device import resolve_backend  # noqa: E402
from cuda_agent.judge.config import JudgeConfig  # noqa: E402
from cuda_agent.solution import load_solution  # noqa: E402
from cuda_agent.task import load_task  # noqa: E402


def outcome(verdict) -> str:
    if verdict.status == "ok" and verdict.correct:
        return "withheld" if not verdict.timing_integrity.get("stable", True) else "paid"
    if verdict.status == "runtime_error" and "not credible" in verdict.error:
        return "refused"
    return f"other: {verdict.status}: {verdict.error[:120]}"


async def judge_all(pool, task, solution, n: int, progress: Progress) -> list:
    bar = progress.add_task("judging", total=n)

    async def one():
        verdict = await pool.evaluate(task, solution, "profile")
        progress.advance(bar)
        return verdict

    return await asyncio.gather(*(one() for _ in range(n)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=None, help="judges at once (default: the pool's)")
    parser.add_argument("--example", default="fused_elementwise", help="a folder of examples/")
    parser.add_argument("--out", type=Path, default=None, help="JSON (default: benchmarks/results/false_refusals-BACKEND.json)")
    args = parser.parse_args()

    backend = resolve_backend(args.device)
    concurrency = args.concurrency or default_concurrency()
    example = ROOT / "examples" / args.example
    task, solution = load_task(example / "model.py"), load_solution(example / backend)
    with tempfile.TemporaryDirectory() as tmp:
        config = JudgeConfig(backend=backend, cache_dir=Path(tmp) / "cache")
        with LocalJudgePool(config, concurrency) as pool:
            asyncio.run(pool.evaluate(task, solution, "profile"))  # builds and caches the baselines
            started = time.perf_counter()
            with Progress(console=Console(stderr=True)) as progress:
                verdicts = asyncio.run(judge_all(pool, task, solution, args.n, progress))
            seconds = time.perf_counter() - started
    counts = collections.Counter(outcome(v) for v in verdicts)
    rewards = collections.Counter(v.reward for v in verdicts)
    medians = [v.timings["candidate"].median_ms for v in verdicts if v.timings.get("candidate")]
    result = {"command": " ".join(sys.argv), "backend": backend, "example": args.example, "n": args.n,
              "concurrency": concurrency, "seconds": seconds, "outcomes": dict(counts),
              "rewards": {str(k): v for k, v in sorted(rewards.items())},
              "refusal_rate": counts.get("refused", 0) / args.n,
              "candidate_median_ms": {"median": statistics.median(medians), "min": min(medians),
                                      "max": max(medians)} if medians else None,
              "goal_met": counts.get("refused", 0) == 0}
    table = Table(title=f"{args.n} honest judges of {args.example} ({backend}, {concurrency} at once, {seconds:.0f} s)")
    for column in ("outcome", "judges"):
        table.add_column(column)
    for name, count in counts.most_common():
        table.add_row(name, str(count))
    Console().print(table)
    Console().print(f"rewards: {result['rewards']}; refusal rate {result['refusal_rate']:.1%} "
                    f"({'goal met' if result['goal_met'] else 'goal missed'}: none in {args.n})")
    out = args.out or ROOT / "benchmarks" / "results" / f"false_refusals-{backend}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
