"""The device-side wait queued before each timed call on the cuda backend, filling every SM.

The wait lets the host's path through the call (Python, binding, launches) overlap the device's
idle time, so the events around the call time the device's work alone (see ``timing``). A wait
that occupies one SM (``torch.cuda._sleep`` is one thread) leaves the rest of the device free: a
kernel the call launches on a stream of its own, not ordered after the current stream, runs
during the wait, before the start event, and is never counted. This wait takes every thread slot
of every SM (blocks of ``threads`` on each SM until its ``maxThreadsPerMultiProcessor`` is used
up), so no block of any stream can start until it ends; and the host makes the call only once
every block of the wait has announced itself resident (a byte each in host-mapped memory), so
the wait holds the device before anything of the call reaches it.

The kernel is PTX handed to the driver, which compiles it for the device in this process: no
compiler runs, and nothing of it comes from the candidate. Only thread 0 of each block spins (on
the SM's cycle counter); the others wait at the block's barrier and issue nothing.
"""

from __future__ import annotations

import ctypes
import time

# One thread per block spins for ``cycles`` after setting its block's byte in ``flags``.
_PTX = rb"""
.version 7.0
.target sm_75
.address_size 64

.visible .entry fill_wait(.param .u64 cycles, .param .u64 flags)
.maxntid 1024, 1, 1
{
    .reg .pred spinning;
    .reg .b32 thread, block;
    .reg .b64 wait, flag, begun, elapsed, block_wide;
    .reg .b16 one;

    mov.u32 thread, %tid.x;
    setp.ne.u32 spinning, thread, 0;
    @spinning bra BARRIER;
    ld.param.u64 wait, [cycles];
    ld.param.u64 flag, [flags];
    mov.u32 block, %ctaid.x;
    cvt.u64.u32 block_wide, block;
    add.u64 flag, flag, block_wide;
    mov.u16 one, 1;
    st.volatile.u8 [flag], one;
    membar.sys;
    mov.u64 begun, %clock64;
SPIN:
    mov.u64 elapsed, %clock64;
    sub.u64 elapsed, elapsed, begun;
    setp.lt.u64 spinning, elapsed, wait;
    @spinning bra SPIN;
BARRIER:
    bar.sync 0;
    ret;
}
"""

_ATTR_MAX_THREADS_PER_BLOCK = 1
_ATTR_SM_COUNT = 16
_ATTR_MAX_THREADS_PER_SM = 39
RESIDENT_TIMEOUT_S = 10.0  # another process's context may hold the device for a while


class DeviceWaitError(RuntimeError):
    """The wait could not be set up or never took the device."""


def _check(result: int, what: str) -> None:
    if result != 0:
        raise DeviceWaitError(f"{what} failed with CUDA driver error {result}")


class DeviceWait:
    """A wait kernel for the current device, loaded once; ``queue`` it, then ``hold`` before the
    call. Make it after torch has initialised CUDA, on the thread that times."""

    def __init__(self) -> None:
        import torch

        torch.cuda.synchronize()  # the primary context made and current on this thread
        self._torch = torch
        self._driver = driver = ctypes.CDLL("libcuda.so.1")
        device = ctypes.c_int()
        _check(driver.cuCtxGetDevice(ctypes.byref(device)), "cuCtxGetDevice")
        self._module = ctypes.c_void_p()
        _check(driver.cuModuleLoadData(ctypes.byref(self._module), ctypes.c_char_p(_PTX)),
               "loading the wait kernel (cuModuleLoadData)")
        self._function = ctypes.c_void_p()
        _check(driver.cuModuleGetFunction(ctypes.byref(self._function), self._module, b"fill_wait"),
               "cuModuleGetFunction")

        def attribute(which: int) -> int:
            value = ctypes.c_int()
            _check(driver.cuDeviceGetAttribute(ctypes.byref(value), which, device), "cuDeviceGetAttribute")
            return value.value

        per_sm = attribute(_ATTR_MAX_THREADS_PER_SM)
        per_block = min(attribute(_ATTR_MAX_THREADS_PER_BLOCK), 1024)
        self.blocks_per_sm = -(-per_sm // per_block)
        self.threads = per_sm // self.blocks_per_sm
        self.sms = attribute(_ATTR_SM_COUNT)
        resident = ctypes.c_int()
        _check(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            ctypes.byref(resident), self._function, ctypes.c_int(self.threads), ctypes.c_size_t(0)),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        if self.threads % 32 or resident.value < self.blocks_per_sm:
            raise DeviceWaitError(
                f"the wait kernel cannot fill an SM of this device ({per_sm} threads per SM, "
                f"{resident.value} blocks of {self.threads} resident)")
        self.blocks = self.sms * self.blocks_per_sm
        # Host memory the device writes through (pinned memory is mapped on every 64-bit
        # platform CUDA supports), read here while the wait runs.
        self._flags = torch.zeros(self.blocks, dtype=torch.uint8, pin_memory=True)
        self._seen = self._flags.numpy()
        self._cycles = ctypes.c_uint64()
        self._address = ctypes.c_uint64(self._flags.data_ptr())
        self._params = (ctypes.c_void_p * 2)(ctypes.cast(ctypes.byref(self._cycles), ctypes.c_void_p),
                                             ctypes.cast(ctypes.byref(self._address), ctypes.c_void_p))

    def queue(self, cycles: int) -> None:
        """Queue a wait of ``cycles`` SM clock cycles on the current stream."""
        self._seen[:] = 0
        self._cycles.value = max(1, int(cycles))
        stream = ctypes.c_void_p(self._torch.cuda.current_stream().cuda_stream)
        _check(self._driver.cuLaunchKernel(self._function, self.blocks, 1, 1, self.threads, 1, 1, 0, stream,
                                           self._params, None), "launching the wait kernel")

    def hold(self) -> bool:
        """Return once every block of the wait queued last is resident (from then on no other
        kernel can start on the device until the wait ends); False if that took longer than
        ``RESIDENT_TIMEOUT_S``."""
        seen = self._seen
        deadline = time.monotonic() + RESIDENT_TIMEOUT_S
        while not seen.all():
            if time.monotonic() > deadline:
                return False
        return True
