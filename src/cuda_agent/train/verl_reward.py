"""The judge reward as verl's custom reward function (``reward.custom_reward_function``).

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info, **reward_kwargs)``
for every single-turn response; the task comes back from the row's ``extra_info.ref_arch_src``.
The judge pool and the reward cache live once per reward worker process. ``reward_kwargs``
(``reward.custom_reward_function.reward_kwargs``) may set ``backend``, ``kind`` (milestone or
continuous), ``concurrency``, ``timeout_s``, ``cache_dir`` and ``log_path``. The returned dict
holds ``score`` and the verdict's fields, which verl logs as ``reward_extra_info``.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from .reward import JudgeReward
from .rows import DatasetError, task_of_row

_rewards: dict[str, JudgeReward] = {}
_lock = threading.Lock()
POOL_KEYS = ("backend", "cache_dir", "concurrency")


def shared_reward(options: dict[str, Any]) -> JudgeReward:
    from .verl_pools import judge_pool

    key = json.dumps(options, sort_keys=True, default=str)
    with _lock:
        if key not in _rewards:
            pool = judge_pool({k: options[k] for k in POOL_KEYS if options.get(k) is not None})
            _rewards[key] = JudgeReward(pool, kind=options.get("kind", "milestone"),
                                        concurrency=int(options.get("concurrency") or 4),
                                        timeout_s=float(options.get("timeout_s") or 900.0),
                                        log_path=options.get("log_path"))
        return _rewards[key]


async def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None,
                        **reward_kwargs: Any) -> dict[str, Any]:
    try:
        task = task_of_row(extra_info)
    except DatasetError as exc:
        return {"score": -1.0, "reason": str(exc), "status": "no_task"}
    result = await shared_reward(reward_kwargs).score(solution_str, task)
    fields = {k: v for k, v in result.fields.items() if isinstance(v, (int, float, str, bool)) and v is not None}
    return {"score": result.score, **fields, "cached": result.cached, "reason": result.reason}
