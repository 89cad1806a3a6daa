"""The agent loop end to end: real HTTP servers on loopback, the real SDKs, the real judge (cpu).

Each test scripts what the "model" replies, one reply per request, and asserts what the loop did
with it: the tool results it fed back, the verdicts, the budgets, the trajectory, the best
solution it exported.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cuda_agent.agent.context import ELIDED, ContextBudget
from cuda_agent.agent.env import EnvSettings
from cuda_agent.agent.loop import CUT_OFF, NUDGE, Episode, EpisodeError
from cuda_agent.agent.tools.base import ToolLimits
from cuda_agent.agent.trajectory import load_trajectory
from cuda_agent.cli import app

from .servers import AnthropicServer, Delay, HttpError, OpenAIServer, Reply

KERNEL, BINDING, MODEL_NEW = "kernels/scale_bias_relu.cpp", "kernels/scale_bias_relu_binding.cpp", "model_new.py"


def tool_events(result):
    return [e for e in load_trajectory(result.directory / "trajectory.jsonl").events if e["type"] == "tool"]


def by_name(events, name):
    return [e for e in events if e["call"]["name"] == name]


@pytest.mark.slow
# The profile must come back correct: beside another test process's builds and training, a CI run
# saw this honest kernel's profile come back not correct (the assertion did not say why; a timing
# refused as not credible is the likeliest: the judge cannot always tell load from hidden work).
# The tests that need an honest profile believed run alone.
@pytest.mark.timing
def test_openai_episode_writes_compiles_fixes_verifies_profiles_and_exports(run_episode, correct_files, tmp_path,
                                                                         judge_cache, fast_timing_file):
    broken = correct_files[KERNEL].replace("yr[c] = v > 0.0f ? v : 0.0f;", "yr[c] = v > 0.0f ? v : 0.0f  // BROKEN")
    assert broken != correct_files[KERNEL]
    script = [
        Reply("Let me look at the task.", [("read", {"path": "model.py"}), ("glob", {"pattern": "**/*"})]),
        HttpError(429, "slow down", retry_after=0.01),
        Reply("", [("write", {"path": KERNEL, "content": broken}),
                   ("write", {"path": BINDING, "content": correct_files[BINDING]}),
                   ("read", {"path": MODEL_NEW})]),
        Reply("", [("write", {"path": MODEL_NEW, "content": correct_files[MODEL_NEW]})]),
        Reply("", [("compile", {})]),
        HttpError(500, "overloaded"),
        Reply("Missing semicolon.", [("edit", {"path": KERNEL, "old_string": "0.0f  // BROKEN",
                                               "new_string": "0.0f;"})]),
        Reply("", [("no_such_tool", {}), ("read", '{"path": "model.py"'), ("edit", {"path": "model.py"}),
                   ("write", {"path": "../outside.txt", "content": "x"}),
                   ("write", {"path": "model.py", "content": "x"})]),
        Reply("", [("compile", {})]),
        Reply("", [("verify", {})]),
        Reply("", [("profile", {})]),
        Reply("Done.", [("finish", {"summary": "fused scale, bias and relu"})]),
    ]
    with OpenAIServer(script) as server:
        result = run_episode(server)
    assert server.errors == []
    assert len(server.requests) == len(script)
    assert result.stop_reason == "finished" and result.turns == 10

    events = tool_events(result)
    compiles = by_name(events, "compile")
    assert compiles[0]["verdict"]["status"] == "compile_error" and compiles[0]["is_error"]
    assert "error" in compiles[0]["message"]["content"].lower()
    assert compiles[1]["verdict"]["status"] == "ok"
    assert by_name(events, "verify")[0]["verdict"]["correct"] is True
    profile = by_name(events, "profile")[0]["verdict"]
    # Under load the judge may not believe the time and keep its measured ratio aside, unpaid.
    unpaid = profile["timing_integrity"].get("unpaid_speedups", {})
    assert profile["correct"], (profile["status"], profile["error"], profile["notes"])
    assert (profile["speedup_vs_compile"] or unpaid["compile"]) > 0, profile["timing_integrity"]

    # The malformed calls came back as errors the model can act on, and the episode went on.
    bad = {e["call"]["name"] + ":" + e["call"]["arguments"][:12]: e for e in events if e["turn"] == 6}
    assert all(e["is_error"] for e in bad.values()) and len(bad) == 5
    texts = [e["message"]["content"].lower() for e in events if e["turn"] == 6]
    assert "no_such_tool" in texts[0] and "read" in texts[0]  # names the tools there are
    assert "json" in texts[1]
    assert "old_string" in texts[2]
    assert "outside" in texts[3] or "workspace" in texts[3]
    assert "protected" in texts[4]
    assert (result.directory / "workspace" / "model.py").read_text() != "x"

    # The model saw every tool result, in order, with the ids it used.
    last = server.conversations[-1]
    calls = [c.id for m in last if m.role == "assistant" for c in m.tool_calls]
    answers = [m.tool_call_id for m in last if m.role == "tool"]
    assert calls == answers and len(calls) == 16

    trajectory = load_trajectory(result.directory / "trajectory.jsonl")
    retries = [e["retries"] for e in trajectory.events if e["type"] == "message" and e["message"]["role"] == "assistant"]
    assert sum(retries) == 2
    # A profile whose speedup the judge kept aside ranks no higher than the verify before it.
    timed = "profile" if profile["speedup_vs_compile"] is not None else "verify"
    assert trajectory.end["stop_reason"] == "finished" and trajectory.best["stage"] == timed
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0

    best = result.directory / "best"
    assert (best / KERNEL).read_text() == correct_files[KERNEL]
    runner = CliRunner()
    judged = runner.invoke(app, ["judge", str(result.directory / "workspace" / "model.py"), str(best),
                                 "--device", "cpu", "--json", "--timing", str(fast_timing_file),
                                 "--cache-dir", str(judge_cache)])
    assert judged.exit_code == 0, judged.output
    assert json.loads(judged.stdout[judged.stdout.index("{"):])["correct"] is True

    html = tmp_path / "view.html"
    shown = runner.invoke(app, ["replay", str(result.directory), "--html", str(html)])
    assert shown.exit_code == 0, shown.output
    assert "finished" in shown.stdout and html.read_text().count("scale_bias_relu") > 0


@pytest.mark.slow
def test_anthropic_episode_verifies_and_exports(run_episode, correct_files):
    script = [
        Reply("Writing the kernel.", [("write", {"path": path, "content": text}) for path, text in
                                      [(KERNEL, correct_files[KERNEL]), (BINDING, correct_files[BINDING])]]),
        Reply("", [("read", {"path": MODEL_NEW})]),
        HttpError(529, "overloaded"),
        Reply("", [("write", {"path": MODEL_NEW, "content": correct_files[MODEL_NEW]}), ("compile", {})]),
        Reply("", [("verify", {})]),
        Reply("Correct.", [("finish", {})]),
    ]
    with AnthropicServer(script) as server:
        result = run_episode(server, provider="anthropic")
    assert server.errors == []
    assert result.stop_reason == "finished"
    assert result.best["stage"] == "verify" and result.best["correct"]
    assert (result.directory / "best" / MODEL_NEW).read_text() == correct_files[MODEL_NEW]
    # Anthropic's wire format: the system prompt went in `system`, tool results as tool_result blocks.
    assert "SKILL" in json.dumps(server.requests[0].get("system")) or server.requests[0].get("system")
    assert any(m.role == "tool" for m in server.conversations[-1])


def test_turn_limit_stops_the_episode(run_episode):
    script = [Reply(f"turn {i}", [("read", {"path": "model.py"})]) for i in range(5)]
    with OpenAIServer(script) as server:
        result = run_episode(server, env=EnvSettings(max_turns=3))
    assert result.stop_reason == "max_turns" and result.turns == 3
    assert len(server.requests) == 3
    assert load_trajectory(result.directory / "trajectory.jsonl").end["stop_reason"] == "max_turns"


def test_replies_without_tool_calls_are_nudged_then_stop(run_episode):
    script = [Reply("I think it is fine."), Reply("Still thinking.", finish_reason="length"), Reply("Yes.")]
    with OpenAIServer(script) as server:
        result = run_episode(server, env=EnvSettings(max_idle_turns=3))
    assert result.stop_reason == "no_tool_calls" and result.turns == 3
    user_turns = [m.content for m in server.conversations[-1] if m.role == "user"]
    assert NUDGE in user_turns and CUT_OFF in user_turns


def test_repeated_failed_calls_stop_the_episode(run_episode):
    script = [Reply("", [("frobnicate", {})]) for _ in range(4)]
    with OpenAIServer(script) as server:
        result = run_episode(server, env=EnvSettings(max_failed_turns=3))
    assert result.stop_reason == "repeated_failure" and result.turns == 3


def test_a_tool_that_times_out_is_reported_and_the_episode_goes_on(run_episode):
    script = [Reply("", [("bash", {"command": "sleep 30; echo never"})]), Reply("ok", [("finish", {})])]
    with OpenAIServer(script) as server:
        result = run_episode(server, env=EnvSettings(tool_limits=ToolLimits(bash_timeout_s=0.5)))
    assert result.stop_reason == "finished"
    (bash,) = by_name(tool_events(result), "bash")
    assert bash["is_error"] and "timed out" in bash["message"]["content"]
    assert "never" not in bash["message"]["content"]
    assert result.elapsed_s < 20


def test_old_tool_output_is_elided_to_fit_the_context(run_episode):
    # The prompt and tool schemas take about 7k tokens; five reads of SKILL.md, each cut to about
    # 2.5k tokens, cannot all fit in a 15k window, so the oldest are elided.
    script = [Reply("", [("read", {"path": "SKILL.md"})]) for _ in range(5)] + [Reply("", [("finish", {})])]
    with OpenAIServer(script) as server:
        result = run_episode(server, context=ContextBudget(window=16_000, reserve=1_000, max_tool_tokens=2_500))
    assert result.stop_reason == "finished"
    notes = [e for e in load_trajectory(result.directory / "trajectory.jsonl").events if e["type"] == "note"]
    assert any(n["kind"] == "context_elided" for n in notes)
    contents = [m.content for m in server.conversations[-1] if m.role == "tool"]
    assert len(contents) == 5
    assert contents[0].startswith(ELIDED.split("(")[0]) and not contents[-1].startswith("[older")
    assert "characters cut from the middle" in contents[-1]
    # the trajectory records the cap the tools' outputs were cut to, the context's, not the default
    header = load_trajectory(result.directory / "trajectory.jsonl").header
    assert header["settings"]["env"]["max_tool_chars"] == ContextBudget(max_tool_tokens=2_500).max_tool_chars
    assert header["settings"]["context"]["max_tool_tokens"] == 2_500


def test_a_context_error_from_the_server_elides_and_retries(run_episode):
    script = [Reply("", [("read", {"path": "SKILL.md"})]), Reply("", [("read", {"path": "model.py"})]),
              HttpError(400, "This model's maximum context length is 4096 tokens. However, you requested 9000 tokens."),
              Reply("", [("finish", {})])]
    with OpenAIServer(script) as server:
        result = run_episode(server)
    assert server.errors == [] and result.stop_reason == "finished"
    retried = server.conversations[-1]
    assert [m for m in retried if m.role == "tool"][0].content.startswith("[older tool output elided")


def test_a_window_too_small_for_the_prompt_stops_before_asking(run_episode):
    with OpenAIServer([Reply("", [("finish", {})])]) as server:
        result = run_episode(server, context=ContextBudget(window=600, reserve=100))
    assert result.stop_reason == "context_exhausted" and server.requests == []


def test_an_unreachable_model_leaves_the_episode_resumable(run_episode, tmp_path):
    directory = tmp_path / "resumable"
    first = [Reply("Reading.", [("read", {"path": "model.py"})])] + [HttpError(500, "down")] * 4
    with OpenAIServer(first) as server:
        result = run_episode(server, directory=directory)
    assert result.stop_reason == "llm_unavailable" and "500" in result.error
    assert load_trajectory(directory / "trajectory.jsonl").end is None

    with OpenAIServer([Reply("Back.", [("finish", {})])]) as server:
        resumed = run_episode(server, directory=directory)
    assert resumed.stop_reason == "finished" and resumed.turns == 2
    conversation = server.conversations[0]
    assert [m.role for m in conversation] == ["system", "user", "assistant", "tool"]
    assert "class Model" in conversation[-1].content  # the first run's read, carried over

    with OpenAIServer([]) as server:  # an ended episode is not run again
        again = run_episode(server, directory=directory)
    assert again.stop_reason == "finished" and server.requests == []


def test_calls_in_a_cut_off_reply_are_not_run(run_episode):
    script = [Reply("", [("write", {"path": "kernels/a.cpp", "content": "int x;"})], finish_reason="length"),
              Reply("", [("finish", {})])]
    with OpenAIServer(script) as server:
        result = run_episode(server)
    assert result.stop_reason == "finished"
    (write,) = by_name(tool_events(result), "write")
    assert write["is_error"] and CUT_OFF in write["message"]["content"] and write["data"]["not_run"]
    assert not (result.directory / "workspace" / "kernels" / "a.cpp").exists()


def test_a_refused_request_ends_the_episode(run_episode):
    with OpenAIServer([HttpError(401, "invalid api key")]) as server:
        result = run_episode(server)
    assert result.stop_reason == "llm_error" and "401" in result.error
    assert load_trajectory(result.directory / "trajectory.jsonl").end["stop_reason"] == "llm_error"


def test_a_slow_model_cannot_overrun_the_wall_time_budget(run_episode):
    with OpenAIServer([Delay(10, Reply("", [("finish", {})]))]) as server:
        result = run_episode(server, env=EnvSettings(max_wall_s=1.0))
    assert result.stop_reason == "max_wall_time" and result.turns == 0
    assert result.elapsed_s < 5


def test_one_episode_directory_serves_one_run_at_a_time(run_episode, task, judge_pool, tmp_path):
    directory = tmp_path / "locked"
    holder = Episode(task, None, judge_pool, directory)
    holder._lock()
    try:
        with OpenAIServer([Reply("", [("finish", {})])]) as server, pytest.raises(EpisodeError, match="in use"):
            run_episode(server, directory=directory)
    finally:
        holder._unlock()


def test_a_start_that_crashed_half_way_is_started_again(run_episode, tmp_path):
    directory = tmp_path / "half"
    (directory / "workspace" / "kernels").mkdir(parents=True)
    (directory / "trajectory.jsonl.new").write_text('{"type": "header"')
    with OpenAIServer([Reply("", [("finish", {})])]) as server:
        result = run_episode(server, directory=directory)
    assert result.stop_reason == "finished"
    assert not (directory / "trajectory.jsonl.new").exists()

    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine")
    with OpenAIServer([]) as server, pytest.raises(EpisodeError, match="not empty"):
        run_episode(server, directory=stranger)
