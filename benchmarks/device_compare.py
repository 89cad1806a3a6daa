"""The verify stage on outputs of hundreds of MB to GB, compared on the GPU (through the exchange
buffer) and on the host (outputs sent whole to the judge), on the cuda backend.

Each run is a fresh process, so its peak resident memory is its own: the judge process's peak,
and the largest of its workers' (the reference and the candidate). The task is y = relu(x * s + b)
with 256 features per row, judged with the hand-written CUDA kernel of the test fixtures.

    python benchmarks/device_compare.py [--rows 19,21] [--modes gpu,host] [--out device_compare.json]

``--rows`` gives log2 of the rows: 19 is 512 MB of output, 21 is 2 GB.
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
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from cuda_agent.judge.config import JudgeConfig
from cuda_agent.judge.judge import Judge
from cuda_agent.solution import load_solution
from cuda_agent.task import load_task, task_from_source
root, rows, on_device = Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "gpu"
base = load_task(root / "tests/fixtures/tasks/scale_bias_relu.py")
task = task_from_source(base.source.replace("batch_size = 256", f"batch_size = {rows}"), f"relu_{rows}", "bench")
judge = Judge(JudgeConfig(backend="cuda", compare_on_device=on_device, call_timeout_s=600.0))
started = time.perf_counter()
v = judge.verify(task, load_solution(root / "tests/fixtures/solutions/cuda/correct"))
print(json.dumps({"status": v.status, "compared_on": v.settings.get("outputs_compared_on"),
                  "seconds": time.perf_counter() - started, "verify_s": v.seconds.get("verify"),
                  "judge_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "worker_peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                  "notes": v.notes, "error": v.error}))
"""


def measure(rows: int, mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", MEASURE, str(ROOT / "src"), str(ROOT), str(rows), mode],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"status": "crashed", "error": done.stderr[-2000:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="19,21", help="log2 of the rows, comma-separated (19: 512 MB of output)")
    parser.add_argument("--modes", default="gpu,host")
    parser.add_argument("--out", type=Path, default=Path("device_compare.json"))
    args = parser.parse_args()
    console = Console()
    table = Table(title="verify: 5 checks, outputs compared on the GPU or on the host")
    for column in ("output", "compared", "status", "verify", "judge run", "judge peak RSS", "worker peak RSS"):
        table.add_column(column)
    rows = []
    for log2 in (int(x) for x in args.rows.split(",")):
        for mode in args.modes.split(","):
            row = {"rows": 1 << log2, "output_mb": (1 << log2) * 256 * 4 / 2**20, "mode": mode, **measure(1 << log2, mode)}
            rows.append(row)
            args.out.write_text(json.dumps(rows, indent=1))  # kept after every run
            table.add_row(f"{row['output_mb']:.0f} MB", str(row.get("compared_on") or mode), row["status"],
                          f"{row.get('verify_s') or 0:.1f} s", f"{row.get('seconds') or 0:.1f} s",
                          f"{row.get('judge_peak_mb') or 0:.0f} MB", f"{row.get('worker_peak_mb') or 0:.0f} MB")
            console.print(f"{row['output_mb']:.0f} MB {mode}: {row['status']} verify {row.get('verify_s')} s "
                          f"judge peak {row.get('judge_peak_mb')} MB {row.get('error') or ''}")
    console.print(table)


if __name__ == "__main__":
    main()
