"""The local pool's judges run in processes of their own; their progress messages come back."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from cuda_agent.cluster.pool import LocalJudgePool
from cuda_agent.task import load_task


@pytest.mark.slow
def test_each_run_gets_its_own_judges_messages(task, judge_config, fixture_solution, tmp_path):
    reference: list[str] = []
    candidate: list[str] = []
    # a task of its own, so that its baselines are timed here, not found in the shared cache
    variant = tmp_path / "scale_bias_relu_relayed.py"
    variant.write_text(task.source + f"\n# a variant whose baselines no other run times: {uuid.uuid4()}\n")
    fresh = load_task(variant)

    async def both(pool):
        return await asyncio.gather(pool.check_reference(fresh, progress=reference.append),
                                    pool.evaluate(task, fixture_solution("cpu/correct"), "verify",
                                                  progress=candidate.append))

    with LocalJudgePool(judge_config(), 2) as pool:
        report, verdict = asyncio.run(both(pool))
        assert report.ok and verdict.correct
        assert asyncio.run(pool.check_reference(fresh)).ok  # without a listener, as the agent calls it
    assert any(m.startswith("timing eager") for m in reference), reference
    assert reference[-1].startswith("timing"), reference  # the run's last messages came before its result
    assert any(m.startswith("building") for m in candidate), candidate
    assert not any(m.startswith("timing eager") for m in candidate)  # another run's messages stay there
