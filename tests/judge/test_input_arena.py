"""The input arena: the candidate's timed inputs laid out, staged and viewed (judge/input_arena.py)."""

from __future__ import annotations

import fcntl
import os

import pytest
import torch

from cuda_agent.judge.input_arena import Unstageable, host_arena, layout, stage, views


def _arena(nbytes: int) -> torch.Tensor:
    fd = os.memfd_create("test-arena", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, nbytes)
    tensor, _mapping = host_arena(fd, nbytes)
    os.close(fd)  # the mapping stays
    return tensor


def test_views_give_back_the_inputs_with_their_strides_and_values():
    transposed = torch.randn(6, 4).t()
    inputs = [transposed, torch.arange(10, dtype=torch.int64), 1.5, [2, 3], None]
    slots, nbytes = layout(inputs, "cpu")
    arena = _arena(nbytes)
    stage(inputs, arena, slots)
    got = views(arena, slots)
    assert got[0].stride() == transposed.stride() and torch.equal(got[0], transposed)
    assert torch.equal(got[1], inputs[1]) and got[1].dtype == torch.int64
    assert got[2:] == [1.5, [2, 3], None]
    assert all(slot[4] % 256 == 0 for slot in slots if slot[0] == "tensor")


def test_a_second_process_sees_what_is_staged(tmp_path):
    # The candidate's mapping is its own: it sees what the reference writes into the file.
    fd = os.memfd_create("test-arena", os.MFD_ALLOW_SEALING)
    inputs = [torch.randn(32, 8)]
    slots, nbytes = layout(inputs, "cpu")
    os.ftruncate(fd, nbytes)
    writer, _w = host_arena(fd, nbytes)
    reader, _r = host_arena(fd, nbytes)
    seen = views(reader, slots)[0]
    stage(inputs, writer, slots)
    assert torch.equal(seen, inputs[0])
    stage([inputs[0] * 2], writer, slots)
    assert torch.equal(seen, inputs[0] * 2)
    os.close(fd)


def test_an_expanded_input_is_laid_out_whole():
    expanded = torch.randn(1, 8).expand(5, 8)  # stride 0: its rows share memory
    slots, nbytes = layout([expanded], "cpu")
    assert slots[0][3] == [8, 1] and nbytes >= 5 * 8 * 4
    arena = _arena(nbytes)
    stage([expanded], arena, slots)
    assert torch.equal(views(arena, slots)[0], expanded)


@pytest.mark.parametrize("inputs, why", [
    ([[torch.zeros(2)]], "holding tensors"),
    ([torch.zeros(2).to_sparse()], "tensor of"),
    ([object()], "holding tensors or other objects"),
])
def test_inputs_an_arena_cannot_hold_are_refused_with_the_reason(inputs, why):
    with pytest.raises(Unstageable, match=why):
        layout(inputs, "cpu")


def test_a_tensor_subclass_is_not_staged():
    class Marked(torch.Tensor):
        pass

    with pytest.raises(Unstageable, match="not a plain tensor"):
        layout([torch.zeros(3).as_subclass(Marked)], "cpu")


def test_inputs_that_change_structure_are_refused():
    slots, nbytes = layout([torch.zeros(4, 4), 3], "cpu")
    arena = _arena(nbytes)
    with pytest.raises(Unstageable, match="dtype or shape"):
        stage([torch.zeros(4, 5), 3], arena, slots)
    with pytest.raises(Unstageable, match="is 4 in this call and 3 in the first"):
        stage([torch.zeros(4, 4), 4], arena, slots)
    with pytest.raises(Unstageable, match="gave 1 inputs"):
        stage([torch.zeros(4, 4)], arena, slots)


def test_a_slot_outside_the_arena_is_refused():
    slots, nbytes = layout([torch.zeros(16)], "cpu")
    arena = _arena(nbytes)
    slots[0][4] = nbytes  # past the end
    with pytest.raises(Unstageable, match="does not fit"):
        views(arena, slots)


def test_a_sealed_arena_cannot_be_resized():
    # What the judge does once the reference has sized it (run_timing._seal_arena).
    fd = os.memfd_create("test-arena", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, 4096)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    with pytest.raises(PermissionError):
        os.ftruncate(fd, 1)
    os.close(fd)
