"""Is a change in mean reward beyond noise? A one-sided Mann-Whitney U test on the judged samples."""

from __future__ import annotations

import statistics
from typing import Any


def compare(before: list[float], after: list[float]) -> dict[str, Any]:
    """Means, their difference, and the p-value that ``after`` is not larger than ``before``."""
    from scipy.stats import mannwhitneyu

    if len(set(before) | set(after)) == 1:
        p = 1.0  # identical constant samples: no evidence of a change
    else:
        p = float(mannwhitneyu(after, before, alternative="greater").pvalue)
    return {"before": statistics.fmean(before), "after": statistics.fmean(after),
            "delta": statistics.fmean(after) - statistics.fmean(before), "p_value": p,
            "n_before": len(before), "n_after": len(after)}
