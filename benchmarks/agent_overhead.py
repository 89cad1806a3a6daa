"""What the agent loop itself costs, and whether many episodes run side by side.

Two measurements, both with a scripted model on a loopback HTTP server (the real SDK, no LLM):

  * overhead: episodes of file-tool turns (read, write, edit, multi_edit, glob, grep), no judge.
    Per-turn overhead is the turn's wall time minus the model's reply and the judge's and bash's
    time: dispatch, argument validation, file work, context accounting, the trajectory write.
    Target: under 50 ms per turn.
  * concurrency: N episodes at once (default 64), each writing a correct solution, compiling,
    verifying and finishing, through one shared judge pool. Target: every episode finishes with
    a correct solution and no errors.

Prints a table and writes JSON.

    python benchmarks/agent_overhead.py [--device cuda|cpu] [--episodes 64] [--turns 40] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from agent.servers import OpenAIServer, Reply  # noqa: E402  (the scripted loopback server)
from cuda_agent.llm import make_client  # noqa: E402
from cuda_agent.llm.retry import RetryPolicy  # noqa: E402
from cuda_agent.agent.env import EnvSettings  # noqa: E402
from cuda_agent.agent.loop import AgentSettings  # noqa: E402
from cuda_agent.agent.runner import plan_episodes, run_episodes, summarise  # noqa: E402
from cuda_agent.cluster import LocalJudgePool  # noqa: E402
from cuda_agent.device import resolve_backend  # noqa: E402
from cuda_agent.judge.config import JudgeConfig, TimingConfig  # noqa: E402
from cuda_agent.task import load_task  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
TASK = FIXTURES / "tasks" / "scale_bias_relu.py"


def solution_files(backend: str) -> dict[str, str]:
    root = FIXTURES / "solutions" / backend / "correct"
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def file_turns(turns: int) -> list[Reply]:
    """A fixed cycle of file-tool turns, then finish."""
    cycle = [
        Reply("", [("read", {"path": "model.py"})]),
        Reply("", [("write", {"path": "kernels/notes.txt", "content": "tile 128x128\n" * 200})]),
        Reply("", [("read", {"path": "kernels/notes.txt"})]),
        Reply("", [("edit", {"path": "kernels/notes.txt", "old_string": "tile", "new_string": "block",
                             "replace_all": True})]),
        Reply("", [("multi_edit", {"path": "kernels/notes.txt", "edits": [
            {"old_string": "block 128x128\nblock", "new_string": "block 64x64\nblock"},
            {"old_string": "64x64", "new_string": "32x32"}]})]),
        Reply("", [("glob", {"pattern": "**/*"})]),
        Reply("", [("grep", {"pattern": "def (forward|get_inputs)", "path": "."})]),
        Reply("", [("read", {"path": "SKILL.md", "offset": 1, "limit": 80})]),
    ]
    return [cycle[i % len(cycle)] for i in range(turns - 1)] + [Reply("done", [("finish", {})])]


def judged_script(files: dict[str, str]):
    """Write the solution, compile, verify, finish: the step is the number of replies so far."""
    steps = [Reply("", [("write", {"path": p, "content": t}) for p, t in files.items() if p != "model_new.py"]),
             Reply("", [("read", {"path": "model_new.py"})]),
             Reply("", [("write", {"path": "model_new.py", "content": files["model_new.py"]})]),
             Reply("", [("compile", {})]), Reply("", [("verify", {})]), Reply("done", [("finish", {})])]

    def script(messages, index):
        return steps[min(sum(1 for m in messages if m.role == "assistant"), len(steps) - 1)]

    return script


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def play(server, pool, specs, concurrency: int, settings: AgentSettings):
    client = make_client("openai", "scripted", base_url=server.url, api_key="benchmark",
                         retry=RetryPolicy(max_retries=3, base_delay_s=0.05))
    try:
        return await run_episodes(specs, client, pool, settings=settings, concurrency=concurrency, live=False)
    finally:
        await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None)
    parser.add_argument("--episodes", type=int, default=64, help="concurrent judged episodes")
    parser.add_argument("--overhead-episodes", type=int, default=4)
    parser.add_argument("--turns", type=int, default=40, help="turns per overhead episode")
    parser.add_argument("--judge-concurrency", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON results (default: benchmarks/results/agent_overhead-BACKEND.json)")
    args = parser.parse_args()
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # kill -USR1 PID shows where it is
    backend = resolve_backend(args.device)
    args.out = args.out or ROOT / "benchmarks" / "results" / f"agent_overhead-{backend}.json"
    console = Console()
    task = load_task(TASK)
    fast = TimingConfig(warmup_calls=2, min_calls=5, max_calls=10, target_seconds=0.2)
    results: dict = {"backend": backend}

    with tempfile.TemporaryDirectory(prefix="agent-bench-") as tmp, \
            LocalJudgePool(JudgeConfig(backend=backend, cache_dir=Path(tmp) / "cache", timing=fast),
                           args.judge_concurrency) as pool:
        settings = AgentSettings(EnvSettings(max_turns=args.turns + 5))
        overheads, model_ms, started = [], [], time.perf_counter()
        for index in range(args.overhead_episodes):
            with OpenAIServer(file_turns(args.turns)) as server:
                (result,) = asyncio.run(play(server, pool, plan_episodes([task], Path(tmp) / f"o{index}", 1), 1, settings))
                assert result.stop_reason == "finished", result
                assert not server.errors, server.errors
                overheads += result.overhead_ms
        results["overhead"] = {
            "episodes": args.overhead_episodes, "turns": len(overheads),
            "median_ms": statistics.median(overheads), "p95_ms": percentile(overheads, 0.95),
            "max_ms": max(overheads), "wall_s": time.perf_counter() - started,
        }

        console.print(f"overhead: {results['overhead']['median_ms']:.2f} ms per turn (median); "
                      f"now {args.episodes} concurrent judged episodes", style="dim")
        started = time.perf_counter()
        with OpenAIServer(judged_script(solution_files(backend))) as server:
            specs = plan_episodes([task] * args.episodes, Path(tmp) / "concurrent", 1)
            outcomes = asyncio.run(play(server, pool, specs, args.episodes, AgentSettings(EnvSettings(max_turns=12))))
        wall = time.perf_counter() - started
        summary = summarise(outcomes)
        results["concurrency"] = {
            "episodes": args.episodes, "wall_s": wall, "judge_concurrency": pool.max_concurrent,
            "finished": summary["stop_reasons"].get("finished", 0), "stop_reasons": summary["stop_reasons"],
            "correct": summary["correct"], "server_errors": len(server.errors),
            "median_overhead_ms": summary["median_overhead_ms"],
            "p95_overhead_ms": percentile([x for r in outcomes for x in r.overhead_ms], 0.95),
            "errors": [r.error for r in outcomes if r.error][:5],
        }

    o, c = results["overhead"], results["concurrency"]
    table = Table(title=f"agent loop overhead ({backend} backend)")
    for column in ("measurement", "value", "target"):
        table.add_column(column)
    table.add_row("per-turn overhead, median", f"{o['median_ms']:.2f} ms", "< 50 ms")
    table.add_row("per-turn overhead, p95 / max", f"{o['p95_ms']:.2f} / {o['max_ms']:.2f} ms", "")
    table.add_row(f"{c['episodes']} concurrent episodes: finished", f"{c['finished']}/{c['episodes']}", "all")
    table.add_row("  with a correct solution", f"{c['correct']}/{c['episodes']}", "all")
    table.add_row("  wall time", f"{c['wall_s']:.1f} s (judge runs at once: {c['judge_concurrency']})", "")
    table.add_row("  per-turn overhead under load, median / p95",
                  f"{c['median_overhead_ms']:.2f} / {c['p95_overhead_ms']:.2f} ms", "")
    console.print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    console.print(f"written to {args.out}")
    ok = o["median_ms"] < 50 and c["finished"] == c["correct"] == c["episodes"] and not c["server_errors"]
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
