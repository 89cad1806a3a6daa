"""Messages between the trusted judge and its worker processes.

A message is a length-prefixed JSON header followed by raw tensor buffers. Nothing is pickled:
the judge reads bytes written by a process that runs candidate code, so decoding must never
execute anything. Tensors travel as (dtype, shape, bytes) and are rebuilt with
``torch.frombuffer``; every size is checked against the bytes actually present and a limit.
"""

from __future__ import annotations

import json
import math
import os
import select
import struct
import time
from dataclasses import dataclass
from typing import Any

import torch

_HEADER = struct.Struct("<Q")
MAX_HEADER_BYTES = 64 * 1024 * 1024
FIRST_READ_BYTES = 1 << 20

DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, name)
    for name in ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int64", "int32",
                 "int16", "int8", "uint8", "bool", "complex64", "complex128")
    if hasattr(torch, name)
}
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}


@dataclass(frozen=True)
class SharedTensor:
    """A tensor left on the device, in the judge's exchange buffer (see ``device_exchange``):
    its dtype, shape and byte offset in the buffer; no offset where it was not copied there."""

    dtype: str
    shape: tuple[int, ...]
    offset: int | None


class ProtocolError(Exception):
    """The peer sent something that is not a well-formed message (or went away)."""


class ChannelTimeout(ProtocolError):
    """The peer did not send or accept a whole message before the deadline."""


def spin_until_readable(fd: int, seconds: float) -> None:
    """Poll ``fd`` without sleeping for up to ``seconds``.

    Used while timing: a thread that sleeps in read() wakes up on a cold core and runs the next
    call's launch path slowly and erratically; polling keeps it as hot as a user's tight loop.
    """
    end = time.perf_counter() + seconds
    while not select.select([fd], [], [], 0)[0]:
        if time.perf_counter() > end:
            return


def _wait(fd: int, for_write: bool, deadline: float | None) -> None:
    """Block until ``fd`` is ready, or raise ChannelTimeout at ``deadline`` (time.monotonic)."""
    if deadline is None:
        return
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise ChannelTimeout("deadline passed")
    ready = select.select([], [fd], [], remaining) if for_write else select.select([fd], [], [], remaining)
    if not any(ready):
        raise ChannelTimeout("deadline passed")


# -- encoding ---------------------------------------------------------------------------------
def _encode(value: Any, buffers: list[memoryview]) -> Any:
    if isinstance(value, torch.Tensor):
        if type(value) not in (torch.Tensor, torch.nn.Parameter):  # no subclasses: they can defer work
            raise TypeError(f"cannot send a {type(value).__name__}: only plain torch.Tensor")
        tensor = value.detach()
        if tensor.dtype not in DTYPE_NAMES:
            raise TypeError(f"unsupported tensor dtype {tensor.dtype}")
        if tensor.device.type != "cpu":
            tensor = tensor.cpu()
        flat = tensor.contiguous().reshape(-1)
        raw = flat.view(torch.uint8) if flat.numel() else torch.empty(0, dtype=torch.uint8)
        buffers.append(memoryview(raw.numpy()).cast("B"))
        return {"__tensor__": len(buffers) - 1, "dtype": DTYPE_NAMES[tensor.dtype],
                "shape": list(tensor.shape), "device": value.device.type}
    if isinstance(value, SharedTensor):
        return {"__shared__": [value.dtype, list(value.shape), value.offset]}
    if isinstance(value, tuple):
        return {"__tuple__": [_encode(v, buffers) for v in value]}
    if isinstance(value, list):
        return [_encode(v, buffers) for v in value]
    if isinstance(value, dict):
        return {"__dict__": [[str(k), _encode(v, buffers)] for k, v in value.items()]}
    if isinstance(value, float) and not math.isfinite(value):
        return {"__float__": repr(value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (torch.dtype, torch.device, torch.Size)):
        return {"__repr__": str(value)}
    raise TypeError(f"cannot send a value of type {type(value).__name__}")


def as_received(value: Any) -> Any:
    """``value`` as the other end of the channel receives it, its tensors left where they are:
    tuples of any type arrive as tuples, dict keys as strings, dtypes, devices and sizes as text.
    What is compared with a value that crossed the channel must have crossed it too, or be put
    in this form."""
    if isinstance(value, (torch.Tensor, SharedTensor)):
        return value
    if isinstance(value, tuple):
        return tuple(as_received(v) for v in value)
    if isinstance(value, list):
        return [as_received(v) for v in value]
    if isinstance(value, dict):
        return {str(k): as_received(v) for k, v in value.items()}
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    return value


def encode(message: dict[str, Any]) -> list[memoryview | bytes]:
    """Frames for ``message``: header length, JSON header, buffers. Tensors may be nested."""
    buffers: list[memoryview] = []
    body = _encode(message, buffers)
    header = json.dumps({"body": body, "sizes": [b.nbytes for b in buffers]}).encode()
    return [_HEADER.pack(len(header)), header, *buffers]


def send(fd: int, message: dict[str, Any], deadline: float | None = None) -> None:
    """Write one message. With a deadline, ``fd`` must be non-blocking."""
    for frame in encode(message):
        view = memoryview(frame).cast("B")
        while view:
            _wait(fd, True, deadline)
            try:
                written = os.write(fd, view)
            except BlockingIOError:
                continue
            view = view[written:]


# -- decoding ---------------------------------------------------------------------------------
def _read_exact(fd: int, n: int, deadline: float | None) -> bytearray:
    """Read exactly ``n`` bytes. The buffer doubles as the bytes arrive, from ``FIRST_READ_BYTES``:
    a size the peer declares costs memory only once that many bytes are really here."""
    buf = bytearray(min(n, FIRST_READ_BYTES))
    got = 0
    while got < n:
        if got == len(buf):
            buf.extend(bytes(min(n, 2 * len(buf)) - len(buf)))
        _wait(fd, False, deadline)
        view = memoryview(buf)[got:]
        try:
            chunk = os.readv(fd, [view])
        except BlockingIOError:
            continue
        finally:
            view.release()  # a bytearray with a view on it cannot grow
        if chunk == 0:
            raise ProtocolError("the peer closed its channel")
        got += chunk
    return buf


def _decode(node: Any, buffers: list[bytearray]) -> Any:
    if isinstance(node, list):
        return [_decode(v, buffers) for v in node]
    if not isinstance(node, dict):
        return node
    if "__tensor__" in node:
        index, dtype_name, shape = node.get("__tensor__"), node.get("dtype"), node.get("shape")
        if dtype_name not in DTYPES or not isinstance(index, int) or not 0 <= index < len(buffers):
            raise ProtocolError(f"malformed tensor entry {str(node)[:200]}")
        if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
            raise ProtocolError(f"malformed tensor shape {str(shape)[:200]}")
        dtype = DTYPES[dtype_name]
        raw = buffers[index]
        numel = math.prod(shape)
        itemsize = torch.empty(0, dtype=dtype).element_size()
        if numel * itemsize != len(raw):
            raise ProtocolError(f"tensor of shape {shape} and {dtype_name} needs {numel * itemsize} "
                                f"bytes, {len(raw)} were sent")
        if numel == 0:
            return torch.empty(shape, dtype=dtype)
        return torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape)
    if "__shared__" in node:
        return _shared_tensor(node["__shared__"])
    if "__tuple__" in node:
        return tuple(_decode(v, buffers) for v in node["__tuple__"])
    if "__dict__" in node:
        return {str(k): _decode(v, buffers) for k, v in node["__dict__"]}
    if "__float__" in node:
        return float(node["__float__"])
    if "__repr__" in node:
        return str(node["__repr__"])
    return {k: _decode(v, buffers) for k, v in node.items()}


def _shared_tensor(entry: Any) -> SharedTensor:
    if not isinstance(entry, list) or len(entry) != 3:
        raise ProtocolError(f"malformed shared tensor entry {str(entry)[:200]}")
    dtype_name, shape, offset = entry
    if dtype_name not in DTYPES or not isinstance(shape, list) \
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape) \
            or not (offset is None or (isinstance(offset, int) and not isinstance(offset, bool) and offset >= 0)):
        raise ProtocolError(f"malformed shared tensor entry {str(entry)[:200]}")
    return SharedTensor(dtype_name, tuple(shape), offset)


def receive(fd: int, max_bytes: int, deadline: float | None = None, spin_s: float = 0.0) -> dict[str, Any]:
    """Read one message; refuse anything larger than ``max_bytes`` in all.

    Anything wrong with what arrives, however deep, is a ProtocolError: the sender may be
    hostile. With a deadline, ``fd`` must be non-blocking. ``spin_s`` polls before sleeping.
    """
    if spin_s:
        spin_until_readable(fd, spin_s)
    (length,) = _HEADER.unpack(bytes(_read_exact(fd, _HEADER.size, deadline)))
    if length > min(MAX_HEADER_BYTES, max_bytes):
        raise ProtocolError(f"message header of {length} bytes exceeds the limit")
    raw = _read_exact(fd, length, deadline)
    try:
        header = json.loads(raw)
        sizes = header["sizes"]
        body = header["body"]
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise ProtocolError(f"malformed message header ({type(exc).__name__})") from None
    if not isinstance(sizes, list) or not all(isinstance(s, int) and s >= 0 for s in sizes):
        raise ProtocolError("malformed buffer sizes")
    if sum(sizes) + length > max_bytes:
        raise ProtocolError(f"message of {sum(sizes) + length} bytes exceeds the limit of {max_bytes}")
    buffers = [_read_exact(fd, size, deadline) for size in sizes]
    try:
        message = _decode(body, buffers)
    except ProtocolError:
        raise
    except Exception as exc:  # malformed structure: wrong types, bad literals, too deep
        raise ProtocolError(f"malformed message body ({type(exc).__name__})") from None
    if not isinstance(message, dict):
        raise ProtocolError("a message must be an object")
    return message
