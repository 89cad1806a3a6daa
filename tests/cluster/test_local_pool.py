"""The local pool's judges run in processes of their own; their progress messages come back."""

from __future__ import annotations

import asyncio

import pytest

from cuda_agent.cluster.pool import LocalJudgePool


@pytest.mark.slow
def test_each_run_gets_its_own_judges_messages(task, judge_config, fixture_solution):
    reference: list[str] = []
    candidate: list[str] = []

    async def both(pool):
        return await asyncio.gather(pool.check_reference(task, progress=reference.append),
                                    pool.evaluate(task, fixture_solution("cpu/correct"), "verify",
                                                  progress=candidate.append))

    with LocalJudgePool(judge_config(), 2) as pool:
        report, verdict = asyncio.run(both(pool))
        assert report.ok and verdict.correct
        assert asyncio.run(pool.check_reference(task)).ok  # without a listener, as the agent calls it
    assert any(m.startswith("timing eager") for m in reference), reference
    assert any(m.startswith("building") for m in candidate), candidate
    assert not any(m.startswith("timing eager") for m in candidate)  # another run's messages stay there
