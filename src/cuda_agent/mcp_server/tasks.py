"""What ``open_task`` may name: a task file, a dataset row, or a KernelBench problem.

* ``path/to/model.py``: a KernelBench-format file.
* ``tasks.parquet#17`` or ``tasks.parquet:17`` (JSONL too): one row of a dataset.
* ``1/19`` or ``level1/19``: problem 19 of level 1 of the server's ``--kernelbench`` checkout.

Relative paths are the server's, not the client's. A task is the trusted reference the judge
runs outside the candidate's sandbox, so nothing a client or a candidate can write is accepted as
one: task paths inside the session root (the clients' workspaces) or the judge's cache (its
builds and run directories) are refused. Where the server names the folders tasks may come from
(``allowed``; an HTTP server, which anyone who reaches its port may call, names none unless told),
a task file anywhere else is refused too: opening one runs its code as the server's user.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..agent.tools.base import ToolError
from ..task import Task, load_task

KERNELBENCH_SPEC = re.compile(r"(?:level)?(\d+)/(\d+)")
DATASET_ROW = re.compile(r"(.+\.(?:jsonl|parquet))#(\d+)")


def resolve_task(spec: str, *, untrusted: list[Path], kernelbench: Path | None,
                 allowed: list[Path] | None = None) -> Task:
    """The one task ``spec`` names; ToolError (saying what to give instead) when it names none.
    ``allowed``: the folders task files may come from (None: any the server can read)."""
    spec = spec.strip()
    if not spec:
        raise ToolError("task is empty; give a task file (model.py), a dataset row (tasks.parquet#17) "
                        "or a KernelBench problem (1/19)")
    problem = KERNELBENCH_SPEC.fullmatch(spec)
    if problem and not Path(spec).exists():
        return _kernelbench_task(int(problem.group(1)), int(problem.group(2)), kernelbench)
    spec = DATASET_ROW.sub(r"\1:\2", spec)  # the loaders' own row selector
    file, row = re.fullmatch(r"(.+?)(:\d+)?", spec).groups()
    path = Path(file).expanduser().resolve()  # through links too: a link out of the root may point in
    for place in untrusted:
        if path.is_relative_to(place.resolve()):
            raise ToolError(f"{spec} is inside {place}, where clients' or candidates' files are written; a "
                            "task must come from elsewhere (the judge trusts a task's code)")
    if allowed is not None and not any(path.is_relative_to(place.resolve()) for place in allowed):
        where = ", ".join(str(p) for p in allowed) or "nowhere: this server takes KernelBench problems only"
        raise ToolError(f"{spec} is not in a folder this server takes task files from ({where}); the server "
                        "runs a task's code as its own user, so its operator names those folders "
                        "(cuda-agent mcp --tasks-from DIR)")
    return load_task(f"{path}{row or ''}")  # absolute, so an error says where the server looked


def _kernelbench_task(level: int, problem_id: int, kernelbench: Path | None) -> Task:
    from ..bench.kernelbench import discover

    if kernelbench is None:
        raise ToolError(f"{level}/{problem_id} names a KernelBench problem, but this server has no "
                        "KernelBench checkout: start it with --kernelbench DIR, or give a task file")
    found = discover(kernelbench, [level], {problem_id})
    return found[level][0].task()
