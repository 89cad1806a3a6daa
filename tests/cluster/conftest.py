"""A Ray cluster on this machine for the Ray pool's tests: four CPU slots (Ray's accounting, not
pinned cores), started once per test module and stopped after it."""

from __future__ import annotations

import pytest

CPUS = 4


def start_local_cluster() -> None:
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=CPUS, include_dashboard=False, log_to_driver=False, configure_logging=False)


@pytest.fixture(scope="module")
def local_cluster():
    ray = pytest.importorskip("ray")
    start_local_cluster()
    yield
    ray.shutdown()
