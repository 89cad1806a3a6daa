"""SOL-ExecBench solutions (their JSON) converted into single-file model_new.py solutions.

The fixtures under tests/fixtures/sol_execbench_solutions are written for these tests in
SOL-ExecBench's solution schema; the problems are tests/fixtures/sol_execbench's and the one under
sol_execbench_solutions/problems. Most tests import the generated model_new.py with
``load_inline`` replaced by a stand-in that records its arguments (no compiler runs); the last one
builds and judges a converted C++ solution with the CPU backend.
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest
import torch
import torch.utils.cpp_extension

from cuda_agent.errors import TaskFormatError
from cuda_agent.sol_execbench import load_problem, solution_from_json, solution_source
from cuda_agent.solution import load_solution

HERE = Path(__file__).resolve().parent / "fixtures"
SOLUTIONS = HERE / "sol_execbench_solutions"
PAIR = SOLUTIONS / "problems" / "pair_concat"
PROBLEMS = HERE / "sol_execbench"


class FakeBuild:
    """Stands in for load_inline: records the call and returns an object whose entry point is
    ``entry`` (a Python function)."""

    def __init__(self, entry):
        self.entry = entry
        self.calls: list[dict] = []

    def __call__(self, name, cpp_sources, cuda_sources=None, functions=None, **kwargs):
        self.calls.append(dict(name=name, cpp_sources=cpp_sources, cuda_sources=cuda_sources,
                               functions=functions, **kwargs))
        return types.SimpleNamespace(run=self.entry)


def import_model(source: str, monkeypatch=None, entry=None) -> tuple[types.ModuleType, FakeBuild | None]:
    fake = None
    if monkeypatch is not None:
        fake = FakeBuild(entry)
        monkeypatch.setattr(torch.utils.cpp_extension, "load_inline", fake)
    module = types.ModuleType("model_new")
    exec(compile(source, "model_new.py", "exec"), module.__dict__)
    return module, fake


def reference(folder: Path):
    namespace: dict = {}
    exec(json.loads((folder / "definition.json").read_text())["reference"], namespace)
    return namespace["run"]


def variant(tmp_path: Path, name: str, change) -> Path:
    data = json.loads((SOLUTIONS / name).read_text())
    change(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


# -- C++ solutions ------------------------------------------------------------------------------


def test_local_headers_are_inlined_once_where_first_included(monkeypatch):
    source = solution_source(SOLUTIONS / "header_chain.json", PAIR)
    _, fake = import_model(source, monkeypatch, entry=lambda *args: None)
    (call,) = fake.calls
    main, declaration = call["cpp_sources"]
    (cuda,) = call["cuda_sources"]
    # main.cpp: common.h inlined; a header not among the sources is left to the compiler
    assert "#define PAIR_BLOCK 128" in main and '#include "common.h"' not in main
    assert '#include "absent.h"' in main
    # kernel.cu: kernel.cuh inlined (and common.h through it, by a relative path), each once
    assert cuda.count("#define PAIR_BLOCK 128") == 1
    assert cuda.count("__global__ void pair_kernel(const float* a, const float* b, float* out, int n);") == 1
    assert '// #include "kernel.cuh": inlined above' in cuda and '// #include "common.h": inlined above' in cuda
    assert cuda.index("#define PAIR_BLOCK") < cuda.index("pair_kernel<<<")
    assert "#pragma once" not in main + cuda
    assert "#include <torch/extension.h>" in cuda  # system headers stay
    # the entry point is in the .cu file and nothing binds it: declared for load_inline's binding
    assert call["functions"] == ["run"]
    assert declaration.strip() == ("void run(torch::Tensor a, torch::Tensor b, double scale, torch::Tensor joined, "
                                   "torch::Tensor stats);")
    assert call["extra_cuda_cflags"] == ["-O3", "-lineinfo"]
    assert call["extra_ldflags"] == ["-lcublas"]
    assert "extra_cflags" not in call
    assert "Not built (no file includes them): unused.h." in source


def test_the_generated_sources_are_readable_by_the_static_scan(tmp_path):
    from cuda_agent.judge.static_checks import scan_solution

    path = solution_from_json(SOLUTIONS / "header_chain.json", PAIR, tmp_path / "out")
    assert path == tmp_path / "out" / "model_new.py" and path.is_file()
    violations = scan_solution(load_solution(path), load_problem(PAIR), "cuda")
    assert "dynamic_code" not in {v.rule for v in violations}, violations


def test_compile_options_default_as_in_their_schema(tmp_path, monkeypatch):
    def given(data):
        data["spec"]["compile_options"] = {"cflags": ["-O3"]}

    _, fake = import_model(solution_source(variant(tmp_path, "header_chain.json", given), PAIR), monkeypatch)
    (call,) = fake.calls
    assert call["extra_cflags"] == ["-O3"]
    assert call["extra_cuda_cflags"] == ["-O3", "--use_fast_math"] and call["extra_ldflags"] == ["-lcuda"]

    def absent(data):
        del data["spec"]["compile_options"]

    source = solution_source(variant(tmp_path, "header_chain.json", absent), PAIR)
    assert "extra_cflags" not in source and "extra_cuda_cflags" not in source and "extra_ldflags" not in source


def test_destinations_are_allocated_from_the_definitions_axes(monkeypatch):
    seen = []

    def entry(*args):
        seen.append(args)
        args[3].fill_(1.0)

    model_module, _ = import_model(solution_source(SOLUTIONS / "header_chain.json", PAIR), monkeypatch, entry)
    a, b = torch.randn(3, 5), torch.randn(3, 5)
    joined, stats = model_module.ModelNew()(a, b, 0.5)
    (args,) = seen
    assert args[0] is a and args[1] is b and args[2] == 0.5
    assert args[3] is joined and args[4] is stats  # the outputs passed last, and returned
    assert joined.shape == (3, 10) and joined.dtype == torch.float32  # W = N * 2, an expression axis
    assert stats.shape == (3, 2) and stats.dtype == torch.float32     # S, a const axis
    assert torch.equal(joined, torch.ones(3, 10))


def test_an_expression_axis_in_an_inputs_shape_is_read_from_it(tmp_path, monkeypatch):
    # grouped_heads_bf16: tokens = batch_size * seq_len, and only tokens is in the inputs' shapes.
    solution = tmp_path / "grouped.json"
    solution.write_text(json.dumps({
        "name": "grouped", "definition": "grouped_heads_r2_d8", "author": "tests",
        "spec": {"languages": ["cuda_cpp"], "target_hardware": ["LOCAL"], "entry_point": "g.cpp::run"},
        "sources": [{"path": "g.cpp", "content": "void run(torch::Tensor q, torch::Tensor k, torch::Tensor out_proj, "
                                                 "torch::Tensor out, torch::Tensor lse) {}\n"}]}))
    source = solution_source(solution, PROBLEMS / "grouped_heads_bf16", zero_outputs=True)
    assert "torch.zeros(" in source and "torch.empty(" not in source
    model_module, fake = import_model(source, monkeypatch, entry=lambda *args: None)
    assert fake.calls[0]["functions"] == ["run"]  # defined in the C++ file: bound by name, no declaration
    assert len(fake.calls[0]["cpp_sources"]) == 1
    q, k, proj = torch.randn(6, 4, 8, dtype=torch.bfloat16), torch.randn(6, 2, 8, dtype=torch.bfloat16), \
        torch.randn(8, 8, dtype=torch.bfloat16)
    out, lse = model_module.ModelNew()(q, k, proj)
    assert out.shape == (6, 4, 8) and out.dtype == torch.bfloat16
    assert lse.shape == (6, 4) and lse.dtype == torch.float32
    assert not out.any() and not lse.any()


def test_without_destinations_forward_returns_what_the_entry_point_returns(monkeypatch):
    result = torch.randn(4, 3)
    seen = []

    def entry(*args):
        seen.append(args)
        return result

    source = solution_source(SOLUTIONS / "gemm_returning.json", PROBLEMS / "gemm_k16")
    model_module, fake = import_model(source, monkeypatch, entry)
    assert fake.calls[0]["functions"] is None  # the source has its own PYBIND11_MODULE
    assert "torch.empty" not in source
    A, B = torch.randn(4, 16), torch.randn(3, 16)
    assert model_module.ModelNew()(A, B, 2.0) is result
    assert seen[0][0] is A and seen[0][1] is B and seen[0][2] == 2.0 and len(seen[0]) == 3


# -- Python solutions ---------------------------------------------------------------------------


def test_a_python_solution_with_destinations_runs_as_its_problems_reference():
    source = solution_source(SOLUTIONS / "pair_concat_python_dps.json", PAIR)
    assert "def pair_concat(a, b, scale, joined, stats):" in source  # carried as it is
    model_module, _ = import_model(source)
    a, b = torch.randn(4, 3), torch.randn(4, 3)
    got = model_module.ModelNew()(a, b, 1.5)
    want = reference(PAIR)(a, b, 1.5)
    assert len(got) == 2
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def test_a_python_solution_returning_outputs_by_name_gives_them_in_the_definitions_order():
    source = solution_source(SOLUTIONS / "pair_concat_python_dict.json", PAIR)
    assert "load_inline" not in source
    model_module, _ = import_model(source)
    a, b = torch.randn(2, 5), torch.randn(2, 5)
    joined, stats = model_module.ModelNew()(a, b, 0.25)
    want_joined, want_stats = reference(PAIR)(a, b, 0.25)
    torch.testing.assert_close(joined, want_joined)
    torch.testing.assert_close(stats, want_stats)


# -- refusals -----------------------------------------------------------------------------------


def refusal(path: Path, problem: Path) -> str:
    with pytest.raises(TaskFormatError) as caught:
        solution_source(path, problem)
    message = str(caught.value)
    assert str(path) in message  # names the file
    return message


def test_a_binding_other_than_torch_is_refused(tmp_path):
    def tvm(data):
        data["spec"]["binding"] = "tvm-ffi"

    message = refusal(variant(tmp_path, "rmsnorm_cpu_dps.json", tvm), PROBLEMS / "rmsnorm_h64")
    assert "'tvm-ffi'" in message and "only the torch binding is converted" in message


def test_an_entry_file_missing_from_the_sources_is_refused(tmp_path):
    def elsewhere(data):
        data["spec"]["entry_point"] = "kernel.cu::run"

    message = refusal(variant(tmp_path, "rmsnorm_cpu_dps.json", elsewhere), PROBLEMS / "rmsnorm_h64")
    assert "'kernel.cu', which is not among the sources (rmsnorm_row.h, main.cpp)" in message


def test_two_python_sources_are_refused(tmp_path):
    def helper(data):
        data["sources"].append({"path": "helpers.py", "content": "SCALE = 2\n"})

    message = refusal(variant(tmp_path, "pair_concat_python_dps.json", helper), PAIR)
    assert "2 Python files (pair.py, helpers.py)" in message and "one file" in message


def test_an_entry_point_nothing_binds_or_defines_is_refused(tmp_path):
    def renamed(data):
        data["spec"]["entry_point"] = "main.cpp::forward_rows"

    message = refusal(variant(tmp_path, "rmsnorm_cpu_dps.json", renamed), PROBLEMS / "rmsnorm_h64")
    assert "no source defines PYBIND11_MODULE, and the function forward_rows is not defined" in message


def test_mixed_languages_and_missing_files_are_refused(tmp_path):
    def mixed(data):
        data["spec"]["languages"] = ["cuda_cpp", "triton"]

    assert "mixes C++ (cuda_cpp) and Python (triton)" in refusal(
        variant(tmp_path, "rmsnorm_cpu_dps.json", mixed), PROBLEMS / "rmsnorm_h64")

    def emptied(data):
        data["sources"][1]["content"] = ""

    assert "is empty and there is no" in refusal(variant(tmp_path, "rmsnorm_cpu_dps.json", emptied),
                                                PROBLEMS / "rmsnorm_h64")


def test_an_empty_content_is_read_from_beside_the_json(tmp_path, monkeypatch):
    def emptied(data):
        data["sources"][1]["content"] = ""

    path = variant(tmp_path, "rmsnorm_cpu_dps.json", emptied)
    main = json.loads((SOLUTIONS / "rmsnorm_cpu_dps.json").read_text())["sources"][1]["content"]
    (tmp_path / "main.cpp").write_text(main)
    _, fake = import_model(solution_source(path, PROBLEMS / "rmsnorm_h64"), monkeypatch)
    assert "void run(torch::Tensor hidden_states" in fake.calls[0]["cpp_sources"][0]


# -- judged -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_converted_cpp_solution_is_judged_correct_on_the_cpu(cpu_judge, tmp_path):
    problem = PROBLEMS / "rmsnorm_h64"
    path = solution_from_json(SOLUTIONS / "rmsnorm_cpu_dps.json", problem, tmp_path)
    solution = load_solution(path)
    assert solution.layout == "single_file"
    verdict = cpu_judge.evaluate(load_problem(problem), solution, stage="verify")
    assert verdict.status == "ok" and verdict.correct, (verdict.error, verdict.details[-2000:])
    declared = [w for w in verdict.workloads if not w["held_out"]]
    assert [w["name"] for w in declared] == ["rms-b7", "rms-b1", "rms-b16"]
    assert all(w["status"] == "ok" for w in verdict.workloads)
    (built,) = verdict.build["load_inline"]
    assert built
