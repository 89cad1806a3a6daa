"""The transformers seed crawl and its standalone tasks, on the CPU.

Tasks are rendered at tiny sizes (a small workload window and a small tensor bound) so that they
really run here; realistic sizes are only built on the meta device.
"""

from __future__ import annotations

import json
import random
import time
import types

import pytest
import torch

from cuda_agent.synth.hf_seeds import (
    CATEGORIES,
    count_by_category,
    crawl_transformers,
    probe_class,
    transformers_candidate,
)
from cuda_agent.synth.records import Seed
from cuda_agent.task import validate_task_source

TINY = dict(window_ms=(0.001, 1.0), max_tensor_bytes=1 << 20)
# Families whose blocks cover every way a task is built: config-built MLPs and attention with
# rotary position embeddings (llama), a partial rotary embedding (phi), a constructor that takes
# the FFN size (gpt2), an encoder block with relative position bias (t5), and a block that takes a
# residual and an ALiBi bias (bloom).
SMALL_FAMILIES = ("llama", "phi", "gpt2", "t5", "bloom")
SAMPLE = (
    "transformers.NewGELUActivation", "transformers.ClippedGELUActivation",
    "transformers.XIELUActivation", "transformers.LlamaRMSNorm", "transformers.T5LayerNorm",
    "transformers.LlamaRotaryEmbedding", "transformers.PhiRotaryEmbedding",
    "transformers.LlamaMLP", "transformers.GPT2MLP", "transformers.BloomMLP",
    "transformers.T5DenseGatedActDense", "transformers.LlamaAttention",
    "transformers.GPT2Attention", "transformers.T5Attention", "transformers.BloomAttention",
    "transformers.PhiAttention",
)


@pytest.fixture(scope="module")
def full_crawl():
    return crawl_transformers()


@pytest.fixture(scope="module")
def small_seeds() -> dict[str, Seed]:
    seeds, skipped = crawl_transformers(SMALL_FAMILIES)
    return {seed.name: seed for seed in seeds}


def _load(code: str) -> types.ModuleType:
    """Execute a task's source as a fresh module, as the judge loads a task file."""
    module = types.ModuleType("hf_task_under_test")
    exec(compile(code, "<task>", "exec"), module.__dict__)
    return module


def _outputs(result) -> list[torch.Tensor]:
    return list(result) if isinstance(result, tuple) else [result]


@pytest.mark.slow
def test_crawl_finds_seeds_in_every_category(full_crawl):
    """The default families give a few dozen proven seeds, spread over every category."""
    seeds, skipped = full_crawl
    counts = count_by_category(seeds)
    assert list(counts) == list(CATEGORIES)
    assert len(seeds) >= 40
    assert counts["activation"] >= 8 and counts["norm"] >= 8 and counts["rotary"] >= 8
    assert counts["mlp"] >= 8 and counts["attention"] >= 8
    names = {s.name for s in seeds}
    assert {"transformers.LlamaMLP", "transformers.LlamaAttention", "transformers.LlamaRMSNorm",
            "transformers.LlamaRotaryEmbedding", "transformers.NewGELUActivation"} <= names
    assert len(names) == len(seeds) and len({s.target for s in seeds}) == len(seeds)
    for seed in seeds:
        assert seed.kind == "transformers" and not seed.composable
        assert seed.heavy == (seed.args["category"] in ("mlp", "attention"))
        assert seed.ranks == ((4,) if seed.args["category"] == "rotary" else (3,))
        assert Seed.from_dict(json.loads(json.dumps(seed.to_dict()))) == seed
    # torch's own classes that transformers re-exports are the torch crawl's, not seeds here
    assert not any(s.target.startswith("torch.") for s in seeds)
    assert "transformers.ReLU" not in names
    assert all(set(entry) == {"name", "target", "reason"} and entry["reason"] for entry in skipped)


@pytest.mark.slow
def test_crawl_targets_are_importable_classes(full_crawl):
    """A seed's target is the import path of the very class it was proven with."""
    seeds, _ = full_crawl
    llama_mlp = next(s for s in seeds if s.name == "transformers.LlamaMLP")
    assert llama_mlp.target == "transformers.models.llama.modeling_llama.LlamaMLP"
    assert llama_mlp.args["config"]["class"] == "LlamaConfig"
    attention = next(s for s in seeds if s.name == "transformers.LlamaAttention")
    assert attention.args["call"]["mask"] == "causal"
    assert attention.args["config"]["fixed"]["attn_implementation"] == "eager"


def test_a_class_seen_twice_becomes_one_seed():
    """A family listed twice, and ACT2CLS's repeated GELUActivation, give one seed per class."""
    once, _ = crawl_transformers(("gpt2",))
    twice, _ = crawl_transformers(("gpt2", "gpt2"))
    assert [s.name for s in once] == [s.name for s in twice]
    assert sum(s.name == "transformers.GELUActivation" for s in once) == 1


def test_an_unknown_family_is_skipped_with_a_reason():
    seeds, skipped = crawl_transformers(("no_such_family",))
    entry = next(e for e in skipped if e["name"] == "transformers.no_such_family")
    assert "cannot import" in entry["reason"] and "no_such_family" in entry["target"]
    assert all(s.args["category"] == "activation" for s in seeds)


def test_a_block_that_cannot_be_built_is_skipped_with_a_reason():
    class OrphanMLP(torch.nn.Module):
        def __init__(self, mystery):
            super().__init__()

        def forward(self, x):
            return x

    entry = probe_class(OrphanMLP, "mlp")
    assert isinstance(entry, dict) and entry["name"] == "transformers.OrphanMLP"
    assert "config" in entry["reason"]


def test_identity_activation_is_skipped():
    """LinearActivation computes nothing, so it cannot be a kernel task."""
    _, skipped = crawl_transformers(())
    entry = next(e for e in skipped if e["name"] == "transformers.LinearActivation")
    assert "identity" in entry["reason"]


class NoisyActivation(torch.nn.Module):
    """Adds fresh noise on every call: inherently random."""

    def forward(self, x):
        return x + torch.rand_like(x)


def test_an_inherently_random_seed_is_marked_stochastic():
    seed = probe_class(NoisyActivation, "activation")
    assert isinstance(seed, Seed) and seed.stochastic
    candidate = transformers_candidate(seed, 0, random.Random(0), **TINY)
    assert candidate is not None and candidate.stochastic_ops == [seed.name]


def test_crawl_leaves_the_global_rng_alone():
    torch.manual_seed(1234)
    expected = torch.rand(3)
    torch.manual_seed(1234)
    crawl_transformers(("gpt2",))
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("name", SAMPLE)
def test_tiny_candidate_runs_on_cpu_and_is_deterministic(small_seeds, name):
    """Every category renders a task that loads, runs to finite tensors, and reruns identically."""
    seed = small_seeds[name]
    candidate = transformers_candidate(seed, 7, random.Random(3), **TINY)
    assert candidate is not None
    validate_task_source(candidate.code, name)
    assert candidate.ops == [name] and candidate.data_source == "transformers#1"
    assert candidate.composer == "offline" and candidate.index == 7 and not candidate.stochastic_ops
    assert 0.001 <= candidate.estimate_ms <= 1.0
    assert f"from {seed.args['module']} import {seed.args['class']}" in candidate.code

    task = _load(candidate.code)
    torch.manual_seed(0)
    model = task.Model(*task.get_init_inputs())
    inputs = task.get_inputs()
    assert [list(x.shape) for x in inputs] == candidate.input_shapes
    assert all(x.dtype == torch.float32 for x in inputs)
    with torch.no_grad():
        torch.manual_seed(1)
        first = _outputs(model(*inputs))
        torch.manual_seed(2)
        second = _outputs(model(*inputs))
    assert list(first[0].shape) == candidate.output_shape
    for a, b in zip(first, second):
        assert torch.isfinite(a).all() and torch.equal(a, b)
    if seed.args["category"] == "rotary":
        assert len(first) == 2 and [list(t.shape) for t in first] == candidate.input_shapes
    else:
        assert len(first) == 1 and isinstance(model(*inputs), torch.Tensor)


def test_causal_attention_task_does_not_look_ahead(small_seeds):
    """The rendered mask keeps the first position blind to the last one."""
    candidate = transformers_candidate(small_seeds["transformers.LlamaAttention"], 0,
                                       random.Random(0), **TINY)
    task = _load(candidate.code)
    model = task.Model(*task.get_init_inputs())
    (x,) = task.get_inputs()
    changed = x.clone()
    changed[:, -1] += 1.0
    with torch.no_grad():
        a, b = model(x), model(changed)
    assert torch.allclose(a[:, 0], b[:, 0], atol=1e-6)
    assert not torch.allclose(a[:, -1], b[:, -1])


def test_tight_window_gives_small_fast_tasks(small_seeds):
    """A window of tens of microseconds gives tasks small enough to run at once on CPU."""
    made = set()
    for name in ("transformers.SiLUActivation", "transformers.QuickGELUActivation",
                 "transformers.LlamaRMSNorm", "transformers.T5LayerNorm",
                 "transformers.T5DenseActDense"):
        candidate = transformers_candidate(small_seeds[name], 0, random.Random(1),
                                           window_ms=(0.001, 0.05))
        if candidate is None:
            continue
        made.add(small_seeds[name].args["category"])
        assert candidate.estimate_ms <= 0.05
        assert all(torch.Size(s).numel() <= 1 << 24 for s in candidate.input_shapes)
        task = _load(candidate.code)
        start = time.process_time()  # this process's CPU (every thread's), which others' load does not stretch
        with torch.no_grad():
            out = task.Model(*task.get_init_inputs())(*task.get_inputs())
        assert time.process_time() - start < 2.0 and torch.isfinite(out).all()
    assert {"activation", "norm"} <= made


LOW, MID, HIGH = (0.2, 1.0), (1.0, 3.0), (10.0, 100.0)


@pytest.mark.parametrize("name, windows", [
    ("transformers.LlamaMLP", (LOW, MID, HIGH)),
    ("transformers.LlamaAttention", (LOW, MID, HIGH)),
    # a norm moves one tensor in and one out: a 1 GiB input bounds it near 3 ms
    ("transformers.LlamaRMSNorm", (LOW, MID)),
])
def test_estimate_grows_with_the_window(small_seeds, name, windows):
    """Sizing targets the window: a later window gives a costlier task (built on meta only)."""
    seed = small_seeds[name]
    estimates = []
    for window in windows:
        candidate = transformers_candidate(seed, 0, random.Random(5), window_ms=window)
        assert candidate is not None
        assert window[0] <= candidate.estimate_ms <= window[1]
        validate_task_source(candidate.code, name)
        estimates.append(candidate.estimate_ms)
    assert estimates == sorted(estimates) and estimates[0] < estimates[-1]


def test_same_rng_gives_the_same_task(small_seeds):
    seed = small_seeds["transformers.LlamaMLP"]
    a = transformers_candidate(seed, 0, random.Random(11))
    b = transformers_candidate(seed, 0, random.Random(11))
    assert a is not None and a.code == b.code and a.estimate_ms == b.estimate_ms


def test_no_candidate_when_the_window_cannot_be_met(small_seeds):
    attention = small_seeds["transformers.LlamaAttention"]
    # more kernels than a microsecond allows, whatever the size
    assert transformers_candidate(attention, 0, random.Random(0), window_ms=(1e-4, 1e-3)) is None
    # not even the smallest task fits a tensor bound of a few bytes
    assert transformers_candidate(attention, 0, random.Random(0), max_tensor_bytes=64) is None


def test_count_by_category_lists_every_category():
    seeds = [Seed(name="a", kind="transformers", target="x.a", args={"category": "mlp"}),
             Seed(name="b", kind="transformers", target="x.b", args={"category": "mlp"})]
    assert count_by_category(seeds) == {"activation": 0, "norm": 0, "rotary": 0, "mlp": 2,
                                        "attention": 0}
