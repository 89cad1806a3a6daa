"""Composing tasks through a language model, as the paper does: the model is handed up to five
seed operators and writes one KernelBench-format program that applies them in sequence.

A reply is only accepted after static checks: it is a KernelBench task, it uses every requested
operator, it imports nothing but torch and math, and its Model draws no random numbers outside
``__init__``. The pipeline executes what comes back, so anything else is sent back to the model
with the exact problem, up to ``max_attempts`` times. These checks keep obvious hazards out; they
are no sandbox, and the pipeline still runs candidates in worker processes.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Iterable

from ..llm import LLMClient, make_client
from ..llm.messages import Message
from ..errors import SynthesisError, TaskFormatError
from ..task import validate_task_source
from .estimate import H100
from .records import Candidate, Seed

# --- Prompt text ------------------------------------------------------------------------------

SYSTEM_PROMPT = """\
You write reference programs for a benchmark of GPU kernel optimisation tasks. Each program is a \
small PyTorch model in the KernelBench format; engineers later replace it with CUDA kernels that \
must reproduce its output exactly, only faster.

A program is one self-contained Python file:
- Imports: only `import torch`, `import torch.nn as nn`, `import torch.nn.functional as F` and \
`import math`. Nothing else: the program is executed automatically.
- `class Model(nn.Module)` with `__init__(self, ...)` and `forward(self, ...)`. `__init__` takes \
plain Python values (ints, floats, tuples), builds the layers and any `nn.Parameter`s; `forward` \
takes the input tensors and returns one tensor.
- Module-level size constants in lower case (`batch_size = 16`, `channels = 64`, ...), used by \
the two functions below.
- `get_inputs()` returns the list of forward inputs: float32 tensors made with `torch.randn` or \
`torch.rand` from the size constants.
- `get_init_inputs()` returns the list of constructor arguments, in order.
- `forward` is deterministic: no dropout, no random sampling (`torch.rand*`, `bernoulli`, \
`multinomial`, `normal_`, ...). Randomness belongs only in `get_inputs()` and in parameter \
initialisation.
- No printing, no file or network access, no `if __name__ == "__main__":` block, no tests.

An example of the format (for other operators than yours):
```python
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size)
        self.scale = nn.Parameter(torch.randn(out_channels, 1))

    def forward(self, x):
        x = self.conv(x)
        x = F.softplus(x) * self.scale
        return torch.logsumexp(x, dim=-1)


batch_size = 64
in_channels = 32
out_channels = 64
kernel_size = 5
length = 4096


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
```

Answer with the complete program in a single ```python block."""

USER_PROMPT = """\
Write a task whose Model applies these {count} operators one after another, in this order: the \
first to the input from `get_inputs()`, each later one to the previous one's output.

{operators}

Values written <like this> are not fixed: they are derived from the tensor that operator receives, \
so set them to match the shapes you choose. Every shape must agree from one operator to the next; \
reshape, view, flatten or permute between operators where a rank has to change. Build each module \
class in `__init__` and call it in `forward`; call each function in `forward`. Use every operator \
under the name given and add no other heavy operators.

Sizes: choose the size constants so that one forward pass in float32 in eager mode on an NVIDIA \
H100 takes about {target_ms:.3g} ms (tasks outside {min_ms:g} to {max_ms:g} ms are discarded). \
Rough costs on an H100: memory-bound ops stream about {bandwidth_tb:.1f} TB/s (an elementwise op \
on N float32 values moves 8*N bytes); float32 matmuls and linear layers reach about \
{matmul_tflops:g} TFLOP/s, convolutions about {conv_tflops:g} TFLOP/s; every kernel costs at least \
{launch_us:g} us. Keep every single tensor below 1 GiB (268 million float32 values)."""

FEEDBACK_PROMPT = """\
That program cannot be used:
{problems}

Write the whole program again with this fixed, in one ```python block."""

KIND_WORDS = {
    "module": "module class",
    "functional": "function",
    "tensor": "tensor function",
    "transformers": "transformers module class",
}

# Shape tokens in seed arguments, as the prompt words them. Any other "$X" reads generically.
SHAPE_TOKEN_WORDS = {
    "$C": "channels of its input (dim 1)",
    "$last": "size of the last dim of its input",
}

# --- What a reply may contain -----------------------------------------------------------------

ALLOWED_IMPORTS = frozenset({"torch", "torch.nn", "torch.nn.functional", "math", "__future__"})
ALLOWED_IMPORT_WORDS = "torch, torch.nn, torch.nn.functional and math"

# Builtins that load or run other code, or touch files, whichever way they are imported.
FORBIDDEN_NAMES = frozenset({"__import__", "eval", "exec", "compile", "open", "input", "breakpoint",
                             "globals", "locals", "vars", "__builtins__", "getattr", "setattr"})
# torch attributes that read or write files, download, or build native code.
FORBIDDEN_ATTRIBUTES = frozenset({"load", "save", "hub", "from_file", "load_library", "cpp_extension",
                                  "load_inline", "system", "popen"})

# Random sampling, called in Model outside __init__ (parameters may be drawn at random): refused.
SAMPLING_NAMES = frozenset({
    "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "bernoulli",
    "bernoulli_", "multinomial", "normal", "normal_", "poisson", "uniform_", "exponential_",
    "geometric_", "cauchy_", "log_normal_", "random_", "seed", "manual_seed",
})
# Operators with randomness built in, called anywhere in Model: refused unless requested as a seed.
STOCHASTIC_OPS = frozenset({
    "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
    "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
    "rrelu", "rrelu_", "RReLU", "gumbel_softmax",
})

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)


class CompositionError(SynthesisError):
    """The model gave no usable task in its attempts. ``problems`` holds what was wrong with each."""

    def __init__(self, message: str, problems: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.problems = list(problems)


class LLMComposer:
    """Composes candidates by asking ``client`` to write them, correcting it when a reply is unusable.

    ``window_ms`` is the workload window the filters apply; the prompt quotes it so the model
    knows how far from ``target_ms`` it may stray.
    """

    def __init__(self, client: LLMClient, max_attempts: int = 3,
                 window_ms: tuple[float, float] = (1.0, 100.0)) -> None:
        if max_attempts < 1:
            raise SynthesisError(f"max_attempts must be at least 1, not {max_attempts}")
        if not 0 < window_ms[0] < window_ms[1]:
            raise SynthesisError(f"window_ms must be (min, max) with 0 < min < max, not {window_ms}")
        self.client = client
        self.max_attempts = max_attempts
        self.window_ms = (float(window_ms[0]), float(window_ms[1]))

    @property
    def name(self) -> str:
        return f"llm:{self.client.model}"

    async def compose(self, seeds: list[Seed], index: int, target_ms: float) -> Candidate:
        """One candidate applying ``seeds`` in order, sized for about ``target_ms`` on an H100.

        Raises CompositionError when no reply passes the checks within ``max_attempts``; an
        LLMError from the client propagates unchanged, so the caller decides about retrying.
        """
        if not seeds:
            raise CompositionError("cannot compose a task from no seed operators")
        messages = build_messages(seeds, target_ms, self.window_ms)
        problems: list[str] = []
        for attempt in range(1, self.max_attempts + 1):
            completion = await self.client.complete(messages, tools=[])
            reply = completion.message.content or ""
            code, found = review_reply(reply, seeds, index, truncated=completion.finish_reason == "length")
            if code is not None and not found:
                return Candidate(index=index, code=code, ops=[s.name for s in seeds],
                                 data_source=data_source(seeds), composer=self.name,
                                 input_shapes=[], estimate_ms=None,
                                 stochastic_ops=[s.name for s in seeds if s.stochastic])
            problems.append("; ".join(found))
            if attempt < self.max_attempts:
                messages = messages + [Message("assistant", reply),
                                       Message("user", feedback_text(found))]
        ops = ", ".join(s.name for s in seeds)
        raise CompositionError(
            f"{self.name} wrote no usable task for [{ops}] in {self.max_attempts} attempt(s); "
            f"the last reply: {problems[-1]}", problems)

    async def aclose(self) -> None:
        await self.client.aclose()


def make_llm_composer(model: str, provider: str = "openai", base_url: str | None = None,
                      api_key: str | None = None, *, max_attempts: int = 3,
                      window_ms: tuple[float, float] = (1.0, 100.0), **options: Any) -> LLMComposer:
    """An LLMComposer on a client from ``make_client``; ``options`` go to the client (max_tokens,
    temperature, timeout_s, retry, ...). No tools are offered, so native tool calling is kept."""
    client = make_client(provider, model, base_url=base_url, api_key=api_key, tool_protocol="native",
                         **options)
    return LLMComposer(client, max_attempts=max_attempts, window_ms=window_ms)


def data_source(seeds: list[Seed]) -> str:
    """As CUDA-Agent-Ops-6K labels rows: a lone transformers module is "transformers#1"."""
    if len(seeds) == 1 and seeds[0].kind == "transformers":
        return "transformers#1"
    return f"torch#{len(seeds)}"


# --- The prompt -------------------------------------------------------------------------------

def build_messages(seeds: list[Seed], target_ms: float, window_ms: tuple[float, float]) -> list[Message]:
    """The system and user messages that open a composition."""
    operators = "\n".join(describe_seed(i, seed) for i, seed in enumerate(seeds, 1))
    user = USER_PROMPT.format(
        count=len(seeds), operators=operators, target_ms=target_ms, min_ms=window_ms[0],
        max_ms=window_ms[1], bandwidth_tb=H100.bandwidth / 1e12, matmul_tflops=H100.matmul_flops / 1e12,
        conv_tflops=H100.conv_flops / 1e12, launch_us=H100.launch_s * 1e6)
    return [Message("system", SYSTEM_PROMPT), Message("user", user)]


def describe_seed(number: int, seed: Seed) -> str:
    """One numbered line of the operator list: name, kind, import path, arguments, constraints."""
    kind = KIND_WORDS.get(seed.kind, seed.kind)
    line = f"{number}. `{seed.name}`: {kind} `{seed.target}`"
    if seed.args:
        what = "constructor arguments" if seed.kind in ("module", "transformers") else "extra call arguments"
        line += f"; {what}: " + ", ".join(f"{key}={render_value(value)}" for key, value in seed.args.items())
    else:
        line += "; default arguments are fine"
    if seed.ranks:
        line += "; accepts inputs of rank " + " or ".join(str(r) for r in seed.ranks)
    if seed.binary:
        line += ("; binary: its second operand is an `nn.Parameter` made in `__init__` with a shape "
                 "that broadcasts against the first")
    if seed.kind == "transformers":
        module, _, attribute = seed.target.rpartition(".")
        line += (f"; import it with `from {module} import {attribute}` (the one import allowed "
                 "beyond torch and math)")
    return line


def render_value(value: Any) -> str:
    """An argument as Python text, with shape tokens shown as <what they are derived from>."""
    if isinstance(value, str) and value.startswith("$"):
        return f"<{SHAPE_TOKEN_WORDS.get(value, f'derived from its input ({value})')}>"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(render_value(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {render_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def feedback_text(problems: list[str]) -> str:
    return FEEDBACK_PROMPT.format(problems="\n".join(f"- {p}" for p in problems))


# --- Reading and checking a reply -------------------------------------------------------------

def extract_code(reply: str) -> str | None:
    """The program in a reply: its last ```python block, else its last bare ``` block, else the
    whole reply when that parses as Python with a class in it; None when there is none."""
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(reply)]
    tagged = [body for lang, body in blocks if lang in ("python", "python3", "py")]
    if tagged:
        return tagged[-1]
    bare = [body for lang, body in blocks if not lang]
    if bare:
        return bare[-1]
    text = reply.strip()
    if "```" in text or "class " not in text:
        return None
    try:
        ast.parse(text)
    except SyntaxError:
        return None
    return text + "\n"


def review_reply(reply: str, seeds: list[Seed], index: int, truncated: bool = False) -> tuple[str | None, list[str]]:
    """The reply's code and every problem found in it (none means the candidate is accepted)."""
    code = extract_code(reply)
    if code is None:
        if truncated:
            return None, ["your reply was cut off at the output limit before the code block was "
                          "closed; answer with only the code block, without explanation"]
        return None, ["your reply has no ```python code block with the program"]
    try:
        validate_task_source(code, f"candidate_{index}.py")
    except TaskFormatError as exc:
        problem = str(exc)
        if truncated:
            problem += " (your reply was cut off at the output limit; answer with only the code block)"
        return code, [problem]
    return code, check_program(ast.parse(code), seeds)


def check_program(tree: ast.Module, seeds: list[Seed]) -> list[str]:
    """What makes a parsed KernelBench program unusable for these seeds."""
    problems = check_imports(tree, seeds)
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    methods = {n.name: n for n in model.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if "forward" not in methods:
        problems.append("class Model defines no `forward` method")

    used = names_in(model)
    missing = [s.name for s in seeds if op_word(s) not in used]
    if missing:
        problems.append(f"Model does not use the requested operator(s) {', '.join(missing)}; "
                        "it must apply every one of " + ", ".join(s.name for s in seeds) + ", in that order")

    requested = {op_word(s) for s in seeds}
    stochastic = sorted((calls_in(model) & STOCHASTIC_OPS) - requested)
    if stochastic:
        problems.append(f"Model uses {', '.join(stochastic)}, which is random; forward must be "
                        "deterministic (leave dropout out)")
    sampled: set[str] = set()
    for name, method in methods.items():
        if name != "__init__":
            sampled |= calls_in(method) & SAMPLING_NAMES
    sampled -= requested
    if sampled:
        problems.append(f"Model draws random numbers outside __init__ ({', '.join(sorted(sampled))}); "
                        "forward must be deterministic, random tensors belong in get_inputs()")
    return problems


def check_imports(tree: ast.Module, seeds: list[Seed]) -> list[str]:
    """Imports and names that would let the program reach beyond torch and math."""
    allowed = set(ALLOWED_IMPORTS)
    allowed |= {s.target.rpartition(".")[0] for s in seeds if s.kind == "transformers"}
    refused: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            refused += [alias.name for alias in node.names if alias.name not in allowed]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if node.level or module not in allowed:
                refused.append(module)
            else:
                refused += [f"{module}.{alias.name}" for alias in node.names
                            if alias.name in FORBIDDEN_ATTRIBUTES]
    problems = []
    if refused:
        listed = ", ".join(f"`{m}`" for m in dict.fromkeys(refused))
        problems.append(f"it imports {listed}; a task may import only {ALLOWED_IMPORT_WORDS}, "
                        "because the program is executed automatically")
    names = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} & FORBIDDEN_NAMES)
    attributes = sorted({n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} & FORBIDDEN_ATTRIBUTES)
    if names or attributes:
        listed = ", ".join(f"`{n}`" for n in names + attributes)
        problems.append(f"it uses {listed}; a task computes on tensors only, without loading, saving "
                        "or running other code")
    return problems


def op_word(seed: Seed) -> str:
    """The name a program must mention to use a seed: the last part of its name (``Conv2d``)."""
    return seed.name.rpartition(".")[2]


def names_in(node: ast.AST) -> set[str]:
    """Every bare name and attribute name under ``node``."""
    words: set[str] = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            words.add(child.id)
        elif isinstance(child, ast.Attribute):
            words.add(child.attr)
    return words


def calls_in(node: ast.AST) -> set[str]:
    """The names called under ``node``: ``f`` in ``f(x)``, ``normal_`` in ``x.normal_()``."""
    called: set[str] = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Call):
            if isinstance(child.func, ast.Name):
                called.add(child.func.id)
            elif isinstance(child.func, ast.Attribute):
                called.add(child.func.attr)
    return called
