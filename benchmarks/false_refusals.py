"""Honest kernels refused under load: the timing integrity checks' false-refusal rate.

One honest example solution is judged ``--n`` times (default 100) through the local judge pool
at its default concurrency (or ``--concurrency``), as an RL run judges its candidates: several
judges at once, on one machine. Each judge compares the candidate's timing session with the
trusted reference's, call by call; on a loaded machine an honest kernel can look like one that
hides work. Counted: refusals (an honest, exact solution paid -1 because its timing was "not
credible"), withheld speedups (timing believed unstable: reward 1 instead of its milestone),
and any other failure. Goal: no refusal in 100.

Prints a table and writes JSON, and each judge's outcome to a JSONL beside it as it arrives.
``--max-minutes`` starts no judge after that long (the JSON says how many were judged). Run it on
the GPU machine for the GPU figure. ``--busy N`` keeps N processes spinning beside the judges for
the whole run: a machine loaded as a CI runner or a shared node is; ``--beside CMD`` runs a shell
command beside them instead (a parallel test run loads a machine as busy loops do not: compiles,
training, memory traffic), stopped when the judges are done. On the cpu backend the example's
CPU-sized task (``model_cpu.py``) is judged where it has one, as ``cuda-agent demo`` does;
``--task`` and ``--solution`` judge another pair, and ``--short-sessions`` times as few calls as
the test suite does (where refusals under load were seen).

    python benchmarks/false_refusals.py [--device cuda|cpu] [--n 100] [--concurrency N] [--max-minutes M]
                                        [--busy N | --beside CMD] [--task F --solution P] [--short-sessions]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cuda_agent.cluster.pool import LocalJudgePool, default_concurrency  # noqa: E402
from cuda_agent.device import resolve_backend  # noqa: E402
from cuda_agent.judge.config import JudgeConfig, TimingConfig  # noqa: E402
from cuda_agent.solution import load_solution  # noqa: E402
from cuda_agent.task import load_task  # noqa: E402


def outcome(verdict) -> str:
    if verdict.status == "ok" and verdict.correct:
        return "withheld" if not verdict.timing_integrity.get("stable", True) else "paid"
    if verdict.status == "runtime_error" and "not credible" in verdict.error:
        return "refused"
    last_line = (verdict.error.strip().splitlines() or [""])[-1]  # a traceback's own message
    return f"other: {verdict.status}: {last_line[:120]}"


async def judge_all(pool, task, solution, n: int, feeders: int, deadline: float, log: Path,
                    progress: Progress) -> list:
    """Up to ``n`` judges, ``feeders`` at a time, none started after ``deadline``; each verdict's
    outcome is appended to ``log`` as it arrives, so a cut run keeps what it judged."""
    bar = progress.add_task("judging", total=n)
    verdicts: list = []
    started = 0

    async def feeder():
        nonlocal started
        while started < n and time.monotonic() < deadline:
            started += 1
            verdict = await pool.evaluate(task, solution, "profile")
            verdicts.append(verdict)
            stats = verdict.timings.get("candidate")
            with log.open("a") as fh:
                # The whole error and stage: a failure of the judge itself must be traceable.
                fh.write(json.dumps({"outcome": outcome(verdict), "reward": verdict.reward,
                                     "candidate_ms": stats.median_ms if stats else None,
                                     "stage": verdict.stage, "error": verdict.error,
                                     "details": verdict.details[-4000:] if verdict.details else "",
                                     "notes": list(verdict.notes),  # e.g. a kernel record taken again
                                     "timing_integrity": verdict.timing_integrity}, default=str) + "\n")
            progress.advance(bar)

    await asyncio.gather(*(feeder() for _ in range(feeders)))
    return verdicts


# Sessions as short as the test suite's (tests/conftest.py): a few calls, every figure believed.
SHORT_SESSIONS = TimingConfig(warmup_calls=2, min_calls=5, max_calls=10, target_seconds=0.2, precision=10.0,
                              max_uncertainty=10.0, baseline_sessions=1, baseline_tolerance=1.0, drift_tolerance=100.0)


@contextmanager
def load_beside(busy: int, command: str | None, log: Path) -> Iterator[None]:
    """``busy`` processes spinning on the CPU, and ``command`` (a shell command, its output to
    ``log``) running in a process group of its own, while the block runs; all stopped after."""
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    beside = None
    if command:
        with log.open("w") as fh:
            beside = subprocess.Popen(command, shell=True, stdout=fh, stderr=subprocess.STDOUT,
                                      start_new_session=True, cwd=ROOT)
    try:
        yield
    finally:
        for process in spinning:
            process.kill()
            process.wait()
        if beside is not None:
            if beside.poll() is None:
                os.killpg(beside.pid, signal.SIGKILL)  # the command and everything it started
            beside.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=None, help="judges at once (default: the pool's)")
    parser.add_argument("--example", default="fused_elementwise", help="a folder of examples/")
    parser.add_argument("--max-minutes", type=float, default=None, help="start no judge after this long")
    parser.add_argument("--exclusive-timing", action="store_true",
                        help="other judges' checks wait while one times (JudgeConfig.exclusive_timing)")
    parser.add_argument("--busy", type=int, default=0, help="processes spinning beside the judges (a loaded machine)")
    parser.add_argument("--beside", default=None, help="a shell command run beside the judges, stopped after them")
    parser.add_argument("--task", type=Path, default=None, help="a task file (default: the example's)")
    parser.add_argument("--solution", type=Path, default=None, help="a solution (default: the example's)")
    parser.add_argument("--short-sessions", action="store_true", help="time as few calls as the test suite does")
    parser.add_argument("--out", type=Path, default=None, help="JSON (default: benchmarks/results/false_refusals-BACKEND.json)")
    args = parser.parse_args()

    backend = resolve_backend(args.device)
    concurrency = args.concurrency or default_concurrency()
    example = ROOT / "examples" / args.example
    cpu_sized = example / "model_cpu.py"
    task_file = cpu_sized if backend == "cpu" and cpu_sized.is_file() else example / "model.py"
    task_file = args.task or task_file
    task, solution = load_task(task_file), load_solution(args.solution or example / backend)
    out = args.out or ROOT / "benchmarks" / "results" / f"false_refusals-{backend}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    log = out.with_suffix(".jsonl")
    log.write_text("")
    with tempfile.TemporaryDirectory() as tmp:
        config = JudgeConfig(backend=backend, cache_dir=Path(tmp) / "cache", exclusive_timing=args.exclusive_timing,
                             **({"timing": SHORT_SESSIONS} if args.short_sessions else {}))
        with LocalJudgePool(config, concurrency) as pool:
            asyncio.run(pool.evaluate(task, solution, "profile"))  # builds and caches the baselines
            started = time.perf_counter()
            deadline = time.monotonic() + (args.max_minutes * 60 if args.max_minutes else float("inf"))
            with load_beside(args.busy, args.beside, out.with_suffix(".beside.log")), Progress(console=Console(stderr=True)) as progress:
                verdicts = asyncio.run(judge_all(pool, task, solution, args.n, concurrency, deadline, log, progress))
            seconds = time.perf_counter() - started
    counts = collections.Counter(outcome(v) for v in verdicts)
    rewards = collections.Counter(v.reward for v in verdicts)
    medians = [v.timings["candidate"].median_ms for v in verdicts if v.timings.get("candidate")]
    judged = len(verdicts)
    result = {"command": " ".join(sys.argv), "backend": backend, "example": args.example, "asked": args.n,
              "task": task_file.name, "judged": judged, "concurrency": concurrency,
              "exclusive_timing": args.exclusive_timing, "busy_processes": args.busy, "beside": args.beside,
              "solution": str(args.solution or example / backend), "short_sessions": args.short_sessions,
              "seconds": seconds, "outcomes": dict(counts),
              "rewards": {str(k): v for k, v in sorted(rewards.items())},
              "refusal_rate": counts.get("refused", 0) / max(1, judged),
              "candidate_median_ms": {"median": statistics.median(medians), "min": min(medians),
                                      "max": max(medians)} if medians else None,
              "goal_met": counts.get("refused", 0) == 0 and judged >= 100}
    table = Table(title=f"{judged} honest judges of {args.example} ({backend}, {concurrency} at once, "
                        f"{args.busy} busy processes{' and a command' if args.beside else ''} beside, "
                        f"{seconds:.0f} s)")
    for column in ("outcome", "judges"):
        table.add_column(column)
    for name, count in counts.most_common():
        table.add_row(name, str(count))
    Console().print(table)
    Console().print(f"rewards: {result['rewards']}; refusal rate {result['refusal_rate']:.1%} "
                    f"({'goal met' if result['goal_met'] else 'goal not shown'}: none in 100)")
    out.write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
