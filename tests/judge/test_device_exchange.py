"""Outputs compared where they were computed: the exchange buffer's slots, the candidate's
description of its output, and the reference process's comparison, which must not trust it.

The logic runs on any device: here a CPU byte buffer stands in for the GPU allocation that CUDA
IPC shares on the cuda backend (that path is exercised by the GPU tests).
"""

from __future__ import annotations

import math
import os
import threading

import pytest
import torch

from cuda_agent.judge import protocol
from cuda_agent.judge.correctness import compare_outputs
from cuda_agent.judge.device_exchange import ALIGN, MalformedOutput, layout, place, rebuild
from cuda_agent.judge.protocol import ProtocolError, SharedTensor
from cuda_agent.judge.worker_main import Checks, Timing, Worker


def _roundtrip(value):
    """Through the judge's wire format, as a description travels candidate -> judge -> reference."""
    read, write = os.pipe()
    try:
        sender = threading.Thread(target=protocol.send, args=(write, {"output": value}))
        sender.start()
        message = protocol.receive(read, max_bytes=1 << 30)
        sender.join()
    finally:
        os.close(read)
        os.close(write)
    return message["output"]


def _output():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(3, 5, generator=g), {"b": torch.arange(7, dtype=torch.int64), "a": torch.randn(2, generator=g)},
            1.5)


def test_layout_gives_aligned_slots_in_a_fixed_order():
    slots, nbytes = layout(_output())
    # tensors in order: the (3, 5) tensor, then the dict's by key: "a" before "b"
    assert [s[:2] for s in slots] == [["float32", [3, 5]], ["float32", [2]], ["int64", [7]]]
    assert [s[2] for s in slots] == [0, ALIGN, 2 * ALIGN] and nbytes == 3 * ALIGN


def test_an_output_placed_and_rebuilt_compares_as_the_original():
    expected = _output()
    slots, nbytes = layout(expected)
    buffer = torch.zeros(nbytes, dtype=torch.uint8)
    candidate = (expected[0] + 1e-4, {"b": expected[1]["b"].clone(), "a": expected[1]["a"].clone()}, 1.5)
    description = _roundtrip(place(candidate, buffer, slots))
    assert isinstance(description[0], SharedTensor) and list(description[1]) == ["b", "a"]  # the output's own order
    rebuilt, complete = rebuild(description, buffer)
    assert complete
    assert compare_outputs(rebuilt, expected, 0, 1e-2, 1e-2).passed
    assert torch.equal(rebuilt[1]["b"], expected[1]["b"]) and rebuilt[2] == 1.5


def test_a_tensor_of_another_shape_is_described_not_copied_and_fails_on_its_shape():
    expected = (torch.ones(4, 4), torch.ones(8))
    slots, nbytes = layout(expected)
    buffer = torch.zeros(nbytes, dtype=torch.uint8)
    rebuilt, complete = rebuild(_roundtrip(place((torch.ones(4, 4), torch.ones(9)), buffer, slots)), buffer)
    assert not complete and rebuilt[1].device.type == "meta"
    check = compare_outputs(rebuilt, expected, 0, 1e-2, 1e-2, values=complete)
    host = compare_outputs((torch.ones(4, 4), torch.ones(9)), expected, 0, 1e-2, 1e-2)
    assert not check.passed and check.message == host.message  # the host comparison's words


@pytest.mark.parametrize("entry", [["float32", [4], -256], ["float32", [-1], 0], ["nope", [4], 0], ["float32", [4]],
                                   ["float32", [True], 0], ["float32", [4], 1.5]])
def test_malformed_descriptions_are_protocol_errors(entry):
    with pytest.raises(ProtocolError):
        protocol._decode({"__shared__": entry}, [])


def test_a_description_outside_the_buffer_is_refused():
    buffer = torch.zeros(1024, dtype=torch.uint8)
    with pytest.raises(MalformedOutput, match="does not fit"):
        rebuild(SharedTensor("float32", (300,), 0), buffer)
    with pytest.raises(MalformedOutput, match="does not fit"):
        rebuild(SharedTensor("float64", (1,), 3), buffer)  # misaligned for its dtype
    with pytest.raises(MalformedOutput, match="sent whole"):
        rebuild(torch.ones(3), buffer)


class _Buffer:
    def __init__(self, nbytes: int):
        self.tensor, self.nbytes = torch.zeros(nbytes, dtype=torch.uint8), nbytes


def _reference_worker(expected, norms=None) -> Checks:
    """A reference process's checks, holding ``expected`` beside its exchange buffer."""
    worker = Worker()
    worker.trusted = True
    slots, nbytes = layout(expected)
    worker.exchanges = [_Buffer(nbytes)]
    worker.buffers[""] = worker.exchanges[0]
    checks = Checks(worker)
    checks.held["expected"], checks.held_norms["expected"] = expected, norms
    return checks


def _compare(checks: Checks, description, **group) -> dict:
    return checks.compare_exchanged({"output": description, "hold": "expected", "index": 2, "phase": "verify",
                                     "tolerance": {"atol": 1e-2, "rtol": 1e-2, "norm_rtol": None}, **group})


def test_a_groups_candidates_are_compared_with_one_held_output_each_in_its_own_buffer():
    expected = torch.randn(1000, generator=torch.Generator().manual_seed(2))
    reference = _reference_worker(expected)
    slots, nbytes = layout(expected)
    reference.worker.buffers = {"0": _Buffer(nbytes), "1": _Buffer(nbytes)}
    honest = place(expected, reference.worker.buffers["0"].tensor, slots)
    wrong = place(-expected, reference.worker.buffers["1"].tensor, slots)
    assert not _compare(reference, wrong, buffer="1", keep=True)["check"]["passed"]
    assert _compare(reference, honest, buffer="0", keep=True)["check"]["passed"]
    # each description is read in its own candidate's buffer: the honest claim, named by the
    # other candidate, is not found in that one's
    assert not _compare(reference, honest, buffer="1", keep=True)["check"]["passed"]
    assert "expected" in reference.held  # kept for the group's others
    reference.release({"hold": "expected"})
    assert not reference.held and not reference.held_norms


def test_the_reference_process_compares_and_measures_precision_in_place():
    expected = torch.randn(1000, generator=torch.Generator().manual_seed(1))
    exact = expected.double() + 1e-9
    from cuda_agent.judge.correctness import float64_norms

    reference = _reference_worker(expected, float64_norms(expected, exact))
    slots, _ = layout(expected)
    candidate = expected + 1e-3
    reply = _compare(reference, place(candidate, reference.worker.exchanges[0].tensor, slots))
    assert reply["check"]["passed"] and reply["check"]["index"] == 2
    [(dtype, cand_error, ref_error)] = reply["precision_errors"]
    assert dtype == "float32"
    assert cand_error == pytest.approx(1e-3 * math.sqrt(1000) / float(exact.norm()), rel=1e-3)
    assert not reference.held  # the held output is let go once compared

    reference = _reference_worker(expected)
    reply = _compare(reference, place(-expected, reference.worker.exchanges[0].tensor, slots))
    assert not reply["check"]["passed"] and reply["precision_errors"] == []


def test_a_candidate_cannot_pass_by_leaving_its_tensor_out_of_the_buffer():
    expected = torch.ones(64)
    reference = _reference_worker(expected)
    reply = _compare(reference, SharedTensor("float32", (64,), None))  # the right dtype and shape, no data
    assert not reply["check"]["passed"] and "left out of the exchange buffer" in reply["check"]["message"]


def test_a_description_that_does_not_fit_fails_the_candidate_not_the_reference():
    reference = _reference_worker(torch.ones(64))
    reply = _compare(reference, SharedTensor("float32", (1 << 20,), 0))
    assert not reply["check"]["passed"] and "malformed" in reply["check"]["message"]


def test_the_kept_outputs_of_timed_calls_go_through_the_buffer_one_at_a_time():
    expected = torch.arange(16, dtype=torch.float32)
    slots, nbytes = layout(expected)
    candidate = Worker()
    candidate.trusted = False
    timing = Timing(candidate)
    timing.kept = [expected * 0, expected.clone()]
    buffer = torch.zeros(nbytes, dtype=torch.uint8)

    class Mapped:
        tensor = buffer

    candidate.mapped["h"] = Mapped()
    reply = timing.outputs({"indices": [1], "exchange": {"handle": "h", "slots": slots}})
    (description,) = reply["outputs"]
    assert description == SharedTensor("float32", (16,), 0)
    assert torch.equal(buffer[:64].view(torch.float32), expected)


@pytest.mark.parametrize("description", [SharedTensor("float32", (1 << 62, 4), None),  # its size overflows
                                         SharedTensor("float32", (0, 1 << 70), 0)])     # no bytes, no int64 shape
def test_a_shape_torch_cannot_hold_fails_the_candidate_not_the_reference(description):
    reference = _reference_worker(torch.ones(64))
    reply = _compare(reference, description)
    assert not reply["check"]["passed"] and "malformed" in reply["check"]["message"]


def test_values_rewritten_after_they_are_read_change_neither_the_check_nor_the_precision(monkeypatch):
    """The candidate's process keeps the buffer mapped and may write into it while the reference
    compares: each value is read once, and the comparison and the float32 error both use that
    reading. Here every chunk is overwritten with NaN as soon as it has been read, which, read a
    second time, would hide a bfloat16 candidate's error from the precision sums."""
    from cuda_agent.judge import correctness
    from cuda_agent.judge.correctness import float64_norms

    g = torch.Generator().manual_seed(3)
    expected = torch.randn(1 << 12, generator=g)
    exact = expected.double() + 1e-9 * torch.randn(1 << 12, generator=g, dtype=torch.float64)
    norms = float64_norms(expected, exact)
    slots, _ = layout(expected)
    reduced = expected.bfloat16().float()  # within the 1e-2 tolerance, far from float32 precision

    honest = _reference_worker(expected, norms)
    honest_reply = _compare(honest, place(reduced, honest.worker.exchanges[0].tensor, slots))
    assert honest_reply["check"]["passed"]

    chunks = correctness._wide_chunks
    monkeypatch.setattr(correctness, "CHUNK_ELEMENTS", 1 << 10)

    def rewritten_after_reading(a, b, wide=torch.float64):
        for start, a_chunk, b_chunk in chunks(a, b, wide):
            yield start, a_chunk, b_chunk
            a.reshape(-1)[start:start + a_chunk.numel()] = float("nan")  # the candidate writes again

    monkeypatch.setattr(correctness, "_wide_chunks", rewritten_after_reading)
    reference = _reference_worker(expected, norms)
    reply = _compare(reference, place(reduced, reference.worker.exchanges[0].tensor, slots))
    assert reply["check"]["passed"]
    [(_, *errors)] = reply["precision_errors"]
    [(_, *honest_errors)] = honest_reply["precision_errors"]
    assert errors == pytest.approx(honest_errors, rel=1e-9)
    assert errors[0] > 1e-3  # bfloat16's error, still seen


def test_chunks_are_copies_even_in_the_compared_dtype():
    from cuda_agent.judge.correctness import _wide_chunks

    x = torch.ones(10, dtype=torch.float64)
    (_, a, b), = _wide_chunks(x, x.clone())
    x.fill_(float("nan"))
    assert torch.equal(a, torch.ones(10, dtype=torch.float64))


def test_a_reference_output_in_host_memory_is_not_given_a_gpu_buffer():
    worker = Worker()
    worker.trusted = True
    reply = {"output": torch.ones(3)}
    Checks(worker)._hold("expected", torch.ones(3), reply, exchange=True)
    assert "host memory" in reply["exchange_error"] and "exchange" not in reply and not worker.exchanges
    assert torch.equal(reply["output"], torch.ones(3))  # it goes whole, and is compared on the host


def test_the_determinism_probe_holds_a_copy_of_the_first_output():
    """A model that returns the same tensor on every call, changed in place, must not be held
    twice under two names: the probe would compare it with itself."""
    worker = Worker()
    worker.trusted = True
    state = torch.zeros(4)
    checks = Checks(worker)
    checks._hold("first", (state, [state]), {}, exchange=False, copy=True)
    state += 1  # the model's next call
    checks._hold("second", (state, [state]), {}, exchange=False)
    reply = checks.compare_held({"candidate": "second", "reference": "first",
                                 "tolerance": {"atol": 1e-2, "rtol": 1e-2, "norm_rtol": None}})
    assert not reply["check"]["passed"]


def test_the_probes_copy_keeps_the_outputs_container_types():
    from collections import OrderedDict, namedtuple

    from cuda_agent.judge.correctness import map_tensors

    class Items(list):
        pass

    Pair = namedtuple("Pair", "a b")
    output = (Pair(torch.ones(2), Items([torch.zeros(1)])), OrderedDict(x=torch.ones(1)), torch.return_types.max(
        (torch.ones(1), torch.zeros(1, dtype=torch.int64))))
    copied = map_tensors(lambda t: t.detach().clone(), output)  # the probe's copy
    assert compare_outputs(copied, output, 0, 0.0, 0.0).passed  # the same types all through
    assert type(copied[0][1]) is Items and copied[0].a.data_ptr() != output[0].a.data_ptr()


@pytest.mark.parametrize("expected", [{1: torch.ones(4)},
                                      torch.return_types.max((torch.ones(2), torch.zeros(2, dtype=torch.int64)))],
                         ids=["int_keys", "return_type"])
def test_outputs_the_channel_reshapes_compare_on_the_gpu_as_on_the_host(expected):
    """The candidate's description crosses the channel, which sends every tuple as a tuple and
    every dict key as a string: the same output from the candidate must still match."""
    reference = _reference_worker(expected)
    slots, _ = layout(expected)
    reply = _compare(reference, _roundtrip(place(expected, reference.worker.exchanges[0].tensor, slots)))
    host = compare_outputs(_roundtrip(expected), _roundtrip(expected), 0, 1e-2, 1e-2)
    assert reply["check"]["passed"] and host.passed
