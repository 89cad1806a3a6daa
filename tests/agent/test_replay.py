"""Replay views of a trajectory: the terminal rendering and the self-contained HTML page."""

from __future__ import annotations

import io
import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from cuda_agent.llm.messages import Message, ToolCall
from cuda_agent.agent.replay import render_html, render_trajectory, verdict_line, write_html
from cuda_agent.agent.trajectory import Trajectory, TrajectoryWriter, load_trajectory
from cuda_agent.judge.timing import TimingStats
from cuda_agent.judge.verdict import Verdict, render_feedback

KERNEL = ("#include <cstdint>\n"
          "extern \"C\" void scale_add(const float* a, const float* b, float* out, int64_t n) {\n"
          "  for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * a[i] + b[i];  // a < b && b > a\n"
          "}\n")
LONG_OUTPUT = "\n".join(f"log line {i}" for i in range(100))
HOSTILE = "<script>alert('x')</script> & [bold red]not markup[/bold red]"


def verdicts() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    error = Verdict(status="compile_error", stage="compile", backend="cpu",
                    error="kernels/scale_add.cpp:3:40: error: expected ';' before '}' token")
    slow = Verdict(status="ok", correct=True, reward=1, reward_continuous=0.5, speedup_vs_eager=0.98,
                   speedup_vs_compile=0.50, stage="profile", backend="cpu",
                   timings={"candidate": TimingStats.from_samples([2.0]), "eager": TimingStats.from_samples([1.96]),
                            "compile": TimingStats.from_samples([1.0])})
    fast = Verdict(status="ok", correct=True, reward=3, reward_continuous=1.37, speedup_vs_eager=2.46,
                   speedup_vs_compile=1.37, stage="profile", backend="cpu",
                   timings={"candidate": TimingStats.from_samples([0.73]), "eager": TimingStats.from_samples([1.8]),
                            "compile": TimingStats.from_samples([1.0])})
    for v in (error, slow, fast):
        v.feedback = render_feedback(v)
    return error.to_dict(), slow.to_dict(), fast.to_dict()


def msg(t: float, turn: int, message: Message, tokens: tuple[int, int] | None = None) -> dict[str, Any]:
    return {"type": "message", "t": t, "turn": turn, "message": message.to_dict(),
            "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]} if tokens else None,
            "latency_s": 2.5 if tokens else None, "retries": 0,
            "finish_reason": "tool_calls" if message.tool_calls else None}


def tool(t: float, turn: int, call: ToolCall, text: str, is_error: bool = False,
         verdict: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "tool", "t": t, "turn": turn,
            "call": {"id": call.id, "name": call.name, "arguments": call.arguments},
            "message": Message("tool", text, tool_call_id=call.id, name=call.name).to_dict(),
            "is_error": is_error, "duration_s": 0.4, "verdict": verdict, "data": {}}


def episode(ended: bool = True) -> list[dict[str, Any]]:
    error, slow, fast = verdicts()
    write = ToolCall("c1", "write", json.dumps({"path": "kernels/scale_add.cpp", "content": KERNEL}))
    compile_ = ToolCall("c2", "compile", "{}")
    edit = ToolCall("c3", "edit", json.dumps({"path": "kernels/scale_add.cpp", "old_string": "b[i];  //",
                                              "new_string": "b[i];\n  //"}))
    bash = ToolCall("c4", "bash", json.dumps({"command": "ls -la kernels && cat build.log"}))
    broken = ToolCall("c5", "grep", '{"pattern": "out[i]", ')
    profile1, profile2 = ToolCall("c6", "profile", "{}"), ToolCall("c7", "profile", "{}")
    events = [
        {"type": "header", "t": 0.0, "version": 1, "episode_id": "ep-42",
         "task": {"name": "scale_add", "sha256": "cd" * 32, "source": "level1/scale_add.py"},
         "model": "qwen-coder-32b", "provider": "openai", "backend": "cpu",
         "settings": {"env": {"max_turns": 50}, "context": {"window": 65536}}, "started_at": "2025-02-03T04:05:06+00:00"},
        msg(0.0, 0, Message("system", "You optimise PyTorch models with C++ kernels.")),
        msg(0.0, 0, Message("user", f"Task: scale_add. {HOSTILE}")),
        msg(3.0, 1, Message("assistant", "Writing a first kernel.", [write, compile_]), (1000, 200)),
        tool(3.1, 1, write, "wrote kernels/scale_add.cpp"),
        tool(9.0, 1, compile_, error["feedback"], is_error=True, verdict=error),
        msg(12.0, 2, Message("assistant", "Fix and look around.", [edit, bash, broken]), (1500, 100)),
        tool(12.1, 2, edit, "edited kernels/scale_add.cpp"),
        tool(12.9, 2, bash, LONG_OUTPUT),
        tool(13.0, 2, broken, "error: the arguments of grep are not valid JSON; send one JSON object",
             is_error=True),
        {"type": "note", "t": 13.5, "turn": 2, "kind": "context_elided", "text": "elided old tool output (512 tokens)"},
        msg(15.0, 3, Message("assistant", "Profile.", [profile1]), (1700, 20)),
        tool(40.0, 3, profile1, slow["feedback"], verdict=slow),
        {"type": "best", "t": 40.1, "turn": 3, "stage": "profile", "correct": True, "speedup_vs_compile": 0.5,
         "speedup_vs_eager": 0.98, "reward": 1, "files": {"kernels/scale_add.cpp": "// slow\n"}},
        msg(45.0, 4, Message("assistant", "Vectorised; profile again.", [profile2]), (1900, 300)),
        tool(70.0, 4, profile2, fast["feedback"], verdict=fast),
        {"type": "best", "t": 70.1, "turn": 4, "stage": "profile", "correct": True, "speedup_vs_compile": 1.37,
         "speedup_vs_eager": 2.46, "reward": 3,
         "files": {"kernels/scale_add.cpp": KERNEL, "model_new.py": f"# {HOSTILE}\nclass ModelNew: ...\n"}},
    ]
    if ended:
        events.append({"type": "end", "t": 71.0, "turn": 4, "stop_reason": "target_reached", "elapsed_s": 71.0,
                       "usage": {"input_tokens": 6100, "output_tokens": 620},
                       "best": {"stage": "profile", "speedup_vs_compile": 1.37, "speedup_vs_eager": 2.46,
                                "reward": 3}})
    else:  # stopped while its last tool call ran
        late = ToolCall("c8", "verify", "{}")
        events.append(msg(75.0, 5, Message("assistant", "One more try.", [late]), (2000, 30)))
    return events


def load(tmp_path: Path, ended: bool = True) -> Trajectory:
    path = tmp_path / "trajectory.jsonl"
    with TrajectoryWriter(path) as writer:
        for event in episode(ended):
            writer.write(event)
    return load_trajectory(path)


def terminal(traj: Trajectory, full: bool = False) -> str:
    console = Console(record=True, width=120, file=io.StringIO())
    render_trajectory(traj, console, full=full)
    return console.export_text()


# -- terminal -----------------------------------------------------------------------------------

def test_terminal_shows_the_whole_episode(tmp_path: Path):
    text = terminal(load(tmp_path))
    for expected in ("scale_add", "qwen-coder-32b", "ep-42", "env.max_turns=50", "context.window=65536", "2025-02-03T04:05:06",
                     "Writing a first kernel.", "1,000 in / 200 out tokens",
                     "compile: compile_error", "expected ';' before '}' token",
                     "profile: ok · correct · 2.46x vs eager · 1.37x vs torch.compile · reward 3",
                     "0.98x vs eager · 0.50x vs torch.compile · reward 1",
                     "note [context_elided] elided old tool output", "new best solution",
                     "2.0f * a[i] + b[i]", "ls -la kernels", "arguments are not a JSON object",
                     HOSTILE):
        assert expected in text, expected
    assert '{"path": "kernels/scale_add.cpp", "content": "<4 lines: content>"}' in text  # not on one line


def test_terminal_summary_table(tmp_path: Path):
    text = terminal(load(tmp_path))
    summary = text[text.rindex("summary"):]
    for expected in ("target_reached", "1m 11s", "6,100 in / 620 out", "profile 2", "write 1", "grep 1",
                     "tool errors", "2.46x vs eager · 1.37x vs torch.compile · reward 3 · turn 4"):
        assert expected in summary, expected
    assert "│ turns" in summary and "│ 4 " in summary


def test_long_outputs_are_cut_unless_full(tmp_path: Path):
    traj = load(tmp_path)
    short = terminal(traj)
    assert "log line 39" in short and "log line 40" not in short and "60 more lines" in short
    full = terminal(traj, full=True)
    assert "log line 99" in full and "more lines" not in full


def test_errors_are_red(tmp_path: Path):
    console = Console(record=True, width=120, force_terminal=True, color_system="standard", file=io.StringIO())
    render_trajectory(load(tmp_path), console)
    styled = console.export_text(styles=True)
    line = next(x for x in styled.splitlines() if "arguments of grep are not valid JSON" in x)
    assert "\x1b[31m" in line
    ok_line = next(x for x in styled.splitlines() if "edited kernels/scale_add.cpp" in x)
    assert "\x1b[31m" not in ok_line


def test_terminal_replays_an_episode_that_has_not_ended(tmp_path: Path):
    text = terminal(load(tmp_path, ended=False))
    assert "none recorded: the episode is still running or stopped unexpectedly" in text
    assert "One more try." in text
    assert "> verify {}: no result recorded (the episode stopped while it ran)" in text


def test_an_episode_that_ended_with_an_error(tmp_path: Path):
    events = episode()
    events[-1] = {**events[-1], "stop_reason": "context_exhausted", "error": "prompt is 70000 tokens; limit 65536"}
    path = tmp_path / "t.jsonl"
    with TrajectoryWriter(path) as writer:
        for event in events:
            writer.write(event)
    traj = load_trajectory(path)
    text = terminal(traj)
    assert "episode ended: context_exhausted after 1m 11s (prompt is 70000 tokens; limit 65536)" in text
    summary = text[text.rindex("summary"):]
    assert "│ error " in summary and "limit 65536" in summary
    assert "limit 65536" in parse(render_html(traj)).section("summary")


def test_verdict_line_of_a_compile_only_check():
    v = Verdict(status="ok", stage="compile").to_dict()
    assert verdict_line(v) == "compile: ok · compiled, not yet verified"
    wrong = Verdict(status="incorrect", stage="verify", error="check 2: max abs error 0.5").to_dict()
    assert verdict_line(wrong) == "verify: incorrect · reward -1 · check 2: max abs error 0.5"


# -- HTML ---------------------------------------------------------------------------------------

VOID = {"meta", "br", "hr", "img", "input", "link"}


class Checker(HTMLParser):
    """Checks that every element is closed in order, and collects tags, text and section texts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []
        self.sections: dict[str, list[str]] = {}
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += attrs
        if tag == "section":
            self.sections[dict(attrs).get("id") or ""] = []
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if "section" in self.stack and self.sections:
            list(self.sections.values())[-1].append(data)

    def section(self, name: str) -> str:
        return "".join(self.sections[name])


def parse(page: str) -> Checker:
    checker = Checker()
    checker.feed(page)
    checker.close()
    assert checker.problems == [] and checker.stack == []
    return checker


def test_html_is_well_formed_and_self_contained(tmp_path: Path):
    out = tmp_path / "replay.html"
    write_html(load(tmp_path), out)
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>")
    checker = parse(page)
    assert "script" not in checker.tags and "link" not in checker.tags and "img" not in checker.tags
    assert not any(name == "src" or name.startswith("on") for name, _ in checker.attrs)
    links = [value for name, value in checker.attrs if name == "href"]
    assert links and all(str(link).startswith("#turn-") for link in links)  # only links within the page
    targets = {value for name, value in checker.attrs if name == "id"}
    assert all(str(link)[1:] in targets for link in links)
    assert "style" in checker.tags and "details" in checker.tags
    assert sorted(p.name for p in tmp_path.iterdir()) == ["replay.html", "trajectory.jsonl"]  # no temp file left


def test_html_escapes_what_the_model_and_task_wrote(tmp_path: Path):
    page = render_html(load(tmp_path))
    checker = parse(page)
    text = "".join(checker.text)
    assert HOSTILE in text                       # shown as text...
    assert "<script>alert" not in page           # ...never as markup
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "2.0f * a[i] + b[i];  // a &lt; b &amp;&amp; b &gt; a" in page


def test_html_has_summary_verdict_table_timeline_and_best_files(tmp_path: Path):
    checker = parse(render_html(load(tmp_path)))
    summary = checker.section("summary")
    for expected in ("target_reached", "1m 11s", "6,100 in / 620 out", "qwen-coder-32b (openai)"):
        assert expected in summary, expected
    speedups = checker.section("speedups")
    assert speedups.index("compile_error") < speedups.index("0.50x") < speedups.index("1.37x")
    assert "2.46x" in speedups
    timeline = checker.section("timeline")
    for expected in ("Turn 1", "Turn 4", "Writing a first kernel.", "log line 99", "not a JSON object",
                     "note [context_elided]", "New best solution", "compile: compile_error"):
        assert expected in timeline, expected
    assert "setting: env.max_turns" in checker.section("run")
    best = checker.section("best")
    assert "reward 3" in best and "kernels/scale_add.cpp" in best and "model_new.py" in best
    assert KERNEL in best and "// slow" not in best


def test_html_of_an_episode_that_has_not_ended(tmp_path: Path):
    checker = parse(render_html(load(tmp_path, ended=False)))
    assert "still running or stopped unexpectedly" in checker.section("summary")
    assert "no result recorded" in checker.section("timeline")


def test_html_without_verdicts_or_best(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    with TrajectoryWriter(path) as writer:
        for event in episode()[:3]:
            writer.write(event)
    checker = parse(render_html(load_trajectory(path)))
    assert "No judge verdicts" in checker.section("speedups")
    assert "no correct solution yet" in checker.section("best")


@pytest.mark.parametrize("ended", [True, False])
def test_long_outputs_fold_in_html(tmp_path: Path, ended: bool):
    page = render_html(load(tmp_path, ended))
    assert "<details><summary>output (100 lines)</summary>" in page
