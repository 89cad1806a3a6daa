"""Training on a CPU: keep freed memory in the process instead of handing it back to the system.

Each training step allocates and frees the same large buffers. glibc returns big blocks to the
kernel at once (mmap/munmap, heap trimming), so every step pays page faults again; on a small
machine that made training steps about twice as slow. Raising the thresholds keeps the blocks.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
KEEP_BYTES = 1 << 30           # free memory kept before the heap is trimmed, and grown by at once
LARGEST_HEAP_BLOCK = 32 << 20  # glibc's ceiling for blocks served from the heap rather than mmap


def keep_freed_memory() -> bool:
    """Tune glibc's allocator for repeated large allocations; False where there is no glibc."""
    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return all(mallopt(option, value) == 1 for option, value in
               ((M_MMAP_THRESHOLD, LARGEST_HEAP_BLOCK), (M_TRIM_THRESHOLD, KEEP_BYTES), (M_TOP_PAD, KEEP_BYTES)))
