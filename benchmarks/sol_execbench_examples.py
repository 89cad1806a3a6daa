"""SOL-ExecBench's example solutions judged here and by their own harness, side by side.

For every problem folder under PATH (default ``.sol-execbench/examples``: a SOL-ExecBench checkout's
``examples/`` in the ignored folder ``.sol-execbench/``) that holds ``solution_*.json``:

1. a copy of the problem keeping its first ``--max-workloads`` workloads (0: all), used by both sides;
2. the solution converted to a single-file ``model_new.py`` (``cuda_agent.sol_execbench.solution_from_json``)
   and judged by this project's judge at the full stage (profile) on ``--device``: status, reward,
   each workload's outcome, the geometric mean of the speedups over eager, candidate and eager
   times, the SOL score;
3. where SOL-ExecBench's harness imports (``import sol_execbench``; ``--harness-src
   .sol-execbench/src`` puts a checkout's sources on the path), ``python -m sol_execbench.cli.main
   PROBLEM --solution SOL.json -o traces.jsonl`` on the same copy, and its traces read: workloads
   passed, the geometric mean of their speedups over their reference, their latency. Where it does
   not import or fails, why (its output's tail).

Prints a table, writes JSON (``--out``) and a Markdown table (``--markdown``). A problem that fails
on either side is recorded as such; the run goes on.

    mkdir -p .sol-execbench && git -C SOL-ExecBench archive HEAD examples src | tar -x -C .sol-execbench
    python benchmarks/sol_execbench_examples.py [PATH] [--device cuda|cpu] [--max-workloads 3]
        [--harness-src .sol-execbench/src] [--out F.json] [--markdown F.md]

This runs each solution's and each reference's code: point it at solutions you trust.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cuda_agent.device import resolve_backend  # noqa: E402
from cuda_agent.errors import CudaAgentError, TaskFormatError  # noqa: E402
from cuda_agent.judge.config import JudgeConfig, TimingConfig  # noqa: E402
from cuda_agent.judge.judge import Judge  # noqa: E402
from cuda_agent.sol_execbench import DEFINITION_FILE, WORKLOADS_FILE, load_problem, solution_from_json  # noqa: E402
from cuda_agent.solution import load_solution  # noqa: E402

TAIL = 1500  # characters of a failing command's output kept


def geomean(values: list) -> float | None:
    values = [v for v in values if isinstance(v, (int, float)) and v > 0]
    return statistics.geometric_mean(values) if values else None


def tail(text: str | bytes | None) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return (text or "").strip()[-TAIL:]


def examples(root: Path) -> list[tuple[Path, Path]]:
    """(problem folder, solution JSON) for every solution_*.json beside a definition.json."""
    return [(folder, sol) for folder in sorted(p.parent for p in root.rglob(DEFINITION_FILE))
            for sol in sorted(folder.glob("solution_*.json"))]


def trimmed_copy(folder: Path, to: Path, keep: int) -> tuple[int, int]:
    """``folder`` copied to ``to`` with its first ``keep`` workloads (all for 0): (kept, total)."""
    if to.exists():
        shutil.rmtree(to)
    shutil.copytree(folder, to, ignore=shutil.ignore_patterns("solution_*.json"))
    lines = [line for line in (folder / WORKLOADS_FILE).read_text().splitlines() if line.strip()]
    kept = lines[:keep] if keep > 0 else lines
    (to / WORKLOADS_FILE).write_text("".join(line + "\n" for line in kept))
    return len(kept), len(lines)


def describe(solution: Path) -> dict:
    """The solution's name, languages and calling style, as far as its JSON says."""
    try:
        data = json.loads(solution.read_text())
        spec = data.get("spec") or {}
        return {"solution_name": data.get("name"), "languages": list(spec.get("languages") or []),
                "entry_point": spec.get("entry_point"), "dps": spec.get("destination_passing_style", True)}
    except (OSError, ValueError, AttributeError) as exc:
        return {"solution_name": None, "languages": [], "error": f"unreadable: {exc}"}


def judge_ours(judge: Judge, problem: Path, solution: Path, out_dir: Path, zero_outputs: bool) -> dict:
    try:
        model = solution_from_json(solution, problem, out_dir, zero_outputs=zero_outputs)
    except TaskFormatError as exc:
        return {"status": "not converted", "error": str(exc)}
    try:
        task = load_problem(problem)
    except TaskFormatError as exc:
        return {"status": "problem refused", "error": str(exc), "model_new": str(model)}
    started = time.perf_counter()
    try:
        verdict = judge.evaluate(task, load_solution(model), "profile")
    except (CudaAgentError, OSError, RuntimeError, ValueError) as exc:
        return {"status": "judge failed", "error": f"{type(exc).__name__}: {exc}", "model_new": str(model)}
    declared = [w for w in verdict.workloads if not w.get("held_out")]
    timings = {k: (v.median_ms if v else None) for k, v in verdict.timings.items()}
    return {"status": verdict.status, "correct": verdict.correct, "reward": verdict.reward,
            "error": verdict.error, "stage": verdict.stage, "model_new": str(model),
            "speedup_vs_eager": verdict.speedup_vs_eager, "speedup_vs_compile": verdict.speedup_vs_compile,
            "speedup_withheld": verdict.speedup_withheld, "sol_score": verdict.sol_score,
            "candidate_ms": geomean([w.get("candidate_ms") for w in declared]) if declared else timings.get("candidate"),
            "eager_ms": geomean([w.get("eager_ms") for w in declared]) if declared else timings.get("eager"),
            "workloads": verdict.workloads, "violations": [f"{v.rule}: {v.message}" for v in verdict.violations][:5],
            "details": tail(verdict.details) if verdict.status != "ok" else "",
            "seconds": round(time.perf_counter() - started, 1)}


def harness_check(env: dict) -> str | None:
    """None where SOL-ExecBench's harness imports; else why not."""
    proc = subprocess.run([sys.executable, "-c", "import sol_execbench.cli.main"], env=env,
                          capture_output=True, text=True, timeout=300)
    return None if proc.returncode == 0 else (tail(proc.stderr) or f"exit status {proc.returncode}")


def run_theirs(problem: Path, solution: Path, traces: Path, env: dict, timeout: float) -> dict:
    traces.parent.mkdir(parents=True, exist_ok=True)
    traces.unlink(missing_ok=True)
    command = [sys.executable, "-m", "sol_execbench.cli.main", str(problem), "--solution", str(solution),
               "-o", str(traces)]
    started = time.perf_counter()
    try:
        # wide enough that rich does not wrap their error messages
        proc = subprocess.run(command, env={**env, "COLUMNS": "400"}, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return {"ran": False, "why": f"timed out after {timeout:.0f} s: {tail(exc.stderr)}"}
    seconds = round(time.perf_counter() - started, 1)
    if not traces.is_file():
        return {"ran": False, "exit_status": proc.returncode, "seconds": seconds,
                "why": tail(proc.stderr + "\n" + proc.stdout) or f"exit status {proc.returncode}, no traces"}
    return {"ran": True, "exit_status": proc.returncode, "seconds": seconds, **read_traces(traces)}


def read_traces(traces: Path) -> dict:
    """Their traces (one JSON a line): each workload's status and times, and the summary."""
    rows = []
    for line in traces.read_text().splitlines():
        if not line.strip():
            continue
        trace = json.loads(line)
        evaluation = trace.get("evaluation") or {}
        performance = evaluation.get("performance") or {}
        rows.append({"uuid": (trace.get("workload") or {}).get("uuid"), "status": evaluation.get("status"),
                     "latency_ms": performance.get("latency_ms"),
                     "reference_latency_ms": performance.get("reference_latency_ms"),
                     "speedup_factor": performance.get("speedup_factor"),
                     "log": tail(evaluation.get("log")) if evaluation.get("status") != "PASSED" else ""})
    passed = [r for r in rows if r["status"] == "PASSED"]
    return {"traces": rows, "passed": len(passed), "total": len(rows),
            "speedup": geomean([r["speedup_factor"] for r in passed]),
            "latency_ms": geomean([r["latency_ms"] for r in passed]),
            "reference_latency_ms": geomean([r["reference_latency_ms"] for r in passed]),
            "why": "" if len(passed) == len(rows) else next((r["log"] for r in rows if r["log"]), "")}


def number(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def cells(row: dict) -> list[str]:
    ours, theirs = row["ours"], row["theirs"]
    why = " ".join((ours.get("error") or "").split())[:160]
    if theirs.get("why"):  # the last error line of their output says most
        lines = theirs["why"].strip().splitlines()
        why += ("; " if why else "") + "theirs: " + next((x for x in reversed(lines) if "Error" in x), lines[-1])
    return [row["problem"], ",".join(row["languages"]) or "?", ours["status"],
            str(ours["reward"]) if "reward" in ours else "-", number(ours.get("speedup_vs_eager"), ".2f"),
            number(ours.get("candidate_ms"), ".4g"),
            f"{theirs['passed']}/{theirs['total']}" if theirs.get("ran") else "not run",
            number(theirs.get("speedup"), ".2f"), number(theirs.get("latency_ms"), ".4g"),
            " ".join(why.split())[:320]]


COLUMNS = ("problem", "language", "our status", "reward", "×eager (geomean)", "candidate ms",
           "their passed", "their ×ref (geomean)", "their ms", "why not")


def markdown(rows: list[dict], title: str) -> str:
    lines = [f"## {title}", "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells(row)) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", type=Path, nargs="?", default=ROOT / ".sol-execbench" / "examples")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda where a GPU is visible)")
    parser.add_argument("--max-workloads", type=int, default=3, help="first workloads kept per problem (0: all)")
    parser.add_argument("--harness-src", type=Path, default=None,
                        help="a SOL-ExecBench checkout's src/, put on the harness's path")
    parser.add_argument("--harness-timeout", type=float, default=1800.0, help="seconds per harness run")
    parser.add_argument("--run-dir", type=Path, default=None,
                        help="where trimmed problems, converted solutions and traces go (default: a fresh one)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="the judge's cache (default: the judge's own)")
    parser.add_argument("--timing-seconds", type=float, default=None, help="each timing session's target")
    parser.add_argument("--zero-outputs", action="store_true",
                        help="allocate destinations with torch.zeros, as their harness does, not torch.empty")
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    parser.add_argument("--markdown", type=Path, default=None, help="Markdown table output path")
    parser.add_argument("--only", default=None,
                        help="comma-separated parts of problem paths to keep, e.g. cuda_cpp/rmsnorm,triton (default: all)")
    args = parser.parse_args()
    device = resolve_backend(args.device)
    pairs = examples(args.path)
    if args.only:
        wanted = [w for w in args.only.split(",") if w]
        pairs = [(f, sol) for f, sol in pairs if any(w in str(f.relative_to(args.path)) for w in wanted)]
    if not pairs:
        raise SystemExit(f"no solution_*.json beside a {DEFINITION_FILE} under {args.path}")
    run_dir = (args.run_dir or Path(tempfile.mkdtemp(prefix="sol-execbench-examples-"))).resolve()
    console = Console()

    env = dict(os.environ)
    if args.harness_src:
        env["PYTHONPATH"] = os.pathsep.join([str(args.harness_src.resolve()), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    harness_missing = harness_check(env)
    if harness_missing:
        console.print(f"[yellow]SOL-ExecBench's harness does not import; only this judge runs:[/] "
                      f"{harness_missing.splitlines()[-1] if harness_missing else ''}")

    config = {"backend": device}
    if args.cache_dir:
        config["cache_dir"] = args.cache_dir
    if args.timing_seconds:
        config["timing"] = TimingConfig(target_seconds=args.timing_seconds)
    judge = Judge(JudgeConfig(**config))

    rows: list[dict] = []

    def save(rows: list[dict], finished: bool = False) -> None:
        if not args.out:
            return
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"device": device, "path": str(args.path), "max_workloads": args.max_workloads,
                                        "run_dir": str(run_dir), "harness_imports": not harness_missing,
                                        "harness_why_not": harness_missing, "finished": finished,
                                        "correct_here": sum(bool(r["ours"].get("correct")) for r in rows),
                                        "rows": rows}, indent=1, default=str) + "\n")

    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console)
    with progress:
        bar = progress.add_task("examples", total=len(pairs))
        for folder, solution in pairs:
            rel = folder.relative_to(args.path)
            row = {"problem": str(rel), "solution": solution.name, **describe(solution)}
            progress.update(bar, description=f"{rel}: ours")
            problem = run_dir / "problems" / rel
            try:
                row["workloads_kept"], row["workloads_total"] = trimmed_copy(folder, problem, args.max_workloads)
            except OSError as exc:
                row["ours"] = {"status": "not copied", "error": str(exc)}
                row["theirs"] = {"ran": False, "why": "the problem was not copied"}
                rows.append(row)
                progress.advance(bar)
                continue
            started = time.perf_counter()
            try:
                row["ours"] = judge_ours(judge, problem, solution, run_dir / "converted" / rel / solution.stem,
                                         args.zero_outputs)
            except Exception as exc:  # noqa: BLE001 - one problem's failure is recorded, the run goes on
                row["ours"] = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
            row["ours"]["seconds"] = round(time.perf_counter() - started, 1)
            if harness_missing:
                row["theirs"] = {"ran": False, "why": f"sol_execbench does not import: {harness_missing}"}
            else:
                progress.update(bar, description=f"{rel}: theirs")
                started = time.perf_counter()
                try:
                    row["theirs"] = run_theirs(problem, solution.resolve(),
                                               run_dir / "traces" / rel / f"{solution.stem}.jsonl", env,
                                               args.harness_timeout)
                except Exception as exc:  # noqa: BLE001 - as above
                    row["theirs"] = {"ran": False, "why": f"{type(exc).__name__}: {exc}"}
                row["theirs"]["seconds"] = round(time.perf_counter() - started, 1)
            rows.append(row)
            save(rows)  # a run cut short keeps every problem done
            theirs = row["theirs"]
            console.print(f"[dim]{rel} ({solution.name}): ours {row['ours']['status']}"
                          f"{', reward ' + str(row['ours']['reward']) if 'reward' in row['ours'] else ''}; theirs "
                          f"{str(theirs['passed']) + '/' + str(theirs['total']) + ' passed' if theirs.get('ran') else 'not run'}"
                          f" ({row['ours']['seconds']} s here, {theirs.get('seconds', 0)} s theirs)[/]")
            progress.advance(bar)

    kept = "all" if args.max_workloads <= 0 else f"first {args.max_workloads}"
    title = f"SOL-ExecBench examples under {args.path}: this judge ({device}) and theirs, {kept} workloads"
    table = Table(title=title)
    for column in COLUMNS[:-1]:  # the reasons follow the table, where they have room
        table.add_column(column, justify="right" if "ms" in column or "×" in column or column == "reward" else "left")
    for row in rows:
        table.add_row(*cells(row)[:-1])
    console.print(table)
    for row in rows:
        if why := cells(row)[-1]:
            console.print(f"[dim]{row['problem']}:[/] {why}", highlight=False)
    correct = sum(bool(r["ours"].get("correct")) for r in rows)
    console.print(f"{correct} of {len(rows)} judged correct here; their harness "
                  f"{'did not run' if harness_missing else 'ran on ' + str(sum(bool(r['theirs'].get('ran')) for r in rows))}"
                  f"; files under {run_dir}")
    save(rows, finished=True)
    if args.out:
        console.print(f"wrote {args.out}")
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(markdown(rows, title))
        console.print(f"wrote {args.markdown}")


if __name__ == "__main__":
    main()
