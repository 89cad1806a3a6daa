"""GRPO on TRL: single-turn (the warm-up) with the judge's reward, and multi-turn (agentic) with
the sandbox as TRL's environment.

TRL has no critic, so the paper's PPO with GAE and its value pretraining are verl's; GRPO is the
single-machine stand-in. The paper's other choices carry over: clip 0.2 / 0.28 and no KL term.

Every reward is logged per training step to ``out/steps.jsonl`` as it comes (the reward
function also keeps every judged result in ``out/rewards.jsonl``); checkpoints go to ``out`` and a
rerun resumes from the newest.
"""

from __future__ import annotations

import json
import statistics
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import paper
from ..judge.pools import JudgePool
from .extras import TrainError, report_to, require
from .cpu_memory import keep_freed_memory
from .models import FINAL, last_checkpoint, save_final
from .reward import JudgeReward
from .rows import task_of_row

STEPS_FILE = "steps.jsonl"
EPISODES_FILE = "episodes.jsonl"


@dataclass
class GRPOSettings:
    steps: int = 100
    learning_rate: float = 3e-6          # the paper's actor learning rate
    num_generations: int = 8             # samples per prompt (the group)
    prompts_per_step: int = 1
    max_completion_length: int = 4096
    temperature: float = 1.0
    clip_low: float = 0.2                # the paper's clip range
    clip_high: float = 0.28
    max_tool_calling_iterations: int = paper.TRAINING_TURNS
    save_steps: int = 10
    seed: int = 0
    keep_checkpoints: int = 3
    loggers: tuple[str, ...] = ("console",)  # extras.check_loggers
    reward_kind: str = "milestone"       # agentic: what an episode's outcome pays (agent.env.REWARD_FIELDS)


def completion_text(completion: Any) -> str:
    """A completion as text: TRL gives plain strings, or message lists for conversational prompts."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content") or "" for m in completion if isinstance(m, dict) and m.get("role") == "assistant")


class TRLRewardFunc:
    """The judge reward as a TRL reward function (async; TRL runs it on its own event loop)."""

    __name__ = "judge"

    def __init__(self, reward: JudgeReward, steps_path: Path) -> None:
        self.reward, self.steps_path = reward, Path(steps_path)
        self._lock = threading.Lock()

    async def __call__(self, prompts: list, completions: list, ref_arch_src: list[str], task_id: list[str],
                       trainer_state: Any = None, **kwargs: Any) -> list[float]:
        tasks = [task_of_row({"ref_arch_src": s, "task_id": t, "index": i})
                 for i, (s, t) in enumerate(zip(ref_arch_src, task_id))]
        results = await self.reward.score_many([completion_text(c) for c in completions], tasks)
        step = int(getattr(trainer_state, "global_step", 0) or 0) + 1
        self.record(step, results)
        return [r.score for r in results]

    def record(self, step: int, results: list) -> None:
        scores = [r.score for r in results]
        entry = {"step": step, "scores": scores, "mean": statistics.fmean(scores),
                 "statuses": [r.fields.get("status") for r in results],
                 "judged": sum(1 for r in results if not r.cached), "cached": sum(1 for r in results if r.cached)}
        with self._lock:
            self.steps_path.parent.mkdir(parents=True, exist_ok=True)
            with self.steps_path.open("a") as fh:
                fh.write(json.dumps(entry) + "\n")


def read_steps(path: Path) -> list[dict[str, Any]]:
    """The step log; a step logged twice (redone after resuming from a checkpoint) counts once, the last time."""
    if not Path(path).is_file():
        return []
    by_step: dict[int, dict[str, Any]] = {}
    for line in Path(path).read_text().splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        by_step[entry["step"]] = entry
    return [by_step[k] for k in sorted(by_step)]


def grpo_dataset(rows: list[dict[str, Any]]):
    datasets = require("datasets")
    if not rows:
        raise TrainError("the RL dataset is empty; build it with `cuda-agent train data`")
    return datasets.Dataset.from_list([{"prompt": r["prompt"], "ref_arch_src": r["extra_info"]["ref_arch_src"],
                                        "task_id": r["extra_info"]["task_id"]} for r in rows])


def grpo_config(out: Path, settings: GRPOSettings, device: str, **extra: Any):
    trl = require("trl")
    if device == "cpu":
        keep_freed_memory()
    return trl.GRPOConfig(
        output_dir=str(out), max_steps=settings.steps, learning_rate=settings.learning_rate,
        num_generations=settings.num_generations,
        per_device_train_batch_size=settings.num_generations * settings.prompts_per_step,
        max_completion_length=settings.max_completion_length, temperature=settings.temperature,
        beta=0.0, epsilon=settings.clip_low, epsilon_high=settings.clip_high, use_cpu=device == "cpu",
        # the paper's loss aggregation (verl's seq-mean-token-mean): each sequence's tokens averaged,
        # then the sequences; TRL's default, dapo, averages every token of the batch at once
        loss_type="grpo",
        bf16=device != "cpu", gradient_checkpointing=device != "cpu",  # bf16 on a CPU is emulated: slow
        save_strategy="steps", save_steps=settings.save_steps, save_total_limit=settings.keep_checkpoints,
        logging_steps=1, report_to=report_to(settings.loggers), seed=settings.seed, lr_scheduler_type="constant", warmup_steps=0, disable_tqdm=True,
        **extra)


def run_grpo(model: str, rows: list[dict[str, Any]], out: Path, reward: JudgeReward, settings: GRPOSettings, *,
             device: str = "cpu", callbacks: list | None = None, reward_func: TRLRewardFunc | None = None) -> Path:
    """Single-turn GRPO: each row's prompt is answered in one reply, which the judge scores."""
    trl = require("trl")
    transformers = require("transformers")
    out = Path(out)
    if (out / FINAL / "config.json").is_file():
        return out / FINAL
    tokenizer = transformers.AutoTokenizer.from_pretrained(model)
    reward_func = reward_func or TRLRewardFunc(reward, out / STEPS_FILE)
    trainer = trl.GRPOTrainer(model=model, reward_funcs=[reward_func],
                              args=grpo_config(out, settings, device), train_dataset=grpo_dataset(rows),
                              processing_class=tokenizer, callbacks=callbacks or [])
    trainer.train(resume_from_checkpoint=last_checkpoint(out))
    return save_final(trainer, tokenizer, out)


def run_agentic_grpo(model: str, rows: list[dict[str, Any]], out: Path, pool: JudgePool, settings: GRPOSettings, *,
                     device: str = "cpu", env_root: Path | None = None, callbacks: list | None = None) -> Path:
    """Multi-turn GRPO: every rollout works in a workspace of its own (``trl_env``), through the
    model's own tool-calling chat template; the reward is the episode's outcome."""
    trl = require("trl")
    transformers = require("transformers")
    from .trl_env import environment_factory

    out = Path(out)
    if (out / FINAL / "config.json").is_file():
        return out / FINAL
    tokenizer = transformers.AutoTokenizer.from_pretrained(model)
    factory = environment_factory(pool, env_root or out / "envs", out / EPISODES_FILE, settings.reward_kind)
    trainer = trl.GRPOTrainer(model=model, args=grpo_config(out, settings, device,
                                                            max_tool_calling_iterations=settings.max_tool_calling_iterations),
                              train_dataset=grpo_dataset(rows), processing_class=tokenizer, environment_factory=factory,
                              callbacks=callbacks or [])
    trainer.train(resume_from_checkpoint=last_checkpoint(out))
    return save_final(trainer, tokenizer, out)
