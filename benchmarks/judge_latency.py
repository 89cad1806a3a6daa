"""How long the judge takes, stage by stage (repeatability: ``timing_repeatability.py``).

Measures, for a one-kernel example solution:
  * toolchain warm-up (precompiled header, the judge's binding object): once per machine;
  * cold compile of the solution (toolchain warm, none of its objects cached);
  * compile after editing one kernel;
  * cache-hit compile;
  * verify (5 checks, processes started fresh) and the full judge with cached baselines;
  * the full judge with baselines timed afresh.

Prints a table and writes JSON. Absolute times mean something only on the GPU machine.

    python benchmarks/judge_latency.py [--device cuda|cpu] [--example fused_elementwise] [--exec-workers]

``--exec-workers`` starts every worker by exec, as before the fork server (``JudgeConfig.fork_workers``).
"""

from __future__ import annotations

import argparse
import json
import shutil
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
from cuda_agent.judge.judge import Judge  # noqa: E402
from cuda_agent.solution import CUDA_SOURCE_SUFFIXES, CXX_SOURCE_SUFFIXES, BINDING_SUFFIX, Solution, load_solution  # noqa: E402
from cuda_agent.task import load_task  # noqa: E402


def edited(solution: Solution, paths: list[str], marker: str) -> Solution:
    """The same solution with a comment appended to ``paths``: new content, so new objects."""
    files = dict(solution.files)
    for path in paths:
        files[path] += f"\n// {marker}\n"
    return Solution(files, solution.layout, solution.origin)


def kernel_file(solution: Solution) -> str:
    """The one kernel source (not the binding) an author would edit."""
    sources = [p for p in solution.kernel_files(CUDA_SOURCE_SUFFIXES + CXX_SOURCE_SUFFIXES)
               if not p.endswith(BINDING_SUFFIX)]
    return sources[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None)
    parser.add_argument("--example", default="fused_elementwise")
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    parser.add_argument("--exec-workers", action="store_true",
                        help="start workers by exec instead of forking them from the fork server")
    args = parser.parse_args()

    backend = resolve_backend(args.device)
    example = ROOT / "examples" / args.example
    task = load_task(example / "model.py")
    solution = load_solution(example / backend)
    cache = Path(tempfile.mkdtemp(prefix="judge-latency-"))
    console = Console()
    rows: list[tuple[str, float, str]] = []
    results: dict = {"backend": backend, "example": args.example,
                     "worker_start": "exec" if args.exec_workers else "fork"}

    try:
        judge = Judge(JudgeConfig(backend=backend, cache_dir=cache, fork_workers=not args.exec_workers))
        builder = judge.builder

        # Toolchain warm-up: build a variant whose every source differs, so the precompiled header
        # and the judge's own binding object exist but none of the solution's objects do.
        t0 = time.perf_counter()
        all_sources = solution.kernel_files(CUDA_SOURCE_SUFFIXES + CXX_SOURCE_SUFFIXES)
        warm = builder.build(edited(solution, all_sources, "toolchain warm-up"))
        assert warm.ok, warm.errors
        rows.append(("toolchain warm-up (once per machine)", time.perf_counter() - t0, "precompiled header + judge objects"))

        cold = builder.build(solution)
        assert cold.ok, cold.errors
        rows.append(("cold compile", cold.seconds, f"{cold.objects_compiled}/{cold.objects_total} objects compiled"))

        edit = builder.build(edited(solution, [kernel_file(solution)], "one edit"))
        rows.append(("compile after editing one kernel", edit.seconds, f"{edit.objects_compiled} object compiled"))

        hit = builder.build(solution)
        rows.append(("cache-hit compile", hit.seconds, "cache hit" if hit.cache_hit else "MISS"))

        for attempt in ("first", "again"):  # the first may start the fork server
            v = judge.verify(task, solution)
            assert v.correct, v.feedback
            rows.append((f"verify (5 checks), {attempt}", v.seconds["total"],
                         f"start {v.seconds['start']:.2f}s, checks {v.seconds['verify']:.2f}s"))

        first = judge.judge(task, solution)
        assert first.correct, first.feedback
        rows.append(("whole judge, baselines timed", first.seconds["total"], f"profile {first.seconds['profile']:.1f}s"))

        cached = judge.judge(task, solution)
        rows.append(("whole judge, baselines cached", cached.seconds["total"],
                     f"candidate {cached.timings['candidate'].median_ms:.4g} ms"))
        results["verdict"] = cached.to_dict()

        results["device"] = cached.device
    finally:
        shutil.rmtree(cache, ignore_errors=True)

    table = Table(title=f"judge latency: {args.example} on {backend} ({results.get('device', {}).get('name', '?')}), "
                        f"workers started by {results['worker_start']}")
    table.add_column("measurement")
    table.add_column("value", justify="right")
    table.add_column("detail")
    for name, value, detail in rows:
        unit = "x" if "speedup" in name else "s"
        table.add_row(name, f"{value:.3f} {unit}" if unit == "x" else f"{value:.2f} s", detail)
    console.print(table)
    results["rows"] = [{"measurement": n, "value": v, "detail": d} for n, v, d in rows]
    out = args.out or ROOT / "benchmarks" / "results" / f"judge_latency-{backend}-{results['worker_start']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=str))
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
