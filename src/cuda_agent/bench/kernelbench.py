"""Problems of a KernelBench checkout that the user points at (never copied into this package).

A checkout holds one file per problem, ``KernelBench/level{N}/{id}_{Name}.py``. The path given
may be the checkout itself, its ``KernelBench/`` folder, or a folder holding ``level1/`` etc.
directly. File names (with ``.py``) are the keys of KernelBench's baseline timing files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import BenchmarkError
from ..task import Task, load_task

PROBLEM_FILE = re.compile(r"^(\d+)_(.+)\.py$")
# How many problems each level has in KernelBench (levels 1-3 are the paper's 100/100/50).
LEVEL_SIZES = {1: 100, 2: 100, 3: 50}


@dataclass(frozen=True)
class Problem:
    level: int
    problem_id: int
    name: str   # the file name, e.g. "19_ReLU.py"
    path: Path

    @property
    def stem(self) -> str:
        return self.name[:-3]

    @property
    def key(self) -> str:
        return f"level{self.level}/{self.name}"

    def task(self) -> Task:
        return load_task(self.path)


def levels_root(path: str | Path) -> Path:
    """The folder that holds ``level1/``, ``level2/``...: found from a checkout or its KernelBench/."""
    path = Path(path).expanduser()
    if not path.exists():
        raise BenchmarkError(f"KernelBench path {path} does not exist. Clone "
                             "https://github.com/ScalingIntelligence/KernelBench and pass the checkout's folder.")
    if not path.is_dir():
        raise BenchmarkError(f"KernelBench path {path} is not a folder: pass the KernelBench checkout.")
    for candidate in (path / "KernelBench", path):
        if any((candidate / f"level{n}").is_dir() for n in LEVEL_SIZES):
            return candidate
    raise BenchmarkError(f"{path} does not look like a KernelBench checkout: it has neither "
                         "KernelBench/level1/ nor level1/. Pass the folder you cloned KernelBench into.")


def parse_levels(text: str) -> list[int]:
    """``"1,2,3"`` -> [1, 2, 3]."""
    try:
        levels = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise BenchmarkError(f"--levels takes comma-separated level numbers such as 1,2,3, not {text!r}") from None
    if not levels or any(n < 1 for n in levels):
        raise BenchmarkError(f"--levels takes level numbers from 1, such as 1,2,3, not {text!r}")
    return levels


def parse_ids(text: str | None) -> set[int] | None:
    """``"1-5,19"`` -> {1, 2, 3, 4, 5, 19}; None or empty means every problem."""
    if not text:
        return None
    ids: set[int] = set()
    try:
        for part in filter(None, (p.strip() for p in text.split(","))):
            low, _, high = part.partition("-")
            ids.update(range(int(low), int(high or low) + 1))
    except ValueError:
        raise BenchmarkError(f"--problems takes ids and ranges such as 1-10,19, not {text!r}") from None
    return ids


def parse_selection(specs: list[str] | None) -> dict[int | None, set[int]] | None:
    """``["1:9,40", "2:12-14"]`` -> {1: {9, 40}, 2: {12, 13, 14}}; an entry without ``LEVEL:``
    applies to every level (key None). None or empty means every problem of every level."""
    if not specs:
        return None
    selection: dict[int | None, set[int]] = {}
    for spec in specs:
        level_text, sep, ids_text = spec.partition(":")
        level = None
        if sep:
            try:
                level = int(level_text)
            except ValueError:
                raise BenchmarkError(f"--problems takes LEVEL:IDS or IDS, such as 2:1-10,19, not {spec!r}") from None
        selection.setdefault(level, set()).update(parse_ids(ids_text if sep else spec) or set())
    return selection


def discover(path: str | Path, levels: list[int],
             problem_ids: set[int] | dict[int | None, set[int]] | None = None) -> dict[int, list[Problem]]:
    """The problems of each requested level, by id; raises on a missing level or a clash of ids.

    ``problem_ids`` selects ids in every level (a set) or per level (see ``parse_selection``).
    """
    root = levels_root(path)
    selection = problem_ids if isinstance(problem_ids, dict) or problem_ids is None else {None: problem_ids}
    found: dict[int, list[Problem]] = {}
    for level in levels:
        folder = root / f"level{level}"
        if not folder.is_dir():
            raise BenchmarkError(f"{root} has no level{level}/ folder; levels present: "
                                 + (", ".join(sorted(p.name for p in root.glob("level*") if p.is_dir())) or "none"))
        by_id: dict[int, Problem] = {}
        for file in sorted(folder.glob("*.py")):
            match = PROBLEM_FILE.match(file.name)
            if not match:
                continue  # helpers and __init__.py are not problems
            problem = Problem(level, int(match.group(1)), file.name, file)
            if problem.problem_id in by_id:
                raise BenchmarkError(f"{folder} has two problems with id {problem.problem_id}: "
                                     f"{by_id[problem.problem_id].name} and {file.name}")
            by_id[problem.problem_id] = problem
        if not by_id:
            raise BenchmarkError(f"{folder} holds no problem files named like 1_Name.py")
        wanted = None if selection is None else selection.get(level, set()) | selection.get(None, set())
        if selection is not None and None not in selection and level not in selection:
            wanted = None  # a per-level selection that leaves this level out takes all of it
        chosen = [by_id[i] for i in sorted(by_id) if wanted is None or i in wanted]
        if wanted is not None and not chosen:
            raise BenchmarkError(f"level {level} has none of the problems asked for "
                                 f"(ids {min(by_id)}-{max(by_id)} exist)")
        found[level] = chosen
    return found
