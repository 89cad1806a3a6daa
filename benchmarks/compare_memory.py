"""Time and host memory of one output comparison (``correctness.compare_outputs``), in chunks
and in a single pass, for float32 outputs of several sizes.

Each measurement runs in a fresh process, so its peak resident memory is its own: the figure is
the peak above what the process held once both outputs existed. Prints a table and writes JSON.

    python benchmarks/compare_memory.py [--sizes 16,64] [--out benchmarks/results/compare_memory.json]

Sizes are in millions of elements (2^20); a single pass is the comparison with the chunk as
large as the output.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]

MEASURE = """
import json, resource, sys, time
import torch
sys.path.insert(0, sys.argv[1])
import cuda_agent.judge.correctness as correctness
n, chunk = int(sys.argv[2]), int(sys.argv[3])
correctness.CHUNK_ELEMENTS = chunk or correctness.CHUNK_ELEMENTS
generator = torch.Generator().manual_seed(0)
ref = torch.randn(n, generator=generator)
cand = ref + 1e-7 * torch.randn(n, generator=generator)
held = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
check = correctness.compare_outputs(cand, ref, 0, 1e-2, 1e-2)
seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - held
print(json.dumps({"seconds": seconds, "peak_mb": peak / 1024, "passed": check.passed,
                  "chunk": correctness.CHUNK_ELEMENTS}))
"""


def measure(elements: int, chunk: int) -> dict:
    done = subprocess.run([sys.executable, "-c", MEASURE, str(ROOT / "src"), str(elements), str(chunk)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the measurement of {elements} elements failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="16,64", help="output sizes in millions of elements, comma-separated")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "compare_memory.json")
    args = parser.parse_args()
    table = Table(title="One comparison of two float32 outputs (host)")
    for column in ("elements", "output", "mode", "seconds", "peak above the outputs"):
        table.add_column(column)
    rows = []
    for millions in (int(x) for x in args.sizes.split(",")):
        elements = millions << 20
        for mode, chunk in (("chunks", 0), ("single pass", elements)):
            row = {"elements": elements, "mode": mode, **measure(elements, chunk)}
            rows.append(row)
            table.add_row(f"{millions}M", f"{elements * 4 >> 20} MB", f"{mode} ({row['chunk']:,})",
                          f"{row['seconds']:.2f}", f"{row['peak_mb']:.0f} MB")
    Console().print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows}, indent=2))
    Console().print(f"written to {args.out}")


if __name__ == "__main__":
    main()
