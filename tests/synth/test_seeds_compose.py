"""The torch seed crawl and the offline composer, on the CPU."""

from __future__ import annotations

import random

import pytest
import torch

from cuda_agent.synth.compose import ComposeSettings, OfflineComposer
from cuda_agent.synth.estimate import estimate_forward, fit_batch
from cuda_agent.synth.seeds import load_catalogue, probe_operator, save_catalogue
from cuda_agent.task import validate_task_source

pytestmark = pytest.mark.slow  # the crawl of every torch module that most tests here share


@pytest.fixture(scope="module")
def crawl(torch_crawl):
    return torch_crawl


def test_crawl_finds_hundreds_of_seeds_of_every_torch_kind(crawl):
    counts = crawl.counts()
    assert counts["total"] >= 300
    assert counts["module"] >= 80 and counts["functional"] >= 60 and counts["tensor"] >= 120
    names = {s.name for s in crawl.seeds}
    assert {"nn.Conv2d", "nn.Linear", "nn.LayerNorm", "F.gelu", "torch.cumsum", "torch.add"} <= names
    conv = next(s for s in crawl.seeds if s.name == "nn.Conv2d")
    assert conv.args["in_channels"] == "$C" and conv.heavy and conv.composable and not conv.stochastic
    assert set(conv.ranks) == {4} or 3 in conv.ranks  # unbatched 3-D input is also accepted


def test_crawl_marks_stochastic_operators(crawl):
    stochastic = {s.name for s in crawl.seeds if s.stochastic}
    assert {"nn.Dropout", "F.dropout", "nn.RReLU"} <= stochastic
    assert not any(s.stochastic for s in crawl.seeds if s.name in {"nn.ReLU", "F.gelu", "nn.BatchNorm2d"})


def test_crawl_keeps_every_exclusion_with_a_reason(crawl):
    excluded = {e["name"]: e["reason"] for e in crawl.excluded}
    assert "in1_features" in excluded["nn.Bilinear"]  # a required argument with no recipe
    assert "torch.argmax" in excluded and "not floating point" in excluded["torch.argmax"]
    assert all(reason for reason in excluded.values())


def test_binary_ops_get_a_learned_operand(crawl):
    add = next(s for s in crawl.seeds if s.name == "torch.add")
    assert add.binary and any(v.endswith("_param") for v in add.args.values())


def test_a_module_that_needs_an_unknown_argument_is_excluded_with_the_name():
    class NeedsMystery(torch.nn.Module):
        def __init__(self, mystery):
            super().__init__()

        def forward(self, x):
            return x

    seed, why = probe_operator("module", "NeedsMystery", "x.NeedsMystery", NeedsMystery)
    assert seed is None and "mystery" in why


def test_catalogue_round_trips(crawl, tmp_path):
    save_catalogue(crawl, tmp_path / "seeds.json")
    again = load_catalogue(tmp_path / "seeds.json")
    assert again.seeds == crawl.seeds and again.counts() == crawl.counts()


def _exec(code: str) -> dict:
    namespace: dict = {}
    exec(compile(code, "task.py", "exec"), namespace)
    return namespace


def test_composed_tasks_are_valid_and_match_their_recorded_shapes(crawl):
    # A small window makes small tasks, which run for real on the CPU here.
    composer = OfflineComposer(crawl.seeds, ComposeSettings(window_ms=(0.01, 0.3), max_tensor_bytes=1 << 24))
    rng = random.Random(7)
    made = 0
    for index in range(12):
        n_ops = 1 + index % 5
        cand = composer.compose_torch(index, n_ops, rng)
        if cand is None:
            continue
        made += 1
        validate_task_source(cand.code, "composed")
        assert cand.data_source == f"torch#{n_ops}" and len(cand.ops) == n_ops == len(set(cand.ops))
        assert 0.01 * 1.2 <= cand.estimate_ms <= 0.3 / 1.2
        ns = _exec(cand.code)
        torch.manual_seed(0)
        model = ns["Model"](*ns["get_init_inputs"]())
        inputs = ns["get_inputs"]()
        assert [list(t.shape) for t in inputs] == cand.input_shapes
        with torch.no_grad():
            out = model(*inputs)
        assert list(out.shape) == cand.output_shape
    assert made >= 8


def test_shares_of_the_tasks_declare_workloads_or_compute_in_16_bits(crawl):
    from cuda_agent.workloads import parse_plan

    settings = ComposeSettings(window_ms=(0.01, 0.3), max_tensor_bytes=1 << 24, multi_shape_share=1.0, half_share=1.0)
    composer = OfflineComposer(crawl.seeds, settings)
    rng = random.Random(3)
    shaped = halved = 0
    for index in range(12):
        cand = composer.compose_torch(index, 1 + index % 3, rng)
        if cand is None:
            continue
        validate_task_source(cand.code, "composed")
        ns = _exec(cand.code)
        if cand.batch_sizes:  # every declared batch size, and an odd one (held out), runs for real
            shaped += 1
            plan = parse_plan({"workloads": ns["get_workloads"](), "varying": list(ns["VARYING_AXES"]),
                               "defaults": {"batch_size": ns["batch_size"]}}, "composed")
            assert [w.axes["batch_size"] for w in plan.workloads] == cand.batch_sizes
            assert cand.batch_sizes[0] == ns["batch_size"] and len(set(cand.batch_sizes)) == len(cand.batch_sizes)
        dtype = getattr(torch, cand.dtype)
        halved += cand.dtype != "float32"
        for batch in cand.batch_sizes[1:] or [ns["batch_size"]]:
            ns["batch_size"] = batch
            torch.manual_seed(0)
            model = ns["Model"](*ns["get_init_inputs"]())
            (x,) = ns["get_inputs"]()
            assert x.dtype == dtype and all(p.dtype == dtype for p in model.parameters() if p.is_floating_point())
            with torch.no_grad():
                model(x)
    assert shaped >= 3 and halved >= 3
    # Asked for none, the composer draws nothing more: a run makes what it made before.
    plain = OfflineComposer(crawl.seeds, ComposeSettings(window_ms=(0.01, 0.3), max_tensor_bytes=1 << 24))
    first = plain.compose_torch(5, 2, random.Random(11))
    assert first is not None and first.dtype == "float32" and first.batch_sizes == []
    assert "get_workloads" not in first.code


def test_composition_depends_only_on_the_seed_of_its_index(crawl):
    composer = OfflineComposer(crawl.seeds)
    first = composer.compose_torch(3, 2, random.Random("0:3"))
    again = composer.compose_torch(3, 2, random.Random("0:3"))
    assert first.code == again.code


def test_composer_never_uses_stochastic_seeds(crawl):
    composer = OfflineComposer(crawl.seeds)
    stochastic = {s.name for s in crawl.seeds if s.stochastic}
    rng = random.Random(1)
    used = set()
    for index in range(40):
        cand = composer.compose_torch(index, 3, rng)
        used |= set(cand.ops) if cand else set()
    assert used and not used & stochastic


def test_estimate_counts_flops_and_bytes_on_meta():
    with torch.device("meta"):
        linear = torch.nn.Linear(1024, 2048)
        x = torch.empty(512, 1024)
    est = estimate_forward(linear, [x])
    assert est.flops == 2 * 512 * 1024 * 2048
    assert est.kernels == 1 and est.largest_tensor_bytes == 1024 * 2048 * 4


def test_fit_batch_hits_the_target_and_respects_the_memory_bound():
    def at(batch):
        with torch.device("meta"):
            return estimate_forward(torch.nn.Linear(1024, 1024), [torch.empty(batch, 1024)])

    batch, est = fit_batch(at, 2.0, 1 << 30)
    assert abs(est.ms - 2.0) / 2.0 < 0.1
    batch, est = fit_batch(at, 1000.0, 64 << 20)
    assert est.largest_tensor_bytes <= 64 << 20
