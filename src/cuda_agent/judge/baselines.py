"""Cache of eager and torch.compile timings per (task, device, torch version, timing settings).

RL and benchmarks judge many candidates per task; the reference is timed once. Entries are
JSON files written atomically; the candidate process never has a path to them.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

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


class BaselineCache:
    def __init__(self, cache_dir: Path):
        self.dir = Path(cache_dir) / "baselines"
        self.dir.mkdir(parents=True, exist_ok=True)

    def _path(self, key: BaselineKey, mode: str) -> Path:
        return self.dir / f"{key.digest()}-{mode}.json"

    def get(self, key: BaselineKey, mode: str) -> TimingStats | None:
        path = self._path(key, mode)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if data.get("key") != key.__dict__:
            return None
        stats = TimingStats.from_dict(data["stats"])
        stats.source = "cache"
        return stats

    def put(self, key: BaselineKey, mode: str, stats: TimingStats) -> None:
        payload = {"key": key.__dict__, "mode": mode, "stats": stats.to_dict(), "created": time.time()}
        write_atomic(self._path(key, mode), json.dumps(payload, indent=1))
