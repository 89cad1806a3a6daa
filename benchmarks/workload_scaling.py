"""How the judge's time per task grows with the number of workloads it declares.

The task is an example's (its rows, ``batch_size``, are an axis) with 1, 2, 4... declared
workloads of different row counts, and ``VARYING_AXES`` naming the rows, so every judgement also
checks two held-out workloads. Each count is judged once untimed (builds and baselines cached,
as in training, where a task's workloads are judged again and again), then ``--repeats`` times;
the table gives the median seconds per judgement, seconds per declared workload, each count's
time against one workload's, and how far the paid geometric mean of the speedups over eager
strays from its mean across the repeats. The goals: at most linear growth (the time per declared
workload no larger at 4 than at 1), and on a GPU, at most 2% across five judges (``--repeats 5``).

    python benchmarks/workload_scaling.py [--device cuda|cpu] [--workloads 1,2,4] [--repeats 3] [--out F.json]

Absolute times mean something only on the GPU machine; on a CPU machine compare the ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cuda_agent.device import resolve_backend  # noqa: E402
from cuda_agent.judge.config import JudgeConfig, TimingConfig  # noqa: E402
from cuda_agent.judge.judge import Judge  # noqa: E402
from cuda_agent.solution import load_solution  # noqa: E402
from cuda_agent.task import load_task, task_from_source  # noqa: E402
from cuda_agent.workloads import declare_sizes  # noqa: E402

# The example per backend: its task file, its solution, and the declared row counts to draw from.
EXAMPLES = {"cuda": ("examples/fused_elementwise/model.py", "examples/fused_elementwise/cuda",
                     (4096, 2048, 8192, 1024, 6144, 3072, 5120, 7168)),
            "cpu": ("tests/fixtures/tasks/scale_bias_relu.py", "tests/fixtures/solutions/cpu/correct",
                    (256, 128, 512, 64, 384, 192, 320, 448))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None)
    parser.add_argument("--workloads", default="1,2,4", help="declared workload counts, e.g. 1,2,4")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timing-seconds", type=float, default=None,
                        help="each timing session's target (default: the judge's)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="the judge's cache (default: a fresh one)")
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = parser.parse_args()
    backend = resolve_backend(args.device)
    counts = sorted({int(n) for n in args.workloads.split(",") if n.strip()})
    task_file, solution_dir, rows = EXAMPLES[backend]
    if not counts or counts[0] < 1 or counts[-1] > len(rows):
        parser.error(f"--workloads takes counts from 1 to {len(rows)}")
    base = load_task(ROOT / task_file)
    solution = load_solution(ROOT / solution_dir)
    timing = TimingConfig(target_seconds=args.timing_seconds) if args.timing_seconds else TimingConfig()
    cache = args.cache_dir or Path(tempfile.mkdtemp(prefix="workload-scaling-"))
    judge = Judge(JudgeConfig(backend=backend, cache_dir=cache, timing=timing))
    console = Console()
    rows_out = []
    for n in counts:
        task = task_from_source(base.source + declare_sizes(list(rows[:n])), f"{base.name}_x{n}", base.origin)
        console.print(f"[dim]{n} workload(s): judging once to fill the caches[/]")
        first = judge.evaluate(task, solution, "profile")
        if first.status != "ok":
            raise SystemExit(f"{n} workload(s): the solution was not judged correct: {first.error}")
        seconds, verdicts = [], []
        for k in range(args.repeats):
            started = time.perf_counter()
            verdict = judge.evaluate(task, solution, "profile")
            seconds.append(time.perf_counter() - started)
            verdicts.append(verdict)
            console.print(f"[dim]{n} workload(s), run {k + 1}: {seconds[-1]:.1f} s, {verdict.status}[/]")
        median = statistics.median(seconds)
        paid = [v.speedup_vs_eager for v in verdicts if v.speedup_vs_eager]
        mean = statistics.fmean(paid) if paid else None
        held = [w["seconds"] for v in verdicts for w in v.workloads if w["held_out"]]
        declared = [w["seconds"] for v in verdicts for w in v.workloads if not w["held_out"]]
        rows_out.append({"workloads": n, "seconds": seconds, "median_s": median, "per_workload_s": median / n,
                         "held_out_median_s": statistics.median(held) if held else None,
                         "declared_median_s": statistics.median(declared) if declared else None,
                         "statuses": [v.status for v in verdicts],
                         "speedup_vs_eager": [v.speedup_vs_eager for v in verdicts],
                         "speedup_max_deviation": max(abs(p / mean - 1) for p in paid) if mean else None,
                         "first_run_s": first.seconds.get("total")})
    one = rows_out[0]["median_s"] / rows_out[0]["workloads"]
    table = Table(title=f"judge time per task by declared workloads ({backend}, 2 held-out checked each time)")
    for column in ("declared", "median s", "s per declared", "vs 1 workload",
                   "held-out run s", "declared run s", "first run s", "geomean vs eager, ± across runs"):
        table.add_column(column, justify="right")
    for r in rows_out:
        r["per_workload_ratio"] = r["per_workload_s"] / one
        table.add_row(str(r["workloads"]), f"{r['median_s']:.1f}", f"{r['per_workload_s']:.2f}",
                      f"{r['per_workload_ratio']:.2f}", f"{r['held_out_median_s'] or 0:.2f}",
                      f"{r['declared_median_s'] or 0:.2f}", f"{r['first_run_s'] or 0:.1f}",
                      "-" if r["speedup_max_deviation"] is None else
                      f"{statistics.fmean(p for p in r['speedup_vs_eager'] if p):.3f}x "
                      f"±{r['speedup_max_deviation']:.1%}")
    console.print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"backend": backend, "device": first.device, "repeats": args.repeats,
                                        "rows": rows_out}, indent=1, default=str) + "\n")
        console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
