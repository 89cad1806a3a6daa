"""Several judge pools as one: runs go to the least busy, so episodes use every GPU's pool."""

from __future__ import annotations

import asyncio
import subprocess
import sys

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


def test_a_spread_pool_stops_overdue_runs_only_where_every_pool_it_spreads_over_does():
    # the reward passes its time limit to such a pool, and only waits on any other
    from cuda_agent.judge.pools import stops_overdue_runs

    class Stopping(RecordingPool):
        stops_overdue_runs = True

    assert stops_overdue_runs(SpreadJudgePool([Stopping(), Stopping()]))
    assert not stops_overdue_runs(SpreadJudgePool([Stopping(), RecordingPool()]))
    assert not stops_overdue_runs(RecordingPool())


def test_a_second_sigterm_does_not_cut_short_a_pool_process_unwinding(tmp_path):
    """The first SIGTERM unwinds a pool process and runs its exit handlers (which kill workers and
    remove the fork servers' directories); a second one arriving meanwhile is ignored."""
    done = tmp_path / "cleaned"
    code = (
        "import atexit, os, signal, time\n"
        "from cuda_agent.cluster.pool import _exit_on_term\n"
        "signal.signal(signal.SIGTERM, _exit_on_term)\n"
        "def cleanup():\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(0.2)\n"
        f"    open({str(done)!r}, 'w').close()\n"
        "atexit.register(cleanup)\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "time.sleep(30)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert done.exists(), result.stderr
    assert "Traceback" not in result.stderr
