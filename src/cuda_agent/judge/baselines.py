"""Cache of eager and torch.compile timings per (task, device, torch version, timing settings).

RL and benchmarks judge many candidates per task; the reference is timed once. A baseline is
timed in several fresh processes, because a process's level can differ from the next one's, and
it is settled once their medians agree (or enough of them have been taken): from then on every
solution of the task is compared with the same baseline. Entries are JSON files written
atomically, one session at a time, so an interrupted judge loses nothing; the candidate process
never has a path to them. Judges that need the same baseline at once (the first rollouts of a task
in RL) take turns on a lock per baseline: one times it, the others then read it.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from ..files import write_atomic
from .timing import TimingStats


@dataclass(frozen=True)
class BaselineKey:
    task_sha256: str
    backend: str
    device_name: str
    torch_version: str
    timing_key: str
    threads: int | None = None

    def digest(self) -> str:
        text = json.dumps(self.__dict__, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:32]


def settled(sessions: list[TimingStats], tolerance: float, minimum: int, maximum: int,
            precision: float | None = None) -> bool:
    """Whether a baseline needs no more sessions: enough of them, each median known to
    ``precision``, and their medians within ``tolerance`` of each other (or the most there may be)."""
    if len(sessions) >= maximum:
        return True
    if len(sessions) < max(1, minimum):
        return False
    if precision is not None and any(s.precision is None or s.precision > precision for s in sessions):
        return False
    return len(sessions) < 2 or TimingStats.pooled(sessions).session_deviation <= tolerance


def baseline_stats(sessions: list[TimingStats], tolerance: float, fresh: int,
                   precision: float | None = None) -> TimingStats:
    """The baseline the reward uses, from its sessions; ``fresh`` of them timed in this run."""
    stats = TimingStats.pooled(sessions)
    precise = precision is None or all(s.precision is not None and s.precision <= precision for s in sessions)
    agree = len(sessions) < 2 or stats.session_deviation <= tolerance
    stats.stable = precise and agree
    stats.source = "measured" if fresh else "cache"
    return stats


class BaselineCache:
    def __init__(self, cache_dir: Path):
        self.dir = Path(cache_dir) / "baselines"
        self.dir.mkdir(parents=True, exist_ok=True)

    def _path(self, key: BaselineKey, mode: str) -> Path:
        return self.dir / f"{key.digest()}-{mode}.json"

    def get(self, key: BaselineKey, mode: str) -> list[TimingStats]:
        """The sessions timed so far for this baseline (none if it was never timed)."""
        path = self._path(key, mode)
        try:
            data = json.loads(path.read_text())
            if data.get("key") != key.__dict__:
                return []
            return [TimingStats.from_dict(s) for s in data["sessions"]]
        except (OSError, ValueError, KeyError, TypeError):
            return []

    @contextmanager
    def turn(self, key: BaselineKey, mode: str, waiting: Callable[[], None]) -> Iterator[None]:
        """Hold this baseline's lock (across processes sharing the cache); ``waiting`` is called
        first if another judge holds it, which is then timing it."""
        lock = FileLock(str(self._path(key, mode)) + ".lock")
        try:
            lock.acquire(timeout=0)
        except Timeout:
            waiting()
            lock.acquire()
        try:
            yield
        finally:
            lock.release()

    def put(self, key: BaselineKey, mode: str, sessions: list[TimingStats]) -> None:
        payload = {"key": key.__dict__, "mode": mode, "sessions": [s.to_dict() for s in sessions],
                   "updated": time.time()}
        write_atomic(self._path(key, mode), json.dumps(payload, indent=1))
