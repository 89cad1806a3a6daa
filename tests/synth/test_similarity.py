"""Decontamination against KernelBench and deduplication within a dataset.

The similarity is checked three ways: exact values worked out by hand for tiny programs, the
properties decontamination relies on (names and sizes ignored, structure not), and agreement with
a plain transcription of the measure's definition, which has none of the shortcuts (shape ids,
shared memo, identical-shape counts) that make the real one fast.
"""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from cuda_agent.errors import BenchmarkError
from cuda_agent.synth.similarity import (DedupIndex, KernelBenchIndex, SimilarityError, ast_similarity,
                                         canonical_source, program_hash)

KERNELBENCH = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench"
PROBLEMS = sorted((KERNELBENCH / "KernelBench").glob("level*/*.py"))

GEMM_RELU = (KERNELBENCH / "KernelBench" / "level2" / "3_Gemm_BiasAdd_ReLU.py").read_text()

# level2/3_Gemm_BiasAdd_ReLU with every name, size and the activation changed: the same structure.
GEMM_RELU_RENAMED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """A projection followed by a sigmoid."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out)

    def forward(self, inp: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.proj(inp))


rows = 64
d_in = 100
d_out = 7


def get_inputs():
    return [torch.randn(rows, d_in)]


def get_init_inputs():
    return [d_in, d_out]
'''

# Nothing like any fixture problem: a loop, a branch and a comprehension.
UNRELATED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """Cumulative sums of chunks, clamped where the running mean is large."""

    def __init__(self, chunks: int, limit: float):
        super().__init__()
        self.chunks = chunks
        self.limit = limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = [torch.cumsum(p, dim=-1) for p in x.chunk(self.chunks, dim=-1)]
        out = parts[0]
        for p in parts[1:]:
            if p.mean() > self.limit:
                p = p.clamp(max=self.limit)
            out = torch.cat([out, p], dim=-1)
        return out


def get_inputs():
    return [torch.randn(32, 256)]


def get_init_inputs():
    return [4, 1.0]
'''


# --------------------------------------------------------------------------------------------
# The definition, transcribed without shortcuts.

_SIGNIFICANT = (ast.Import, ast.FunctionDef, ast.If, ast.ClassDef, ast.While, ast.For, ast.comprehension,
                ast.Return)
_WEIGHT = {ast.Import: 0.3, ast.FunctionDef: 1.2, ast.If: 0.5}


def _reference_match(a: ast.AST, b: ast.AST) -> int:
    ca, cb = list(ast.iter_child_nodes(a)), list(ast.iter_child_nodes(b))
    if type(a) is type(b) and not ca and not cb:
        return 1
    if type(a) is not type(b) or len(ca) != len(cb):
        return 0
    if len(ca) <= 1:
        return 1 + sum(_reference_match(x, y) for x in ca for y in cb)
    counts = np.array([[_reference_match(x, y) for y in cb] for x in ca])
    rows, cols = linear_sum_assignment(counts, maximize=True)
    return 1 + int(counts[rows, cols].sum())


def _reference_similarity(source_a: str, source_b: str) -> float:
    def compared(source: str) -> ast.AST:
        tree = ast.parse(source)
        models = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"]
        return models[-1] if models else tree

    left = [n for n in ast.walk(compared(source_a)) if isinstance(n, _SIGNIFICANT)]
    right = [n for n in ast.walk(compared(source_b)) if isinstance(n, _SIGNIFICANT)]
    weight = lambda n: _WEIGHT.get(type(n), 1.0)  # noqa: E731
    counts = np.array([[_reference_match(x, y) for y in right] for x in left])
    rows, cols = linear_sum_assignment(counts, maximize=True)
    matched = sum(counts[i, j] * (weight(left[i]) + weight(right[j])) / 2 for i, j in zip(rows, cols))
    total = sum(len(list(ast.walk(n))) * weight(n) for n in left + right)
    return 2 * matched / total


# --------------------------------------------------------------------------------------------
# The measure.


def test_hand_computed_value():
    """ClassDefs with 1 and 2 children count 0; ``f`` (5 nodes, weight 1.2) and its Return
    (2 nodes) pair fully: 2 x (5 x 1.2 + 2) / (14 + 27) = 16/41."""
    one = "class Model:\n    def f(self):\n        return 1\n"
    two = one + "    def g(self):\n        return 2\n"
    assert ast_similarity(one, two) == pytest.approx(16 / 41, abs=1e-12)


def test_whole_modules_without_model_and_import_weight():
    """No Model: the modules are compared. Two Imports against one, weight 0.3 each: 2/3."""
    assert ast_similarity("import os\nimport sys\n", "import math\n") == pytest.approx(2 / 3, abs=1e-12)


def test_nothing_significant():
    """With no significant subtree on either side the measure cannot tell them apart (1.0); with
    one side empty nothing can pair (0.0)."""
    assert ast_similarity("x = 1\n", "y = [2, 3]\n") == 1.0
    assert ast_similarity("x = 1\n", "import os\n") == 0.0


def test_identical_model_scores_one():
    assert ast_similarity(GEMM_RELU, GEMM_RELU) == 1.0


def test_names_sizes_and_ops_do_not_count():
    assert GEMM_RELU_RENAMED != GEMM_RELU
    assert ast_similarity(GEMM_RELU, GEMM_RELU_RENAMED) == 1.0


def test_only_the_model_class_is_compared():
    """Helpers outside Model (another class, module-level code) leave the score at 1.0."""
    extra = GEMM_RELU + "\n\nclass Helper:\n    def run(self):\n        for i in range(3):\n            pass\n"
    assert ast_similarity(GEMM_RELU, extra) == 1.0


def test_structurally_different_model_scores_clearly_lower():
    mlp = (KERNELBENCH / "KernelBench" / "level3" / "1_Tiny_MLP.py").read_text()
    softsign = (KERNELBENCH / "KernelBench" / "level1" / "2_Softsign.py").read_text()
    assert ast_similarity(mlp, softsign) < 0.5
    assert ast_similarity(GEMM_RELU, UNRELATED) < 0.5


def test_docstrings_count_unless_stripped():
    """A docstring is a class-body statement to the measure, so dropping it unpairs the class;
    ``strip_docstrings`` removes that difference."""
    bare = GEMM_RELU.replace('    """y = relu(x @ W^T + b) through nn.Linear. (No solution is provided for this problem.)"""\n', "")
    assert bare != GEMM_RELU
    assert ast_similarity(GEMM_RELU, bare) < 0.9
    assert ast_similarity(GEMM_RELU, bare, strip_docstrings=True) == 1.0


def test_symmetric():
    sources = [p.read_text() for p in PROBLEMS] + [UNRELATED, GEMM_RELU_RENAMED]
    for i, a in enumerate(sources):
        for b in sources[i + 1:]:
            assert ast_similarity(a, b) == pytest.approx(ast_similarity(b, a), abs=1e-12)


def test_agrees_with_the_definition():
    sources = [p.read_text() for p in PROBLEMS] + [UNRELATED, GEMM_RELU_RENAMED]
    sources.append(UNRELATED.replace("        return out\n", "        out = out * 2\n        return out\n"))
    sources.append(UNRELATED.replace("for p in parts[1:]", "for p in parts[1:] + parts[:1]"))
    for a in sources:
        for b in sources:
            assert ast_similarity(a, b) == pytest.approx(_reference_similarity(a, b), abs=1e-12)


def test_deep_nesting_is_compared_without_recursion():
    """A 2,500-term sum nests 2,500 BinOps, past Python's recursion limit of 1,000 frames."""
    terms = " + ".join(["x"] * 2500)
    deep = f"class Model:\n    def forward(self, x):\n        return {terms}\n"
    other = deep.replace("return x + x", "return x * x", 1)   # changes the innermost BinOp
    score = ast_similarity(deep, other)
    assert 0.99 < score < 1.0


def test_unparseable_programs_raise():
    with pytest.raises(SimilarityError, match="does not parse"):
        ast_similarity(GEMM_RELU, "class Model(:\n")
    too_deep = "class Model:\n    def forward(self, x):\n        return " + " + ".join(["x"] * 20000) + "\n"
    with pytest.raises(SimilarityError, match="nested too deeply"):
        ast_similarity(GEMM_RELU, too_deep)


# --------------------------------------------------------------------------------------------
# The KernelBench index.


@pytest.fixture(scope="module")
def index() -> KernelBenchIndex:
    return KernelBenchIndex.from_checkout(KERNELBENCH)


def test_index_holds_every_problem(index):
    assert len(index) == len(PROBLEMS) == 9


def test_near_duplicate_found_with_its_key(index):
    score, key = index.most_similar(GEMM_RELU_RENAMED)
    assert score > 0.9
    assert key == "level2/3_Gemm_BiasAdd_ReLU.py"


def test_unrelated_task_passes(index):
    score, key = index.most_similar(UNRELATED)
    assert score <= 0.9
    assert key in {f"level{p.parent.name[-1]}/{p.name}" for p in PROBLEMS}


def test_most_similar_is_the_maximum_and_first_on_ties(index):
    """sigmoid(x), tanh(x) and F.hardswish(x) have one structure: a tie among level1/3, 4 and 5
    goes to the first, at 1.0 and below."""
    task = (KERNELBENCH / "KernelBench" / "level1" / "4_Tiny_Tanh.py").read_text()
    assert index.most_similar(task) == (1.0, "level1/3_Sigmoid.py")
    score, key = index.most_similar(task.replace("return torch.tanh(x)", "return torch.tanh(x) * 2"))
    assert score < 0.9
    assert key == "level1/3_Sigmoid.py"
    score, key = index.most_similar(UNRELATED)
    scores = {f"level{p.parent.name[-1]}/{p.name}": ast_similarity(UNRELATED, p.read_text()) for p in PROBLEMS}
    assert score == pytest.approx(max(scores.values()), abs=1e-12)
    assert scores[key] == pytest.approx(score, abs=1e-12)


def test_levels_select_problems():
    index = KernelBenchIndex.from_checkout(KERNELBENCH, levels=(1,))
    assert len(index) == 5
    assert index.most_similar(GEMM_RELU_RENAMED)[1].startswith("level1/")


def test_pickled_index_carries_sources_only(index):
    index.most_similar(UNRELATED)    # builds the parsed form
    copy = pickle.loads(pickle.dumps(index))
    assert copy._prepared is None
    assert copy.most_similar(UNRELATED) == index.most_similar(UNRELATED)
    assert copy.most_similar(GEMM_RELU_RENAMED) == index.most_similar(GEMM_RELU_RENAMED)


def test_bad_checkout_raises(tmp_path):
    with pytest.raises(BenchmarkError, match="does not exist"):
        KernelBenchIndex.from_checkout(tmp_path / "missing")
    with pytest.raises(BenchmarkError, match="does not look like a KernelBench checkout"):
        KernelBenchIndex.from_checkout(tmp_path)


def test_checkout_in_tmp_tree(tmp_path):
    level = tmp_path / "level1"
    level.mkdir()
    (level / "7_Gemm.py").write_text(GEMM_RELU)
    (level / "8_Unrelated.py").write_text(UNRELATED)
    index = KernelBenchIndex.from_checkout(tmp_path, levels=(1,))
    assert index.most_similar(GEMM_RELU_RENAMED) == (1.0, "level1/7_Gemm.py")


def test_empty_index_raises():
    with pytest.raises(SimilarityError, match="no problems"):
        KernelBenchIndex([]).most_similar(UNRELATED)


# --------------------------------------------------------------------------------------------
# Deduplication.


RESTYLED_UNRELATED = '''
# the same program, laid out and commented differently
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, chunks: int, limit: float):
        super().__init__(); self.chunks = chunks; self.limit = limit   # keep both
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Another docstring."""
        parts = [torch.cumsum(p, dim=-1)
                 for p in x.chunk(self.chunks, dim=-1)]
        out = parts[0]
        for p in parts[1:]:
            "a string used as a comment"
            if (p.mean() > self.limit):
                p = p.clamp(max = self.limit)
            out = torch.cat([out, p], dim=-1)
        return (out)
def get_inputs():
    return [torch.randn(32, 256)]
def get_init_inputs():
    return [4, 1.0]
'''


def test_reformatted_copy_has_the_same_hash():
    assert canonical_source(RESTYLED_UNRELATED) == canonical_source(UNRELATED)
    assert program_hash(RESTYLED_UNRELATED) == program_hash(UNRELATED)


def test_sizes_and_names_make_another_program():
    assert program_hash(UNRELATED.replace("torch.randn(32, 256)", "torch.randn(32, 512)")) != program_hash(UNRELATED)
    assert program_hash(UNRELATED.replace("[4, 1.0]", "[4, 2.0]")) != program_hash(UNRELATED)
    assert program_hash(GEMM_RELU_RENAMED) != program_hash(GEMM_RELU)


def test_canonical_source_stays_valid_python():
    """A block holding only a docstring keeps a ``pass``."""
    source = 'class Model:\n    """Only a docstring."""\n'
    canonical = canonical_source(source)
    assert "docstring" not in canonical
    ast.parse(canonical)


def test_dedup_index():
    dedup = DedupIndex([(GEMM_RELU, "task-0")])
    assert dedup.first_seen(UNRELATED) is None
    dedup.add(UNRELATED, "task-1")
    assert dedup.first_seen(RESTYLED_UNRELATED) == "task-1"
    dedup.add(RESTYLED_UNRELATED, "task-2")       # the first id for a program is kept
    assert dedup.first_seen(UNRELATED) == "task-1"
    assert dedup.first_seen(UNRELATED.replace("torch.randn(32, 256)", "torch.randn(64, 256)")) is None
    assert dedup.first_seen(GEMM_RELU) == "task-0"
    assert len(dedup) == 2
