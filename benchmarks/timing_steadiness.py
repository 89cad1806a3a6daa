"""How steady the reference timings of `cuda-agent bench --baselines-only` runs were, run beside
run: for each problem and mode, the sessions' fastest and slowest median call, whether the judge
found them steady (``stable``), and the host's time per call against the device's.

A timing is several sessions; the judge marks it unsteady when their medians disagree beyond its
allowed uncertainty. Comparing runs made with different judge settings (checks at once,
``--exclusive-timing``) on the same problems shows whether a setting steadies them.

    python benchmarks/timing_steadiness.py LABEL=RUN/results.jsonl [LABEL=...] [--out steadiness.json]

Reads recorded results only: it runs nothing, so it needs no GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cuda_agent.bench.runner import ResultsLog  # noqa: E402

MODES = ("eager", "compile")


def references(results: Path) -> dict[str, dict]:
    """The reference reports of one run's results.jsonl by problem key, the last record winning
    (a resumed run appends)."""
    return {record["key"].split("#")[0]: record["report"] for record in ResultsLog(results).read()
            if record.get("kind") == "reference" and record.get("report")}


def summary(timing: dict) -> dict:
    sessions = timing.get("sessions_ms") or [timing["median_ms"]]
    return {"stable": timing.get("stable", True), "sessions": len(sessions), "fastest_ms": min(sessions),
            "slowest_ms": max(sessions), "median_ms": timing["median_ms"], "mean_ms": timing["mean_ms"],
            "host_per_device": (timing["host_median_ms"] / timing["median_ms"]
                                if timing.get("host_median_ms") and timing["median_ms"] else None)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="LABEL=path to a run's results.jsonl")
    parser.add_argument("--out", type=Path, help="write the table as JSON here")
    args = parser.parse_args()
    runs = {}
    for spec in args.runs:
        label, sep, path = spec.partition("=")
        if not sep or not Path(path).is_file():
            raise SystemExit(f"{spec!r}: give LABEL=PATH to an existing results.jsonl")
        runs[label] = references(Path(path))
    keys = sorted(set.intersection(*(set(r) for r in runs.values())))
    if not keys:
        raise SystemExit("the runs share no timed reference: give runs of the same problems")
    rows = [{"problem": key, "mode": mode, **{label: summary(run[key][mode]) for label, run in runs.items()}}
            for key in keys for mode in MODES if all(run[key].get(mode) for run in runs.values())]

    table = Table(title="Reference timings: slowest/fastest session, steady or not (U), host time per device time")
    table.add_column("problem")
    table.add_column("mode")
    for label in runs:
        table.add_column(label)
    for row in rows:
        table.add_row(row["problem"].removesuffix(".py"), row["mode"], *(
            f"{s['fastest_ms']:.3g}-{s['slowest_ms']:.3g} ms {'' if s['stable'] else 'U'}"
            + (f" h/d {s['host_per_device']:.2f}" if s["host_per_device"] else "")
            for s in (row[label] for label in runs)))
    unsteady = {label: sum(not row[label]["stable"] for row in rows) for label in runs}
    table.add_row("unsteady", "", *(f"{unsteady[label]} of {len(rows)}" for label in runs), end_section=True)
    Console().print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"runs": list(runs), "unsteady": unsteady, "timings": len(rows), "rows": rows},
                                       indent=1))
        print(f"json: {args.out}")


if __name__ == "__main__":
    main()
