"""Does the judge measure what a plain timing loop measures?

For each example, the same model pair is timed twice:
  * bare: in one process, a tight loop with fresh inputs and a cache flush before each call,
    CUDA events around the call and a host clock up to a device-wide synchronisation;
  * judge: the full judge (separate processes, one step at a time, outputs kept for checking).
The judge's numbers should sit close to the bare loop's; the difference is the judge's own
overhead on each call. Prints a table and writes JSON.

    python benchmarks/timing_fidelity.py [--device cuda|cpu] [--examples a,b] [--calls 100]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def bare(example: str, backend: str, calls: int, cache: str) -> dict:
    """Time eager Model and the solution's ModelNew in this process (run in a child process)."""
    import importlib.util

    import torch

    from cuda_agent.judge.build import ExtensionBuilder
    from cuda_agent.judge.toolchain import detect_toolchain
    from cuda_agent.judge.worker_main import seed_everything
    from cuda_agent.solution import load_solution

    from cuda_agent.judge.config import TimingConfig

    if backend == "cpu":
        torch.set_num_threads(TimingConfig().cpu_threads)  # as the judge runs every model
    root = ROOT / "examples" / example
    solution = load_solution(root / backend)
    capability = torch.cuda.get_device_capability() if backend == "cuda" else None
    result = ExtensionBuilder(detect_toolchain(backend, capability), Path(cache)).build(solution)
    assert result.ok, result.errors
    for name, path in (("cuda_extension", result.module_path), ("task", root / "model.py"),
                       ("model_new", root / backend / "model_new.py")):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    task, candidate = sys.modules["task"], sys.modules["model_new"]
    seed_everything(0)
    model = task.Model(*task.get_init_inputs()).to(backend).eval()
    new = candidate.ModelNew(*task.get_init_inputs())
    new.load_state_dict(model.state_dict())
    new = new.to(backend).eval()
    cuda = backend == "cuda"
    flush = torch.empty(2 * 64 * 1024**2 // 4, dtype=torch.int32, device=backend)
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def measure(m) -> dict:
        host, device = [], []
        start, end = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) if cuda else (None, None)
        with torch.no_grad():
            for i in range(calls + 5):
                seed_everything(i)
                with torch.device(backend):
                    inputs = [x.to(backend) for x in task.get_inputs()]
                flush.amax()  # as the judge flushes: a read of twice the cache
                sync()
                t0 = time.perf_counter_ns()
                if cuda:
                    start.record()
                m(*inputs)
                if cuda:
                    end.record()
                sync()
                t1 = time.perf_counter_ns()
                if i >= 5:
                    host.append((t1 - t0) / 1e6)
                    if cuda:
                        device.append(start.elapsed_time(end))
        return {"host_ms": statistics.median(host), "device_ms": statistics.median(device) if device else None}

    return {"eager": measure(model), "candidate": measure(new)}


def judged(example: str, backend: str, cache: Path) -> dict:
    from cuda_agent.judge import Judge, JudgeConfig
    from cuda_agent.solution import load_solution
    from cuda_agent.task import load_task

    root = ROOT / "examples" / example
    v = Judge(JudgeConfig(backend=backend, cache_dir=cache, use_baseline_cache=False, keep_samples=True)).judge(
        load_task(root / "model.py"), load_solution(root / backend))
    assert v.correct, v.feedback
    out = {}
    for which in ("eager", "compile", "candidate"):
        t = v.timings[which]
        out[which] = {"host_ms": t.median_ms, "device_ms": t.device_median_ms, "spread": t.spread,
                      "prepare_ms": t.prepare_median_ms, "channel_ms": t.channel_median_ms,
                      "samples_ms": t.samples_ms}
    out["timing_integrity"] = v.timing_integrity
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None)
    parser.add_argument("--examples", default="fused_elementwise,rmsnorm,gemm_epilogue")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--bare-child", nargs=2, metavar=("EXAMPLE", "CACHE"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    from cuda_agent.device import resolve_backend

    backend = resolve_backend(args.device)
    if args.bare_child:
        print(json.dumps(bare(args.bare_child[0], backend, args.calls, args.bare_child[1])))
        return

    from rich.console import Console
    from rich.table import Table

    cache = Path(tempfile.mkdtemp(prefix="timing-fidelity-"))
    rows, results = [], {}
    for example in args.examples.split(","):
        # One extension module per process, as in the judge's own workers.
        child = subprocess.run([sys.executable, __file__, "--device", backend, "--calls", str(args.calls),
                                "--bare-child", example, str(cache)], capture_output=True, text=True, check=True)
        b = json.loads(child.stdout.strip().splitlines()[-1])
        j = judged(example, backend, cache)
        results[example] = {"bare": b, "judge": j}
        for which in ("candidate", "eager"):
            rows.append((example, which, b[which]["host_ms"], j[which]["host_ms"], b[which]["device_ms"],
                         j[which]["device_ms"], j[which]["spread"]))

    table = Table(title=f"timing fidelity on {backend}: bare loop vs judge (medians, ms)")
    for col in ("example", "model", "bare host", "judge host", "bare device", "judge device", "judge IQR/median"):
        table.add_column(col, justify="left" if col in ("example", "model") else "right")
    fmt = lambda x: "-" if x is None else f"{x:.4f}"  # noqa: E731
    for ex, which, bh, jh, bd, jd, spread in rows:
        table.add_row(ex, which, fmt(bh), fmt(jh), fmt(bd), fmt(jd), f"{spread * 100:.1f}%")
    Console().print(table)
    out = args.out or ROOT / "benchmarks" / "results" / f"timing_fidelity-{backend}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
