"""Trajectory files: writing, reading back, damaged files, and the state a stopped episode resumes from."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import pytest

from cuda_agent.llm.messages import Message, ToolCall, Usage
from cuda_agent.agent.trajectory import (FORMAT_VERSION, Trajectory, TrajectoryError, TrajectoryWriter,
                                         load_trajectory, resume_state)
from cuda_agent.errors import CudaAgentError
from cuda_agent.judge.correctness import CheckResult
from cuda_agent.judge.timing import TimingStats
from cuda_agent.judge.verdict import Verdict, render_feedback

KERNEL = "#include <cstdint>\nextern \"C\" void add(const float* a, const float* b, float* out, int64_t n) {\n" \
         "  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];\n}\n"


def compile_error_verdict() -> dict[str, Any]:
    v = Verdict(status="compile_error", stage="compile", task="add", backend="cpu",
                error="kernels/add.cpp:3:5: error: 'out' was not declared in this scope")
    v.feedback = render_feedback(v)
    return v.to_dict()


def profile_verdict() -> dict[str, Any]:
    v = Verdict(status="ok", correct=True, reward=3, reward_continuous=1.21, speedup_vs_eager=1.83,
                speedup_vs_compile=1.21, stage="profile", task="add", backend="cpu",
                timings={"candidate": TimingStats.from_samples([1.0, 1.1, 0.9]),
                         "eager": TimingStats.from_samples([1.83, 1.9, 1.8]),
                         "compile": TimingStats.from_samples([1.21, 1.3, 1.2])},
                checks=[CheckResult(index=0, passed=True, max_abs_error=1e-7, max_rel_error=1e-6, elements=128)])
    v.feedback = render_feedback(v)
    return v.to_dict()


def header() -> dict[str, Any]:
    return {"type": "header", "t": 0.0, "version": 1, "episode_id": "ep-0001",
            "task": {"name": "add", "sha256": "ab" * 32, "source": "tasks/add.py"},
            "model": "scripted-model", "provider": "openai", "backend": "cpu",
            "settings": {"max_turns": 20, "max_wall_s": 3600, "context_tokens": 32768},
            "started_at": "2025-01-01T00:00:00+00:00"}


def message(t: float, turn: int, msg: Message, tokens: tuple[int, int] | None = None) -> dict[str, Any]:
    assistant = msg.role == "assistant"
    return {"type": "message", "t": t, "turn": turn, "message": msg.to_dict(),
            "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]} if assistant and tokens else None,
            "latency_s": 1.5 if assistant else None, "retries": 1 if assistant and turn == 2 else 0,
            "finish_reason": ("tool_calls" if msg.tool_calls else "stop") if assistant else None}


def tool(t: float, turn: int, call: ToolCall, text: str, *, is_error: bool = False,
         verdict: dict[str, Any] | None = None) -> dict[str, Any]:
    result = Message("tool", text, tool_call_id=call.id, name=call.name)
    return {"type": "tool", "t": t, "turn": turn,
            "call": {"id": call.id, "name": call.name, "arguments": call.arguments},
            "message": result.to_dict(), "is_error": is_error, "duration_s": 0.25, "verdict": verdict,
            "data": {"exit_code": 1} if is_error else {}}


WRITE = ToolCall("call_1", "write", json.dumps({"path": "kernels/add.cpp", "content": KERNEL}))
COMPILE = ToolCall("call_2", "compile", "{}")
BAD_EDIT = ToolCall("call_3", "edit", '{"path": "kernels/add.cpp", "old_string": ')
PROFILE = ToolCall("call_4", "profile", "{}")
FINISH = ToolCall("call_5", "finish", "{}")


def episode_events(ended: bool = True) -> list[dict[str, Any]]:
    """A realistic episode: a compile error, a malformed call, a correct profile, a best, an end."""
    events = [
        header(),
        message(0.0, 0, Message("system", "You write CPU kernels.")),
        message(0.0, 0, Message("user", "Make Model faster. <script>alert(1)</script> [bold]not markup[/bold]")),
        message(2.0, 1, Message("assistant", "I'll write the kernel.", [WRITE, COMPILE]), (1200, 300)),
        tool(2.1, 1, WRITE, "wrote kernels/add.cpp (4 lines)"),
        tool(5.0, 1, COMPILE, compile_error_verdict()["feedback"], is_error=True, verdict=compile_error_verdict()),
        {"type": "note", "t": 5.5, "turn": 2, "kind": "llm_retry", "text": "rate limited; retried after 1.0 s"},
        message(8.0, 2, Message("assistant", "Fix the typo.", [BAD_EDIT]), (1600, 80)),
        tool(8.1, 2, BAD_EDIT, "error: the arguments of edit are not valid JSON; send one JSON object",
             is_error=True),
        message(10.0, 3, Message("assistant", "Profile it.", [PROFILE]), (1800, 40)),
        tool(30.0, 3, PROFILE, profile_verdict()["feedback"], verdict=profile_verdict()),
        {"type": "best", "t": 30.1, "turn": 3, "stage": "profile", "correct": True, "speedup_vs_compile": 1.21,
         "speedup_vs_eager": 1.83, "reward": 3,
         "files": {"kernels/add.cpp": KERNEL, "model_new.py": "class ModelNew: ...\n"}},
        {"type": "note", "t": 30.2, "turn": 3, "kind": "context_elided", "text": "elided old tool output (900 tokens)"},
    ]
    if ended:
        events += [
            message(32.0, 4, Message("assistant", "Done.", [FINISH]), (2000, 20)),
            tool(32.1, 4, FINISH, "finished"),
            {"type": "end", "t": 32.2, "turn": 4, "stop_reason": "finished", "elapsed_s": 32.2,
             "usage": {"input_tokens": 6600, "output_tokens": 440},
             "best": {"stage": "profile", "speedup_vs_compile": 1.21, "speedup_vs_eager": 1.83, "reward": 3}},
        ]
    return events


def write_events(path: Path, events: list[dict[str, Any]]) -> Path:
    with TrajectoryWriter(path) as writer:
        for event in events:
            writer.write(event)
    return path


@pytest.fixture
def ended(tmp_path: Path) -> Path:
    return write_events(tmp_path / "trajectory.jsonl", episode_events())


@pytest.fixture
def running(tmp_path: Path) -> Path:
    return write_events(tmp_path / "trajectory.jsonl", episode_events(ended=False))


# -- writing and reading back -------------------------------------------------------------------

def test_round_trip_keeps_every_event(ended: Path):
    events = episode_events()
    traj = load_trajectory(ended)
    assert traj.header == events[0]
    assert traj.events == json.loads(json.dumps(events[1:]))
    assert traj.ignored_tail == ""
    assert len(ended.read_text().splitlines()) == len(events)


def test_messages_are_the_conversation_in_order(ended: Path):
    msgs = load_trajectory(ended).messages()
    assert [m.role for m in msgs] == ["system", "user", "assistant", "tool", "tool", "assistant", "tool",
                                      "assistant", "tool", "assistant", "tool"]
    assert msgs[2].tool_calls == [WRITE, COMPILE]
    assert [m.tool_call_id for m in msgs if m.role == "tool"] == ["call_1", "call_2", "call_3", "call_4", "call_5"]
    assert "<script>" in msgs[1].content


def test_summary_properties(ended: Path):
    traj = load_trajectory(ended)
    assert traj.turns == 4
    assert traj.best is not None and traj.best["speedup_vs_compile"] == 1.21
    assert traj.end is not None and traj.stop_reason == "finished"
    assert traj.usage == Usage(1200 + 1600 + 1800 + 2000, 300 + 80 + 40 + 20)
    assert traj.elapsed_s == 32.2
    assert [(turn, name, v["status"]) for turn, name, v in traj.verdicts()] == [
        (1, "compile", "compile_error"), (3, "profile", "ok")]
    assert traj.tool_calls() == 5
    assert traj.tool_counts() == {"write": 1, "compile": 1, "edit": 1, "profile": 1, "finish": 1}
    assert traj.tool_errors() == 2
    assert [n["kind"] for n in traj.notes()] == ["llm_retry", "context_elided"]
    assert traj.notes("llm_retry")[0]["turn"] == 2


def test_a_trajectory_without_end_or_best(tmp_path: Path):
    traj = load_trajectory(write_events(tmp_path / "t.jsonl", episode_events()[:3]))
    assert traj.end is None and traj.stop_reason is None and traj.best is None
    assert traj.turns == 0 and traj.usage == Usage() and traj.verdicts() == []


def test_writer_refuses_events_it_cannot_place(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    with TrajectoryWriter(path) as writer:
        with pytest.raises(ValueError, match="first event .* must be the header"):
            writer.write({"type": "note", "t": 0.0, "turn": 0, "kind": "x", "text": "y"})
        writer.write(header())
        with pytest.raises(ValueError, match="needs a 'type'"):
            writer.write({"type": "message", "turn": 1})      # no t
        with pytest.raises(ValueError, match="needs a 'type'"):
            writer.write({"type": "thought", "t": 1.0})
        with pytest.raises(TypeError, match="not plain JSON"):
            writer.write({"type": "note", "t": 1.0, "turn": 0, "kind": "x", "text": object()})
    assert len(load_trajectory(path).events) == 0
    with pytest.raises(ValueError, match="closed"):
        writer.write(header())
    writer.close()  # twice is harmless


def test_writer_stores_non_finite_numbers_as_null_and_paths_as_text(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    with TrajectoryWriter(path) as writer:
        writer.write(header())
        writer.write({"type": "note", "t": 1.0, "turn": 0, "kind": "x", "text": "y",
                      "data": {"error": math.inf, "where": tmp_path / "w", "nan": [math.nan]}})
    line = path.read_text().splitlines()[1]
    assert "Infinity" not in line and "NaN" not in line
    event = load_trajectory(path).events[0]
    assert event["data"] == {"error": None, "where": str(tmp_path / "w"), "nan": [None]}


def test_each_event_is_on_disk_as_soon_as_it_is_written(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    writer = TrajectoryWriter(path)
    writer.write(header())
    writer.write(episode_events()[1])
    assert len(load_trajectory(path).events) == 1  # readable while the writer is still open
    writer.close()


def test_writes_are_cheap(tmp_path: Path):
    event = episode_events()[10]  # a profile tool event with a full verdict
    with TrajectoryWriter(tmp_path / "t.jsonl") as writer:
        writer.write(header())
        started = time.perf_counter()
        for _ in range(200):
            writer.write(event)
        per_write_ms = (time.perf_counter() - started) * 1000 / 200
    assert per_write_ms < 2.0


def test_text_that_is_not_valid_unicode_is_still_written(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    with TrajectoryWriter(path) as writer:
        writer.write(header())
        writer.write(message(1.0, 1, Message("assistant", "half a pair: \ud83d and é"), (1, 1)))
    assert load_trajectory(path).messages()[0].content == "half a pair: \ud83d and é"


# -- interrupted writes -------------------------------------------------------------------------

def test_a_partial_last_line_is_ignored_and_cut_when_appending(running: Path):
    partial = '{"type": "message", "t": 40.0, "turn": 4, "message": {"role": "assis'
    with open(running, "a") as fh:
        fh.write(partial)
    traj = load_trajectory(running)
    assert traj.ignored_tail == partial
    assert len(traj.events) == len(episode_events(ended=False)) - 1

    writer = TrajectoryWriter(running)
    assert writer.cut_bytes == len(partial)
    writer.write({"type": "note", "t": 41.0, "turn": 3, "kind": "resumed", "text": "resumed after turn 3"})
    writer.close()
    traj = load_trajectory(running)
    assert traj.ignored_tail == ""
    assert traj.events[-1]["kind"] == "resumed"
    for line in running.read_text().splitlines():
        json.loads(line)


def test_a_complete_line_without_its_newline_counts_as_partial(running: Path):
    # The newline is what marks a line complete; reader and writer must agree on that.
    with open(running, "a") as fh:
        fh.write(json.dumps({"type": "note", "t": 40.0, "turn": 3, "kind": "x", "text": "y"}))
    assert load_trajectory(running).notes("x") == []
    with TrajectoryWriter(running) as writer:
        assert writer.cut_bytes > 0
    assert load_trajectory(running).notes("x") == []


def test_reopening_a_file_cut_inside_its_header_starts_over(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"type": "header", "t": 0.0, "vers')
    with TrajectoryWriter(path) as writer:
        with pytest.raises(ValueError, match="must be the header"):
            writer.write(episode_events()[1])
        writer.write(header())
    assert load_trajectory(path).header == header()


def test_cutting_a_long_partial_line_reads_back_far_enough(tmp_path: Path):
    path = write_events(tmp_path / "t.jsonl", [header()])
    size = path.stat().st_size
    with open(path, "a") as fh:
        fh.write('{"type": "note", "text": "' + "x" * 200_000)
    with TrajectoryWriter(path):
        pass
    assert path.stat().st_size == size


# -- files that are not trajectories ------------------------------------------------------------

def test_missing_file(tmp_path: Path):
    with pytest.raises(TrajectoryError, match="no trajectory file at .*check the path"):
        load_trajectory(tmp_path / "nope.jsonl")


def test_empty_file(tmp_path: Path):
    (tmp_path / "t.jsonl").write_text("")
    with pytest.raises(TrajectoryError, match="no complete line"):
        load_trajectory(tmp_path / "t.jsonl")


def test_only_a_partial_header(tmp_path: Path):
    (tmp_path / "t.jsonl").write_text('{"type": "header", "t"')
    with pytest.raises(TrajectoryError, match="no complete line.*Run the episode again"):
        load_trajectory(tmp_path / "t.jsonl")


def test_no_header(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(episode_events()[1]) + "\n")
    with pytest.raises(TrajectoryError, match="not a trajectory: line 1 should be the header"):
        load_trajectory(path)


def test_bad_json_in_the_middle_names_the_line(ended: Path):
    lines = ended.read_text().splitlines()
    lines[2] = lines[2][:-5]
    ended.write_text("\n".join(lines) + "\n")
    with pytest.raises(TrajectoryError, match=r"line 3: not valid JSON .*delete that line") as info:
        load_trajectory(ended)
    assert isinstance(info.value, CudaAgentError)


def test_a_line_that_is_not_an_event(ended: Path):
    with open(ended, "a") as fh:
        fh.write("[1, 2, 3]\n")
    with pytest.raises(TrajectoryError, match=f"line {len(episode_events()) + 1}: not a trajectory event"):
        load_trajectory(ended)


def test_a_message_event_without_a_message(ended: Path):
    with open(ended, "a") as fh:
        fh.write(json.dumps({"type": "message", "t": 50.0, "turn": 5}) + "\n")
    with pytest.raises(TrajectoryError, match="message event without a message"):
        load_trajectory(ended)


def test_a_newer_format_version(tmp_path: Path):
    path = write_events(tmp_path / "t.jsonl", [{**header(), "version": FORMAT_VERSION + 1}])
    with pytest.raises(TrajectoryError, match="version 2.*Upgrade cuda-agent"):
        load_trajectory(path)


def test_a_file_that_is_not_text(tmp_path: Path):
    (tmp_path / "t.jsonl").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(TrajectoryError, match="not UTF-8"):
        load_trajectory(tmp_path / "t.jsonl")


# -- resuming -----------------------------------------------------------------------------------

def test_resume_after_complete_turns(running: Path):
    traj = load_trajectory(running)
    state = resume_state(traj)
    assert state.messages == traj.messages()
    assert state.turn == 3 and state.next_turn == 4
    assert state.best is not None and state.best["files"]["kernels/add.cpp"] == KERNEL
    assert state.elapsed_s == 30.2
    assert state.usage == Usage(1200 + 1600 + 1800, 300 + 80 + 40)
    assert state.dropped == ""
    assert state.header["episode_id"] == "ep-0001"
    assert state.describe() == "resumed after turn 3 at 30.2 s"


def test_resume_drops_a_turn_whose_tool_calls_did_not_all_finish(running: Path):
    write, profile = (ToolCall("call_6", "write", json.dumps({"path": "model_new.py", "content": "x = 1\n"})),
                      ToolCall("call_7", "profile", "{}"))
    with TrajectoryWriter(running) as writer:
        writer.write(message(40.0, 4, Message("assistant", "Vectorise.", [write, profile]), (2500, 90)))
        writer.write(tool(40.5, 4, write, "wrote model_new.py"))
    with open(running, "a") as fh:  # killed while writing the profile result
        fh.write('{"type": "tool", "t": 60.0, "turn": 4, "call": {"id": "call_7"')

    traj = load_trajectory(running)
    state = resume_state(traj)
    assert state.messages == traj.messages()[:-2]
    assert state.messages[-1].role == "tool" and state.messages[-1].tool_call_id == "call_4"
    assert state.turn == 3 and state.next_turn == 4
    assert state.usage == Usage(1200 + 1600 + 1800 + 2500, 300 + 80 + 40 + 90)  # spent, even if redone
    assert state.elapsed_s == 40.5
    assert "dropped turn 4" in state.dropped and "1 of 2 without a result: profile" in state.dropped
    assert "1 tool result(s)" in state.dropped
    assert "partial last line" in state.dropped
    assert state.describe().startswith("resumed after turn 3 at 40.5 s; dropped turn 4")


def test_resume_drops_a_turn_with_no_tool_result_at_all(running: Path):
    with TrajectoryWriter(running) as writer:
        writer.write(message(40.0, 4, Message("assistant", "", [ToolCall("call_6", "compile", "{}")]), (10, 5)))
        writer.write({"type": "note", "t": 40.1, "turn": 4, "kind": "protected_restored", "text": "restored model.py"})
    state = resume_state(load_trajectory(running))
    assert state.turn == 3 and len(state.messages) == len(load_trajectory(running).messages()) - 1
    assert "0 tool result(s)" in state.dropped


def test_resume_keeps_a_final_answer_without_tool_calls(running: Path):
    with TrajectoryWriter(running) as writer:
        writer.write(message(40.0, 4, Message("assistant", "I am done."), (10, 5)))
    state = resume_state(load_trajectory(running))
    assert state.turn == 4 and state.messages[-1].content == "I am done." and state.dropped == ""


def test_resume_before_the_first_answer(tmp_path: Path):
    state = resume_state(load_trajectory(write_events(tmp_path / "t.jsonl", episode_events()[:3])))
    assert [m.role for m in state.messages] == ["system", "user"]
    assert state.turn == 0 and state.best is None and state.usage == Usage()


def test_an_ended_episode_cannot_be_resumed(ended: Path):
    with pytest.raises(TrajectoryError, match=r"already ended at turn 4 \(stop reason: finished\).*new episode"):
        resume_state(load_trajectory(ended))


def test_resumed_episode_continues_in_the_same_file(running: Path):
    state = resume_state(load_trajectory(running))
    reply = Message("assistant", "Next idea.", [ToolCall("call_8", "read", '{"path": "model_new.py"}')])
    with TrajectoryWriter(running) as writer:
        writer.write({"type": "note", "t": state.elapsed_s, "turn": state.turn, "kind": "resumed",
                      "text": state.describe()})
        writer.write(message(state.elapsed_s + 2, state.next_turn, reply, (3000, 50)))
    traj = load_trajectory(running)
    assert traj.messages() == state.messages + [reply]
    assert traj.turns == 4 and traj.notes("resumed")[0]["text"] == state.describe()
    assert isinstance(traj, Trajectory)


def roles_and_ids(messages: list[Message]) -> list[tuple[str, str | None]]:
    return [(m.role, m.tool_call_id) for m in messages]


def assert_every_call_answered(messages: list[Message]) -> None:
    """What OpenAI and Anthropic require: each tool call's result follows its assistant message."""
    for index, msg in enumerate(messages):
        if msg.role == "assistant" and msg.tool_calls:
            results = []
            for after in messages[index + 1:]:
                if after.role != "tool":
                    break
                results.append(after.tool_call_id)
            assert sorted(results) == sorted(c.id for c in msg.tool_calls)
        if msg.role == "tool":
            assert any(m.role == "assistant" and msg.tool_call_id in [c.id for c in m.tool_calls]
                       for m in messages[:index])


def test_a_second_resume_still_leaves_out_the_turn_the_first_one_dropped(tmp_path: Path):
    # Resume 1 drops A1 (calls a, b; only a answered). The episode redoes turn 1 as A2 (call c),
    # which gets its result, and is interrupted again. Resume 2 must not send A1 or a's result.
    a, b, c = ToolCall("a", "write", "{}"), ToolCall("b", "compile", "{}"), ToolCall("c", "read", "{}")
    path = write_events(tmp_path / "t.jsonl", episode_events()[:3] + [
        message(2.0, 1, Message("assistant", "A1", [a, b]), (100, 10)),
        tool(2.5, 1, a, "wrote it"),
    ])
    first = resume_state(load_trajectory(path))
    assert [m.role for m in first.messages] == ["system", "user"] and first.turn == 0
    with TrajectoryWriter(path) as writer:
        writer.write({"type": "note", "t": 2.5, "turn": 0, "kind": "resumed", "text": first.describe()})
        writer.write(message(4.0, 1, Message("assistant", "A2", [c]), (120, 12)))
        writer.write(tool(4.5, 1, c, "the file"))

    traj = load_trajectory(path)
    state = resume_state(traj)
    assert [m.content for m in state.messages if m.role == "assistant"] == ["A2"]
    assert roles_and_ids(state.messages) == [("system", None), ("user", None), ("assistant", None), ("tool", "c")]
    assert_every_call_answered(state.messages)
    assert state.turn == 1 and state.next_turn == 2
    assert state.usage == Usage(220, 22) and state.elapsed_s == 4.5
    assert "dropped turn 1 (the model's answer at 2.0 s)" in state.dropped
    assert "1 of 2 without a result: compile" in state.dropped and "1 tool result(s)" in state.dropped
    assert state.describe().startswith("resumed after turn 1 at 4.5 s; dropped turn 1")
    # The file and the replay views keep everything as it was recorded.
    assert [m.content for m in traj.messages() if m.role == "assistant"] == ["A1", "A2"]
    assert [m.tool_call_id for m in traj.messages() if m.role == "tool"] == ["a", "c"]


def test_a_redone_turn_with_the_same_number_and_call_ids_is_kept(running: Path):
    # The redone turn 4 reuses turn number and call ids (a deterministic model may): the results
    # must be matched to the assistant message before them, not to the dropped one.
    write, profile = ToolCall("call_6", "write", "{}"), ToolCall("call_7", "profile", "{}")
    with TrajectoryWriter(running) as writer:
        writer.write(message(40.0, 4, Message("assistant", "first try", [write, profile]), (2500, 90)))
        writer.write(tool(40.5, 4, write, "wrote model_new.py"))
        writer.write({"type": "note", "t": 41.0, "turn": 3, "kind": "resumed", "text": "resumed after turn 3"})
        writer.write(message(42.0, 4, Message("assistant", "second try", [write, profile]), (2600, 95)))
        writer.write(tool(42.5, 4, write, "wrote model_new.py again"))
        writer.write(tool(50.0, 4, profile, "profiled"))
    traj = load_trajectory(running)
    state = resume_state(traj)
    recorded = traj.messages()
    assert state.messages == recorded[:-5] + recorded[-3:]
    assert [m.content for m in state.messages[-3:]] == ["second try", "wrote model_new.py again", "profiled"]
    assert_every_call_answered(state.messages)
    assert state.turn == 4 and state.next_turn == 5
    assert state.dropped.count("dropped turn 4") == 1 and "(the model's answer at 40.0 s)" in state.dropped


def test_a_redone_turn_that_is_cut_short_again_is_dropped_too(running: Path):
    write, profile = ToolCall("call_6", "write", "{}"), ToolCall("call_7", "profile", "{}")
    with TrajectoryWriter(running) as writer:
        writer.write(message(40.0, 4, Message("assistant", "first try", [write, profile]), (2500, 90)))
        writer.write(tool(40.5, 4, write, "wrote model_new.py"))
        writer.write(message(42.0, 4, Message("assistant", "second try", [write, profile]), (2600, 95)))
        writer.write(tool(42.5, 4, write, "wrote model_new.py again"))
    traj = load_trajectory(running)
    state = resume_state(traj)
    assert state.messages == traj.messages()[:-4]
    assert state.turn == 3 and state.dropped.count("dropped turn 4") == 2
    assert_every_call_answered(state.messages)


def test_a_tool_result_that_answers_no_call_is_left_out(running: Path):
    stray = ToolCall("call_99", "read", "{}")
    with TrajectoryWriter(running) as writer:
        writer.write(tool(40.0, 3, stray, "a result for a call nobody made"))
    state = resume_state(load_trajectory(running))
    assert state.messages == load_trajectory(running).messages()[:-1]
    assert "1 tool result(s) that answer no tool call" in state.dropped
    assert_every_call_answered(state.messages)
