"""The verl side, against verl's real code: stage configs composed from its own YAML, the agent
loop on a scripted server manager, its datasets and its naive reward manager."""

from __future__ import annotations

import asyncio
import functools
import json

import pytest

pytest.importorskip("verl")

from cuda_agent.train.demo import family  # noqa: E402
from cuda_agent.train.extras import TrainError  # noqa: E402
from cuda_agent.train.rft import find_trajectories, rft_rows  # noqa: E402
from cuda_agent.train.rows import rl_rows, write_parquet  # noqa: E402
from cuda_agent.train.stages import (PPO_MODULE, SFT_MODULE, TRAINING_STAGES, StageOptions, compose, prepare,  # noqa: E402
                                     stage_settings)

from .verl_parts import PPO_OVERRIDES, manager_score, naive_manager, ppo_config, run_loop, tool_call  # noqa: E402

def options(stage, tmp_path, **kw):
    return StageOptions(stage=stage, model="Qwen/Qwen2.5-0.5B-Instruct", data=str(tmp_path / "rows.parquet"),
                        out=tmp_path, resume_from=str(tmp_path / "value" / "checkpoints" / "global_step_20"), **kw)


@pytest.mark.parametrize("stage", TRAINING_STAGES)
def test_every_stage_composes_against_verls_own_config(stage, tmp_path):
    argv, directory = prepare(options(stage, tmp_path))
    config = (directory / "config.yaml").read_text()
    module, settings = stage_settings(options(stage, tmp_path))
    assert module in argv and (directory / "command.sh").is_file()
    if module == PPO_MODULE:
        assert "adv_estimator: gae" in config and "lam: 0.95" in config and "clip_ratio_high: 0.28" in config
        assert "loss_agg_mode: seq-mean-token-mean" in config and "lr: 3.0e-06" in config and "lr: 6.0e-06" in config
        assert "use_kl_loss: false" in config
        # the train/inference mismatch correction the paper's collapse called for, on
        assert "rollout_is: token" in config and "rollout_is_threshold: 2.0" in config
        assert "calculate_log_probs: true" in config
    if stage in ("collect", "value", "agentic"):
        assert settings["actor_rollout_ref.rollout.multi_turn.max_assistant_turns"] == 150
        assert settings["actor_rollout_ref.rollout.max_model_len"] == 131_072
        loops = (directory / "agent_loops.yaml").read_text()
        assert "cuda_agent.train.verl_loop.CudaAgentLoop" in loops
        assert ("run_id" in loops) == (stage == "collect")  # a rerun of collection replaces its trajectories
    if stage == "value":  # verl updates the actor once critic_warmup <= the step (counted from 1)
        assert settings["trainer.critic_warmup"] == settings["trainer.total_training_steps"] + 1 > 1
    if stage == "rft":
        assert module == SFT_MODULE and settings["data.custom_cls.name"] == "RFTDataset"


def composed(stage, tmp_path, **kw):
    from omegaconf import OmegaConf

    _, directory = prepare(options(stage, tmp_path, **kw))
    return OmegaConf.load(directory / "config.yaml")


@pytest.mark.parametrize("sp", [1, 4])
def test_dynamic_batch_token_budgets_hold_a_whole_sequence(sp, tmp_path):
    # verl asserts budget x sequence-parallel size >= the longest sequence
    for stage, context in (("warmup", 32_768), ("value", 131_072)):
        c = composed(stage, tmp_path / stage, sequence_parallel=sp)
        budgets = [c.actor_rollout_ref.actor.ppo_max_token_len_per_gpu,
                   c.actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu,
                   c.actor_rollout_ref.ref.log_prob_max_token_len_per_gpu,
                   c.critic.ppo_max_token_len_per_gpu, c.critic.forward_max_token_len_per_gpu]
        assert all(b * sp >= context for b in budgets), budgets
        assert c.data.max_prompt_length + c.data.max_response_length == context
        assert c.actor_rollout_ref.actor.ulysses_sequence_parallel_size == c.critic.ulysses_sequence_parallel_size == sp
    sft = composed("rft", tmp_path / "rft", sequence_parallel=sp)
    assert sft.data.max_token_len_per_gpu * sp >= sft.data.max_length == 131_072
    assert sft.engine.ulysses_sequence_parallel_size == sp


def test_value_and_agentic_stages_run_their_steps_whatever_the_dataset_size(tmp_path):
    value = composed("value", tmp_path, critic_warmup_steps=20)
    assert value.trainer.total_training_steps == 20 and value.trainer.critic_warmup == 21
    agentic = composed("agentic", tmp_path)  # resumes from global_step_20: the paper's 150 steps after it
    assert agentic.trainer.total_training_steps == 20 + 150
    assert value.trainer.total_epochs > 1000 and agentic.trainer.total_epochs > 1000


def test_agentic_reruns_resume_from_their_own_checkpoint(tmp_path):
    first = composed("agentic", tmp_path)
    assert first.trainer.resume_mode == "resume_path" and first.trainer.resume_from_path.endswith("global_step_20")
    checkpoints = tmp_path / "agentic" / "checkpoints"
    checkpoints.mkdir(parents=True)
    (checkpoints / "latest_checkpointed_iteration.txt").write_text("30")
    assert composed("agentic", tmp_path).trainer.resume_mode == "auto"
    with pytest.raises(TrainError, match="global_step_N"):
        stage_settings(StageOptions(stage="agentic", model="m", data="d", resume_from="/x/checkpoints"))


def test_validation_is_on_held_out_rows_only_and_checkpoints_are_bounded(tmp_path):
    bare = composed("warmup", tmp_path / "bare")
    assert bare.trainer.val_before_train is False and bare.trainer.test_freq == -1  # no held-out rows: none
    held = composed("agentic", tmp_path / "held", val_data=str(tmp_path / "val.parquet"), val_every=5,
                    keep_checkpoints=2, loggers=("console", "tensorboard"))
    assert held.data.val_files == str(tmp_path / "val.parquet") and held.data.train_files.endswith("rows.parquet")
    assert held.trainer.val_before_train is True and held.trainer.test_freq == 5
    assert held.trainer.max_actor_ckpt_to_keep == held.trainer.max_critic_ckpt_to_keep == 2
    assert list(held.trainer.logger) == ["console", "tensorboard"]
    # collecting is validation: its episodes run on the rows it collects from, whatever is held out
    collect = composed("collect", tmp_path / "collect", val_data=str(tmp_path / "val.parquet"))
    assert collect.data.val_files == collect.data.train_files and collect.trainer.val_only is True
    assert collect.trainer.val_before_train is True
    assert composed("rft", tmp_path / "rft", keep_checkpoints=4).trainer.max_ckpt_to_keep == 4


QWEN25_7B = {"hidden_size": 3584, "num_hidden_layers": 28, "vocab_size": 152064, "intermediate_size": 18944,
             "num_attention_heads": 28, "num_key_value_heads": 4, "tie_word_embeddings": False}


def test_the_memory_plan_refuses_a_layout_that_cannot_fit_and_says_what_to_change(tmp_path):
    from cuda_agent.train import memory_plan

    gib = memory_plan.GIB
    shape = memory_plan.ModelShape.from_config(QWEN25_7B)
    assert 7.6e9 < shape.parameters < 7.62e9  # Qwen2.5-7B: 7.62B, of which the biases are not counted
    default = memory_plan.plan(shape, composed("agentic", tmp_path / "sp1"), 80 * gib)
    # one full-length sequence a GPU: its logits alone, bf16 and the fp32 log-softmax, are 111 GiB
    assert default.training["logits"] == 131_072 * 152_064 * 6
    (problem,) = default.problems()
    assert "--sequence-parallel" in problem and "offload" in problem
    split = memory_plan.plan(shape, composed("agentic", tmp_path / "sp8", sequence_parallel=8), 80 * gib)
    assert split.problems() == [] and split.training_bytes < 0.9 * 80 * gib
    # actor and critic, weights, gradients and Adam in fp32, sharded over the 8 GPUs
    assert split.training["model states"] == 32 * shape.parameters // 8
    assert split.rollout["weights"] == 2 * shape.parameters // 2  # bf16 over verl's tensor parallel of 2
    rft = memory_plan.plan(shape, composed("rft", tmp_path / "rft", sequence_parallel=8), 80 * gib, sft=True)
    assert rft.training["model states"] == 16 * shape.parameters // 8 and not rft.rollout


def test_the_dry_run_prints_the_memory_estimate_and_refuses_what_cannot_fit(tmp_path, fixtures_dir):
    from typer.testing import CliRunner

    from cuda_agent.cli import app

    model = tmp_path / "qwen-7b-shaped"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(QWEN25_7B))
    rows = tmp_path / "rows.parquet"
    write_parquet(rl_rows(family.tasks(), mode="agentic", backend="cpu"), rows)

    def dry_run(*args):
        return CliRunner().invoke(app, ["train", "value", "--model", str(model), "--data", str(rows), "--out",
                                        str(tmp_path / "runs"), "--dry-run", *args])

    refused = dry_run()
    assert refused.exit_code != 0 and "does not fit" in str(refused.exception)
    assert "logits" in refused.stdout  # the table, then why
    fits = dry_run("--sequence-parallel", "8")
    assert fits.exit_code == 0, fits.output
    assert "memory per GPU, estimated: 7.62B parameters" in fits.stdout


@pytest.fixture
def seven_b(tmp_path):
    """A directory holding a Qwen2.5-7B-shaped config.json, and agentic rows."""
    model = tmp_path / "qwen-7b-shaped"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(QWEN25_7B))
    rows = tmp_path / "rows.parquet"
    write_parquet(rl_rows(family.tasks(), mode="agentic", backend="cpu"), rows)
    return model, rows


def _train_dry_run(stage, model, rows, out, *args):
    from typer.testing import CliRunner

    from cuda_agent.cli import app

    return CliRunner().invoke(app, ["train", stage, "--model", str(model), "--data", str(rows), "--out", str(out),
                                    "--resume-from", str(out / "value" / "checkpoints" / "global_step_20"),
                                    "--dry-run", *args])


@pytest.mark.parametrize("profile", ["node8", "nodes4"])
def test_each_launch_profile_composes_and_fits_a_7b_model(profile, seven_b, tmp_path):
    # agentic: the PPO stages' keys (warmup, collect and value compose the same ones) at the longest
    # context; rft: the SFT trainer's.
    from omegaconf import OmegaConf

    from cuda_agent.train import memory_plan
    from cuda_agent.train.profiles import PROFILES

    model, rows = seven_b
    chosen, shape = PROFILES[profile], memory_plan.ModelShape.from_config(QWEN25_7B)
    for stage in ("agentic", "rft"):
        result = _train_dry_run(stage, model, rows, tmp_path / "runs", "--profile", profile)
        assert result.exit_code == 0, result.output
        assert "memoryperGPU,estimated:7.62Bparameters" in "".join(result.stdout.split())  # rich wraps it
        config = OmegaConf.load(tmp_path / "runs" / stage / "config.yaml")
        estimate = memory_plan.plan(shape, config, 80 * memory_plan.GIB, sft=stage == "rft")
        assert estimate.problems() == [] and estimate.training_bytes < 0.6 * 80 * memory_plan.GIB
        if stage == "rft":
            assert config.engine.optimizer_offload is True
            continue
        assert (config.trainer.n_gpus_per_node, config.trainer.nnodes) == (chosen.gpus_per_node, chosen.nodes)
        assert config.actor_rollout_ref.actor.ulysses_sequence_parallel_size == chosen.sequence_parallel
        assert config.actor_rollout_ref.actor.fsdp_config.optimizer_offload is True
        assert config.critic.fsdp.optimizer_offload is True
        judge = config.reward.custom_reward_function.reward_kwargs
        assert judge.get("pool", "local") == chosen.judge_pool and judge.get("ray_resource") == chosen.judge_ray_resource


def test_flags_and_overrides_given_win_over_the_profile(seven_b, tmp_path):
    from omegaconf import OmegaConf

    model, rows = seven_b
    result = _train_dry_run("agentic", model, rows, tmp_path / "runs", "--profile", "nodes4", "--sequence-parallel",
                            "8", "--judge-pool", "local", "actor_rollout_ref.rollout.gpu_memory_utilization=0.7")
    assert result.exit_code == 0, result.output
    config = OmegaConf.load(tmp_path / "runs" / "agentic" / "config.yaml")
    assert config.actor_rollout_ref.actor.ulysses_sequence_parallel_size == 8 and config.trainer.nnodes == 4
    assert config.actor_rollout_ref.rollout.gpu_memory_utilization == 0.7
    assert "pool" not in config.reward.custom_reward_function.reward_kwargs  # the judges beside the workers
    assert "The judges will time kernels on the GPUs that hold the rollout engine" in result.stderr


def test_the_reward_function_gets_the_judge_settings_and_a_log(tmp_path):
    c = composed("warmup", tmp_path, judge_backend="cpu", judge_concurrency=16, judge_cache_dir=str(tmp_path / "c"))
    kwargs = c.reward.custom_reward_function.reward_kwargs
    assert kwargs.backend == "cpu" and kwargs.concurrency == 16 and kwargs.cache_dir == str(tmp_path / "c")
    assert kwargs.log_path == str(tmp_path / "warmup" / "rewards.jsonl")
    loops = (tmp_path / "warmup" / "agent_loops.yaml").read_text()
    assert "cache_dir" in loops and "concurrency: 16" in loops


def test_a_wrong_key_fails_before_anything_runs():
    with pytest.raises(TrainError, match="rejects"):
        compose(PPO_MODULE, PPO_OVERRIDES + ["algorithm.lamda=0.95"])
    with pytest.raises(TrainError, match="value stage"):
        stage_settings(StageOptions(stage="agentic", model="m", data="d"))
    with pytest.raises(TrainError, match="--data"):
        stage_settings(StageOptions(stage="warmup", model="m"))


def test_rows_load_with_rlhf_dataset(tmp_path, tokenizer, demo_tasks):
    from verl.utils.dataset.rl_dataset import RLHFDataset

    for mode in ("single_turn", "agentic"):
        path = write_parquet(rl_rows(demo_tasks, mode=mode, backend="cpu"), tmp_path / f"{mode}.parquet")
        config = ppo_config(**{"data.max_prompt_length": 100000}).data
        dataset = RLHFDataset([str(path)], tokenizer, config)
        item = dataset[1]
        assert len(dataset) == len(demo_tasks)
        assert item["agent_name"] == ("cuda_agent" if mode == "agentic" else "single_turn_agent")
        assert item["raw_prompt"][1]["role"] == "user" and demo_tasks[1].name in item["raw_prompt"][1]["content"]
        assert item["extra_info"]["ref_arch_src"] == demo_tasks[1].source
        assert item["tools_kwargs"]["cuda_agent"]["create_kwargs"]["task_id"] == demo_tasks[1].name


def spans(mask):
    """[(value, length), ...] of the runs in a mask."""
    runs = []
    for value in mask:
        if runs and runs[-1][0] == value:
            runs[-1][1] += 1
        else:
            runs.append([value, 1])
    return [tuple(r) for r in runs]


def test_agent_loop_masks_tool_tokens_stops_at_the_turn_limit_and_logs_the_trajectory(tokenizer, train_pool,
                                                                                       tmp_path, demo_tasks):
    replies = [tool_call("read", {"path": "model.py"}), tool_call("glob", {"pattern": "*"}),
               tool_call("read", {"path": "SKILL.md"})]
    output, server = run_loop(tokenizer, train_pool, replies, tmp_path, demo_tasks[0],
                              **{"multi_turn.max_assistant_turns": 2, "response_length": 60000})
    generated = [len(tokenizer(r + "<|im_end|>", add_special_tokens=False)["input_ids"]) for r in replies[:2]]
    layout = spans(output.response_mask)
    assert len(server.requests) == 2  # the limit stopped it after two turns
    assert layout[0] == (1, generated[0]) and layout[1][0] == 0 and layout[2][0] == 1
    assert sum(n for v, n in layout if v == 1) == sum(generated)
    assert len(output.response_ids) == len(output.response_mask) == len(output.response_logprobs)
    # the tool tokens hold the file the model read
    start = layout[0][1]
    assert "class Model" in tokenizer.decode(output.response_ids[start:start + layout[1][1]])
    assert output.reward_score == -1.0 and output.extra_fields["stop_reason"] == "max_turns"
    (log,) = (tmp_path / "trajectories").glob("*.jsonl")
    entry = json.loads(log.read_text())
    assert entry["response_ids"] == output.response_ids and entry["response_mask"] == output.response_mask
    assert [t["reply"]["tool_calls"][0]["function"]["name"] for t in entry["turns"]] == ["read", "glob"]
    assert "class Model" in entry["turns"][0]["observation"][0]["content"]
    assert [m["role"] for m in entry["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    rows, report = rft_rows(find_trajectories([tmp_path / "trajectories"]))
    assert rows == [] and report.dropped["budget_overrun"] == 1  # the turn limit cut it: no RFT row


def test_the_loop_reads_the_tool_call_format_it_is_given(tokenizer, train_pool, tmp_path, demo_tasks):
    from cuda_agent.train.verl_loop import tool_parser

    xml = "<tool_call>\n<function=read>\n<parameter=path>\nmodel.py\n</parameter>\n</function>\n</tool_call>"
    settings = {"multi_turn.max_assistant_turns": 2, "response_length": 60000}
    run_loop(tokenizer, train_pool, [xml], tmp_path / "xml", demo_tasks[0],
             **{"multi_turn.format": "qwen3_coder", **settings})
    entry = json.loads(next((tmp_path / "xml" / "trajectories").glob("*.jsonl")).read_text())
    assert entry["turns"][0]["reply"]["tool_calls"][0]["function"]["name"] == "read"
    assert "class Model" in entry["turns"][0]["observation"][0]["content"]
    # read as hermes, the same reply is a malformed call, which comes back to the model as an error
    run_loop(tokenizer, train_pool, [xml], tmp_path / "hermes", demo_tasks[0], **settings)
    entry = json.loads(next((tmp_path / "hermes" / "trajectories").glob("*.jsonl")).read_text())
    assert entry["turns"][0]["reply"]["tool_calls"][0]["function"]["name"] == ""
    assert "class Model" not in entry["turns"][0]["observation"][0]["content"]
    with pytest.raises(TrainError, match="unknown tool-call format 'nope'.*qwen3_coder"):
        tool_parser("nope", tokenizer)


def verl_returns(response_mask, reward, response_length):
    """The returns verl's GAE gives a response's generated tokens (gamma 1, lambda 0.95, the
    paper's; values 0), with the reward where verl's agent loop puts it: on the response's last
    token (``AgentLoopWorker._postprocess``, ``rm_scores`` at the attention mask's last position)."""
    import torch
    from verl.trainer.ppo.core_algos import compute_gae_advantage_return

    n = len(response_mask)
    mask, rewards = torch.zeros(1, response_length), torch.zeros(1, response_length)
    mask[0, :n] = torch.tensor(response_mask, dtype=torch.float32)
    rewards[0, n - 1] = reward
    _, returns = compute_gae_advantage_return(rewards, torch.zeros(1, response_length), mask, torch.tensor(1.0),
                                              torch.tensor(0.95))
    return returns[0, :n][mask[0, :n].bool()]


def test_a_trajectory_cut_inside_a_tool_output_keeps_its_reward(tokenizer, train_pool, tmp_path, demo_tasks):
    replies = [tool_call("read", {"path": "model.py"}), tool_call("glob", {"pattern": "*"})]
    generated = len(tokenizer(replies[0] + "<|im_end|>", add_special_tokens=False)["input_ids"])
    length = generated + 40  # the file the model reads is longer: the budget runs out inside its text
    output, server = run_loop(tokenizer, train_pool, replies, tmp_path / "cut", demo_tasks[0],
                              **{"response_length": length})
    assert output.extra_fields["stop_reason"] == "max_response_length" and len(server.requests) == 1
    # the response ends on the last token the model generated, and the reward reaches every one
    assert output.response_mask == [1] * generated
    assert len(output.response_ids) == len(output.response_logprobs) == generated
    returns = verl_returns(output.response_mask, output.reward_score, length)
    assert output.reward_score == -1.0 and float(returns[-1]) == -1.0 and bool((returns < 0).all())
    # had it ended inside the tool's output, verl's GAE would have given every token a return of 0
    lost = verl_returns(output.response_mask + [0] * (length - generated), output.reward_score, length)
    assert bool((lost == 0).all())
    # a trajectory the turn limit ended, untruncated, scores the same way
    whole, _ = run_loop(tokenizer, train_pool, replies, tmp_path / "whole", demo_tasks[0],
                        **{"multi_turn.max_assistant_turns": 2, "response_length": 60000})
    assert whole.response_mask[-1] == 1 and whole.extra_fields["stop_reason"] == "max_turns"
    returns = verl_returns(whole.response_mask, whole.reward_score, 60000)
    assert float(returns[-1]) == -1.0 and bool((returns < 0).all())


@pytest.mark.slow
def test_agent_loop_scores_the_best_solution_with_the_judge(tokenizer, train_pool, tmp_path, demo_tasks):
    files = family.solution_files("fast")
    first = tool_call("read", {"path": "model_new.py"}) + "".join(
        tool_call("write", {"path": p, "content": t}) for p, t in files.items()) + tool_call("profile", {})
    output, _ = run_loop(tokenizer, train_pool, [first, tool_call("finish", {})], tmp_path, demo_tasks[1],
                         **{"response_length": 60000})
    assert output.reward_score == 3.0 and output.extra_fields["best"]["reward"] == 3
    assert output.extra_fields["stop_reason"] == "finished"
    entry = json.loads(next((tmp_path / "trajectories").glob("*.jsonl")).read_text())
    assert entry["turns"][0]["verdicts"][0]["reward"] == 3 and entry["best"]["files"] == files
    (row,), report = rft_rows(find_trajectories([tmp_path / "trajectories"]))  # the loop's log feeds RFT
    assert report.kept == 1 and row["reward"] == 3.0
    assert [m["role"] for m in row["messages"]][-2:] == ["tool", "assistant"]  # the profile result, then finish


@pytest.mark.slow
def test_compute_score_through_verls_naive_reward_manager(tokenizer, train_pool, demo_tasks):
    from cuda_agent.train.pools import register_pool
    from cuda_agent.train.verl_reward import compute_score

    from .conftest import files_reply

    register_pool({"backend": "cpu", "concurrency": 2}, train_pool)
    score = functools.partial(compute_score, backend="cpu", concurrency=2)
    task = demo_tasks[2]

    async def judge(reply):
        return await manager_score(naive_manager(tokenizer, score), tokenizer, task, reply)

    slow = asyncio.run(judge(files_reply(family.solution_files("slow"))))
    assert slow["reward_score"] == 1.0 and slow["reward_extra_info"]["status"] == "ok"
    bad = asyncio.run(judge("no code here"))
    assert bad["reward_score"] == -1.0 and "no usable solution" in bad["reward_extra_info"]["reason"]


class InstantPool:
    """A judge pool that accepts every solution at once with reward 3 (the reward's batching, not the judge)."""

    backend = "cpu"

    async def evaluate(self, task, solution, stage):
        from cuda_agent.judge.verdict import Verdict

        return Verdict(status="ok", correct=True, reward=3, reward_continuous=40.0, speedup_vs_eager=40.0,
                       speedup_vs_compile=41.0, stage="profile")


def test_compute_score_keys_are_the_same_for_every_outcome_so_a_mixed_batch_assembles(tokenizer, demo_tasks):
    import numpy as np

    from cuda_agent.train.pools import register_pool
    from cuda_agent.train.verl_reward import compute_score

    from .conftest import files_reply

    register_pool({"backend": "cpu", "concurrency": 3}, InstantPool())
    score = functools.partial(compute_score, backend="cpu", concurrency=3)
    task = demo_tasks[0]

    info = {"ref_arch_src": task.source, "task_id": task.name}
    replies = [(files_reply(family.solution_files("fast")), info), ("no code here", info),
               ("no code here", {"task_id": "lost"}), (files_reply(family.solution_files("fast")), {
                   "ref_arch_src": "x = 1\n", "task_id": "broken"})]

    async def batch(items):
        manager = naive_manager(tokenizer, score)  # binds the running loop
        return await asyncio.gather(*(manager_score(manager, tokenizer, task, r, i) for r, i in items))

    for order in (replies, replies[::-1]):  # a judged reply first, and a failed one first
        outputs = asyncio.run(batch(order))
        infos = [o["reward_extra_info"] for o in outputs]
        # what verl's reward loop does with a batch (RewardLoopManager.compute_rm_score)
        keys = list(infos[0].keys())
        fields = {key: np.array([info[key] for info in infos]) for key in keys}
        assert all(set(i) == set(keys) for i in infos)
        assert all(v is not None for i in infos for v in i.values())
        assert fields["status"].dtype.kind == "U" and fields["speedup_vs_compile"].dtype.kind == "f"
    by_status = {i["status"]: o["reward_score"] for o, i in zip(outputs, infos)}
    assert by_status == {"ok": 3.0, "no_solution": -1.0, "no_task": -1.0} and len(outputs) == 4
