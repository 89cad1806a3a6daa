"""The device-side wait before each timed call holds every SM: work on any stream starts after it.

The timed call's events start after the wait; a wait that leaves SMs free lets a kernel on a
stream not ordered after the current one run during it, untimed. These tests put such a kernel
beside the judge's wait and beside a one-thread wait (``torch.cuda._sleep``, the harness's wait
before), and read on the device's clock when it finished.
"""

from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason="needs an NVIDIA GPU with CUDA (torch.cuda.is_available() is False)")]


def _cycles_per_ms(queue) -> float:
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    a.record()
    queue(2_000_000)
    b.record()
    b.synchronize()
    return 2_000_000 / a.elapsed_time(b)


def _side_kernel_end_ms(queue_wait, hold, wait_ms: float, side_ms: float, per_ms: float) -> tuple[float, float]:
    """(the wait's end, the side kernel's end), in ms after the wait was queued."""
    side = torch.cuda.Stream()  # not ordered after the current stream
    queued, waited, side_done = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    torch.cuda.synchronize()
    queued.record()
    queue_wait(int(wait_ms * per_ms))
    waited.record()
    hold()
    with torch.cuda.stream(side):
        torch.cuda._sleep(int(side_ms * per_ms))
        side_done.record()
    torch.cuda.synchronize()
    return queued.elapsed_time(waited), queued.elapsed_time(side_done)


def test_a_kernel_on_another_stream_starts_only_after_the_wait():
    from cuda_agent.judge.device_wait import DeviceWait

    wait = DeviceWait()
    props = torch.cuda.get_device_properties(0)
    assert wait.blocks * wait.threads == props.multi_processor_count * props.max_threads_per_multi_processor
    per_ms = _cycles_per_ms(wait.queue)
    assert wait.hold()
    for _ in range(3):  # the first launches of each kernel are slower; judge the last
        waited, side_done = _side_kernel_end_ms(wait.queue, wait.hold, 2.0, 1.0, per_ms)
    assert waited >= 1.8, waited
    assert side_done >= waited + 0.9, f"the side kernel ended {side_done:.3f} ms in, the wait at {waited:.3f} ms"

    # The one-thread wait the judge no longer uses leaves the device to the side kernel: the test
    # can tell the two apart.
    sleep_per_ms = _cycles_per_ms(torch.cuda._sleep)
    for _ in range(3):
        waited, side_done = _side_kernel_end_ms(torch.cuda._sleep, lambda: True, 2.0, 1.0, sleep_per_ms)
    assert side_done < waited + 0.5, f"side kernel {side_done:.3f} ms, one-thread wait {waited:.3f} ms"
