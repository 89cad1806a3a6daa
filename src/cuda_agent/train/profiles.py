"""Launch profiles: layouts for the verl stages at the paper's 128k context that a 7B model fits in.

A profile sets the layout flags (GPUs per node, nodes, sequence parallelism, where the judges run)
and the Hydra overrides that memory needs (FSDP offload, the rollout engine's share and tensor
parallelism). Flags given on the command line win over the profile's, and Hydra overrides given
after the options win over its overrides. Every profile is checked in the tests: composed against
verl's own config and estimated by ``memory_plan`` for a Qwen2.5-7B-shaped model on 80 GB GPUs.

Set beside the public 8-GPU verl kernel-RL recipe of Dr. Kernel (KernelGYM; an 8B model, 18k
tokens, 3 turns): Ulysses sequence parallelism 4, rollout tensor parallelism 1, the rollout
engine at 0.75 of the GPU, actor weights and optimizer offloaded, its kernels graded on servers
apart from the training GPUs. The paper's 128k tokens and 150 turns need more sequence
parallelism than that (the logits of one 128k sequence are 111 GiB), so ``node8`` splits each
sequence over all eight GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .extras import TrainError

# What keeps the training phase of a 7B model well inside an 80 GB GPU at 16k-32k tokens a GPU: the
# optimizer's fp32 moments of actor and critic on the host (the estimate's largest movable part);
# and a rollout engine on each GPU (tensor parallelism 1), as a 7B model fits one. What the profiles
# differ in beside it is the rollout engine's share of the GPU.
_PPO_MEMORY = {
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload": True,
    "critic.fsdp.optimizer_offload": True,
    "actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
}
_ROLLOUT_SHARE = "actor_rollout_ref.rollout.gpu_memory_utilization"
_SFT_MEMORY = {"engine.optimizer_offload": True}  # the rft stage: the same offload, in sft_trainer's name


@dataclass(frozen=True)
class LaunchProfile:
    name: str
    summary: str
    gpus_per_node: int
    nodes: int
    sequence_parallel: int
    judge_pool: str                     # local: beside each verl worker; ray: actors on judge nodes
    judge_ray_resource: str | None      # with the ray pool: the resource only judge nodes carry
    overrides: dict[str, Any] = field(default_factory=dict)       # the PPO stages' (main_ppo)
    sft_overrides: dict[str, Any] = field(default_factory=dict)   # the rft stage's (sft_trainer)
    judges: str = ""                    # where the judges run, in words, for the docs and the command

    def hydra_overrides(self, stage: str) -> list[str]:
        from .stages import overrides_of

        return overrides_of(self.sft_overrides if stage == "rft" else self.overrides)


PROFILES: dict[str, LaunchProfile] = {
    "node8": LaunchProfile(
        name="node8", summary="one node of eight 80 GB GPUs, a model of up to 7-8B",
        gpus_per_node=8, nodes=1, sequence_parallel=8, judge_pool="local", judge_ray_resource=None,
        overrides={**_PPO_MEMORY, _ROLLOUT_SHARE: 0.5}, sft_overrides=_SFT_MEMORY,
        judges="on the node's own GPUs, beside training (one node has no others): timings vary with training's "
               "load and an unsteady one is paid no speedup; add a GPU machine as a judge node to move them off"),
    "nodes4": LaunchProfile(
        name="nodes4", summary="four nodes of eight 80 GB GPUs, a model of up to 7-8B, judges on nodes of their own",
        gpus_per_node=8, nodes=4, sequence_parallel=4, judge_pool="ray", judge_ray_resource="judge",
        overrides={**_PPO_MEMORY, _ROLLOUT_SHARE: 0.6}, sft_overrides=_SFT_MEMORY,
        judges="on the cluster's judge nodes, apart from the 32 training GPUs: start each with "
               "`ray start --address HEAD:6379 --num-gpus N --resources '{\"judge\": N}'`"),
}


def get_profile(name: str) -> LaunchProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise TrainError(f"no launch profile {name!r}; there are {', '.join(PROFILES)} (docs/training.md)") from None
