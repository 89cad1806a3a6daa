"""RL rows from tasks, in the layout of verl's ``RLHFDataset`` (also read by TRL's trainers).

Each row has ``data_source``, ``agent_name`` (which agent loop runs it), ``prompt`` (a chat),
``ability``, ``reward_model`` ({style: rule, ground_truth: the task's hash}) and ``extra_info``
({index, task_id, task_sha256, ref_arch_src, backend, response_format, tools_kwargs}); the reward
function and the agent loop rebuild the task from ``ref_arch_src``.

Two kinds of row:

* **single-turn** (the warm-up): the prompt asks for the whole solution in one reply. The
  response format is ``files`` (each file in a code block after a line naming its path; the
  system prompt is SKILL.md plus that format) or ``tool_calls`` (the agent's own opening request,
  tools described in the text protocol, whose first reply writes the files with ``write`` calls:
  what a model trained on agent trajectories does).
* **agentic**: ``agent_name: cuda_agent``; the agent loop opens a workspace per trajectory and
  runs the tools. The prompt is the agent's opening request, for length filtering and logging;
  the loop rebuilds it from the task on the machine that runs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from ..llm.text_protocol import to_text_messages
from ..llm.messages import Message
from ..agent.prompt import opening_messages
from ..agent.tools import default_tools
from ..device import DeviceInfo
from ..errors import CudaAgentError
from ..task import Task, load_tasks, task_from_source
from ..workspace import render_skill

AGENT_NAME = "cuda_agent"
SINGLE_TURN_AGENT = "single_turn_agent"
ABILITY = "cuda-kernels"
RESPONSE_FORMATS = ("files", "tool_calls")
MODES = ("single_turn", "agentic")

FILES_FORMAT = """\
# Answering in one reply

There are no tools in this conversation: answer with the whole solution in one reply. Write
every file of the solution (model_new.py and each file under kernels/) as a line holding its
path, then a code block with its full content, for example:

kernels/NAME_binding.cpp
```cpp
...
```

Only these files are taken from the reply; the judge builds, verifies and times them as SKILL.md
describes.
"""


class DatasetError(CudaAgentError):
    """A dataset cannot be built or read."""


def tool_schemas() -> list[dict[str, Any]]:
    return [tool.schema() for tool in default_tools()]


def plain(messages: Iterable[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def single_turn_prompt(task: Task, backend: str, device: DeviceInfo | None = None,
                       response_format: str = "files") -> list[dict[str, str]]:
    skill = render_skill(backend, device, task.name)
    if response_format == "tool_calls":
        return plain(to_text_messages(opening_messages(task, backend, skill), tool_schemas()))
    if response_format != "files":
        raise DatasetError(f"response format must be one of {', '.join(RESPONSE_FORMATS)}, not {response_format!r}")
    target = "CUDA kernels" if backend == "cuda" else "C++ kernels (the cpu backend)"
    user = (f"Optimise the task `{task.name}` with {target}. Its reference, `model.py`, is:\n\n"
            f"```python\n{task.source.rstrip()}\n```\n\n"
            "Reply with the whole solution: model_new.py and the files under kernels/, each after a line "
            "naming its path.")
    return [{"role": "system", "content": skill.rstrip() + "\n\n" + FILES_FORMAT}, {"role": "user", "content": user}]


def agentic_prompt(task: Task, backend: str, device: DeviceInfo | None = None) -> list[dict[str, str]]:
    return plain(opening_messages(task, backend, render_skill(backend, device, task.name)))


def rl_row(task: Task, index: int, *, mode: str, backend: str, data_source: str,
           response_format: str = "files", device: DeviceInfo | None = None) -> dict[str, Any]:
    if mode not in MODES:
        raise DatasetError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    agentic = mode == "agentic"
    prompt = agentic_prompt(task, backend, device) if agentic else single_turn_prompt(task, backend, device,
                                                                                      response_format)
    return {
        "data_source": data_source,
        "agent_name": AGENT_NAME if agentic else SINGLE_TURN_AGENT,
        "prompt": prompt,
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": task.sha256},
        "extra_info": {
            "index": index, "task_id": task.name, "task_sha256": task.sha256, "ref_arch_src": task.source,
            "backend": backend, "response_format": "tool_calls" if agentic else response_format,
            "tools_kwargs": {AGENT_NAME: {"create_kwargs": {"task_id": task.name, "backend": backend}}},
        },
    }


def rl_rows(tasks: list[Task], *, mode: str, backend: str, data_source: str = "cuda_agent/tasks",
            response_format: str = "files", device: DeviceInfo | None = None) -> list[dict[str, Any]]:
    if not tasks:
        raise DatasetError("no tasks to build rows from: give a task file, a folder of them or a dataset")
    return [rl_row(t, i, mode=mode, backend=backend, data_source=data_source, response_format=response_format,
                   device=device) for i, t in enumerate(tasks)]


def task_of_row(extra_info: dict[str, Any] | None) -> Task:
    """The task a row (or verl's ``extra_info``) stands for."""
    info = extra_info or {}
    source = info.get("ref_arch_src")
    if not isinstance(source, str):
        raise DatasetError("the row's extra_info has no ref_arch_src (the task's source); build rows with "
                           "`cuda-agent train data`")
    return task_from_source(source, str(info.get("task_id") or "task"), f"row:{info.get('index', '?')}")


def load_task_set(spec: str | Path) -> list[Task]:
    """Tasks from a synthesis Parquet/JSONL, a KernelBench level folder or a folder of task files."""
    tasks = load_tasks(spec)
    if not tasks:
        raise DatasetError(f"{spec} holds no tasks")
    return tasks


def write_parquet(rows: list[dict[str, Any]], path: Path | str) -> Path:
    """Write rows to Parquet through a temporary file, so a crash never leaves half a file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not rows:
        raise DatasetError(f"no rows to write to {path}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(path.name + ".tmp")
    pq.write_table(pa.Table.from_pylist(rows), staging)
    staging.replace(path)
    return path


def read_parquet(path: Path | str) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"no dataset at {path}; build it first (cuda-agent train data / rft-data)")
    rows = pq.read_table(path).to_pylist()
    if not rows:
        raise DatasetError(f"the dataset {path} is empty; nothing to train on")
    return rows
