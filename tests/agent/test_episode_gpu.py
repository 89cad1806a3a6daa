"""A scripted episode on the CUDA backend: the loop drives the real judge on a real GPU.

The scripted model writes the fused_elementwise example's CUDA kernel with a mistake, compiles
(an error comes back), fixes it, verifies, profiles and finishes; the exported best solution must
be correct and faster than eager PyTorch, as the example is (against torch.compile, which fuses the
same chain, it is near 1x and on some GPUs below: an H200 measured 0.96x).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU with CUDA (torch.cuda.is_available() is False)", allow_module_level=True)

from cuda_agent.llm import make_client  # noqa: E402
from cuda_agent.agent.env import EnvSettings  # noqa: E402
from cuda_agent.agent.loop import AgentSettings, Episode  # noqa: E402
from cuda_agent.cluster import LocalJudgePool  # noqa: E402
from cuda_agent.device import probe_device  # noqa: E402
from cuda_agent.task import load_task  # noqa: E402

from .conftest import FAST_RETRY  # noqa: E402
from .servers import OpenAIServer, Reply  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fused_elementwise"


def test_scripted_cuda_episode_finds_a_faster_kernel(judge_config, tmp_path):
    files = {str(p.relative_to(EXAMPLE / "cuda")): p.read_text() for p in (EXAMPLE / "cuda").rglob("*") if p.is_file()}
    kernel = next(name for name in files if name.endswith(".cu"))
    broken = files[kernel].replace("__global__", "__global__ undeclared_macro", 1)
    script = [
        Reply("Reading the task.", [("read", {"path": "model.py"}), ("read", {"path": "model_new.py"})]),
        Reply("Writing the kernel.", [("write", {"path": kernel, "content": broken})]
              + [("write", {"path": name, "content": text}) for name, text in files.items() if name != kernel]),
        Reply("", [("compile", {})]),
        Reply("Fixing it.", [("edit", {"path": kernel, "old_string": "__global__ undeclared_macro",
                                       "new_string": "__global__"})]),
        Reply("", [("compile", {})]),
        Reply("", [("verify", {})]),
        Reply("", [("profile", {})]),
        Reply("Done.", [("finish", {})]),
    ]
    task = load_task(EXAMPLE / "model.py")
    with LocalJudgePool(judge_config(backend="cuda")) as pool, OpenAIServer(script) as server:
        client = make_client("openai", "scripted-model", base_url=server.url, api_key="test-key", retry=FAST_RETRY)
        episode = Episode(task, client, pool, tmp_path / "episode", device=probe_device("cuda"),
                          settings=AgentSettings(EnvSettings(max_turns=20)))

        async def play():
            try:
                return await episode.run()
            finally:
                await client.aclose()

        result = asyncio.run(play())
    assert server.errors == []
    assert result.stop_reason == "finished", result.error
    assert result.best["stage"] == "profile" and result.best["correct"]
    assert result.best["speedup_vs_eager"] > 1.0 and result.best["reward"] >= 2
    assert (result.directory / "best" / kernel).read_text() == files[kernel]
