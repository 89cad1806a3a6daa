"""Timing with the device to itself: other judges' device work waits while one judge times.

Judges on one device already time one at a time (``Judge.timing_lock``), but their checks run
while another times, and on a GPU kernels of other processes share it by time slices: a forward of
many small kernels (an RNN, a short kernel's launch path) can then take several times as long in
one session as in the next. With the gate, a judge's checks hold it shared and a timing run holds
it alone. A timer waiting at the turnstile holds it, so checks that arrive later queue behind the
timer and a steady stream of checks cannot starve it.

Locks are ``flock`` on files in the judge's cache: shared by every process of every pool on the
machine, and released by the kernel when a holder dies.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def _flock(path: Path, mode: int) -> Iterator[None]:
    # A file description of its own for every hold: flock conflicts between descriptions, so two
    # threads of one process exclude each other as two processes do.
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)  # closing the last descriptor of the description releases the lock


class DeviceGate:
    """Shared holds for device work beside other judges, an exclusive one for timing."""

    def __init__(self, directory: Path, name: str):
        directory.mkdir(parents=True, exist_ok=True)
        self.turnstile = directory / f"{name}.turnstile"
        self.gate = directory / f"{name}.gate"

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Device work that may overlap other judges' work, but not a timing run."""
        fd = os.open(self.gate, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            with _flock(self.turnstile, fcntl.LOCK_EX):  # behind any timer already waiting
                fcntl.flock(fd, fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)

    @contextmanager
    def alone(self) -> Iterator[None]:
        """A timing run: waits for the shared holders to finish, and keeps new ones out."""
        with _flock(self.turnstile, fcntl.LOCK_EX), _flock(self.gate, fcntl.LOCK_EX):
            yield
