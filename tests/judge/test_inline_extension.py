"""A single-file solution's load_inline, built by the judge: the files match torch's, the flags and
requests it refuses, and a build that is cached by content."""

from __future__ import annotations

import pytest
import torch.utils.cpp_extension as cpp_extension

from cuda_agent.judge.inline_extension import InlineCall, InlineCallError

CPP = "torch::Tensor twice(torch::Tensor x) { return x; }"
CUDA = "__global__ void noop() {}"


def _torch_writes(tmp_path, monkeypatch, **arguments) -> dict[str, str]:
    """The files torch's own load_inline writes for ``arguments`` (its compile step left out)."""
    monkeypatch.setattr(cpp_extension, "_jit_compile", lambda *args, **kwargs: None)
    cpp_extension.load_inline(build_directory=str(tmp_path), **arguments)
    return {p.name: p.read_text() for p in tmp_path.iterdir() if p.name in ("main.cpp", "cuda.cu")}


@pytest.mark.parametrize("arguments", [
    dict(name="plain", cpp_sources=CPP, functions=["twice"]),
    dict(name="several", cpp_sources=[CPP, "int helper() { return 1; }"], functions={"twice": "doubles x"},
         cuda_sources=[CUDA, CUDA]),
    dict(name="unhandled", cpp_sources=CPP, functions="twice", with_pytorch_error_handling=False),
    dict(name="bare", cpp_sources=CPP, cuda_sources=CUDA, no_implicit_headers=True),
])
def test_the_files_are_those_torchs_load_inline_writes(arguments, tmp_path, monkeypatch):
    ours = InlineCall.from_arguments(**arguments).files()
    assert ours == _torch_writes(tmp_path, monkeypatch, **arguments)


def test_the_rules_read_the_calls_own_code_without_what_load_inline_adds():
    call = InlineCall.from_arguments("m", [CPP, CPP], cuda_sources=CUDA, functions=["twice"])
    assert call.sources() == {"main.cpp": CPP + "\n" + CPP, "cuda.cu": CUDA}  # no -D flags: nothing added
    assert "PYBIND11_MODULE" in call.files()["main.cpp"] and "PYBIND11_MODULE" not in call.sources()["main.cpp"]


def test_the_rules_read_what_a_define_flag_puts_into_the_code():
    from pathlib import Path

    from cuda_agent.judge.static_checks import scan_inline_build
    from cuda_agent.task import load_task

    task = load_task(Path(__file__).parents[1] / "fixtures" / "tasks" / "scale_bias_relu.py")
    call = InlineCall.from_arguments("m", "torch::Tensor f(torch::Tensor x) { return F(x); }", functions=["f"],
                                     extra_cflags=["-O3 -DF=at::relu"])
    assert call.sources()["main.cpp"].startswith("#define F at::relu\n")
    found = scan_inline_build(call.sources(), call.extra_ldflags, task, "cpu")
    assert {v.rule for v in found} == {"torch_compute"}, [v.render() for v in found]
    # nvcc reads a comma-separated list after -D, and hands -Xcompiler's flags to the host compiler.
    for flags in (["-DA=1,F=at::relu"], ["-Xcompiler -DF=at::relu"], ["--compiler-options=-O3,-DF=at::relu"],
                  ["-Xcompiler=-DF=at::relu"]):
        call = InlineCall.from_arguments("m", "", cuda_sources="torch::Tensor f(torch::Tensor x) { return F(x); }",
                                         functions=["f"], extra_cuda_cflags=flags)
        assert not call.flag_problems(), flags
        assert "#define F at::relu\n" in call.sources()["cuda.cu"], flags


def test_flags_that_only_change_code_generation_are_passed_on():
    call = InlineCall.from_arguments(
        "m", CPP, extra_cflags=["-O3", "-std=c++17 -march=native", "-fopenmp", "-DTILE=64", "-ffast-math"],
        extra_cuda_cflags=["-O3", "--use_fast_math", "-lineinfo", "-Xptxas", "-v,-O3", "-maxrregcount=64",
                           "-gencode", "arch=compute_90a,code=sm_90a", "-Xcompiler", "-fopenmp,-O3"])
    assert call.flag_problems() == []


@pytest.mark.parametrize("cflags, cuda_cflags, named", [
    (["-I/etc"], [], "-I/etc"),
    (["-include /proc/self/environ"], [], "-include"),
    (["-fplugin=/tmp/evil.so"], [], "-fplugin=/tmp/evil.so"),
    (["-B/tmp/bin"], [], "-B/tmp/bin"),
    (["@/tmp/flags"], [], "@/tmp/flags"),
    ([], ["-Xcompiler", "-fplugin=x.so"], "-fplugin=x.so"),
    ([], ["--compiler-bindir=/tmp"], "--compiler-bindir=/tmp"),
    ([], ["-ccbin", "/tmp/gcc"], "-ccbin"),
])
def test_flags_that_reach_outside_the_sources_are_refused(cflags, cuda_cflags, named):
    problems = InlineCall.from_arguments("m", CPP, extra_cflags=cflags, extra_cuda_cflags=cuda_cflags).flag_problems()
    assert any(named in p for p in problems), problems


def test_a_request_round_trips_and_a_malformed_one_is_refused():
    call = InlineCall.from_arguments("m", CPP, cuda_sources=[CUDA], functions=["twice"], extra_cflags=["-O3"])
    assert InlineCall.from_message(call.to_message()) == call
    bad = [
        None,
        {**call.to_message(), "extra": 1},
        {**call.to_message(), "name": "m; rm -rf /"},
        {**call.to_message(), "cpp_sources": [1, 2]},
        {**call.to_message(), "functions": [["twice", 'doc"); evil("']]},
        {**call.to_message(), "functions": [["not a name", "doc"]]},
        {**call.to_message(), "no_implicit_headers": "yes"},
        {**call.to_message(), "cpp_sources": ["x" * (5 << 20)]},
    ]
    for message in bad:
        with pytest.raises(InlineCallError):
            InlineCall.from_message(message)


def test_calls_the_judge_does_not_build_say_why():
    with pytest.raises(InlineCallError, match="extra_include_paths"):
        InlineCall.from_arguments("m", CPP, extra_include_paths=["/opt/cutlass/include"])
    with pytest.raises(InlineCallError, match="SYCL"):
        InlineCall.from_arguments("m", CPP, sycl_sources="x")
    with pytest.raises(InlineCallError, match="list or a dict"):
        InlineCall.from_arguments("m", CPP, functions=3)
