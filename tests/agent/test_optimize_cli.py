"""`cuda-agent optimize` and `cuda-agent replay` from the command line, against a scripted server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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

    # `replay ... | head`: the reader goes away before the view is printed; the HTML is still written
    cut = tmp_path / "cut.html"
    proc = subprocess.Popen([sys.executable, "-m", "cuda_agent.cli", "replay", str(trajectories[1]), "--html",
                             str(cut)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    _, errors = proc.communicate(timeout=300)
    assert proc.returncode == 0 and b"Traceback" not in errors, errors.decode()
    assert "stopped early" in cut.read_text()

    # another task into the same OUT: the summary keeps the first run's episodes
    other = tmp_path / "other_task.py"
    other.write_text(Path(task.origin).read_text())
    with OpenAIServer(by_turn) as server:
        more = CliRunner().invoke(app, [*args[:1], str(other), *args[2:4], "--episodes", "1", *args[6:],
                                        "--base-url", server.url])
    assert more.exit_code == 0, more.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 4 and summary["stop_reasons"] == {"finished": 4}
    assert sorted({r["task"] for r in summary["results"]}) == sorted({task.name, "other_task"})


def test_optimize_explains_a_bad_provider(tmp_path, task):
    result = CliRunner().invoke(app, ["optimize", task.origin, "--model", "m", "--provider", "nope",
                                      "--out", str(tmp_path / "o"), "--device", "cpu"])
    assert result.exit_code != 0
    assert "nope" in str(result.exception) and "anthropic" in str(result.exception)
