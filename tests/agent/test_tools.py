"""The agent's file, search, judge and finish tools, and the dispatch that guards them."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from cuda_agent.llm.messages import ToolCall
from cuda_agent.agent.tools import (Tool, ToolBox, ToolContext, ToolLimits, ToolOutput, default_tools,
                                    protected_files)
from cuda_agent.cluster import LocalJudgePool
from cuda_agent.judge.verdict import Verdict
from cuda_agent.workspace import create_workspace

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "solutions" / "cpu"
TOOL_NAMES = {"bash", "read", "write", "edit", "multi_edit", "glob", "grep", "compile", "verify", "profile",
              "finish"}


class Boom(Tool):
    name = "boom"
    description = "Fails unexpectedly."
    parameters = {"type": "object", "properties": {}, "additionalProperties": False}

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        raise KeyError("nothing here")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "kernels").mkdir(parents=True)
    (root / "model.py").write_text("class Model: pass\n")
    (root / "model_new.py").write_text("class ModelNew: pass\n")
    (root / "SKILL.md").write_text("rules\n")
    return root


@pytest.fixture
def ctx(ws: Path, tmp_path: Path, task) -> ToolContext:
    return ToolContext(workspace=ws, task=task, judge=None, scratch=tmp_path / "scratch",
                       hidden=[tmp_path / "hidden"], protected=protected_files(),
                       limits=ToolLimits(max_read_lines=50, max_matches=5, max_output_chars=4000))


@pytest.fixture
def box() -> ToolBox:
    return ToolBox(default_tools() + [Boom()])


def call(box: ToolBox, ctx: ToolContext, name: str, args: Any = None, raw: str | None = None) -> ToolOutput:
    arguments = raw if raw is not None else json.dumps(args if args is not None else {})
    return asyncio.run(box.call(ToolCall("call-1", name, arguments), ctx))


def ok(box: ToolBox, ctx: ToolContext, name: str, **args: Any) -> ToolOutput:
    out = call(box, ctx, name, args)
    assert not out.is_error, out.text
    return out


def err(box: ToolBox, ctx: ToolContext, name: str, **args: Any) -> str:
    out = call(box, ctx, name, args)
    assert out.is_error, out.text
    return out.text


# -- toolbox ----------------------------------------------------------------------------------
def test_default_tools_have_the_fixed_names_and_closed_schemas():
    box = ToolBox(default_tools())
    assert set(box.names) == TOOL_NAMES
    for schema in box.schemas():
        fn = schema["function"]
        assert schema["type"] == "function" and fn["description"]
        assert fn["parameters"]["type"] == "object" and fn["parameters"]["additionalProperties"] is False
    assert protected_files() == {"model.py", "SKILL.md", "binding_registry.h", "binding.cpp"}
    with pytest.raises(ValueError, match="unique"):
        ToolBox(default_tools() + default_tools())


def test_unknown_tool_lists_the_available_ones(box, ctx):
    text = err(box, ctx, "reed", path="x")
    assert "'reed'" in text and "'read'" in text  # a close match is suggested
    assert all(name in text for name in TOOL_NAMES)


def test_arguments_that_are_not_json_quote_the_parse_error(box, ctx):
    out = call(box, ctx, "read", raw='{"path": "model.py"')
    assert out.is_error and "not valid JSON" in out.text and "line 1" in out.text
    assert '{"path": "model.py"' in out.text


def test_arguments_must_be_an_object(box, ctx):
    out = call(box, ctx, "read", raw='["model.py"]')
    assert out.is_error and "must be a JSON object, not array" in out.text


def test_schema_violations_name_the_argument(box, ctx):
    assert "missing required argument 'path'" in err(box, ctx, "read")
    text = err(box, ctx, "read", path="model.py", lines=3)
    assert "unexpected argument 'lines'" in text and "path (string)" in text
    text = err(box, ctx, "read", path="model.py", offset="10")
    assert "'offset' must be of type integer, not string" in text
    text = err(box, ctx, "multi_edit", path="model_new.py", edits=[{"old_string": "a"}])
    assert "missing required argument 'new_string' (in edits.0)" in text
    text = err(box, ctx, "edit", path="model_new.py")
    assert text.count("missing required argument") == 2  # each missing argument named once


def test_empty_arguments_mean_no_arguments(box, ctx):
    out = call(box, ctx, "finish", raw="")
    assert out.finished and not out.is_error


def test_unexpected_exception_becomes_an_internal_error_result(box, ctx):
    out = call(box, ctx, "boom")
    assert out.is_error and out.data["internal_error"] is True
    assert "KeyError" in out.text and "nothing here" in out.text


def test_finish_ends_the_episode_with_the_summary(box, ctx):
    out = ok(box, ctx, "finish", summary="fused relu")
    assert out.finished and out.data["summary"] == "fused relu"


# -- read -------------------------------------------------------------------------------------
def test_read_numbers_lines_caps_them_and_says_how_to_go_on(box, ctx, ws):
    (ws / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 121)))
    out = ok(box, ctx, "read", path="long.txt")
    lines = out.text.splitlines()
    assert lines[0] == "     1\tline 1" and lines[49] == "    50\tline 50"
    assert "showing lines 1-50 of 120" in out.text and "offset=51" in out.text
    assert "long.txt" in ctx.read_files

    out = ok(box, ctx, "read", path="long.txt", offset=100, limit=5)
    assert out.text.splitlines()[0] == "   100\tline 100" and "   104\tline 104" in out.text
    assert "   105\t" not in out.text and "offset=105" in out.text

    out = ok(box, ctx, "read", path=str(ws / "long.txt"), offset=118)  # absolute inside is fine
    assert out.text.splitlines()[-1] == "   120\tline 120" and "showing" not in out.text
    assert "past the end" in err(box, ctx, "read", path="long.txt", offset=121)


def test_read_stops_at_the_output_limit_on_a_line_boundary(box, ctx, ws):
    (ws / "wide.txt").write_text("".join(f"{i:04d}" + "x" * 300 + "\n" for i in range(40)))
    out = ok(box, ctx, "read", path="wide.txt")
    assert len(out.text) <= ctx.limits.max_output_chars
    last = out.data["last"]
    assert last < 40 and f"offset={last + 1}" in out.text
    assert out.text.splitlines()[-2].endswith("x" * 300)  # whole lines only


def test_read_errors(box, ctx, ws):
    assert "does not exist" in err(box, ctx, "read", path="nope.py")
    assert "is a directory" in err(box, ctx, "read", path="kernels")
    (ws / "blob.bin").write_bytes(b"\x7fELF\0\0\0")
    assert "binary" in err(box, ctx, "read", path="blob.bin")
    (ws / "empty.txt").write_text("")
    assert "empty" in ok(box, ctx, "read", path="empty.txt").text


def test_reading_protected_files_is_fine(box, ctx):
    assert "class Model" in ok(box, ctx, "read", path="model.py").text


# -- write ------------------------------------------------------------------------------------
def test_write_creates_files_and_parent_directories(box, ctx, ws):
    out = ok(box, ctx, "write", path="kernels/sub/relu.cpp", content="int x;\nint y;\n")
    assert (ws / "kernels/sub/relu.cpp").read_text() == "int x;\nint y;\n"
    assert out.data["created"] is True and "created kernels/sub/relu.cpp (2 lines" in out.text


def test_messages_name_the_tools_as_the_caller_knows_them(box, ctx, ws):
    """Under other names (as the MCP server serves them), messages name those, and leave out
    advice about tools the caller does not have."""
    ctx.tool_names = {"read": "read_file", "write": "write_file", "glob": "list_files"}
    text = err(box, ctx, "write", path="model_new.py", content="new")
    assert "call read_file on it first" in text and "edit" not in text
    assert "use list_files to list" in err(box, ctx, "read", path="nope.py")


def test_write_refuses_to_overwrite_a_file_not_read(box, ctx, ws):
    text = err(box, ctx, "write", path="model_new.py", content="new")
    assert "has not been read" in text and "call read on it first" in text and "use edit" in text
    assert (ws / "model_new.py").read_text() == "class ModelNew: pass\n"
    ok(box, ctx, "read", path="model_new.py")
    out = ok(box, ctx, "write", path="model_new.py", content="new")
    assert (ws / "model_new.py").read_text() == "new" and out.data["created"] is False
    ok(box, ctx, "write", path="model_new.py", content="newer")  # what it wrote it knows


def test_write_errors_say_what_is_wrong(box, ctx):
    assert "could not be written" in err(box, ctx, "write", path="model_new.py/inner.py", content="x")
    assert "is a directory" in err(box, ctx, "write", path="kernels", content="x")
    assert "path is empty" in err(box, ctx, "write", path=" ", content="x")


def test_write_keeps_line_endings_and_breaks_hard_links(box, ctx, ws):
    os.link(ws / "model.py", ws / "kernels/alias.cpp")
    ok(box, ctx, "read", path="kernels/alias.cpp")
    ok(box, ctx, "write", path="kernels/alias.cpp", content="a\r\nb\r\n")
    assert (ws / "kernels/alias.cpp").read_bytes() == b"a\r\nb\r\n"
    assert (ws / "model.py").read_text() == "class Model: pass\n"  # not written through the link


# -- edit, multi_edit -------------------------------------------------------------------------
def test_edit_replaces_one_exact_occurrence(box, ctx, ws):
    (ws / "k.cpp").write_text("int a = 1;\nint b = 2;\n")
    out = ok(box, ctx, "edit", path="k.cpp", old_string="int b = 2;", new_string="int b = 3;")
    assert (ws / "k.cpp").read_text() == "int a = 1;\nint b = 3;\n"
    assert "replaced 1 occurrence" in out.text and "     2\tint b = 3;" in out.text


def test_edit_not_found_and_ambiguous(box, ctx, ws):
    (ws / "k.cpp").write_text("x = 1;\nx = 1;\nx = 1;\n")
    text = err(box, ctx, "edit", path="k.cpp", old_string="y = 1;", new_string="y = 2;")
    assert "was not found in k.cpp" in text and "exactly" in text
    text = err(box, ctx, "edit", path="k.cpp", old_string="x = 1;", new_string="x = 2;")
    assert "occurs 3 times" in text and "replace_all" in text
    assert (ws / "k.cpp").read_text() == "x = 1;\nx = 1;\nx = 1;\n"
    out = ok(box, ctx, "edit", path="k.cpp", old_string="x = 1;", new_string="x = 2;", replace_all=True)
    assert (ws / "k.cpp").read_text() == "x = 2;\nx = 2;\nx = 2;\n" and out.data["replacements"] == 3
    assert "nothing to change" in err(box, ctx, "edit", path="k.cpp", old_string="x", new_string="x")
    assert "use write" in err(box, ctx, "edit", path="new.cpp", old_string="a", new_string="b")


def test_edit_with_line_numbers_gets_a_hint(box, ctx, ws):
    (ws / "k.cpp").write_text("int a;\n")
    text = err(box, ctx, "edit", path="k.cpp", old_string="     1\tint a;", new_string="int b;")
    assert "line numbers" in text


def test_multi_edit_applies_in_order_and_is_atomic(box, ctx, ws):
    (ws / "k.cpp").write_text("alpha beta gamma\n")
    ok(box, ctx, "multi_edit", path="k.cpp", edits=[
        {"old_string": "alpha", "new_string": "one"},
        {"old_string": "one beta", "new_string": "two"},  # sees the first edit's result
    ])
    assert (ws / "k.cpp").read_text() == "two gamma\n"

    before = (ws / "k.cpp").stat().st_mtime_ns
    text = err(box, ctx, "multi_edit", path="k.cpp", edits=[
        {"old_string": "two", "new_string": "three"},
        {"old_string": "delta", "new_string": "epsilon"},
    ])
    assert "edit 2 of 2" in text and "unchanged" in text and "not found" in text
    assert (ws / "k.cpp").read_text() == "two gamma\n" and (ws / "k.cpp").stat().st_mtime_ns == before
    assert "argument 'edits'" in err(box, ctx, "multi_edit", path="k.cpp", edits=[])


# -- paths: escapes and protected files -------------------------------------------------------
@pytest.mark.parametrize("tool,args", [
    ("write", {"content": "x"}),
    ("edit", {"old_string": "a", "new_string": "b"}),
    ("multi_edit", {"edits": [{"old_string": "a", "new_string": "b"}]}),
])
def test_writes_outside_the_workspace_are_refused(box, ctx, ws, tmp_path, tool, args):
    outside = tmp_path / "outside.txt"
    outside.write_text("a")
    (ws / "kernels" / "escape").symlink_to(tmp_path)
    for path in ("../outside.txt", str(outside), "kernels/../../outside.txt", "kernels/escape/outside.txt"):
        text = err(box, ctx, tool, path=path, **args)
        assert "outside the workspace" in text, path
    assert "symbolic link" in err(box, ctx, tool, path="kernels/escape/outside.txt", **args)
    assert outside.read_text() == "a"


@pytest.mark.parametrize("tool,args", [
    ("write", {"content": "x"}),
    ("edit", {"old_string": "class", "new_string": "klass"}),
    ("multi_edit", {"edits": [{"old_string": "class", "new_string": "klass"}]}),
])
def test_protected_files_cannot_be_changed_by_any_name(box, ctx, ws, tool, args):
    (ws / "kernels" / "link.py").symlink_to(ws / "model.py")
    ok(box, ctx, "read", path="model.py")
    for path in ("model.py", "./kernels/../model.py", str(ws / "model.py"), "kernels/link.py", "SKILL.md"):
        text = err(box, ctx, tool, path=path, **args)
        assert "protected" in text and "belongs to the judge" in text, path
    assert (ws / "model.py").read_text() == "class Model: pass\n"


@pytest.mark.parametrize("tool,args", [
    ("write", {"content": "x"}),
    ("edit", {"old_string": "a", "new_string": "b"}),
    ("multi_edit", {"edits": [{"old_string": "a", "new_string": "b"}]}),
])
def test_writes_never_follow_a_symbolic_link_inside_the_workspace(box, ctx, ws, tool, args):
    (ws / "elsewhere").mkdir()
    (ws / "elsewhere" / "k.cpp").write_text("a")
    (ws / "notes.txt").write_text("a")
    (ws / "kernels" / "sub").symlink_to(ws / "elsewhere")
    (ws / "kernels" / "alias.cpp").symlink_to(ws / "notes.txt")
    for path in ("kernels/sub/k.cpp", "kernels/sub/new/n.cpp", "kernels/alias.cpp"):
        ctx.read_files.add(path)
        text = err(box, ctx, tool, path=path, **args)
        assert "is a symbolic link" in text and "never write through" in text, path
    assert "kernels/sub is a symbolic link" in err(box, ctx, tool, path="kernels/sub/k.cpp", **args)
    assert (ws / "elsewhere" / "k.cpp").read_text() == "a" and (ws / "notes.txt").read_text() == "a"
    assert not (ws / "elsewhere" / "new").exists()
    assert "a" in ok(box, ctx, "read", path="kernels/sub/k.cpp").text  # reading through it is fine


def test_writes_through_a_directory_linked_out_of_the_workspace_are_refused(box, ctx, ws, tmp_path):
    target = tmp_path / "etc"
    target.mkdir()
    shutil.rmtree(ws / "kernels")
    (ws / "kernels").symlink_to(target)
    text = err(box, ctx, "write", path="kernels/k_binding.cpp", content="x")
    assert "symbolic link" in text
    assert list(target.iterdir()) == []


def test_reads_outside_the_workspace_or_in_hidden_paths_are_refused(box, ctx, ws, tmp_path):
    (tmp_path / "secret.txt").write_text("s")
    assert "outside the workspace" in err(box, ctx, "read", path="../secret.txt")
    assert "outside the workspace" in err(box, ctx, "grep", pattern="s", path="..")
    assert "outside the workspace" in err(box, ctx, "glob", pattern="*", path="/")


def test_a_hidden_directory_holding_the_workspace_hides_only_what_is_outside(box, ctx, ws, tmp_path):
    ctx.hidden = [tmp_path]  # an episode directory with the workspace inside it
    ok(box, ctx, "write", path="kernels/k.cpp", content="int k;\n")
    assert "int k;" in ok(box, ctx, "read", path="kernels/k.cpp").text
    assert ok(box, ctx, "grep", pattern="int k").text == "kernels/k.cpp:1: int k;"


def test_hidden_paths_inside_the_workspace_are_refused_and_unlisted(box, ctx, ws):
    (ws / "private").mkdir()
    (ws / "private" / "seed.txt").write_text("secret seed\n")
    ctx.hidden = [ws / "private"]
    assert "not accessible" in err(box, ctx, "read", path="private/seed.txt")
    assert "not accessible" in err(box, ctx, "write", path="private/new.txt", content="x")
    assert "private" not in ok(box, ctx, "glob", pattern="**/*").text
    assert ok(box, ctx, "grep", pattern="secret").text.startswith("no matches")


# -- files that are not regular ----------------------------------------------------------------
@pytest.fixture
def fifo(ws: Path):
    path = ws / "kernels" / "p"
    os.mkfifo(path)
    yield path
    try:  # unblock a reader stuck in open(), should a tool have become one
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


def call_within(seconds: float, box: ToolBox, ctx: ToolContext, name: str, **args: Any) -> ToolOutput:
    """The call's result; fails if it is still running after ``seconds`` (a FIFO blocks forever)."""
    result: list[ToolOutput] = []
    thread = threading.Thread(target=lambda: result.append(call(box, ctx, name, args)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert result, f"{name} {args} still blocked after {seconds} s"
    return result[0]


def test_a_fifo_is_refused_without_blocking(box, ctx, ws, fifo):
    (ws / "kernels" / "k.cpp").write_text("int k;\n")
    for name, args in [("read", {}), ("edit", {"old_string": "a", "new_string": "b"}),
                       ("multi_edit", {"edits": [{"old_string": "a", "new_string": "b"}]})]:
        out = call_within(5, box, ctx, name, path="kernels/p", **args)
        assert out.is_error and "not a regular file" in out.text, out.text
    out = call_within(5, box, ctx, "grep", pattern="int")
    assert not out.is_error and out.text == "kernels/k.cpp:1: int k;"
    out = call_within(5, box, ctx, "grep", pattern="int", path="kernels/p")
    assert out.text.startswith("no matches")
    assert call_within(5, box, ctx, "glob", pattern="kernels/*").text == "kernels/k.cpp"


def test_file_tools_leave_the_event_loop_free(box, ctx, ws, monkeypatch):
    from cuda_agent.agent.tools import files

    release, waited = threading.Event(), []
    real = files.read_regular

    def slow(*args: Any) -> bytes:
        waited.append(release.wait(3))  # set only by the event loop, so only if it is not blocked
        return real(*args)

    monkeypatch.setattr(files, "read_regular", slow)

    async def main() -> ToolOutput:
        task = asyncio.create_task(box.call(ToolCall("c", "read", json.dumps({"path": "model.py"})), ctx))
        await asyncio.sleep(0.05)
        release.set()  # the loop got here while read was waiting on its "disk"
        return await task

    assert "class Model" in asyncio.run(main()).text and waited == [True]


# -- glob, grep -------------------------------------------------------------------------------
def test_glob_lists_files_newest_first_and_caps_them(box, ctx, ws):
    for i in range(8):
        path = ws / "kernels" / f"k{i}.cpp"
        path.write_text("")
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    (ws / "kernels" / "notes.txt").write_text("")
    out = ok(box, ctx, "glob", pattern="**/*.cpp")
    lines = out.text.splitlines()
    assert lines[:5] == [f"kernels/k{i}.cpp" for i in (7, 6, 5, 4, 3)]
    assert "3 more files not shown" in lines[5] and out.data["matches"] == 8
    assert ok(box, ctx, "glob", pattern="*.txt", path="kernels").text == "kernels/notes.txt"
    assert "no files match" in ok(box, ctx, "glob", pattern="*.cu").text
    assert "'..'" in err(box, ctx, "glob", pattern="../*")


def test_glob_skips_links_that_lead_out(box, ctx, ws, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.cpp").write_text("")
    (ws / "kernels" / "out").symlink_to(tmp_path / "elsewhere")
    (ws / "kernels" / "in.cpp").write_text("")
    assert ok(box, ctx, "glob", pattern="kernels/*/*.cpp").text.startswith("no files match")
    assert ok(box, ctx, "glob", pattern="kernels/*.cpp").text == "kernels/in.cpp"


def test_grep_finds_lines_with_context_glob_and_case(box, ctx, ws):
    (ws / "kernels" / "a.cpp").write_text("one\ntwo\nTHREE\nfour\nfive\n")
    (ws / "kernels" / "b.h").write_text("three\n")
    (ws / "kernels" / "blob.so").write_bytes(b"three\0\0")
    out = ok(box, ctx, "grep", pattern="thr.e", ignore_case=True)
    assert out.text.splitlines() == ["kernels/a.cpp:3: THREE", "kernels/b.h:1: three"]
    assert "kernels/blob.so" in out.data["skipped"]
    assert ok(box, ctx, "grep", pattern="thr.e").text == "kernels/b.h:1: three"
    assert ok(box, ctx, "grep", pattern="e", glob="*.h").text == "kernels/b.h:1: three"
    assert ok(box, ctx, "grep", pattern="o", path="kernels/a.cpp", glob="kernels/*.cpp").text.startswith(
        "kernels/a.cpp:1: one")
    out = ok(box, ctx, "grep", pattern="THREE", context=1)
    assert out.text.splitlines() == ["kernels/a.cpp-2- two", "kernels/a.cpp:3: THREE", "kernels/a.cpp-4- four"]
    assert "no matches" in ok(box, ctx, "grep", pattern="zzz").text


def test_grep_caps_matches_and_rejects_bad_regex(box, ctx, ws):
    (ws / "many.txt").write_text("hit\n" * 20)
    out = ok(box, ctx, "grep", pattern="hit")
    assert len([l for l in out.text.splitlines() if l.startswith("many.txt:")]) == 5
    assert "stopped after 5 matching lines" in out.text
    text = err(box, ctx, "grep", pattern="foo(")
    assert "invalid regular expression" in text and "missing )" in text


def test_tool_text_is_capped_by_the_limits(box, ctx, ws):
    (ws / "big.txt").write_text("y" * 20_000 + "\n")
    out = ok(box, ctx, "read", path="big.txt")
    assert len(out.text) <= ctx.limits.max_output_chars + 200


# -- judge tools: what they read ---------------------------------------------------------------
class RecordingJudge:
    def __init__(self) -> None:
        self.seen: list[Any] = []

    async def evaluate(self, task, solution, stage):
        self.seen.append(solution)
        return Verdict("ok", stage=stage)


@pytest.mark.parametrize("plant", ["model", "kernels", "kernel_file", "nested_dir"])
def test_judge_tools_refuse_symbolic_links(box, ctx, ws, tmp_path, plant):
    secret = tmp_path / "other-episode"
    (secret / "kernels").mkdir(parents=True)
    (secret / "model_new.py").write_text("stolen = 1\n")
    (secret / "kernels" / "k.cpp").write_text("// stolen\n")
    (ws / "kernels" / "own.cpp").write_text("// own\n")
    if plant == "model":
        (ws / "model_new.py").unlink()
        (ws / "model_new.py").symlink_to(secret / "model_new.py")
        link = "model_new.py"
    elif plant == "kernels":
        shutil.rmtree(ws / "kernels")
        (ws / "kernels").symlink_to(secret / "kernels")
        link = "kernels"
    elif plant == "kernel_file":
        (ws / "kernels" / "k.cpp").symlink_to(secret / "kernels" / "k.cpp")
        link = "kernels/k.cpp"
    else:
        (ws / "kernels" / "sub").mkdir()
        (ws / "kernels" / "sub" / "deep").symlink_to(secret / "kernels")
        link = "kernels/sub/deep"
    ctx.judge = RecordingJudge()
    for stage in ("compile", "verify", "profile"):
        out = call(box, ctx, stage)
        assert out.is_error and out.verdict is None and out.data["status"] == "symlink"
        assert f"{link} is a symbolic link" in out.text and "regular file" in out.text
        assert "stolen" not in out.text and out.data["links"] == [link]
    assert ctx.judge.seen == []


def test_judge_tools_take_a_workspace_without_links(box, ctx, ws):
    (ws / "kernels" / "own.cpp").write_text("// own\n")
    ctx.judge = RecordingJudge()
    out = call(box, ctx, "compile")
    assert not out.is_error and out.verdict["status"] == "ok"
    assert ctx.judge.seen[0].files == {"model_new.py": "class ModelNew: pass\n", "kernels/own.cpp": "// own\n"}


# -- judge tools, end to end on the cpu backend -----------------------------------------------
@pytest.fixture(scope="module")
def tools_pool(judge_config):
    with LocalJudgePool(judge_config(), max_concurrent=2) as pool:
        yield pool


@pytest.fixture
def judged_ctx(task, tools_pool, tmp_path) -> ToolContext:
    root = create_workspace(task, tmp_path / "judged", "cpu", cache_dir=tmp_path / "registry")
    return ToolContext(workspace=root, task=task, judge=tools_pool, scratch=tmp_path / "judged-scratch",
                       protected=protected_files())


def test_judge_tools_report_a_workspace_without_kernels(box, judged_ctx):
    shutil.rmtree(judged_ctx.workspace / "kernels")
    (judged_ctx.workspace / "model_new.py").unlink()
    out = call(box, judged_ctx, "compile")
    assert out.is_error and "no model_new.py" in out.text and out.verdict is None


@pytest.mark.slow
@pytest.mark.timing  # an honest profile paid: a loaded machine may rightly withhold or doubt it
def test_compile_error_then_verify_then_profile(box, judged_ctx):
    root = judged_ctx.workspace
    shutil.copytree(FIXTURES / "compile_error" / "kernels", root / "kernels", dirs_exist_ok=True)
    shutil.copy(FIXTURES / "compile_error" / "model_new.py", root / "model_new.py")
    out = call(box, judged_ctx, "compile")
    assert out.is_error and out.verdict["status"] == "compile_error"
    assert out.text.startswith("compile: compile_error") and "compiler output" in out.text
    assert "error" in out.text.lower() and out.solution is not None

    shutil.rmtree(root / "kernels")
    shutil.copytree(FIXTURES / "correct" / "kernels", root / "kernels")
    shutil.copy(FIXTURES / "correct" / "model_new.py", root / "model_new.py")
    out = call(box, judged_ctx, "compile")
    assert not out.is_error and out.verdict["status"] == "ok" and "not yet verified" in out.text

    out = call(box, judged_ctx, "verify")
    assert not out.is_error and out.verdict["correct"] is True
    assert out.text.startswith("verify: ok, correct") and "checks passed" in out.text
    assert out.solution.files["model_new.py"] == (root / "model_new.py").read_text()

    out = call(box, judged_ctx, "profile")
    assert not out.is_error and out.verdict["correct"] is True and out.verdict["reward"] in (1, 2, 3)
    assert f"reward {out.verdict['reward']}" in out.text and "torch.compile" in out.text
    json.dumps(out.verdict)  # plain JSON, as trajectories store it
