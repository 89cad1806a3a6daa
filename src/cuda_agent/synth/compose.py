"""The offline composer: chain 1 to 5 torch seeds into one KernelBench-format task, no LLM needed.

Shapes are followed on the meta device: each step builds the seed for the tensor it receives
(its shape tokens resolved against that tensor) and runs it without computing anything, so the
chain is valid by construction and every step's output shape is known. The batch size is then
chosen with the roofline estimate (``estimate``) so the task lands inside the workload window on
the target GPU, with no tensor larger than the memory bound.

The source mirrors KernelBench's style: module-level size constants, constructor arguments passed
through ``get_init_inputs()``, float32 inputs from ``torch.randn``. Shares of the tasks, where
asked for, declare workloads at other batch sizes (``workload_batches``) or compute in bfloat16
or float16 (``half_dtype``).
"""

from __future__ import annotations

import random
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn as nn

from ..workloads import declare_sizes
from .estimate import H100, ComposeSettings, Estimate, GpuProfile, estimate_forward, fit_batch
from .records import Candidate, Seed
from .seeds import build_call, resolve_target
from .shapes import OPERAND_TOKENS, operand_shape, pick_width, resolve_all

# Starting layouts, with how often each is drawn: rank -> (weight, dimension names).
LAYOUTS = {
    2: (0.30, ("in_features",)),
    3: (0.15, ("channels", "length")),
    4: (0.45, ("channels", "height", "width")),
    5: (0.10, ("channels", "depth", "height", "width")),
}
SIZE_CHOICES = {
    "in_features": (256, 512, 1024, 2048, 4096),
    "channels": (3, 8, 16, 32, 64),
    "length": (128, 256, 512, 1024, 2048),
    "height": (32, 64, 128, 256),
    "width": (32, 64, 128, 256),
    "depth": (8, 16, 32),
}
BASE_BATCH = 8
HEAVY_FIRST = 0.6        # chance that a task starts with a weighted op (conv, linear): light ops
                         # alone rarely reach the window within the memory bound
DRAWS_PER_STEP = 25      # seeds tried before a step gives up


@dataclass
class ChainStep:
    seed: Seed
    args: dict[str, Any]                 # resolved for this step's input
    operand: tuple[int, ...] | None = None   # shape of the learned second operand, if any
    operand_arg: str | None = None


@dataclass
class Chain:
    rank: int
    dims: dict[str, int]                 # the input's non-batch sizes, by name
    steps: list[ChainStep] = field(default_factory=list)

    def input_shape(self, batch: int) -> tuple[int, ...]:
        return (batch, *self.dims.values())


class _Steps(nn.Module):
    """The chain's steps applied in order (built on the meta device: nothing is allocated)."""

    def __init__(self, chain: Chain) -> None:
        super().__init__()
        self.calls = [build_call(step.seed.kind, resolve_target(step.seed.target), step.args,
                                 torch.randn(step.operand) if step.operand is not None else None)
                      for step in chain.steps]

    def forward(self, x):
        for call in self.calls:
            x = call(x)
        return x


def run_chain(chain: Chain, batch: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The chain's output for a meta input at ``batch``: its shape, with nothing computed."""
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        return _Steps(chain).to(dtype)(torch.empty(chain.input_shape(batch), dtype=dtype))


def estimate_chain(chain: Chain, batch: int, profile: GpuProfile = H100) -> Estimate:
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        return estimate_forward(_Steps(chain), [torch.empty(chain.input_shape(batch))], profile)


class OfflineComposer:
    """Builds ``torch#n`` tasks from seeds; ``transformers`` seeds become standalone tasks."""

    def __init__(self, seeds: list[Seed], settings: ComposeSettings | None = None):
        self.settings = settings or ComposeSettings()
        self.torch_seeds = [s for s in seeds if not s.stochastic and s.composable and s.kind != "transformers"]
        # transformers blocks stand alone (the paper's rule), so they need no shape inference
        self.hf_seeds = [s for s in seeds if not s.stochastic and s.kind == "transformers"]
        self.by_rank = {r: [s for s in self.torch_seeds if r in s.ranks] for r in LAYOUTS}

    # -- torch chains ---------------------------------------------------------------------------
    def _start(self, rng: random.Random) -> Chain:
        ranks = list(LAYOUTS)
        rank = rng.choices(ranks, weights=[LAYOUTS[r][0] for r in ranks])[0]
        dims = {name: rng.choice(SIZE_CHOICES[name]) for name in LAYOUTS[rank][1]}
        if "height" in dims:
            dims["width"] = dims["height"] if rng.random() < 0.7 else dims["width"]
        return Chain(rank=rank, dims=dims)

    def _try_step(self, chain: Chain, seed: Seed, x: torch.Tensor,
                  rng: random.Random) -> tuple[ChainStep, torch.Tensor] | None:
        shape = tuple(x.shape)
        width = pick_width(rng, shape, "features" if x.dim() == 2 else "channels")
        args = resolve_all(seed.args, shape, width)
        operand_arg = next((k for k, v in args.items() if v in OPERAND_TOKENS), None)
        operand = operand_shape(args.pop(operand_arg), shape) if operand_arg else None
        step = ChainStep(seed, args, operand, operand_arg)
        trial = Chain(chain.rank, chain.dims, chain.steps + [step])
        try:
            out = run_chain(trial, BASE_BATCH)
        except Exception:  # this seed does not fit this tensor: draw another
            return None
        if not isinstance(out, torch.Tensor) or not out.is_floating_point() or out.numel() == 0:
            return None
        return step, out

    def _chain(self, n_ops: int, rng: random.Random) -> Chain | None:
        chain = self._start(rng)
        with torch.device("meta"):
            x = torch.empty(chain.input_shape(BASE_BATCH))
        for position in range(n_ops):
            pool = self.by_rank.get(x.dim(), [])
            if not pool:
                return None
            heavy = [s for s in pool if s.heavy]
            for _ in range(DRAWS_PER_STEP):
                prefer_heavy = position == 0 and heavy and rng.random() < HEAVY_FIRST
                seed = rng.choice(heavy if prefer_heavy else pool)
                if seed.name in {s.seed.name for s in chain.steps}:
                    continue  # one use of each operator per task, as the paper's stacks
                fitted = self._try_step(chain, seed, x, rng)
                if fitted is None:
                    continue
                step, out = fitted
                if position < n_ops - 1 and out.dim() < 2:
                    continue  # nothing chains after a full reduction
                chain.steps.append(step)
                x = out
                break
            else:
                return None
        return chain

    def compose_torch(self, index: int, n_ops: int, rng: random.Random, attempts: int = 10) -> Candidate | None:
        """A ``torch#n_ops`` task sized for the window, or None when no chain fits in ``attempts``."""
        for _ in range(attempts):
            chain = self._chain(n_ops, rng)
            if chain is None:
                continue
            target = self.settings.draw_target(rng)
            try:
                fitted = fit_batch(lambda b: estimate_chain(chain, b, self.settings.profile), target,
                                   self.settings.max_tensor_bytes, base=BASE_BATCH)
                if fitted is None:
                    continue
                batch, estimate = fitted
                out = run_chain(chain, batch)
            except Exception:  # the chain fits the base batch only (a transpose moved the batch dim)
                continue
            if estimate.ms < self.settings.window_ms[0] * 1.2 or estimate.ms > self.settings.window_ms[1] / 1.2:
                continue  # cannot be sized into the window (memory-bound below it, or too heavy)
            # Drawn only where asked for, so that a run without them composes what it did before.
            batches = (workload_batches(chain, batch, self.settings)
                       if self.settings.multi_shape_share and rng.random() < self.settings.multi_shape_share else [])
            dtype = (half_dtype(chain, batch, rng)
                     if self.settings.half_share and rng.random() < self.settings.half_share else "float32")
            return Candidate(
                index=index, code=render_chain(chain, batch, batches, dtype), ops=[s.seed.name for s in chain.steps],
                data_source=f"torch#{n_ops}", composer="offline",
                input_shapes=[list(chain.input_shape(batch))], output_shape=list(out.shape),
                estimate_ms=round(estimate.ms, 4), dtype=dtype, batch_sizes=batches)
        return None

    # -- transformers -----------------------------------------------------------------------------
    def compose_transformers(self, index: int, rng: random.Random, attempts: int = 5) -> Candidate | None:
        if not self.hf_seeds:
            return None
        from .hf_seeds import transformers_candidate

        for _ in range(attempts):
            seed = rng.choice(self.hf_seeds)
            candidate = transformers_candidate(seed, index, rng, window_ms=self.settings.window_ms,
                                               max_tensor_bytes=self.settings.max_tensor_bytes)
            if candidate is not None:
                return candidate
        return None

    def compose(self, index: int, category: str, rng: random.Random) -> Candidate | None:
        """``category`` is a data_source: ``torch#1`` ... ``torch#5`` or ``transformers#1``."""
        if category.startswith("transformers"):
            return self.compose_transformers(index, rng)
        return self.compose_torch(index, int(category.split("#")[1]), rng)


# -- workloads and dtypes -----------------------------------------------------------------------
HALF_DTYPES = ("bfloat16", "float16")


def workload_batches(chain: Chain, batch: int, settings: ComposeSettings) -> list[int]:
    """Batch sizes for a task's declared workloads: its own, and a half and a quarter of it where
    the estimate keeps them in the window too (a shorter workload's time would be unsteady, and
    withhold the whole task's speedup); none where the chain does not run at other batch sizes
    (an odd one too: held-out workloads draw such sizes), so the task keeps its one shape."""
    low, high = settings.window_ms
    try:
        others = [b for b in sorted({batch // 2, batch // 4}, reverse=True)
                  if 1 <= b < batch and low <= estimate_chain(chain, b, settings.profile).ms <= high]
        for b in [*others, max(1, batch // 2 - 1) | 1]:
            run_chain(chain, b)
    except Exception:  # the chain fits its own batch only (a transpose moved the batch dim)
        return []
    return [batch, *others] if others else []


def half_dtype(chain: Chain, batch: int, rng: random.Random) -> str:
    """bfloat16 or float16, drawn, where every step of the chain takes it; else float32."""
    name = rng.choice(HALF_DTYPES)
    try:
        run_chain(chain, batch, getattr(torch, name))
    except Exception:  # a step without that dtype
        return "float32"
    return name


# -- rendering ------------------------------------------------------------------------------------

def _snake(name: str) -> str:
    name = name.rsplit(".", 1)[-1]
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower().strip("_") or "op"


def _literal(value: Any) -> str:
    if isinstance(value, float):
        return repr(round(value, 6))
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_literal(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    return repr(value)


def render_chain(chain: Chain, batch: int, batches: list[int] | None = None, dtype: str = "float32") -> str:
    """The task's source: Model applies the chain's steps in order to one input tensor; with
    ``batches``, one declared workload per batch size (any other allowed in held-out ones); in
    ``dtype``, its parameters and input."""
    constants: dict[str, Any] = {"batch_size": batch, **chain.dims}
    init_params: list[str] = []
    init_lines: list[str] = []
    forward_lines: list[str] = []
    used_attrs: set[str] = set()
    for i, step in enumerate(chain.steps):
        attr = _snake(step.seed.name)
        if attr in used_attrs:
            attr = f"{attr}_{i}"
        used_attrs.add(attr)
        operand = None
        if step.operand is not None:
            operand = f"self.{attr}_operand"
            init_lines.append(f"self.{attr}_operand = nn.Parameter(torch.randn({_literal(tuple(step.operand))}))")
        extra = ", ".join(f"{k}={_literal(v)}" for k, v in step.args.items())
        if step.seed.kind == "module":
            ctor_args = []
            for key, value in step.args.items():
                if isinstance(value, int) and not isinstance(value, bool):
                    param = key if key not in constants else f"{key}_{i}"
                    constants[param] = value
                    init_params.append(param)
                    ctor_args.append(f"{key}={param}")
                else:
                    ctor_args.append(f"{key}={_literal(value)}")
            cls = step.seed.target.replace("torch.nn.", "nn.")
            init_lines.append(f"self.{attr} = {cls}({', '.join(ctor_args)})")
            call = f"self.{attr}(x, {operand})" if operand else f"self.{attr}(x)"
        else:
            fn = (step.seed.target.replace("torch.nn.functional.", "F.")
                  if step.seed.kind == "functional" else step.seed.target)
            parts = ["x"] + ([operand] if operand else []) + ([extra] if extra else [])
            call = f"{fn}({', '.join(parts)})"
        forward_lines.append(f"x = {call}")
    names = ", ".join(s.seed.name for s in chain.steps)
    signature = ", ".join(["self", *init_params])
    body_init = "".join(f"\n        {line}" for line in init_lines)
    body_forward = "\n".join(f"        {line}" for line in forward_lines)
    consts = "\n".join(f"{name} = {_literal(value)}" for name, value in constants.items())
    dims = ", ".join(["batch_size", *chain.dims])
    init_inputs = ", ".join(init_params)
    if dtype != "float32":
        body_init += f"\n        self.to(torch.{dtype})"
    dtype_arg = f", dtype=torch.{dtype}" if dtype != "float32" else ""
    workloads = declare_sizes(batches) if batches else ""
    return f'''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Applies {names} in sequence."""

    def __init__({signature}):
        super().__init__(){body_init}

    def forward(self, x):
{body_forward}
        return x


{consts}


def get_inputs():
    return [torch.randn({dims}{dtype_arg})]


def get_init_inputs():
    return [{init_inputs}]
{workloads}'''
