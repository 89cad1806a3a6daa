"""`cuda-agent train`: data commands, the dry run, and a clear error for each bad input."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from cuda_agent.cli import app
from cuda_agent.train.rows import read_parquet
from cuda_agent.train.extras import TrainError

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, ["train", *map(str, args)])


def test_data_builds_rows_from_a_task_folder(tmp_path, fixtures_dir):
    out = tmp_path / "rows.parquet"
    result = invoke("data", fixtures_dir / "tasks", "--out", out, "--mode", "agentic", "--backend", "cpu")
    assert result.exit_code == 0, result.output
    (row,) = read_parquet(out)
    assert row["agent_name"] == "cuda_agent" and "class Model" in row["extra_info"]["ref_arch_src"]


def test_a_task_that_does_not_load_is_refused(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\n")
    result = invoke("data", bad, "--out", tmp_path / "rows.parquet")
    assert result.exit_code != 0 and "KernelBench format" in str(result.exception)
    assert not (tmp_path / "rows.parquet").exists()


def test_an_empty_dataset_is_refused_before_training(tmp_path):
    empty = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"prompt": pa.array([], pa.string())}), empty)
    result = invoke("rft", "--engine", "trl", "--model", tmp_path, "--data", empty)
    assert result.exit_code != 0
    assert "config.json" in str(result.exception) or "empty" in str(result.exception)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    result = invoke("rft", "--engine", "trl", "--model", tmp_path / "m", "--data", empty)
    assert "is empty" in str(result.exception)


def test_a_reward_the_stage_or_backend_cannot_pay_is_refused(tmp_path, fixtures_dir):
    rows = tmp_path / "rows.parquet"
    invoke("data", fixtures_dir / "tasks", "--out", rows, "--backend", "cpu")
    result = invoke("warmup", "--engine", "trl", "--model", tmp_path, "--data", rows, "--device", "cpu",
                    "--reward", "sol")
    assert "roofline the judge draws only on CUDA devices" in str(result.exception)
    result = invoke("warmup", "--engine", "trl", "--model", tmp_path, "--data", rows, "--reward", "speed")
    assert "--reward takes milestone, continuous, sol" in str(result.exception)
    result = invoke("rft", "--engine", "trl", "--model", tmp_path, "--data", rows, "--reward", "sol")
    assert "--reward sol is for the RL stages" in str(result.exception)


def test_a_model_path_that_does_not_exist_is_refused(tmp_path, fixtures_dir):
    rows = tmp_path / "rows.parquet"
    invoke("data", fixtures_dir / "tasks", "--out", rows, "--backend", "cpu")
    result = invoke("warmup", "--engine", "trl", "--model", tmp_path / "nowhere", "--data", rows)
    assert "does not exist" in str(result.exception)


def test_loggers_are_checked_before_anything_runs(monkeypatch):
    import importlib.util

    from cuda_agent.train.extras import check_loggers, report_to

    assert check_loggers(None) == ("console",) and report_to(check_loggers(["console", "console"])) == []
    with pytest.raises(TrainError, match="unknown logger 'mlflow'"):
        check_loggers(["mlflow"])
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(TrainError, match="pip install wandb"):
        check_loggers(["console", "wandb"])


def test_a_launch_profile_is_verls_and_an_unknown_one_is_named(tmp_path):
    from cuda_agent.train.profiles import PROFILES

    unknown = runner.invoke(app, ["train", "agentic", "--model", "m", "--profile", "node9", "--dry-run"])
    assert unknown.exit_code != 0 and "no launch profile 'node9'; there are node8, nodes4" in str(unknown.exception)
    trl = runner.invoke(app, ["train", "agentic", "--model", "m", "--engine", "trl", "--profile", "node8"])
    assert trl.exit_code != 0 and "the trl engine trains on one machine" in str(trl.exception)
    assert {p.judge_pool for p in PROFILES.values()} == {"local", "ray"}


def test_the_trl_tool_format_is_native_or_text_and_agentic_grpo_takes_native_only(tmp_path):
    from cuda_agent.train.cli import trl_tool_format

    assert trl_tool_format("rft", None) == "native" and trl_tool_format("rft", "text") == "text"
    hermes = invoke("rft", "--model", "m", "--engine", "trl", "--tool-format", "hermes")
    assert hermes.exit_code != 0 and "on the trl engine --tool-format is native or text" in str(hermes.exception)
    text = invoke("agentic", "--model", "m", "--engine", "trl", "--tool-format", "text")
    assert text.exit_code != 0 and "through the model's own chat template" in str(text.exception)


def test_the_trl_engine_has_no_value_stage_and_says_why(tmp_path):
    result = invoke("value", "--engine", "trl", "--model", tmp_path)
    assert "no critic" in str(result.exception) and "verl" in str(result.exception)


def test_verl_dry_run_prints_the_command_and_needs_no_gpu(tmp_path, fixtures_dir):
    pytest.importorskip("verl")
    rows = tmp_path / "rows.parquet"
    invoke("data", fixtures_dir / "tasks", "--out", rows, "--backend", "cpu")
    result = invoke("warmup", "--model", "Qwen/Qwen2.5-7B-Instruct", "--data", rows, "--out", tmp_path / "runs",
                    "--dry-run", "--gpus", "4", "trainer.total_training_steps=5")
    assert result.exit_code == 0, result.output
    assert "verl.trainer.main_ppo" in result.stdout and "algorithm.lam=0.95" in result.stdout
    assert "trainer.total_training_steps=5" in (tmp_path / "runs" / "warmup" / "command.sh").read_text()


def test_verl_without_a_gpu_stops_before_running(tmp_path, fixtures_dir):
    pytest.importorskip("verl")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    rows = tmp_path / "rows.parquet"
    invoke("data", fixtures_dir / "tasks", "--out", rows, "--backend", "cpu")
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({}))
    result = invoke("warmup", "--model", model, "--data", rows, "--out", tmp_path / "runs")
    assert "no" in str(result.exception) and "GPU" in str(result.exception)


def test_asking_for_cuda_without_a_gpu_is_an_error(tmp_path, fixtures_dir):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    rows = tmp_path / "rows.parquet"
    invoke("data", fixtures_dir / "tasks", "--out", rows, "--backend", "cpu")
    result = invoke("warmup", "--engine", "trl", "--device", "cuda", "--model", tmp_path, "--data", rows)
    assert "no GPU" in str(result.exception)


def test_a_missing_engine_names_its_extra(monkeypatch):
    import sys

    from cuda_agent.train.extras import TrainError, require

    monkeypatch.setitem(sys.modules, "trl", None)  # what an environment without TRL looks like to import
    with pytest.raises(TrainError, match=r"cuda-agent\[trl\]"):
        require("trl")


def test_verl_dry_run_prints_the_command_even_without_verl(tmp_path, fixtures_dir, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "verl", None)  # what an environment without verl looks like to import
    rows = tmp_path / "rows.parquet"
    invoke("data", fixtures_dir / "tasks", "--out", rows, "--backend", "cpu")
    result = invoke("agentic", "--model", "Qwen/Qwen2.5-7B-Instruct", "--data", rows, "--out", tmp_path / "runs",
                    "--dry-run", "--resume-from", tmp_path / "runs/value/checkpoints/global_step_20",
                    "--sequence-parallel", "4", "--cache-dir", tmp_path / "cache", "--judge-concurrency", "16")
    assert result.exit_code == 0, result.output
    assert "verl.trainer.main_ppo" in result.stdout and "not checked" in result.stderr
    assert "ppo_max_token_len_per_gpu=32768" in result.stdout
    assert "reward_kwargs.concurrency=16" in result.stdout and "reward_kwargs.cache_dir=" in result.stdout
    assert "trainer.total_training_steps=170" in result.stdout


def test_the_judge_pool_on_ray_reaches_verls_reward_and_agent_loop(tmp_path, fixtures_dir, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "verl", None)
    rows = tmp_path / "rows.parquet"
    invoke("data", fixtures_dir / "tasks", "--out", rows, "--backend", "cpu")
    base = ("warmup", "--model", "Qwen/Qwen2.5-7B-Instruct", "--data", rows, "--out", tmp_path / "runs", "--dry-run")
    result = invoke(*base, "--judge-pool", "ray", "--judge-ray-resource", "judge")
    assert result.exit_code == 0, result.output
    assert "reward_kwargs.pool=ray" in result.stdout and "reward_kwargs.ray_resource=judge" in result.stdout
    assert "GPUs that hold the rollout engine" not in result.stderr
    shared = invoke(*base)  # judges beside each verl worker, on the training GPUs: said, with the way out
    assert shared.exit_code == 0 and "GPUs that hold the rollout engine" in shared.stderr
    assert "--judge-ray-resource judge" in shared.stderr
    wrong = invoke(*base, "--judge-pool", "dask")
    assert wrong.exit_code != 0 and "--judge-pool takes local or ray" in str(wrong.exception or wrong.output)
    joined = invoke(*base, "--judge-pool", "ray", "--ray-address", "10.0.0.1:6379")
    assert joined.exit_code != 0 and "leave --ray-address out" in str(joined.exception or joined.output)
