"""The judge reward as verl's custom reward function (``reward.custom_reward_function``).

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info, **reward_kwargs)``
for every single-turn response; the task comes back from the row's ``extra_info.ref_arch_src``.
The judge pool and the reward cache live once per reward worker process. ``reward_kwargs``
(``reward.custom_reward_function.reward_kwargs``) may set ``backend``, ``kind`` (milestone,
continuous or sol), ``concurrency``, ``timeout_s``, ``cache_dir`` and ``log_path``. The returned dict
holds ``score`` and the verdict's fields, which verl logs as ``reward_extra_info``: always the
same keys, whatever the outcome, since verl takes a batch's keys from its first sample. It never
raises: a row whose task does not load, or a reply with no solution, scores -1 with the reason.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from .reward import JudgeReward
from .rows import task_of_row

_rewards: dict[str, JudgeReward] = {}
_lock = threading.Lock()
POOL_KEYS = ("backend", "cache_dir", "concurrency", "pool", "ray_address", "ray_resource", "timing")


def shared_reward(options: dict[str, Any]) -> JudgeReward:
    from .pools import judge_pool

    key = json.dumps(options, sort_keys=True, default=str)
    with _lock:
        if key not in _rewards:
            pool = judge_pool({k: options[k] for k in POOL_KEYS if options.get(k) is not None})
            _rewards[key] = JudgeReward(pool, kind=options.get("kind", "milestone"),
                                        concurrency=int(options.get("concurrency") or 4),
                                        timeout_s=float(options.get("timeout_s") or 900.0),
                                        log_path=options.get("log_path"))
        return _rewards[key]


# Every result carries the same keys with values of one type each: verl builds its batch fields
# from the first sample's keys and reads them from every other sample, and puts each key's values
# in one array. A field the verdict does not have (no solution, a timeout) gets its placeholder.
EXTRA_INFO = {"reason": "", "status": "", "correct": False, "reward": -1.0, "reward_continuous": -1.0, "reward_sol": -1.0,
              "speedup_vs_eager": 0.0, "speedup_vs_compile": 0.0, "stage": "", "error": "",
              "candidate_ms": 0.0, "eager_ms": 0.0, "compile_ms": 0.0, "cached": False}


def _typed(value: Any, placeholder: Any) -> Any:
    if value is None:
        return placeholder
    if isinstance(placeholder, bool):
        return bool(value)
    if isinstance(placeholder, float):
        try:
            return float(value)
        except (TypeError, ValueError):
            return placeholder
    return str(value)


def score_dict(score: float, fields: dict[str, Any]) -> dict[str, Any]:
    """``score`` and exactly the keys of ``EXTRA_INFO``, each of its placeholder's type."""
    return {"score": float(score), **{k: _typed(fields.get(k), v) for k, v in EXTRA_INFO.items()}}


async def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None,
                        **reward_kwargs: Any) -> dict[str, Any]:
    """Never raises for a row or a reply: whatever goes wrong scores -1 with the reason."""
    try:
        task = task_of_row(extra_info)
    except Exception as exc:  # noqa: BLE001 - a DatasetError, or a TaskFormatError from the row's source
        return score_dict(-1.0, {"reason": f"the row's task does not load: {exc}", "status": "no_task"})
    try:
        result = await shared_reward(reward_kwargs).score(solution_str, task)
    except Exception as exc:  # noqa: BLE001 - the reward function never ends training
        return score_dict(-1.0, {"reason": f"the reward failed: {type(exc).__name__}: {exc}",
                                 "status": "reward_error"})
    return score_dict(result.score, {**result.fields, "cached": result.cached, "reason": result.reason})
