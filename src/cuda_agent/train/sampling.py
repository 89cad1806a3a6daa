"""Sampling replies from a local model and scoring them with the judge: how the demo (and anyone
checking a checkpoint) measures a policy's mean reward, outside the trainer."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from ..task import Task
from .models import reward_key
from .reward import JudgeReward


@dataclass
class Evaluation:
    scores: list[float]
    replies: list[str]
    tasks: list[str]
    statuses: list[str]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.scores)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.scores:
            key = reward_key(s)
            out[key] = out.get(key, 0) + 1
        return dict(sorted(out.items()))

    def to_dict(self, keep_replies: int = 4) -> dict[str, Any]:
        return {"mean": self.mean, "n": len(self.scores), "counts": self.counts(), "scores": self.scores,
                "tasks": self.tasks, "statuses": self.statuses, "sample_replies": self.replies[:keep_replies]}


def sample_replies(model_dir: str, prompts: list[list[dict[str, str]]], per_prompt: int, *, max_new_tokens: int,
                   temperature: float = 1.0, seed: int = 0, device: str = "cpu") -> list[list[str]]:
    """``per_prompt`` sampled replies to each chat prompt (all at once per prompt)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).to(device).eval()
    torch.manual_seed(seed)
    out = []
    for prompt in prompts:
        text = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        ids = torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"]] * per_prompt, device=device)
        with torch.inference_mode():
            generated = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=temperature > 0,
                                       temperature=temperature if temperature > 0 else None,
                                       max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id)
        out.append([tokenizer.decode(g[ids.shape[1]:], skip_special_tokens=True) for g in generated])
    return out


def evaluate(model_dir: str, rows: list[dict[str, Any]], tasks: list[Task], reward: JudgeReward, per_prompt: int,
             *, max_new_tokens: int, temperature: float = 1.0, seed: int = 0, device: str = "cpu") -> Evaluation:
    replies = sample_replies(model_dir, [r["prompt"] for r in rows], per_prompt, max_new_tokens=max_new_tokens,
                             temperature=temperature, seed=seed, device=device)
    flat = [(reply, task) for group, task in zip(replies, tasks) for reply in group]
    results = reward.score_blocking([r for r, _ in flat], [t for _, t in flat])
    return Evaluation([r.score for r in results], [r for r, _ in flat], [t.name for _, t in flat],
                      [str(r.fields.get("status")) for r in results])
