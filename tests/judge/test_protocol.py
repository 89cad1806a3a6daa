"""The judge/worker wire format: faithful round trips, and refusal of anything forged."""

from __future__ import annotations

import json
import math
import os
import pickle
import struct
import threading

import pytest
import torch

from cuda_agent.judge import protocol
from cuda_agent.judge.protocol import DTYPES, ProtocolError


def _transfer(data: bytes, max_bytes: int = 1 << 30) -> dict:
    """Feed raw bytes into a pipe from a thread (pipes hold little) and receive one message.

    The writer closes its end afterwards, so a receiver that reads past what was sent gets
    "closed its channel" instead of the error a test expects.
    """
    read_fd, write_fd = os.pipe()

    def writer() -> None:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view):]
        except OSError:  # the reader gave up early and closed its end
            pass
        finally:
            os.close(write_fd)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        return protocol.receive(read_fd, max_bytes)
    finally:
        os.close(read_fd)
        thread.join(timeout=10)


def _wire(message: dict) -> bytes:
    return b"".join(bytes(memoryview(frame).cast("B")) for frame in protocol.encode(message))


def _forged(body, sizes: list[int], buffers: bytes = b"") -> bytes:
    header = json.dumps({"body": body, "sizes": sizes}).encode()
    return struct.pack("<Q", len(header)) + header + buffers


def _round_trip(message: dict) -> dict:
    read_fd, write_fd = os.pipe()
    thread = threading.Thread(target=protocol.send, args=(write_fd, message), daemon=True)
    thread.start()
    try:
        return protocol.receive(read_fd, 1 << 30)
    finally:
        thread.join(timeout=10)
        os.close(read_fd)
        os.close(write_fd)


def _sample(dtype: torch.dtype) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.rand(3, 5, generator=gen) > 0.5
    if dtype.is_complex:
        return torch.randn(3, 5, dtype=dtype, generator=gen)
    if dtype.is_floating_point:
        return torch.randn(3, 5, generator=gen).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(max(info.min, -1000), min(info.max, 1000), (3, 5), generator=gen, dtype=dtype)


# -- round trips ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
def test_every_dtype_round_trips_bit_exactly(dtype):
    tensor = _sample(dtype)
    got = _round_trip({"x": tensor})["x"]
    assert type(got) is torch.Tensor
    assert got.dtype == dtype and got.shape == tensor.shape
    assert torch.equal(got.view(torch.uint8), tensor.contiguous().view(torch.uint8))


def test_all_supported_dtypes_are_covered():
    for name in ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8",
                 "uint8", "bool", "complex64", "complex128"):
        assert name in DTYPES


def test_nested_structures_round_trip():
    a = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    b = torch.tensor([True, False])
    message = {
        "output": (a, [b, {"inner": (a * 2, None)}], ()),
        "items": [1, 2.5, "text", None, True, [], {}],
        "mapping": {"k": (torch.tensor(7, dtype=torch.int64),)},
        "specials": [float("nan"), float("inf"), float("-inf")],
    }
    got = _round_trip(message)
    out = got["output"]
    assert isinstance(out, tuple) and len(out) == 3
    assert torch.equal(out[0], a)
    assert isinstance(out[1], list) and torch.equal(out[1][0], b)
    assert isinstance(out[1][1], dict) and isinstance(out[1][1]["inner"], tuple)
    assert torch.equal(out[1][1]["inner"][0], a * 2) and out[1][1]["inner"][1] is None
    assert out[2] == ()
    assert got["items"] == [1, 2.5, "text", None, True, [], {}]
    assert type(got["items"][4]) is bool
    assert isinstance(got["mapping"]["k"], tuple) and got["mapping"]["k"][0].item() == 7
    nan, inf, ninf = got["specials"]
    assert math.isnan(nan) and inf == math.inf and ninf == -math.inf


def test_zero_dim_and_empty_tensors_round_trip():
    got = _round_trip({"scalar": torch.tensor(3.5, dtype=torch.float64),
                       "empty": torch.empty(0, 4, dtype=torch.bfloat16),
                       "none": torch.zeros(2, 0, 3, dtype=torch.int32)})
    assert got["scalar"].shape == () and got["scalar"].item() == 3.5
    assert got["empty"].shape == (0, 4) and got["empty"].dtype == torch.bfloat16
    assert got["none"].shape == (2, 0, 3) and got["none"].dtype == torch.int32


def test_non_contiguous_tensors_arrive_with_their_values():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    view = base.t()[1:, ::2]
    got = _round_trip({"v": view})["v"]
    assert got.shape == view.shape and torch.equal(got, view)


def test_decoded_tensors_are_independent_and_writable():
    got = _round_trip({"a": torch.ones(4), "b": torch.ones(4)})
    got["a"].add_(1)
    assert torch.equal(got["a"], torch.full((4,), 2.0)) and torch.equal(got["b"], torch.ones(4))


def test_torch_metadata_values_travel_as_plain_data():
    got = _round_trip({"dtype": torch.float16, "device": torch.device("cpu"), "size": torch.Size([2, 3])})
    assert got == {"dtype": "torch.float16", "device": "cpu", "size": (2, 3)}
    assert type(got["size"]) is tuple


def test_encode_refuses_what_it_cannot_send_faithfully():
    class Sub(torch.Tensor):
        pass

    with pytest.raises(TypeError, match="only plain torch.Tensor"):
        protocol.encode({"x": torch.ones(2).as_subclass(Sub)})
    with pytest.raises(TypeError, match="cannot send a value of type"):
        protocol.encode({"x": object()})
    with pytest.raises(TypeError, match="cannot send a value of type"):
        protocol.encode({"x": {1, 2}})


def test_parameters_are_sent_as_plain_tensors():
    got = _round_trip({"w": torch.nn.Parameter(torch.ones(3))})["w"]
    assert type(got) is torch.Tensor and torch.equal(got, torch.ones(3))


# -- forged and broken messages ------------------------------------------------------------------
def test_wrong_byte_count_is_refused():
    body = {"x": {"__tensor__": 0, "dtype": "float32", "shape": [4], "device": "cpu"}}
    with pytest.raises(ProtocolError, match="needs 16 bytes, 12 were sent"):
        _transfer(_forged(body, [12], b"\0" * 12))
    with pytest.raises(ProtocolError, match="needs 16 bytes"):
        _transfer(_forged(body, [20], b"\0" * 20))


def test_unknown_dtype_is_refused():
    body = {"x": {"__tensor__": 0, "dtype": "object", "shape": [1], "device": "cpu"}}
    with pytest.raises(ProtocolError, match="malformed tensor entry"):
        _transfer(_forged(body, [8], b"\0" * 8))


@pytest.mark.parametrize("shape", [[-1], [2, -2], "4", [1.5], None])
def test_bad_shapes_are_refused(shape):
    body = {"x": {"__tensor__": 0, "dtype": "uint8", "shape": shape, "device": "cpu"}}
    with pytest.raises(ProtocolError, match="malformed tensor shape"):
        _transfer(_forged(body, [4], b"\0" * 4))


@pytest.mark.parametrize("index", [1, -1, "0", None])
def test_tensor_index_must_name_a_sent_buffer(index):
    body = {"x": {"__tensor__": index, "dtype": "uint8", "shape": [4], "device": "cpu"}}
    with pytest.raises(ProtocolError, match="malformed tensor entry"):
        _transfer(_forged(body, [4], b"\0" * 4))


def test_header_beyond_max_bytes_is_refused_before_reading_it():
    # Only the length prefix is sent: the receiver must refuse it before reading any further.
    with pytest.raises(ProtocolError, match="header of 4096 bytes exceeds the limit"):
        _transfer(struct.pack("<Q", 4096), max_bytes=1024)


def test_header_beyond_the_global_cap_is_refused():
    length = protocol.MAX_HEADER_BYTES + 1
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        _transfer(struct.pack("<Q", length), max_bytes=1 << 40)


def test_buffers_beyond_max_bytes_are_refused_before_reading_them():
    body = {"x": {"__tensor__": 0, "dtype": "uint8", "shape": [1 << 30], "device": "cpu"}}
    data = _forged(body, [1 << 30])  # announces a gigabyte, sends none of it
    with pytest.raises(ProtocolError, match="exceeds the limit of 65536"):
        _transfer(data, max_bytes=65536)


def test_a_real_message_over_the_limit_is_refused():
    data = _wire({"x": torch.zeros(1024)})
    assert len(data) > 4096
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        _transfer(data, max_bytes=4096)


@pytest.mark.parametrize("cut", [0, 3, 8, 20, -1])
def test_truncated_streams_are_protocol_errors(cut):
    data = _wire({"ok": True, "output": torch.arange(10, dtype=torch.float32)})
    with pytest.raises(ProtocolError):
        _transfer(data[: cut if cut >= 0 else len(data) + cut])


@pytest.mark.parametrize("header", [b"not json", b"[1, 2]", b'{"body": {}}', b'{"sizes": []}',
                                    b'{"body": {}, "sizes": [-1]}', b'{"body": {}, "sizes": "4"}',
                                    b'{"body": [1], "sizes": []}', b'{"body": 5, "sizes": []}'])
def test_malformed_headers_are_protocol_errors(header):
    with pytest.raises(ProtocolError):
        _transfer(struct.pack("<Q", len(header)) + header)


def test_decoding_never_unpickles(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("the protocol must never unpickle")

    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "Unpickler", forbidden)
    monkeypatch.setattr(torch, "load", forbidden)

    class Exploit:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    payload = pickle.dumps(Exploit())
    # A pickle where the header should be: not JSON, refused.
    with pytest.raises(ProtocolError):
        _transfer(struct.pack("<Q", len(payload)) + payload)
    # A pickle inside a tensor buffer: just bytes.
    body = {"x": {"__tensor__": 0, "dtype": "uint8", "shape": [len(payload)], "device": "cpu"},
            "__reduce__": "os.system", "py/object": "os.system"}
    got = _transfer(_forged(body, [len(payload)], payload))
    assert bytes(got["x"].numpy()) == payload
    assert got["__reduce__"] == "os.system" and got["py/object"] == "os.system"
    # And the real thing still works with unpickling disabled.
    assert torch.equal(_round_trip({"y": torch.ones(3)})["y"], torch.ones(3))


@pytest.mark.parametrize("body", [
    pytest.param(b'{"ok": true, "x": ' + b"[" * 5000 + b"]" * 5000 + b"}", id="deep-nesting"),
    pytest.param(b'{"ok": true, "x": {"__tuple__": 5}}', id="tuple-not-a-list"),
    pytest.param(b'{"ok": true, "x": {"__dict__": [1]}}', id="dict-not-pairs"),
    pytest.param(b'{"ok": true, "x": {"__float__": "abc"}}', id="float-not-a-number"),
])
def test_structurally_malformed_bodies_are_protocol_errors(body):
    header = b'{"body": ' + body + b', "sizes": []}'
    with pytest.raises(ProtocolError):
        _transfer(struct.pack("<Q", len(header)) + header)


def test_a_declared_size_costs_no_memory_before_its_bytes_arrive():
    # A forged reply declares a 60 GiB tensor, sends 1 KiB of it and goes away: the judge must
    # not have allocated the 60 GiB (nor a large part of it) first.
    import tracemalloc

    declared = 60 << 30
    forged = _forged({"x": {"__tensor__": 0, "dtype": "uint8", "shape": [declared]}}, [declared], b"\0" * 1024)
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError, match="closed its channel"):
            _transfer(forged, max_bytes=1 << 36)  # the judge's default limit lets 60 GiB through
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * protocol.FIRST_READ_BYTES, peak


def test_a_large_honest_message_still_arrives_whole():
    # The buffer grows as bytes come: a message many times the first read's size is intact.
    x = torch.arange(5 * protocol.FIRST_READ_BYTES // 4 + 7, dtype=torch.float32)
    got = _transfer(_wire({"x": x}))
    assert torch.equal(got["x"], x)


@pytest.mark.parametrize("seed", range(40))
def test_fuzzed_replies_are_protocol_errors_or_messages_never_anything_else(seed):
    # Random bytes, and honest messages with random bytes flipped or cut: receive either decodes
    # a message or raises ProtocolError, whatever arrives.
    import random

    rng = random.Random(seed)
    honest = bytearray(_wire({"output": torch.randn(4, 5), "ok": True, "n": [1, 2.5, "x"]}))
    if seed % 3 == 0:
        data = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 200)))
    elif seed % 3 == 1:
        for _ in range(rng.randint(1, 8)):
            honest[rng.randrange(len(honest))] = rng.getrandbits(8)
        data = bytes(honest)
    else:
        data = bytes(honest[:rng.randrange(len(honest))])
    try:
        message = _transfer(data, max_bytes=1 << 20)
    except ProtocolError:
        return
    assert isinstance(message, dict)
