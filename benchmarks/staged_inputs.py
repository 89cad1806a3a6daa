"""What staging the timed calls' inputs (judge/input_arena.py) closes, and what it costs.

Judges the attacks that do a call's work while its inputs are made in the candidate's own
process, and an honest solution, with the inputs staged by the trusted stager (the default) and
with the candidate making its own (``JudgeConfig(stage_inputs=False)``, the old path), with the
static scan and the records in the candidate's process off (they catch the attack on their own). For each
it prints the verdict, the reward and the speedup either way, and the honest solution's timed
median both ways (staging must not move the figure the reward is paid on) and whole-judge time.

    python benchmarks/staged_inputs.py [--device cuda|cpu] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cuda_agent.device import resolve_backend  # noqa: E402
from cuda_agent.judge.config import JudgeConfig, TimingConfig  # noqa: E402
from cuda_agent.judge.judge import Judge  # noqa: E402
from cuda_agent.solution import load_solution  # noqa: E402
from cuda_agent.task import load_task  # noqa: E402

CASES = ROOT / "tests" / "adversarial" / "cases"
TASK = ROOT / "tests" / "adversarial" / "tasks" / "scale_bias_relu.py"
SOLUTIONS = {
    "cpu": {"attack": CASES / "b13_precompute_while_inputs_are_made" / "solution",
            "honest": ROOT / "tests" / "fixtures" / "solutions" / "cpu" / "correct"},
    "cuda": {"attack": CASES / "b13_precompute_while_inputs_are_made_unchecked" / "solution",
             "honest": ROOT / "tests" / "fixtures" / "solutions" / "cuda" / "correct"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    backend = resolve_backend(args.device)
    task = load_task(TASK)
    rows = []
    for name, path in SOLUTIONS[backend].items():
        for staged in (True, False):
            # The scan and the records in the candidate's process off: they refuse the attack
            # before it is timed (on a GPU the records see its kernel launched outside forward),
            # and this measures what the inputs' origin alone does.
            judge = Judge(JudgeConfig(backend=backend, static_checks=False, runtime_checks=False,
                                      stage_inputs=staged, timing=TimingConfig(max_calls=50, target_seconds=0.5)))
            started = time.perf_counter()
            v = judge.judge(task, load_solution(path))
            candidate = v.timings.get("candidate")
            unpaid = (v.timing_integrity or {}).get("unpaid_speedups") or {}
            rows.append({"solution": name, "inputs_staged": staged, "status": v.status, "reward": v.reward,
                         "speedup_vs_eager": v.speedup_vs_eager if v.speedup_vs_eager is not None else unpaid.get("eager"),
                         "candidate_ms": candidate.median_ms if candidate else None,
                         "judge_s": time.perf_counter() - started,
                         "staged_said": (v.timing_integrity or {}).get("inputs_staged"),
                         "feedback": v.feedback.splitlines()[0] if v.feedback else ""})
    table = Table(title=f"inputs made by the candidate vs staged by the judge ({backend})")
    for column in ("solution", "inputs", "status", "reward", "x eager", "candidate ms", "judge s"):
        table.add_column(column)
    for r in rows:
        table.add_row(r["solution"], "staged" if r["inputs_staged"] else "candidate's own", r["status"], str(r["reward"]),
                      "-" if r["speedup_vs_eager"] is None else f"{r['speedup_vs_eager']:.2f}x",
                      "-" if r["candidate_ms"] is None else f"{r['candidate_ms']:.4f}", f"{r['judge_s']:.1f}")
    Console(width=140).print(table)
    out = args.out or ROOT / "benchmarks" / "results" / f"staged_inputs-{backend}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"backend": backend, "rows": rows}, indent=2))
    print(f"written to {out}")


if __name__ == "__main__":
    main()
