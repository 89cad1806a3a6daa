"""Training throughput against the judge: rollouts and judge calls per minute, and the share of
each GRPO step spent waiting on the judge, at reward concurrency 1, 4 and 16.

The policy is the demo's model after rejection fine-tuning (made first in --work, or reused), so
its replies are real solutions of the demo's tasks; the reward cache is off, so every reply is
judged. Each concurrency gets a judge pool of that many processes and a fresh GRPO run of --steps
steps (TRL GRPOTrainer, the same engine `cuda-agent train warmup --engine trl` runs).

    python benchmarks/train_throughput.py --device cpu --steps 2 --concurrency 1,4
    python benchmarks/train_throughput.py --device cuda            # on a GPU: model and judge on it
    python benchmarks/train_throughput.py --device cuda --judge-gpus 1   # the judges on a second GPU
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from cuda_agent.cluster import LocalJudgePool  # noqa: E402
from cuda_agent.train.demo.run import DemoRun, DemoSettings, demo_judge_config  # noqa: E402
from cuda_agent.train.pools import local_judge_pool, parse_gpus  # noqa: E402
from cuda_agent.train.reward import JudgeReward  # noqa: E402
from cuda_agent.train.trl_grpo import STEPS_FILE, GRPOSettings, TRLRewardFunc, read_steps, run_grpo  # noqa: E402


class TimedReward(TRLRewardFunc):
    """The TRL reward function, with the time the trainer spends waiting for it."""

    def __init__(self, reward: JudgeReward, steps_path: Path) -> None:
        super().__init__(reward, steps_path)
        self.wait_s = 0.0

    async def __call__(self, *args, **kwargs):
        started = time.monotonic()
        try:
            return await super().__call__(*args, **kwargs)
        finally:
            self.wait_s += time.monotonic() - started


def step_timer():
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.seconds: list[float] = []
            self._start = 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            self._start = time.monotonic()

        def on_step_end(self, args, state, control, **kwargs):
            self.seconds.append(time.monotonic() - self._start)

    return StepTimer()


def warm_cache(run: DemoRun, work: Path) -> None:
    """Judge each task's expert solutions once into the benchmark's cache, so builds and eager /
    torch.compile baselines are not part of any measurement."""
    from cuda_agent.train.demo import family

    config = demo_judge_config(work / "judge-cache", run.pool.backend)
    with LocalJudgePool(config, max_concurrent=2) as pool:
        reward = JudgeReward(pool, concurrency=2, use_cache=False)
        replies = ["\n".join(f"{path}\n```\n{text}```" for path, text in family.solution_files(kind, pool.backend).items())
                   for kind in ("fast", "slow")]
        reward.score_blocking(replies * len(run.tasks), [t for t in run.tasks for _ in replies])


def measure(policy: Path, run: DemoRun, concurrency: int, steps: int, work: Path, device: str,
            judge_gpus: list[int] | None) -> dict:
    out = work / f"grpo-c{concurrency}"
    shutil.rmtree(out, ignore_errors=True)
    config = demo_judge_config(work / "judge-cache", run.pool.backend)
    with local_judge_pool(config, concurrency, judge_gpus) as pool:
        reward = JudgeReward(pool, concurrency=concurrency, use_cache=False)
        timed = TimedReward(reward, out / STEPS_FILE)
        timer = step_timer()
        s = run.settings
        settings = GRPOSettings(steps=steps, learning_rate=s.grpo_lr, num_generations=s.generations,
                                prompts_per_step=s.prompts_per_step, temperature=s.temperature,
                                max_completion_length=s.max_new_tokens, save_steps=10**6)
        started = time.monotonic()
        run_grpo(str(policy), run.rows(), out, reward, settings, device=device, callbacks=[timer],
                 reward_func=timed)
        total = time.monotonic() - started
    rollouts = sum(len(x["scores"]) for x in read_steps(out / STEPS_FILE))
    step_s = sum(timer.seconds) or total
    return {"concurrency": concurrency, "judge_gpus": judge_gpus or [0], "steps": steps, "rollouts": rollouts,
            "judge_calls": reward.judge_calls, "seconds": total, "step_seconds": step_s, "judge_wait_s": timed.wait_s,
            "rollouts_per_min": 60 * rollouts / step_s, "judge_calls_per_min": 60 * reward.judge_calls / step_s,
            "judge_wait_share": timed.wait_s / step_s, "mean_judge_s": reward.judge_seconds / max(1, reward.judge_calls)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="model and judge backend")
    parser.add_argument("--concurrency", default="1,4,16", help="reward concurrencies to measure")
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps per concurrency")
    parser.add_argument("--work", type=Path, default=Path("benchmarks/results/train_throughput"))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/train_throughput.json"))
    parser.add_argument("--prompts", type=int, default=2, help="prompts per GRPO step")
    parser.add_argument("--generations", type=int, default=8, help="samples per prompt")
    parser.add_argument("--demo", type=Path, help="a `cuda-agent train demo` folder whose RFT model to reuse")
    parser.add_argument("--judge-gpus", help="GPUs the judges time on, e.g. 1 (default: GPU 0, where the model "
                                             "trains); the concurrency is then per GPU")
    args = parser.parse_args()
    console = Console(stderr=True)
    work = args.work.resolve()
    judge_gpus = parse_gpus(args.judge_gpus)
    if judge_gpus and args.device != "cuda":
        parser.error("--judge-gpus places judges on GPUs: it needs --device cuda")
    settings = replace(DemoSettings(), device=args.device, prompts_per_step=args.prompts, generations=args.generations)
    with LocalJudgePool(demo_judge_config(work / "judge-cache", args.device), max_concurrent=2) as pool:
        run = DemoRun(args.demo or work / "demo", pool, settings, say=lambda m: console.print(f"[dim]{m}[/]"))
        policy = run.rft_model()
        warm_cache(run, work)
        rows = []
        for c in args.concurrency.split(","):
            rows.append(row := measure(policy, run, int(c), args.steps, work, args.device, judge_gpus))
            console.print(f"concurrency {row['concurrency']}: {row['rollouts_per_min']:.1f} rollouts/min, "
                          f"judge wait {100 * row['judge_wait_share']:.0f}% of {row['step_seconds']:.1f} s")
            write(args.out, args.device, settings, rows)  # after every row: a run cut short keeps its rows
    where = f", judges on GPU {args.judge_gpus}" if judge_gpus else ""
    table = Table(title=f"GRPO against the judge ({args.device}{where}): {settings.prompts_per_step} prompts x "
                        f"{settings.generations} samples per step")
    for column in ("concurrency", "rollouts/min", "judge calls/min", "judge wait share", "mean judge s", "steps"):
        table.add_column(column)
    for r in rows:
        table.add_row(str(r["concurrency"]), f"{r['rollouts_per_min']:.1f}", f"{r['judge_calls_per_min']:.1f}",
                      f"{100 * r['judge_wait_share']:.0f}%", f"{r['mean_judge_s']:.2f}", str(r["steps"]))
    Console().print(table)
    console.print(f"written to {args.out}")


def write(out: Path, device: str, settings: DemoSettings, rows: list[dict]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"device": device, "settings": settings.__dict__, "results": rows}, indent=2))


if __name__ == "__main__":
    main()
