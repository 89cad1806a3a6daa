"""Several judge pools as one: runs go to the least busy, so episodes use every GPU's pool."""

from __future__ import annotations

import asyncio

from cuda_agent.cluster.pool import SpreadJudgePool


class RecordingPool:
    """A pool that holds each run for a while and records how many it had at once."""

    backend, cache_dir = "cpu", None

    def __init__(self) -> None:
        self.running = self.most = self.runs = 0

    async def evaluate(self, task, solution, stage, **kwargs):
        self.running += 1
        self.runs += 1
        self.most = max(self.most, self.running)
        await asyncio.sleep(0.05)
        self.running -= 1
        return (task, stage, kwargs)

    async def check_reference(self, task):
        return await self.evaluate(task, None, "reference")


def test_runs_spread_over_every_pool_and_keep_their_arguments():
    pools = [RecordingPool(), RecordingPool(), RecordingPool()]
    spread = SpreadJudgePool(pools)

    async def main():
        return await asyncio.gather(*(spread.evaluate(i, None, "profile", timeout_s=5) for i in range(9)))

    results = asyncio.run(main())
    assert results == [(i, "profile", {"timeout_s": 5}) for i in range(9)]
    assert [p.runs for p in pools] == [3, 3, 3] and all(p.most == 3 for p in pools)
    assert spread.in_flight == [0, 0, 0] and spread.backend == "cpu"
    assert asyncio.run(spread.check_reference("t")) == ("t", "reference", {})
