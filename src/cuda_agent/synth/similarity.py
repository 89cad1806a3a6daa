"""How close a synthesized task is to KernelBench, and to the tasks already in the dataset.

**Decontamination.** A task whose ``Model`` class is structurally too close to a KernelBench
problem's would leak the benchmark into training, so every task is compared with every KernelBench
program and dropped when its highest similarity exceeds 0.9. The measure is the Python AST
similarity used for that purpose by the CUDA Agent paper:

* The *significant subtrees* of a tree are its ``Import``, ``FunctionDef``, ``If``, ``ClassDef``,
  ``While``, ``For``, ``comprehension`` and ``Return`` nodes (each with everything under it).
* Two nodes *match* with a count: 0 when their types differ or they have different numbers of
  children, 1 when they are of one type and both leaves, otherwise 1 plus the best one-to-one
  pairing of their children (an optimal assignment maximising the summed child counts).
  Identifiers, attribute names and constants are not nodes, so renaming changes nothing.
* Two lists of significant subtrees are paired by an optimal assignment on those counts. A pair
  scores its count times the mean of its two type weights (Import 0.3, FunctionDef 1.2, If 0.5,
  any other 1.0); the total is the node count times the type weight summed over every subtree of
  both lists; the similarity is twice the paired score over that total, in [0, 1].

Only the top-level ``class Model`` of each program is compared (the whole module where there is
none), so sizes, ``get_inputs`` and helper classes play no part.

The count of a pair depends only on the shapes of the two subtrees, so every node is reduced to a
*shape id* (the same id for the same type with the same sequence of child shapes). That makes the
exact shortcuts cheap: a pair of one shape counts its node count (the most any pair can), a task
whose ``Model`` has a problem's shape scores 1.0 at once, and counts are remembered per pair of
shapes across all the problems a task is compared with (KernelBench's problems share most of
theirs), so one task against all of levels 1-3 takes milliseconds.

Docstrings are statements to this measure, so a copy of a problem without its docstrings differs
in the child counts that decide whether its class and methods match at all, and scores far lower.
``strip_docstrings`` drops bare string statements from both sides before comparing; it is off by
default, which is the paper's measure.

Shapes are built and compared on explicit stacks, so a deeply nested program neither hits Python's
recursion limit nor gets a made-up score; one too deep for Python's own parser, or one that does
not parse, raises ``SimilarityError``.

**Deduplication.** Two tasks are the same program when their sources are equal after parsing,
dropping docstrings and other bare string statements, and printing back (``canonical_source``):
comments and formatting do not count, but identifiers and constants do, because the same ops at
other sizes make a different task.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from ..errors import CudaAgentError

SIGNIFICANT = (ast.Import, ast.FunctionDef, ast.If, ast.ClassDef, ast.While, ast.For,
               ast.comprehension, ast.Return)
# Type weights in tenths, so that scores are sums of integers and an exact copy scores exactly 1.0.
_WEIGHTS = {"Import": 3, "FunctionDef": 12, "If": 5}
_DEFAULT_WEIGHT = 10


class SimilarityError(CudaAgentError):
    """A program could not be parsed or compared, so no similarity (and no verdict) exists for it."""


# --------------------------------------------------------------------------------------------
# Shapes: every node reduced to an id that is equal exactly when the structure is equal.


class _Shapes:
    """An interning table of node shapes: ``types[i]``, ``children[i]`` and ``sizes[i]`` describe
    shape ``i``; ``ids`` maps ``(type name, child shape ids)`` to its id.

    ``fork`` gives a table that starts with this one's shapes and adds its own without touching
    this one, so a task's shapes go on top of the KernelBench ones and are dropped with the fork.
    """

    __slots__ = ("ids", "types", "children", "sizes", "_overlay")

    def __init__(self) -> None:
        self.ids: dict[tuple, int] = {}
        self.types: list[str] = []
        self.children: list[tuple[int, ...]] = []
        self.sizes: list[int] = []
        self._overlay: dict[tuple, int] | None = None

    def fork(self) -> "_Shapes":
        other = _Shapes()
        other.ids = self.ids            # read only from the fork; new shapes go to its overlay
        other._overlay = {}
        other.types = list(self.types)
        other.children = list(self.children)
        other.sizes = list(self.sizes)
        return other

    def _intern(self, key: tuple[str, tuple[int, ...]]) -> int:
        found = self.ids.get(key)
        if found is None and self._overlay is not None:
            found = self._overlay.get(key)
        if found is not None:
            return found
        new = len(self.types)
        (self._overlay if self._overlay is not None else self.ids)[key] = new
        self.types.append(key[0])
        self.children.append(key[1])
        self.sizes.append(1 + sum(self.sizes[c] for c in key[1]))
        return new

    def add(self, root: ast.AST) -> dict[int, int]:
        """Intern every node under ``root``; returns ``id(node) -> shape id`` for each of them.

        Post-order on an explicit stack. (CPython shares one instance of ``Load``, ``Add`` and
        the like between nodes; they are leaves, so the shared entry is right for all of them.)
        """
        shape_of: dict[int, int] = {}
        stack: list[tuple[ast.AST, bool]] = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if id(node) in shape_of:
                continue
            kids = list(ast.iter_child_nodes(node))
            if expanded or not kids:
                key = (type(node).__name__, tuple(shape_of[id(k)] for k in kids))
                shape_of[id(node)] = self._intern(key)
            else:
                stack.append((node, True))
                stack.extend((k, False) for k in reversed(kids) if id(k) not in shape_of)
        return shape_of


@dataclass(frozen=True)
class _Subtrees:
    """A program's significant subtrees as shape ids, grouped by node type."""

    by_type: dict[str, tuple[int, ...]]   # type name -> shape ids, largest first
    total: int                            # sum of node count x weight (in tenths) over all of them
    root: int                             # shape id of the compared node (Model, or the module)


def _weight(type_name: str) -> int:
    return _WEIGHTS.get(type_name, _DEFAULT_WEIGHT)


def _parse(source: str, what: str) -> ast.Module:
    try:
        return ast.parse(source)
    except (RecursionError, MemoryError):
        raise SimilarityError(f"{what} is nested too deeply for Python's parser, so it cannot be "
                              "compared") from None
    except (SyntaxError, ValueError) as exc:
        raise SimilarityError(f"{what} does not parse as Python ({type(exc).__name__}: {exc}), "
                              "so it cannot be compared") from None


def _compared_node(tree: ast.Module) -> ast.AST:
    """The top-level ``class Model`` (the last one, as Python would bind it), else the module."""
    models = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"]
    return models[-1] if models else tree


def _subtrees(source: str, shapes: _Shapes, what: str, strip_docstrings: bool) -> _Subtrees:
    tree = _parse(source, what)
    node = _compared_node(_drop_strings(tree) if strip_docstrings else tree)
    shape_of = shapes.add(node)
    by_type: dict[str, list[int]] = {}
    total = 0
    for sub in ast.walk(node):
        if isinstance(sub, SIGNIFICANT):
            shape = shape_of[id(sub)]
            name = type(sub).__name__
            by_type.setdefault(name, []).append(shape)
            total += shapes.sizes[shape] * _weight(name)
    ordered = {name: tuple(sorted(ids, key=lambda s: -shapes.sizes[s])) for name, ids in by_type.items()}
    return _Subtrees(ordered, total, shape_of[id(node)])


# --------------------------------------------------------------------------------------------
# Matching.


def _best_pairing(counts: list[list[int]]) -> int:
    """The largest sum of a one-to-one pairing of rows with columns."""
    rows = len(counts)
    cols = len(counts[0]) if rows else 0
    if rows == 0 or cols == 0:
        return 0
    if rows == 1:
        return max(counts[0])
    if cols == 1:
        return max(row[0] for row in counts)
    if rows == 2 and cols == 2:
        return max(counts[0][0] + counts[1][1], counts[0][1] + counts[1][0])
    matrix = np.asarray(counts, dtype=np.int64)
    r, c = linear_sum_assignment(matrix, maximize=True)
    return int(matrix[r, c].sum())


class _Matcher:
    """Match counts between shapes of one table, remembered per pair of shapes."""

    __slots__ = ("types", "children", "sizes", "memo")

    def __init__(self, shapes: _Shapes) -> None:
        self.types = shapes.types
        self.children = shapes.children
        self.sizes = shapes.sizes
        self.memo: dict[tuple[int, int], int] = {}

    def _quick(self, a: int, b: int) -> int | None:
        """The count when it follows without looking at children, else None."""
        if a == b:
            return self.sizes[a]    # one shape: every node pairs with its twin, the most possible
        if self.types[a] != self.types[b]:
            return 0
        ca, cb = self.children[a], self.children[b]
        if len(ca) != len(cb):
            return 0
        if not ca:
            return 1
        return None

    def count(self, a: int, b: int) -> int:
        quick = self._quick(a, b)
        if quick is not None:
            return quick
        memo = self.memo
        found = memo.get((a, b))
        if found is not None:
            return found
        children, quick_of = self.children, self._quick
        stack = [(a, b)]
        while stack:
            x, y = stack[-1]
            if (x, y) in memo:
                stack.pop()
                continue
            cx, cy = children[x], children[y]
            waiting = False
            for c in cx:
                for d in cy:
                    if (c, d) not in memo and quick_of(c, d) is None:
                        stack.append((c, d))
                        waiting = True
            if waiting:
                continue
            rows = []
            for c in cx:
                row = []
                for d in cy:
                    q = quick_of(c, d)
                    row.append(memo[(c, d)] if q is None else q)
                rows.append(row)
            memo[(x, y)] = 1 + _best_pairing(rows)
            stack.pop()
        return memo[(a, b)]


def _score(m: _Matcher, left: _Subtrees, right: _Subtrees) -> int:
    """Twice the paired score, in tenths; the similarity is this over ``left.total + right.total``.

    Pairs of different types count 0, so the assignment splits into one per type, and within a
    type every pair carries that type's weight.
    """
    if left.root == right.root:
        return left.total + right.total
    doubled = 0
    for name, ours in left.by_type.items():
        theirs = right.by_type.get(name)
        if not theirs:
            continue
        counts = [[m.count(a, b) for b in theirs] for a in ours]
        doubled += _best_pairing(counts) * 2 * _weight(name)
    return doubled


def _ratio(left: _Subtrees, right: _Subtrees, doubled: int) -> float:
    if not left.by_type and not right.by_type:
        # Neither side has any significant subtree: the measure sees nothing to tell them apart,
        # and calling them identical errs on the side of dropping a task.
        return 1.0
    if not left.by_type or not right.by_type:
        return 0.0
    return doubled / (left.total + right.total)


def ast_similarity(source_a: str, source_b: str, *, strip_docstrings: bool = False) -> float:
    """The AST similarity of the ``Model`` classes of two programs (whole modules where a program
    has none), in [0, 1]; symmetric, and 1.0 for the same structure under other names or sizes.

    When neither compared node has a significant subtree the result is 1.0 (nothing to tell them
    apart); when only one has none it is 0.0. Raises ``SimilarityError`` if a source does not parse.

    A docstring is a statement to this measure, so by default a copy without its docstrings
    differs in the child counts that decide whether a class or function matches at all.
    ``strip_docstrings`` drops bare string statements from both sides first (see
    ``_drop_strings``), which the paper's measure does not.
    """
    shapes = _Shapes()
    left = _subtrees(source_a, shapes, "the first program", strip_docstrings)
    right = _subtrees(source_b, shapes, "the second program", strip_docstrings)
    return _ratio(left, right, _score(_Matcher(shapes), left, right))


# --------------------------------------------------------------------------------------------
# KernelBench.


class KernelBenchIndex:
    """KernelBench's programs, ready to be compared with task after task.

    Holds only ``(key, source)`` pairs as state: the parsed shapes are built on first use and left
    out of pickling, so an index sent to a worker process costs its sources in transfer and one
    parse of every problem (tens of milliseconds) on first use there. ``strip_docstrings`` is
    as for ``ast_similarity``, applied to the problems and to every task.
    """

    def __init__(self, problems: Iterable[tuple[str, str]], *, strip_docstrings: bool = False) -> None:
        self.problems: tuple[tuple[str, str], ...] = tuple(problems)
        self.strip_docstrings = strip_docstrings
        self._prepared: tuple[_Shapes, list[_Subtrees]] | None = None

    @classmethod
    def from_checkout(cls, path: str | Path, levels: Sequence[int] = (1, 2, 3), *,
                      strip_docstrings: bool = False) -> "KernelBenchIndex":
        """The problems of ``levels`` in a KernelBench checkout; raises ``BenchmarkError`` when the
        path is not one (see ``cuda_agent.bench.kernelbench.discover``)."""
        from ..bench.kernelbench import discover

        found = discover(path, list(levels))
        problems = [(p.key, p.path.read_text(encoding="utf-8"))
                    for level in sorted(found) for p in found[level]]
        return cls(problems, strip_docstrings=strip_docstrings)

    def __len__(self) -> int:
        return len(self.problems)

    def __getstate__(self) -> dict:
        return {"problems": self.problems, "strip_docstrings": self.strip_docstrings}

    def __setstate__(self, state: dict) -> None:
        self.problems = state["problems"]
        self.strip_docstrings = state["strip_docstrings"]
        self._prepared = None

    def _prepare(self) -> tuple[_Shapes, list[_Subtrees]]:
        if self._prepared is None:
            shapes = _Shapes()
            parsed = [_subtrees(source, shapes, f"KernelBench problem {key}", self.strip_docstrings)
                      for key, source in self.problems]
            self._prepared = (shapes, parsed)
        return self._prepared

    def most_similar(self, source: str) -> tuple[float, str]:
        """The highest similarity of ``source`` to any problem, and that problem's key (the first
        in level and id order on a tie). Raises ``SimilarityError`` if ``source`` does not parse
        or the index is empty."""
        if not self.problems:
            raise SimilarityError("the KernelBench index holds no problems to compare with")
        base, parsed = self._prepare()
        shapes = base.fork()    # the task's shapes go on top of the problems', and go with it
        task = _subtrees(source, shapes, "the task", self.strip_docstrings)
        matcher = _Matcher(shapes)  # one memo for all problems: they share most of their shapes
        best, best_at = -1.0, -1
        for i, problem in enumerate(parsed):
            score = _ratio(task, problem, _score(matcher, task, problem))
            if score > best:
                best, best_at = score, i
                if score == 1.0:
                    break
        return best, self.problems[best_at][0]


# --------------------------------------------------------------------------------------------
# Deduplication.


def _drop_strings(tree: ast.AST) -> ast.AST:
    """Drop bare string statements (docstrings, and strings used as comments), which do nothing;
    a block left empty gets a ``pass``. Works in place, without recursion."""
    for node in list(ast.walk(tree)):
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if not isinstance(stmts, list) or not stmts or not isinstance(stmts[0], ast.stmt):
                continue
            kept = [s for s in stmts if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                             and isinstance(s.value.value, str))]
            if not kept and field != "orelse" and not isinstance(node, ast.Module):
                kept = [ast.Pass()]     # a block cannot be empty
            setattr(node, field, kept)
    return tree


def canonical_source(source: str) -> str:
    """The program printed back from its AST without docstrings: equal for two sources that
    differ only in comments, docstrings or formatting, different when a name or constant differs.
    Raises ``SimilarityError`` if it does not parse or is too deeply nested to print."""
    tree = _parse(source, "the program")
    try:
        return ast.unparse(_drop_strings(tree))
    except RecursionError:
        raise SimilarityError("the program is too deeply nested to normalise") from None


def program_hash(source: str) -> str:
    """sha256 (hex) of ``canonical_source``: the identity of a program within a dataset."""
    return hashlib.sha256(canonical_source(source).encode("utf-8")).hexdigest()


class DedupIndex:
    """The programs already in a dataset, by ``program_hash``, each with the id it was first
    added under. Built from ``(source, task_id)`` pairs so that a resumed run knows its tasks."""

    def __init__(self, entries: Iterable[tuple[str, str]] = ()) -> None:
        self._ids: dict[str, str] = {}
        for source, task_id in entries:
            self.add(source, task_id)

    def __len__(self) -> int:
        return len(self._ids)

    def first_seen(self, source: str) -> str | None:
        """The id of an earlier task with the same program, or None if it is new."""
        return self._ids.get(program_hash(source))

    def add(self, source: str, task_id: str) -> str:
        """Record ``source`` under ``task_id`` (an earlier id for the same program is kept);
        returns its hash."""
        digest = program_hash(source)
        self._ids.setdefault(digest, task_id)
        return digest

    def forget(self, source: str) -> None:
        """Drop ``source``: its checks never finished, so it is not yet a task of the dataset."""
        self._ids.pop(program_hash(source), None)
