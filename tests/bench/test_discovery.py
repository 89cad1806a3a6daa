"""Finding problems in a KernelBench checkout, solutions in every layout, and baseline files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.bench.kb_timing import export_baselines, import_baselines
from cuda_agent.bench.kernelbench import discover, levels_root, parse_ids, parse_levels, parse_selection
from cuda_agent.bench.runner import ResultsLog
from cuda_agent.bench.solutions import find_candidates
from cuda_agent.errors import BenchmarkError

TASK = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * 2

def get_inputs():
    return [torch.rand(8)]

def get_init_inputs():
    return []
"""


def _checkout(root: Path, layout: dict[int, list[str]]) -> Path:
    for level, names in layout.items():
        folder = root / "KernelBench" / f"level{level}"
        folder.mkdir(parents=True)
        for name in names:
            (folder / name).write_text(TASK)
    return root


def test_levels_root_accepts_the_checkout_or_its_kernelbench_folder(tmp_path):
    root = _checkout(tmp_path, {1: ["1_A.py"]})
    assert levels_root(root) == root / "KernelBench"
    assert levels_root(root / "KernelBench") == root / "KernelBench"


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "absent", "does not exist"),
    (lambda p: (p / "f.txt").write_text("x") and p / "f.txt", "not a folder"),
    (lambda p: p, "does not look like a KernelBench checkout"),
])
def test_a_missing_or_malformed_checkout_is_a_clear_error(tmp_path, make, message):
    with pytest.raises(BenchmarkError, match=message):
        levels_root(make(tmp_path))


def test_discover_orders_by_id_filters_and_skips_non_problems(tmp_path):
    root = _checkout(tmp_path, {1: ["10_J.py", "2_B.py", "1_A.py", "helper.py", "__init__.py"], 2: ["1_X.py"]})
    found = discover(root, [1, 2])
    assert [p.name for p in found[1]] == ["1_A.py", "2_B.py", "10_J.py"]
    assert found[1][2].problem_id == 10 and found[1][2].key == "level1/10_J.py"
    assert [p.problem_id for p in discover(root, [1], {2, 10, 99})[1]] == [2, 10]
    assert found[2][0].task().name == "1_X"


def test_discover_errors_name_the_problem(tmp_path):
    root = _checkout(tmp_path, {1: ["1_A.py", "1_B.py"], 2: ["1_X.py"]})
    with pytest.raises(BenchmarkError, match="two problems with id 1"):
        discover(root, [1])
    with pytest.raises(BenchmarkError, match="no level3/ folder; levels present: level1, level2"):
        discover(root, [3])
    with pytest.raises(BenchmarkError, match="none of the problems asked for"):
        discover(root, [2], {5})


def test_parse_levels_and_ids():
    assert parse_levels("3,1, 2,1") == [1, 2, 3]
    assert parse_ids("1-3,19") == {1, 2, 3, 19}
    assert parse_ids(None) is None
    for bad in ("a", "0", ""):
        with pytest.raises(BenchmarkError):
            parse_levels(bad)
    with pytest.raises(BenchmarkError):
        parse_ids("1-x")


def test_candidates_in_every_layout(tmp_path):
    root = _checkout(tmp_path / "kb", {1: ["1_A.py", "2_B.py", "3_C.py", "4_D.py", "5_E.py"]})
    problems = discover(root, [1])[1]
    sols = tmp_path / "sols"
    (sols / "level1" / "1_A").mkdir(parents=True)                    # by name
    (sols / "level1" / "2").mkdir(parents=True)                      # by id
    for episode in ("00", "01"):                                     # agent output; 01 found nothing
        (sols / "level1" / "3_C" / episode).mkdir(parents=True)
    (sols / "level1" / "3_C" / "00" / "best").mkdir()
    (sols / "level_1_problem_4_sample_1_kernel.py").write_text("x")  # generations
    (sols / "level_1_problem_4_sample_0_kernel.py").write_text("x")
    (sols / "level_1_problem_9_sample_0_kernel.py").write_text("x")  # not selected: ignored
    (sols / "level1" / "1_Typo").mkdir()                              # matches nothing
    (sols / "level1" / "7_Other").mkdir()                             # another problem: not reported
    found, unmatched = find_candidates(sols, problems)
    assert [c.path for c in found["level1/1_A.py"]] == [sols / "level1" / "1_A"]
    assert found["level1/1_A.py"][0].sample is None
    assert [c.path for c in found["level1/2_B.py"]] == [sols / "level1" / "2"]
    assert [(c.sample, c.path.exists()) for c in found["level1/3_C.py"]] == [(0, True), (1, False)]
    assert [c.sample for c in found["level1/4_D.py"]] == [0, 1]
    assert found["level1/5_E.py"] == []
    assert unmatched == ["level1/1_Typo"]


def test_results_log_survives_a_partial_last_line(tmp_path):
    log = ResultsLog(tmp_path / "results.jsonl")
    log.append({"key": "a"})
    with log.path.open("a") as fh:
        fh.write('{"version": 1, "key": "b", "trunc')  # a crash mid-write
    assert [r["key"] for r in log.read()] == ["a"]
    log.append({"key": "c"})
    assert [r["key"] for r in log.read()] == ["a", "c"]


def test_baselines_round_trip_in_kernelbench_layout(tmp_path):
    stats = {"mean_ms": 2.5, "std_ms": 0.01, "min_ms": 2.4, "max_ms": 2.7, "calls": 100, "median_ms": 2.5}
    entries = [{"level": 1, "name": "10_J.py", "eager": stats, "compile": {**stats, "mean_ms": 2.0}},
               {"level": 1, "name": "2_B.py", "eager": stats, "compile": None}]
    written = export_baselines(tmp_path / "H100", entries, "NVIDIA H100")
    eager = json.loads(written["eager"].read_text())
    assert list(eager["level1"]) == ["2_B.py", "10_J.py"]  # KernelBench's natural order
    assert eager["level1"]["10_J.py"] == {"mean": 2.5, "std": 0.01, "min": 2.4, "max": 2.7, "num_trials": 100,
                                          "hardware": "NVIDIA H100", "device": "cuda:0"}
    imported = import_baselines(tmp_path / "H100")
    assert imported["compile"]["level1/10_J.py"]["mean"] == 2.0
    assert "level1/2_B.py" not in imported["compile"]


def test_importing_a_bad_baseline_folder_says_what_is_wrong(tmp_path):
    with pytest.raises(BenchmarkError, match="does not exist"):
        import_baselines(tmp_path / "nope")
    (tmp_path / "hw").mkdir()
    with pytest.raises(BenchmarkError, match="has no baseline_time_torch.json"):
        import_baselines(tmp_path / "hw")
    (tmp_path / "hw" / "baseline_time_torch.json").write_text('{"level1": {"1_A.py": {"mean": -1}}}')
    (tmp_path / "hw" / "baseline_time_torch_compile_inductor_default.json").write_text("{}")
    with pytest.raises(BenchmarkError, match="not a KernelBench baseline file"):
        import_baselines(tmp_path / "hw")


def test_problems_can_be_selected_per_level(tmp_path):
    root = _checkout(tmp_path, {1: ["1_A.py", "2_B.py", "3_C.py"], 2: ["1_X.py", "2_Y.py"]})
    assert parse_selection(["1:2-3", "2:1"]) == {1: {2, 3}, 2: {1}}
    found = discover(root, [1, 2], parse_selection(["1:3"]))
    assert [p.problem_id for p in found[1]] == [3] and [p.problem_id for p in found[2]] == [1, 2]
    found = discover(root, [1, 2], parse_selection(["2", "1:1"]))
    assert [p.problem_id for p in found[1]] == [1, 2] and [p.problem_id for p in found[2]] == [2]
    with pytest.raises(BenchmarkError, match="LEVEL:IDS"):
        parse_selection(["x:1"])


SOL_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sol_execbench"


def test_a_folder_of_sol_execbench_problems_is_level_one_in_natural_order():
    from cuda_agent.bench.kernelbench import check_root

    check_root(SOL_FIXTURES)
    (problems,) = discover(SOL_FIXTURES, [1]).values()
    # malformed/ holds problems one level down: not a problem of this set
    assert [p.name for p in problems] == ["1_gemm_k16.py", "2_grouped_heads_bf16.py", "3_rmsnorm_h64.py"]
    assert problems[2].path == SOL_FIXTURES / "rmsnorm_h64" and problems[2].key == "level1/3_rmsnorm_h64.py"
    assert problems[2].task().name == "rmsnorm_h64"  # loaded as the judge loads it
    assert [p.problem_id for p in discover(SOL_FIXTURES, [1], {1, 3})[1]] == [1, 3]
    (alone,) = discover(SOL_FIXTURES / "gemm_k16", [1])[1]  # one problem folder
    assert alone.name == "1_gemm_k16.py"


def test_sol_execbench_subsets_named_by_level_are_those_levels(tmp_path):
    import shutil

    for level, problem in (("L1", "rmsnorm_h64"), ("L2", "gemm_k16"), ("L2", "grouped_heads_bf16")):
        shutil.copytree(SOL_FIXTURES / problem, tmp_path / level / problem)
    (tmp_path / "Quant").mkdir()  # a subset not named by level is not a level
    found = discover(tmp_path, [1, 2])
    assert {n: [p.name for p in ps] for n, ps in found.items()} == {
        1: ["1_rmsnorm_h64.py"], 2: ["1_gemm_k16.py", "2_grouped_heads_bf16.py"]}
    with pytest.raises(BenchmarkError, match="at level.s. 1, 2, not 3: pass --levels 1,2"):
        discover(tmp_path, [3])
    with pytest.raises(BenchmarkError, match="does not look like a KernelBench checkout"):
        from cuda_agent.bench.kernelbench import check_root

        check_root(tmp_path / "Quant")
