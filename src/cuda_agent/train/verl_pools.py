"""One judge pool per process and settings, shared by every trajectory and reward in a verl worker."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

_pools: dict[str, Any] = {}
_lock = threading.Lock()


def _key(settings: dict[str, Any]) -> str:
    return json.dumps(settings, sort_keys=True, default=str)


def register_pool(settings: dict[str, Any], pool: Any) -> None:
    """Use ``pool`` wherever these settings are asked for (a pool made by the caller, say with
    its own timing settings)."""
    with _lock:
        _pools[_key(settings)] = pool


def judge_pool(settings: dict[str, Any] | None) -> Any:
    """``settings``: backend (cuda or cpu), cache_dir, concurrency (judge runs at once)."""
    from ..cluster import LocalJudgePool
    from ..judge.config import JudgeConfig

    settings = dict(settings or {})
    key = _key(settings)
    with _lock:
        if key not in _pools:
            extra = {"cache_dir": Path(settings["cache_dir"])} if settings.get("cache_dir") else {}
            _pools[key] = LocalJudgePool(JudgeConfig(backend=settings.get("backend"), **extra),
                                         settings.get("concurrency"))
        return _pools[key]
