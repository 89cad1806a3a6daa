"""Where a one-machine run's judges time kernels (train.pools.place_judges), and the pools that
puts there (train.pools.make_judge_pool)."""

from __future__ import annotations

import pytest

from cuda_agent.cluster.pool import SpreadJudgePool
from cuda_agent.train.extras import TrainError
from cuda_agent.train.pools import TrainJudgePool, make_judge_pool, place_judges

from .test_train_cli import invoke


def test_the_judges_go_off_the_training_gpu_where_there_is_another():
    assert place_judges(None, visible=2) == ([1], None)
    assert place_judges(None, visible=4) == ([1, 2, 3], None)
    assert place_judges([2, 1, 2], visible=4) == ([1, 2], None)


def test_judges_on_the_training_gpu_are_warned_of_with_the_way_out():
    gpus, warning = place_judges(None, visible=1)
    assert gpus == [0] and "GPU 0, where the model trains" in warning and "--judge-gpus" in warning
    gpus, warning = place_judges([0, 1], visible=2)
    assert gpus == [0, 1] and "where the model trains" in warning


def test_a_judge_gpu_the_machine_does_not_show_is_refused():
    with pytest.raises(TrainError, match=r"names GPU\(s\) 2, 5, but this process sees 2 GPU\(s\)"):
        place_judges([1, 2, 5], visible=2)


def test_several_judge_gpus_make_a_pool_on_each_that_closes_with_them(tmp_path):
    with make_judge_pool({"backend": "cpu", "cache_dir": tmp_path, "concurrency": 2, "gpus": [0, 1]}) as pool:
        assert isinstance(pool, SpreadJudgePool) and pool.owns_pools
        assert [p.config.device_index for p in pool.pools] == [0, 1]
        assert all(p.max_concurrent == 2 and p.config.judges_at_once >= 4 for p in pool.pools)
    assert all(p._closed for p in pool.pools)
    with make_judge_pool({"backend": "cpu", "cache_dir": tmp_path, "concurrency": 1, "gpus": [1]}) as one:
        assert isinstance(one, TrainJudgePool) and one.config.device_index == 1


def test_judge_gpus_are_refused_where_they_cannot_apply(tmp_path):
    base = ("warmup", "--model", "Qwen/Qwen2.5-7B-Instruct", "--data", tmp_path / "rows.parquet", "--out", tmp_path)
    malformed = invoke(*base, "--engine", "trl", "--judge-gpus", "one")
    assert malformed.exit_code != 0 and "GPU indices separated by commas" in str(malformed.exception)
    on_verl = invoke(*base, "--dry-run", "--judge-gpus", "1")
    assert on_verl.exit_code != 0 and "--judge-ray-resource judge" in str(on_verl.exception)
    on_ray = invoke(*base, "--engine", "trl", "--judge-pool", "ray", "--judge-gpus", "1")
    assert on_ray.exit_code != 0 and "local pool" in str(on_ray.exception)
