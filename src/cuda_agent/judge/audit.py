"""Would a null solution pass this task? Checked on the reference's own outputs, every run.

A task whose outputs are so small, so constant or so close to an input that zeros, a constant,
the input itself, or one fixed output would pass the comparison cannot tell a kernel that works
from one that does nothing. Such a task is reported as degenerate at the current tolerance (the
verdict's ``task_audit``), so that its "correct" is read for what it is worth. The audit uses the
same comparison as the checks, so it shows what the judge actually accepts, on an evenly spaced
sample of each output (``SAMPLE``) so that it costs little next to the checks themselves.
"""

from __future__ import annotations

from typing import Any

import torch

from .correctness import compare_outputs, map_tensors

NULL_SOLUTIONS = ("zeros", "constant", "identity", "fixed_output")
SAMPLE = 1 << 16  # elements per output tensor that the audit compares


def _sample(t: torch.Tensor) -> torch.Tensor:
    flat = t.reshape(-1)
    step = -(-flat.numel() // SAMPLE) if flat.numel() > SAMPLE else 1
    return flat[::step]


def _constant_like(t: torch.Tensor) -> torch.Tensor:
    if not t.numel():
        return t.clone()
    if t.is_floating_point() or t.is_complex():
        return torch.full_like(t, t.to(torch.complex128 if t.is_complex() else torch.float64).mean().item())
    return torch.full_like(t, t.reshape(-1)[0].item())


def sample_output(output: Any) -> Any:
    """What the audit looks at of an output: an evenly spaced sample of each tensor, copied so
    that it can travel without the rest."""
    return map_tensors(lambda t: _sample(t).clone(), output)


class TaskAudit:
    """Accumulates, check by check, which null solutions would have passed every check."""

    def __init__(self, atol: float, rtol: float, norm_rtol: float | None = None):
        self.atol, self.rtol, self.norm_rtol = atol, rtol, norm_rtol
        self.passing = dict.fromkeys(NULL_SOLUTIONS, True)
        self.first: Any = None
        self.checks = 0

    def _passes(self, candidate: Any, expected: Any) -> bool:
        return compare_outputs(candidate, expected, 0, self.atol, self.rtol, norm_rtol=self.norm_rtol).passed

    def add(self, expected: Any, identity_passes: bool) -> None:
        """One check's reference output; ``identity_passes`` comes from the reference process,
        which alone holds the inputs."""
        self.checks += 1
        expected = map_tensors(_sample, expected)
        self.passing["zeros"] &= self._passes(map_tensors(torch.zeros_like, expected), expected)
        self.passing["constant"] &= self._passes(map_tensors(_constant_like, expected), expected)
        self.passing["identity"] &= identity_passes
        if self.first is None:
            self.first = expected
        else:
            self.passing["fixed_output"] &= self._passes(self.first, expected)

    def findings(self) -> list[str]:
        """The null solutions that passed every check (none before two checks: too little data)."""
        if self.checks < 2:
            return []
        return [name for name, ok in self.passing.items() if ok]

    @staticmethod
    def explain(findings: list[str]) -> str:
        return ("the task is degenerate at this tolerance: " + ", ".join(findings)
                + " would pass every check too, so passing them says little about a solution")
