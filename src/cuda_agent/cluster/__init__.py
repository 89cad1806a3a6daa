"""Pools of judge workers behind one interface: local processes on this machine, or Ray actors
across the GPUs and nodes of a cluster (``--pool ray``)."""

from __future__ import annotations

from typing import Any

from ..errors import ClusterError
from ..judge.pools import JudgePool
from .pool import LocalJudgePool

__all__ = ["JudgePool", "LocalJudgePool", "POOL_KINDS", "make_pool"]

POOL_KINDS = ("local", "ray")


def make_pool(kind: str, config: Any = None, concurrency: int | None = None, ray_address: str | None = None,
              **ray_options: Any) -> Any:
    """A judge pool of ``kind``: local (``concurrency`` processes here) or ray (the cluster at
    ``ray_address``, or one started on this machine; ``concurrency`` judges per GPU on CUDA,
    in all on the CPU backend)."""
    if kind == "local":
        if ray_address:
            raise ClusterError("--ray-address needs --pool ray")
        return LocalJudgePool(config, concurrency)
    if kind == "ray":
        from .ray_pool import RayJudgePool

        return RayJudgePool(config, address=ray_address, concurrency=concurrency, **ray_options)
    raise ClusterError(f"--pool takes one of {', '.join(POOL_KINDS)}; got {kind!r}")
