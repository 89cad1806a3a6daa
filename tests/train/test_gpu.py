"""On a GPU: the demo family's CUDA solutions through the environment and the CUDA judge."""

from __future__ import annotations

import asyncio
import json

import pytest
import torch

from cuda_agent.agent.env import KernelEnv
from cuda_agent.llm.messages import Message, ToolCall
from cuda_agent.cluster import LocalJudgePool
from cuda_agent.train.demo import family
from cuda_agent.train.demo.run import demo_judge_config

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with CUDA")]


@pytest.mark.parametrize("kind, reward", [("fast", 3.0), ("slow", 1.0)])
def test_cuda_solutions_score_as_the_demo_expects(kind, reward, tmp_path):
    calls = [ToolCall("c0", "read", json.dumps({"path": "model_new.py"}))]
    calls += [ToolCall(f"c{i + 1}", "write", json.dumps({"path": p, "content": t}))
              for i, (p, t) in enumerate(family.solution_files(kind, "cuda").items())]
    calls.append(ToolCall("p", "profile", "{}"))

    async def play(pool):
        with KernelEnv(pool, tmp_path / kind) as env:
            env.reset(family.tasks()[0])
            await env.step(Message("assistant", "", calls))
            done = await env.step(Message("assistant", "", [ToolCall("f", "finish", "{}")]))
            return done.reward, env.best.verdict if env.best else None

    with LocalJudgePool(demo_judge_config(tmp_path / "cache", "cuda"), max_concurrent=1) as pool:
        got, verdict = asyncio.run(play(pool))
    # On a mismatch, the verdict says why (a speedup withheld, and the reason, say)
    assert got == reward, json.dumps({k: (verdict or {}).get(k) for k in (
        "status", "speedup_vs_eager", "speedup_vs_compile", "speedup_withheld", "timings", "feedback")}, default=str)[:3000]
