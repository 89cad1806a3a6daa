"""The cuda-agent command, run as a user runs it: a subprocess, exit codes, stdout and stderr."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
TASK = FIXTURES / "tasks" / "scale_bias_relu.py"
CORRECT = FIXTURES / "solutions" / "cpu" / "correct"
WRONG = FIXTURES / "solutions" / "cpu" / "wrong_values"


def cli(*args: str, cache: Path, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, CUDA_AGENT_CACHE=str(cache), COLUMNS="120")
    return subprocess.run([sys.executable, "-m", "cuda_agent.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout)


def test_help_lists_the_commands(judge_cache):
    result = cli("--help", cache=judge_cache)
    assert result.returncode == 0
    for command in ("judge", "compile", "verify", "profile", "workspace", "demo"):
        assert command in result.stdout


def test_cuda_without_a_gpu_is_a_clear_error(judge_cache):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    result = cli("judge", str(TASK), str(CORRECT), "--device", "cuda", cache=judge_cache)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "needs an NVIDIA GPU" in result.stderr and "--device cpu" in result.stderr


def test_malformed_task_is_a_clear_error(tmp_path, judge_cache):
    bad = tmp_path / "bad_task.py"
    bad.write_text("import torch\n\ndef get_inputs():\n    return []\n")
    result = cli("judge", str(bad), str(CORRECT), "--device", "cpu", cache=judge_cache)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "bad_task.py" in result.stderr and "class Model" in result.stderr


@pytest.mark.parametrize("flags, expected", [
    (["--checks", "0"], "--checks must be a whole number of at least 1; got 0"),
    (["--atol", "-1"], "--atol must be at least 0"),
    (["--rtol", "nan"], "--rtol must be a finite number"),
])
def test_a_judge_flag_out_of_range_is_refused_before_any_work(flags, expected, judge_cache):
    """Zero checks would pass a candidate on "0/0 checks"; a negative tolerance fails every one."""
    result = cli("judge", str(TASK), str(CORRECT), "--device", "cpu", *flags, cache=judge_cache)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert expected in " ".join(result.stderr.split()), result.stderr


def test_the_judge_settings_refuse_values_out_of_range_in_python_too():
    from cuda_agent.errors import ConfigError
    from cuda_agent.judge.config import JudgeConfig, TimingConfig

    for bad in ({"num_checks": 0}, {"atol": -1e-3}, {"margin": -0.1}, {"call_timeout_s": 0},
                {"timing_attempts": 1.5}, {"floor_slack": 0.0}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            JudgeConfig(**bad)
    for bad in ({"min_calls": 0}, {"target_seconds": -1.0}, {"precision": 0.0}, {"cpu_threads": 0}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            TimingConfig(**bad)
    assert JudgeConfig(norm_rtol=None, floor_slack=None, atol=0.0).atol == 0.0  # None and 0 where allowed


def test_bad_paths_and_counts_are_named_at_once(tmp_path, judge_cache):
    missing = tmp_path / "no-such-kernelbench"
    bench = cli("bench", "--kernelbench", str(missing), cache=judge_cache)
    said = "".join(bench.stderr.split())  # rich wraps long paths
    assert bench.returncode == 2 and "".join(str(missing).split()) in said and "doesnotexist" in said, bench.stderr
    assert "--solutions" not in bench.stderr
    synth = cli("synth", "-n", "0", "--out", str(tmp_path / "data"), cache=judge_cache, timeout=60)
    assert synth.returncode == 2 and "-n must be at least 1" in synth.stderr
    assert not (tmp_path / "data" / "seeds.json").exists()  # refused before crawling the seeds
    short = cli("judge", str(TASK), str(CORRECT), "--device", "cpu", "--timing-seconds", "0", cache=judge_cache, timeout=60)
    assert short.returncode == 2 and "--timing-seconds must be more than 0" in short.stderr, short.stderr


@pytest.mark.parametrize("content, expected", [
    (None, "--timing file {path} does not exist: write a JSON or TOML file"),
    ("{not json", "--timing file {path} is not valid JSON"),
    ('{"seconds": 1}', "--timing has no field seconds; it takes"),
    ('{"min_calls": 0}', "--timing {path}: min_calls must be a whole number of at least 1; got 0"),
])
def test_a_bad_timing_file_is_refused_before_any_work(tmp_path, judge_cache, content, expected):
    path = tmp_path / "timing.json"
    if content is not None:
        path.write_text(content)
    result = cli("judge", str(TASK), str(CORRECT), "--device", "cpu", "--timing", str(path), cache=judge_cache,
                 timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "".join(expected.format(path=path).split()) in "".join(result.stderr.split()), result.stderr


def test_a_timing_file_in_toml_sets_the_judges_timing(tmp_path):
    from cuda_agent.judge.config import TimingConfig

    path = tmp_path / "timing.toml"
    path.write_text("target_seconds = 0.5\nbaseline_sessions = 1\nflush_bytes = 16777216\n")
    assert TimingConfig.from_file(path) == TimingConfig(target_seconds=0.5, baseline_sessions=1,
                                                        flush_bytes=16 * 1024 * 1024)


def test_version_and_help_texts(judge_cache):
    from importlib.metadata import version

    result = cli("--version", cache=judge_cache)
    assert result.returncode == 0 and result.stdout.strip() == f"cuda-agent {version('cuda-agent')}"
    assert "cuda-agent[ray]" in cli("optimize", "--help", cache=judge_cache).stdout  # not eaten as markup


@pytest.mark.slow
def test_judge_json_is_last_on_stdout_and_exit_code_follows_correctness(judge_cache, fast_timing_file):
    # The suite's short timing, from a file: what is tested is the output, not the time
    ok = cli("judge", str(TASK), str(CORRECT), "--device", "cpu", "--json", "--timing", str(fast_timing_file),
             cache=judge_cache)
    assert ok.returncode == 0, ok.stderr
    verdict = json.loads(ok.stdout)  # nothing but the JSON on stdout
    assert verdict["status"] == "ok" and verdict["correct"] is True
    assert verdict["settings"]["timing"] == json.loads(fast_timing_file.read_text())
    assert verdict["reward"] in (1, 2, 3)
    for key in ("speedup_vs_eager", "speedup_vs_compile", "timings", "violations", "checks", "feedback"):
        assert key in verdict

    bad = cli("judge", str(TASK), str(WRONG), "--device", "cpu", "--json", cache=judge_cache)
    assert bad.returncode == 1
    verdict = json.loads(bad.stdout)
    assert verdict["status"] == "incorrect" and verdict["reward"] == -1


@pytest.mark.slow
def test_judge_prints_a_readable_verdict(judge_cache):
    result = cli("judge", str(TASK), str(WRONG), "--device", "cpu", cache=judge_cache)
    assert result.returncode == 1
    assert "incorrect" in result.stdout and "max abs error" in result.stdout


@pytest.mark.slow
def test_workspace_then_compile_verify_inside_it(tmp_path, judge_cache):
    ws = tmp_path / "ws"
    made = cli("workspace", str(TASK), str(ws), "--device", "cpu", cache=judge_cache)
    assert made.returncode == 0, made.stderr
    assert (ws / "SKILL.md").is_file() and (ws / "model_new.py").is_file()

    # The unfilled workspace is rejected with a message that says what to write.
    unfilled = cli("compile", "--json", cache=judge_cache, cwd=ws)
    assert unfilled.returncode == 1
    assert "REGISTER_BINDING" in json.loads(unfilled.stdout)["error"]

    # Fill it with a correct solution, and sabotage the reference copy in the workspace:
    # the judge must use the registered task, not the workspace's model.py.
    shutil.copy(CORRECT / "model_new.py", ws / "model_new.py")
    shutil.copytree(CORRECT / "kernels", ws / "kernels", dirs_exist_ok=True)
    (ws / "model.py").chmod(0o644)
    (ws / "model.py").write_text((ws / "model.py").read_text().replace("torch.relu(", "torch.zeros_like("))

    compiled = cli("compile", "--json", cache=judge_cache, cwd=ws / "kernels")
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    verified = cli("verify", "--json", cache=judge_cache, cwd=ws)
    assert verified.returncode == 0, verified.stdout
    assert json.loads(verified.stdout)["correct"] is True


def test_verify_outside_a_workspace_says_how_to_name_the_task(tmp_path, judge_cache):
    result = cli("verify", cache=judge_cache, cwd=tmp_path)
    assert result.returncode == 2
    assert "--task" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_demo_runs_on_the_cpu_backend(judge_cache, fast_timing_file):
    # The suite's short timing: the command's path is what is tested (on two loaded cores the
    # default sessions took 150-300 s, most of it flushing a 300 MB cache before each call).
    result = cli("demo", "--device", "cpu", "--json", "--timing", str(fast_timing_file), cache=judge_cache,
                 timeout=1200)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    verdict = json.loads(result.stdout)
    assert verdict["correct"] is True and verdict["task"] == "fused_elementwise"


@pytest.mark.slow
def test_a_relative_cache_dir_builds(tmp_path, judge_cache):
    """`--cache-dir c1` names a directory relative to where the command runs; the compiler runs
    elsewhere, so every path handed to it must be absolute. A binding edited by a comment is
    compiled afresh (with the cache's precompiled header) rather than found in the cache."""
    solution = tmp_path / "solution"
    shutil.copytree(CORRECT, solution)
    binding = next((solution / "kernels").glob("*_binding.cpp"))
    binding.write_text(binding.read_text() + "\n// edited: compile this binding again\n")
    relative = os.path.relpath(judge_cache, tmp_path)
    result = cli("compile", "--workspace", str(solution), "--task", str(TASK), "--device", "cpu",
                 "--cache-dir", relative, "--json", cache=tmp_path / "unused", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    verdict = json.loads(result.stdout)
    assert verdict["status"] == "ok", verdict["feedback"]
    assert verdict["build"]["objects_compiled"] >= 1


@pytest.mark.slow
def test_a_sol_execbench_solution_json_is_judged_against_its_problem_folder(judge_cache, fast_timing_file):
    problem = FIXTURES / "sol_execbench" / "rmsnorm_h64"
    solution = FIXTURES / "sol_execbench_solutions" / "rmsnorm_cpu_dps.json"
    ok = cli("judge", str(problem), str(solution), "--device", "cpu", "--json", "--timing", str(fast_timing_file),
             cache=judge_cache)
    assert ok.returncode == 0, ok.stderr
    verdict = json.loads(ok.stdout)
    assert verdict["correct"] is True and len(verdict["workloads"]) == 5  # 3 declared, 2 held out
    # A solution JSON needs its problem's definition: a plain task is refused, saying what to give.
    refused = cli("judge", str(TASK), str(solution), "--device", "cpu", cache=judge_cache)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "give its problem folder" in refused.stderr
