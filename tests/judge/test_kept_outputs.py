"""Timed outputs are kept as copies in one buffer made up front (see judge.worker.KeptOutputs)."""

from __future__ import annotations

import torch

from cuda_agent.judge.worker_main import KeptOutputs


def test_copies_are_values_at_the_time_not_aliases():
    kept = KeptOutputs("cpu", budget_bytes=1 << 20, max_calls=10)
    out = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert kept.add(out)
    out.fill_(-1)  # the model reuses its output memory afterwards
    assert torch.equal(kept.items[0], torch.arange(6, dtype=torch.float32).reshape(2, 3))


def test_nested_outputs_of_mixed_dtypes_keep_their_structure():
    kept = KeptOutputs("cpu", budget_bytes=1 << 20, max_calls=4)
    value = (torch.ones(3, dtype=torch.float64), [torch.tensor([True, False]), 7], {"k": torch.arange(5)})
    assert kept.add(value)
    got = kept.items[0]
    assert isinstance(got, tuple) and isinstance(got[1], list) and got[1][1] == 7
    assert got[0].dtype == torch.float64 and torch.equal(got[0], value[0])
    assert torch.equal(got[1][0], value[1][0]) and torch.equal(got[2]["k"], value[2]["k"])


def test_the_buffer_is_sized_once_and_fills_up():
    out = torch.zeros(1000)  # 4000 bytes -> 4096-byte slots
    kept = KeptOutputs("cpu", budget_bytes=3 * 4096, max_calls=100)
    assert not kept.full
    for _ in range(3):
        assert kept.add(out)
    assert kept.slots == 3 and kept.full
    assert not kept.add(out)  # no fourth slot


def test_max_calls_bounds_the_buffer_below_the_budget():
    kept = KeptOutputs("cpu", budget_bytes=1 << 30, max_calls=2)
    kept.add(torch.zeros(10))
    assert kept.slots == 2


def test_an_output_larger_than_the_first_does_not_fit():
    kept = KeptOutputs("cpu", budget_bytes=1 << 20, max_calls=10)
    assert kept.add(torch.zeros(10))
    assert not kept.add(torch.zeros(1000))
