"""The demo, stage by stage; each stage's output is kept, so a rerun goes on where it stopped.

    OUT/data/rl.parquet           single-turn rows (the agent's opening request; the reply writes the files)
    OUT/experts/                  the scripted experts' episodes (trajectories, workspaces, best/)
    OUT/data/rft.parquet          the experts' trajectories that passed the RFT filters, and
    OUT/data/rft_report.json      how many each rule dropped
    OUT/models/base/              the tiny model as made (random weights, tokenizer trained here)
    OUT/models/rft/final/         after rejection fine-tuning (TRL SFTTrainer)
    OUT/models/grpo/final/        after GRPO against the CPU judge (TRL GRPOTrainer)
    OUT/models/grpo/steps.jsonl   every GRPO batch's judged rewards
    OUT/eval/{base,rft,grpo}.json sampled replies of each model, judged
    OUT/agent/                    the final model as the agent's policy (local HF client), one greedy episode
    OUT/reward_curve.{json,png}   and OUT/demo.json, the summary
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from ...agent.llm.text_protocol import to_text_messages
from ...files import write_atomic
from ..curves import write_curve
from ..reward import JudgeReward
from ..rft import RFTFilter, find_trajectories, rft_rows
from ..rows import read_parquet, rl_rows, tool_schemas, write_parquet
from ..sampling import evaluate
from ..stats import compare
from ..trl_grpo import STEPS_FILE, GRPOSettings, read_steps, run_grpo
from ..trl_sft import SFTSettings, run_sft, text_protocol_messages
from . import experts, family
from .tiny import build_tiny_model


@dataclass
class DemoSettings:
    sft_epochs: float = 30.0
    sft_lr: float = 3e-3
    sft_batch: int = 1
    grpo_steps: int = 16
    grpo_lr: float = 2e-4
    generations: int = 8
    prompts_per_step: int = 2
    temperature: float = 0.8          # sampling, in GRPO and in the evaluations alike
    eval_per_task: int = 16
    max_new_tokens: int = 100
    seed: int = 0


def demo_judge_config(cache_dir: Path | None = None):
    """The CPU judge with short timing sessions: the demo's slow and fast kernels differ by tens of
    times, far more than the spread of a short session, and the CPU has minutes, not hours."""
    from ...judge.config import JudgeConfig, TimingConfig

    timing = TimingConfig(warmup_calls=2, min_calls=5, max_calls=10, target_seconds=0.2)
    return JudgeConfig(backend="cpu", timing=timing, **({"cache_dir": cache_dir} if cache_dir else {}))


def _done(path: Path) -> bool:
    return path.is_file()


def _save(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(data, indent=2, default=str))


def corpus(rows: list[dict], rft: list[dict], backend: str) -> list[str]:
    """Text the tokenizer learns from: the prompts and the expert conversations."""
    texts = [m["content"] for r in rows for m in r["prompt"]]
    texts += [m["content"] for r in rft for m in text_protocol_messages(r)]
    replies = [to_text_messages([m], [])[0].content for kind in ("fast", "slow")
               for m in family.expert_replies(kind, backend)]
    return texts + replies * 50  # the replies are what the model writes: weigh them, so they tokenize short


def run_demo(out: Path, pool: Any, settings: DemoSettings | None = None,
             say: Callable[[str], None] = print) -> dict[str, Any]:
    settings = settings or DemoSettings()
    out = Path(out).resolve()
    tasks = family.tasks()
    reward = JudgeReward(pool, concurrency=2, log_path=out / "rewards.jsonl")

    rl_path = out / "data" / "rl.parquet"
    if not _done(rl_path):
        write_parquet(rl_rows(tasks, mode="single_turn", backend=pool.backend, data_source="cuda_agent/demo",
                              response_format="tool_calls"), rl_path)
    rows = read_parquet(rl_path)

    rft_path, report_path = out / "data" / "rft.parquet", out / "data" / "rft_report.json"
    if not _done(rft_path):
        say("expert episodes (scripted replies, real judge) ...")
        experts.collect(tasks, pool, out / "experts")
        kept, report = rft_rows(find_trajectories([out / "experts"]), RFTFilter())
        _save(report_path, report.to_dict())
        write_parquet(kept, rft_path)
    rft = read_parquet(rft_path)

    base = out / "models" / "base"
    if not (base / "config.json").is_file():
        build_tiny_model(base, corpus(rows, rft, pool.backend), seed=settings.seed)

    evaluations: dict[str, dict[str, Any]] = {}

    def measure(name: str, model_dir: Path) -> dict[str, Any]:
        path = out / "eval" / f"{name}.json"
        if not _done(path):
            say(f"sampling {settings.eval_per_task} replies per task from the {name} model and judging them ...")
            result = evaluate(str(model_dir), rows, tasks, reward, settings.eval_per_task,
                              max_new_tokens=settings.max_new_tokens, temperature=settings.temperature,
                              seed=settings.seed + 1)
            _save(path, result.to_dict())
        evaluations[name] = json.loads(path.read_text())
        say(f"{name}: mean reward {evaluations[name]['mean']:.2f} {evaluations[name]['counts']}")
        return evaluations[name]

    measure("base", base)
    say("rejection fine-tuning (TRL SFTTrainer, assistant tokens only) ...")
    rft_model = run_sft(str(base), rft, out / "models" / "rft",
                        SFTSettings(epochs=settings.sft_epochs, learning_rate=settings.sft_lr, max_length=None,
                                    batch_size=settings.sft_batch, save_steps=20, seed=settings.seed))
    measure("rft", rft_model)
    say("GRPO against the CPU judge (TRL GRPOTrainer) ...")
    grpo_model = run_grpo(str(rft_model), rows, out / "models" / "grpo", reward,
                          GRPOSettings(steps=settings.grpo_steps, learning_rate=settings.grpo_lr,
                                       num_generations=settings.generations,
                                       prompts_per_step=settings.prompts_per_step, temperature=settings.temperature,
                                       max_completion_length=settings.max_new_tokens, save_steps=4,
                                       seed=settings.seed))
    measure("grpo", grpo_model)

    say("the trained model as the agent's policy (local Hugging Face client, greedy) ...")
    agent = asyncio.run(agent_episode(str(grpo_model), tasks[0], pool, out / "agent", settings.max_new_tokens))
    steps = read_steps(out / "models" / "grpo" / STEPS_FILE)
    curve_json, curve_png = write_curve(out, steps, evaluations)
    summary = {
        "settings": asdict(settings), "backend": pool.backend,
        "rft_report": json.loads(report_path.read_text()),
        "evaluations": {k: {"mean": v["mean"], "n": v["n"], "counts": v["counts"]} for k, v in evaluations.items()},
        "rft_vs_base": compare(evaluations["base"]["scores"], evaluations["rft"]["scores"]),
        "grpo_vs_rft": compare(evaluations["rft"]["scores"], evaluations["grpo"]["scores"]),
        "grpo_steps": [{"step": s["step"], "mean": s["mean"]} for s in steps],
        "agent_episode": agent, "reward_curve": {"json": str(curve_json), "png": str(curve_png)},
        "judge_calls": reward.judge_calls,
    }
    _save(out / "demo.json", summary)
    return summary


async def agent_episode(model_dir: str, task, pool: Any, out: Path, max_new_tokens: int) -> dict[str, Any]:
    from ...agent.llm import make_client
    from ...agent.loop import AgentSettings, Episode

    client = make_client("hf", model_dir, device="cpu", max_new_tokens=max_new_tokens, temperature=0.0)
    try:
        episode = Episode(task, client, pool, out / task.name / "00", provider="hf",
                          settings=AgentSettings(max_turns=3), episode_id=f"{task.name}-demo")
        result = await episode.run()
    finally:
        await client.aclose()
    return {"stop_reason": result.stop_reason, "turns": result.turns, "best": result.best,
            "directory": str(result.directory)}


__all__ = ["DemoSettings", "run_demo"]
