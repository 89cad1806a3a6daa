"""How repeatable is each way of timing a forward, from one fresh process to the next?

The same models are timed in several fresh processes, each process timing every model with every
method; what matters is how far each model's median (and each speedup) moves between processes.
Methods, per timed call (fresh inputs every call):

  host        cache flush, sync; host clock from the call until a device-wide sync returns
  event_idle  cache flush, sync; CUDA events around the call (the device idle at the start event)
  event_busy  cache flush, then a fixed device-side wait, then CUDA events around the call: the
              host's launch path overlaps the wait, so the events see the device's work
  kernelbench KernelBench's cuda_event: sync, a 256 MB fill, events around the call, sync
  batch       10 calls back to back on inputs made beforehand, events around all ten, / 10
  busy_ops    event_busy with a TorchDispatchMode recording every ATen op (the judge's op record)
  busy_cupti  event_busy inside a running torch.profiler session (the judge's kernel record)

Models: the examples' CUDA solutions with their eager and torch.compile references, KernelBench's
few-shot pair `model_ex_fuse_gelu` / `model_new_ex_fuse_gelu` (with --kernelbench), and a null
solution that launches one empty kernel.

    python benchmarks/timing_methods.py --device cuda --processes 5 [--kernelbench PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

EXAMPLES = ("fused_elementwise", "gemm_epilogue")
METHODS = ("host", "event_idle", "event_busy", "kernelbench", "batch", "busy_ops", "busy_cupti")
NULL_SOURCE = r"""
#include <torch/extension.h>
__global__ void null_kernel() {}
torch::Tensor null_forward(torch::Tensor x) {
    null_kernel<<<1, 32>>>();
    return x;
}
"""


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


GROUPS = (*EXAMPLES, "kb_fuse_gelu", "null")


def _models(group: str, kernelbench: str | None, cache: Path) -> dict:
    """name -> (forward callable, input maker) for one group, built in this process (one
    extension module per process, as in the judge's own workers)."""
    import torch
    from torch.utils.cpp_extension import load_inline

    from cuda_agent.judge.build import ExtensionBuilder
    from cuda_agent.judge.toolchain import detect_toolchain
    from cuda_agent.judge.worker_main import seed_everything
    from cuda_agent.solution import load_solution

    def inputs_of(task):
        def make(seed: int):
            seed_everything(seed)
            with torch.device("cuda"):
                return [x.cuda() if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
        return make

    def reference(task, compiled: bool):
        seed_everything(0)
        model = task.Model(*task.get_init_inputs()).cuda().eval()
        return torch.compile(model) if compiled else model

    models = {}
    toolchain = detect_toolchain("cuda", torch.cuda.get_device_capability())
    for i, example in enumerate(e for e in EXAMPLES if e == group):
        root = ROOT / "examples" / example
        task = _load(f"task_{i}", root / "model.py")
        result = ExtensionBuilder(toolchain, cache).build(load_solution(root / "cuda"))
        assert result.ok, result.errors
        _load("cuda_extension", result.module_path)
        new = _load(f"model_new_{i}", root / "cuda" / "model_new.py").ModelNew(*task.get_init_inputs())
        eager = reference(task, False)
        new.load_state_dict(eager.state_dict())
        make = inputs_of(task)
        models[f"{example}/candidate"] = (new.cuda().eval(), make)
        models[f"{example}/eager"] = (eager, make)
        models[f"{example}/compile"] = (reference(task, True), make)
    if group == "kb_fuse_gelu":
        shots = Path(kernelbench) / "src" / "kernelbench" / "prompts" / "few_shot"
        task = _load("kb_task", shots / "model_ex_fuse_gelu.py")
        new = _load("kb_new", shots / "model_new_ex_fuse_gelu.py").ModelNew()
        make = inputs_of(task)
        models["kb_fuse_gelu/candidate"] = (new.cuda().eval(), make)
        models["kb_fuse_gelu/eager"] = (reference(task, False), make)
        models["kb_fuse_gelu/compile"] = (reference(task, True), make)
    if group != "null":
        return models
    null = load_inline("timing_methods_null", cpp_sources="torch::Tensor null_forward(torch::Tensor x);",
                       cuda_sources=NULL_SOURCE, functions=["null_forward"], verbose=False)
    models["null/candidate"] = (null.null_forward, inputs_of(_load("null_task", ROOT / "examples" /
                                                                   "fused_elementwise" / "model.py")))
    return models


def child(group: str, kernelbench: str | None, calls: int, cache: str) -> dict:
    import torch

    from cuda_agent.device import probe_device

    models = _models(group, kernelbench, Path(cache))
    flush = torch.ones(2 * probe_device("cuda").cache_bytes // 4, dtype=torch.int32, device="cuda")
    kb_flush = torch.empty((32, 1024, 1024), dtype=torch.int64, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    # Cycles for the device-side wait of event_busy: about 100 us, whatever the clock.
    torch.cuda.synchronize()
    start.record(); torch.cuda._sleep(1_000_000); end.record(); torch.cuda.synchronize()
    cycles = int(1_000_000 * 0.1 / start.elapsed_time(end))

    def one(method: str, model, make, seed: int) -> float:
        if method == "batch":
            batch = [make(seed * 10 + k) for k in range(10)]
            torch.cuda.synchronize()
            start.record()
            for x in batch:
                model(*x)
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / 10
        x = make(seed)
        if method == "kernelbench":
            torch.cuda.synchronize()
            kb_flush.fill_(42)
        else:
            flush.amax()
            if method != "event_busy":
                torch.cuda.synchronize()
            else:
                torch.cuda._sleep(cycles)
        t0 = time.perf_counter_ns()
        start.record()
        model(*x)
        end.record()
        torch.cuda.synchronize()
        t1 = time.perf_counter_ns()
        return (t1 - t0) / 1e6 if method == "host" else start.elapsed_time(end)

    from contextlib import nullcontext

    from torch.profiler import ProfilerActivity, profile

    from cuda_agent.judge.recording import _op_recorder

    def recording(method: str):
        if method == "busy_ops":
            return _op_recorder()
        if method == "busy_cupti":
            return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        return nullcontext()

    results: dict = {}
    with torch.no_grad():
        for name, (model, make) in models.items():
            for method in METHODS:
                timing = "event_busy" if method.startswith("busy_") else method
                with recording(method):
                    for i in range(5):
                        one(timing, model, make, i)  # warm-up (torch.compile compiles here)
                    samples = [one(timing, model, make, 100 + i) for i in range(calls)]
                results.setdefault(name, {})[method] = statistics.median(samples)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", choices=["cuda"])
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--kernelbench", default=None, help="a KernelBench checkout, for its few-shot pair")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--child", nargs=2, metavar=("GROUP", "CACHE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.kernelbench, args.calls, args.child[1])))
        return

    from rich.console import Console
    from rich.table import Table

    cache = Path(tempfile.mkdtemp(prefix="timing-methods-"))
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(cache / "torch_extensions"),
           "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor")}
    runs = []
    groups = [g for g in GROUPS if g != "kb_fuse_gelu" or args.kernelbench]
    for p in range(args.processes):
        t0, run = time.perf_counter(), {}
        for group in groups:
            command = [sys.executable, __file__, "--calls", str(args.calls), "--child", group, str(cache)]
            if args.kernelbench:
                command += ["--kernelbench", args.kernelbench]
            proc = subprocess.run(command, capture_output=True, text=True, env=env)
            if proc.returncode:
                sys.exit(f"process {p} ({group}) failed:\n{proc.stderr[-3000:]}")
            run.update(json.loads(proc.stdout.strip().splitlines()[-1]))
        runs.append(run)
        print(f"round {p + 1}/{args.processes}: {time.perf_counter() - t0:.1f} s", flush=True)

    def deviation(values: list[float]) -> float:
        mean = statistics.fmean(values)
        return max(abs(v - mean) for v in values) / mean

    summary: dict = {}
    table = Table(title=f"timing methods: medians over {args.calls} calls, {args.processes} fresh processes")
    for col in ("model", *METHODS):
        table.add_column(col, justify="left" if col == "model" else "right")
    for name in runs[0]:
        cells = []
        for method in METHODS:
            values = [r[name][method] for r in runs]
            summary.setdefault(name, {})[method] = {"ms": values, "max_dev": deviation(values)}
            cells.append(f"{statistics.fmean(values) * 1e3:.1f} us ±{deviation(values) * 100:.1f}%")
        table.add_row(name, *cells)
    for group in sorted({n.split("/")[0] for n in runs[0]}):
        for base in ("eager", "compile"):
            if f"{group}/{base}" not in runs[0] or f"{group}/candidate" not in runs[0]:
                continue
            cells = []
            for method in METHODS:
                ratios = [r[f"{group}/{base}"][method] / r[f"{group}/candidate"][method] for r in runs]
                summary.setdefault(f"{group}/speedup_vs_{base}", {})[method] = {"x": ratios, "max_dev": deviation(ratios)}
                cells.append(f"{statistics.fmean(ratios):.3f}x ±{deviation(ratios) * 100:.1f}%")
            table.add_row(f"{group}: vs {base}", *cells)
    Console(width=200).print(table)
    out = args.out or ROOT / "benchmarks" / "results" / "timing_methods-cuda.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"processes": args.processes, "calls": args.calls, "runs": runs, "summary": summary},
                              indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
