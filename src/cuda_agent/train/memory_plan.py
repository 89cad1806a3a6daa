"""How much memory one GPU needs for a verl stage, estimated before anything is launched.

From the model's ``config.json`` and the stage's composed config, part by part, for the two phases
verl alternates on every GPU (the rollout engine frees its memory while FSDP trains:
``free_cache_engine``):

* **training**, actor and critic on the same GPUs, each fully sharded over all of them: weights,
  gradients and Adam's two moments in fp32, 16 bytes a parameter (the part FSDP offload moves to
  the host is not counted); the hidden state gradient checkpointing keeps at every layer for each
  token of the largest micro-batch (bf16); one layer's working set while it is recomputed (its
  projections and the MLP's three intermediates, bf16); and that micro-batch's logits, in bf16
  and once more in fp32 for the log-softmax (``use_fused_kernels`` avoids that copy; it is counted
  whenever it is off). A micro-batch is the dynamic batch's token budget per GPU, which sequence
  parallelism divides.
* **rollout**: the engine takes ``gpu_memory_utilization`` of the GPU, which must hold its weights
  (bf16, split over tensor parallelism) and the KV cache of one full-length sequence.

It is an estimate, not a measurement: allocator fragmentation, NCCL buffers and the CUDA context
(a few GB) come on top, so a plan is refused above ``FIT_SHARE`` of the GPU.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

GIB = 1024**3
FIT_SHARE = 0.9  # of the GPU's memory a plan may use; the rest is context, NCCL and fragmentation


@dataclass(frozen=True)
class ModelShape:
    hidden: int
    layers: int
    vocab: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    tied: bool

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "ModelShape":
        config = config.get("text_config", config)  # multimodal configs hold the language model's inside
        hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
        return cls(hidden=hidden, layers=int(config["num_hidden_layers"]), vocab=int(config["vocab_size"]),
                   intermediate=int(config.get("intermediate_size") or 4 * hidden), heads=heads,
                   kv_heads=int(config.get("num_key_value_heads") or heads),
                   head_dim=int(config.get("head_dim") or hidden // heads),
                   tied=bool(config.get("tie_word_embeddings", False)))

    @property
    def parameters(self) -> int:
        attention = 2 * self.hidden * self.heads * self.head_dim + 2 * self.hidden * self.kv_heads * self.head_dim
        layer = attention + 3 * self.hidden * self.intermediate + 2 * self.hidden
        return self.vocab * self.hidden * (1 if self.tied else 2) + self.layers * layer

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * 2


def read_shape(model: str) -> tuple[ModelShape | None, str]:
    """The shape of a model on this machine (a directory with config.json), or None and why not."""
    path = Path(model) / "config.json"
    if not path.is_file():
        return None, "the model's config.json is not on this machine (give --model a local directory to have it checked)"
    try:
        return ModelShape.from_config(json.loads(path.read_text())), ""
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        return None, (f"{path} does not give the model's shape ({type(exc).__name__}: {exc}; it needs hidden_size, "
                      "num_hidden_layers, vocab_size and num_attention_heads)")


@dataclass
class Plan:
    gpu_bytes: int
    training: dict[str, int] = field(default_factory=dict)
    rollout: dict[str, int] = field(default_factory=dict)
    rollout_share_bytes: int = 0

    @property
    def training_bytes(self) -> int:
        return sum(self.training.values())

    def problems(self) -> list[str]:
        """What does not fit, each with what to change."""
        found = []
        if self.training_bytes > FIT_SHARE * self.gpu_bytes:
            found.append(
                f"training needs about {self.training_bytes / GIB:.0f} GiB a GPU of {self.gpu_bytes / GIB:.0f} "
                f"GiB (logits {self.training.get('logits', 0) / GIB:.0f}, activations "
                f"{(self.training.get('activations', 0) + self.training.get('layer working set', 0)) / GIB:.0f}, "
                f"model states {self.training.get('model states', 0) / GIB:.0f}): raise --sequence-parallel (it "
                "divides the logits and activations), turn on FSDP offload (actor_rollout_ref.actor.fsdp_config."
                "param_offload=true optimizer_offload=true, and the critic's), or use more GPUs")
        if self.rollout and sum(self.rollout.values()) > self.rollout_share_bytes:
            found.append(
                f"the rollout engine's share ({self.rollout_share_bytes / GIB:.0f} GiB) does not hold its weights "
                f"and one full sequence's KV cache ({sum(self.rollout.values()) / GIB:.0f} GiB): raise "
                "actor_rollout_ref.rollout.gpu_memory_utilization or tensor_model_parallel_size")
        return found

    def rows(self) -> list[tuple[str, str, float]]:
        rows = [("training", part, b / GIB) for part, b in self.training.items()]
        rows.append(("training", "total", self.training_bytes / GIB))
        rows += [("rollout", part, b / GIB) for part, b in self.rollout.items()]
        if self.rollout:
            rows.append(("rollout", f"engine's share ({self.rollout_share_bytes / GIB:.0f} GiB)",
                         sum(self.rollout.values()) / GIB))
        return rows


def _select(config: Any, *keys: str, default: Any = None) -> Any:
    from omegaconf import OmegaConf

    for key in keys:
        value = OmegaConf.select(config, key, default=None)
        if value is not None:
            return value
    return default


def plan(shape: ModelShape, config: Any, gpu_bytes: int, sft: bool = False) -> Plan:
    """The estimate for a composed verl config (``stages.prepare``'s config.yaml, loaded)."""
    gpus = int(_select(config, "trainer.n_gpus_per_node", default=1)) * int(_select(config, "trainer.nnodes", default=1))
    result = Plan(gpu_bytes=gpu_bytes)
    p = shape.parameters
    if sft:
        tokens = int(_select(config, "data.max_token_len_per_gpu", default=8192))
        offload = bool(_select(config, "engine.param_offload", default=False))
        models = [(offload, bool(_select(config, "engine.optimizer_offload", default=False)))]
        fused = False
    else:
        tokens = int(_select(config, "actor_rollout_ref.actor.ppo_max_token_len_per_gpu", default=16384))
        actor = (bool(_select(config, "actor_rollout_ref.actor.fsdp_config.param_offload", default=False)),
                 bool(_select(config, "actor_rollout_ref.actor.fsdp_config.optimizer_offload", default=False)))
        critic = (bool(_select(config, "critic.model.fsdp_config.param_offload", "critic.fsdp.param_offload",
                               default=False)),
                  bool(_select(config, "critic.model.fsdp_config.optimizer_offload", "critic.fsdp.optimizer_offload",
                               default=False)))
        models = [actor] + ([critic] if _select(config, "algorithm.adv_estimator") == "gae" else [])
        fused = bool(_select(config, "actor_rollout_ref.model.use_fused_kernels", default=False))
    # weights + gradients (8 bytes) and Adam's moments (8 bytes), fp32, sharded over every GPU
    states = sum((0 if param_off else 8) + (0 if optim_off else 8) for param_off, optim_off in models) * p
    result.training["model states"] = states // gpus
    result.training["activations"] = tokens * shape.hidden * 2 * shape.layers
    result.training["layer working set"] = tokens * (6 * shape.hidden + 3 * shape.intermediate) * 2
    result.training["logits"] = tokens * shape.vocab * (2 if fused else 6)
    if not sft:
        tp = int(_select(config, "actor_rollout_ref.rollout.tensor_model_parallel_size", default=1))
        share = float(_select(config, "actor_rollout_ref.rollout.gpu_memory_utilization", default=0.5))
        context = int(_select(config, "data.max_prompt_length", default=0)) + int(
            _select(config, "data.max_response_length", default=0))
        result.rollout["weights"] = 2 * p // tp
        result.rollout["KV cache, one full sequence"] = shape.kv_bytes_per_token * context // tp
        result.rollout_share_bytes = int(share * gpu_bytes)
    return result
