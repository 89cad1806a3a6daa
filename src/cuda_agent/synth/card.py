"""The dataset card: statistics of a synthesis run, plots, and a README.md for the Hub.

:func:`write_card` writes, into a dataset folder (see :mod:`cuda_agent.synth.dataset`):

- ``README.md``: YAML front matter (licence, task category, tags, and a ``configs`` block whose
  train split is ``data/train.parquet``), then what the dataset is, how it was built, the
  composition beside the paper's Table 3, per-filter pass rates, rejection reasons, plots, the
  columns and how to load it;
- ``stats.json``: :func:`summarize`'s dict;
- ``eager_ms.png`` (always; it says so when there is nothing to plot) and ``similarity.png`` (only
  when some accepted task, or one rejected as too similar, has a KernelBench similarity).

Settings the card reads when present: ``window_ms`` ([min, max] of the workload window),
``similarity_threshold`` (default 0.9, the paper's), ``device``, ``name`` (the card's title) and
``thresholds`` ({filter: text}, shown beside that filter). Every setting is listed as given.
Nothing depends on the clock: the same inputs give the same files.
"""

from __future__ import annotations

import io
import json
import math
import statistics
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from ..files import write_atomic
from .dataset import COLUMN_DESCRIPTIONS, FILE_MODE, PARQUET, SCHEMA, json_safe
from .records import FILTER_MEANINGS, FILTERS, PAPER_MIX, SEED_KINDS, SIMILARITY_THRESHOLD, Outcome

TOP_OPS = 20
UNFINISHED = "unfinished"  # rejected without any failing filter (e.g. the run stopped on it)
UNFINISHED_MEANING = "rejected before any filter decided (no failing filter recorded)"

TIMING_PNG = "eager_ms.png"
SIMILARITY_PNG = "similarity.png"


def category(data_source: str) -> str:
    """Table 3's row for a data_source: "torch#2" -> "2 torch ops", "transformers#1" ->
    "transformers op"; anything else is its own row."""
    kind, _, count = data_source.partition("#")
    if kind == "transformers":
        return "transformers op"
    if kind == "torch" and count.isdigit():
        n = int(count)
        return f"{n} torch op" if n == 1 else f"{n} torch ops"
    return data_source


# CUDA Agent paper, Table 3, by its own row names ("2 torch ops").
PAPER_TABLE3 = {category(source): share for source, share in PAPER_MIX.items()}


def _distribution(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0, "min": None, "median": None, "max": None}
    return {"n": len(values), "min": min(values), "median": statistics.median(values),
            "max": max(values)}


def _finite(values) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def _threshold(settings: dict) -> float:
    return float(settings.get("similarity_threshold", SIMILARITY_THRESHOLD))


def _filter_names(outcomes: list[Outcome]) -> list[str]:
    """FILTERS in order, then any other filter an outcome reached, by name."""
    seen = {f.name for o in outcomes for f in o.filters}
    return list(FILTERS) + sorted(seen - set(FILTERS))


def summarize(outcomes: list[Outcome], seed_counts: dict[str, int] | None,
              settings: dict) -> dict[str, Any]:
    """A run's statistics as a JSON-able dict (what stats.json holds and the card shows).

    A candidate reaches a filter when its outcome lists that filter; a rejected candidate is
    counted under its first failing filter. Shares are fractions; a rate with no denominator
    is None.
    """
    accepted = [o for o in outcomes if o.accepted]
    n, n_acc = len(outcomes), len(accepted)

    filters = []
    for name in _filter_names(outcomes):
        results = [f for o in outcomes for f in o.filters if f.name == name]
        passed = sum(1 for f in results if f.passed)
        filters.append({"name": name, "meaning": FILTER_MEANINGS.get(name, ""),
                        "reached": len(results), "passed": passed,
                        "failed": len(results) - passed,
                        "pass_rate": passed / len(results) if results else None})

    reasons = Counter((o.rejected_by or UNFINISHED) for o in outcomes if not o.accepted)
    order = _filter_names(outcomes) + [UNFINISHED]
    rejected_by = {name: reasons[name] for name in order if reasons[name]}

    mix = Counter(category(o.candidate.data_source) for o in accepted)
    op_mix = [{"category": c, "tasks": mix[c], "share": mix[c] / n_acc if n_acc else None,
               "paper_share": PAPER_TABLE3[c]} for c in PAPER_TABLE3]
    op_mix += [{"category": c, "tasks": mix[c], "share": mix[c] / n_acc, "paper_share": None}
               for c in sorted(set(mix) - set(PAPER_TABLE3))]

    ops = Counter(op for o in accepted for op in set(o.candidate.ops))
    top_ops = [{"op": op, "tasks": count}
               for op, count in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_OPS]]

    sims = _finite(o.max_similarity for o in accepted)
    similarity = None
    if sims:
        threshold = _threshold(settings)
        similarity = {**_distribution(sims), "mean": statistics.fmean(sims),
                      "threshold": threshold,
                      "above_threshold": sum(1 for s in sims if s > threshold)}

    seeds = None
    if seed_counts is not None:
        kinds = ([k for k in SEED_KINDS if k in seed_counts]
                 + sorted(set(seed_counts) - set(SEED_KINDS)))
        seeds = {"by_kind": {k: int(seed_counts[k]) for k in kinds},
                 "total": sum(int(v) for v in seed_counts.values())}

    return {
        "candidates": n,
        "accepted": n_acc,
        "acceptance_rate": n_acc / n if n else None,
        "filters": filters,
        "rejected_by": rejected_by,
        "op_mix": op_mix,
        # Tasks beyond one float32 shape (--multi-shape-share, --half-share).
        "shapes_and_dtypes": {"multi_shape": sum(bool(o.candidate.batch_sizes) for o in accepted),
                              "dtypes": dict(sorted(Counter(o.candidate.dtype for o in accepted).items()))},
        "composers": dict(sorted(Counter(o.candidate.composer for o in accepted).items())),
        "eager_ms": _distribution(_finite(o.eager_ms for o in accepted)),
        "estimate_ms": _distribution(_finite(o.candidate.estimate_ms for o in accepted)),
        "top_ops": top_ops,
        "kernelbench_similarity": similarity,
        "seed_counts": seeds,
        "settings": dict(settings),
    }


# --- plots ---------------------------------------------------------------------------------------

def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path: Path) -> Path:
    buf = io.BytesIO()
    # No "Software" entry: the same data gives the same bytes whatever matplotlib wrote them.
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight", metadata={"Software": None})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, buf.getvalue(), mode=FILE_MODE)
    return path


def _finish(ax, xlabel: str, title: str) -> None:
    """Labels, whole-number counts, and the legend below the axes where it hides no bar."""
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.set_ylabel("tasks")
    ax.set_title(title)
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=len(handles),
                  frameon=False)


def _log_bins(values: list[float], bounds: Sequence[float]) -> list[float]:
    lo = min(list(values) + [b for b in bounds if b > 0])
    hi = max(list(values) + [b for b in bounds if b > 0])
    lo, hi = math.log10(lo) - 0.1, math.log10(hi) + 0.1
    return [10 ** (lo + (hi - lo) * i / 30) for i in range(31)]


def _accepted_and_cut(ax, accepted: list[float], cut: list[float], bins, cut_label: str,
                      accepted_label: str = "accepted") -> None:
    """Accepted tasks over the candidates one filter cut, on the same bins."""
    if cut:
        ax.hist(cut, bins=bins, color="lightgrey", edgecolor="grey", label=f"{cut_label} ({len(cut)})")
    if accepted:
        ax.hist(accepted, bins=bins, color="tab:blue", alpha=0.8, label=f"{accepted_label} ({len(accepted)})")


def _window_values(outcomes: list[Outcome]) -> tuple[str | None, dict[int, float]]:
    """What the workload window was applied to ("measured" eager times, or a roofline "estimate"
    of the target GPU's where there was none; None if no candidate reached it), and each
    candidate's value it judged, by index."""
    source, values = None, {}
    for o in outcomes:
        for f in o.filters:
            if f.name == "workload_window" and f.measurement.get("source"):
                source = "estimate" if "estimate" in (source, f.measurement["source"]) else "measured"
                if isinstance(f.measurement.get("eager_ms"), (int, float)):
                    values[o.candidate.index] = float(f.measurement["eager_ms"])
    return source, values


def timing_histogram(outcomes: list[Outcome], path: Path,
                     window_ms: Sequence[float] | None = None) -> Path:
    """Eager times of accepted tasks on a log axis, with the workload window's bounds; candidates
    the window rejected are drawn beside them, to show what it cut. Where the window judged a
    roofline estimate (no GPU), the estimates are drawn too, and the window is labelled as theirs:
    the measured times are the run's own device's, to which it does not apply. Says so when
    there is no data, so the card's image link always works."""
    plt = _pyplot()
    source, judged = _window_values(outcomes)
    estimated = source == "estimate"
    measured = [v for v in _finite(o.eager_ms for o in outcomes if o.accepted) if v > 0]
    window_cut = [o for o in outcomes if not o.accepted and o.rejected_by == "workload_window"]
    if estimated:
        accepted = [v for v in _finite(judged.get(o.candidate.index) for o in outcomes if o.accepted) if v > 0]
        cut = [v for v in _finite(judged.get(o.candidate.index) for o in window_cut) if v > 0]
    else:
        accepted, cut = measured, [v for v in _finite(o.eager_ms for o in window_cut) if v > 0]
    bounds = [float(b) for b in (window_ms or [])]
    fig, ax = plt.subplots(figsize=(7, 4))
    try:
        if accepted or cut or measured:
            bins = _log_bins(accepted + cut + measured, bounds)
            if estimated and measured:
                ax.hist(measured, bins=bins, color="tab:green", alpha=0.6,
                        label=f"accepted, measured on this run's device ({len(measured)})")
            _accepted_and_cut(ax, accepted, cut, bins,
                              "rejected by workload window" + (", estimated" if estimated else ""),
                              "accepted, estimated for the target GPU" if estimated else "accepted")
            ax.set_xscale("log")
        else:
            ax.text(0.5, 0.5, "no accepted tasks with an eager time", ha="center", va="center",
                    transform=ax.transAxes)
            if all(b > 0 for b in bounds) and bounds:
                ax.set_xscale("log")
                ax.set_xlim(min(bounds) / 3, max(bounds) * 3)
        for b in bounds:
            ax.axvline(b, color="tab:red", linestyle="--", linewidth=1)
        if bounds:
            ax.plot([], [], color="tab:red", linestyle="--", linewidth=1,
                    label="window " + " - ".join(f"{b:g}" for b in bounds) + " ms"
                    + (" (on the target GPU's estimate)" if estimated else ""))
        title = "Eager time of accepted tasks" + (" and of those outside the window" if cut else "")
        _finish(ax, "eager time (ms, log scale)",
                title + ("\n(measured here; the window judged the target GPU's estimate)" if estimated else ""))
        if estimated:  # four labels do not fit in one row under the axes
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False, fontsize=8)
        if not (accepted or cut or measured):
            ax.set_yticks([])  # no counts to show
        return _save(fig, path)
    finally:
        plt.close(fig)


def similarity_histogram(outcomes: list[Outcome], path: Path,
                         threshold: float = SIMILARITY_THRESHOLD) -> Path | None:
    """Max KernelBench similarity of accepted tasks (as the paper's Fig. 7), with the threshold;
    candidates rejected for similarity drawn beside them. None, and no file, without values."""
    accepted = _finite(o.max_similarity for o in outcomes if o.accepted)
    cut = _finite(o.max_similarity for o in outcomes
                  if not o.accepted and o.rejected_by == "kernelbench_similarity")
    if not accepted and not cut:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    try:
        _accepted_and_cut(ax, accepted, cut, [i / 40 for i in range(41)], "rejected as too similar")
        ax.axvline(threshold, color="tab:red", linestyle="--", linewidth=1,
                   label=f"threshold {threshold:g}")
        ax.set_xlim(0, 1)
        _finish(ax, "max AST similarity to a KernelBench problem", "Similarity to KernelBench")
        return _save(fig, path)
    finally:
        plt.close(fig)


# --- the card ------------------------------------------------------------------------------------

def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.2f}%"


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g} ms"


def _cell(value: Any) -> str:
    """Text safe inside a Markdown table cell: one line, pipes escaped."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return " ".join(text.split()).replace("|", "\\|")


def _type_name(t) -> str:
    """An Arrow type as the card says it: "list of list of int64"."""
    import pyarrow as pa

    return f"list of {_type_name(t.value_type)}" if pa.types.is_list(t) else str(t)


def _size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                        (1_000_000, "100K<n<1M")):
        if n < limit:
            return name
    return "n>1M"


def _front_matter(stats: dict) -> list[str]:
    return [
        "---",
        "license: cc-by-4.0",
        "task_categories:",
        "- text-generation",
        "tags:",
        "- cuda",
        "- pytorch",
        "- kernelbench",
        "- kernel-generation",
        "- code",
        "- synthetic",
        "size_categories:",
        f"- {_size_category(stats['accepted'])}",
        "configs:",
        "- config_name: default",
        "  data_files:",
        "  - split: train",
        f"    path: {PARQUET.as_posix()}",
        "---",
    ]


def _filter_condition(name: str, settings: dict) -> str:
    """The threshold a filter applied in this run, from the settings."""
    extra = (settings.get("thresholds") or {}).get(name)
    if extra is not None:
        return _cell(extra)
    if name == "workload_window" and settings.get("window_ms"):
        lo, hi = (float(b) for b in settings["window_ms"])
        where = f" on {_cell(settings['device'])}" if settings.get("device") else ""
        return f"eager time in [{lo:g}, {hi:g}] ms{where}"
    if name == "kernelbench_similarity":
        return f"max AST similarity <= {_threshold(settings):g}"
    return ""


TORCH_KINDS = ("module", "functional", "tensor")  # seed kinds crawled from torch itself


def seed_sources(seeds: dict | None) -> list[tuple[str, int]]:
    """The packages that gave seeds, with how many each gave (none for a source that gave none):
    torch's modules, functionals and tensor ops count as `torch`; any other kind is its own."""
    if not seeds:
        return []
    counts: dict[str, int] = {}
    for kind, n in seeds["by_kind"].items():
        source = "torch" if kind in TORCH_KINDS else kind
        counts[source] = counts.get(source, 0) + int(n)
    return [(source, n) for source, n in counts.items() if n > 0]


def _sources_text(seeds: dict | None) -> str:
    """"`torch` (120 seeds) and `transformers` (8 seeds)", or what is known without counts."""
    sources = [f"`{source}` ({n} seed{'s' if n != 1 else ''})" for source, n in seed_sources(seeds)]
    if not sources:
        return "no package (the crawl found no seeds)" if seeds else "`torch` (and `transformers` where installed)"
    return ", ".join(sources[:-1]) + " and " + sources[-1] if len(sources) > 1 else sources[0]


def _gave_transformers(stats: dict) -> bool:
    """Whether `transformers` may have given seeds (unknown counts: it may have)."""
    seeds = stats.get("seed_counts")
    return not seeds or any(source == "transformers" for source, _ in seed_sources(seeds))


def render_card(stats: dict, *, similarity_plot: bool = False) -> str:
    """The README.md text for :func:`summarize`'s stats."""
    settings = stats["settings"]
    title = settings.get("name") or "Synthesised CUDA kernel tasks"
    n, acc = stats["candidates"], stats["accepted"]
    out = _front_matter(stats) + ["", f"# {_cell(title)}", ""]
    out += [
        f"{acc} KernelBench-format tasks for training CUDA kernel generation: each is a PyTorch "
        "program (`class Model(nn.Module)`, `get_inputs()`, `get_init_inputs()`) for which a model "
        "writes a faster CUDA implementation. They were built the way the CUDA Agent paper built "
        f"CUDA-Agent-Ops-6K: operators crawled from {_sources_text(stats.get('seed_counts'))} were stacked, up "
        "to five `torch` operators in sequence"
        + (" (`transformers` modules stand alone)" if _gave_transformers(stats) else "") + ", and only "
        "candidates that passed every execution-based filter were kept. The first three columns "
        "(`code`, `ops`, `data_source`) are CUDA-Agent-Ops-6K's.",
        "",
        f"**{acc} of {n} candidates accepted ({_pct(stats['acceptance_rate'])}).**",
        "",
    ]
    if acc == 0:
        out += ["No candidate passed every filter, so the data files hold no rows; `datasets` "
                "refuses to load an empty split (read the files with pyarrow instead).", ""]

    if settings:
        out += ["## Settings", "", "| setting | value |", "|---|---|"]
        out += [f"| {_cell(k)} | {_cell(v)} |" for k, v in settings.items()]
        out.append("")

    out += ["## How it was built", ""]
    seeds = stats.get("seed_counts")
    if seeds:
        kinds = ", ".join(f"{v} {k}" for k, v in seeds["by_kind"].items() if v)
        out += [f"1. **Seeds**: {seeds['total']} operators crawled from {_sources_text(seeds)}"
                + (f" ({kinds})." if kinds else "."), ""]
    else:
        out += [f"1. **Seeds**: operators crawled from {_sources_text(seeds)}.", ""]
    composers = ", ".join(f"{c} ({k})" for c, k in stats["composers"].items()) or "none accepted"
    out += [f"2. **Composition**: accepted tasks by composer: {composers}.", "",
            "3. **Filters**, in the order a candidate meets them; a candidate is rejected at the "
            "first one it fails:", "",
            "| # | filter | rejects a task that | condition in this run |", "|---|---|---|---|"]
    for i, f in enumerate(stats["filters"], 1):
        out.append(f"| {i} | `{f['name']}` | {_cell(f['meaning'] or 'n/a')} | "
                   f"{_filter_condition(f['name'], settings) or '-'} |")
    out.append("")

    out += ["## Composition (layout of the paper's Table 3)", "",
            "| composition | tasks | share | CUDA-Agent-Ops-6K (paper) |", "|---|---|---|---|"]
    for row in stats["op_mix"]:
        out.append(f"| {_cell(row['category'])} | {row['tasks']} | {_pct(row['share'])} | "
                   f"{_pct(row['paper_share'])} |")
    out += ["", "The paper's shares are over its 6,000 tasks.", ""]
    beyond = stats.get("shapes_and_dtypes") or {}
    if beyond.get("multi_shape") or set(beyond.get("dtypes") or {}) - {"float32"}:
        dtypes = ", ".join(f"{name} {count}" for name, count in beyond["dtypes"].items())
        out += [f"Tasks declaring several workloads: {beyond['multi_shape']}. By dtype: {dtypes}.", ""]

    out += ["## Filters", "",
            "A candidate reaches a filter when it passed every earlier one.", "",
            "| filter | reached | passed | failed | pass rate |", "|---|---|---|---|---|"]
    for f in stats["filters"]:
        out.append(f"| `{f['name']}` | {f['reached']} | {f['passed']} | {f['failed']} | "
                   f"{_pct(f['pass_rate'])} |")
    out.append("")

    out += ["## Rejection reasons", ""]
    if stats["rejected_by"]:
        out += ["Each rejected candidate counts once, under the first filter it failed.", "",
                "| first failing filter | candidates | share of candidates | meaning |",
                "|---|---|---|---|"]
        for name, count in stats["rejected_by"].items():
            meaning = UNFINISHED_MEANING if name == UNFINISHED else FILTER_MEANINGS.get(name, "")
            out.append(f"| `{name}` | {count} | {_pct(count / n)} | {_cell(meaning)} |")
    else:
        out.append("No candidate was rejected.")
    out.append("")

    eager, est = stats["eager_ms"], stats["estimate_ms"]
    out += ["## Eager time", "",
            "| of accepted tasks | n | min | median | max |", "|---|---|---|---|---|",
            f"| measured eager time | {eager['n']} | {_ms(eager['min'])} | {_ms(eager['median'])} "
            f"| {_ms(eager['max'])} |",
            f"| roofline estimate | {est['n']} | {_ms(est['min'])} | {_ms(est['median'])} "
            f"| {_ms(est['max'])} |", "",
            f"![eager time of accepted tasks]({TIMING_PNG})", ""]

    out += ["## Similarity to KernelBench", ""]
    sim = stats.get("kernelbench_similarity")
    if sim:
        out += [f"Max AST similarity of each accepted task to any KernelBench problem (n = "
                f"{sim['n']}): min {sim['min']:.3f}, median {sim['median']:.3f}, mean "
                f"{sim['mean']:.3f}, max {sim['max']:.3f}; {sim['above_threshold']} above the "
                f"threshold {sim['threshold']:g}.", ""]
    else:
        out += ["No similarity measurements for accepted tasks (the run had no KernelBench "
                "checkout, or accepted nothing).", ""]
    if similarity_plot:
        out += [f"![similarity to KernelBench]({SIMILARITY_PNG})", ""]

    out += ["## Most frequent operators", ""]
    if stats["top_ops"]:
        out += [f"Accepted tasks that use each operator (top {TOP_OPS}).", "",
                "| operator | tasks |", "|---|---|"]
        out += [f"| `{_cell(r['op'])}` | {r['tasks']} |" for r in stats["top_ops"]]
    else:
        out.append("None (no accepted tasks).")
    out.append("")

    out += ["## Columns", "", "| column | type | description |", "|---|---|---|"]
    for field in SCHEMA:
        out.append(f"| `{field.name}` | {_type_name(field.type)} | "
                   f"{_cell(COLUMN_DESCRIPTIONS[field.name])} |")
    out.append("")

    out += ["## Loading", "",
            "```python",
            "import datasets",
            "",
            "ds = datasets.load_dataset(\"path/to/this/folder\")[\"train\"]  # or a Hub repo id",
            "# or, without the card:",
            f"ds = datasets.load_dataset(\"parquet\", data_files=\"path/to/this/folder/"
            f"{PARQUET.as_posix()}\")[\"train\"]",
            "row = ds[0]",
            "print(row[\"data_source\"], row[\"ops\"])",
            "print(row[\"code\"])",
            "```", "",
            "`data/train.jsonl` holds the same rows as JSON lines; the card's `configs` block "
            "names the Parquet file as the only data file. `stats.json` holds the statistics above.", ""]
    return "\n".join(out)


def write_card(out_dir: Path, outcomes: list[Outcome], seed_counts: dict[str, int] | None,
               settings: dict) -> Path:
    """Write README.md, stats.json and the plots into ``out_dir``; returns the README's path.

    A similarity plot left by an earlier run is removed when this run has no similarity values.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stats = summarize(outcomes, seed_counts, settings)
    timing_histogram(outcomes, out_dir / TIMING_PNG, settings.get("window_ms"))
    sim_plot = similarity_histogram(outcomes, out_dir / SIMILARITY_PNG, _threshold(settings))
    if sim_plot is None:
        (out_dir / SIMILARITY_PNG).unlink(missing_ok=True)
    write_atomic(out_dir / "stats.json",
                 json.dumps(json_safe(stats), indent=1, default=str, allow_nan=False) + "\n",
                 mode=FILE_MODE)
    readme = out_dir / "README.md"
    write_atomic(readme, render_card(stats, similarity_plot=sim_plot is not None)
                 .encode("utf-8"), mode=FILE_MODE)
    return readme
