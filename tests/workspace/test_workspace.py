"""The agent workspace: layout, starting model_new.py, SKILL.md, and the registry."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import stat
import sys
import types
from pathlib import Path

import pytest

from cuda_agent import pysource
from cuda_agent.device import DeviceInfo
from cuda_agent.errors import CudaAgentError, SolutionFormatError
from cuda_agent.solution import load_solution, validate_solution
from cuda_agent.task import task_from_source
from cuda_agent.workspace import (NOT_IMPLEMENTED_MESSAGE, WorkspaceError, WorkspaceExistsError,
                                  create_workspace, find_workspace, record_path, render_model_new,
                                  render_skill)
from cuda_agent.workspace.skill import FILES_DIR

TASK_WITH_DEFAULTS = '''\
import torch
import torch.nn as nn
from typing import Optional

HIDDEN = 16
EPS = HIDDEN * 1e-6


class Model(nn.Module):
    """Linear, then scale."""

    def __init__(self, in_features: int, out_features: int = HIDDEN, bias: bool = True,
                 eps: float = EPS, *, scale: Optional[float] = None) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=bias)
        self.scale = scale or 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.scale


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return [8]
'''

TASK_NO_ARGS = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.relu(a + b)


def get_inputs():
    return [torch.randn(16), torch.randn(16)]


def get_init_inputs():
    return []
'''

TASK_NO_INIT = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(16)]


def get_init_inputs():
    return []
'''

CUDA_DEVICE = DeviceInfo(
    backend="cuda", name="NVIDIA H100 80GB HBM3", torch_version="2.13.0+cu130",
    compute_capability="9.0", multiprocessors=132, memory_bytes=80 * 1024**3,
    l2_cache_bytes=50 * 1024**2, shared_memory_per_block_bytes=227 * 1024,
    shared_memory_per_multiprocessor_bytes=228 * 1024, registers_per_multiprocessor=65536,
    max_threads_per_multiprocessor=2048, warp_size=32, cuda_version="13.0",
)
CPU_DEVICE = DeviceInfo(backend="cpu", name="Example CPU 9000", torch_version="2.13.0+cpu",
                        cpu_cores=12, last_level_cache_bytes=32 * 1024**2)


def make_task(source: str = TASK_WITH_DEFAULTS, name: str = "linear_scale"):
    return task_from_source(source, name, f"tasks/{name}.py")


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def new_workspace(tmp_path: Path, cache: Path, source: str = TASK_WITH_DEFAULTS,
                  backend: str = "cpu", device: DeviceInfo | None = None) -> Path:
    return create_workspace(make_task(source), tmp_path / "ws", backend, device, cache_dir=cache)


def init_args(source: str, class_name: str) -> ast.arguments | None:
    cls = pysource.top_level_class(ast.parse(source), class_name)
    assert cls is not None
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            return node.args
    return None


# -- layout ---------------------------------------------------------------------------------------
def test_created_layout(tmp_path, cache):
    root = new_workspace(tmp_path, cache)
    assert root == (tmp_path / "ws").resolve()
    names = sorted(p.name for p in root.iterdir())
    assert names == ["SKILL.md", "binding.cpp", "binding_registry.h", "kernels", "model.py", "model_new.py"]
    assert (root / "kernels").is_dir() and not any((root / "kernels").iterdir())
    assert (root / "model.py").read_text() == TASK_WITH_DEFAULTS
    for name in ("binding.cpp", "binding_registry.h"):
        assert (root / name).read_text() == (FILES_DIR / name).read_text()
    # Reference and infrastructure copies are marked read-only; model_new.py is the agent's.
    assert not (root / "model.py").stat().st_mode & stat.S_IWUSR
    assert (root / "model_new.py").stat().st_mode & stat.S_IWUSR


def test_model_new_signature_matches_defaults_and_annotations(tmp_path, cache):
    root = new_workspace(tmp_path, cache)
    text = (root / "model_new.py").read_text()
    tree = ast.parse(text)
    expected = init_args(TASK_WITH_DEFAULTS, "Model")
    actual = init_args(text, "ModelNew")
    assert ast.dump(actual) == ast.dump(expected)
    assert "out_features: int = HIDDEN" in text and "scale: Optional[float] = None" in text
    cls = pysource.top_level_class(tree, "ModelNew")
    assert pysource.init_signature(cls) == make_task().init_signature()
    assert {"torch", "torch.nn", "cuda_extension"} <= pysource.imported_modules(tree)
    assert NOT_IMPLEMENTED_MESSAGE in text
    # The constants the defaults read are copied from the task, so the file runs on its own.
    assert "HIDDEN = 16" in text and "EPS = HIDDEN * 1e-06" in text


@pytest.mark.parametrize("source", [TASK_NO_ARGS, TASK_NO_INIT], ids=["no-arg-init", "no-init"])
def test_model_new_signature_without_arguments(source):
    text = render_model_new(make_task(source, "noargs"))
    cls = pysource.top_level_class(ast.parse(text), "ModelNew")
    signature = pysource.init_signature(cls)
    assert signature is not None and signature.names == ()
    assert not signature.has_varargs and not signature.has_varkw
    assert "def __init__(self):" in text


def test_model_new_runs_and_fails_clearly(monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setitem(sys.modules, "cuda_extension", types.ModuleType("cuda_extension"))
    namespace: dict = {"__name__": "model_new"}
    exec(compile(render_model_new(make_task()), "model_new.py", "exec"), namespace)
    model = namespace["ModelNew"](8)
    with pytest.raises(NotImplementedError, match="write your kernels in kernels/"):
        model(None)


def test_unfilled_workspace_is_rejected_by_the_solution_check(tmp_path, cache):
    root = new_workspace(tmp_path, cache)
    task = find_workspace(root, cache).task
    with pytest.raises(SolutionFormatError) as err:
        validate_solution(load_solution(root), task, "cpu")
    message = str(err.value)
    assert "cuda_extension" in message and "kernels/" in message


def test_unfilled_workspace_message_names_the_binding_file(tmp_path, cache):
    root = new_workspace(tmp_path, cache)
    with pytest.raises(SolutionFormatError, match="_binding.cpp"):
        validate_solution(load_solution(root), make_task(), "cpu")


# -- SKILL.md -------------------------------------------------------------------------------------
def test_skill_cuda_has_device_facts_and_cuda_wording(tmp_path, cache):
    root = new_workspace(tmp_path, cache, backend="cuda", device=CUDA_DEVICE)
    text = (root / "SKILL.md").read_text()
    for fact in ("NVIDIA H100 80GB HBM3", "| compute capability | 9.0 |", "| 132 |", "80 GiB", "50 MiB",
                 "227 KiB", "228 KiB", "65536", "2048", "| warp size | 32 |", "13.0", "2.13.0+cu130"):
        assert fact in text, fact
    for phrase in ("kernels/NAME.cu", "kernels/NAME_binding.cpp", "cudaStream_t",
                   "c10::cuda::getCurrentCUDAStream()", "REGISTER_BINDING", "cuBLAS", "cuDNN",
                   "torch::empty_like", "atol = rtol = 1e-2", "cuda-agent compile", "cuda-agent verify",
                   "cuda-agent profile", "linear_scale"):
        assert phrase in text, phrase
    assert "%if" not in text and "%end" not in text and "$" not in text


def test_skill_cpu_has_device_facts_and_cpu_wording(tmp_path, cache):
    root = new_workspace(tmp_path, cache, backend="cpu", device=CPU_DEVICE)
    text = (root / "SKILL.md").read_text()
    for fact in ("Example CPU 9000", "| CPU cores available | 12 |", "| last-level cache | 32 MiB |",
                 "2.13.0+cpu"):
        assert fact in text, fact
    assert "kernels/NAME.cpp" in text and "OpenMP" in text
    assert "kernels/NAME.cu`" not in text and "cudaStream_t" not in text
    assert "getCurrentCUDAStream" not in text and "L2 cache" not in text
    assert "%if" not in text and "$" not in text


@pytest.mark.parametrize("backend", ["cuda", "cpu"])
def test_skill_without_device_says_unknown(backend):
    text = render_skill(backend, None, "t")
    table = text.split("## 7. Device facts", 1)[1]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "fact" not in line]
    assert rows and all(line.endswith("| unknown |") for line in rows)


# -- creation rules -------------------------------------------------------------------------------
def test_refuses_to_overwrite_a_non_empty_directory(tmp_path, cache):
    target = tmp_path / "ws"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(WorkspaceExistsError) as err:
        create_workspace(make_task(), target, "cpu", cache_dir=cache)
    assert isinstance(err.value, FileExistsError) and isinstance(err.value, CudaAgentError)
    assert "not empty" in str(err.value) and "--force" in str(err.value)
    assert sorted(p.name for p in target.iterdir()) == ["notes.txt"]
    assert not (cache / "workspaces").exists()


def test_force_rewrites_workspace_files_and_keeps_kernels(tmp_path, cache):
    root = new_workspace(tmp_path, cache)
    (root / "model_new.py").write_text("edited")
    (root / "kernels" / "k.cpp").write_text("// mine")
    with pytest.raises(WorkspaceExistsError):
        new_workspace(tmp_path, cache)
    other = make_task(TASK_NO_ARGS, "add_relu")
    assert create_workspace(other, root, "cpu", force=True, cache_dir=cache) == root
    assert (root / "model.py").read_text() == TASK_NO_ARGS  # read-only files are replaced too
    assert "class ModelNew" in (root / "model_new.py").read_text()
    assert (root / "kernels" / "k.cpp").read_text() == "// mine"
    assert find_workspace(root, cache).task.name == "add_relu"


def test_creates_into_an_existing_empty_directory(tmp_path, cache):
    (tmp_path / "ws").mkdir()
    root = new_workspace(tmp_path, cache)
    assert (root / "model_new.py").is_file()


def test_rejects_bad_backend_and_mismatched_device(tmp_path, cache):
    with pytest.raises(WorkspaceError, match="unknown backend"):
        create_workspace(make_task(), tmp_path / "a", "tpu", cache_dir=cache)
    with pytest.raises(WorkspaceError, match="cuda backend"):
        create_workspace(make_task(), tmp_path / "b", "cpu", CUDA_DEVICE, cache_dir=cache)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


# -- registry -------------------------------------------------------------------------------------
def test_registry_round_trip(tmp_path, cache):
    task = make_task()
    root = create_workspace(task, tmp_path / "ws", "cuda", cache_dir=cache)
    key = hashlib.sha256(str(root).encode()).hexdigest()
    path = cache / "workspaces" / f"{key}.json"
    assert record_path(root, cache) == path and path.is_file()
    data = json.loads(path.read_text())
    assert data["root"] == str(root) and data["backend"] == "cuda"
    assert data["task"]["name"] == task.name and data["task"]["origin"] == task.origin
    assert data["task"]["source"] == task.source
    record = find_workspace(root, cache)
    assert record.root == root and record.backend == "cuda"
    assert record.task == task and record.task.origin == task.origin


def test_default_cache_dir_comes_from_the_judge_config(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path / "env-cache"))
    root = create_workspace(make_task(), tmp_path / "ws", "cpu")
    assert record_path(root).parent == tmp_path / "env-cache" / "workspaces"
    assert find_workspace(root).root == root


def test_find_workspace_from_a_subdirectory_and_a_file(tmp_path, cache):
    root = new_workspace(tmp_path, cache)
    nested = root / "kernels" / "scratch"
    nested.mkdir()
    assert find_workspace(root / "kernels", cache).root == root
    assert find_workspace(nested, cache).root == root
    assert find_workspace(root / "model_new.py", cache).root == root


def test_find_workspace_through_a_symlink(tmp_path, cache):
    root = new_workspace(tmp_path, cache)
    link = tmp_path / "link"
    link.symlink_to(root, target_is_directory=True)
    assert find_workspace(link / "kernels", cache).root == root


def test_find_workspace_ignores_a_tampered_model_py(tmp_path, cache):
    root = new_workspace(tmp_path, cache)
    model = root / "model.py"
    os.chmod(model, 0o644)
    model.write_text(TASK_NO_ARGS)
    record = find_workspace(root / "kernels", cache)
    assert record.task.source == TASK_WITH_DEFAULTS
    model.unlink()
    assert find_workspace(root, cache).task.source == TASK_WITH_DEFAULTS


def test_clear_error_outside_a_workspace(tmp_path, cache):
    new_workspace(tmp_path, cache)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(WorkspaceError) as err:
        find_workspace(elsewhere, cache)
    assert isinstance(err.value, CudaAgentError)
    message = str(err.value)
    assert "is not inside a workspace created by `cuda-agent workspace TASK DIR`" in message
    assert "--task TASK" in message


def test_unreadable_record_is_reported(tmp_path, cache):
    root = new_workspace(tmp_path, cache)
    record_path(root, cache).write_text("{not json")
    with pytest.raises(WorkspaceError, match="unreadable"):
        find_workspace(root / "kernels", cache)
