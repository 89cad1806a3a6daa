"""`cuda-agent bench --model`: the agent optimises each problem, and its best solutions are scored."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.servers import OpenAIServer, Reply
from cuda_agent.cli import app

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench"
SOLUTION = FIXTURE / "solutions" / "level1" / "4_Tiny_Tanh"
FILES = ["model_new.py", "kernels/tiny_tanh.cpp", "kernels/tiny_tanh_binding.cpp"]

# The scripted model writes a known-good solution into its workspace, verifies it and finishes.
STEPS = [Reply("Reading the template.", [("read", {"path": "model_new.py"})]),
         Reply("Writing the kernel.", [("write", {"path": f, "content": (SOLUTION / f).read_text()}) for f in FILES]),
         Reply("Checking it.", [("verify", {})]),
         Reply("Done.", [("finish", {"summary": "one fused tanh kernel"})])]


def by_turn(messages, index):
    return STEPS[min(sum(1 for m in messages if m.role == "assistant"), len(STEPS) - 1)]


@pytest.mark.slow
def test_bench_runs_the_agent_and_scores_its_best_solution(tmp_path, judge_cache, fast_timing_file):
    # A name ending in "_", as 23 of KernelBench's level-1 problems do: episodes must land where
    # the bench looks for them.
    checkout = tmp_path / "kb" / "KernelBench" / "level1"
    checkout.mkdir(parents=True)
    shutil.copy(FIXTURE / "KernelBench" / "level1" / "4_Tiny_Tanh.py", checkout / "4_Tiny_Tanh_.py")
    out = tmp_path / "out"
    args = ["bench", "--kernelbench", str(tmp_path / "kb"), "--levels", "1", "--model", "scripted",
            "--out", str(out), "--device", "cpu", "--cache-dir", str(judge_cache), "--timing", str(fast_timing_file)]
    with OpenAIServer(by_turn) as server:
        result = CliRunner().invoke(app, args + ["--base-url", server.url])
    assert result.exit_code == 0, result.output
    assert server.errors == [] and len(server.requests) == 4
    assert (out / "agent" / "level1" / "4_Tiny_Tanh_" / "00" / "best" / "model_new.py").is_file()
    report = json.loads((out / "report.json").read_text())
    (record,) = report["problems"]
    assert record["status"] == "ok" and record["correct"] and record["sample"] == 0
    assert report["label"] == "scripted"
    # A loaded machine may leave the timing or a baseline too noisy to pay for; the speed-up is
    # then withheld and the report row says why. Otherwise it is measured.
    verdict = json.loads((out / record["verdict"]).read_text())
    if verdict["speedup_withheld"] or verdict["compile_speedup_withheld"]:
        assert record["speedup_vs_compile"] is None and record["reward"] in (1, 2)
        assert record["no_speedup"].startswith("no speed-up")
    else:
        assert record["speedup_vs_compile"] > 0

    with OpenAIServer(by_turn) as server:  # again: the episode has ended and its result is recorded
        again = CliRunner().invoke(app, args + ["--base-url", server.url])
    assert again.exit_code == 0, again.output
    assert server.requests == []
