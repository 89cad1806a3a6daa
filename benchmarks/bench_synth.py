"""Data-synthesis throughput and yield: accepted tasks per hour, acceptance per filter, op mix.

Runs (or resumes) `cuda-agent synth` into ``--out`` when ``-n`` is given, then measures the run
folder from its own records: ``sessions.jsonl`` (wall time of each invocation), the outcome log
(every candidate and the filters it reached) and ``seeds.json``. Throughput is accepted tasks per
hour of wall time over all sessions. On a GPU it also compares the composer's roofline estimate
with the measured eager time of each accepted task, which says how well sizing aims.

Prints a table and writes JSON. Absolute figures mean something only on the GPU machine.

    python benchmarks/bench_synth.py --out RUN_DIR [-n 600 --device cuda --kernelbench KB \
        --workers 12 --max-minutes 9] [--json synth.json]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cuda_agent.synth.card import summarize  # noqa: E402
from cuda_agent.synth.synthesis import SESSIONS, SynthOptions, read_log, run_synthesis, LOG_NAME  # noqa: E402
from cuda_agent.synth.seeds import load_catalogue  # noqa: E402


def _quantiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    values = sorted(values)
    pick = lambda q: values[min(len(values) - 1, int(q * (len(values) - 1) + 0.5))]  # noqa: E731
    return {"n": len(values), "p10": pick(0.1), "median": statistics.median(values), "p90": pick(0.9)}


def measure(out: Path) -> dict:
    state = read_log(out / LOG_NAME)
    sessions = [json.loads(line) for line in (out / SESSIONS).read_text().splitlines() if line.strip()] \
        if (out / SESSIONS).exists() else []
    seconds = sum(s["seconds"] for s in sessions)
    accepted = state.accepted
    catalogue = load_catalogue(out / "seeds.json")
    stats = summarize(state.outcomes, {k: v for k, v in catalogue.counts().items()
                                       if k in ("module", "functional", "tensor", "transformers")}, {})
    ratios = [o.eager_ms / o.candidate.estimate_ms for o in accepted
              if o.eager_ms and o.candidate.estimate_ms and o.device == "cuda"]
    return {
        "run": str(out),
        "device": sessions[-1]["device"] if sessions else None,
        "workers": sessions[-1]["workers"] if sessions else None,
        "sessions": len(sessions),
        "wall_seconds": round(seconds, 1),
        "seeds": catalogue.counts(),
        "candidates": len(state.outcomes),
        "accepted": len(accepted),
        # Counted per recorded session: a session that was killed has no record, and its tasks
        # must not be credited to the others' time.
        "accepted_per_hour": round(sum(s["accepted"] for s in sessions) / seconds * 3600, 1) if seconds else None,
        "candidates_per_hour": round(sum(s["candidates"] for s in sessions) / seconds * 3600, 1) if seconds else None,
        "mean_seconds_per_candidate": round(statistics.mean(o.seconds for o in state.outcomes), 2)
        if state.outcomes else None,
        "filters": stats["filters"],
        "rejected_by": stats["rejected_by"],
        "op_mix": stats["op_mix"],
        "eager_ms": _quantiles([o.eager_ms for o in accepted if o.eager_ms]),
        "measured_over_estimate": _quantiles(ratios),
        "within_2x_of_estimate": round(sum(0.5 <= r <= 2 for r in ratios) / len(ratios), 3) if ratios else None,
        "geomean_measured_over_estimate": round(math.exp(statistics.mean(math.log(r) for r in ratios)), 3)
        if ratios else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the run folder (made or resumed with -n)")
    parser.add_argument("-n", type=int, help="run synthesis first, until this many tasks are accepted")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--kernelbench")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--max-minutes", type=float)
    parser.add_argument("--window-ms", default="1,100")
    parser.add_argument("--json", type=Path, help="where to write the measurements")
    args = parser.parse_args()
    console = Console(stderr=True)
    if args.n:
        low, high = (float(v) for v in args.window_ms.split(","))
        options = SynthOptions(n=args.n, out=args.out, device=args.device, workers=args.workers,
                               window_ms=(low, high), max_minutes=args.max_minutes,
                               kernelbench=str(Path(args.kernelbench).resolve()) if args.kernelbench else None)
        run_synthesis(options, console=console)
    result = measure(args.out)

    table = Table(title=f"synthesis on {result['device']} ({result['workers']} workers, {result['sessions']} sessions)")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key in ("candidates", "accepted", "wall_seconds", "accepted_per_hour", "candidates_per_hour",
                "mean_seconds_per_candidate", "within_2x_of_estimate", "geomean_measured_over_estimate"):
        table.add_row(key, str(result[key]))
    table.add_row("seeds", ", ".join(f"{k} {v}" for k, v in result["seeds"].items()))
    Console().print(table)
    filters = Table(title="acceptance per filter")
    for column in ("filter", "reached", "passed", "pass rate"):
        filters.add_column(column)
    for row in result["filters"]:
        filters.add_row(row["name"], str(row["reached"]), str(row["passed"]),
                        "-" if row["pass_rate"] is None else f"{row['pass_rate']:.1%}")
    Console().print(filters)
    mix = Table(title="op-count mix of accepted tasks")
    for column in ("composition", "tasks", "share", "paper"):
        mix.add_column(column)
    for row in result["op_mix"]:
        mix.add_row(row["category"], str(row["tasks"]), f"{row['share']:.2%}" if row["share"] is not None else "-",
                    f"{row['paper_share']:.2%}" if row.get("paper_share") is not None else "-")
    Console().print(mix)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
