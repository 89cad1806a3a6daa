"""`cuda-agent optimize` and `cuda-agent replay` from the command line, against a scripted server."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from cuda_agent.cli import app

from .servers import OpenAIServer, Reply

TASK_STEPS = [Reply("Looking.", [("read", {"path": "model.py"}), ("glob", {"pattern": "*.py"})]),
              Reply("Nothing to do here.", [("finish", {"summary": "stopped early"})])]


def by_turn(messages, index):
    """Each episode gets the same replies, picked by how many it has had."""
    return TASK_STEPS[min(sum(1 for m in messages if m.role == "assistant"), len(TASK_STEPS) - 1)]


def test_optimize_runs_episodes_writes_a_summary_and_resumes(tmp_path, judge_cache, task):
    out = tmp_path / "runs"
    args = ["optimize", task.origin, "--model", "scripted", "--episodes", "3", "--concurrency", "3",
            "--out", str(out), "--device", "cpu", "--cache-dir", str(judge_cache), "--quiet"]
    with OpenAIServer(by_turn) as server:
        result = CliRunner().invoke(app, args + ["--base-url", server.url])
    assert result.exit_code == 0, result.output
    assert server.errors == [] and len(server.requests) == 6
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 3 and summary["stop_reasons"] == {"finished": 3}
    assert summary["usage"]["input_tokens"] > 0
    trajectories = sorted(out.glob("*/*/trajectory.jsonl"))
    assert len(trajectories) == 3

    with OpenAIServer(by_turn) as server:  # the same command again: every episode has ended
        again = CliRunner().invoke(app, args + ["--base-url", server.url])
    assert again.exit_code == 0, again.output
    assert server.requests == []

    html = tmp_path / "one.html"
    shown = CliRunner().invoke(app, ["replay", str(trajectories[0]), "--html", str(html)])
    assert shown.exit_code == 0 and "stopped early" in shown.stdout
    assert html.read_text().startswith("<!DOCTYPE html>") or "<html" in html.read_text()


def test_optimize_explains_a_bad_provider(tmp_path, task):
    result = CliRunner().invoke(app, ["optimize", task.origin, "--model", "m", "--provider", "nope",
                                      "--out", str(tmp_path / "o"), "--device", "cpu"])
    assert result.exit_code != 0
    assert "nope" in str(result.exception) and "anthropic" in str(result.exception)
