"""The records that flow through synthesis: seeds, composed candidates and filter outcomes.

Everything here is plain data that round-trips through JSON, because candidates cross process
boundaries and every outcome is appended to the run's log as soon as it is known.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# The filters in the order a candidate meets them. Each outcome lists the ones it reached.
FILTERS = (
    "deterministic_ops",     # no seed operator with inherent randomness (static)
    "duplicate",             # not the same program as an earlier candidate of this run
    "kernelbench_similarity",  # AST similarity of Model to every KernelBench problem <= 0.9
    "eager_runs",            # Model(*get_init_inputs())(*get_inputs()) runs and returns tensors
    "finite",                # no NaN or Inf in the output
    "deterministic_runs",    # a rerun on the same inputs from another RNG state is identical
    "not_constant",          # the output is not one value everywhere
    "input_dependent",       # different inputs give distinguishable outputs
    "workload_window",       # eager time on the target GPU within [min_ms, max_ms]
    "compile_matches",       # runs under torch.compile and matches eager
)

# What a failing filter means, for the dataset card.
FILTER_MEANINGS = {
    "deterministic_ops": "uses an operator with inherent randomness (dropout, random sampling)",
    "duplicate": "same program as an earlier candidate of this run",
    "kernelbench_similarity": "too similar to a KernelBench problem (AST similarity > threshold)",
    "eager_runs": "fails to build or run in eager mode, or returns something other than tensors",
    "finite": "produces NaN or Inf",
    "deterministic_runs": "gives different outputs when rerun on the same inputs",
    "not_constant": "returns the same value everywhere",
    "input_dependent": "returns (numerically) the same output for different inputs",
    "workload_window": "eager time outside the window (trivial or too heavy)",
    "compile_matches": "fails under torch.compile, or its compiled output differs from eager",
    # not a filter: the checks themselves did not finish (timeout, the worker process died)
    "worker": "its checks did not finish: they timed out or the worker process died",
}

SEED_KINDS = ("module", "functional", "tensor", "transformers")

# The paper's Table 3: the share of each composition in CUDA-Agent-Ops-6K, by data_source.
PAPER_MIX = {"torch#1": 0.0340, "torch#2": 0.8377, "torch#3": 0.0762, "torch#4": 0.0280,
             "torch#5": 0.0123, "transformers#1": 0.0118}

# The paper's decontamination threshold: a task more AST-similar than this to a KernelBench
# problem is dropped.
SIMILARITY_THRESHOLD = 0.9


@dataclass(frozen=True)
class Seed:
    """One operator that tasks can be built from.

    ``target`` is the import path of the callable (``torch.nn.Conv2d``, ``torch.nn.functional.gelu``,
    ``torch.cumsum``, ``transformers.models.llama.modeling_llama.LlamaMLP``). ``args`` are the
    constructor arguments (modules) or extra call arguments (functions) that make it run; string
    values starting with ``$`` are shape tokens the composer resolves against the input it is
    applied to (see ``compose.SHAPE_TOKENS``). ``ranks`` are the input ranks it was seen to accept.
    ``binary`` ops take a second operand, which tasks give as a learned parameter.
    """

    name: str                       # as listed in a task's ``ops``: "nn.Conv2d", "F.gelu", "torch.cumsum"
    kind: str                       # one of SEED_KINDS
    target: str
    ranks: tuple[int, ...] = ()
    args: dict[str, Any] = field(default_factory=dict)
    stochastic: bool = False
    composable: bool = True         # shape inference on the meta device works, so it can be chained
    binary: bool = False
    heavy: bool = False             # carries weights that do most of the work (conv, linear, ...)
    note: str = ""                  # how it was probed, or why it cannot be used

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ranks"] = list(self.ranks)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Seed":
        data = dict(data)
        data["ranks"] = tuple(data.get("ranks", ()))
        return cls(**data)


@dataclass
class Candidate:
    """A composed task, before any filter.

    ``index`` is its position in the run's generation sequence (what a resumed run skips);
    ``input_shapes``/``output_shape`` are as the composer saw them; ``estimate_ms`` is the cost
    model's eager time on the target GPU (``estimate``), None when the composer did not size it.
    """

    index: int
    code: str
    ops: list[str]
    data_source: str                # "torch#<n ops>" or "transformers#1", as CUDA-Agent-Ops-6K
    composer: str                   # "offline" or "llm:<model>"
    input_shapes: list[list[int]] = field(default_factory=list)
    output_shape: list[int] | None = None
    estimate_ms: float | None = None
    stochastic_ops: list[str] = field(default_factory=list)
    dtype: str = "float32"          # what the task computes in
    batch_sizes: list[int] = field(default_factory=list)  # its declared workloads' batch sizes (none: one)

    @property
    def n_ops(self) -> int:
        return len(self.ops)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Candidate":
        return cls(**data)


@dataclass
class FilterResult:
    """One filter's decision on one candidate, with the numbers behind it."""

    name: str                       # one of FILTERS
    passed: bool
    measurement: dict[str, Any] = field(default_factory=dict)
    reason: str = ""                # why it failed; empty when it passed

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Outcome:
    """A candidate after filtering: every filter it reached, and whether it was accepted.

    ``eager_ms``/``compile_ms`` are medians on the run's device; ``max_similarity`` and
    ``most_similar`` describe the closest KernelBench problem (None without a checkout).
    """

    candidate: Candidate
    filters: list[FilterResult]
    accepted: bool
    device: str = ""
    eager_ms: float | None = None
    compile_ms: float | None = None
    max_similarity: float | None = None
    most_similar: str | None = None
    seconds: float = 0.0            # wall time spent filtering it

    @property
    def rejected_by(self) -> str | None:
        return next((f.name for f in self.filters if not f.passed), None)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["rejected_by"] = self.rejected_by
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Outcome":
        data = {k: v for k, v in data.items() if k != "rejected_by"}
        data["candidate"] = Candidate.from_dict(data["candidate"])
        data["filters"] = [FilterResult(**f) for f in data["filters"]]
        return cls(**data)
