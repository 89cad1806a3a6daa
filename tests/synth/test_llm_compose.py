"""The LLM composer against a scripted OpenAI-compatible server, through the real ``openai`` SDK:
good replies become candidates that run, bad ones are sent back with the exact problem."""

from __future__ import annotations

import ast
import asyncio
from typing import Any

import pytest
import torch

from agent.servers import HttpError, OpenAIServer, Reply
from cuda_agent.llm import LLMError
from cuda_agent.llm.retry import RetryPolicy
from cuda_agent.errors import SynthesisError
from cuda_agent.synth.llm_compose import (
    CompositionError,
    LLMComposer,
    check_imports,
    extract_code,
    make_llm_composer,
    render_value,
)
from cuda_agent.synth.records import Candidate, Seed
from cuda_agent.task import validate_task_source

FAST = RetryPolicy(max_retries=2, base_delay_s=0.001, max_delay_s=0.01)

SEEDS = [
    Seed("nn.Conv2d", "module", "torch.nn.Conv2d", ranks=(4,),
         args={"in_channels": "$C", "out_channels": 8, "kernel_size": 3}, heavy=True),
    Seed("F.gelu", "functional", "torch.nn.functional.gelu"),
    Seed("torch.cumsum", "tensor", "torch.cumsum", args={"dim": -1}),
]

GOOD = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        x = self.conv(x)
        x = F.gelu(x)
        return torch.cumsum(x, dim=-1)


batch_size = 2
in_channels = 3
out_channels = 8
kernel_size = 3
height = 16
width = 16


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
'''

NO_CUMSUM = GOOD.replace("return torch.cumsum(x, dim=-1)", "return x")
WITH_OS = GOOD.replace("import torch\n", "import os\nimport torch\n", 1)
RANDOM_FORWARD = GOOD.replace("x = F.gelu(x)", "x = F.gelu(x) + torch.rand_like(x)")


def fenced(code: str) -> str:
    return f"Here is the task.\n\n```python\n{code}```\n\nIt applies the operators in order."


def compose(server: OpenAIServer, seeds: list[Seed] = SEEDS, **settings: Any) -> Candidate:
    composer = make_llm_composer("scripted-model", base_url=server.url, api_key="test-key", retry=FAST,
                                 timeout_s=30.0, **settings)

    async def go() -> Candidate:
        try:
            return await composer.compose(seeds, index=7, target_ms=12.0)
        finally:
            await composer.aclose()

    return asyncio.run(go())


def run_task(code: str) -> torch.Tensor:
    namespace: dict[str, Any] = {"__name__": "composed_task"}
    exec(compile(code, "composed_task.py", "exec"), namespace)
    model = namespace["Model"](*namespace["get_init_inputs"]())
    return model(*namespace["get_inputs"]())


def test_good_reply_becomes_a_runnable_candidate() -> None:
    with OpenAIServer([Reply(fenced(GOOD))]) as server:
        candidate = compose(server)
    assert server.errors == [] and len(server.requests) == 1

    assert candidate.code == GOOD
    assert candidate.index == 7
    assert candidate.ops == ["nn.Conv2d", "F.gelu", "torch.cumsum"]
    assert candidate.data_source == "torch#3"
    assert candidate.composer == "llm:scripted-model"
    assert candidate.input_shapes == [] and candidate.estimate_ms is None
    validate_task_source(candidate.code, "candidate")
    out = run_task(candidate.code)
    assert out.shape == (2, 8, 14, 14) and out.dtype == torch.float32


def test_prompt_describes_every_seed_and_the_target() -> None:
    with OpenAIServer([Reply(fenced(GOOD))]) as server:
        compose(server, window_ms=(2.0, 50.0))
    request = server.requests[0]
    assert "tools" not in request
    system, user = server.conversations[0]
    assert (system.role, user.role) == ("system", "user")
    assert "class Model(nn.Module)" in system.content and "get_init_inputs()" in system.content
    for seed in SEEDS:
        assert f"`{seed.name}`" in user.content and f"`{seed.target}`" in user.content
    # Listed in order, with the shape token spelled out rather than left as "$C".
    positions = [user.content.index(f"`{seed.name}`") for seed in SEEDS]
    assert positions == sorted(positions)
    assert "in_channels=<channels of its input (dim 1)>" in user.content and "$C" not in user.content
    assert "dim=-1" in user.content
    assert "about 12 ms" in user.content and "2 to 50 ms" in user.content


def test_missing_operator_is_named_and_the_second_reply_accepted() -> None:
    with OpenAIServer([Reply(fenced(NO_CUMSUM)), Reply(fenced(GOOD))]) as server:
        candidate = compose(server)
    assert server.errors == [] and len(server.requests) == 2
    assert candidate.code == GOOD

    retry = server.conversations[1]
    assert [m.role for m in retry] == ["system", "user", "assistant", "user"]
    assert retry[2].content == fenced(NO_CUMSUM)
    feedback = retry[3].content
    assert "torch.cumsum" in feedback and "does not use" in feedback
    assert "nn.Conv2d" not in feedback.split(";")[0]  # only the missing one is named as missing


def test_foreign_import_is_refused_with_the_reason() -> None:
    with OpenAIServer([Reply(fenced(WITH_OS)), Reply(fenced(GOOD))]) as server:
        candidate = compose(server)
    assert candidate.code == GOOD
    feedback = server.conversations[1][-1].content
    assert "`os`" in feedback and "may import only torch" in feedback and "executed" in feedback


def test_randomness_in_forward_is_refused() -> None:
    with OpenAIServer([Reply(fenced(RANDOM_FORWARD)), Reply(fenced(GOOD))]) as server:
        compose(server)
    feedback = server.conversations[1][-1].content
    assert "rand_like" in feedback and "deterministic" in feedback


def test_three_bad_replies_raise_composition_error() -> None:
    script = [Reply("I cannot help with that."), Reply(fenced(WITH_OS)), Reply(fenced(NO_CUMSUM))]
    with OpenAIServer(script) as server:
        with pytest.raises(CompositionError) as caught:
            compose(server)
    assert len(server.requests) == 3 and server.errors == []
    assert isinstance(caught.value, SynthesisError)
    assert "3 attempt(s)" in str(caught.value) and "torch.cumsum" in str(caught.value)
    assert len(caught.value.problems) == 3
    assert "no ```python code block" in caught.value.problems[0]
    assert "`os`" in caught.value.problems[1]
    # Each retry carries the whole exchange so far.
    assert [m.role for m in server.conversations[2]] == ["system", "user", "assistant", "user", "assistant", "user"]


def test_format_errors_are_reported_from_validation() -> None:
    no_inputs = GOOD.split("def get_inputs")[0] + "def get_init_inputs():\n    return [3, 8, 3]\n"
    with OpenAIServer([Reply(fenced(no_inputs)), Reply(fenced(GOOD))]) as server:
        compose(server)
    assert "`get_inputs()`" in server.conversations[1][-1].content


def test_truncated_reply_is_told_to_be_shorter() -> None:
    cut = Reply("Let me explain at length first.\n```python\nimport torch\n", finish_reason="length")
    with OpenAIServer([cut, Reply(fenced(GOOD))]) as server:
        compose(server)
    assert "cut off at the output limit" in server.conversations[1][-1].content


def test_client_errors_propagate_unchanged() -> None:
    with OpenAIServer([HttpError(401, "invalid api key")]) as server:
        with pytest.raises(LLMError) as caught:
            compose(server)
    assert not isinstance(caught.value, CompositionError)
    assert caught.value.transient is False


def test_transformers_seed_may_import_its_own_module_only() -> None:
    seed = Seed("LlamaMLP", "transformers", "transformers.models.llama.modeling_llama.LlamaMLP")
    own = ast.parse("from transformers.models.llama.modeling_llama import LlamaMLP\n")
    other = ast.parse("from transformers import AutoModel\n")
    assert check_imports(own, [seed]) == []
    assert "`transformers`" in check_imports(other, [seed])[0]
    assert "`transformers.models.llama.modeling_llama`" in check_imports(own, SEEDS)[0]


def test_dangerous_builtins_and_torch_file_access_are_refused() -> None:
    problems = check_imports(ast.parse("w = torch.load('w.pt')\nm = __import__('os')\n"), SEEDS)
    assert len(problems) == 1 and "`__import__`" in problems[0] and "`load`" in problems[0]


def test_code_extraction() -> None:
    two = "```python\nx = 1\n```\nor better:\n```python\nclass A: pass\n```"
    assert extract_code(two) == "class A: pass\n"
    assert extract_code("```\nclass A: pass\n```") == "class A: pass\n"
    assert extract_code(GOOD) == GOOD                 # a reply that is pure code
    assert extract_code("Sure! The model is simple.") is None
    assert extract_code("```python\nclass A:\n    pass") is None  # cut off before the fence closed


def test_shape_tokens_render_as_derived_values() -> None:
    assert render_value("$C") == "<channels of its input (dim 1)>"
    assert render_value(["$last"]) == "[<size of the last dim of its input>]"
    assert render_value("$H") == "<derived from its input ($H)>"
    assert render_value((3,)) == "(3,)" and render_value("same") == "'same'"


def test_composer_rejects_bad_settings() -> None:
    with pytest.raises(SynthesisError):
        LLMComposer(object(), max_attempts=0)  # type: ignore[arg-type]
    with pytest.raises(SynthesisError):
        LLMComposer(object(), window_ms=(10.0, 1.0))  # type: ignore[arg-type]
