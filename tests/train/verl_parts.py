"""verl's pieces driven without a rollout engine, shared by the CPU and GPU verl tests: stage
configs composed from verl's YAML, a scripted server manager under the agent loop, and one reply
scored through verl's naive reward manager."""

from __future__ import annotations

import asyncio
import json

from cuda_agent.train.stages import PPO_MODULE, compose

PPO_OVERRIDES = ["actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.model.path=m", "critic.model.path=m"]


def ppo_config(**extra):
    items = PPO_OVERRIDES + [f"{k}={v}" for k, v in extra.items()]
    return compose(PPO_MODULE, items)


class ScriptedServer:
    """verl's server manager, answering each request with the next scripted reply, as tokens."""

    def __init__(self, tokenizer, replies):
        self.tokenizer, self.replies, self.requests = tokenizer, list(replies), []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.requests.append(list(prompt_ids))
        text = self.replies[min(len(self.requests) - 1, len(self.replies) - 1)] + "<|im_end|>"
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")


def tool_call(name, args):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def run_loop(tokenizer, pool, replies, tmp_path, task, judge=None, **rollout):
    """One episode of the ``cuda_agent`` loop on ``task``, the server answering with ``replies``;
    its judges are ``pool``, or made from the ``judge`` settings as verl's config gives them."""
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from cuda_agent.train.verl_loop import CudaAgentLoop

    config = ppo_config(**{f"actor_rollout_ref.rollout.{k}": v for k, v in rollout.items()})
    server = ScriptedServer(tokenizer, replies)

    async def go():
        loop = CudaAgentLoop(trainer_config=DictConfigWrap(config), server_manager=server, tokenizer=tokenizer,
                             processor=None, dataset_cls=RLHFDataset, data_config=DictConfigWrap(config.data),
                             pool=pool, judge=judge, trajectory_dir=str(tmp_path / "trajectories"))
        extra_info = {"ref_arch_src": task.source, "task_id": task.name, "index": 0}
        return await loop.run({"temperature": 1.0}, extra_info=extra_info, raw_prompt=[])

    return asyncio.run(go()), server


async def manager_score(manager, tokenizer, task, reply, extra_info=None):
    """``reply`` to ``task``, scored by verl's reward ``manager`` (``run_single``) as one row of a batch."""
    import numpy as np
    import torch
    from verl import DataProto

    ids = tokenizer(reply, add_special_tokens=False)["input_ids"]
    info = extra_info if extra_info is not None else {"ref_arch_src": task.source, "task_id": task.name}
    data = DataProto.from_dict(
        tensors={"responses": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)},
        non_tensors={"data_source": np.array(["cuda_agent/demo"], dtype=object),
                     "reward_model": np.array([{"ground_truth": task.sha256}], dtype=object),
                     "extra_info": np.array([info], dtype=object)})
    return await manager.run_single(data)


def naive_manager(tokenizer, score):
    """verl's naive reward manager around ``score``; made inside the event loop it will run in."""
    from omegaconf import OmegaConf
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

    return NaiveRewardManager(OmegaConf.create({}), tokenizer, score)
