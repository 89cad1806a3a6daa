"""The Ray judge pool across the GPUs of one machine: throughput at 1, 2, 4... GPUs, verdicts
identical to the single-GPU run, and one GPU's actor killed mid-run.

Each size runs in a process of its own that sees only that many GPUs (``CUDA_VISIBLE_DEVICES``),
starts a local Ray instance there (one judge actor per GPU, ``--jobs`` per GPU to change it), and
then, as ``bench_throughput.py`` does:

1. checks every problem's reference with a fresh judge cache and a fresh inductor cache: the
   baselines (eager and torch.compile) are timed anew at every size, so the warm-up measures
   baselines per minute;
2. judges ``--copies`` copies of every solution, each built afresh (its own comment, its own
   hash): candidates per minute.

Scaling efficiency at N GPUs is its rate over N times the one-GPU rate. Verdicts (status,
correctness, reward) are compared candidate by candidate with the one-GPU run. Last, at the
largest size and with that size's cache, copies are judged again while one busy judge actor is
killed (SIGKILL) after ``--kill-after`` verdicts: every candidate must get exactly one verdict.

Prints tables and writes JSON. Absolute figures mean something only on the GPU machine.

    python benchmarks/multi_gpu_scaling.py --kernelbench KB_CHECKOUT --solutions examples/kernelbench \\
        --levels 1,2 --copies 3 --sizes 1,2,4 [--kill-after 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_throughput import add_candidate_options, copies_as_samples, measure  # noqa: E402
from cuda_agent.bench.kernelbench import parse_levels, parse_selection  # noqa: E402
from cuda_agent.bench.runner import RESULTS_FILE, ResultsLog  # noqa: E402
from cuda_agent.judge.config import JudgeConfig  # noqa: E402

DECIDED = ("status", "correct", "reward")  # what must not depend on the number of GPUs


def visible_gpu_count() -> int:
    out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True)
    return len(out.stdout.split()) if out.returncode == 0 else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_candidate_options(parser, "copies of every solution judged at each size")
    parser.add_argument("--sizes", default="1,2,4", help="GPU counts; those above the machine's are left out")
    parser.add_argument("--jobs", type=int, default=1, help="judge actors per GPU")
    parser.add_argument("--kill-after", type=int, default=3,
                        help="verdicts before one actor is killed in the last run (0: no such run)")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "multi_gpu_scaling.json")
    parser.add_argument("--resume", action="store_true",
                        help="keep the runs already in --json (written after every run) and do only the others")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-tag", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args)
        return

    console = Console()
    available = visible_gpu_count()
    if not available:
        sys.exit("no GPU is visible (nvidia-smi lists none): this benchmark measures the Ray pool over GPUs")
    sizes = [n for n in (int(s) for s in args.sizes.split(",")) if n <= available]
    left_out = [n for n in (int(s) for s in args.sizes.split(",")) if n > available]
    if left_out:
        console.print(f"this machine has {available} GPU(s): sizes {left_out} left out")
    work = args.work or Path(tempfile.mkdtemp(prefix="multi-gpu-"))
    runs = previous_runs(args.json) if args.resume else []
    planned = [(size, False) for size in sizes] + ([(sizes[-1], True)] if args.kill_after and sizes else [])
    try:
        for size, kill in planned:
            tag = f"size{size}-kill" if kill else f"size{size}"
            if any(r["run"] == tag and not r.get("error") for r in runs):
                console.print(f"{tag}: kept from {args.json}")
                continue
            runs = [r for r in runs if r["run"] != tag] + [run_size(args, work, size, f"size{size}", kill=kill)]
            write(args, available, runs)  # after every run: a run cut short keeps what it finished
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    summary = write(args, available, runs)
    report(console, summary)
    if summary["failures"]:
        sys.exit("; ".join(summary["failures"]))


def previous_runs(path: Path) -> list[dict]:
    return json.loads(path.read_text()).get("runs", []) if path.exists() else []


def write(args, available: int, runs: list[dict]) -> dict:
    summary = summarise(runs)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"command": " ".join(sys.argv), "gpus_on_machine": available, **summary,
                                     "runs": runs}, indent=1, default=str))
    return summary


def run_size(args, work: Path, size: int, cache_name: str, kill: bool) -> dict:
    """One size in a process that sees ``size`` GPUs; returns its row."""
    tag = f"{cache_name}-kill" if kill else cache_name
    out = work / f"{tag}.json"
    # Ray's workers import the package too: from the checkout, where it is not installed.
    path = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(str(i) for i in range(size)),
               TORCHINDUCTOR_CACHE_DIR=str(work / f"inductor-{cache_name}"), PYTHONPATH=path)
    command = [sys.executable, __file__, "--kernelbench", str(args.kernelbench), "--solutions", str(args.solutions),
               "--levels", args.levels, "--copies", str(args.copies), "--jobs", str(args.jobs),
               "--kill-after", str(args.kill_after if kill else 0), "--work", str(work), "--json", str(out),
               "--child", str(size), "--child-tag", tag]
    for spec in args.problems or []:
        command += ["--problems", spec]
    started = time.perf_counter()
    done = subprocess.run(command, env=env)
    if done.returncode or not out.exists():
        return {"gpus": size, "run": tag, "error": f"the run exited with {done.returncode}",
                "wall_seconds": time.perf_counter() - started}
    return json.loads(out.read_text())


def child(args) -> None:
    """One size: warm-up (baselines) and the candidates, on a local Ray instance."""
    size, tag = args.child, args.child_tag
    cache = args.work / f"cache-{tag.removesuffix('-kill')}"
    config = JudgeConfig(backend="cuda", cache_dir=cache)
    levels, selection = parse_levels(args.levels), parse_selection(args.problems)
    out, samples = args.work / f"run-{tag}", args.work / f"samples-{tag}"
    count = copies_as_samples(args.kernelbench, levels, selection, args.solutions, samples, args.copies,
                              tag=f" {tag}")
    killer = ActorKiller(out / RESULTS_FILE, args.kill_after) if args.kill_after else None
    if killer:
        killer.start()
    settings = SimpleNamespace(kernelbench=args.kernelbench, ray_address=None, copies=args.copies)
    row = measure(settings, config, "ray", args.jobs, levels, selection, out, samples, count, Console(stderr=True))
    # Every candidate once: a duplicated or lost verdict shows here.
    logged = ResultsLog(out / RESULTS_FILE).read()
    records = [r for r in logged if r["kind"] == "solution"]
    seen = collections.Counter((r["key"], r["sample"]) for r in records)
    # The warm-up's reference checks, one per problem: what its baselines per minute count.
    problems = len({r["key"] for r in logged if r["kind"] == "reference"})
    row.update(gpus=size, run=tag, problems=problems,
               baselines_per_minute=60.0 * problems / row["warm_up_seconds"] if row["warm_up_seconds"] else None,
               duplicated=sorted(f"{k} sample {s}" for (k, s), n in seen.items() if n > 1),
               killed=killer.killed if killer else None)
    args.json.write_text(json.dumps(row, default=str))


class ActorKiller(threading.Thread):
    """Once ``after`` verdicts are in, SIGKILLs the judge actor that is running the most
    processes (one judging, not one idle), as a lost GPU or node would end it."""

    def __init__(self, results: Path, after: int) -> None:
        super().__init__(daemon=True)
        self.results, self.after, self.killed = results, after, None

    def run(self) -> None:
        import psutil

        while True:
            time.sleep(0.5)
            if self.results.exists() and self._verdicts() >= self.after:
                break
        while self.killed is None:
            actors = [p for p in psutil.process_iter(["cmdline"]) if " ".join(p.info["cmdline"] or []).startswith("ray::_Host")]
            busy = sorted(actors, key=lambda p: len(_descendants(p)), reverse=True)
            if busy and len(_descendants(busy[0])) > 1:
                pid = busy[0].pid
                os.kill(pid, signal.SIGKILL)
                self.killed = {"pid": pid, "after_verdicts": self._verdicts(), "at": time.time()}
                return
            time.sleep(0.2)

    def _verdicts(self) -> int:
        return sum(1 for r in ResultsLog(self.results).read() if r["kind"] == "solution")


def _descendants(process) -> list:
    try:
        return process.children(recursive=True)
    except Exception:
        return []


def summarise(runs: list[dict]) -> dict:
    failures = [f"{r['run']}: {r['error']}" for r in runs if r.get("error")]
    good = [r for r in runs if not r.get("error")]
    single = next((r for r in good if r["gpus"] == 1 and not r["run"].endswith("-kill")), None)
    rows, differences = [], []
    for run in good:
        decided = {(o["key"], o["sample"]): o for o in run["outcomes"]}
        row = {k: run.get(k) for k in ("run", "gpus", "jobs_per_gpu", "problems", "candidates", "judged", "correct",
                                       "warm_up_seconds", "baselines_per_minute", "seconds", "per_minute",
                                       "duplicated", "killed")}
        if single:
            row["efficiency"] = run["per_minute"] / (run["gpus"] * single["per_minute"])
            row["baseline_efficiency"] = (run["baselines_per_minute"] / (run["gpus"] * single["baselines_per_minute"])
                                          if run["baselines_per_minute"] and single["baselines_per_minute"] else None)
            reference = {(o["key"], o["sample"]): o for o in single["outcomes"]}
            differing = [(key, reference.get(key), decided.get(key)) for key in sorted(set(reference) | set(decided))
                         if not reference.get(key) or not decided.get(key)
                         or any(reference[key][f] != decided[key][f] for f in DECIDED)]
            row["identical_verdicts"] = len(reference) - sum(1 for d in differing if d[1])
            differences += [{"run": run["run"], "candidate": f"{k[0]} sample {k[1]}", "one_gpu": a, "this_run": b}
                            for k, a, b in differing]
        # Fewer than two candidates per judge slot: the run lasts as long as its slowest judge,
        # and its rate is a latency, not a throughput.
        row["latency_bound"] = run["candidates"] < 2 * run["gpus"] * run["jobs_per_gpu"]
        if run["judged"] != run["candidates"] or run["duplicated"]:
            failures.append(f"{run['run']}: {run['judged']} verdicts for {run['candidates']} candidates "
                            f"(duplicated: {run['duplicated']})")
        if run["run"].endswith("-kill") and not run.get("killed"):
            failures.append(f"{run['run']}: no actor was killed (the run ended first?)")
        rows.append(row)
    return {"rows": rows, "differences": differences, "failures": failures}


def report(console: Console, summary: dict) -> None:
    table = Table(title="Ray judge pool across GPUs")
    for column in ("run", "GPUs", "baselines/min", "eff.", "candidates", "correct", "per minute", "eff.",
                   "same verdict", "killed"):
        table.add_column(column)
    for row in summary["rows"]:
        killed = row["killed"]
        table.add_row(row["run"], str(row["gpus"]),
                      f"{row['baselines_per_minute']:.2f}" if row.get("baselines_per_minute") else "-",
                      f"{row['baseline_efficiency']:.2f}" if row.get("baseline_efficiency") else "-",
                      str(row["candidates"]), f"{row['correct']}/{row['judged']}", f"{row['per_minute']:.2f}",
                      f"{row['efficiency']:.2f}" if row.get("efficiency") else "-",
                      f"{row.get('identical_verdicts', '-')}/{row['judged']}",
                      f"pid {killed['pid']} after {killed['after_verdicts']}" if killed else "-")
    console.print(table)
    bound = [row["run"] for row in summary["rows"] if row.get("latency_bound")]
    if bound:
        console.print(f"{', '.join(bound)}: fewer than two candidates per judge slot, so the rate is the slowest "
                      "judge's latency, not throughput (raise --copies)")
    for difference in summary["differences"]:
        console.print(f"differs from one GPU: {difference}")
    for failure in summary["failures"]:
        console.print(f"[red]FAILED[/red] {failure}")


if __name__ == "__main__":
    main()
