"""The static checks: every rule on small solutions (flagged and not), evasions, the honest
solutions in the repository (never flagged), speed, and inputs that must not crash the scan.

A case marks each line where it expects a violation of its rule with ``# !`` (Python) or
``// !`` (C/C++, where it is a comment the scan never sees); the test asserts the rule was
reported on exactly those lines.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from cuda_agent.judge.rules import STATIC_RULES
from cuda_agent.judge.static_checks import scan_solution, task_ops
from cuda_agent.solution import Solution, load_solution
from cuda_agent.task import Task, load_task
from cuda_agent.workspace import render_model_new

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"

ELEMENTWISE_TASK = textwrap.dedent("""
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, x):
            return torch.relu(x)

    def get_inputs():
        return [torch.randn(8, 8)]

    def get_init_inputs():
        return []
""")
GEMM_TASK = ELEMENTWISE_TASK.replace("return torch.relu(x)", "return torch.matmul(x, x)")
CONV_TASK = textwrap.dedent("""
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)

        def forward(self, x):
            return self.conv(x)

    def get_inputs():
        return [torch.randn(1, 3, 8, 8)]

    def get_init_inputs():
        return []
""")
TASKS = {"elementwise": ELEMENTWISE_TASK, "gemm": GEMM_TASK, "conv": CONV_TASK}

CLEAN_MODEL = textwrap.dedent("""
    import torch
    import torch.nn as nn

    import cuda_extension


    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, x):
            return cuda_extension.run(x)
""")


def _task(kind: str) -> Task:
    return Task(name=kind, source=TASKS[kind], origin="test")


def scan(files: dict[str, str], task: str = "elementwise", backend: str = "cuda",
         layout: str = "workspace"):
    return scan_solution(Solution(files=files, layout=layout, origin="test"), _task(task), backend)


def marked(code: str, marker: str) -> set[int]:
    return {i for i, line in enumerate(code.splitlines(), 1) if line.rstrip().endswith(marker)}


def lines_of(violations, rule: str, file: str) -> set[int]:
    return {v.line for v in violations if v.rule == rule and v.file == file}


def py(code: str, **kw):
    code = textwrap.dedent(code).lstrip("\n")
    return code, scan({"model_new.py": code}, **kw)


def cpp(code: str, name: str = "kernels/k.cu", **kw):
    code = textwrap.dedent(code).lstrip("\n")
    return code, scan({"model_new.py": CLEAN_MODEL, name: code}, **kw)


def assert_python(rule: str, code: str, **kw) -> None:
    code, found = py(code, **kw)
    expected = marked(code, "# !")
    assert expected, "a positive case must mark its lines"
    got = lines_of(found, rule, "model_new.py")
    assert got == expected, "\n".join(v.render() for v in found)


def assert_cpp(rule: str, code: str, name: str = "kernels/k.cu", **kw) -> None:
    code, found = cpp(code, name, **kw)
    expected = marked(code, "// !")
    assert expected, "a positive case must mark its lines"
    got = lines_of(found, rule, name)
    assert got == expected, "\n".join(v.render() for v in found)


def assert_python_clean(code: str, rules: tuple[str, ...] = tuple(STATIC_RULES), **kw) -> None:
    _, found = py(code, **kw)
    bad = [v for v in found if v.rule in rules]
    assert not bad, "\n".join(v.render() for v in bad)


def assert_cpp_clean(code: str, name: str = "kernels/k.cu", rules: tuple[str, ...] = tuple(STATIC_RULES),
                     **kw) -> None:
    _, found = cpp(code, name, **kw)
    bad = [v for v in found if v.rule in rules]
    assert not bad, "\n".join(v.render() for v in bad)


# ------------------------------------------------------------------------------------------
# torch_compute
# ------------------------------------------------------------------------------------------
TORCH_COMPUTE_PY = {
    "torch_function": """
        import torch
        import torch.nn as nn

        class ModelNew(nn.Module):
            def forward(self, a, b):
                return torch.matmul(a, b)  # !
    """,
    "module_alias": """
        import torch as t

        class ModelNew:
            def forward(self, x):
                return t.relu(x)  # !
    """,
    "functional_alias": """
        import torch.nn.functional as F

        class ModelNew:
            def forward(self, x):
                y = F.gelu(x)  # !
                return F.softmax(y, dim=-1)  # !
    """,
    "from_import_alias": """
        from torch import matmul as mm

        class ModelNew:
            def forward(self, a, b):
                return mm(a, b)  # !
    """,
    "from_nn_import_functional": """
        from torch.nn import functional

        class ModelNew:
            def forward(self, x):
                return functional.softmax(x, -1)  # !
    """,
    "star_import": """
        from torch import *

        class ModelNew:
            def forward(self, a, b):
                c = empty_like(a)
                return matmul(a, b)  # !
    """,
    "star_import_functional": """
        from torch.nn.functional import *

        def helper(x):
            return relu(x)  # !
    """,
    "star_import_shadows_builtin": """
        from torch import *

        class ModelNew:
            def forward(self, a, b):
                return max(a, b)  # !
    """,
    "tensor_methods": """
        class ModelNew:
            def forward(self, x, y):
                s = x.sum(dim=1)  # !
                e = x.exp()  # !
                x.add_(y)  # !
                return s.clamp(min=0).mean()  # !
    """,
    "matmul_operator": """
        class ModelNew:
            def forward(self, a, b):
                c = a @ b  # !
                c @= b  # !
                return c
    """,
    "nn_module_calls": """
        import torch.nn as nn

        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = nn.Linear(4, 4)
                self.act = nn.ReLU()
                self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

            def forward(self, x):
                x = self.linear(x)  # !
                x = self.linear.forward(x)  # !
                x = self.act(x)  # !
                x = self.layers[0](x)  # !
                for layer in self.layers:
                    x = layer(x)  # !
                x = getattr(self, "linear")(x)  # !
                return nn.ReLU()(x)  # !
    """,
    "compile_and_jit": """
        import torch
        import torch.nn as nn

        class ModelNew(nn.Module):
            @torch.compile  # !
            def forward(self, x):
                return x

        scripted = torch.jit.script(ModelNew())  # !
        ModelNew = torch.compile(ModelNew)  # !
    """,
    "getattr_literal": """
        import torch

        class ModelNew:
            def forward(self, a, b):
                c = getattr(torch, "matmul")(a, b)  # !
                return getattr(c, "relu")()  # !
    """,
    "aten_ops_and_namespaces": """
        import torch

        def f(a, b):
            x = torch.ops.aten.mm(a, b)  # !
            y = torch.special.erf(x)  # !
            z = torch.linalg.norm(y)  # !
            w = torch.nn.functional.linear(x, b)  # !
            return torch.cat([x, y])  # !
    """,
    "unbound_methods_and_operator_module": """
        import operator
        import torch

        def f(a, b):
            c = torch.Tensor.matmul(a, b)  # !
            d = a.__matmul__(b)  # !
            return operator.matmul(c, d)  # !
    """,
    "stored_references": """
        import torch
        import torch.nn.functional as F

        mm = torch.matmul  # !
        ACTS = {"relu": F.relu}  # !

        def f(a, b):
            return mm(a, b)  # !
    """,
    "lambda_defined_in_init_runs_later": """
        import torch
        import torch.nn as nn

        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.fn = lambda t: torch.relu(t)  # !
                self.w = nn.Parameter(torch.randn(3) * 2)
    """,
    "inherits_a_computing_module": """
        import torch.nn as nn

        class ModelNew(nn.Linear):  # !
            pass
    """,
    "precision_lowering_casts": """
        import torch

        LOW = torch.bfloat16

        class ModelNew:
            def forward(self, x):
                a = x.half()  # !
                b = x.to(torch.bfloat16)  # !
                c = x.to(dtype=torch.float16)  # !
                d = x.to(LOW)  # !
                e = x.type(torch.int8)  # !
                return x.float().to(x.device).to(torch.float32)
    """,
    "bound_method_kept_in_a_variable": """
        class ModelNew:
            def forward(self, x, w):
                f = x.matmul
                return f(w)  # !
    """,
    "module_level_helper": """
        def helper(x):
            return x.relu()  # !
    """,
}


@pytest.mark.parametrize("case", sorted(TORCH_COMPUTE_PY))
def test_torch_compute_python(case):
    assert_python("torch_compute", TORCH_COMPUTE_PY[case])


def test_torch_compute_python_allows_allocation_views_and_init():
    assert_python_clean("""
        import logging
        import math

        import torch
        import torch.nn as nn

        import cuda_extension

        logger = logging.getLogger(__name__)


        class Block(nn.Module):
            def forward(self, x):
                return cuda_extension.block(x)


        class ModelNew(nn.Module):
            def __init__(self, n, clip):
                super().__init__()
                self.linear = nn.Linear(n, n)
                self.act = nn.GELU()
                self.clip = clip
                self.blocks = nn.Sequential(Block(), Block())
                self.w = nn.Parameter(torch.randn(n, n) * 0.02)
                nn.init.kaiming_uniform_(self.w, a=math.sqrt(5))
                self.register_buffer("table", torch.arange(n).float().sum())

            @torch.no_grad()
            def forward(self, x: torch.Tensor) -> torch.Tensor:
                n = x.size(0) * x.shape[1]
                y = torch.empty_like(x)
                z = torch.empty(n, device=x.device, dtype=torch.float32)
                x = x.contiguous().view(-1, x.shape[-1]).float().to(torch.float32).to(x.device)
                x = x.to(x.dtype).to(device=x.device, dtype=x.dtype).cuda().clone()
                w = self.linear.weight.t().contiguous()
                seen = set()
                seen.add(n)
                logger.log(logging.DEBUG, "torch.matmul is not called here")
                big = torch.finfo(x.dtype).max
                scale = 1.0 / math.sqrt(max(n, 1))
                with torch.no_grad():
                    out = cuda_extension.run(x, w, self.linear.bias, self.clip, big, scale, y, z)
                out = self.blocks(out)
                return out.reshape(x.shape).permute(1, 0).unsqueeze(0).squeeze(0)
    """)


# ------------------------------------------------------------------------------------------
# torch_compute in C++
# ------------------------------------------------------------------------------------------
TORCH_COMPUTE_CPP = {
    "aten_functions": """
        #include <torch/types.h>
        torch::Tensor f(const torch::Tensor& a, const torch::Tensor& b) {
            auto c = at::matmul(a, b);  // !
            auto d = torch::relu(c);  // !
            auto e = torch::nn::functional::gelu(d);  // !
            return at::native::add(e, e);  // !
        }
    """,
    "tensor_methods": """
        #include <torch/types.h>
        torch::Tensor f(const torch::Tensor& a, const torch::Tensor& b) {
            auto c = a.matmul(b);  // !
            c.add_(b);  // !
            auto p = &c;
            return p->sum(1);  // !
        }
    """,
    "precision_lowering_casts": """
        #include <torch/types.h>
        torch::Tensor f(const torch::Tensor& x) {
            TORCH_CHECK(x.scalar_type() == torch::kHalf || x.scalar_type() == torch::kFloat32, "dtype");
            auto a = x.to(torch::kBFloat16);  // !
            auto b = x.half();  // !
            auto c = x.to(x.options().dtype(at::kHalf));  // !
            auto d = torch::empty_like(x, x.options().dtype(torch::kHalf));
            return x.to(torch::kFloat32).to(x.device());
        }
    """,
    "member_pointer": """
        #include <torch/types.h>
        auto fn = &at::Tensor::matmul;  // !
    """,
    "macro_body": """
        #include <torch/types.h>
        #define MM(a, b) at::matmul(a, b)  // !
        torch::Tensor f(const torch::Tensor& a) { return a; }
    """,
    "object_macro_renames_namespace": """
        #include <torch/types.h>
        #define NS at
        torch::Tensor f(const torch::Tensor& a) {
            return NS::matmul(a, a);  // !
        }
    """,
    "namespace_alias": """
        #include <torch/types.h>
        namespace A = at;
        torch::Tensor f(const torch::Tensor& a) {
            return A::matmul(a, a);  // !
        }
    """,
    "using_namespace": """
        #include <torch/types.h>
        using namespace at;
        Tensor f(const Tensor& a) {
            return matmul(a, a);  // !
        }
    """,
    "line_splice": """
        #include <torch/types.h>
        torch::Tensor f(const torch::Tensor& a) {
            return at::mat\\
        mul(a, a);  // !
        }
    """,
}


@pytest.mark.parametrize("case", sorted(TORCH_COMPUTE_CPP))
def test_torch_compute_cpp(case):
    code = TORCH_COMPUTE_CPP[case]
    if case == "line_splice":  # the splice joins two lines: the name is reported where it starts
        code, found = cpp(code, "kernels/k_binding.cpp")
        assert lines_of(found, "torch_compute", "kernels/k_binding.cpp") == {3}
        return
    assert_cpp("torch_compute", code, name="kernels/k_binding.cpp")


def test_torch_compute_cpp_allows_allocation_metadata_and_literals():
    assert_cpp_clean("""
        // A comment that mentions at::matmul, torch::relu and x.sum() is not code.
        /* neither is a block comment: at::matmul(a, b) */
        #include <torch/types.h>
        #include <torch/extension.h>
        #include <torch/csrc/utils/pybind.h>
        #include <ATen/ATen.h>
        #include <ATen/cuda/CUDAContext.h>
        #include <c10/cuda/CUDAGuard.h>
        #include <c10/cuda/CUDAStream.h>
        #include <limits>
        #include "../binding_registry.h"

        static torch::Tensor f(const torch::Tensor& x, const at::Tensor& w) {
            TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "at::matmul is not used: ", x.sizes());
            const c10::cuda::CUDAGuard guard(x.device());
            auto xc = x.contiguous().view({-1, x.size(-1)}).transpose(0, 1).to(torch::kFloat32);
            auto out = torch::empty({xc.size(0), w.size(0)}, xc.options().dtype(torch::kFloat));
            auto z = at::zeros_like(out);
            auto s = torch::empty_strided({2, 2}, {2, 1}, torch::TensorOptions().device(x.device()));
            auto t = at::ScalarType::Float;
            std::vector<int64_t> sizes = x.sizes().vec();
            const float big = std::numeric_limits<float>::max();
            cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
            AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "f", ([&] { (void)x.data_ptr<scalar_t>(); }));
            out.zero_();
            out.copy_(z);
            return out;
        }
    """, name="kernels/k_binding.cpp")


# ------------------------------------------------------------------------------------------
# reference_access
# ------------------------------------------------------------------------------------------
REFERENCE_PY = {
    "import_model": """
        from model import Model  # !
    """,
    "subclass_and_alias": """
        from model import Model  # !
        import torch.nn as nn

        class ModelNew(Model):  # !
            pass

        Alias = Model  # !
    """,
    "call": """
        import model  # !

        class ModelNew:
            def __init__(self):
                self.ref = model.Model()  # !
    """,
    "star": """
        from model import *  # !
    """,
    "relative": """
        from .model import Model  # !
    """,
    "judge_package": """
        import cuda_agent.judge.worker_main  # !
        from reference_task import get_inputs  # !
    """,
    "by_name": """
        import sys

        ref = getattr(sys.modules["model"], "Model")  # !
    """,
}


@pytest.mark.parametrize("case", sorted(REFERENCE_PY))
def test_reference_access(case):
    assert_python("reference_access", REFERENCE_PY[case])


def test_reference_access_ignores_similar_names():
    assert_python_clean('''
        import torch.nn as nn

        class ModelNew(nn.Module):
            """Same as Model, faster."""

            def __init__(self, model_dim):
                super().__init__()
                self.model_dim = model_dim
                self.name = "Model"
    ''', rules=("reference_access",))


# ------------------------------------------------------------------------------------------
# exception_fallback
# ------------------------------------------------------------------------------------------
EXCEPTION_PY = {
    "try_except": """
        import cuda_extension

        def f(x):
            try:
                return cuda_extension.fast(x)
            except Exception:  # !
                return cuda_extension.slow(x)
    """,
    "bare_and_several": """
        def f(x):
            try:
                return x
            except ValueError:  # !
                pass
            except:  # !
                pass
    """,
    "suppress": """
        import contextlib
        from contextlib import suppress  # !

        def f(x):
            with contextlib.suppress(RuntimeError):  # !
                x = 1
            with suppress(Exception):  # !
                x = 2
            return x
    """,
    "swallowing_exit": """
        class Quiet:
            def __enter__(self):
                return self

            def __exit__(self, *exc):  # !
                return True
    """,
}


@pytest.mark.parametrize("case", sorted(EXCEPTION_PY))
def test_exception_fallback_python(case):
    assert_python("exception_fallback", EXCEPTION_PY[case])


def test_exception_fallback_cpp():
    assert_cpp("exception_fallback", """
        #include <stdexcept>
        int f(int x) {
            try {
                return x;
            } catch (const std::exception& e) {  // !
                return 0;
            }
        }
        // a comment about try/catch is fine, and so is "catch" in a string:
        const char* s = "catch";
    """, name="kernels/k.cpp", backend="cpu")


def test_exception_fallback_allows_try_finally():
    assert_python_clean("""
        def f(x):
            try:
                return x
            finally:
                pass
    """, rules=("exception_fallback",))


# ------------------------------------------------------------------------------------------
# concurrency and unjoined_stream
# ------------------------------------------------------------------------------------------
CONCURRENCY_PY = {
    "threading": """
        import threading  # !
        from concurrent.futures import ThreadPoolExecutor  # !
        import torch.multiprocessing as mp  # !
    """,
    "subprocess": """
        import subprocess  # !
    """,
    "cuda_streams": """
        import torch

        def f(x):
            s = torch.cuda.Stream()  # !
            with torch.cuda.stream(s):  # !
                y = x
            torch.cuda.current_stream().wait_stream(s)  # !
            return y
    """,
    "threads_setting": """
        import torch
        torch.set_num_threads(8)  # !
    """,
    "async": """
        async def f(x):  # !
            return x
    """,
    "fork_via_os": """
        import os

        pid = os.fork()  # !
    """,
}


@pytest.mark.parametrize("case", sorted(CONCURRENCY_PY))
def test_concurrency_python(case):
    assert_python("concurrency", CONCURRENCY_PY[case])


def test_concurrency_cpp():
    assert_cpp("concurrency", """
        #include <future>
        #include <pthread.h>
        #include <cstdlib>
        #include <unistd.h>
        void* work(void*) { return nullptr; }
        void f() {
            pthread_t t;
            pthread_create(&t, nullptr, work, nullptr);  // !
            auto fut = std::async(std::launch::async, [] { return 1; });  // !
            if (fork() == 0) {}  // !
            std::system("ls");  // !
            FILE* p = popen("ls", "r");  // !
            char* argv[] = {nullptr};
            execvp("ls", argv);  // !
            omp_set_num_threads(4);  // !
        #pragma omp parallel for num_threads(8)  // !
            for (int i = 0; i < 8; ++i) {}
        }
    """, name="kernels/k.cpp", backend="cpu")


def test_concurrency_cpp_allows_openmp_and_joined_threads():
    assert_cpp_clean("""
        #include <pthread.h>
        #include <mutex>
        #include <system_error>
        std::mutex m;
        void* work(void*) { return nullptr; }
        static int system_threads() { return 1; }
        void f(float* y, int n) {
            pthread_t t;
            pthread_create(&t, nullptr, work, nullptr);
            pthread_join(t, nullptr);
            std::lock_guard<std::mutex> lock(m);
        #pragma omp parallel for schedule(static)
            for (int i = 0; i < n; ++i) y[i] = 0.0f;
            (void)system_threads();
        }
    """, name="kernels/k.cpp", backend="cpu")


def test_unjoined_stream():
    assert_cpp("unjoined_stream", """
        #include <cuda_runtime.h>
        #include <thread>
        void cb(void*) {}
        void f() {
            cudaStream_t s;
            cudaStreamCreate(&s);  // !
            cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);  // !
            cudaLaunchHostFunc(s, cb, nullptr);  // !
            std::thread t([] {});  // !
            t.detach();  // !
        }
    """)


def test_joined_streams_and_threads_are_fine():
    assert_cpp_clean("""
        #include <cuda_runtime.h>
        #include <thread>
        void f() {
            cudaStream_t s;
            cudaStreamCreate(&s);
            cudaStreamSynchronize(s);
            cudaStreamDestroy(s);
            std::thread t([] {});
            t.join();
        }
    """, rules=("unjoined_stream", "concurrency"))


# ------------------------------------------------------------------------------------------
# introspection
# ------------------------------------------------------------------------------------------
INTROSPECTION_PY = {
    "module_aliases": """
        import torch

        mods = torch.sys.modules  # !
        frames = torch.nn.functional.sys._getframe  # !
    """,
    "modules": """
        import inspect  # !
        import gc  # !
        import traceback  # !
        import builtins  # !
    """,
    "frames": """
        import sys

        def f():
            frame = sys._getframe(1)  # !
            caller = frame.f_back.f_globals  # !
            return sys.modules  # !
    """,
    "namespaces": """
        import torch

        def f(fn):
            a = globals()  # !
            b = vars(torch)  # !
            c = fn.__globals__  # !
            d = torch.__dict__  # !
            return __builtins__  # !
    """,
    "torch_internals": """
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode  # !

        state = torch._C._get_tracing_state()  # !
    """,
    "tensor_subclass": """
        import torch

        class Lazy(torch.Tensor):  # !
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):  # !
                return func(*args)

        def f(x):
            return torch.Tensor._make_subclass(Lazy, x)  # !
    """,
}


@pytest.mark.parametrize("case", sorted(INTROSPECTION_PY))
def test_introspection_python(case):
    assert_python("introspection", INTROSPECTION_PY[case])


def test_introspection_cpp():
    assert_cpp("introspection", """
        #include <Python.h>  // !
        #include <torch/types.h>
        void f() {
            PyFrameObject* frame = PyEval_GetFrame();  // !
            auto& tls = c10::impl::tls_local_dispatch_key_set();  // !
            torch::jit::Graph* g = nullptr;  // !
        }
    """, name="kernels/k_binding.cpp")


# ------------------------------------------------------------------------------------------
# monkeypatch
# ------------------------------------------------------------------------------------------
MONKEYPATCH_PY = {
    "assign_library_attributes": """
        import time
        import torch
        import torch.nn.functional as F

        def fake(*args):
            return 0

        torch.matmul = fake  # !
        F.relu = fake  # !
        time.perf_counter = lambda: 0  # !
        torch.cuda.synchronize = fake  # !
        torch.Tensor.__eq__ = fake  # !
        del torch.relu  # !
    """,
    "setattr_and_sys_modules": """
        import sys
        import torch

        setattr(torch, "relu", None)  # !
        sys.modules["torch.nn"] = None  # !
    """,
    "through_an_alias": """
        import sys

        worker = sys.modules["cuda_agent.judge.worker_main"]
        worker.Worker.make_inputs = None  # !
    """,
    "type_of_an_object": """
        def f(x):
            type(x).__add__ = lambda a, b: a  # !
    """,
}


@pytest.mark.parametrize("case", sorted(MONKEYPATCH_PY))
def test_monkeypatch_python(case):
    assert_python("monkeypatch", MONKEYPATCH_PY[case])


def test_monkeypatch_allows_own_objects():
    assert_python_clean("""
        import torch
        import torch.nn as nn

        class Helper:
            count = 0

        Helper.count = 1

        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = 2.0
                self.__dict__["extra"] = 1

            def forward(self, x):
                out = torch.empty_like(x)
                out.tag = "result"
                return out
    """, rules=("monkeypatch",))


def test_monkeypatch_cpp():
    assert_cpp("monkeypatch", """
        #include <torch/library.h>  // !
        TORCH_LIBRARY_IMPL(aten, CUDA, m) {  // !
        }
    """, name="kernels/k_binding.cpp")


# ------------------------------------------------------------------------------------------
# dynamic_code
# ------------------------------------------------------------------------------------------
DYNAMIC_PY = {
    "builtins": """
        def f(src):
            exec(src)  # !
            g = eval("1 + 1")  # !
            code = compile(src, "x", "exec")  # !
            t = __import__("torch")  # !
    """,
    "runtime_names": """
        import torch

        def f(x, name):
            a = getattr(torch, "mat" + "mul")  # !
            b = getattr(x, name)  # !
            setattr(x, name, 1)  # !
            return a, b
    """,
    "modules": """
        import importlib  # !
        import base64  # !
        import marshal  # !
        import pickle  # !
        import codecs  # !
    """,
    "code_objects": """
        import types

        f = types.FunctionType(None, {})  # !
        C = type("C", (), {})  # !
    """,
}


@pytest.mark.parametrize("case", sorted(DYNAMIC_PY))
def test_dynamic_code_python(case):
    assert_python("dynamic_code", DYNAMIC_PY[case])


def test_dynamic_code_allows_literal_getattr_and_hasattr():
    assert_python_clean("""
        import torch.nn as nn

        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = nn.Parameter(None)

            def forward(self, x, name):
                w = getattr(self, "weight")
                return hasattr(x, name), w
    """, rules=("dynamic_code",))


def test_dynamic_code_cpp():
    assert_cpp("dynamic_code", """
        #include <nvrtc.h>  // !
        #define CAT(a, b) a##b  // !
        #define CAT2(a, b) a %:%: b  // !
        #define CALL(ns, f) ns::f  // !
        #define STR(x) #x
        #define HEADER <ATen/native/Activation.h>
        #include HEADER  // !
        void f() {
            nvrtcProgram prog;  // !
            CUmodule mod;
            cuModuleLoadData(&mod, nullptr);  // !
        }
    """)


# ------------------------------------------------------------------------------------------
# native_access
# ------------------------------------------------------------------------------------------
NATIVE_PY = {
    "modules": """
        import ctypes  # !
        import cffi  # !
        import mmap  # !
    """,
    "torch_entry_points": """
        import torch

        rt = torch.cuda.cudart()  # !
        torch.ops.load_library("x.so")  # !
        obj = torch.classes.ns.Foo()  # !
    """,
}


@pytest.mark.parametrize("case", sorted(NATIVE_PY))
def test_native_access_python(case):
    assert_python("native_access", NATIVE_PY[case])


def test_native_access_cpp():
    assert_cpp("native_access", """
        #include <dlfcn.h>  // !
        #include <sys/mman.h>
        #include <cstdio>
        void f() {
            void* h = dlopen("libcublas.so", RTLD_NOW);  // !
            void* s = dlsym(h, "cublasSgemm_v2");  // !
            FILE* maps = fopen("/proc/self/maps", "r");  // !
            mprotect(nullptr, 0, 0);  // !
        }
    """)


def test_inline_ptx_is_fine():
    assert_cpp_clean("""
        #include <cstdint>
        __device__ uint64_t now() {
            uint64_t t;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
            return t;
        }
        __device__ float fast_exp(float x) {
            float y;
            asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
            return y;
        }
    """)


# ------------------------------------------------------------------------------------------
# numerics_flags
# ------------------------------------------------------------------------------------------
NUMERICS_PY = {
    "backends_and_precision": """
        import torch
        from torch.backends import cudnn

        torch.backends.cuda.matmul.allow_tf32 = True  # !
        torch.backends.cudnn.benchmark = True  # !
        cudnn.allow_tf32 = False  # !
        torch.set_float32_matmul_precision("high")  # !
        torch.use_deterministic_algorithms(True)  # !
        torch.set_flush_denormal(True)  # !
        torch.set_default_dtype(torch.float16)  # !
    """,
    "seeds_and_autocast": """
        import torch

        torch.manual_seed(0)  # !

        def f(x):
            with torch.autocast("cuda"):  # !
                return x
    """,
}


@pytest.mark.parametrize("case", sorted(NUMERICS_PY))
def test_numerics_flags_python(case):
    assert_python("numerics_flags", NUMERICS_PY[case])


def test_numerics_flags_allows_reading():
    assert_python_clean("""
        import torch

        ok = torch.backends.cudnn.is_available()
        tf32 = torch.backends.cuda.matmul.allow_tf32
    """, rules=("numerics_flags",))


def test_numerics_flags_cpp():
    assert_cpp("numerics_flags", """
        #include <torch/types.h>
        #include <xmmintrin.h>
        void f() {
            at::globalContext().setAllowTF32CuBLAS(true);  // !
            _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);  // !
            torch::manual_seed(0);  // !
        }
    """, name="kernels/k_binding.cpp")


# ------------------------------------------------------------------------------------------
# io_access
# ------------------------------------------------------------------------------------------
IO_PY = {
    "files_and_os": """
        import os  # !
        import pathlib  # !
        import shutil  # !
        import tempfile  # !

        def f():
            with open("x.txt") as fh:  # !
                return fh.read()
    """,
    "network": """
        import socket  # !
        import urllib.request  # !
        import requests  # !
    """,
    "module_aliases": """
        import torch
        import torch.utils.cpp_extension

        env = torch.os.environ  # !
        run = torch.utils.cpp_extension.os.system  # !
    """,
    "module_alias_imported": """
        import torch
        from torch import os as hidden  # !

        names = hidden.listdir("/")
    """,
    "process": """
        import sys
        import io
        import torch

        args = sys.argv  # !
        line = sys.stdin.readline()  # !
        fh = io.open("x")  # !
        weights = torch.load("w.pt")  # !
        env = __import__("os").environ  # !
    """,
}


@pytest.mark.parametrize("case", sorted(IO_PY))
def test_io_access_python(case):
    assert_python("io_access", IO_PY[case])


def test_io_access_allows_print():
    assert_python_clean("""
        import sys

        def f(x):
            print("shape", x.shape, file=sys.stderr)
            return x
    """, rules=("io_access",))


def test_io_access_cpp():
    assert_cpp("io_access", """
        #include <fstream>  // !
        #include <cstdio>
        #include <cstdlib>
        #include <fcntl.h>  // !
        #include <sys/socket.h>  // !
        #include <filesystem>  // !
        #include "../../secrets.h"  // !
        void f() {
            FILE* fh = fopen("x", "r");  // !
            std::ifstream in("x");  // !
            const char* home = getenv("HOME");  // !
            int s = socket(2, 1, 0);  // !
            int fd = open("x", 0);  // !
            char buf[8];
            read(fd, buf, 8);  // !
            auto p = std::filesystem::current_path();  // !
        }
    """, name="kernels/k.cpp", backend="cpu")


def test_io_access_cpp_allows_printing_and_own_functions():
    assert_cpp_clean("""
        #include <cstdio>
        #include <iostream>
        #include "common.cuh"
        #include "../binding_registry.h"
        __device__ float read(const float* p) { return *p; }
        __device__ void write(float* p, float v) { *p = v; }
        __global__ void k(const float* x, float* y) {
            write(y, read(x));
            printf("%f\\n", read(x));
        }
        void host() { std::cout << "done" << std::endl; }
    """)


# ------------------------------------------------------------------------------------------
# library_use
# ------------------------------------------------------------------------------------------
def test_cublas_refused_when_the_task_has_no_gemm():
    assert_cpp("library_use", """
        #include <cublas_v2.h>  // !
        void f(cublasHandle_t h) {  // !
            cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, nullptr, nullptr, 1, nullptr, 1, 0, 0, 1);  // !
        }
    """, name="kernels/k.cpp", task="elementwise")


def test_cublas_only_through_gemm_for_a_gemm_task():
    assert_cpp("library_use", """
        #include <cublas_v2.h>
        #include <cublasLt.h>
        void f(cublasHandle_t h, cublasLtHandle_t lt, float* x) {
            cublasCreate(&h);
            cublasSetStream(h, nullptr);
            cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
            cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, nullptr, x, 1, x, 1, nullptr, x, 1);
            cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, nullptr, x, CUDA_R_32F, 1, 1, x,
                                       CUDA_R_32F, 1, 1, nullptr, x, CUDA_R_32F, 1, 1, 1, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT);
            cublasLtMatmul(lt, nullptr, nullptr, x, nullptr, x, nullptr, nullptr, x, nullptr, x, nullptr,
                           nullptr, nullptr, 0, nullptr);
            cublasSaxpy(h, 1, nullptr, x, 1, x, 1);  // !
            cublasSdot(h, 1, x, 1, x, 1, x);  // !
            cublasIsamax(h, 1, x, 1, nullptr);  // !
        }
    """, name="kernels/k.cpp", task="gemm")


def test_cublas_refused_on_the_cpu_backend():
    assert_cpp("library_use", """
        #include <cublas_v2.h>  // !
    """, name="kernels/k.cpp", task="gemm", backend="cpu")


def test_cudnn_only_for_convolution():
    conv_api = """
        #include <cudnn.h>
        void f(cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
               cudnnConvolutionDescriptor_t c) {
            cudnnCreate(&h);
            cudnnCreateTensorDescriptor(&x);
            cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 3, 8, 8);
            cudnnSetConvolution2dDescriptor(c, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
            cudnnConvolutionForward(h, nullptr, x, nullptr, w, nullptr, c,
                                    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, nullptr, x, nullptr);
            cudnnAddTensor(h, nullptr, x, nullptr, nullptr, x, nullptr);
            cudnnSoftmaxForward(h, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, nullptr, x,  // !
                                nullptr, nullptr, x, nullptr);
            cudnnPoolingForward(h, nullptr, nullptr, x, nullptr, nullptr, x, nullptr);  // !
            cudnnActivationForward(h, nullptr, nullptr, x, nullptr, nullptr, x, nullptr);  // !
        }
    """
    assert_cpp("library_use", conv_api, name="kernels/k.cpp", task="conv")
    code, found = cpp(conv_api, "kernels/k.cpp", task="gemm")
    assert 1 in lines_of(found, "library_use", "kernels/k.cpp")   # the include, in a GEMM task


def test_other_libraries_are_refused():
    assert_cpp("library_use", """
        #include <cufft.h>  // !
        #include <curand_kernel.h>  // !
        #include <cutlass/gemm/device/gemm.h>  // !
        #include <ATen/native/cuda/Loops.cuh>  // !
        #include <thrust/sort.h>
        #include <thrust/complex.h>
        #include <cub/cub.cuh>
        __global__ void k(float* x, curandState* st) {  // !
            using Reduce = cub::BlockReduce<float, 128>;
            __shared__ typename Reduce::TempStorage tmp;
            float s = Reduce(tmp).Sum(x[threadIdx.x]);
            thrust::complex<float> z(s, 0.0f);
            x[0] = z.real();
        }
        void host(float* x, int n) {
            thrust::sort(thrust::device, x, x + n);  // !
            cub::DeviceReduce::Sum(nullptr, *(size_t*)nullptr, x, x, n);  // !
            cufftHandle plan;  // !
        }
    """, task="gemm")


def test_python_libraries_are_refused():
    assert_python("library_use", """
        import numpy as np  # !
        import triton  # !
        import triton.language as tl  # !

        def f(a, b):
            n = np.prod(a.shape)
            return np.matmul(a, b)  # !
    """)


def test_only_allowed_modules_may_be_imported():
    # Any library can do the work, named by a rule or not: only torch, the extension and pure
    # helpers of the standard library are importable.
    assert_python("library_use", """
        import math
        import functools, operator
        import logging
        from collections import OrderedDict
        from typing import Optional
        import torch
        import torch.nn as nn
        import cuda_extension
        import einops  # !
        import array  # !
        import scipy.linalg  # !
        from sklearn import linear_model  # !
        import math, struct  # !
    """)


def test_handing_tensor_data_to_python_or_numpy_is_refused():
    assert_python("library_use", """
        import torch
        import torch.nn as nn
        import cuda_extension

        class ModelNew(nn.Module):
            def __init__(self, w):
                super().__init__()
                self.table = torch.tensor(w).tolist()  # allowed in __init__: building weights

            def forward(self, x, y):
                rows = x.tolist()  # !
                a = y.numpy()  # !
                b = y.__array__()  # !
                n = list(x.shape)  # shapes are metadata
                return cuda_extension.f(x, y)
    """)


# ------------------------------------------------------------------------------------------
# single-file solutions: the sources inside load_inline
# ------------------------------------------------------------------------------------------
def test_load_inline_sources_are_scanned_with_python_lines():
    code = textwrap.dedent('''
        import torch
        import torch.nn as nn
        from torch.utils.cpp_extension import load_inline

        header = "torch::Tensor f(torch::Tensor x);"
        cpp_source = r"""
        // at::matmul in a comment is fine
        #include <torch/extension.h>
        torch::Tensor f(torch::Tensor x) {
            auto y = torch::empty_like(x);
            return at::matmul(x, y);  // !
        }
        """
        cuda_source = f"""
        #include <cublas_v2.h>  // !
        #define BLOCK {256}
        """

        ext = load_inline(name="f", cpp_sources=[header, cpp_source], cuda_sources=cuda_source,
                          functions=["f"])


        class ModelNew(nn.Module):
            def forward(self, x):
                return ext.f(x)
    ''').lstrip("\n")
    found = scan({"model_new.py": code}, layout="single_file")
    assert lines_of(found, "torch_compute", "model_new.py") == {11}
    assert lines_of(found, "library_use", "model_new.py") == {15}


def test_load_inline_sources_that_cannot_be_read_are_refused():
    assert_python("dynamic_code", """
        from torch.utils.cpp_extension import load_inline

        def make():
            return "int x;"

        ext = load_inline(name="f", cpp_sources=make())  # !
    """, layout="single_file")


def test_load_inline_link_flags():
    assert_python("library_use", """
        from torch.utils.cpp_extension import load_inline

        ext = load_inline(name="f", cpp_sources="int x;",
                          extra_ldflags=["-lcufft"],  # !
                          extra_include_paths=["/opt/cutlass/include"])  # !
    """, layout="single_file")


def test_load_inline_string_mentioning_torch_is_not_compute_in_python():
    assert_python_clean('''
        import torch.nn as nn
        from torch.utils.cpp_extension import load_inline

        cpp_source = "torch::Tensor f(torch::Tensor x) { return torch::empty_like(x); }"
        note = "torch.matmul(a, b) would be slower"
        ext = load_inline(name="f", cpp_sources=cpp_source, functions=["f"])


        class ModelNew(nn.Module):
            def forward(self, x):
                return ext.f(x)
    ''', layout="single_file")


# ------------------------------------------------------------------------------------------
# the attack fixtures of the repository are caught
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,rules", [
    ("fake_clock", {"monkeypatch"}),
    ("fake_worker_clock", {"introspection", "monkeypatch", "dynamic_code", "reference_access"}),
    ("forged_reply", {"reference_access", "io_access"}),
    ("work_in_prepare", {"introspection", "monkeypatch", "dynamic_code", "reference_access"}),
])
def test_attack_fixtures_are_flagged(name, rules):
    task = load_task(FIXTURES / "tasks" / "scale_bias_relu.py")
    solution = load_solution(FIXTURES / "solutions" / "cpu" / "attacks" / name)
    found = {v.rule for v in scan_solution(solution, task, "cpu")}
    assert rules <= found, found


# ------------------------------------------------------------------------------------------
# task ops
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("body,gemm,conv", [
    ("self.m = nn.Linear(4, 4)", True, False),
    ("self.m = nn.Bilinear(4, 4, 4)", True, False),
    ("self.m = nn.Conv2d(3, 8, 3)", False, True),
    ("self.m = nn.ConvTranspose3d(3, 8, 3)", False, True),
    ("self.m = C(3, 8, 3)", False, True),
    ("self.m = nn.ReLU()", False, False),
])
def test_task_ops_from_modules(body, gemm, conv):
    source = ELEMENTWISE_TASK.replace("super().__init__()", "super().__init__()\n        " + body)
    source = "from torch.nn import Conv1d as C\n" + source
    ops = task_ops(source)
    assert (ops.gemm, ops.conv) == (gemm, conv)


@pytest.mark.parametrize("expr,gemm,conv", [
    ("x @ x", True, False),
    ("torch.einsum('ij,jk->ik', x, x)", True, False),
    ("torch.bmm(x, x)", True, False),
    ("x.mm(x)", True, False),
    ("F.conv2d(x, x)", False, True),
    ("F.linear(x, x)", True, False),
    ("torch.relu(x) + x.sum()", False, False),
])
def test_task_ops_from_forward(expr, gemm, conv):
    source = "import torch.nn.functional as F\n" + ELEMENTWISE_TASK.replace("torch.relu(x)", expr)
    ops = task_ops(source)
    assert (ops.gemm, ops.conv) == (gemm, conv)


# ------------------------------------------------------------------------------------------
# the honest solutions of the repository: never flagged
# ------------------------------------------------------------------------------------------
def _honest() -> list[tuple[str, Path, Path, str]]:
    cases = []
    for example in sorted((ROOT / "examples").iterdir()):
        if (example / "model.py").is_file():
            for backend in ("cuda", "cpu"):
                if (example / backend / "model_new.py").is_file():
                    cases.append((f"{example.name}-{backend}", example / backend, example / "model.py", backend))
    scale_bias_relu = FIXTURES / "tasks" / "scale_bias_relu.py"
    for backend in ("cuda", "cpu"):
        cases.append((f"fixture-{backend}", FIXTURES / "solutions" / backend / "correct", scale_bias_relu, backend))
    for backend in ("cpu", "cuda"):
        cases.append((f"load_inline-{backend}", FIXTURES / "solutions" / "single_file" / "load_inline_correct.py",
                      scale_bias_relu, backend))
    honest = ROOT / "tests" / "honest"
    if honest.is_dir():
        for case in sorted(honest.iterdir()):
            if (case / "model.py").is_file() and (case / "solution" / "model_new.py").is_file():
                backend = "cpu" if case.name.startswith("cpu") else "cuda"
                cases.append((f"honest-{case.name}", case / "solution", case / "model.py", backend))
    return cases


HONEST = _honest()


@pytest.mark.parametrize("name,solution,task,backend", HONEST, ids=[c[0] for c in HONEST])
def test_honest_solutions_have_no_violations(name, solution, task, backend):
    found = scan_solution(load_solution(solution), load_task(task), backend)
    assert found == [], "\n".join(v.render() for v in found)


@pytest.mark.parametrize("task_path", [ROOT / "examples" / "gemm_epilogue" / "model.py",
                                       FIXTURES / "tasks" / "scale_bias_relu.py",
                                       ROOT / "examples" / "rmsnorm" / "model.py"])
@pytest.mark.parametrize("backend", ["cuda", "cpu"])
def test_starter_workspace_has_no_violations(task_path, backend):
    task = load_task(task_path)
    solution = Solution({"model_new.py": render_model_new(task)}, "workspace", "starter")
    assert scan_solution(solution, task, backend) == []


# ------------------------------------------------------------------------------------------
# speed and robustness
# ------------------------------------------------------------------------------------------
@pytest.mark.timing  # a measured time: alone, not beside the parallel run's judges
def test_scan_is_fast():
    solution = load_solution(ROOT / "examples" / "gemm_epilogue" / "cuda")
    task = load_task(ROOT / "examples" / "gemm_epilogue" / "model.py")
    scan_solution(solution, task, "cuda")
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        scan_solution(solution, task, "cuda")
        best = min(best, time.perf_counter() - start)
    assert best < 0.05, f"{best * 1000:.1f} ms"


@pytest.mark.parametrize("files", [
    {"model_new.py": ""},
    {"model_new.py": "def broken(:\n"},
    {"model_new.py": "x = (" * 150 + ")" * 150},
    {"model_new.py": "x = " + " + ".join(["a"] * 5000)},
    {"model_new.py": "\x00\x01\x02 binary"},
    {"model_new.py": CLEAN_MODEL, "kernels/a.cu": "/* unterminated comment"},
    {"model_new.py": CLEAN_MODEL, "kernels/a.cu": 'const char* s = "unterminated\n'},
    {"model_new.py": CLEAN_MODEL, "kernels/a.cu": "R\"x(raw string never closed"},
    {"model_new.py": CLEAN_MODEL, "kernels/a.cu": "#define A B B\n#define B C C\n#define C D D\n"
                                                  "#define D E E\n#define E F F\n#define F G G\nA A A\n"},
    {"model_new.py": CLEAN_MODEL, "kernels/a.cu": "#include\n#define\n#\n%:\n'\\\n"},
    {"model_new.py": CLEAN_MODEL, "kernels/a.cu": "\x00\xff\ufeff\u00e9t\u00e9 = 1'000'000;"},
])
def test_weird_input_never_raises(files):
    for backend in ("cuda", "cpu"):
        for task in TASKS:
            result = scan(files, task=task, backend=backend)
            assert isinstance(result, list)
            assert all(v.rule in STATIC_RULES for v in result)


@pytest.mark.parametrize("files,layout", [
    ({"model_new.py": CLEAN_MODEL, "kernels/a.cu": 'R"x(' * 50_000}, "workspace"),
    ({"model_new.py": CLEAN_MODEL, "kernels/a.cu": "int a(" * 80_000}, "workspace"),
    ({"model_new.py": "from torch.utils.cpp_extension import load_inline\nx0 = 'int a;'\n"
                      + "".join(f"x{i + 1} = x{i} + x{i}\n" for i in range(60))
                      + "m = load_inline(name='m', cpp_sources=x60)\n"}, "single_file"),
    ({"model_new.py": "import torch.nn as nn\nm = " + "nn.Sequential(" * 90 + ")" * 90 + "\n"}, "workspace"),
])
def test_pathological_input_stays_fast(files, layout):
    # The scan's own CPU time, which other processes' load does not stretch: a backtracking
    # pattern or a quadratic walk on these inputs takes minutes, a linear scan well under a second.
    start = time.process_time()
    scan(files, layout=layout)
    assert time.process_time() - start < 5.0


def test_every_violation_names_a_known_rule_file_and_line():
    code, found = cpp("""
        #include <torch/types.h>
        auto f(const torch::Tensor& a) { return at::matmul(a, a); }
    """, "kernels/k_binding.cpp")
    assert found
    for v in found:
        assert v.rule in STATIC_RULES and v.file == "kernels/k_binding.cpp" and v.line == 2 and v.message
