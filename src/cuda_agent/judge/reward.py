"""The paper's rewards (Eq. 1 of arXiv 2602.24286), the continuous variant used in ablations, and a
reward from SOL-ExecBench's score against the hardware's limit."""

from __future__ import annotations

MARGIN = 0.05


def beats(t: float, t0: float, margin: float = MARGIN) -> bool:
    """b(t, t0): the candidate is more than ``margin`` faster than baseline time ``t0``."""
    return t0 > 0 and (t0 - t) / t0 > margin


def milestone_reward(correct: bool, t: float | None, t_eager: float | None, t_compile: float | None,
                     margin: float = MARGIN) -> int:
    """-1 unless correct; 3 if faster than eager and compile; 2 if faster than eager only; else 1.

    A correct candidate that was not timed (a verify-only run) gets 1: correct, speed unknown.
    """
    if not correct:
        return -1
    if t is None or t_eager is None:
        return 1
    faster_eager = beats(t, t_eager, margin)
    faster_compile = t_compile is not None and beats(t, t_compile, margin)
    if faster_eager and faster_compile:
        return 3
    if faster_eager:
        return 2
    return 1


def continuous_reward(correct: bool, t: float | None, t_compile: float | None) -> float:
    """t_compile / t when correct, else -1."""
    if not correct or not t or not t_compile:
        return -1.0
    return t_compile / t


def rewards(correct: bool, t: float | None, t_eager: float | None, t_compile: float | None,
            sol_vs_compile: float | None, margin: float = MARGIN) -> tuple[int, float, float]:
    """A verdict's three rewards from its paid times (or, over workloads, 1 and the baselines' mean
    speedups) and its paid SOL score: the milestone, the continuous and the SOL reward."""
    return (milestone_reward(correct, t, t_eager, t_compile, margin), continuous_reward(correct, t, t_compile),
            sol_reward(correct, sol_vs_compile))


def sol_reward(correct: bool, score: float | None) -> float:
    """-1 unless correct; else the SOL score against torch.compile (``roofline.sol_score``),
    within [0, 1]: 0.5 at torch.compile's time, 1 at the device's limit. A correct candidate
    with no score (no paid time, no settled torch.compile baseline, no roofline: the cpu backend)
    gets 0: correct, with no measured share of the gap."""
    if not correct:
        return -1.0
    return min(1.0, max(0.0, score)) if score is not None else 0.0
