"""Fitting a conversation into the context window: estimates, elision, the model's own counts."""

from __future__ import annotations

import json

from cuda_agent.agent.context import ELIDED_PREFIX, ContextBudget, elide_arguments
from cuda_agent.llm.messages import Message, ToolCall, Usage


def conversation(big: str) -> list[Message]:
    write = ToolCall("c1", "write", json.dumps({"path": "kernels/k.cpp", "content": big}))
    return [Message("system", "rules"), Message("user", "task"),
            Message("assistant", "", [write]), Message("tool", "wrote kernels/k.cpp", tool_call_id="c1"),
            Message("assistant", "", [ToolCall("c2", "read", '{"path": "kernels/k.cpp"}')]),
            Message("tool", big, tool_call_id="c2"),
            Message("assistant", "", [ToolCall("c3", "compile", "{}")]), Message("tool", "ok", tool_call_id="c3")]


def test_long_argument_strings_are_replaced_and_the_path_kept():
    shrunk = json.loads(elide_arguments(json.dumps({"path": "kernels/k.cpp", "content": "x" * 5000,
                                                    "edits": [{"old_string": "y" * 300, "new_string": "z"}]})))
    assert shrunk["path"] == "kernels/k.cpp" and "5000 characters" in shrunk["content"]
    assert "300 characters" in shrunk["edits"][0]["old_string"] and shrunk["edits"][0]["new_string"] == "z"
    assert elide_arguments('{"path": "a"}') == '{"path": "a"}'
    assert "elided" in json.loads(elide_arguments("{" + "x" * 500))  # invalid JSON stays valid after


def test_elision_shrinks_old_calls_and_results_but_keeps_the_recent_ones():
    messages = conversation("k" * 20_000)
    budget = ContextBudget(window=100_000, keep_recent=2)
    before = budget.estimate(messages, None)
    freed = budget.elide(messages, excess_tokens=10**9)
    assert set(freed) == {2, 5}  # the write call's content and the read's result
    assert json.loads(messages[2].tool_calls[0].arguments)["path"] == "kernels/k.cpp"
    assert messages[5].content.startswith(ELIDED_PREFIX)
    assert messages[7].content == "ok"
    assert budget.estimate(messages, None) == before - sum(freed.values())


def test_the_models_count_is_used_and_corrected_after_elision():
    messages = conversation("k" * 20_000)
    budget = ContextBudget(window=100_000, keep_recent=2)
    known = (len(messages) - 1, Usage(input_tokens=12_000, output_tokens=10))
    assert budget.estimate(messages, known) == 12_010 + messages[-1].estimated_tokens()
    freed = budget.elide(messages, excess_tokens=10**9)
    covered, usage = budget.after_elision(known, freed)
    assert usage.input_tokens == 12_000 - sum(freed.values())
