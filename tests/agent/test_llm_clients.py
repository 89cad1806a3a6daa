"""The LLM clients against scripted loopback servers speaking the real wire protocols, the text
tool-call protocol, retries, and a tiny local transformers model built on the spot."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest

from cuda_agent.llm import ContextOverflowError, LLMError, make_client
from cuda_agent.llm.anthropic_client import AnthropicClient, tool_input
from cuda_agent.llm.openai_client import OpenAIClient
from cuda_agent.llm.retry import RetryPolicy, TransientError, call_with_retries, http_failure, parse_retry_after
from cuda_agent.llm.text_protocol import parse_tool_calls, render_tools, to_text_messages
from cuda_agent.llm.messages import Completion, Message, ToolCall, Usage, tool_schema

from .servers import AnthropicServer, Delay, HttpError, OpenAIServer, Reply

FAST = RetryPolicy(max_retries=3, base_delay_s=0.001, max_delay_s=0.05)
TOOLS = [
    tool_schema("read", "Read a file in the workspace.",
                {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    tool_schema("bash", "Run a shell command.",
                {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
]
START = [Message("system", "You write CUDA kernels."), Message("user", "Make model.py faster.")]
BROKEN_ARGS = '{"command": "ls'


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def complete_once(client: Any, messages: list[Message], tools: list[dict[str, Any]] = TOOLS) -> Completion:
    try:
        return await client.complete(messages, tools)
    finally:
        await client.aclose()


def openai_client(server: OpenAIServer, **options: Any) -> OpenAIClient:
    options.setdefault("retry", FAST)
    return OpenAIClient("scripted-model", server.url, "test-key", **options)


def anthropic_client(server: AnthropicServer, **options: Any) -> AnthropicClient:
    options.setdefault("retry", FAST)
    return AnthropicClient("scripted-claude", "test-key", server.url, **options)


def answered(conversation: list[Message], completion: Completion, results: dict[str, str]) -> list[Message]:
    """The conversation after the assistant's turn and a tool result for each of its calls."""
    replies = [Message("tool", results[c.name], tool_call_id=c.id, name=c.name) for c in completion.message.tool_calls]
    return conversation + [completion.message] + replies


# --- OpenAI-compatible servers ----------------------------------------------------------------

def test_openai_native_tool_calls_round_trip() -> None:
    script = [Reply("Let me look.", [("read", {"path": "model.py"}), ("bash", BROKEN_ARGS)], usage=Usage(120, 30)),
              Reply("All done.", usage=Usage(200, 5)),
              Reply("cut", finish_reason="length")]

    async def episode(server: OpenAIServer) -> list[Completion]:
        client = openai_client(server, max_tokens=512, temperature=0.25)
        try:
            first = await client.complete(START, TOOLS)
            conversation = answered(START, first, {"read": "class Model: ...", "bash": "error: invalid JSON"})
            second = await client.complete(conversation, TOOLS)
            third = await client.complete(conversation + [second.message, Message("user", "More.")], TOOLS)
            return [first, second, third]
        finally:
            await client.aclose()

    with OpenAIServer(script) as server:
        first, second, third = run(episode(server))
    assert server.errors == []
    assert first.message.content == "Let me look."
    assert first.message.tool_calls == [ToolCall("call_0_0", "read", '{"path": "model.py"}'),
                                        ToolCall("call_0_1", "bash", BROKEN_ARGS)]
    assert (first.usage, first.finish_reason, first.model, first.retries) == (Usage(120, 30), "tool_calls",
                                                                              "scripted-model", 0)
    assert first.latency_s > 0
    assert (second.message.content, second.message.tool_calls, second.finish_reason) == ("All done.", [], "stop")
    assert third.finish_reason == "length"

    sent = server.requests[0]
    assert sent["tools"] == TOOLS and sent["max_tokens"] == 512 and sent["temperature"] == 0.25
    wire = server.requests[1]["messages"]
    assert wire[2]["tool_calls"][1] == {"id": "call_0_1", "type": "function",
                                        "function": {"name": "bash", "arguments": BROKEN_ARGS}}
    assert wire[3] == {"role": "tool", "tool_call_id": "call_0_0", "content": "class Model: ..."}
    assert server.conversations[1] == answered(START, first, {"read": "class Model: ...",
                                                              "bash": "error: invalid JSON"})


def test_openai_text_protocol_round_trip() -> None:
    reply = ('I will list the files.\n<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>\n'
             '<tool_call>{"name": "read", "arguments": {"path": "model.py"</tool_call>')
    script = [Reply(reply), Reply("Finished.")]

    async def episode(server: OpenAIServer) -> tuple[Completion, Completion]:
        client = openai_client(server, tool_protocol="text")
        try:
            first = await client.complete(START, TOOLS)
            conversation = answered(START, first, {"bash": "model.py", "read": "error: bad JSON"})
            return first, await client.complete(conversation, TOOLS)
        finally:
            await client.aclose()

    with OpenAIServer(script) as server:
        first, second = run(episode(server))
    assert server.errors == []
    assert first.message.content == "I will list the files."
    assert first.message.tool_calls[0] == ToolCall("call_0", "bash", '{"command": "ls"}')
    assert first.message.tool_calls[1].name == "read"  # malformed, but kept for the loop to answer
    assert first.finish_reason == "tool_calls" and second.finish_reason == "stop"
    assert all("tools" not in body for body in server.requests)
    roles = [m.role for m in server.conversations[1]]
    assert roles == ["system", "user", "assistant", "user"]
    system, _, assistant, results = server.conversations[1]
    assert system.content.startswith("You write CUDA kernels.") and "## bash" in system.content
    assert assistant.content.count("<tool_call>") == 2
    assert results.content == ('<tool_result name="bash" id="call_0">\nmodel.py\n</tool_result>\n\n'
                                '<tool_result name="read" id="call_1">\nerror: bad JSON\n</tool_result>')


def test_openai_key_from_environment_or_empty_for_local_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LLMError, match="OPENAI_API_KEY") as caught:
        OpenAIClient("gpt-x")
    assert not caught.value.transient
    with OpenAIServer([Reply("hello")]) as server:
        completion = run(complete_once(OpenAIClient("local", server.url, retry=FAST), START))
    assert completion.message.content == "hello" and server.errors == []


# --- Anthropic --------------------------------------------------------------------------------

def test_anthropic_tool_use_round_trip() -> None:
    script = [Reply("Looking.", [("read", {"path": "model.py"}), ("bash", {"command": "nvcc --version"})],
                    usage=Usage(300, 40)),
              Reply("Done.", usage=Usage(400, 3)),
              Reply("cut", finish_reason="length")]

    async def episode(server: AnthropicServer) -> list[Completion]:
        client = anthropic_client(server, max_tokens=1024, temperature=0.5)
        try:
            first = await client.complete(START, TOOLS)
            conversation = answered(START, first, {"read": "class Model: ...", "bash": "release 12.4"})
            second = await client.complete(conversation, TOOLS)
            third = await client.complete(conversation + [second.message, Message("user", "Again.")], TOOLS)
            return [first, second, third]
        finally:
            await client.aclose()

    with AnthropicServer(script) as server:
        first, second, third = run(episode(server))
    assert server.errors == []
    assert first.message.tool_calls == [ToolCall("toolu_0_0", "read", '{"path": "model.py"}'),
                                        ToolCall("toolu_0_1", "bash", '{"command": "nvcc --version"}')]
    assert (first.message.content, first.usage, first.finish_reason) == ("Looking.", Usage(300, 40), "tool_calls")
    assert first.model == "scripted-claude"
    assert (second.message.content, second.finish_reason) == ("Done.", "stop")
    assert third.finish_reason == "length"

    body = server.requests[1]
    assert body["system"] == "You write CUDA kernels." and body["max_tokens"] == 1024
    assert body["tools"][0] == {"name": "read", "description": "Read a file in the workspace.",
                                "input_schema": TOOLS[0]["function"]["parameters"]}
    assert [turn["role"] for turn in body["messages"]] == ["user", "assistant", "user"]
    results = body["messages"][2]["content"]
    assert [(b["type"], b["tool_use_id"]) for b in results] == [("tool_result", "toolu_0_0"),
                                                               ("tool_result", "toolu_0_1")]
    assert server.conversations[1] == answered(START, first, {"read": "class Model: ...", "bash": "release 12.4"})
    assert [turn["role"] for turn in server.requests[2]["messages"]] == ["user", "assistant", "user", "assistant",
                                                                         "user"]


def test_anthropic_sends_invalid_arguments_as_best_object() -> None:
    assert tool_input('{"path": "a.cu"}') == {"path": "a.cu"}
    assert tool_input('{"path": "a.cu"} trailing words') == {"path": "a.cu"}
    assert tool_input(BROKEN_ARGS) == {}
    assert tool_input('["not", "an", "object"]') == {}
    conversation = START + [Message("assistant", "", [ToolCall("toolu_x", "bash", BROKEN_ARGS)]),
                            Message("tool", "error: invalid JSON", tool_call_id="toolu_x", name="bash"),
                            Message("user", "Try again.")]
    with AnthropicServer([Reply("ok")]) as server:
        run(complete_once(anthropic_client(server), conversation))
    turns = server.requests[0]["messages"]
    assert turns[1]["content"] == [{"type": "tool_use", "id": "toolu_x", "name": "bash", "input": {}}]
    assert [b["type"] for b in turns[2]["content"]] == ["tool_result", "text"]


def test_anthropic_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(LLMError, match="ANTHROPIC_API_KEY") as caught:
        AnthropicClient("claude-x")
    assert not caught.value.transient


# --- retries and errors -----------------------------------------------------------------------

@pytest.mark.parametrize("server_class", [OpenAIServer, AnthropicServer])
def test_rate_limit_waits_for_retry_after(server_class: type) -> None:
    with server_class([HttpError(429, "slow down", retry_after=0.3), Reply("ok")]) as server:
        client = make_client("openai" if server_class is OpenAIServer else "anthropic", "m", base_url=server.url,
                             api_key="k", retry=RetryPolicy(max_retries=2, base_delay_s=0.001, max_delay_s=5))
        completion = run(complete_once(client, START))
    assert (completion.message.content, completion.retries) == ("ok", 1)
    assert completion.latency_s >= 0.3
    assert len(server.requests) == 2 and server.errors == []


def test_retry_after_is_capped_by_max_delay() -> None:
    with OpenAIServer([HttpError(429, "come back in an hour", retry_after=3600), Reply("ok")]) as server:
        started = time.perf_counter()
        completion = run(complete_once(openai_client(server), START))
    assert completion.retries == 1 and time.perf_counter() - started < 5


@pytest.mark.parametrize("server_class", [OpenAIServer, AnthropicServer])
def test_server_error_then_success(server_class: type) -> None:
    with server_class([HttpError(500, "boom"), HttpError(503, "busy"), Reply("ok")]) as server:
        client = (openai_client if server_class is OpenAIServer else anthropic_client)(server)
        completion = run(complete_once(client, START))
    assert (completion.message.content, completion.retries) == ("ok", 2)


@pytest.mark.parametrize("server_class", [OpenAIServer, AnthropicServer])
def test_server_error_forever_gives_up(server_class: type) -> None:
    with server_class(lambda messages, index: HttpError(500, "still broken")) as server:
        client = (openai_client if server_class is OpenAIServer else anthropic_client)(server)
        with pytest.raises(LLMError, match="failed on all 4 attempts.*still broken") as caught:
            run(complete_once(client, START))
    assert not isinstance(caught.value, ContextOverflowError)
    assert caught.value.transient  # the outage may pass: the loop may wait and try again
    assert len(server.requests) == FAST.max_retries + 1


@pytest.mark.parametrize("server_class", [OpenAIServer, AnthropicServer])
def test_rate_limit_forever_is_transient(server_class: type) -> None:
    with server_class(lambda messages, index: HttpError(429, "slow down")) as server:
        client = (openai_client if server_class is OpenAIServer else anthropic_client)(server)
        with pytest.raises(LLMError, match="failed on all 4 attempts.*slow down") as caught:
            run(complete_once(client, START))
    assert caught.value.transient and len(server.requests) == FAST.max_retries + 1


def closed_port() -> int:
    """A loopback port that nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_server_that_never_answered_and_refuses_fails_at_once(provider: str) -> None:
    """Nothing listens at the address (a server not started, a mistyped port): no backoff."""
    suffix = "/v1" if provider == "openai" else ""
    client = make_client(provider, "m", base_url=f"http://127.0.0.1:{closed_port()}{suffix}", api_key="k",
                         retry=RetryPolicy(max_retries=6, base_delay_s=5.0, max_delay_s=60.0))
    started = time.monotonic()
    with pytest.raises(LLMError, match="could not be reached.*Start the server") as caught:
        run(complete_once(client, START))
    assert time.monotonic() - started < 5.0  # the first backoff alone would take 2.5-5 s
    assert not caught.value.transient


def test_a_refused_connection_is_retried_once_the_server_has_answered() -> None:
    """A server that answered before and now refuses is restarting: worth the retries."""
    attempts = []

    async def refused() -> str:
        attempts.append(1)
        raise TransientError("could not connect (refused)", unreachable=True)

    policy = RetryPolicy(max_retries=2, base_delay_s=0.001, max_delay_s=0.01)
    with pytest.raises(LLMError, match="failed on all 3 attempts") as caught:
        run(call_with_retries(refused, policy, retry_unreachable=True))
    assert caught.value.transient and len(attempts) == 3
    with pytest.raises(LLMError, match="could not be reached") as caught:
        run(call_with_retries(refused, policy, retry_unreachable=False))
    assert not caught.value.transient and len(attempts) == 4


def test_client_timeout_is_retried() -> None:
    with OpenAIServer([Delay(10.0, Reply("too late")), Reply("ok")]) as server:
        completion = run(complete_once(openai_client(server, timeout_s=1.0), START))
    assert (completion.message.content, completion.retries) == ("ok", 1)


@pytest.mark.parametrize("server_class", [OpenAIServer, AnthropicServer])
def test_client_timeout_forever_gives_up(server_class: type) -> None:
    policy = RetryPolicy(max_retries=1, base_delay_s=0.001, max_delay_s=0.01)
    with server_class(lambda messages, index: Delay(10.0, Reply("too late"))) as server:
        client = (openai_client if server_class is OpenAIServer else anthropic_client)(server, timeout_s=1.0,
                                                                                        retry=policy)
        with pytest.raises(LLMError, match="failed on all 2 attempts.*timeout_s") as caught:
            run(complete_once(client, START))
        # The client gives up on its own clock; on a loaded host the server may read the last request
        # after that, so wait for it (bounded) before shutting the server down.
        deadline = time.monotonic() + 10.0
        while len(server.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert caught.value.transient
    assert len(server.requests) == 2


@pytest.mark.parametrize("error", [
    HttpError(400, "This model's maximum context length is 4096 tokens. However, you requested 9000 tokens."),
    HttpError(400, "Request too big.", code="context_length_exceeded"),
])
def test_openai_context_overflow(error: HttpError) -> None:
    with OpenAIServer([error]) as server:
        with pytest.raises(ContextOverflowError, match="context window") as caught:
            run(complete_once(openai_client(server), START))
    assert not caught.value.transient
    assert len(server.requests) == 1


def test_anthropic_context_overflow() -> None:
    with AnthropicServer([HttpError(400, "prompt is too long: 210000 tokens > 200000 maximum")]) as server:
        with pytest.raises(ContextOverflowError, match="prompt is too long"):
            run(complete_once(anthropic_client(server), START))
    assert len(server.requests) == 1


@pytest.mark.parametrize("server_class", [OpenAIServer, AnthropicServer])
def test_unauthorised_is_not_retried(server_class: type) -> None:
    with server_class([HttpError(401, "invalid x-api-key")]) as server:
        client = (openai_client if server_class is OpenAIServer else anthropic_client)(server)
        with pytest.raises(LLMError, match="HTTP 401.*invalid x-api-key.*API key") as caught:
            run(complete_once(client, START))
    assert not isinstance(caught.value, ContextOverflowError)
    assert len(server.requests) == 1


def test_other_client_errors_are_not_retried() -> None:
    with OpenAIServer([HttpError(404, "The model `nope` does not exist")]) as server:
        with pytest.raises(LLMError, match="HTTP 404.*model name"):
            run(complete_once(openai_client(server), START))
    assert len(server.requests) == 1


@pytest.mark.parametrize("server_class", [OpenAIServer, AnthropicServer])
@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_are_permanent(server_class: type, status: int) -> None:
    with server_class([HttpError(status, "refused")]) as server:
        client = (openai_client if server_class is OpenAIServer else anthropic_client)(server)
        with pytest.raises(LLMError, match=f"HTTP {status}.*refused") as caught:
            run(complete_once(client, START))
    assert type(caught.value) is LLMError and not caught.value.transient
    assert len(server.requests) == 1


def test_exhausted_quota_is_permanent() -> None:
    with OpenAIServer([HttpError(429, "You exceeded your current quota", code="insufficient_quota")]) as server:
        with pytest.raises(LLMError, match="out of quota") as caught:
            run(complete_once(openai_client(server), START))
    assert not caught.value.transient and len(server.requests) == 1


def test_llm_error_transient_flag() -> None:
    assert LLMError("down").transient is False
    assert LLMError("down", transient=True).transient is True
    assert LLMError("down", True).transient is False  # keyword-only: a second positional is just an arg
    assert ContextOverflowError("too long").transient is False
    assert str(LLMError("down", transient=True)) == "down"


def test_exhausted_script_is_recorded() -> None:
    with OpenAIServer([Reply("only one")]) as server:
        client = openai_client(server, retry=RetryPolicy(max_retries=0))
        run(complete_once(client, START))
        with pytest.raises(LLMError, match="script exhausted"):
            run(complete_once(openai_client(server, retry=RetryPolicy(max_retries=0)), START))
    assert server.errors == ["script exhausted: no step for request 1"]


def test_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "7"}) == 7.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "7"}) == 0.25
    assert 8 < parse_retry_after({"retry-after": formatdate(time.time() + 10, usegmt=True)}) <= 10
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_failure_classification() -> None:
    assert isinstance(http_failure("p", 429, "slow down"), TransientError)
    assert isinstance(http_failure("p", 529, "overloaded"), TransientError)
    quota = http_failure("p", 429, "You exceeded your current quota", code="insufficient_quota")
    assert type(quota) is LLMError and "quota" in str(quota)
    assert isinstance(http_failure("p", 400, "The input (9000 tokens) is longer than the model's context length"),
                      ContextOverflowError)
    assert type(http_failure("p", 400, "temperature must be at most 2")) is LLMError


def test_backoff_grows_with_jitter_and_cap() -> None:
    policy = RetryPolicy(max_retries=10, base_delay_s=1.0, max_delay_s=8.0)
    for retry, ceiling in [(0, 1.0), (1, 2.0), (2, 4.0), (5, 8.0)]:
        delays = [policy.backoff_s(retry) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1
    assert policy.backoff_s(0, retry_after_s=3.0) == 3.0
    assert policy.backoff_s(0, retry_after_s=100.0) == 8.0


# --- make_client ------------------------------------------------------------------------------

def test_make_client_builds_each_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    openai = make_client("openai", "m", base_url="http://127.0.0.1:9/v1", tool_protocol="text", max_tokens=5)
    anthropic = make_client("anthropic", "c", api_key="k", max_tokens=5)
    assert isinstance(openai, OpenAIClient) and openai.tool_protocol == "text" and openai.max_tokens == 5
    assert isinstance(anthropic, AnthropicClient) and anthropic.max_tokens == 5
    run(openai.aclose())
    run(anthropic.aclose())


@pytest.mark.parametrize("call, message", [
    (lambda: make_client("gemini", "m"), "choose one of openai, anthropic, hf"),
    (lambda: make_client("openai", "m", base_url="http://x", tool_protocol="json"), "native, text"),
    (lambda: make_client("openai", "m", base_url="http://x", max_token=5), "max_token.*accepts.*max_tokens"),
    (lambda: make_client("anthropic", "m", api_key="k", tool_protocol="text"), "natively"),
    (lambda: make_client("hf", "m", base_url="http://x"), "local transformers model"),
])
def test_make_client_errors(call: Any, message: str) -> None:
    with pytest.raises(LLMError, match=message) as caught:
        call()
    assert not caught.value.transient


def test_tool_protocols_defined_once() -> None:
    from cuda_agent.llm import TOOL_PROTOCOLS, openai_client, text_protocol

    assert TOOL_PROTOCOLS is text_protocol.TOOL_PROTOCOLS == ("native", "text")
    assert not hasattr(openai_client, "TOOL_PROTOCOLS")
    with pytest.raises(LLMError, match="native, text"):
        OpenAIClient("m", "http://127.0.0.1:9/v1", tool_protocol="json")


# --- the text protocol ------------------------------------------------------------------------

def test_parse_several_calls() -> None:
    text = ('First I read.\n<tool_call>{"name": "read", "arguments": {"path": "a.cu"}}</tool_call>\n'
            'Then I build.\n<tool_call>\n```json\n{"name": "compile", "arguments": {}}\n```\n</tool_call>')
    content, calls = parse_tool_calls(text)
    assert content == "First I read.\n\nThen I build."
    assert calls == [ToolCall("call_0", "read", '{"path": "a.cu"}'), ToolCall("call_1", "compile", "{}")]


def test_parse_malformed_blocks_are_kept() -> None:
    bad_json = '{"name": "bash", "arguments": {"command": "ls"'
    no_name = '{"arguments": {"command": "ls"}}'
    _, calls = parse_tool_calls(f"<tool_call>{bad_json}</tool_call><tool_call>{no_name}</tool_call>"
                                "<tool_call>not json at all</tool_call><tool_call>{\"name\": \"read\"")
    assert calls == [ToolCall("call_0", "bash", bad_json), ToolCall("call_1", "", no_name),
                     ToolCall("call_2", "", "not json at all"), ToolCall("call_3", "read", '{"name": "read"')]


def test_parse_without_calls_and_string_arguments() -> None:
    assert parse_tool_calls("  The kernel is done.\n") == ("The kernel is done.", [])
    _, calls = parse_tool_calls('<tool_call>{"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}</tool_call>')
    assert calls == [ToolCall("call_0", "bash", '{"command": "ls"}')]


def test_render_tools_describes_each_tool() -> None:
    section = render_tools(TOOLS)
    assert "<tool_call>" in section and "## read" in section and "## bash" in section
    assert '"required": [\n  "command"\n ]' in section


def test_text_messages_round_trip() -> None:
    calls = [ToolCall("call_0", "read", '{"path": "a.cu"}'), ToolCall("call_1", "bash", BROKEN_ARGS),
             ToolCall("call_2", "", "garbage")]
    conversation = START + [Message("assistant", "Reading.", calls)] + [
        Message("tool", f"result {i}", tool_call_id=c.id, name=c.name or None) for i, c in enumerate(calls)
    ] + [Message("user", "Keep going.")]
    plain = to_text_messages(conversation, TOOLS)
    assert [m.role for m in plain] == ["system", "user", "assistant", "user"]
    assert all(not m.tool_calls and m.tool_call_id is None for m in plain)
    assert plain[0].content.startswith("You write CUDA kernels.\n\n# Tools")
    content, parsed = parse_tool_calls(plain[2].content)
    assert content == "Reading."
    assert [(c.name, c.arguments) for c in parsed] == [("read", '{"path": "a.cu"}'), ("bash", BROKEN_ARGS),
                                                       ("", "garbage")]
    assert plain[3].content.count("<tool_result") == 3 and plain[3].content.endswith("Keep going.")
    assert '<tool_result name="bash" id="call_1">\nresult 1\n</tool_result>' in plain[3].content


def test_text_messages_add_a_system_message_when_missing() -> None:
    plain = to_text_messages([Message("user", "hi")], TOOLS)
    assert [m.role for m in plain] == ["system", "user"] and plain[0].content.startswith("# Tools")
    assert to_text_messages([Message("user", "hi")], []) == [Message("user", "hi")]


# --- a local transformers model ---------------------------------------------------------------

CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
CORPUS = ["def forward(self, x): return torch.relu(x @ self.weight + self.bias)",
          "__global__ void relu_kernel(const float* x, float* y, int n) { int i = blockIdx.x; }",
          "<|system|> <|user|> <|assistant|> <tool_call> </tool_call> {\"name\": \"bash\"}",
          "You write CUDA kernels. Make model.py faster. The kernel is correct and fast."] * 20
POSITIONS = 256


def build_tiny_model(directory: Path, chat_template: str | None) -> Path:
    """A random 2-layer GPT-2 and a byte-level BPE trained here; it never emits end-of-text."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>")
    if chat_template:
        tokenizer.chat_template = chat_template
    tokenizer.save_pretrained(directory)
    torch.manual_seed(0)
    eos = tokenizer.eos_token_id
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=POSITIONS, n_embd=64, n_layer=2, n_head=2,
                        bos_token_id=eos, eos_token_id=eos)
    model = GPT2LMHeadModel(config)
    with torch.no_grad():
        model.transformer.wte.weight[eos] = 0.0  # tied head: the end-of-text logit is always 0, never the max
    model.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    return build_tiny_model(tmp_path_factory.mktemp("tiny-gpt2"), CHAT_TEMPLATE)


@pytest.mark.slow  # loads transformers and builds a model
def test_hf_generates_and_counts_tokens_exactly(tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    from cuda_agent.llm import HFClient

    client = make_client("hf", str(tiny_model), device="cpu", max_new_tokens=7)
    assert isinstance(client, HFClient)
    completion = run(complete_once(client, START, []))
    again = run(complete_once(HFClient(str(tiny_model), device="cpu", max_new_tokens=7), START, []))
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    expected = tokenizer.apply_chat_template([m.to_dict() for m in START], add_generation_prompt=True,
                                             tokenize=False)
    assert expected.endswith("<|assistant|>\n")
    assert completion.usage == Usage(len(tokenizer(expected)["input_ids"]), 7)
    assert completion.finish_reason == "length"
    assert completion.message == again.message  # greedy decoding is deterministic
    assert completion.model == str(tiny_model) and completion.latency_s > 0


@pytest.mark.slow  # loads transformers and builds a model
def test_hf_context_window(tiny_model: Path) -> None:
    from cuda_agent.llm import HFClient

    client = HFClient(str(tiny_model), device="cpu", max_new_tokens=5)
    with pytest.raises(ContextOverflowError, match=f"at most {POSITIONS}"):
        run(client.complete([Message("user", "relu kernel " * 200)], []))
    # Near the end of the window only the room left is generated, and that is a cut-off.
    for repeats in range(POSITIONS):
        near_end = [Message("user", "kernel " * repeats)]
        prompt = len(client.encode(to_text_messages(near_end, [])))
        if prompt >= POSITIONS - 3:
            break
    completion = run(complete_once(client, near_end, []))
    assert prompt < POSITIONS
    assert completion.usage == Usage(prompt, POSITIONS - prompt) and completion.finish_reason == "length"


@pytest.mark.slow  # loads transformers and builds a model
def test_hf_falls_back_to_a_plain_template(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from cuda_agent.llm import HFClient

    directory = build_tiny_model(tmp_path, chat_template=None)
    completion = run(complete_once(HFClient(str(directory), device="cpu", max_new_tokens=3), START, []))
    tokenizer = AutoTokenizer.from_pretrained(directory)
    plain = "<|system|>\nYou write CUDA kernels.\n<|user|>\nMake model.py faster.\n<|assistant|>\n"
    assert completion.usage == Usage(len(tokenizer(plain)["input_ids"]), 3)
    assert completion.finish_reason == "length"


class ThreadRecorder:
    """Wraps a tokenizer and notes which threads call it."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.threads: set[int] = set()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.threads.add(threading.get_ident())
        return self.tokenizer(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.tokenizer, name)
        if name not in ("apply_chat_template", "decode"):
            return value

        def recorded(*args: Any, **kwargs: Any) -> Any:
            self.threads.add(threading.get_ident())
            return value(*args, **kwargs)
        return recorded


@pytest.mark.slow  # loads transformers and builds a model
def test_hf_works_off_the_event_loop_and_holds_one_thread(tiny_model: Path) -> None:
    from cuda_agent.llm import HFClient

    client = HFClient(str(tiny_model), device="cpu", max_new_tokens=3)
    recorder = ThreadRecorder(client.tokenizer)
    client.tokenizer = recorder
    generate = client._model.generate
    events: list[str] = []
    running = [0, 0]  # now, most at once

    def slow_generate(*args: Any, **kwargs: Any) -> Any:
        running[0] += 1
        running[1] = max(running)
        try:
            time.sleep(0.3)
            return generate(*args, **kwargs)
        finally:
            running[0] -= 1
            events.append("generated")

    client._model.generate = slow_generate

    async def episodes() -> list[Completion]:
        # Two workers: waiting episodes that each held one would leave none for anybody else.
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=2))
        calls = [asyncio.create_task(client.complete(START, [])) for _ in range(3)]
        await asyncio.sleep(0.05)  # all three are under way, two of them waiting their turn
        await asyncio.to_thread(events.append, "other thread work")
        return await asyncio.gather(*calls)

    loop_thread = threading.get_ident()
    completions = run(episodes())
    assert recorder.threads and loop_thread not in recorder.threads  # template, encode, decode
    assert running[1] == 1  # one generation at a time
    assert events == ["other thread work", "generated", "generated", "generated"]
    assert len({c.message.content for c in completions}) == 1
    assert all(c.usage.output_tokens == 3 and c.latency_s > 0 for c in completions)
    # The turn lock belongs to its event loop: a client outlives the loop it was first used in.
    assert run(complete_once(client, START, [])).message == completions[0].message
