"""Problems of a KernelBench checkout that the user points at (never copied into this package).

A checkout holds one file per problem, ``KernelBench/level{N}/{id}_{Name}.py``. The path given
may be the checkout itself, its ``KernelBench/`` folder, or a folder holding ``level1/`` etc.
directly. File names (with ``.py``) are the keys of KernelBench's baseline timing files.

SOL-ExecBench problems are benchmarked the same way: a folder of problem folders (each with a
``definition.json``) is level 1; a folder of subsets named ``L1``, ``L2``, ... (SOL-ExecBench's
``data/benchmark/``) gives those levels; one problem folder is level 1 alone. A problem's id is
its place in its level, in natural order from 1, and its name ``{id}_{folder}.py``, so that its
solutions sit at ``level{N}/{id}_{folder}/`` as a KernelBench problem's do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .. import sol_execbench
from ..errors import BenchmarkError
from ..task import Task, load_task

PROBLEM_FILE = re.compile(r"^(\d+)_(.+)\.py$")
SOL_SUBSET = re.compile(r"^L(\d+)$")  # SOL-ExecBench's level subsets; the others (Quant, ...) as their own path
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


def sol_execbench_levels(path: str | Path) -> dict[int, list[Path]]:
    """SOL-ExecBench problem folders under ``path`` by level (see the module's docstring); empty
    where ``path`` is not such a set."""
    path = Path(path).expanduser()
    if not path.is_dir():
        return {}
    if sol_execbench.is_problem(path):
        return {1: [path]}
    subsets = {int(m.group(1)): folder for folder in path.iterdir()
               if folder.is_dir() and (m := SOL_SUBSET.match(folder.name))}
    levels = {n: problems for n, folder in sorted(subsets.items())
              if (problems := sol_execbench.problem_folders(folder))}
    if levels:
        return levels
    problems = sol_execbench.problem_folders(path)
    return {1: problems} if problems else {}


def check_root(path: str | Path) -> None:
    """Raise BenchmarkError, saying what to pass, unless ``path`` is a KernelBench checkout or a
    set of SOL-ExecBench problems."""
    if not sol_execbench_levels(path):
        levels_root(path)


def _kernelbench_level(root: Path, level: int) -> dict[int, Problem]:
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
    return by_id


def _sol_execbench_level(path: Path, found: dict[int, list[Path]], level: int) -> dict[int, Problem]:
    if level not in found:
        raise BenchmarkError(f"{path} holds SOL-ExecBench problems at level(s) {', '.join(map(str, found))}, "
                             f"not {level}: pass --levels {','.join(map(str, found))}")
    return {i: Problem(level, i, f"{i}_{folder.name}.py", folder) for i, folder in enumerate(found[level], 1)}


def discover(path: str | Path, levels: list[int],
             problem_ids: set[int] | dict[int | None, set[int]] | None = None) -> dict[int, list[Problem]]:
    """The problems of each requested level, by id; raises on a missing level or a clash of ids.

    ``path`` is a KernelBench checkout or a set of SOL-ExecBench problems. ``problem_ids`` selects
    ids in every level (a set) or per level (see ``parse_selection``).
    """
    sol = sol_execbench_levels(path)
    root = Path(path).expanduser() if sol else levels_root(path)
    selection = problem_ids if isinstance(problem_ids, dict) or problem_ids is None else {None: problem_ids}
    found: dict[int, list[Problem]] = {}
    for level in levels:
        by_id = _sol_execbench_level(root, sol, level) if sol else _kernelbench_level(root, level)
        wanted = None if selection is None else selection.get(level, set()) | selection.get(None, set())
        if selection is not None and None not in selection and level not in selection:
            wanted = None  # a per-level selection that leaves this level out takes all of it
        chosen = [by_id[i] for i in sorted(by_id) if wanted is None or i in wanted]
        if wanted is not None and not chosen:
            raise BenchmarkError(f"level {level} has none of the problems asked for "
                                 f"(ids {min(by_id)}-{max(by_id)} exist)")
        found[level] = chosen
    return found
