"""The sandbox as TRL's environment: the methods run the agent's tools, and GRPOTrainer takes it."""

from __future__ import annotations

import asyncio
import json

import pytest

from cuda_agent.train.demo import family
from cuda_agent.train.trl_env import KernelToolEnv, environment_factory

pytest.importorskip("trl")


def row(task):
    return {"prompt": [{"role": "user", "content": "optimise"}], "ref_arch_src": task.source, "task_id": task.name}


@pytest.mark.slow
def test_each_method_is_the_agents_tool_and_the_reward_is_the_outcome(train_pool, demo_tasks, tmp_path):
    env = environment_factory(train_pool, tmp_path / "envs", tmp_path / "episodes.jsonl")()
    assert env.reset(**row(demo_tasks[2])) is None

    async def work():
        assert "class ModelNew" in await env.read(path="model_new.py")
        for path, text in family.solution_files("slow").items():
            assert "error" not in (await env.write(path=path, content=text)).lower()
        refused = (await env.write(path="../x.py", content="x")).lower()
        assert "outside" in refused or "workspace" in refused
        return await env.profile()

    report = asyncio.run(work())
    assert "reward 1" in report and env.get_reward() == 1.0
    (entry,) = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert entry["task"] == demo_tasks[2].name and entry["best"]["reward"] == 1
    env.reset(**row(demo_tasks[0]))  # TRL reuses instances: a reset is a fresh workspace
    assert env.get_reward() == -1.0


@pytest.mark.slow
def test_grpo_trainer_exposes_the_tools_and_scores_every_rollout(train_pool, demo_tasks, tmp_path,
                                                                 tiny_tokenizer_dir):
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen2_5_chat_template

    from cuda_agent.train.rows import rl_rows
    from cuda_agent.train.trl_grpo import EPISODES_FILE, GRPOSettings, run_agentic_grpo

    model = tmp_path / "model"
    tokenizer = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    tokenizer.chat_template = qwen2_5_chat_template  # a tool-calling template TRL knows how to parse
    tokenizer.save_pretrained(model)
    for name in ("config.json", "model.safetensors", "generation_config.json"):
        (model / name).write_bytes((tiny_tokenizer_dir / name).read_bytes())
    rows = rl_rows(demo_tasks[:1], mode="agentic", backend="cpu")
    settings = GRPOSettings(steps=1, learning_rate=1e-4, num_generations=2, max_completion_length=24,
                            max_tool_calling_iterations=2, save_steps=10)
    final = run_agentic_grpo(str(model), rows, tmp_path / "out", train_pool, settings, device="cpu")
    assert (final / "config.json").is_file()
    episodes = [json.loads(line) for line in (tmp_path / "out" / EPISODES_FILE).read_text().splitlines()]
    assert len(episodes) == 2 and all(e["reward"] == -1.0 for e in episodes)  # random weights solve nothing
    assert not list((tmp_path / "out" / "envs").iterdir())  # each rollout's workspace went when it ended


def test_grpo_shows_the_model_the_tools_rft_trained_it_on():
    # TRL makes each tool's schema from the method's signature and docstring (transformers'
    # get_json_schema); RFT's rows carry the tools' own schemas. Same names, text and arguments.
    from transformers.utils import get_json_schema

    from cuda_agent.train.rows import tool_schemas

    tools = {s["function"]["name"]: s["function"] for s in tool_schemas()}
    methods = {n for n in dir(KernelToolEnv) if not n.startswith("_") and n not in ("reset", "get_reward")}
    assert methods == set(tools)
    for name, ours in tools.items():
        theirs = get_json_schema(getattr(KernelToolEnv, name))["function"]
        assert theirs["description"] == " ".join(ours["description"].split())
        want = ours["parameters"].get("properties", {})
        got = theirs["parameters"].get("properties", {})
        assert list(got) == list(want), name
        assert {k: v["description"] for k, v in got.items()} == {k: " ".join(v["description"].split())
                                                                for k, v in want.items()}, name
        assert set(theirs["parameters"].get("required", [])) == set(ours["parameters"].get("required", [])), name


def test_grpo_trains_with_the_papers_objective(tmp_path):
    from cuda_agent.train.trl_grpo import GRPOSettings, grpo_config

    config = grpo_config(tmp_path, GRPOSettings(), "cpu")
    # per-sequence mean of token losses, then the mean over sequences (verl's seq-mean-token-mean),
    # clip 0.2 / 0.28, no KL, the actor's learning rate
    assert config.loss_type == "grpo"
    assert (config.epsilon, config.epsilon_high, config.beta, config.learning_rate) == (0.2, 0.28, 0.0, 3e-6)
    assert config.num_generations == 8
