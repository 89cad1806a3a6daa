"""The content-addressed extension build: caching, recompiling only what changed, and the judge's
own infrastructure replacing whatever a workspace holds."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import subprocess
import uuid
from pathlib import Path

import pytest
import torch

from cuda_agent.judge.build import BUILD_NICENESS, ExtensionBuilder, _at_build_priority
from cuda_agent.judge.toolchain import detect_toolchain, find_cuda_home
from cuda_agent.solution import load_solution

pytestmark = pytest.mark.slow

KERNEL = "kernels/scale_bias_relu.cpp"
BINDING = "kernels/scale_bias_relu_binding.cpp"


@pytest.fixture(scope="module")
def builder(cpu_judge) -> ExtensionBuilder:
    return cpu_judge.builder


@pytest.fixture(scope="module")
def correct_build(builder, fixture_solution):
    """The correct fixture, built: its objects are in the cache from here on."""
    result = builder.build(fixture_solution("cpu/correct"))
    assert result.ok, result.errors
    return result


def _unique_comment() -> str:
    return f"\n// {uuid.uuid4().hex}\n"


def test_building_the_same_solution_twice_is_a_cache_hit(builder, correct_build, fixture_solution):
    again = builder.build(fixture_solution("cpu/correct"))
    assert again.ok and again.cache_hit
    assert again.objects_compiled == 0 and again.objects_total == 3
    assert again.module_path == correct_build.module_path and again.module_path.exists()


def test_editing_one_kernel_recompiles_only_that_object(builder, correct_build, workspace_copy):
    workspace = workspace_copy("cpu/correct")
    with open(workspace / KERNEL, "a") as fh:
        fh.write(_unique_comment())
    first = builder.build(load_solution(workspace))
    assert first.ok, first.errors
    assert not first.cache_hit
    assert first.objects_compiled == 1 and first.objects_total == 3
    assert first.module_path != correct_build.module_path
    # ninja's log says what each compiler run took: the one kernel recompiled, and the link
    assert set(first.step_seconds) == {KERNEL, "link"}
    assert all(0 < seconds < first.seconds for seconds in first.step_seconds.values())
    second = builder.build(load_solution(workspace))
    assert second.cache_hit and second.objects_compiled == 0
    assert second.module_path == first.module_path


def test_editing_model_new_py_reuses_the_built_module(builder, correct_build, workspace_copy):
    workspace = workspace_copy("cpu/correct")
    with open(workspace / "model_new.py", "a") as fh:
        fh.write(f"\n# {uuid.uuid4().hex}\n")
    result = builder.build(load_solution(workspace))
    assert result.cache_hit and result.module_path == correct_build.module_path


def test_a_new_header_recompiles_the_candidate_sources_only(builder, correct_build, workspace_copy):
    workspace = workspace_copy("cpu/correct")
    (workspace / "kernels" / "common.h").write_text(f"#pragma once{_unique_comment()}")
    result = builder.build(load_solution(workspace))
    assert result.ok, result.errors
    # The kernel and its binding may include the header; the judge's binding.cpp cannot.
    assert result.objects_compiled == 2 and result.objects_total == 3


def test_sabotaged_infrastructure_files_are_ignored(builder, correct_build, fixture_solution):
    solution = fixture_solution("cpu/sabotaged_infrastructure")
    assert "binding.cpp" in solution.ignored and "binding_registry.h" in solution.ignored
    result = builder.build(solution)
    assert result.ok, result.errors
    # The same candidate files give the same module: the workspace's copies played no part.
    assert result.module_path == correct_build.module_path


def test_judge_copies_replace_infrastructure_smuggled_into_the_solution(builder, correct_build,
                                                                       fixture_solution, tmp_path):
    # Even a solution that carries its own binding.cpp and binding_registry.h (a caller built it
    # by hand) is compiled with the judge's copies. A cache without objects makes every unit
    # compile from the staged tree; the precompiled header is shared to keep this quick.
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "pch").symlink_to(builder.root / "pch", target_is_directory=True)
    fresh = ExtensionBuilder(builder.toolchain, tmp_path)
    solution = fixture_solution("cpu/correct")
    files = {**solution.files, "binding.cpp": "#error smuggled binding.cpp\n",
             "binding_registry.h": "#error smuggled binding_registry.h\n"}
    result = fresh.build(dataclasses.replace(solution, files=files))
    assert result.ok, result.errors
    assert not result.cache_hit and result.objects_compiled == result.objects_total == 3


def test_compile_errors_are_short_and_keep_good_objects(builder, correct_build, workspace_copy,
                                                        fixtures_dir):
    workspace = workspace_copy("cpu/compile_error")
    with open(workspace / BINDING, "a") as fh:
        fh.write(_unique_comment())  # a binding no earlier build has compiled
    broken = builder.build(load_solution(workspace))
    assert not broken.ok and broken.module_path is None and not broken.timed_out
    assert broken.errors == ("kernels/scale_bias_relu.cpp:8: error: 'undeclared_helper' was not "
                             "declared in this scope")
    assert "undeclared_helper" in broken.log
    # The same broken sources again: the compiler's answer is given from the cache, nothing compiled.
    again = builder.build(load_solution(workspace))
    assert not again.ok and again.cache_hit and again.objects_compiled == 0
    assert (again.errors, again.log) == (broken.errors, broken.log)
    assert again.confinement["note"].startswith("nothing compiled: these sources failed to build before")
    # Fix the kernel (as the correct fixture has it, already cached): the binding compiled during
    # the failed build is kept, so nothing is compiled again and the new module is only linked.
    (workspace / KERNEL).write_text((fixtures_dir / "solutions" / "cpu" / "correct" / KERNEL).read_text())
    fixed = builder.build(load_solution(workspace))
    assert fixed.ok, fixed.errors
    assert not fixed.cache_hit
    assert fixed.objects_compiled == 0 and fixed.objects_total == 3


def test_a_build_over_its_time_limit_is_stopped(builder, correct_build, workspace_copy, judge_cache):
    slow = ExtensionBuilder(builder.toolchain, judge_cache, timeout_s=0.5)
    workspace = workspace_copy("cpu/correct")
    with open(workspace / BINDING, "a") as fh:
        fh.write(_unique_comment())  # compiling a binding takes seconds
    result = slow.build(load_solution(workspace))
    assert not result.ok and result.timed_out
    assert result.errors.startswith("the build exceeded its") and result.errors.endswith("s limit")
    again = slow.build(load_solution(workspace))  # a time limit says nothing of the sources: built again
    assert again.timed_out and not again.cache_hit


def test_a_failure_of_the_machine_rather_than_the_sources_is_not_remembered(builder):
    key = uuid.uuid4().hex
    for output in ("kernel.cpp:3: error: x\ncc1plus: out of memory allocating 65536 bytes",
                   "c++: fatal error: Killed signal terminated program cc1plus", "ninja: build stopped"):
        builder._remember_failure(key, output, "summary", output, None)
        assert builder._failed_before(key) is None
    builder._remember_failure(key, "kernel.cpp:3: error: 'y' was not declared", "kernel.cpp:3: error", "log", None)
    assert builder._failed_before(key)["errors"] == "kernel.cpp:3: error"


# -- the CUDA fixtures, compiled for a pretend sm_90 device --------------------------------------
def _cuda_header_shim(root: Path) -> list[str]:
    """Include flags that stand in for headers only a CUDA build of torch ships.

    A CPU build of torch carries c10/cuda/*.h but not the generated c10/cuda/impl/cuda_cmake_macros.h
    that CUDAMacros.h includes. Supplying it lets the bindings compile here exactly as they would
    against a CUDA build; nothing else about the toolchain changes.
    """
    from torch.utils.cpp_extension import include_paths

    if any((Path(p) / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").exists() for p in include_paths()):
        return []
    header = root / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
    header.parent.mkdir(parents=True)
    header.write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    return [f"-isystem{root}"]


@pytest.mark.skipif(find_cuda_home() is None, reason="needs nvcc (the CUDA toolkit) to compile .cu sources")
def test_cuda_fixture_solutions_compile_for_sm90(judge_cache, fixtures_dir, tmp_path):
    toolchain = detect_toolchain("cuda", (9, 0))
    assert toolchain.arch == "-gencode=arch=compute_90,code=sm_90"
    shim = _cuda_header_shim(tmp_path / "shim")
    toolchain = dataclasses.replace(toolchain, binding_flags=toolchain.binding_flags + tuple(shim))
    builder = ExtensionBuilder(toolchain, judge_cache)
    solutions = sorted(p for p in (fixtures_dir / "solutions" / "cuda").iterdir() if p.is_dir())
    assert {p.name for p in solutions} >= {"correct", "wrong_values", "illegal_address", "hang"}
    for path in solutions:
        solution = load_solution(path)
        assert solution.kernel_files((".cu",)), path.name
        result = builder.build(solution)
        units = builder._units(solution)
        missing = [u.rel for u in units if not builder._object(u).exists()]
        assert not missing, f"{path.name}: {missing} did not compile:\n{result.errors}\n{result.log[-3000:]}"
        if torch.version.cuda:
            assert result.ok, f"{path.name}: {result.errors}"
        else:
            # A CPU build of torch has no libc10_cuda / libtorch_cuda to link against.
            lines = result.errors.splitlines()
            assert lines and all(line.startswith("error: link: cannot find -l") for line in lines), result.errors


def test_prepare_compiles_the_judges_own_binding_once_for_every_later_build(cpu_judge, fixture_solution, tmp_path):
    # A fresh cache (no precompiled header, to keep it short): after prepare, a first solution
    # compiles its own two sources and links; the judge's binding.cpp is already there.
    fresh = ExtensionBuilder(cpu_judge.builder.toolchain, tmp_path / "cache", use_pch=False)
    ran, run_ninja = [], fresh._run_ninja
    fresh._run_ninja = lambda *a: ran.append(1) or run_ninja(*a)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # a pool's processes warm all at once
        assert list(pool.map(lambda _: fresh.prepare(), range(2))) == ["", ""]
    assert len(ran) == 1  # one of them compiled it; the other found it
    result = fresh.build(fixture_solution("cpu/correct"))
    assert result.ok, result.errors
    assert result.objects_compiled == 2 and result.objects_total == 3
    assert set(result.step_seconds) == {KERNEL, BINDING, "link"}
    assert fresh.prepare() == "" and fresh.build(fixture_solution("cpu/correct")).cache_hit


def test_compilers_run_below_the_judges_priority(tmp_path):
    # Builds share the host with other judges' timing sessions; the compilers yield to them.
    marker = tmp_path / "sandboxed"
    niceness = subprocess.run(["sh", "-c", "cut -d' ' -f19 /proc/self/stat"], capture_output=True, text=True,
                              check=True, preexec_fn=_at_build_priority(lambda: marker.touch())).stdout
    assert int(niceness) == min(19, os.getpriority(os.PRIO_PROCESS, 0) + BUILD_NICENESS)
    assert marker.exists()  # the sandbox's own preexec still runs
    assert os.getpriority(os.PRIO_PROCESS, 0) < int(niceness)  # the judge itself keeps its priority
