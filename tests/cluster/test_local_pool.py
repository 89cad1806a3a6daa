"""The local pool's judges run in processes of their own; their progress messages come back."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest

from cuda_agent.cluster.pool import LocalJudgePool
from cuda_agent.task import load_task


def fork_servers_under(parents: set[int]) -> set[int]:
    """The fork server processes whose parent is one of ``parents``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if parent in parents and b"fork_server import serve" in cmdline:
            found.add(int(entry.name))
    return found


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
        # Warmed, every pool process is up with its workers' fork server ready.
        pool.warm()
        processes = set(pool._executor._processes)
        assert len(processes) == 2 and os.getpid() not in processes
        assert len(fork_servers_under(processes)) == 2
        assert list((pool.cache_dir / "build" / "pch").glob("*/binding_pch.h.gch"))  # the bindings' header made
        assert list((pool.cache_dir / "op_counter").glob("*/*.so"))  # the op counter built
        report, verdict = asyncio.run(both(pool))
        assert report.ok and verdict.correct
        # the judge's own binding object was compiled by the warm-up: only the candidate's two compile
        assert verdict.build["objects_compiled"] <= 2 and "binding.cpp" not in verdict.build["step_seconds"]
        # where the run's time went, by worker exchange
        assert {"candidate.run", "reference-eager.run", "candidate.load_weights"} <= set(verdict.call_seconds)
        assert all(s >= 0 for s in verdict.call_seconds.values())
        assert sum(verdict.call_seconds.values()) <= verdict.seconds["total"]
        assert asyncio.run(pool.check_reference(fresh)).ok  # without a listener, as the agent calls it
    assert any(m.startswith("timing eager") for m in reference), reference
    assert reference[-1].startswith("timing"), reference  # the run's last messages came before its result
    assert any(m.startswith("building") for m in candidate), candidate
    assert not any(m.startswith("timing eager") for m in candidate)  # another run's messages stay there
