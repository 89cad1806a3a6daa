"""Baselines in KernelBench's own layout, so numbers can be compared with theirs.

KernelBench keeps reference timings per machine in ``results/timing/{hardware}/``:
``baseline_time_torch.json`` (eager) and ``baseline_time_torch_compile_inductor_default.json``,
each ``{"level1": {"19_ReLU.py": {"mean", "std", "min", "max", "num_trials", "hardware",
"device"}}, ...}`` in milliseconds. Exported entries carry our measurement's mean and spread;
KernelBench's speed-ups use the mean, ours the median, which is noted beside imported figures.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..errors import BenchmarkError
from ..files import write_atomic
from ..task import natural_key

FILES = {"eager": "baseline_time_torch.json", "compile": "baseline_time_torch_compile_inductor_default.json"}


def export_baselines(folder: Path, entries: list[dict], hardware: str) -> dict[str, Path]:
    """Write both files from ``entries`` ({"level", "name", "eager", "compile"}: TimingStats dicts)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for mode, filename in FILES.items():
        table: dict[str, dict[str, dict]] = {}
        for entry in sorted(entries, key=lambda e: (e["level"], natural_key(Path(e["name"])))):
            stats = entry.get(mode)
            if not stats:
                continue
            table.setdefault(f"level{entry['level']}", {})[entry["name"]] = {
                "mean": round(stats["mean_ms"], 4), "std": round(stats["std_ms"], 4),
                "min": round(stats["min_ms"], 4), "max": round(stats["max_ms"], 4),
                "num_trials": stats["calls"], "hardware": hardware, "device": entry.get("device", "cuda:0"),
            }
        path = folder / filename
        write_atomic(path, json.dumps(table, indent=4))
        written[mode] = path
    return written


def import_baselines(folder: Path) -> dict[str, dict[str, dict[str, float]]]:
    """{"eager"|"compile": {"level1/19_ReLU.py": {"mean": ms, ...}}} from a KernelBench timing folder."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise BenchmarkError(f"baseline folder {folder} does not exist; pass a folder such as "
                             "KernelBench/results/timing/H100_Modal")
    found: dict[str, dict[str, dict[str, float]]] = {}
    for mode, filename in FILES.items():
        path = folder / filename
        if not path.is_file():
            raise BenchmarkError(f"{folder} has no {filename}; KernelBench's timing folders hold "
                                 + " and ".join(FILES.values()))
        try:
            data = json.loads(path.read_text())
            found[mode] = {f"{level}/{name}": {k: entry[k] for k in ("mean", "std", "min", "max") if k in entry}
                           | {"hardware": entry.get("hardware", folder.name)}
                           for level, problems in data.items() for name, entry in problems.items()}
            if any(not isinstance(e.get("mean"), (int, float)) or not math.isfinite(e["mean"]) or e["mean"] <= 0
                   for e in found[mode].values()):
                raise ValueError("an entry has no positive finite mean")
        except (ValueError, AttributeError, TypeError) as exc:
            raise BenchmarkError(f"{path} is not a KernelBench baseline file ({exc})") from None
    return found
