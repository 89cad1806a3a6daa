"""Which SOL-ExecBench problems load as tasks here, and run: every problem folder under a path.

For each folder holding a ``definition.json`` (a SOL-ExecBench checkout's ``examples/``, its test
samples, or a downloaded ``data/benchmark/<subset>/``): does it load as a task
(``cuda_agent.sol_execbench``), what do its workloads declare (``cuda_agent.workloads``), and
does its reference run at its smallest workloads, inputs made as the task makes them, on the
device given. A problem refused is listed with the reason the loader gave. Prints a table and
writes JSON.

    python benchmarks/sol_execbench_problems.py PATH [--device cpu|cuda] [--workloads 2] [--out F.json]

This runs each problem's own reference code in this process: point it at problems you trust.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import types
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cuda_agent.device import resolve_backend  # noqa: E402
from cuda_agent.errors import TaskFormatError  # noqa: E402
from cuda_agent.sol_execbench import DEFINITION_FILE, load_problem  # noqa: E402
from cuda_agent.workloads import Workload, read_plan, variant  # noqa: E402


def problem_folders(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob(DEFINITION_FILE))


def size(workload: Workload) -> float:
    """How large a workload is, roughly: the product of its integer axes."""
    product = 1.0
    for value in workload.axes.values():
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            product *= value
    return product


def run_at(task, workload: Workload, device: str) -> dict:
    """The reference's forward at ``workload``, once, on ``device``: seconds, or the error."""
    import torch

    module = types.ModuleType("sol_execbench_problem")
    started = time.perf_counter()
    try:
        exec(compile(variant(task, workload).source, task.origin, "exec"), module.__dict__)
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs()).to(device)
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
        with torch.no_grad():
            out = model(*inputs)
        outputs = out if isinstance(out, (tuple, list)) else [out]
        shapes = [list(o.shape) if isinstance(o, torch.Tensor) else type(o).__name__ for o in outputs]
        return {"workload": workload.name, "ran": True, "seconds": time.perf_counter() - started,
                "output_shapes": shapes}
    except Exception as exc:  # noqa: BLE001 - a problem's own code failing is what is reported
        return {"workload": workload.name, "ran": False, "error": f"{type(exc).__name__}: {exc}"[:300]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", type=Path)
    parser.add_argument("--device", default=None)
    parser.add_argument("--workloads", type=int, default=2, help="smallest workloads run per problem")
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = parser.parse_args()
    device = resolve_backend(args.device)
    folders = problem_folders(args.path)
    if not folders:
        raise SystemExit(f"no {DEFINITION_FILE} under {args.path}")
    console = Console()
    rows = []
    for folder in folders:
        row: dict = {"problem": str(folder.relative_to(args.path))}
        try:
            task = load_problem(folder)
            plan = read_plan(task)
        except TaskFormatError as exc:
            rows.append({**row, "loaded": False, "refused": str(exc)})
            console.print(f"[yellow]{row['problem']}: refused[/]")
            continue
        smallest = sorted(plan.workloads, key=size)[:args.workloads]
        runs = [run_at(task, w, device) for w in smallest]
        rows.append({**row, "loaded": True, "workloads": len(plan.workloads), "varying_axes": list(plan.varying),
                     "dtypes": sorted({spec.get("dtype") for spec in (task.metadata.get("inputs") or {}).values()
                                       if isinstance(spec, dict) and spec.get("dtype")}),
                     "runs": runs, "ran": all(r["ran"] for r in runs)})
        console.print(f"[dim]{row['problem']}: {len(plan.workloads)} workloads, "
                      f"{'ran' if rows[-1]['ran'] else 'failed'}[/]")
    table = Table(title=f"SOL-ExecBench problems under {args.path} ({device})")
    for column in ("problem", "loads", "workloads", "varying axes", "reference runs", "why not"):
        table.add_column(column)
    for r in rows:
        why = r.get("refused") or next((x["error"] for x in r.get("runs", []) if not x["ran"]), "")
        table.add_row(r["problem"], "yes" if r["loaded"] else "no", str(r.get("workloads", "-")),
                      ", ".join(r.get("varying_axes", [])) or "-",
                      "-" if not r["loaded"] else ("yes" if r["ran"] else "no"), why[:120])
    console.print(table)
    summary = {"problems": len(rows), "loaded": sum(r["loaded"] for r in rows),
               "ran": sum(bool(r.get("ran")) for r in rows)}
    console.print(f"{summary['loaded']} of {summary['problems']} load; the references of {summary['ran']} run")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"device": device, "path": str(args.path), **summary, "rows": rows},
                                       indent=1, default=str) + "\n")
        console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
