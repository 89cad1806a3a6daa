"""Compiler output boiled down to the errors a kernel author needs."""

from __future__ import annotations

from cuda_agent.judge.diagnostics import MAX_ERRORS, CompilerError, parse_errors, summarize

GCC = """\
In file included from kernels/add_binding.cpp:3:
kernels/add.h: In function 'void helper(int)':
kernels/add.h:7:5: error: 'foo' was not declared in this scope
    7 |     foo(x);
      |     ^~~
kernels/add_binding.cpp:12:20: error: expected ';' before '}' token
   12 |     return y
      |             ^
      |             ;
kernels/add_binding.cpp:12:20: note: some note that is not an error
kernels/add.cpp:1:10: fatal error: missing.h: No such file or directory
compilation terminated.
"""

NVCC = """\
kernels/softmax.cu(12): error: identifier "blockDimx" is undefined
          int i = blockIdx.x * blockDimx.x + threadIdx.x;
                               ^
kernels/softmax.cu(30): catastrophic error: cannot open source file "nothere.cuh"
2 errors detected in the compilation of "kernels/softmax.cu".
"""

PTXAS = """\
ptxas error   : Entry function '_Z6kernelPf' uses too much shared data (0x20000 bytes, 0xc000 max)
ptxas fatal   : Ptx assembly aborted due to errors
"""

LINKER = """\
/usr/bin/ld: obj/3f2a.o: in function `add_forward(at::Tensor const&)':
add_binding.cpp:(.text+0x4c): undefined reference to `add_launch'
/usr/bin/ld: cannot find -lcudnn: No such file or directory
collect2: error: ld returned 1 exit status
"""


def test_gcc_errors_with_file_and_line():
    errors = parse_errors(GCC)
    assert errors == [
        CompilerError("kernels/add.h", 7, "'foo' was not declared in this scope"),
        CompilerError("kernels/add_binding.cpp", 12, "expected ';' before '}' token"),
        CompilerError("kernels/add.cpp", 1, "missing.h: No such file or directory"),
    ]
    assert summarize(GCC).splitlines()[0] == "kernels/add.h:7: error: 'foo' was not declared in this scope"


def test_nvcc_errors_with_file_and_line():
    errors = parse_errors(NVCC)
    assert errors == [
        CompilerError("kernels/softmax.cu", 12, 'identifier "blockDimx" is undefined'),
        CompilerError("kernels/softmax.cu", 30, 'cannot open source file "nothere.cuh"'),
    ]
    assert summarize(NVCC).splitlines()[0] == 'kernels/softmax.cu:12: error: identifier "blockDimx" is undefined'


def test_ptxas_errors():
    lines = summarize(PTXAS).splitlines()
    assert lines[0].startswith("error: ptxas: Entry function '_Z6kernelPf' uses too much shared data")
    assert lines[1] == "error: ptxas: Ptx assembly aborted due to errors"


def test_linker_errors():
    messages = [e.message for e in parse_errors(LINKER)]
    assert "link: undefined reference to `add_launch'" in messages
    assert any(m.startswith("link: cannot find -lcudnn") for m in messages)
    assert all(e.file is None for e in parse_errors(LINKER) if e.message.startswith("link:"))


def test_template_backtraces_and_notes_are_dropped():
    text = summarize(GCC)
    assert "In file included from" not in text
    assert "note:" not in text
    assert "compilation terminated" not in text
    assert len(text.splitlines()) == 3


def test_repeated_errors_are_reported_once():
    once = "kernels/a.cpp:3:1: error: boom\n"
    assert summarize(once * 5 + "kernels/a.cpp:3:9: error: boom\n") == "kernels/a.cpp:3: error: boom"
    assert len(parse_errors(once + "kernels/a.cpp:4:1: error: boom\n")) == 2


def test_build_directory_prefix_is_stripped():
    output = "/var/cache/judge/build-x1y2/kernels/k.cpp:5:3: error: bad\n"
    assert summarize(output, ("/var/cache/judge/build-x1y2",)) == "kernels/k.cpp:5: error: bad"
    assert summarize(output, ("/var/cache/judge/build-x1y2/",)) == "kernels/k.cpp:5: error: bad"


def test_many_errors_are_capped_with_a_count():
    output = "".join(f"kernels/k.cpp:{i}:1: error: problem {i}\n" for i in range(1, 11))
    lines = summarize(output).splitlines()
    assert len(lines) == MAX_ERRORS + 1
    assert lines[-1] == f"... and {10 - MAX_ERRORS} more errors"
    assert summarize(output, limit=2).splitlines()[-1] == "... and 8 more errors"


def test_long_messages_are_cut():
    output = "kernels/k.cpp:1:1: error: " + "x" * 1000 + "\n"
    assert len(summarize(output)) <= 300


def test_unrecognised_output_falls_back_to_its_tail():
    output = "\n".join(f"line {i}" for i in range(40)) + "\n\n"
    text = summarize(output, ("/nowhere",))
    assert text.splitlines() == [f"line {i}" for i in range(25, 40)]


def test_fallback_tail_strips_the_build_directory_too():
    output = "Segmentation fault in /var/cache/judge/build-q/cc1plus\n"
    assert summarize(output, ("/var/cache/judge/build-q",)) == "Segmentation fault in cc1plus"


def test_empty_output_still_says_something():
    assert summarize("") == "the build failed without printing an error"
