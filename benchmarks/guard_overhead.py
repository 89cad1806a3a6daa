"""What the judge's guards cost: whole-judge time with every guard on versus off.

Guards: the static scan of the sources, the runtime records in the candidate's process (ATen
dispatch on every check, the op counter on every call, one GPU-kernel profile, threads, flags),
the sandbox's Landlock ruleset, seccomp filter and privilege drop, the float64 precision check,
and the physical-floor check. For each example the solution is judged with
guards on and off, alternately, ``--repeats`` times each after one warm-up of each (which builds
the extension and caches the baselines); the table shows median whole-judge seconds, the
overhead of the guards as a share of the guarded judge's time, and the seconds each stage adds
with the guards on (its median on less its median off). Target: at most 10%. It also shows
the candidate's timed median both ways: the guards that run inside timed calls (the op counter)
must not move the figure the reward is paid on.

    python benchmarks/guard_overhead.py [--device cuda|cpu] [--repeats 3] [--each] [--out results.json]

``--each`` also judges with each guard group off alone (static scan, runtime records, sandbox,
floor, float64 precision), and prints what each group adds to the guarded judge.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cuda_agent.device import resolve_backend  # noqa: E402
from cuda_agent.judge.config import JudgeConfig  # noqa: E402
from cuda_agent.judge.judge import Judge  # noqa: E402
from cuda_agent.solution import load_solution  # noqa: E402
from cuda_agent.task import load_task  # noqa: E402

TARGET = 0.10


# Each guard group's settings when it is off; all of them together are the "off" arm.
GUARDS = {
    "static scan": {"static_checks": False},
    "runtime records": {"runtime_checks": False},
    "sandbox": {"confine_filesystem": False, "drop_privileges": False, "filter_syscalls": False},
    "floor": {"floor_slack": None},
    "float64 precision": {"check_precision": False},
}


def guards_off(config: JudgeConfig) -> JudgeConfig:
    return replace(config, **{k: v for settings in GUARDS.values() for k, v in settings.items()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None)
    parser.add_argument("--examples", default="fused_elementwise,rmsnorm,gemm_epilogue")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--each", action="store_true",
                        help="also judge with each guard group off alone, to cost the groups one by one")
    parser.add_argument("--groups", default=",".join(GUARDS),
                        help="with --each, the groups to judge without, comma-separated (default: all)")
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = parser.parse_args()

    backend = resolve_backend(args.device)
    cache = Path(tempfile.mkdtemp(prefix="guard-overhead-"))
    console = Console()
    results: dict = {"backend": backend, "repeats": args.repeats, "target": TARGET, "examples": {}}
    table = Table(title=f"Guard overhead ({backend})")
    for column in ("example", "guards on (s)", "guards off (s)", "overhead", "candidate ms on / off",
                   "seconds added per stage (on - off)"):
        table.add_column(column)
    try:
        on = Judge(JudgeConfig(backend=backend, cache_dir=cache))
        arms = {"on": on, "off": Judge(guards_off(on.config))}
        if args.each:
            picked = [g.strip() for g in args.groups.split(",") if g.strip()]
            if unknown := [g for g in picked if g not in GUARDS]:
                parser.error(f"unknown guard group(s) {unknown}; the groups are {list(GUARDS)}")
            arms.update({f"without {group}": Judge(replace(on.config, **GUARDS[group])) for group in picked})
        for name in args.examples.split(","):
            example = ROOT / "examples" / name
            task, solution = load_task(example / "model.py"), load_solution(example / backend)
            times: dict[str, list[float]] = {label: [] for label in arms}
            figure: dict[str, list[float]] = {label: [] for label in arms}
            stages: dict[str, dict[str, list[float]]] = {label: {} for label in arms}
            for round_ in range(args.repeats + 1):
                for label, judge in arms.items():
                    verdict = judge.judge(task, solution)
                    # One line per judge, so that a run cut short still shows what it measured.
                    console.print(f"{name} round {round_}{' (warm-up)' if round_ == 0 else ''} {label}: "
                                  f"{verdict.seconds.get('total', 0.0):.2f} s "
                                  + " ".join(f"{k} {v:.2f}" for k, v in verdict.seconds.items() if k != "total"))
                    if not verdict.correct:
                        raise SystemExit(f"{name} ({label}): {verdict.feedback}")
                    if round_ == 0:
                        continue  # warm-up: builds and caches the baselines
                    times[label].append(verdict.seconds["total"])
                    if verdict.timings.get("candidate"):
                        figure[label].append(verdict.timings["candidate"].median_ms)
                    for stage, seconds in verdict.seconds.items():
                        stages[label].setdefault(stage, []).append(seconds)
            t_on, t_off = statistics.median(times["on"]), statistics.median(times["off"])
            overhead = (t_on - t_off) / t_on
            medians = {label: {k: statistics.median(v) for k, v in by_stage.items()}
                       for label, by_stage in stages.items()}
            # Each group's cost: the guarded judge's median less the median without that group.
            each = {label.removeprefix("without "): t_on - statistics.median(times[label])
                    for label in arms if label.startswith("without ")}
            # Where the guards' time goes: each stage's median with guards on less its median off.
            added = {k: v - medians["off"].get(k, 0.0) for k, v in medians["on"].items() if k != "total"}
            ms_on = statistics.median(figure["on"]) if figure["on"] else None
            ms_off = statistics.median(figure["off"]) if figure["off"] else None
            results["examples"][name] = {"on_s": times["on"], "off_s": times["off"], "median_on_s": t_on,
                                         "median_off_s": t_off, "overhead": overhead, "stages_on_s": medians["on"],
                                         "stages_added_s": added,
                                         "candidate_ms_on": figure["on"], "candidate_ms_off": figure["off"],
                                         "seconds_per_group": each, "times_s": times,
                                         "stages_s": medians}
            shift = f"{ms_on:.4g} / {ms_off:.4g} ({ms_on / ms_off - 1:+.1%})" if ms_on and ms_off else "n/a"
            table.add_row(name, f"{t_on:.2f}", f"{t_off:.2f}", f"{overhead:+.1%}", shift,
                          ", ".join(f"{k} {v:+.2f}" for k, v in sorted(added.items(), key=lambda kv: -abs(kv[1]))
                                    if abs(v) >= 0.01))
            if each:
                console.print(f"{name}: seconds each guard group adds (judged without it alone): "
                              + ", ".join(f"{g} {c:+.2f}" for g, c in sorted(each.items(), key=lambda kv: -kv[1])))
        console.print(table)
        worst = max(r["overhead"] for r in results["examples"].values())
        results["worst_overhead"] = worst
        console.print(f"worst overhead {worst:+.1%} (target at most {TARGET:.0%}): "
                      + ("met" if worst <= TARGET else "MISSED"))
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(results, indent=2))
    finally:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
