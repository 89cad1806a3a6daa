"""KernelBench's single-file format against the workspace format: what a judge of each costs.

The same kernel, as a workspace (``kernels/`` built by the judge) and as one ``model_new.py`` that
calls ``load_inline`` (which the judge also builds, when the candidate's process asks). For each
layout, after a warm-up that builds the toolchain's precompiled headers:

  * fresh: sources no judge has built before (a comment added), so every object compiles;
  * again: the same sources judged a second time, so the build is a cache hit.

Each row is the verify stage (build, process start, five checks) with baselines not involved.
Prints a table and writes JSON. Absolute times mean something only on the GPU machine.

On CUDA, ``--phases`` then says where a fresh single-file build's time goes: each ``cuda.cu`` of
the fixture and of a KernelBench-style generation (``examples/kernelbench``) compiled once more
with the judge's own command and ``nvcc --time``, as written and with its own
``#include <torch/extension.h>`` left out (``load_inline`` still adds ``torch/types.h``).

    python benchmarks/single_file_latency.py [--device cuda|cpu] [--rounds 3] [--phases] [--out FILE]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cuda_agent.device import resolve_backend  # noqa: E402
from cuda_agent.judge.config import JudgeConfig  # noqa: E402
from cuda_agent.judge.inline_extension import InlineCall  # noqa: E402
from cuda_agent.judge.judge import Judge  # noqa: E402
from cuda_agent.solution import Solution, load_solution  # noqa: E402
from cuda_agent.task import load_task  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
SOLUTIONS = {  # layout -> backend -> fixture
    "workspace": {"cuda": FIXTURES / "solutions" / "cuda" / "correct", "cpu": FIXTURES / "solutions" / "cpu" / "correct"},
    "single_file": {"cuda": FIXTURES / "solutions" / "single_file" / "load_inline_cuda.py",
                    "cpu": FIXTURES / "solutions" / "single_file" / "load_inline_correct.py"},
}


def marked(solution: Solution, marker: str) -> Solution:
    """The same solution with a comment added to every source: new content, so new objects."""
    files = {path: text + (f"\n# {marker}\n" if path.endswith(".py") else f"\n// {marker}\n")
             for path, text in solution.files.items()}
    if solution.layout == "single_file":  # the comment must land inside every source the call passes
        text = solution.files["model_new.py"]
        files["model_new.py"] = text.replace('r"""\n', f'r"""\n// {marker}\n').replace(
            'cpp_source = "', f'cpp_source = "// {marker}\\n')
    return Solution(files, solution.layout, solution.origin)


GENERATION = ROOT / "examples" / "kernelbench" / "level_1_problem_88_sample_1_kernel.py"
EXTENSION_INCLUDE = "#include <torch/extension.h>"


class _Called(Exception):
    def __init__(self, call: InlineCall):
        self.call = call


def inline_call(path: Path) -> InlineCall:
    """The first ``load_inline`` call that importing the single-file solution at ``path`` makes."""
    import torch.utils.cpp_extension as cpp_extension

    def record(*args, **kwargs):
        raise _Called(InlineCall.from_arguments(*args, **kwargs))

    original, cpp_extension.load_inline = cpp_extension.load_inline, record
    try:
        exec(compile(path.read_text(), str(path), "exec"), {"__name__": "model_new"})
    except _Called as called:
        return called.call
    finally:
        cpp_extension.load_inline = original
    raise SystemExit(f"{path} made no load_inline call")


def nvcc_phases(judge: Judge, call: InlineCall) -> dict[str, dict[str, float]]:
    """Seconds of each nvcc phase of ``call``'s cuda.cu, as written and without its own
    ``#include <torch/extension.h>``; what ``nvcc --time`` reports, summed by phase."""
    command = judge.builder.inline_commands(call)["cuda.cu"]
    source = call.files()["cuda.cu"]
    variants = {"as written": source}
    if EXTENSION_INCLUDE in source:
        variants["without its torch/extension.h"] = source.replace(EXTENSION_INCLUDE, "")
    phases: dict[str, dict[str, float]] = {}
    for name, text in variants.items():
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "cuda.cu").write_text(text)
            report = Path(tmp) / "phases.csv"
            started = time.perf_counter()
            subprocess.run([*command, "--time", str(report)], cwd=tmp, check=True, capture_output=True)
            seconds = {"wall": time.perf_counter() - started}
            with report.open() as fh:
                for raw in csv.DictReader(fh):
                    row = {(k or "").strip(): (v or "").strip() for k, v in raw.items()}  # nvcc pads with spaces
                    phase, metric = row.get("phase name", ""), row.get("metric", "")
                    if phase and metric:
                        seconds[phase] = seconds.get(phase, 0.0) + float(metric) / 1000
        phases[name] = seconds
    return phases


def verify_seconds(judge: Judge, task, solution: Solution) -> tuple[float, dict, dict]:
    started = time.perf_counter()
    verdict = judge.verify(task, solution)
    if verdict.status != "ok":
        raise SystemExit(f"{solution.layout} did not verify: {verdict.status}: {verdict.error[:2000]}")
    return time.perf_counter() - started, verdict.seconds, verdict.device


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--phases", action="store_true",
                        help="CUDA: each cuda.cu compiled again under nvcc --time, with and without torch/extension.h")
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = parser.parse_args()
    backend = resolve_backend(args.device)
    task = load_task(FIXTURES / "tasks" / "scale_bias_relu.py")
    cache = Path(tempfile.mkdtemp(prefix="single-file-latency-"))
    judge = Judge(JudgeConfig(backend=backend, cache_dir=cache))
    console = Console()
    rows: dict[str, dict[str, list[float]]] = {}
    build: dict[str, dict[str, list[float]]] = {}
    for layout in ("workspace", "single_file"):
        base = load_solution(SOLUTIONS[layout][backend])
        _, _, device = verify_seconds(judge, task, marked(base, "warm-up"))  # the precompiled headers, once
        for name in ("fresh", "again"):
            rows.setdefault(layout, {})[name] = []
            build.setdefault(layout, {})[name] = []
        for k in range(args.rounds):
            solution = marked(base, f"round {k} {time.time_ns()}")
            for name in ("fresh", "again"):
                console.print(f"[dim]{layout} {name} round {k + 1}/{args.rounds}[/dim]")
                seconds, stages, _ = verify_seconds(judge, task, solution)
                rows[layout][name].append(seconds)
                build[layout][name].append(stages.get("build", 0.0))

    table = Table(title=f"verify, median of {args.rounds} ({backend})")
    for column in ("layout", "sources", "verify s", "of which build s"):
        table.add_column(column, justify="right" if column.endswith("s") else "left")
    result = {"backend": backend, "device": device.get("name"), "rounds": args.rounds, "rows": []}
    for layout, by_name in rows.items():
        for name, seconds in by_name.items():
            median, built = statistics.median(seconds), statistics.median(build[layout][name])
            table.add_row(layout, name, f"{median:.2f}", f"{built:.2f}")
            result["rows"].append({"layout": layout, "sources": name, "verify_s": median, "build_s": built,
                                   "samples_s": seconds})
    gap = {name: statistics.median(rows["single_file"][name]) - statistics.median(rows["workspace"][name])
           for name in ("fresh", "again")}
    result["single_file_minus_workspace_s"] = gap
    console.print(table)
    console.print(f"single file minus workspace: fresh {gap['fresh']:+.2f} s, again {gap['again']:+.2f} s")
    write(args.out, result)  # now, and again after each file's phases: a run cut short keeps its rows
    if args.phases and backend == "cuda":
        result["nvcc_phases_s"] = {}
        for path in (SOLUTIONS["single_file"]["cuda"], GENERATION):
            phases = result["nvcc_phases_s"][path.name] = nvcc_phases(judge, inline_call(path))
            write(args.out, result)
            table = Table(title=f"nvcc phases of {path.name}'s cuda.cu, seconds")
            names = list(dict.fromkeys(p for by in phases.values() for p in by))
            table.add_column("cuda.cu")
            for name in names:
                table.add_column(name, justify="right")
            for variant, by in phases.items():
                table.add_row(variant, *(f"{by.get(name, 0.0):.2f}" for name in names))
            console.print(table)


def write(out: Path | None, result: dict) -> None:
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
