"""Where each problem's candidate solutions are, in the layouts researchers already have.

Accepted under the solutions folder, for problem ``{id}_{Name}.py`` of level ``L``:

- ``level{L}/{id}_{Name}/`` or ``level{L}/{id}/``: one solution, in our workspace layout
  (``model_new.py`` + ``kernels/``) or KernelBench's single-file layout (``model_new.py``);
- ``level{L}/{id}_{Name}/{NN}/best/``: the agent's output (``cuda-agent optimize``), one sample
  per episode; an episode without a correct solution has no ``best/`` and counts as failed;
- ``level_{L}_problem_{id}_sample_{S}_kernel.py`` at the top: KernelBench's generations layout.

Several samples of one problem are all judged; the report keeps the best (the paper's rule).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import BenchmarkError
from .kernelbench import Problem

GENERATION_FILE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
EPISODE_DIR = re.compile(r"^\d+$")
BEST_DIR = "best"


@dataclass(frozen=True)
class Candidate:
    problem: Problem
    sample: int | None   # None: the problem's only solution
    path: Path           # a solution folder or a single .py file

    @property
    def key(self) -> str:
        return f"{self.problem.key}#{'solution' if self.sample is None else f'sample{self.sample}'}"


def _episodes(folder: Path) -> list[Path] | None:
    """The episode folders of an agent run for one problem, or None if this is no agent output."""
    episodes = sorted((p for p in folder.iterdir() if p.is_dir() and EPISODE_DIR.match(p.name)),
                      key=lambda p: int(p.name))
    return episodes or None


def find_candidates(root: str | Path, problems: list[Problem]) -> tuple[dict[str, list[Candidate]], list[str]]:
    """Candidates per problem key (an empty list: no solution), and entries that match no problem."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise BenchmarkError(f"solutions folder {root} does not exist or is not a folder")
    by_key: dict[str, list[Candidate]] = {p.key: [] for p in problems}
    wanted = {(p.level, p.problem_id): p for p in problems}
    used: set[Path] = set()

    for problem in problems:
        level_dir = root / f"level{problem.level}"
        for folder in (level_dir / problem.stem, level_dir / str(problem.problem_id)):
            if not folder.is_dir():
                continue
            used.add(folder)
            episodes = _episodes(folder)
            if episodes is None:
                by_key[problem.key].append(Candidate(problem, None, folder))
            else:
                by_key[problem.key] += [Candidate(problem, int(e.name), e / BEST_DIR) for e in episodes]
            break

    for file in sorted(root.glob("level_*_problem_*_sample_*_kernel.py")):
        match = GENERATION_FILE.match(file.name)
        level, problem_id, sample = (int(g) for g in match.groups()) if match else (0, 0, 0)
        if (level, problem_id) in wanted:
            used.add(file)
            problem = wanted[(level, problem_id)]
            by_key[problem.key].append(Candidate(problem, sample, file))

    for candidates in by_key.values():
        candidates.sort(key=lambda c: -1 if c.sample is None else c.sample)
    return by_key, _unmatched(root, problems, used)


def _unmatched(root: Path, problems: list[Problem], used: set[Path]) -> list[str]:
    """Entries of the level folders that belong to no problem (a typo in a name, most likely);
    those of problems outside the selection are not reported."""
    selected: dict[int, set[int]] = {}
    for p in problems:
        selected.setdefault(p.level, set()).add(p.problem_id)
    found = []
    for level, ids in sorted(selected.items()):
        folder = root / f"level{level}"
        for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
            leading = re.match(r"^(\d+)(?:_|$)", entry.name)
            if entry not in used and not (leading and int(leading.group(1)) not in ids):
                found.append(str(entry.relative_to(root)))
    return found
