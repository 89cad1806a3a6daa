"""`cuda-agent mcp` on the GPU: an MCP client opens a CUDA task, writes the fused_elementwise
example's kernel, judges it, and reads the kernel's roofline, through the real server process and
the real CUDA judge."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU with CUDA (torch.cuda.is_available() is False)", allow_module_level=True)
pytest.importorskip("mcp")

from .test_mcp_server import Client, open_session, text, write_solution  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fused_elementwise"


def test_a_cuda_solution_is_judged_and_its_roofline_drawn(tmp_path, judge_cache):
    client = Client(tmp_path / "root", judge_cache, tmp_path / "server.log", device="cuda")
    try:
        session = open_session(client, task=str(EXAMPLE / "model.py"))["session"]
        write_solution(client, session, EXAMPLE / "cuda")
        result = client.call("judge", {"session": session})
        verdict = result.structured_content
        assert not result.is_error and verdict["status"] == "ok" and verdict["correct"], text(result)
        assert verdict["backend"] == "cuda" and verdict["reward"] >= 2 and verdict["violations"] == []
        roof = client.call("roofline", {"session": session})
        assert not roof.is_error, text(roof)
        assert roof.structured_content["drawn"] is True and roof.structured_content["bound"] in ("memory", "compute")
        assert "candidate" in roof.structured_content["points"] and "of the roofline" in text(roof)
    finally:
        client.close()
