"""The demo's tasks and its scripted expert.

Every task takes the largest value of each row by sorting a copy of the row (``torch.sort``),
with its own shape. Two correct solutions exist for all of them, for each backend: a one-pass
maximum (on the GPU, one block per row with a shared-memory reduction), tens of times faster than
eager and torch.compile on the CPU (reward 3), and an insertion sort that copies the reference's
approach, tens of times slower (reward 1). The factors are far beyond the CPU
judge's timing noise, so each solution's reward does not depend on the run.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...llm.messages import Message, ToolCall
from ...task import Task, task_from_source

DATA = Path(__file__).resolve().parent.parent / "demo_data"
SHAPES = ((64, 1024), (96, 768), (128, 512))
KINDS = ("fast", "slow")
KERNEL = {"cpu": "kernels/row_max.cpp", "cuda": "kernels/row_max.cu"}


def files_of(backend: str) -> tuple[str, ...]:
    return (KERNEL[backend], "kernels/row_max_binding.cpp", "model_new.py")


def tasks() -> list[Task]:
    template = (DATA / "task.py.in").read_text()
    return [task_from_source(template.replace("{rows}", str(r)).replace("{cols}", str(c)), f"row_max_{r}x{c}",
                             f"demo:row_max_{r}x{c}") for r, c in SHAPES]


def solution_files(kind: str, backend: str = "cpu") -> dict[str, str]:
    """The solution's files: its own kernel (and binding, where it needs one of its own), and the
    model_new.py and binding the solutions share."""
    shared, own = DATA / "solutions", DATA / "solutions" / backend / kind
    binding = own / "kernels" / "row_max_binding.cpp"
    kernel, binding_rel, model = files_of(backend)
    return {kernel: (own / kernel).read_text(),
            binding_rel: (binding if binding.is_file() else shared / "row_max_binding.cpp").read_text(),
            model: (shared / "model_new.py").read_text()}


def _call(index: int, name: str, arguments: dict) -> ToolCall:
    return ToolCall(f"call_{index}", name, json.dumps(arguments, ensure_ascii=False))


def expert_replies(kind: str, backend: str = "cpu") -> list[Message]:
    """What the expert says, turn by turn: read the starter, write the files and profile them, then finish.
    ``broken`` writes a kernel that does not compile; ``looping`` reads one file over and over."""
    if kind == "looping":
        return [Message("assistant", "", [_call(0, "read", {"path": "model.py"})]) for _ in range(3)] + \
               [Message("assistant", "", [_call(0, "finish", {})])]
    files = solution_files("fast" if kind == "broken" else kind, backend)
    if kind == "broken":  # a statement without its semicolon: a compile error
        files[KERNEL[backend]] = files[KERNEL[backend]].replace("y[r] = m;", "y[r] = m").replace(
            "y[blockIdx.x] = best[0];", "y[blockIdx.x] = best[0]")
    # The workspace's model_new.py is a starter file: the write tool wants it read before it is replaced.
    calls = [_call(0, "read", {"path": "model_new.py"})]
    calls += [_call(len(calls) + i, "write", {"path": path, "content": files[path]})
              for i, path in enumerate(files_of(backend))]
    calls.append(_call(len(calls), "profile", {}))
    return [Message("assistant", "", calls), Message("assistant", "", [_call(0, "finish", {})])]
