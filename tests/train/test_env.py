"""KernelEnv: reset and step as Gymnasium has them, on the real cpu judge."""

from __future__ import annotations

import asyncio
import json

import pytest

from cuda_agent.agent.env import NUDGE, EnvSettings, KernelEnv
from cuda_agent.llm.messages import Message, ToolCall


def reply(*calls):
    return Message("assistant", "", [ToolCall(f"c{i}", name, json.dumps(args)) for i, (name, args) in enumerate(calls)])


def write_calls(files):
    return [("read", {"path": "model_new.py"})] + [("write", {"path": p, "content": t}) for p, t in files.items()]


@pytest.mark.slow
def test_finish_terminates_with_the_best_solutions_reward(train_pool, demo_tasks, tmp_path):
    from cuda_agent.train.demo import family

    async def play():
        with KernelEnv(train_pool, tmp_path / "env") as env:
            opening, info = env.reset(demo_tasks[0], seed=7)
            assert [m.role for m in opening] == ["system", "user"] and info["seed"] == 7
            assert {t["function"]["name"] for t in info["tools"]} >= {"write", "profile", "finish"}
            first = await env.step(reply(*write_calls(family.solution_files("fast")), ("profile", {})))
            assert not first.done and first.reward == 0.0
            assert "reward 3" in first.observation[-1].content
            last = await env.step(reply(("finish", {})))
            return first, last, env

    first, last, env = asyncio.run(play())
    assert last.terminated and not last.truncated and last.info["stop_reason"] == "finished"
    assert last.reward == 3.0 and env.best.verdict["reward"] == 3


def test_budget_truncates_and_no_solution_scores_minus_one(train_pool, demo_tasks, tmp_path):
    async def play():
        env = KernelEnv(train_pool, tmp_path / "env", settings=EnvSettings(max_turns=2))
        env.reset(demo_tasks[0])
        steps = [await env.step(Message("assistant", "thinking")), await env.step(reply(("read", {"path": "model.py"})))]
        env.close()
        return steps

    nudged, last = asyncio.run(play())
    assert nudged.observation[0].content == NUDGE and not nudged.done
    assert last.truncated and not last.terminated and last.info["stop_reason"] == "max_turns"
    assert last.reward == -1.0
    assert (tmp_path / "env" / "workspace").is_dir()  # a directory given by the caller stays


def test_an_ended_episode_takes_no_more_steps_and_a_temporary_one_is_removed(train_pool, demo_tasks):
    async def play():
        env = KernelEnv(train_pool)
        env.reset(demo_tasks[1])
        done = await env.step(reply(("finish", {})))
        with pytest.raises(RuntimeError, match="ended"):
            await env.step(reply(("finish", {})))
        env.close()
        return env, done

    env, done = asyncio.run(play())
    assert done.terminated and not env.directory.exists()
