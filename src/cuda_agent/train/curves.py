"""The reward curve: JSON for programs, PNG for people."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..files import write_atomic


def write_curve(out: Path, steps: list[dict[str, Any]], evaluations: dict[str, dict[str, Any]],
                title: str = "mean judge reward") -> tuple[Path, Path]:
    """``steps``: the GRPO step log; ``evaluations``: {stage: evaluation dict} measured apart."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = {"grpo_steps": [{"step": s["step"], "mean": s["mean"], "scores": s["scores"]} for s in steps],
            "evaluations": {k: {"mean": v["mean"], "n": v["n"], "counts": v["counts"]} for k, v in evaluations.items()}}
    json_path, png_path = out / "reward_curve.json", out / "reward_curve.png"
    write_atomic(json_path, json.dumps(data, indent=2))
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [2, 1]})
    if steps:
        left.plot([s["step"] for s in steps], [s["mean"] for s in steps], marker="o", label="GRPO batch mean")
    left.set(xlabel="GRPO step", ylabel="reward", title=title, ylim=(-1.2, 3.2))
    left.axhline(3, color="grey", lw=0.5, ls=":")
    left.legend(loc="lower right")
    names = list(evaluations)
    right.bar(names, [evaluations[n]["mean"] for n in names], color=["#999", "#6a9", "#36c"][:len(names)])
    right.set(ylabel="mean reward (sampled, judged)", title="policy after each stage", ylim=(-1.2, 3.2))
    fig.tight_layout()
    staging = png_path.with_name(png_path.name + ".tmp.png")
    fig.savefig(staging, dpi=110)
    plt.close(fig)
    staging.replace(png_path)
    return json_path, png_path
