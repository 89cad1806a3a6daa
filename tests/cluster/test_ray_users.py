"""Bench, synthesis and the training reward on the Ray pool (a local Ray cluster of CPU workers),
each with the outcomes its local pool gives."""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
from pathlib import Path

import pytest

from cuda_agent.bench.benchmark import BenchOptions, run_benchmark
from cuda_agent.errors import BenchmarkError

ray = pytest.importorskip("ray")

from .conftest import CPUS  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900), pytest.mark.usefixtures("local_cluster")]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_bench_on_ray_gives_each_problem_its_outcome(tmp_path, judge_config):
    solutions = tmp_path / "solutions"
    shutil.copytree(FIXTURES / "kernelbench" / "solutions", solutions)
    options = BenchOptions(kernelbench=FIXTURES / "kernelbench", out=tmp_path / "out", levels=[1, 2],
                           solutions=solutions, label="fixture", judge=judge_config(), min_baseline_ms=0.15,
                           pool="ray")
    report, _ = run_benchmark(options)
    statuses = {(r["level"], r["problem_id"]): r["status"] for r in report["problems"]}
    # the same table the local pool gives (tests/bench/test_bench_cpu.py)
    assert statuses == {(1, 1): "ok", (1, 2): "ok", (1, 3): "incorrect", (1, 4): "ok", (1, 5): "compile_error",
                        (2, 1): "ok", (2, 2): "incorrect", (2, 3): "missing"}
    assert report["settings"]["pool"] == "ray" and report["settings"]["jobs_per_gpu"] == CPUS  # an actor per CPU slot
    with pytest.raises(BenchmarkError, match="--gpus applies to the local pool"):
        run_benchmark(BenchOptions(**{**options.__dict__, "gpus": 2}))


def test_the_training_reward_scores_through_ray(judge_cache, judge_config):
    from cuda_agent.train.demo import family
    from cuda_agent.train.pools import make_judge_pool
    from cuda_agent.train.reward import JudgeReward

    task = family.tasks()[0]
    # The suite's short timing sessions, through the settings a training config passes: the default
    # sessions kept timing a baseline that a loaded machine could not settle (170 s in CI).
    short = judge_config().timing
    with make_judge_pool({"backend": "cpu", "pool": "ray", "concurrency": 2, "cache_dir": judge_cache,
                          "timing": dataclasses.asdict(short)}) as pool:
        assert type(pool).__name__ == "RayJudgePool" and pool.max_concurrent == 2
        assert pool.config.timing == short
        reward = JudgeReward(pool, concurrency=2, timeout_s=600)
        good = "\n\n".join(f"{path}\n```cpp\n{text}```" for path, text in family.solution_files("fast").items())
        results = asyncio.run(reward.score_many([good, "no code here"], [task, task]))
    assert results[0].score >= 1 and results[0].fields["status"] == "ok"
    assert results[1].score == -1 and "no usable solution" in results[1].reason


def test_synthesis_on_ray_accepts_tasks_like_the_local_workers(tmp_path, torch_crawl):
    from cuda_agent.synth.synthesis import SynthOptions, run_synthesis
    from cuda_agent.synth.records import FILTERS
    from cuda_agent.synth.seeds import save_catalogue

    out = tmp_path / "ds"
    save_catalogue(torch_crawl, out / "seeds.json")
    # the settings of tests/synth/test_synthesis.py's small dataset, on two Ray workers
    options = SynthOptions(n=2, out=out, device="cpu", workers=2, window_ms=(0.005, 1.0), max_tensor_bytes=1 << 24,
                           kernelbench=str(FIXTURES / "kernelbench"), include_transformers=False, pool="ray")
    state, _, _ = run_synthesis(options)
    assert len(state.accepted) == 2
    for outcome in state.accepted:
        assert [f.name for f in outcome.filters] == list(FILTERS) and outcome.eager_ms > 0
