"""Seeds from ``transformers``, and the standalone tasks built from them.

The paper mines operator classes from ``torch`` and ``transformers``; the transformers ones are
already multi-op modules, so each becomes a task on its own (data_source ``transformers#1``) and is
never chained with others. The crawl covers the building blocks that recur across model families:
activations (``transformers.activations.ACT2CLS``), norms, rotary embeddings, MLP blocks and
attention blocks of a fixed list of families, imported one modeling file at a time so that the
rest of transformers stays unloaded.

A seed's ``args`` is a JSON recipe: which class, how to build it (direct arguments or a config of
the family's config class with named sizes and fixed settings), and what to feed it (hidden
states, q/k for a rotary embedding, position embeddings and a causal mask for attention). Every
recipe is proven by rendering the very task source it describes at tiny sizes and running it on
CPU, twice from different RNG states, so that what the crawl accepts is what a candidate runs.
Classes of torch itself that transformers re-exports (``nn.ReLU`` in ``ACT2CLS``, ``nn.LayerNorm``
in some modeling files) are left to the torch crawl.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import json
import random
import re
from typing import Any, Iterator

import torch

from cuda_agent.synth.estimate import ComposeSettings, estimate_forward, fit_batch
from cuda_agent.synth.records import Candidate, Seed

# transformers itself is imported lazily, one modeling file at a time; without it there is nothing
# to crawl, which callers learn from the ImportError of importing this module.
if importlib.util.find_spec("transformers") is None:
    raise ImportError("cuda_agent.synth.hf_seeds needs transformers (pip install transformers)")

__all__ = [
    "CATEGORIES", "DATA_SOURCE", "DEFAULT_FAMILIES", "PROBE_SIZES", "count_by_category",
    "crawl_transformers", "input_shapes", "probe_class", "render_source", "transformers_candidate",
]

DEFAULT_FAMILIES = (
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
    "gemma3", "phi", "phi3", "gpt2", "gpt_neox", "gptj", "bert", "t5", "falcon", "olmo", "olmo2",
    "starcoder2", "granite", "cohere", "stablelm", "glm", "helium", "nemotron", "opt", "bloom", "mpt",
    "deepseek_v3",
)

CATEGORIES = ("activation", "norm", "rotary", "mlp", "attention")
DATA_SOURCE = "transformers#1"

# Class-name patterns that mark a building block. Flash/SDPA subclasses and cross-attention are
# left out: the first two are other implementations of the same block, the last needs an encoder.
_CATEGORY_PATTERNS = (
    ("norm", re.compile(r"(RMSNorm|LayerNorm)$")),
    ("rotary", re.compile(r"RotaryEmbedding$")),
    ("mlp", re.compile(r"(MLP|DenseActDense|DenseGatedActDense)$")),
    ("attention", re.compile(r"Attention$")),
)
_EXCLUDED_NAME = re.compile(r"(Flash|Sdpa|Flex|Cross|Paged)")

# Canonical sizes and the names families give them in their configs.
_SIZE_NAMES = {
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "intermediate_size": ("intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size", "d_ff"),
    "num_heads": ("num_attention_heads", "n_head", "n_heads", "num_heads"),
    "num_kv_heads": ("num_key_value_heads", "num_kv_heads"),
    "head_dim": ("head_dim", "d_kv"),
}
# Config values derived from the sizes: the head size, and (for blocks that do not use heads, but
# whose config checks that the hidden size splits into even heads) a head count of 64-wide heads.
_SIZE_EXPR = {"head_dim": "hidden_size // num_heads", "heads_64": "hidden_size // 64"}
_SIZE_DEPS = {"head_dim": ("hidden_size", "num_heads"), "heads_64": ("hidden_size",)}
_INIT_ORDER = ("hidden_size", "intermediate_size", "num_heads", "num_kv_heads")

# The sizes every recipe is proven at: small enough to run in milliseconds on CPU.
PROBE_SIZES = {"batch_size": 2, "seq_len": 8, "hidden_size": 256, "intermediate_size": 512,
               "num_heads": 4, "num_kv_heads": 2}
# A second geometry (head size 128, three heads sharing one key/value head), so that a recipe that
# only works when a chosen size happens to equal a family default is caught.
_PROBE_SIZES_ALT = {"batch_size": 1, "seq_len": 12, "hidden_size": 384, "intermediate_size": 640,
                    "num_heads": 3, "num_kv_heads": 1}

# Realistic choices for candidates (hidden = heads * head_dim).
_HEAD_DIMS = (64, 128)
_HEADS = (8, 12, 16, 24, 32)
_FFN_RATIOS = (2.0, 2.6875, 3.0, 3.5, 4.0)
_KV_GROUPS = (1, 2, 4, 8)
_SEQ_LENS = (128, 256, 512, 1024, 2048)
_MIN_SEQ = 8
_MIN_HEAD_DIM = 64   # GPT-J rotates 64 dims of every head whatever the head size

# Forward parameters that a standalone block leaves at their defaults (or None when required).
_STATE_PARAMS = {"past_key_values", "layer_past", "past_key_value", "use_cache", "output_attentions",
                 "cache_position", "encoder_hidden_states", "encoder_attention_mask",
                 "key_value_states", "head_mask", "alibi", "position_bias", "kwargs"}


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def crawl_transformers(families: tuple[str, ...] = DEFAULT_FAMILIES) -> tuple[list[Seed], list[dict]]:
    """Discover and prove transformers building blocks.

    Returns the seeds that ran, and ``{"name", "target", "reason"}`` for everything that was found
    (or asked for, like a family that does not exist) but could not be made to run.
    """
    seeds: list[Seed] = []
    skipped: list[dict] = []
    seen: set[int] = set()
    names: set[str] = set()
    with _quiet_transformers():
        for cls, kwargs in _activation_classes():
            if id(cls) in seen:
                continue
            seen.add(id(cls))
            _add(_probe_activation(cls, kwargs), seeds, skipped, names)
        for family in families:
            try:
                module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
            except Exception as exc:  # a missing family, or one whose optional deps are absent
                skipped.append({"name": f"transformers.{family}",
                                "target": f"transformers.models.{family}.modeling_{family}",
                                "reason": f"cannot import family {family!r}: {_short(exc)}"})
                continue
            for cls, category in _block_classes(module):
                if id(cls) in seen:
                    continue
                seen.add(id(cls))
                _add(_probe_block(cls, category), seeds, skipped, names)
    return seeds, skipped


def probe_class(cls: type, category: str, kwargs: dict | None = None) -> Seed | dict:
    """Prove one class as a seed of ``category``: the Seed, or a ``{"name", "target", "reason"}``.

    ``kwargs`` are constructor arguments for an activation (as ``ACT2CLS`` pairs them); blocks are
    built from their family's config, which must live in the class's module.
    """
    with _quiet_transformers():
        if category == "activation":
            return _probe_activation(cls, dict(kwargs or {}))
        return _probe_block(cls, category)


def count_by_category(seeds: list[Seed]) -> dict[str, int]:
    """How many seeds each category has, in ``CATEGORIES`` order (zeros included)."""
    counts = {category: 0 for category in CATEGORIES}
    for seed in seeds:
        category = seed.args.get("category", "")
        counts[category] = counts.get(category, 0) + 1
    return counts


def transformers_candidate(seed: Seed, index: int, rng: random.Random,
                           window_ms: tuple[float, float] = (1.0, 100.0),
                           max_tensor_bytes: int = 1 << 30,
                           margin: float = 1.25) -> Candidate | None:
    """One standalone KernelBench-format task for ``seed``, sized for the workload window.

    Sizes (hidden, heads, FFN ratio, sequence length) are drawn from ``rng``; the batch is then
    fitted so that the estimated H100 eager time lands on a log-uniform target between twice the
    window's minimum and its maximum over 2.5. When even batch 1 is too slow, or the tensors too
    large, the sequence, then the heads, then the head size are halved; a tight window or a small
    ``max_tensor_bytes`` therefore gives small tasks. The result is kept only if its estimate lies
    within the window shrunk by ``margin`` on both sides; otherwise None.
    """
    lo, hi = window_ms
    target = ComposeSettings(window_ms=window_ms).draw_target(rng)
    sizes = _draw_sizes(seed, rng)
    try:
        namespace = _exec_source(render_source(seed, sizes))
    except Exception:
        return None
    model_cls = namespace["Model"]
    fitted = None
    for _ in range(64):
        fitted = _fit(seed, model_cls, sizes, target, max_tensor_bytes)
        if fitted is not None and fitted[1].ms <= hi / margin:
            break
        sizes = _shrink(sizes)
        fitted = None
        if sizes is None:
            return None
    if fitted is None:
        return None
    batch, est = fitted
    if est.ms < lo * margin:
        return None
    sizes = dict(sizes, batch_size=batch)
    code = render_source(seed, sizes)
    shapes = input_shapes(seed, sizes)
    try:
        output_shape = _meta_output_shape(model_cls, seed, sizes, shapes)
    except Exception:
        return None
    return Candidate(index=index, code=code, ops=[seed.name], data_source=DATA_SOURCE,
                     composer="offline", input_shapes=[list(s) for s in shapes],
                     output_shape=output_shape, estimate_ms=est.ms,
                     stochastic_ops=[seed.name] if seed.stochastic else [])


def input_shapes(seed: Seed, sizes: dict[str, int]) -> list[list[int]]:
    """The shapes ``get_inputs()`` returns for this seed at these sizes."""
    b, s, h = sizes["batch_size"], sizes["seq_len"], sizes["hidden_size"]
    if seed.args["category"] == "rotary":
        nh = sizes["num_heads"]
        return [[b, nh, s, h // nh], [b, nh, s, h // nh]]
    extra = seed.args.get("call", {}).get("extra_inputs", [])
    return [[b, s, h] for _ in range(1 + len(extra))]


def render_source(seed: Seed, sizes: dict[str, int]) -> str:
    """The KernelBench-format task for ``seed`` at ``sizes`` (canonical names, see PROBE_SIZES)."""
    recipe = seed.args
    category = recipe["category"]
    imports: dict[str, list[str]] = {}

    def need(module: str, name: str) -> None:
        names = imports.setdefault(module, [])
        if name not in names:
            names.append(name)

    need(recipe["module"], recipe["class"])
    init_params = _init_params(recipe)
    body: list[str] = []
    if category == "activation":
        body.append(f"self.act = {recipe['class']}({_kwargs_src(recipe.get('kwargs', {}))})")
    else:
        config = recipe.get("config")
        if config:
            need(config["module"], config["class"])
            body.append(f"config = {config['class']}(")
            for native, canonical in config["sizes"].items():
                body.append(f"    {native}={_SIZE_EXPR.get(canonical, canonical)},")
            for key, value in config.get("fixed", {}).items():  # literal settings
                body.append(f"    {key}={value!r},")
            body.append(")")
        rotary = recipe.get("rotary")
        if rotary:
            need(recipe["module"], rotary["class"])
            body.append(f"self.rotary_emb = {rotary['class']}(config)")
        attr = {"norm": "norm", "rotary": "rotary_emb", "mlp": "mlp", "attention": "attn"}[category]
        if category != "rotary":
            init = recipe["init"]
            args = [_SIZE_EXPR.get(a, a) for a in init.get("positional", [])]
            args += [f"{k}={v!r}" for k, v in init.get("kwargs", {}).items()]
            body.append(f"self.{attr} = {recipe['class']}({', '.join(args)})")
    if category == "rotary":
        need(recipe["module"], recipe["apply"]["function"])
    if recipe.get("call", {}).get("alibi"):
        need(recipe["module"], recipe["call"]["alibi"])

    lines = ["import torch", "import torch.nn as nn"]
    for module, names in imports.items():
        lines.append(f"from {module} import {', '.join(names)}")
    lines += ["", ""]
    constants = ["batch_size", "seq_len", "hidden_size", *init_params]
    if category == "rotary":
        constants.append("num_heads")
    for name in dict.fromkeys(constants):
        lines.append(f"{name} = {sizes[name]}")
    if category == "rotary":
        lines.append("head_dim = hidden_size // num_heads")
    lines += ["", ""]
    lines.append("class Model(nn.Module):")
    lines.append(f'    """{_describe(seed)}"""')
    lines.append("")
    lines.append(f"    def __init__(self{''.join(', ' + p for p in init_params)}):")
    lines.append("        super().__init__()")
    lines += ["        " + line for line in body]
    lines.append("")
    lines += ["    " + line for line in _forward_src(recipe, category)]
    lines += ["", ""]
    lines.append("def get_inputs():")
    if category == "rotary":
        lines.append("    q = torch.randn(batch_size, num_heads, seq_len, head_dim)")
        lines.append("    k = torch.randn(batch_size, num_heads, seq_len, head_dim)")
        lines.append("    return [q, k]")
    else:
        n_inputs = 1 + len(recipe.get("call", {}).get("extra_inputs", []))
        items = ", ".join(["torch.randn(batch_size, seq_len, hidden_size)"] * n_inputs)
        lines.append(f"    return [{items}]")
    lines += ["", ""]
    lines.append("def get_init_inputs():")
    lines.append(f"    return [{', '.join(init_params)}]")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Rendering helpers
# --------------------------------------------------------------------------------------------


def _init_params(recipe: dict) -> list[str]:
    """Canonical sizes the Model's constructor takes, in a fixed order."""
    used: set[str] = set()
    config = recipe.get("config")
    if config:
        for canonical in config["sizes"].values():
            used.update(_SIZE_DEPS.get(canonical, (canonical,)))
    for arg in recipe.get("init", {}).get("positional", []):
        if arg in _INIT_ORDER:
            used.add(arg)
    return [name for name in _INIT_ORDER if name in used]


def _kwargs_src(kwargs: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


def _describe(seed: Seed) -> str:
    recipe = seed.args
    what = {
        "activation": "activation",
        "norm": "normalisation over the hidden dimension",
        "rotary": "rotary position embedding applied to queries and keys",
        "mlp": "feed-forward block",
        "attention": "self-attention block (eager attention"
                     + (", causal mask)" if recipe.get("call", {}).get("mask") else ")"),
    }[recipe["category"]]
    return f"{recipe['class']} from transformers: {what}."


def _forward_src(recipe: dict, category: str) -> list[str]:
    if category == "activation":
        return ["def forward(self, x):", "    return self.act(x)"]
    if category == "norm":
        return ["def forward(self, x):", "    return " + _first("self.norm(x)", recipe)]
    if category == "rotary":
        kw = _kwargs_src(recipe["rotary"].get("kwargs", {}))
        apply = recipe["apply"]["function"]
        lines = [
            "def forward(self, q, k):",
            "    position_ids = torch.arange(q.shape[2], device=q.device).unsqueeze(0)",
            f"    cos, sin = self.rotary_emb(q, position_ids{', ' + kw if kw else ''})",
        ]
        if recipe["apply"].get("partial"):
            lines += [
                "    rot = cos.shape[-1]",
                f"    q_rot, k_rot = {apply}(q[..., :rot], k[..., :rot], cos, sin)",
                "    q = torch.cat([q_rot, q[..., rot:]], dim=-1)",
                "    k = torch.cat([k_rot, k[..., rot:]], dim=-1)",
                "    return q, k",
            ]
        else:
            lines.append(f"    return {apply}(q, k, cos, sin)")
        return lines
    call = recipe.get("call", {})
    extra = call.get("extra_inputs", [])
    lines = [f"def forward(self, hidden_states{''.join(', ' + e for e in extra)}):"]
    kwargs = call.get("kwargs", {})
    needs_positions = recipe.get("rotary") or "position_ids" in kwargs.values()
    if needs_positions or call.get("mask") or call.get("alibi"):
        lines.append("    seq = hidden_states.shape[1]")
    if needs_positions:
        lines.append("    position_ids = torch.arange(seq, device=hidden_states.device).unsqueeze(0)")
    if recipe.get("rotary"):
        kw = _kwargs_src(recipe["rotary"].get("kwargs", {}))
        lines.append(f"    position_embeddings = self.rotary_emb(hidden_states, position_ids"
                     f"{', ' + kw if kw else ''})")
    if call.get("alibi"):
        lines += [
            "    keep = torch.ones(hidden_states.shape[0], seq, device=hidden_states.device)",
            f"    alibi = {call['alibi']}(keep, self.attn.num_heads, hidden_states.dtype)",
        ]
    if call.get("mask") == "causal_bool":  # True marks a position that may not be attended
        lines += [
            "    attention_mask = torch.ones(",
            "        seq, seq, dtype=torch.bool, device=hidden_states.device",
            "    ).triu(1)[None, None]",
        ]
    elif call.get("mask") == "causal":
        lines += [
            "    attention_mask = torch.full(",
            "        (seq, seq), torch.finfo(hidden_states.dtype).min, device=hidden_states.device",
            "    ).triu(1)[None, None]",
        ]
    attr = "mlp" if category == "mlp" else "attn"
    args = ["hidden_states", *extra]
    for param, source in kwargs.items():
        args.append(f"{param}={source}")
    lines.append("    return " + _first(f"self.{attr}({', '.join(args)})", recipe))
    return lines


def _first(call: str, recipe: dict) -> str:
    return f"{call}[0]" if recipe.get("output") == "first" else call


def _exec_source(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "transformers_task"}
    exec(compile(source, "<transformers task>", "exec"), namespace)
    return namespace


# --------------------------------------------------------------------------------------------
# Discovery
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Probing builds and runs modules: keep the caller's torch RNG state, and keep the config
    validation and standalone-attention warnings, which are expected here, quiet."""
    with torch.random.fork_rng(devices=[]):
        try:
            from transformers.utils import logging as hf_logging
        except Exception:  # no transformers: let the imports that follow report it
            yield
            return
        level = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()
        try:
            yield
        finally:
            hf_logging.set_verbosity(level)


def _activation_classes() -> list[tuple[type, dict]]:
    from transformers.activations import ACT2CLS

    found = []
    for entry in ACT2CLS.values():
        cls, kwargs = entry if isinstance(entry, tuple) else (entry, {})
        if not cls.__module__.startswith("transformers"):
            continue  # torch's own activations, crawled as torch seeds
        found.append((cls, dict(kwargs)))
    return found


def _block_classes(module) -> list[tuple[type, str]]:
    found = []
    for name, obj in vars(module).items():
        if not (inspect.isclass(obj) and issubclass(obj, torch.nn.Module)):
            continue
        if not obj.__module__.startswith("transformers.") or _EXCLUDED_NAME.search(name):
            continue
        for category, pattern in _CATEGORY_PATTERNS:
            if pattern.search(name):
                found.append((obj, category))
                break
    return found


def _add(result: Seed | dict, seeds: list[Seed], skipped: list[dict], names: set[str]) -> None:
    if isinstance(result, dict):
        skipped.append(result)
        return
    if result.name in names:  # two families defining a same-named class: qualify it
        family = result.args.get("family", "")
        result = Seed(**{**result.to_dict(), "ranks": result.ranks,
                         "name": f"transformers.{family}.{result.args['class']}"})
    names.add(result.name)
    seeds.append(result)


def _target(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()[0] if str(exc) else type(exc).__name__
    return text[:300]


def _family(cls: type) -> str:
    parts = cls.__module__.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "models" else parts[-1]


# --------------------------------------------------------------------------------------------
# Probing
# --------------------------------------------------------------------------------------------


def _probe_activation(cls: type, kwargs: dict) -> Seed | dict:
    name = f"transformers.{cls.__name__}"
    recipe = {"category": "activation", "module": cls.__module__, "class": cls.__name__,
              "kwargs": kwargs}
    seed = Seed(name=name, kind="transformers", target=_target(cls), ranks=(3,), args=recipe,
                composable=False, note="activation from transformers.activations.ACT2CLS")
    try:
        result = _prove(seed)
    except Exception as exc:
        return _skip(cls, f"does not run as a task: {_short(exc)}")
    if result.get("identity"):
        return _skip(cls, "identity: the output equals the input, nothing to compute")
    return _finish(seed, result)


def _probe_block(cls: type, category: str) -> Seed | dict:
    reasons: list[str] = []
    for recipe in _recipes(cls, category, reasons):
        ranks = (4,) if category == "rotary" else (3,)
        seed = Seed(name=f"transformers.{cls.__name__}", kind="transformers", target=_target(cls),
                    ranks=ranks, args=recipe, composable=False,
                    heavy=category in ("mlp", "attention"),
                    note=f"{category} block of {recipe['family']}, proven at tiny sizes on CPU")
        try:
            result = _prove(seed)
        except Exception as exc:
            reasons.append(_short(exc))
            continue
        if result.get("identity"):
            reasons.append("identity: the output equals the input")
            continue
        if result.get("not_causal"):
            reasons.append("the causal mask is not honoured")
            continue
        return _finish(seed, result)
    reason = "; ".join(dict.fromkeys(reasons)) if reasons else "no way to construct it"
    return _skip(cls, reason[:600])


def _skip(cls: type, reason: str) -> dict:
    return {"name": f"transformers.{cls.__name__}", "target": _target(cls), "reason": reason}


def _finish(seed: Seed, result: dict) -> Seed:
    if not result["stochastic"]:
        return seed
    return Seed(**{**seed.to_dict(), "ranks": seed.ranks, "stochastic": True,
                   "note": seed.note + "; output differs between RNG states"})


def _prove(seed: Seed) -> dict:
    """Render the task at probe sizes and run it: finite tensors, rerun from another RNG state.

    Raises when it does not build or run. Also builds it on the meta device and estimates it, as
    a candidate will, and runs it at a second geometry. For causal attention, checks that the last
    position does not reach the first.
    """
    sizes = dict(PROBE_SIZES)
    namespace = _exec_source(render_source(seed, sizes))
    torch.manual_seed(0)
    model = namespace["Model"](*namespace["get_init_inputs"]())
    torch.manual_seed(1)
    inputs = namespace["get_inputs"]()
    with torch.no_grad():
        torch.manual_seed(2)
        raw = model(*inputs)
        if seed.args["category"] != "rotary" and not isinstance(raw, torch.Tensor):
            raise TypeError(f"forward returned {type(raw).__name__}, not one tensor")
        first = _tensors(raw)
        torch.manual_seed(3)
        second = _tensors(model(*inputs))
    for out in first:
        if not torch.isfinite(out).all():
            raise ValueError("output is not finite")
    stochastic = any(not torch.equal(a, b) for a, b in zip(first, second))
    identity = len(first) == len(inputs) and all(
        a.shape == x.shape and torch.equal(a, x) for a, x in zip(first, inputs))
    result = {"stochastic": stochastic, "identity": identity}
    if seed.args.get("call", {}).get("mask") and not stochastic:
        changed = [t.clone() for t in inputs]
        changed[0][:, -1] += 1.0
        with torch.no_grad():
            torch.manual_seed(2)
            other = _tensors(model(*changed))[0]
        result["not_causal"] = not torch.allclose(other[:, 0], first[0][:, 0], atol=1e-6)
    with torch.device("meta"):
        meta_model = namespace["Model"](*namespace["get_init_inputs"]())
    meta_inputs = [torch.empty(s, device="meta") for s in input_shapes(seed, sizes)]
    estimate_forward(meta_model, meta_inputs)
    alt = _exec_source(render_source(seed, _PROBE_SIZES_ALT))
    with torch.no_grad():
        out = _tensors(alt["Model"](*alt["get_init_inputs"]())(*alt["get_inputs"]()))
    if not all(torch.isfinite(t).all() for t in out):
        raise ValueError("output is not finite at a second geometry")
    return result


def _tensors(out) -> list[torch.Tensor]:
    items = list(out) if isinstance(out, (tuple, list)) else [out]
    if not items or not all(isinstance(t, torch.Tensor) for t in items):
        raise TypeError(f"forward returned {type(out).__name__}, not tensors")
    return items


def _recipes(cls: type, category: str, reasons: list[str]) -> Iterator[dict]:
    """Ways to build and call ``cls``, most natural first; unusable ones add to ``reasons``."""
    module = importlib.import_module(cls.__module__)
    base = {"category": category, "family": _family(cls), "module": cls.__module__,
            "class": cls.__name__}
    init_sig = inspect.signature(cls.__init__)
    init_params = [p for p in list(init_sig.parameters.values())[1:]
                   if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if category == "norm" and init_params and init_params[0].name != "config":
        yield {**base, "init": {"positional": ["hidden_size"]}, "output": "tensor"}
        return
    configs = _config_classes(module)
    if not configs:
        reasons.append("no config class in its module")
        return
    tried: set[str] = set()
    for cfg_cls in configs:
        for with_kv in ("grouped", "full", None):
            for with_head_dim in (True, False):
                config = _config_recipe(cfg_cls, category, with_head_dim, with_kv)
                key = json.dumps(config, sort_keys=True)
                if config is None or key in tried:
                    continue
                tried.add(key)
                yield from _block_recipes(cls, module, category, base, cfg_cls, config,
                                          init_params, reasons)


def _block_recipes(cls: type, module, category: str, base: dict, cfg_cls: type, config: dict,
                   init_params: list[inspect.Parameter], reasons: list[str]) -> Iterator[dict]:
    """The recipes for one config variant: how to call the block, and what it returns."""
    if category == "rotary":
        yield from _rotary_recipes(cls, module, base, config, reasons)
        return
    init = _init_recipe(init_params, reasons)
    call = _call_recipe(cls, module, category, reasons) if init is not None else None
    if call is None:
        return
    recipe = {**base, "config": config, "init": init, "call": call}
    if call["kwargs"].get("position_embeddings") == "position_embeddings":
        rotary_cls = _rotary_class(module)
        recipe["rotary"] = {"class": rotary_cls.__name__,
                            "kwargs": _rotary_kwargs(rotary_cls, cfg_cls, layer_idx=0)}
    alibi = [False]
    if "alibi" in call["kwargs"] and callable(getattr(module, "build_alibi_tensor", None)):
        alibi.append(True)  # BLOOM: attention biased by ALiBi, built as its model does
    for with_alibi in alibi:
        if with_alibi:
            recipe = {**recipe, "call": {**call, "kwargs": {**call["kwargs"], "alibi": "alibi"},
                                         "alibi": "build_alibi_tensor"}}
        for variant in _mask_variants(recipe, reasons):
            for output in ("tensor", "first"):
                yield {**variant, "output": output}


def _mask_variants(recipe: dict, reasons: list[str]) -> list[dict]:
    """The recipe with the mask its block wants: none for encoders, causal for decoders.

    Whether a block is causal is read off a built instance (``is_causal``, as transformers' own
    SDPA path does); the mask is given additive (most families) or as a boolean "masked" tensor
    (MPT), and ``_prove`` checks that the one chosen is honoured.
    """
    call = recipe["call"]
    param = call.get("mask_param")
    if not param:
        return [recipe]
    plain = {k: v for k, v in call["kwargs"].items() if k != param}
    if call.get("mask_required"):
        plain[param] = "None"
    try:
        probe = {**recipe, "call": {**call, "kwargs": plain, "mask": None}, "output": "tensor"}
        namespace = _exec_source(render_source(_as_seed(probe), PROBE_SIZES))
        model = namespace["Model"](*namespace["get_init_inputs"]())
        causal = getattr(model.attn, "is_causal", None)
    except Exception as exc:
        reasons.append(_short(exc))
        return []
    if causal is None:  # no flag: encoders attend everywhere, decoders are causal
        causal = re.search(r"^(Bert|T5|Roberta)", recipe["class"]) is None
    if not causal:
        return [{**recipe, "call": {**call, "kwargs": plain, "mask": None}}]
    masked = {**call["kwargs"], param: "attention_mask"}
    return [{**recipe, "call": {**call, "kwargs": masked, "mask": kind}}
            for kind in ("causal", "causal_bool")]


def _as_seed(recipe: dict) -> Seed:
    return Seed(name=f"transformers.{recipe['class']}", kind="transformers",
                target=f"{recipe['module']}.{recipe['class']}", args=recipe)


def _config_classes(module) -> list[type]:
    import transformers

    base = getattr(transformers, "PreTrainedConfig", None) or transformers.PretrainedConfig
    found = [obj for name, obj in vars(module).items()
             if inspect.isclass(obj) and issubclass(obj, base)
             and obj.__module__.startswith("transformers.models.")]
    # A text sub-config is what the blocks of a multimodal family take.
    return sorted(found, key=lambda c: (not c.__name__.endswith("TextConfig"), c.__name__))


def _config_recipe(cfg_cls: type, category: str, with_head_dim: bool, with_kv: str | None) -> dict | None:
    """The config part of a recipe; None for a variant that would repeat another one.

    ``with_head_dim`` sets the head size to hidden // heads (families whose head size is free,
    Gemma, Qwen 3); ``with_kv`` gives attention "grouped" key/value heads or "full" ones (as many
    as query heads; every other block gets full ones). Variants without them keep the family's
    defaults, for configs whose head geometry is not derived that way (DeepSeek's MLA). Blocks
    without heads still set a head count that divides the hidden size, which configs check.
    """
    try:
        default = cfg_cls()
    except Exception:
        return None
    known = set(default.to_dict()) | set(inspect.signature(cfg_cls.__init__).parameters)
    attribute_map = getattr(cfg_cls, "attribute_map", {}) or {}
    # canonical size -> the value given to it, per category
    heads, kv = {"attention": ("num_heads", "num_kv_heads" if with_kv == "grouped" else "num_heads"),
                 "rotary": ("num_heads", "num_heads")}.get(category, ("heads_64", "heads_64"))
    wanted = {"hidden_size": "hidden_size", "num_heads": heads}
    if category == "mlp":
        wanted["intermediate_size"] = "intermediate_size"
    if with_kv:
        wanted["num_kv_heads"] = kv
    if with_head_dim and category in ("attention", "rotary"):
        wanted["head_dim"] = "head_dim"
    sizes: dict[str, str] = {}
    for canonical, value in wanted.items():
        native = next((attribute_map.get(c, c) for c in _SIZE_NAMES[canonical]
                       if attribute_map.get(c, c) in known), None)
        if native is None:
            if canonical in ("head_dim", "num_kv_heads"):
                return None  # the variant without it is tried too
            continue
        sizes[native] = value
    fixed: dict[str, Any] = {}
    for key, value in default.to_dict().items():
        if ("dropout" in key or "pdrop" in key) and isinstance(value, float) and value != 0.0:
            fixed[key] = 0.0
    if category == "attention":
        fixed["attn_implementation"] = "eager"
    return {"module": cfg_cls.__module__, "class": cfg_cls.__name__, "sizes": sizes, "fixed": fixed}


def _init_recipe(params: list[inspect.Parameter], reasons: list[str]) -> dict | None:
    positional: list[str] = []
    kwargs: dict[str, Any] = {}
    for p in params:
        if p.name == "config":
            positional.append("config")
        elif p.name == "intermediate_size" and p.default is inspect.Parameter.empty:
            positional.append("intermediate_size")
        elif p.name == "layer_idx":
            kwargs["layer_idx"] = 0
        elif p.name == "has_relative_attention_bias":
            kwargs["has_relative_attention_bias"] = True
        elif p.default is inspect.Parameter.empty:
            reasons.append(f"constructor argument {p.name!r} has no known value")
            return None
    if "config" not in positional:
        reasons.append("constructor takes no config")
        return None
    # Keyword-only after the positional ones, so that ``(intermediate_size, config)`` keeps order.
    return {"positional": positional, "kwargs": kwargs}


def _call_recipe(cls: type, module, category: str, reasons: list[str]) -> dict | None:
    params = [p for p in list(inspect.signature(cls.forward).parameters.values())[1:]
              if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if not params:
        reasons.append("forward takes no input")
        return None
    extra: list[str] = []
    kwargs: dict[str, Any] = {}
    mask_param, mask_required = None, False
    for p in params[1:]:
        required = p.default is inspect.Parameter.empty
        if p.name == "residual":
            extra.append("residual")
        elif p.name == "position_embeddings":
            if _rotary_class(module) is not None:
                kwargs["position_embeddings"] = "position_embeddings"
            elif required:
                kwargs["position_embeddings"] = "None"
        elif p.name in ("attention_mask", "mask"):
            if category == "attention":
                kwargs[p.name] = "attention_mask"
                mask_param, mask_required = p.name, required
            elif required:
                kwargs[p.name] = "None"
        elif p.name == "position_ids":
            kwargs["position_ids"] = "position_ids"
        elif p.name in _STATE_PARAMS:
            if required:
                kwargs[p.name] = "None"
        elif required:
            reasons.append(f"forward argument {p.name!r} has no known value")
            return None
    return {"extra_inputs": extra, "kwargs": kwargs, "mask": None, "mask_param": mask_param,
            "mask_required": mask_required}


def _rotary_class(module) -> type | None:
    for name, obj in vars(module).items():
        if inspect.isclass(obj) and name.endswith("RotaryEmbedding") and issubclass(obj, torch.nn.Module):
            if obj.__module__.startswith("transformers."):
                return obj
    return None


def _rotary_kwargs(rotary_cls: type, cfg_cls: type, layer_idx: int | None) -> dict:
    """Extra call arguments a rotary embedding needs: Gemma 3 asks which layer type it serves."""
    params = inspect.signature(rotary_cls.forward).parameters
    if "layer_type" not in params:
        return {}
    try:
        layer_types = list(getattr(cfg_cls(), "layer_types", None) or [])
    except Exception:
        layer_types = []
    if layer_idx is not None and layer_types:
        return {"layer_type": layer_types[layer_idx]}
    return {"layer_type": "full_attention" if "full_attention" in layer_types or not layer_types
            else layer_types[0]}


def _rotary_recipes(cls: type, module, base: dict, config: dict, reasons: list[str]) -> Iterator[dict]:
    apply = getattr(module, "apply_rotary_pos_emb", None)
    if apply is None:
        reasons.append("its family has no apply_rotary_pos_emb")
        return
    names = list(inspect.signature(apply).parameters)
    if names[:4] != ["q", "k", "cos", "sin"]:
        reasons.append(f"apply_rotary_pos_emb takes {names}, not (q, k, cos, sin)")
        return
    cfg_cls = getattr(importlib.import_module(config["module"]), config["class"])
    rotary = {"class": cls.__name__, "kwargs": _rotary_kwargs(cls, cfg_cls, layer_idx=None)}
    for partial in (False, True):
        yield {**base, "config": config, "rotary": rotary,
               "apply": {"function": "apply_rotary_pos_emb", "partial": partial}, "output": "pair"}


# --------------------------------------------------------------------------------------------
# Sizing
# --------------------------------------------------------------------------------------------


def _draw_sizes(seed: Seed, rng: random.Random) -> dict[str, int]:
    head_dim = rng.choice(_HEAD_DIMS)
    heads = rng.choice(_HEADS)
    ratio = rng.choice(_FFN_RATIOS)
    group = rng.choice([g for g in _KV_GROUPS if heads % g == 0])
    seq = rng.choice(_SEQ_LENS)
    return _sizes(heads, head_dim, ratio, group, seq)


def _sizes(heads: int, head_dim: int, ratio: float, group: int, seq: int) -> dict[str, int]:
    hidden = heads * head_dim
    while heads % group:
        group //= 2
    return {"batch_size": 8, "seq_len": seq, "hidden_size": hidden,
            "intermediate_size": max(16, int(round(hidden * ratio / 16)) * 16),
            "num_heads": heads, "num_kv_heads": heads // group,
            "_head_dim": head_dim, "_ratio_x1000": int(round(ratio * 1000)), "_group": group}


def _shrink(sizes: dict[str, int]) -> dict[str, int] | None:
    """Halve the sequence, then the heads, then the head size; None when nothing is left."""
    heads, head_dim, seq = sizes["num_heads"], sizes["_head_dim"], sizes["seq_len"]
    ratio, group = sizes["_ratio_x1000"] / 1000, sizes["_group"]
    if seq > _MIN_SEQ:
        seq //= 2
    elif heads > 1:
        heads //= 2
    elif head_dim > _MIN_HEAD_DIM:
        head_dim //= 2
    else:
        return None
    return _sizes(heads, head_dim, ratio, max(1, min(group, heads)), seq)


def _fit(seed: Seed, model_cls, sizes: dict[str, int], target: float, max_tensor_bytes: int):
    init = [sizes[p] for p in _init_params(seed.args)]
    try:
        with torch.device("meta"):
            model = model_cls(*init)
    except Exception:
        return None

    def estimate_at(batch: int):
        shapes = input_shapes(seed, dict(sizes, batch_size=batch))
        return estimate_forward(model, [torch.empty(s, device="meta") for s in shapes])

    try:
        return fit_batch(estimate_at, target, max_tensor_bytes)
    except Exception:
        return None


def _meta_output_shape(model_cls, seed: Seed, sizes: dict[str, int], shapes) -> list[int]:
    init = [sizes[p] for p in _init_params(seed.args)]
    with torch.device("meta"):
        model = model_cls(*init)
    with torch.no_grad():
        out = model(*[torch.empty(s, device="meta") for s in shapes])
    return list(_tensors(out)[0].shape)

