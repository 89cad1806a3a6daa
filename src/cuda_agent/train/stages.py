"""The paper's four stages (§3.3, §4.1) as verl runs: their settings, the command, the config.

    warmup   single-turn PPO from the base model (actor and critic), 32k context
    collect  the warm-up model in the agent loop, validation only: K trajectories per task, logged
             exactly for RFT (then ``cuda-agent train rft-data``)
    rft      rejection fine-tuning with verl's SFT trainer on the filtered trajectories
    value    agentic PPO with the critic alone learning (``trainer.critic_warmup``): value
             pretraining on fresh rollouts of the RFT policy, critic initialised from the RFT model
    agentic  agentic PPO, continuing the value run's checkpoint (actor and pretrained critic)

Every hyperparameter the paper states is set explicitly, since verl's defaults differ: GAE with
gamma 1 and lambda 0.95, clip 0.2 / 0.28, ``seq-mean-token-mean``, actor and critic learning rates
3e-6 and 6e-6, no KL term, one update per batch (mini-batch = batch), 150 turns and 128k context
in the agentic stages. ``compose`` checks every override against verl's own ``ppo_trainer.yaml``
(or ``sft_trainer_engine.yaml``), so a wrong key fails here rather than on a cluster.
"""

from __future__ import annotations

import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import paper
from .extras import TrainError, require
from .rows import AGENT_NAME

TRAINING_STAGES = ("warmup", "collect", "rft", "value", "agentic")
PPO_MODULE = "verl.trainer.main_ppo"
SFT_MODULE = "verl.trainer.sft_trainer"
SINGLE_TURN_CONTEXT = paper.SINGLE_TURN_CONTEXT_TOKENS
AGENTIC_CONTEXT = paper.CONTEXT_TOKENS
AGENTIC_STEPS = paper.AGENTIC_RL_STEPS
LOOP_FILE = "agent_loops.yaml"
REWARD_LOG = "rewards.jsonl"
LATEST = "latest_checkpointed_iteration.txt"   # verl's marker of a run's newest checkpoint
# verl's loop ends at whichever comes first, the epochs or trainer.total_training_steps: stages
# that count steps give it epochs enough never to be the limit.
UNBOUNDED_EPOCHS = 1_000_000

PAPER_PPO = {
    "algorithm.adv_estimator": "gae",
    "algorithm.gamma": 1.0,
    "algorithm.lam": 0.95,
    "algorithm.use_kl_in_reward": False,
    "actor_rollout_ref.actor.clip_ratio_low": 0.2,
    "actor_rollout_ref.actor.clip_ratio_high": 0.28,
    "actor_rollout_ref.actor.loss_agg_mode": "seq-mean-token-mean",
    "actor_rollout_ref.actor.optim.lr": 3e-6,
    "actor_rollout_ref.actor.use_kl_loss": False,
    "actor_rollout_ref.actor.entropy_coeff": 0.0,
    "actor_rollout_ref.actor.ppo_epochs": 1,
    "critic.optim.lr": 6e-6,
    # The paper's first agentic run collapsed on the train/inference mismatch: CUDA tokens are rare,
    # and near a probability of 1e-9 the rollout engine's and FSDP's log-probabilities part, so the
    # ratio swings. Token-level importance weights against the rollout's own log-probabilities,
    # truncated at 2, correct for it (verl's rollout_correction; calculate_log_probs records them).
    "algorithm.rollout_correction.rollout_is": "token",
    "algorithm.rollout_correction.rollout_is_threshold": 2.0,
}


@dataclass
class StageOptions:
    stage: str
    model: str                           # the actor's starting point (an HF model path or id)
    data: str | None = None              # rows (Parquet): RL rows, or RFT rows for the rft stage
    val_data: str | None = None          # held-out RL rows: validated before training and every val_every steps
    val_every: int = 10
    keep_checkpoints: int = 3            # newest checkpoints kept (actor and critic; the RFT model's)
    loggers: tuple[str, ...] = ("console",)   # verl's trainer.logger: console, tensorboard, wandb
    out: Path = Path("train-runs")
    critic: str | None = None            # the critic's starting point (default: the model)
    resume_from: str | None = None       # agentic: the value stage's checkpoint folder
    batch_size: int = 1024               # prompts per PPO step (the paper's 1024; its unit is unstated)
    rollout_n: int = 1                   # samples per prompt
    collect_samples: int = 8             # collect: trajectories per task
    critic_warmup_steps: int = 20        # value: steps in which only the critic learns
    agentic_steps: int = AGENTIC_STEPS   # agentic: PPO steps after the value stage's
    epochs: int = 1
    rft_epochs: int = 2
    rft_lr: float = 1e-5
    gpus_per_node: int = 8
    nodes: int = 1
    sequence_parallel: int = 1           # Ulysses sequence-parallel size (GPUs sharing one sequence)
    rollout: str = "vllm"                # vllm or sglang
    tool_format: str = "hermes"          # the model's tool-call format, for verl's parsers
    judge_backend: str = "cuda"
    reward_kind: str = "milestone"      # what the reward pays (agent.env.REWARD_FIELDS)
    judge_concurrency: int = 4
    judge_cache_dir: str | None = None
    judge_pool: str = "local"            # local: judges beside each verl worker; ray: actors of the cluster
    judge_ray_resource: str | None = None   # with the ray pool: the custom resource judge nodes carry
    extra: list[str] = field(default_factory=list)   # further Hydra overrides, passed through

    @property
    def directory(self) -> Path:
        return Path(self.out).resolve() / self.stage


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_value(v) for v in value) + "]"
    return str(value)


def overrides_of(settings: dict[str, Any]) -> list[str]:
    return [f"{key}={_value(value)}" for key, value in settings.items()]


def reward_function_path() -> str:
    return str(Path(__file__).resolve().with_name("verl_reward.py"))


def judge_settings(options: StageOptions) -> dict[str, Any]:
    """The judge pool's settings (``pools.judge_pool``), for the agent loop and the reward."""
    settings: dict[str, Any] = {"backend": options.judge_backend, "concurrency": options.judge_concurrency}
    if options.judge_cache_dir:
        settings["cache_dir"] = str(Path(options.judge_cache_dir).resolve())
    if options.judge_pool != "local":
        settings["pool"] = options.judge_pool  # inside verl's workers Ray is already joined
        if options.judge_ray_resource:
            settings["ray_resource"] = options.judge_ray_resource
    return settings


def agent_loop_config(options: StageOptions) -> list[dict[str, Any]]:
    """The file that registers the agent loop with verl, with the judge and logging settings.

    The collect stage's runs are numbered (``run_id``, in time order): verl cannot resume a
    validation-only run, so a rerun samples every task again, and the RFT builder keeps only the
    newest run's trajectories of each task instead of counting both."""
    config = {"name": AGENT_NAME, "_target_": "cuda_agent.train.verl_loop.CudaAgentLoop",
              "judge": judge_settings(options), "reward_kind": options.reward_kind,
              "trajectory_dir": str(options.directory / "trajectories"),
              "workspace_root": str(options.directory / "workspaces")}
    if options.stage == "collect":
        config["run_id"] = f"{time.time_ns():020d}"
    return [config]


def _common(options: StageOptions) -> dict[str, Any]:
    d = options.directory
    return {
        "trainer.project_name": "cuda-agent", "trainer.experiment_name": options.stage,
        "trainer.default_local_dir": str(d / "checkpoints"), "trainer.n_gpus_per_node": options.gpus_per_node,
        "trainer.nnodes": options.nodes, "trainer.logger": list(options.loggers),
    }


def tokens_per_gpu(context: int, sequence_parallel: int) -> int:
    """Dynamic batching's token budget per GPU: verl asserts that one sequence fits, that is
    budget x sequence-parallel size >= the longest sequence, so its defaults (16k, 8k for SFT)
    fail on 32k and 128k sequences."""
    if sequence_parallel < 1:
        raise TrainError(f"the sequence-parallel size must be at least 1, not {sequence_parallel}")
    return math.ceil(context / sequence_parallel)


def _long_context(options: StageOptions, context: int) -> dict[str, Any]:
    tokens, sp = tokens_per_gpu(context, options.sequence_parallel), options.sequence_parallel
    settings: dict[str, Any] = {
        "actor_rollout_ref.actor.use_dynamic_bsz": True, "critic.use_dynamic_bsz": True,
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz": True,
        "actor_rollout_ref.ref.log_prob_use_dynamic_bsz": True,
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": tokens,
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu": tokens,
        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu": tokens,
        "critic.ppo_max_token_len_per_gpu": tokens, "critic.forward_max_token_len_per_gpu": tokens,
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size": sp,
        "actor_rollout_ref.ref.ulysses_sequence_parallel_size": sp,
        "critic.ulysses_sequence_parallel_size": sp,
    }
    if sp > 1:  # Ulysses works on unpadded sequences
        settings.update({"actor_rollout_ref.model.use_remove_padding": True,
                         "critic.model.use_remove_padding": True})
    return settings


def reward_kwargs(options: StageOptions) -> dict[str, Any]:
    """``reward.custom_reward_function.reward_kwargs``: verl_reward.compute_score's settings."""
    return {**judge_settings(options), "kind": options.reward_kind, "log_path": str(options.directory / REWARD_LOG)}


def resume_step(path: str) -> int:
    """N of a verl checkpoint folder ``.../global_step_N``."""
    match = re.search(r"global_step_(\d+)/?$", str(path))
    if not match:
        raise TrainError(f"--resume-from must be a verl checkpoint folder named global_step_N, not {path}")
    return int(match.group(1))


def _ppo(options: StageOptions, *, agentic: bool) -> dict[str, Any]:
    context = AGENTIC_CONTEXT if agentic else SINGLE_TURN_CONTEXT
    prompt = 16_384 if agentic else 8_192
    settings: dict[str, Any] = {
        **PAPER_PPO, **_common(options),
        "data.train_files": options.data, "data.val_files": options.val_data or options.data,
        # validation: on held-out rows only, before training and every val_every steps; without them
        # none (verl's default ran full greedy episodes of the whole training set before step one,
        # at every stage and restart, and never again)
        "trainer.val_before_train": bool(options.val_data),
        "trainer.test_freq": options.val_every if options.val_data else -1,
        "trainer.max_actor_ckpt_to_keep": options.keep_checkpoints,
        "trainer.max_critic_ckpt_to_keep": options.keep_checkpoints,
        "data.train_batch_size": options.batch_size, "data.max_prompt_length": prompt,
        "data.max_response_length": context - prompt, "data.return_raw_chat": True,
        "actor_rollout_ref.model.path": options.model, "critic.model.path": options.critic or options.model,
        "actor_rollout_ref.actor.ppo_mini_batch_size": options.batch_size,   # one update per batch
        **_long_context(options, context),
        "actor_rollout_ref.rollout.name": options.rollout, "actor_rollout_ref.rollout.n": options.rollout_n,
        "actor_rollout_ref.rollout.max_model_len": context, "actor_rollout_ref.rollout.calculate_log_probs": True,
        "reward.custom_reward_function.path": reward_function_path(),
        "reward.custom_reward_function.name": "compute_score",
        **{f"+reward.custom_reward_function.reward_kwargs.{k}": v for k, v in reward_kwargs(options).items()},
        "trainer.total_epochs": options.epochs, "trainer.save_freq": 10,
    }
    if agentic:
        settings.update({
            "actor_rollout_ref.rollout.multi_turn.enable": True,
            "actor_rollout_ref.rollout.multi_turn.max_assistant_turns": paper.TRAINING_TURNS,
            "actor_rollout_ref.rollout.multi_turn.format": options.tool_format,
            "actor_rollout_ref.rollout.agent.agent_loop_config_path": str(options.directory / LOOP_FILE),
            "actor_rollout_ref.rollout.agent.default_agent_loop": AGENT_NAME,
        })
    return settings


def stage_settings(options: StageOptions) -> tuple[str, dict[str, Any]]:
    """(the verl module to run, its Hydra overrides) for ``options.stage``."""
    if options.stage not in TRAINING_STAGES:
        raise TrainError(f"unknown stage {options.stage!r}; the stages are {', '.join(TRAINING_STAGES)}")
    if not options.data:
        raise TrainError(f"the {options.stage} stage needs --data: rows built by `cuda-agent train data` "
                         "(or `cuda-agent train rft-data` for rft)")
    if options.stage == "rft":
        return SFT_MODULE, {
            **_common(options), "data.train_files": options.data, "data.messages_key": "messages",
            "data.tools_key": "tools", "data.max_length": AGENTIC_CONTEXT, "data.truncation": "error",
            "data.pad_mode": "no_padding", "data.use_dynamic_bsz": True,
            "data.max_token_len_per_gpu": tokens_per_gpu(AGENTIC_CONTEXT, options.sequence_parallel),
            "engine.ulysses_sequence_parallel_size": options.sequence_parallel,
            "data.custom_cls.path": str(Path(__file__).resolve().with_name("verl_sft_dataset.py")),
            "data.custom_cls.name": "RFTDataset",
            "model.path": options.model, "optim.lr": options.rft_lr, "trainer.total_epochs": options.rft_epochs,
            "checkpoint.save_contents": ["model", "optimizer", "extra", "hf_model"],
            "trainer.max_ckpt_to_keep": options.keep_checkpoints,
        }
    settings = _ppo(options, agentic=options.stage != "warmup")
    if options.stage == "warmup":
        settings["actor_rollout_ref.rollout.agent.default_agent_loop"] = "single_turn_agent"
    elif options.stage == "collect":
        settings.update({"trainer.val_only": True, "trainer.val_before_train": True,  # the episodes are validation's
                         "data.val_files": options.data,
                         "actor_rollout_ref.rollout.val_kwargs.n": options.collect_samples,
                         "actor_rollout_ref.rollout.val_kwargs.temperature": 1.0,
                         "actor_rollout_ref.rollout.val_kwargs.do_sample": True})
    elif options.stage == "value":
        # verl counts steps from 1 and updates the actor once critic_warmup <= the step: a warm-up
        # of N steps, all of them the critic's alone, is critic_warmup N + 1 with N steps in all.
        steps = options.critic_warmup_steps
        settings.update({"trainer.critic_warmup": steps + 1, "trainer.total_training_steps": steps,
                         "trainer.total_epochs": UNBOUNDED_EPOCHS, "trainer.save_freq": steps})
    elif options.stage == "agentic":
        if not options.resume_from:
            raise TrainError("the agentic stage continues the value stage: give --resume-from with its "
                             "checkpoint folder (OUT/value/checkpoints/global_step_N)")
        # Resuming sets verl's step counter to the value run's N, so the paper's steps come after it.
        settings.update({"trainer.total_training_steps": resume_step(options.resume_from) + options.agentic_steps,
                         "trainer.total_epochs": UNBOUNDED_EPOCHS})
        if (options.directory / "checkpoints" / LATEST).is_file():
            settings["trainer.resume_mode"] = "auto"   # a rerun goes on from this stage's own newest checkpoint
        else:
            settings.update({"trainer.resume_mode": "resume_path", "trainer.resume_from_path": options.resume_from})
    return PPO_MODULE, settings


def verl_installed() -> bool:
    try:
        require("verl")
    except TrainError:
        return False
    return True


def config_dir() -> Path:
    verl = require("verl")
    return Path(verl.__file__).resolve().parent / "trainer" / "config"


def compose(module: str, overrides: list[str]) -> Any:
    """The full config verl would run, composed from its own YAML; a wrong key raises here."""
    require("hydra")
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    name = "sft_trainer_engine" if module == SFT_MODULE else "ppo_trainer"
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
            return hydra_compose(config_name=name, overrides=overrides)
    except Exception as exc:  # hydra raises several types for a bad override
        raise TrainError(f"verl rejects this configuration: {exc}") from None
    finally:
        GlobalHydra.instance().clear()


def command(options: StageOptions) -> tuple[list[str], list[str]]:
    """(the command line, the overrides in it)."""
    module, settings = stage_settings(options)
    overrides = overrides_of(settings) + list(options.extra)
    if module == SFT_MODULE:
        launcher = ["torchrun", f"--nnodes={options.nodes}", f"--nproc_per_node={options.gpus_per_node}", "-m"]
    else:
        launcher = ["python3", "-m"]
    return launcher + [module] + overrides, overrides


def prepare(options: StageOptions) -> tuple[list[str], Path]:
    """Check the stage's config against verl, write it and the agent-loop file; return the command."""
    argv, overrides = command(options)
    module = SFT_MODULE if options.stage == "rft" else PPO_MODULE
    d = options.directory
    d.mkdir(parents=True, exist_ok=True)
    if module == PPO_MODULE:
        yaml = require("yaml")
        (d / LOOP_FILE).write_text(yaml.safe_dump(agent_loop_config(options), sort_keys=False))
    config = compose(module, overrides)
    from omegaconf import OmegaConf

    (d / "config.yaml").write_text(OmegaConf.to_yaml(config, resolve=False))
    (d / "command.sh").write_text("#!/usr/bin/env bash\n" + " \\\n  ".join(_quote(a) for a in argv) + "\n")
    return argv, d


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


def gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def run(argv: list[str], directory: Path) -> int:
    """Run the stage's command, its output teed into ``directory/run.log``; verl resumes from its
    newest checkpoint when the same command runs again (``trainer.resume_mode=auto``)."""
    import subprocess

    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with open(directory / "run.log", "a") as log:
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        assert process.stdout is not None
        for line in process.stdout:
            log.write(line)
            print(line, end="")
        return process.wait()
