"""On a GPU: verl's parts that run without a rollout engine, paid by the CUDA judge. The
``cuda_agent`` loop on a scripted server manager with its judges made from verl's settings, and
``compute_score`` through verl's naive reward manager, both on the demo's CUDA kernels (a fast
one-block-per-row reduction, a slow insertion sort)."""

from __future__ import annotations

import asyncio
import functools
import json

import pytest
import torch

pytest.importorskip("verl")

from cuda_agent.train.demo import family  # noqa: E402
from cuda_agent.train.rft import find_trajectories, rft_rows  # noqa: E402

from .conftest import files_reply  # noqa: E402
from .verl_parts import manager_score, naive_manager, run_loop, tool_call  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with CUDA")]


def test_the_loop_pays_the_cuda_kernel_it_wrote_with_judges_made_from_verls_settings(tokenizer, tmp_path, demo_tasks):
    files = family.solution_files("fast", "cuda")
    first = tool_call("read", {"path": "model_new.py"}) + "".join(
        tool_call("write", {"path": p, "content": t}) for p, t in files.items()) + tool_call("profile", {})
    judge = {"backend": "cuda", "concurrency": 1, "cache_dir": str(tmp_path / "cache")}  # agent_loops.yaml's `judge`
    output, _ = run_loop(tokenizer, None, [first, tool_call("finish", {})], tmp_path, demo_tasks[0], judge=judge,
                         **{"response_length": 60000})
    best = output.extra_fields["best"]
    assert output.reward_score == 3.0, json.dumps(best, default=str)[:3000]
    assert output.extra_fields["stop_reason"] == "finished" and best["reward"] == 3
    entry = json.loads(next((tmp_path / "trajectories").glob("*.jsonl")).read_text())
    verdict = entry["turns"][0]["verdicts"][0]
    assert verdict["backend"] == "cuda" and verdict["speedup_vs_compile"] > 1
    (row,), report = rft_rows(find_trajectories([tmp_path / "trajectories"]))  # the GPU run feeds RFT too
    assert report.kept == 1 and row["reward"] == 3.0


def test_compute_score_pays_cuda_verdicts_through_verls_naive_reward_manager(tokenizer, tmp_path, demo_tasks):
    from cuda_agent.train.verl_reward import compute_score

    # the reward's own judge pool, made from reward_kwargs as verl passes them
    score = functools.partial(compute_score, backend="cuda", concurrency=1, cache_dir=str(tmp_path / "cache"),
                              log_path=str(tmp_path / "rewards.jsonl"))
    task = demo_tasks[0]

    async def judge(reply):
        return await manager_score(naive_manager(tokenizer, score), tokenizer, task, reply)

    got = {kind: asyncio.run(judge(files_reply(family.solution_files(kind, "cuda")))) for kind in ("fast", "slow")}
    fields = {kind: out["reward_extra_info"] for kind, out in got.items()}
    assert got["fast"]["reward_score"] == 3.0, json.dumps(fields["fast"], default=str)
    assert got["slow"]["reward_score"] == 1.0, json.dumps(fields["slow"], default=str)
    assert fields["fast"]["status"] == "ok" and fields["fast"]["speedup_vs_compile"] > 1
    assert fields["slow"]["correct"] and fields["slow"]["speedup_vs_eager"] < 1
    logged = [json.loads(line) for line in (tmp_path / "rewards.jsonl").read_text().splitlines()]
    assert [entry["score"] for entry in logged] == [3.0, 1.0]
