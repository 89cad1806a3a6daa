"""Outputs compared on the GPU they were computed on, across the judge's process boundary.

On the cuda backend a check's outputs stay on the device: a KernelBench output can be several
GB, and copying it to the host and comparing it there took minutes. The reference's process
(trusted) allocates an exchange buffer straight from the CUDA driver, an allocation of its own
that holds nothing else, and exports it with CUDA IPC. The candidate's process maps it and copies
each output tensor into the slot of the reference's matching tensor (same place in the output,
same dtype and shape), and sends the judge only each tensor's dtype, shape and slot (a
:class:`~cuda_agent.judge.protocol.SharedTensor`). The reference's process rebuilds the
candidate's output as views of the buffer, every view bounds-checked, and compares it with its
own output, which never left it, in chunks on the device.

The direction matters: the candidate can write only into the buffer, which holds nothing but
its own claim, never into memory the reference computes with; and the reference never maps
memory that the candidate could free under it. A tensor unlike the reference's in dtype or shape
is not copied; it is rebuilt without data (on the meta device), and the comparison fails it on
its dtype or shape, with the message the host comparison gives.
"""

from __future__ import annotations

import ctypes
import functools
import math
from typing import Any

import torch

from .correctness import tensor_leaves
from .protocol import DTYPE_NAMES, DTYPES, SharedTensor

ALIGN = 256  # slot offsets: aligned for every dtype and for coalesced copies


def _nbytes(dtype: torch.dtype, shape: tuple[int, ...]) -> int:
    return math.prod(shape) * dtype.itemsize


def layout(output: Any) -> tuple[list[list[Any]], int]:
    """The slots of an output's tensors ([dtype name, shape, offset] each), in the order of
    ``correctness.tensor_leaves``, and the bytes they need."""
    slots, offset = [], 0
    for tensor in tensor_leaves(output):
        slots.append([DTYPE_NAMES[tensor.dtype], list(tensor.shape), offset])
        offset += -(-_nbytes(tensor.dtype, tuple(tensor.shape)) // ALIGN) * ALIGN
    return slots, max(offset, ALIGN)


def place(output: Any, buffer: torch.Tensor, slots: list[list[Any]]) -> Any:
    """Candidate side: copy each tensor of ``output`` into its slot of ``buffer`` (a uint8 view
    of the mapped exchange buffer) where it matches the slot, and return the output with every
    tensor replaced by its SharedTensor."""
    seen = 0  # tensors visited so far, in the slots' order

    def visit(value: Any) -> Any:
        nonlocal seen
        if isinstance(value, torch.Tensor):
            k, seen = seen, seen + 1
            name = DTYPE_NAMES.get(value.dtype)
            if name is None:
                raise TypeError(f"unsupported tensor dtype {value.dtype}")
            shape = tuple(value.shape)
            if k < len(slots) and slots[k][0] == name and tuple(slots[k][1]) == shape:
                offset = int(slots[k][2])
                nbytes = _nbytes(value.dtype, shape)
                buffer[offset:offset + nbytes].view(value.dtype).view(shape).copy_(value.detach())
                return SharedTensor(name, shape, offset)
            return SharedTensor(name, shape, None)
        if isinstance(value, tuple):
            return tuple(visit(v) for v in value)
        if isinstance(value, list):
            return [visit(v) for v in value]
        if isinstance(value, dict):
            placed = {k: visit(value[k]) for k in sorted(value, key=str)}  # in the slots' order
            return {k: placed[k] for k in value}
        return value

    return visit(output)


class MalformedOutput(ValueError):
    """The candidate's description of its output does not fit the exchange buffer."""


def rebuild(description: Any, buffer: torch.Tensor) -> tuple[Any, bool]:
    """Reference side: the candidate's output as views of ``buffer``, from its description
    (candidate side: the reference's weights, from the reference's description).
    Returns (the output, whether every tensor has data); tensors without a slot are meta tensors."""
    complete = True

    def visit(value: Any) -> Any:
        nonlocal complete
        if isinstance(value, SharedTensor):
            dtype = DTYPES[value.dtype]
            nbytes = _nbytes(dtype, value.shape)
            if value.offset is None:
                complete = False
            elif value.offset % dtype.itemsize or value.offset + nbytes > buffer.numel():
                raise MalformedOutput(f"a tensor of {nbytes} bytes at offset {value.offset} does not fit the "
                                      f"exchange buffer of {buffer.numel()} bytes")
            try:  # a shape torch cannot hold (a dimension past int64, a size that overflows) is the candidate's
                if value.offset is None:
                    return torch.empty(value.shape, dtype=dtype, device="meta")
                return buffer[value.offset:value.offset + nbytes].view(dtype).view(value.shape)
            except (RuntimeError, TypeError, ValueError, OverflowError) as exc:
                raise MalformedOutput(f"a tensor of shape {list(value.shape)} cannot be described: {exc}") from None
        if isinstance(value, torch.Tensor):
            raise MalformedOutput("a tensor was sent whole where the exchange buffer was expected")
        if isinstance(value, tuple):
            return tuple(visit(v) for v in value)
        if isinstance(value, list):
            return [visit(v) for v in value]
        if isinstance(value, dict):
            return {k: visit(v) for k, v in value.items()}
        return value

    return visit(description), complete


# -- the CUDA driver: one allocation, exported and mapped -----------------------------------------
class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_byte * 64)]


class ExchangeUnavailable(RuntimeError):
    """CUDA IPC did not work here: the outputs cross to the judge instead."""


@functools.lru_cache(maxsize=1)
def _driver() -> ctypes.CDLL:
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise ExchangeUnavailable(f"the CUDA driver library could not be loaded ({exc})") from None


def _check(rc: int, what: str) -> None:
    if rc != 0:
        text = ctypes.c_char_p()
        _driver().cuGetErrorString(rc, ctypes.byref(text))
        raise ExchangeUnavailable(f"{what} failed: {(text.value or b'').decode() or f'CUDA error {rc}'}")


def _use_torch_context() -> None:
    """Make the context torch computes in current on this thread, so that the driver's calls
    allocate and map where torch's tensors live."""
    torch.cuda.init()
    torch.cuda.current_device()
    lib = _driver()
    context = ctypes.c_void_p()
    _check(lib.cuCtxGetCurrent(ctypes.byref(context)), "cuCtxGetCurrent")
    if not context.value:
        device = ctypes.c_int()
        _check(lib.cuDeviceGet(ctypes.byref(device), torch.cuda.current_device()), "cuDeviceGet")
        _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
        _check(lib.cuCtxSetCurrent(context), "cuCtxSetCurrent")


class _Memory:
    """A device pointer that torch can view (through the CUDA array interface)."""

    def __init__(self, pointer: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (pointer, False),
                                         "version": 3, "strides": None}


def _view(pointer: int, nbytes: int) -> torch.Tensor:
    return torch.as_tensor(_Memory(pointer, nbytes), device="cuda")


class ExchangeBuffer:
    """Reference side: a driver allocation of its own, exported for the candidate to write into."""

    def __init__(self, nbytes: int):
        _use_torch_context()
        lib = _driver()
        self.pointer = ctypes.c_uint64()
        _check(lib.cuMemAlloc_v2(ctypes.byref(self.pointer), ctypes.c_size_t(nbytes)), "cuMemAlloc")
        handle = _IpcHandle()
        try:
            _check(lib.cuIpcGetMemHandle(ctypes.byref(handle), self.pointer), "cuIpcGetMemHandle")
        except ExchangeUnavailable:
            lib.cuMemFree_v2(self.pointer)
            raise
        self.handle = bytes(handle.reserved).hex()
        self.nbytes = nbytes
        self.tensor = _view(self.pointer.value, nbytes)


class MappedBuffer:
    """Candidate side: the reference's exchange buffer, mapped into this process."""

    def __init__(self, handle_hex: str):
        raw = bytes.fromhex(handle_hex)
        if len(raw) != ctypes.sizeof(_IpcHandle):
            raise ExchangeUnavailable("malformed exchange handle")
        _use_torch_context()
        lib = _driver()
        handle = _IpcHandle()
        ctypes.memmove(ctypes.addressof(handle), raw, len(raw))
        pointer = ctypes.c_uint64()
        # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1
        _check(lib.cuIpcOpenMemHandle_v2(ctypes.byref(pointer), handle, ctypes.c_uint(1)), "cuIpcOpenMemHandle")
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        _check(lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), pointer), "cuMemGetAddressRange")
        self.handle = handle_hex
        self.tensor = _view(pointer.value, size.value)
