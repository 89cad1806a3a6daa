"""The kernel record's profiler on a real GPU: the threads it starts, and when. Needs an NVIDIA
GPU; skipped cleanly elsewhere.

The judge counts a candidate's threads around each call of forward (a thread left running is
forbidden), so every thread the profiler starts must exist before a counted call begins. Each
case runs in a fresh interpreter, where the profiler has never started.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

pytestmark = [pytest.mark.gpu]

if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU with CUDA (torch.cuda.is_available() is False)",
                allow_module_level=True)

# As a candidate's worker does: the profiler started in the background at setup, then plain
# calls (counted), one call under the profiler, then more counted calls, as in timing.
SCRIPT = r"""
import json, time, torch
from cuda_agent.judge import recording
x = torch.randn(1 << 20, device="cuda")
torch.cuda.synchronize()
def counted():
    recording.profiler_ready()
    before = recording.thread_count()
    y = (x * 2).sum(); torch.cuda.synchronize(); time.sleep(0.02)
    return recording.thread_count() - before
# Counted at once, as a worker's first checks are: the first call meets the start under way.
recording.warm_profiler()
starting = recording._warmup.is_alive()
plain = [counted() for _ in range(10)]
_, kernels = recording.record_kernels(lambda: (x * 3).sum())
after_record = [counted() for _ in range(10)]
print(json.dumps({"plain": plain, "after_record": after_record, "kernels": len(kernels or []),
                  "start_under_way": starting}))
"""


def test_no_profiler_thread_appears_inside_a_counted_call():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    print(found)
    assert found["kernels"] >= 1 and found["start_under_way"]
    assert max(found["plain"]) <= 0 and max(found["after_record"]) <= 0, found


def test_the_kernel_record_imports_nothing_of_torch_compile():
    # torch.profiler's own start asks hasattr(torch, "_inductor"), which imports torch.compile's
    # compiler and front end: seconds of every candidate's start. The record avoids that start.
    code = ("import sys, torch; from cuda_agent.judge import recording; "
            "recording.warm_profiler(); recording.profiler_ready(); "
            "x = torch.randn(1024, device='cuda'); _, kernels = recording.record_kernels(lambda: x * 2); "
            "assert kernels, kernels; "
            "print(sorted(m for m in ('torch._dynamo', 'torch._inductor', 'sympy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
