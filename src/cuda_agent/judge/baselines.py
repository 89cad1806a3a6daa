"""Cache of eager and torch.compile timings per (task, device, torch version, timing settings).

RL and benchmarks judge many candidates per task; the reference is timed once. A baseline is
timed in several fresh processes, because a process's level can differ from the next one's, and
it is settled once each session's median is known to the timing's precision and their medians
agree: from then on every solution of the task is compared with the same baseline. A baseline
that has not settled when the most sessions there may be are taken is unsettled: the verdict
claims no speedup over it and says why. Judges in the next ``RETIME_UNSETTLED_AFTER_S`` use it as
it is (no speedup over it either); the first after that times it again from the start, rather
than building on sessions that could not agree.
Entries are JSON files written atomically, one session at a time; the candidate process never has
a path to them. Judges that need the same baseline at once (the first rollouts of a task in RL)
take turns on a lock per baseline: one times it, the others then read it.
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


CACHED = "cache"   # the source of a session read from the cache, and of a baseline taken from it
# An unsettled baseline timed this recently is used as it is (no speedup over it) rather than
# timed again: judges of one task at once, or a rerun minutes later, would otherwise each time it
# anew on a machine too noisy to settle it, and get verdicts that differ by which run they got.
RETIME_UNSETTLED_AFTER_S = 600.0


def current(sessions: list[TimingStats]) -> list[TimingStats]:
    """The sessions a baseline stands on: those timed in this run where there are any, else those
    read from the cache. Cached sessions are only ever used whole: if they settle, as they are;
    if not, a new run's sessions replace them (old and new would not agree any better, and the
    entry would grow with every judge)."""
    return [s for s in sessions if s.source != CACHED] or sessions


def _precise(sessions: list[TimingStats], precision: float | None) -> bool:
    return precision is None or all(s.precision is not None and s.precision <= precision for s in sessions)


def _agree(sessions: list[TimingStats], tolerance: float) -> bool:
    return len(sessions) < 2 or TimingStats.pooled(sessions).session_deviation <= tolerance


def settled(sessions: list[TimingStats], tolerance: float, minimum: int, maximum: int,
            precision: float | None = None) -> bool:
    """Whether a baseline needs no more sessions: enough of them, each median known to
    ``precision``, and their medians within ``tolerance`` of each other; or, unsettled, the most
    this run may time. Sessions read from the cache that do not settle ask for new ones."""
    sessions = current(sessions)
    if len(sessions) >= max(1, minimum) and _precise(sessions, precision) and _agree(sessions, tolerance):
        return True
    timed_here = bool(sessions) and sessions[0].source != CACHED
    return timed_here and len(sessions) >= maximum


def baseline_stats(sessions: list[TimingStats], tolerance: float, fresh: int,
                   precision: float | None = None) -> TimingStats:
    """The baseline the reward uses, from its sessions; ``fresh`` of them timed in this run."""
    sessions = current(sessions)
    stats = TimingStats.pooled(sessions)
    stats.stable = _precise(sessions, precision) and _agree(sessions, tolerance)
    # The least certain session's: a baseline is known no better than that, and it is the figure
    # ``stable`` was judged on (the pooled session's own would hide a noisier one).
    known = [s.precision for s in sessions]
    stats.precision = None if None in known else max(known)
    stats.source = "measured" if fresh else CACHED
    return stats


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.3g}%"


def unsettled_reason(name: str, stats: TimingStats, tolerance: float | None = None,
                     precision: float | None = None) -> str:
    """Why the baseline ``stats`` (``stable`` false) backs no speedup, in words for its user;
    ``tolerance`` and ``precision``: what it was held to, where known."""
    sessions = stats.sessions_ms or []
    if len(sessions) >= 2 and (tolerance is None or stats.session_deviation > tolerance):
        allowed = f", more than the {_percent(tolerance)} a baseline may move" if tolerance is not None else ""
        return (f"the {name} baseline is unsettled: its median moved {_percent(stats.session_deviation)} between "
                f"the {len(sessions)} fresh processes it was timed in ({min(sessions):.4g} to {max(sessions):.4g} "
                f"ms){allowed}")
    known = f"±{_percent(stats.precision)}" if stats.precision is not None else "too few calls to tell"
    needed = f", where a baseline needs ±{_percent(precision)}" if precision is not None else ""
    return (f"the {name} baseline is unsettled: its times on this machine spread {_percent(stats.spread)} "
            f"(IQR/median), so its median is known only to {known}{needed}")


class BaselineCache:
    def __init__(self, cache_dir: Path):
        self.dir = Path(cache_dir) / "baselines"
        self.dir.mkdir(parents=True, exist_ok=True)

    def _path(self, key: BaselineKey, mode: str) -> Path:
        return self.dir / f"{key.digest()}-{mode}.json"

    def get(self, key: BaselineKey, mode: str) -> list[TimingStats]:
        """The sessions timed for this baseline (none if it was never timed), marked as read from
        the cache: whether they settle is for ``settled`` to say, by the reader's settings."""
        path = self._path(key, mode)
        try:
            data = json.loads(path.read_text())
            if data.get("key") != key.__dict__:
                return []
            sessions = [TimingStats.from_dict(s) for s in data["sessions"]]
        except (OSError, ValueError, KeyError, TypeError):
            return []
        for session in sessions:
            session.source = CACHED
        return sessions

    def age_s(self, key: BaselineKey, mode: str) -> float | None:
        """Seconds since this baseline's entry was last written (None: there is none)."""
        try:
            return max(0.0, time.time() - self._path(key, mode).stat().st_mtime)
        except OSError:
            return None

    def recently_timed(self, key: BaselineKey, mode: str) -> bool:
        """Whether the entry is younger than ``RETIME_UNSETTLED_AFTER_S``: used as it is, settled or not."""
        age = self.age_s(key, mode)
        return age is not None and age < RETIME_UNSETTLED_AFTER_S

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
        """Store the sessions the baseline stands on (``current``): cached ones a run replaced go."""
        payload = {"key": key.__dict__, "mode": mode, "sessions": [s.to_dict() for s in current(sessions)],
                   "updated": time.time()}
        write_atomic(self._path(key, mode), json.dumps(payload, indent=1))
