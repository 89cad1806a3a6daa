"""Seed crawl: find the torch operators that tasks can be built from, by running them.

Candidates are every ``torch.nn`` module class, every ``torch.nn.functional`` function and every
tensor op in the ``torch`` namespace. Each is tried on small float inputs of rank 2 to 5 with a
few argument recipes (required constructor arguments filled from their names, a ``dim``, a
learned second operand); what runs, returns a floating-point tensor that depends on its input,
becomes a seed with the recipe that worked. Running it twice from different RNG states on the
same input tells stochastic operators (dropout, sampling) apart; running it on the meta device
tells whether the composer can infer its shapes. Everything that fails is kept with the reason,
so the crawl's coverage can be read, not guessed.

``transformers`` building blocks are crawled by ``hf_seeds`` and merged in ``crawl_seeds``.
"""

from __future__ import annotations

import inspect
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..errors import SynthesisError
from .records import SEED_KINDS, Seed
from .shapes import OPERAND_TOKENS, operand_shape, resolve_all

# Probe inputs: distinct sizes per dimension, so an op that mixes dimensions up fails here.
PROBE_SHAPES = {2: (4, 16), 3: (4, 16, 12), 4: (2, 16, 8, 12), 5: (2, 16, 4, 6, 8)}
PROBE_WIDTH = 24

# Required constructor/call arguments, filled by name. A name not here makes the seed unusable
# unless a per-operator recipe (PREFERRED_ARGS) covers it.
ARG_BY_NAME: dict[str, Any] = {
    "in_channels": "$C", "num_features": "$C", "num_channels": "$C", "channels": "$C",
    "in_features": "$last", "normalized_shape": "$last_list", "d_model": "$last", "embed_dim": "$last",
    "out_channels": "$width", "out_features": "$width",
    "num_groups": "$groups", "nhead": "$heads", "num_heads": "$heads", "groups": 2,
    "kernel_size": 3, "output_size": 4, "padding": 2, "pad": [1, 1], "size": 5,
    "upscale_factor": 2, "downscale_factor": 2, "scale_factor": 2,
    "threshold": 0.1, "value": 0.5, "lambd": 0.5, "dim": 1,
}

# Optional arguments some operators need to do something sensible (or avoid a deprecation path).
PREFERRED_ARGS: dict[str, dict[str, Any]] = {
    "Softmax": {"dim": 1}, "Softmin": {"dim": 1}, "LogSoftmax": {"dim": 1},
    "Upsample": {"scale_factor": 2}, "UpsamplingNearest2d": {"scale_factor": 2},
    "UpsamplingBilinear2d": {"scale_factor": 2}, "interpolate": {"scale_factor": 2},
    "upsample": {"scale_factor": 2}, "upsample_nearest": {"scale_factor": 2},
    "upsample_bilinear": {"scale_factor": 2},
    "softmax": {"dim": 1}, "softmin": {"dim": 1}, "log_softmax": {"dim": 1},
}

# Not operators, or not usable as a step in a float pipeline, whatever they return.
SKIP = {
    "Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
    "Container", "Parameter", "UninitializedParameter", "UninitializedBuffer", "Buffer",
    "Identity", "Embedding", "EmbeddingBag", "MultiheadAttention", "Transformer",
    "TransformerEncoder", "TransformerDecoder", "TransformerDecoderLayer",
}
FACTORY_PREFIXES = ("rand", "empty", "zeros", "ones", "full", "eye", "arange", "linspace",
                    "logspace", "range", "tensor", "as_", "from_", "frombuffer", "sparse_",
                    "quantize", "fake_quantize", "fbgemm", "mkldnn", "cudnn", "miopen", "native_",
                    "batch_norm_", "q_", "is_", "can_cast", "result_type", "promote_types",
                    "get_", "set_", "use_", "manual_seed", "initial_seed", "seed", "save", "load",
                    "compile", "vmap", "cond", "split_with_sizes_copy", "_")


@dataclass
class Probe:
    """How one recipe fared on one rank."""

    ok: bool
    why: str = ""
    stochastic: bool = False


@dataclass
class CrawlResult:
    seeds: list[Seed]
    excluded: list[dict[str, str]] = field(default_factory=list)  # {name, target, reason}

    def counts(self) -> dict[str, int]:
        """Seeds found by kind, plus how many the composer can chain and how many are stochastic."""
        out = {kind: sum(s.kind == kind for s in self.seeds) for kind in SEED_KINDS}
        out["total"] = len(self.seeds)
        out["composable"] = sum(s.composable and not s.stochastic for s in self.seeds)
        out["stochastic"] = sum(s.stochastic for s in self.seeds)
        out["excluded"] = len(self.excluded)
        return out


# -- building one call ------------------------------------------------------------------------

def _required_params(fn: Callable, skip_first: int) -> list[inspect.Parameter] | None:
    try:
        params = list(inspect.signature(fn).parameters.values())[skip_first:]
    except (TypeError, ValueError):
        return None
    return [p for p in params if p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def build_call(kind: str, target: Callable, args: dict[str, Any],
               operand: torch.Tensor | None = None) -> Callable[[torch.Tensor], Any]:
    """A one-input callable for ``target`` with concrete ``args``; ``operand``, if any, is passed
    as the second argument. Module seeds are built here, so under ``torch.device("meta")`` they
    build on meta."""
    if kind == "module":
        module = target(**args)
        return (lambda x: module(x, operand)) if operand is not None else module
    if operand is not None:
        return lambda x: target(x, operand, **args)
    return lambda x: target(x, **args)


def make_call(kind: str, target: Callable, args: dict[str, Any], shape: tuple[int, ...],
              width: int) -> Callable[[torch.Tensor], Any]:
    """``build_call`` with ``args`` resolved for ``shape``: an operand token becomes a tensor of
    its shape (randn)."""
    concrete = resolve_all(args, shape, width)
    operand = next((k for k, v in concrete.items() if v in OPERAND_TOKENS), None)
    other = None
    if operand is not None:
        other = torch.randn(operand_shape(concrete.pop(operand), shape))
    return build_call(kind, target, concrete, other)


def _outputs_float_tensor(out: Any) -> str:
    if not isinstance(out, torch.Tensor):
        return f"returns {type(out).__name__}, not a tensor"
    if not out.is_floating_point():
        return f"returns a {out.dtype} tensor, not floating point"
    return ""


def _probe(kind: str, target: Callable, args: dict[str, Any], rank: int) -> Probe:
    shape = PROBE_SHAPES[rank]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.manual_seed(0)
            call = make_call(kind, target, args, shape, PROBE_WIDTH)
            x = torch.randn(shape)
            torch.manual_seed(1)
            first = call(x)
            problem = _outputs_float_tensor(first)
            if problem:
                return Probe(False, problem)
            if first.numel() == 0:
                return Probe(False, "returns an empty tensor")
            torch.manual_seed(2)
            again = call(x)
            other = call(torch.randn(shape) * 3 + 1)
    except Exception as exc:  # probing: anything an operator raises means "not like this"
        return Probe(False, f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}")
    if other.shape == first.shape and torch.equal(other, first) and first.numel() > 1:
        return Probe(False, "output does not depend on the input")
    same = again.shape == first.shape and torch.allclose(again, first, equal_nan=True)
    return Probe(True, stochastic=not same)


def _runs_on_meta(kind: str, target: Callable, args: dict[str, Any], rank: int) -> bool:
    shape = PROBE_SHAPES[rank]
    try:
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            out = make_call(kind, target, args, shape, PROBE_WIDTH)(torch.empty(shape))
        return isinstance(out, torch.Tensor) and out.device.type == "meta"
    except Exception:  # no meta kernel, or data-dependent shapes
        return False


def _recipes(kind: str, name: str, fn: Callable) -> list[dict[str, Any]] | str:
    """Argument sets to try, most natural first; a string says why there are none."""
    preferred = dict(PREFERRED_ARGS.get(name, {}))
    common = [preferred, {"dim": 1}, {"other": "$channel_param"}, {"other": "$sample_param"},
              {"dim": -1}]
    if kind == "tensor":  # builtins have no introspectable signature: try the common shapes
        return common
    # Builtin functionals (and boolean-dispatch wrappers taking *args) hide their parameters:
    # try the common ones, then the usual single required argument of pooling/shuffle ops.
    hidden = common + [{"kernel_size": 2}, {"output_size": 4}, {"upscale_factor": 2},
                       {"downscale_factor": 2}, {"groups": 2}]
    required = _required_params(fn.__init__ if kind == "module" else fn, 1 if kind == "module" else 0)
    if required is None:
        return hidden if kind == "functional" else "has no readable signature"
    if kind == "functional" and not required:
        return hidden
    if kind == "functional":
        required = required[1:]  # the first is the input itself
    fixed: dict[str, Any] = dict(preferred)
    operands = []
    for param in required:
        if param.name in fixed:
            continue
        if param.name in ARG_BY_NAME:
            fixed[param.name] = ARG_BY_NAME[param.name]
        elif kind == "functional" and param is required[0] and not operands:
            operands.append(param.name)  # a second tensor (target, weight, other)
        else:
            return f"needs argument `{param.name}`, which has no recipe"
    if kind == "module":
        forward_required = _required_params(fn.forward, 1) or []
        if len(forward_required) > 2:
            return f"forward takes {len(forward_required)} tensors"
        if len(forward_required) == 2:
            operands.append(forward_required[1].name)
    if not operands:
        return [fixed]
    if kind == "module":  # the module's forward takes the operand positionally
        return [{**fixed, "__operand__": tok} for tok in OPERAND_TOKENS]
    return [{**fixed, operands[0]: tok} for tok in OPERAND_TOKENS]


def _is_heavy(kind: str, target: Callable, args: dict[str, Any]) -> bool:
    if kind != "module":
        return False
    try:
        with torch.device("meta"):
            module = make_call(kind, target, args, PROBE_SHAPES[4], PROBE_WIDTH)
        params = module.parameters() if isinstance(module, nn.Module) else []
        return any(p.dim() >= 2 for p in params)
    except Exception:
        return False


def probe_operator(kind: str, name: str, qualname: str, target: Callable) -> tuple[Seed | None, str]:
    """The seed for one operator, or None and why it cannot be used."""
    recipes = _recipes(kind, qualname.rsplit(".", 1)[-1], target)
    if isinstance(recipes, str):
        return None, recipes
    reasons = []
    for args in recipes:
        results = {rank: _probe(kind, target, args, rank) for rank in PROBE_SHAPES}
        ranks = tuple(r for r, p in results.items() if p.ok)
        if not ranks:
            reasons.append(next(iter({p.why for p in results.values()})))
            continue
        stochastic = any(results[r].stochastic for r in ranks)
        composable = _runs_on_meta(kind, target, args, ranks[0])
        heavy = _is_heavy(kind, target, args)
        note = "stochastic: outputs differ between runs on the same input" if stochastic else ""
        if not composable:
            note = (note + "; " if note else "") + "no meta-device shape inference: not chained"
        return Seed(name=name, kind=kind, target=qualname, ranks=ranks, args=args,
                    stochastic=stochastic, composable=composable,
                    binary=any(v in OPERAND_TOKENS for v in args.values()), heavy=heavy,
                    note=note), ""
    return None, "; ".join(dict.fromkeys(reasons)) or "no recipe ran"


# -- enumerating candidates ---------------------------------------------------------------------

def _torch_candidates() -> list[tuple[str, str, str, Callable]]:
    """(kind, seed name, import path, callable) for every torch operator worth probing."""
    found = []
    for attr in sorted(dir(nn)):
        obj = getattr(nn, attr)
        if (inspect.isclass(obj) and issubclass(obj, nn.Module) and attr not in SKIP
                and not attr.startswith("_") and not attr.startswith("Lazy")):
            found.append(("module", f"nn.{attr}", f"torch.nn.{attr}", obj))
    for attr in sorted(dir(F)):
        obj = getattr(F, attr)
        if attr.startswith("_") or attr.endswith("_") or inspect.isclass(obj) or inspect.ismodule(obj) or not callable(obj):
            continue
        if getattr(obj, "__module__", "") not in ("torch.nn.functional", "torch._C._nn", None) \
                and not str(getattr(obj, "__module__", "")).startswith("torch"):
            continue  # typing helpers and the like re-exported by the module
        found.append(("functional", f"F.{attr}", f"torch.nn.functional.{attr}", obj))
    builtins = set(dir(torch._C._VariableFunctions))
    for attr in sorted(dir(torch)):
        if (attr in builtins and not attr.endswith("_") and not attr.startswith(FACTORY_PREFIXES)
                and not hasattr(F, attr)):  # F's version is crawled as functional
            found.append(("tensor", f"torch.{attr}", f"torch.{attr}", getattr(torch, attr)))
    return found


def crawl_torch(progress: Callable[[int, int], None] | None = None) -> CrawlResult:
    candidates = _torch_candidates()
    result = CrawlResult(seeds=[])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threads only add overhead
    try:
        for i, (kind, name, qualname, target) in enumerate(candidates):
            seed, why = probe_operator(kind, name, qualname, target)
            if seed is not None:
                result.seeds.append(seed)
            else:
                result.excluded.append({"name": name, "target": qualname, "reason": why})
            if progress:
                progress(i + 1, len(candidates))
    finally:
        torch.set_num_threads(threads)
    return result


def crawl_seeds(include_transformers: bool = True,
                progress: Callable[[int, int], None] | None = None) -> CrawlResult:
    """Every seed: torch's, and transformers' building blocks when transformers is installed."""
    result = crawl_torch(progress)
    if include_transformers:
        try:
            from .hf_seeds import crawl_transformers
        except ImportError as exc:  # transformers missing: say so in the catalogue, go on
            result.excluded.append({"name": "transformers", "target": "transformers",
                                    "reason": f"not importable ({exc}); install transformers"})
        else:
            seeds, excluded = crawl_transformers()
            result.seeds.extend(seeds)
            result.excluded.extend(excluded)
    return result


# -- the catalogue on disk ------------------------------------------------------------------------

def _versions() -> dict[str, str]:
    versions = {"torch": torch.__version__}
    try:
        import transformers
        versions["transformers"] = transformers.__version__
    except ImportError:
        pass
    return versions


def save_catalogue(result: CrawlResult, path: Path) -> None:
    """Write the seeds, the excluded operators with reasons, and the counts as JSON."""
    data = {"versions": _versions(), "counts": result.counts(),
            "seeds": [s.to_dict() for s in result.seeds], "excluded": result.excluded}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=list))
    tmp.replace(path)


def load_catalogue(path: Path) -> CrawlResult:
    try:
        data = json.loads(Path(path).read_text())
        return CrawlResult(seeds=[Seed.from_dict(s) for s in data["seeds"]],
                           excluded=list(data.get("excluded", [])))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SynthesisError(f"cannot read the seed catalogue {path} ({exc}); delete it and the "
                             "crawl runs again") from None


def resolve_target(target: str) -> Callable:
    """The callable at an import path such as ``torch.nn.Conv2d``."""
    import importlib

    module_name, _, attr = target.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise SynthesisError(f"seed target {target} is not importable here ({exc})") from None
