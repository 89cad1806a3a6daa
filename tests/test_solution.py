"""Loading candidate solutions: only the candidate's own files, with clear errors."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from cuda_agent.errors import SolutionFormatError
from cuda_agent.solution import MAX_FILE_BYTES, MAX_FILES, Solution, load_solution, validate_solution
from cuda_agent.task import load_task

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SOLUTIONS = FIXTURES / "solutions"


@pytest.fixture(scope="module")
def scale_task():
    return load_task(FIXTURES / "tasks" / "scale_bias_relu.py")


def test_workspace_layout_takes_only_model_and_kernels():
    solution = load_solution(SOLUTIONS / "cpu" / "sabotaged_infrastructure")
    assert solution.layout == "workspace"
    assert sorted(solution.files) == ["kernels/scale_bias_relu.cpp", "kernels/scale_bias_relu_binding.cpp",
                                      "model_new.py"]
    assert solution.ignored == ("binding.cpp", "binding_registry.h", "model.py")
    assert solution.binding_files() == ["kernels/scale_bias_relu_binding.cpp"]
    assert solution.kernel_files((".cpp",)) == ["kernels/scale_bias_relu.cpp",
                                                "kernels/scale_bias_relu_binding.cpp"]


def test_single_file_layout_from_a_py_file():
    path = SOLUTIONS / "single_file" / "load_inline_correct.py"
    solution = load_solution(path)
    assert solution.layout == "single_file"
    assert list(solution.files) == ["model_new.py"]
    assert solution.model_source == path.read_text()
    assert solution.origin == str(path)


def test_directory_without_kernels_is_single_file(tmp_path):
    (tmp_path / "model_new.py").write_text((SOLUTIONS / "single_file" / "load_inline_correct.py").read_text())
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "README.md").write_text("notes")
    solution = load_solution(tmp_path)
    assert solution.layout == "single_file"
    assert "kernels/README.md" in solution.ignored


def test_unknown_kernel_files_and_symlinks_are_not_taken(tmp_path):
    workspace = tmp_path / "ws"
    kernels = workspace / "kernels"
    (kernels / "sub").mkdir(parents=True)
    (workspace / "model_new.py").write_text("import cuda_extension\nclass ModelNew: pass\n")
    (kernels / "k.cpp").write_text("// kernel")
    (kernels / "sub" / "helpers.cuh").write_text("// header")
    (kernels / "data.bin").write_bytes(b"\0\1")
    outside = tmp_path / "secret.cpp"
    outside.write_text("not the candidate's")
    os.symlink(outside, kernels / "linked.cpp")
    solution = load_solution(workspace)
    assert sorted(solution.files) == ["kernels/k.cpp", "kernels/sub/helpers.cuh", "model_new.py"]
    assert "kernels/data.bin" in solution.ignored


def test_sha256_depends_on_paths_and_contents():
    a = Solution({"model_new.py": "x", "kernels/a.cpp": "1"}, "workspace", "a")
    assert a.sha256 == Solution({"kernels/a.cpp": "1", "model_new.py": "x"}, "workspace", "b").sha256
    assert a.sha256 != Solution({"model_new.py": "x", "kernels/b.cpp": "1"}, "workspace", "a").sha256
    assert a.sha256 != Solution({"model_new.py": "x", "kernels/a.cpp": "2"}, "workspace", "a").sha256
    assert a.sha256 != Solution({"model_new.py": "x", "kernels/a.cpp": "1"}, "single_file", "a").sha256


def test_write_to_materialises_the_files(tmp_path):
    solution = load_solution(SOLUTIONS / "cpu" / "correct")
    solution.write_to(tmp_path / "out")
    assert load_solution(tmp_path / "out").files == solution.files


def test_missing_path_and_missing_model(tmp_path):
    with pytest.raises(SolutionFormatError, match="does not exist"):
        load_solution(tmp_path / "nothere")
    with pytest.raises(SolutionFormatError, match="has no model_new.py"):
        load_solution(tmp_path)
    (tmp_path / "model.cu").write_text("")
    with pytest.raises(SolutionFormatError, match="neither a workspace directory nor a .py file"):
        load_solution(tmp_path / "model.cu")


def test_file_size_limit_names_the_file(tmp_path):
    (tmp_path / "model_new.py").write_text("import cuda_extension\n")
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "big.cpp").write_text("x" * (MAX_FILE_BYTES + 1))
    with pytest.raises(SolutionFormatError, match=f"kernels/big.cpp is {MAX_FILE_BYTES + 1} bytes"):
        load_solution(tmp_path)
    (tmp_path / "kernels" / "big.cpp").write_text("x" * MAX_FILE_BYTES)
    assert load_solution(tmp_path).layout == "workspace"


def test_file_count_limit(tmp_path):
    (tmp_path / "model_new.py").write_text("import cuda_extension\n")
    (tmp_path / "kernels").mkdir()
    for i in range(MAX_FILES - 1):
        (tmp_path / "kernels" / f"k{i}.cpp").write_text("")
    assert len(load_solution(tmp_path).files) == MAX_FILES
    (tmp_path / "kernels" / "one_more.h").write_text("")
    with pytest.raises(SolutionFormatError, match=f"has {MAX_FILES + 1} files; the limit is {MAX_FILES}"):
        load_solution(tmp_path)


def test_non_utf8_source(tmp_path):
    (tmp_path / "model_new.py").write_text("import cuda_extension\n")
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k.cpp").write_bytes(b"\xff\xfe")
    with pytest.raises(SolutionFormatError, match="kernels/k.cpp is not UTF-8"):
        load_solution(tmp_path)


def test_a_workspace_model_passed_as_a_file_asks_for_the_directory():
    path = SOLUTIONS / "cpu" / "correct" / "model_new.py"
    with pytest.raises(SolutionFormatError) as info:
        load_solution(path)
    message = str(info.value)
    assert "imports cuda_extension" in message
    assert f"pass the workspace directory ({path.parent})" in message


# -- validation against the task -----------------------------------------------------------------
def test_fixture_solutions_validate(scale_task):
    validate_solution(load_solution(SOLUTIONS / "cpu" / "correct"), scale_task, "cpu")
    validate_solution(load_solution(SOLUTIONS / "single_file" / "load_inline_correct.py"), scale_task, "cpu")
    validate_solution(load_solution(SOLUTIONS / "cuda" / "correct"), scale_task, "cuda")


def test_cuda_sources_on_the_cpu_backend_are_a_clear_error(scale_task):
    solution = load_solution(SOLUTIONS / "cuda" / "correct")
    with pytest.raises(SolutionFormatError) as info:
        validate_solution(solution, scale_task, "cpu")
    message = str(info.value)
    assert "kernels/scale_bias_relu.cu" in message
    assert "cpu backend" in message and "kernels/NAME.cpp" in message


@pytest.mark.parametrize("name, expected", [
    ("no_model_new", "defines no `class ModelNew` at module level"),
    ("signature_mismatch", "Model has __init__(features, scale), ModelNew has __init__(features)"),
    ("no_binding", "has no NAME_binding.cpp"),
    ("no_extension_import", "does not `import cuda_extension`"),
])
def test_invalid_workspaces_are_explained(scale_task, name, expected):
    with pytest.raises(SolutionFormatError, match=re.escape(expected)):
        validate_solution(load_solution(SOLUTIONS / "cpu" / name), scale_task, "cpu")


def test_varargs_constructor_is_accepted(scale_task):
    source = (SOLUTIONS / "cpu" / "correct" / "model_new.py").read_text()
    source = source.replace("def __init__(self, features, scale):", "def __init__(self, *args, **kwargs):")
    source = source.replace("float(scale)", "2.0").replace("torch.empty(features)", "torch.empty(args[0])")
    solution = Solution({**load_solution(SOLUTIONS / "cpu" / "correct").files, "model_new.py": source},
                        "workspace", "varargs")
    validate_solution(solution, scale_task, "cpu")


def test_model_new_syntax_error_names_file_and_line(scale_task):
    files = {**load_solution(SOLUTIONS / "cpu" / "correct").files,
             "model_new.py": "import cuda_extension\n\nclass ModelNew(:\n    pass\n"}
    with pytest.raises(SolutionFormatError, match=r"ws/model_new.py:3: "):
        validate_solution(Solution(files, "workspace", "ws"), scale_task, "cpu")


def test_single_file_importing_cuda_extension_without_kernels(scale_task, tmp_path):
    (tmp_path / "model_new.py").write_text((SOLUTIONS / "cpu" / "correct" / "model_new.py").read_text())
    solution = load_solution(tmp_path)
    assert solution.layout == "single_file"
    with pytest.raises(SolutionFormatError, match="imports cuda_extension but .* has no kernel sources"):
        validate_solution(solution, scale_task, "cpu")


def test_single_file_with_a_syntax_error_is_a_format_error(scale_task, tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("import torch\nclass ModelNew(:\n    pass\n")
    try:
        solution = load_solution(path)
    except SolutionFormatError as exc:
        message = str(exc)
    else:
        with pytest.raises(SolutionFormatError) as info:
            validate_solution(solution, scale_task, "cpu")
        message = str(info.value)
    assert f"{path}:2" in message
    assert "broken.py/model_new.py" not in message


@pytest.mark.parametrize("hostile", [
    "y = " + "+".join(["x"] * 5000),        # one expression a few thousand terms long
    "y = " + "(" * 300 + "x" + ")" * 300,   # nested deeper than the parser goes
    "y = 1\0",                              # not text
])
def test_a_source_the_parser_cannot_take_is_a_format_error_not_a_crash(hostile, tmp_path):
    task = load_task(Path(__file__).parent / "fixtures" / "tasks" / "scale_bias_relu.py")
    path = tmp_path / "model_new.py"
    path.write_text(hostile + "\n\nclass ModelNew:\n    pass\n")
    solution = load_solution(path)  # loads: the parse error is validation's to report
    with pytest.raises(SolutionFormatError, match="model_new.py"):
        validate_solution(solution, task, "cpu")


@pytest.mark.slow  # builds the fixture's kernels once
@pytest.mark.parametrize("seed", range(12))
def test_the_judge_gives_a_verdict_for_fuzzed_solution_files(seed, cpu_judge, task, workspace_copy):
    # model_new.py cut, spliced, nested or stretched at random: the compile stage always ends in a
    # verdict (the kernels are the fixture's, built once and then cached), never in an exception.
    import random

    rng = random.Random(seed)
    root = workspace_copy("cpu/correct")
    model = root / "model_new.py"
    text = model.read_text()
    at = rng.randrange(len(text))
    mutation = rng.choice([
        lambda: text[:at],
        lambda: text[:at] + "".join(rng.choice("([{)]}:,.=+ \n\t'\"\\x0") for _ in range(rng.randint(1, 40))) + text[at:],
        lambda: text + "\n_deep = " + "+".join(["x"] * rng.randint(2000, 20000)) + "\n",
        lambda: text + "\n_deep = " + "[" * 250 + "]" * 250 + "\n",
        lambda: text.replace("torch", "torch." * rng.randint(1, 500)),
    ])
    model.write_text(mutation())
    verdict = cpu_judge.compile(task, load_solution(root))
    assert verdict.status in ("ok", "compile_error", "forbidden"), verdict.feedback
    assert verdict.feedback
