"""KernelBench reports: JSON, Markdown laid out like the paper's Table 1, and plots.

A report is a plain dict::

    {
      "label": "my-model",                 # our row's name in the tables
      "created": "2025-01-01T00:00:00+00:00",
      "device": {"name": "...", ...} or None,
      "settings": {"backend": "...", ...},
      "levels": {"1": Metrics.to_dict(), "2": ..., ...},
      "overall": Metrics.to_dict(),
      "problems": [record, ...],            # one selected record per problem
    }

where a record has ``level``, ``problem_id``, ``name``, ``sample``, ``status``, ``correct``,
``speedup_vs_eager``, ``speedup_vs_compile``, ``sol_vs_eager``, ``sol_vs_compile`` (SOL scores),
``candidate_ms``, ``eager_ms``, ``compile_ms``, ``reward``, ``flags``, ``error`` and ``no_speedup``
(see :mod:`cuda_agent.bench.metrics`).
:func:`write_report` writes ``report.json``, ``report.md``, ``speedups.png`` and ``fast_p.png``
(for a run of baselines alone, ``baselines.png`` instead: eager and torch.compile per problem)
and, where the judge drew rooflines (on a GPU), ``roofline_level{N}.png`` from the problems'
verdicts and reference checks, and ``sol.png`` from the solutions' SOL scores. A problem's row says why a correct result has no speed-up
(``no_speedup``, from the verdict's own words).
"""

from __future__ import annotations

import io
import json
import math
import random
from pathlib import Path
from typing import Any

from ..files import write_atomic
from ..judge.reference import FLAG_MEANINGS
from ..judge.roofline import NOT_ON_CPU
from .metrics import BASELINES, fast_p_curve

# CUDA Agent paper, Table 1: KernelBench Levels 1-3 (100/100/50 problems), best solution per task,
# speed-ups are geometric means over correct solutions. Rates are fractions.
_TABLE1_COLUMNS = ("pass_rate", "faster_vs_eager", "faster_vs_compile",
                   "speedup_vs_eager", "speedup_vs_compile")
_TABLE1_ROWS = {
    "Overall": [
        ("Seed1.6 (base)", 0.740, 0.436, 0.272, 0.95, 0.69),
        ("GLM 4.6", 0.756, 0.448, 0.192, 0.78, 0.57),
        ("Kimi K2", 0.668, 0.408, 0.228, 0.93, 0.66),
        ("Gemini 3 Pro", 0.912, 0.876, 0.696, 1.92, 1.42),
        ("Claude Opus 4.5", 0.952, 0.904, 0.664, 1.99, 1.46),
        ("CUDA Agent", 0.988, 0.984, 0.968, 2.60, 2.11),
    ],
    "Level 1": [
        ("Seed1.6 (base)", 0.90, 0.63, 0.51, 1.65, 1.25),
        ("GLM 4.6", 0.86, 0.57, 0.32, 0.99, 0.73),
        ("Kimi K2", 0.85, 0.56, 0.39, 1.43, 1.00),
        ("Gemini 3 Pro", 0.95, 0.90, 0.72, 1.99, 1.51),
        ("Claude Opus 4.5", 0.96, 0.88, 0.72, 2.03, 1.54),
        ("CUDA Agent", 1.00, 0.99, 0.97, 2.48, 1.87),
    ],
    "Level 2": [
        ("Seed1.6 (base)", 0.74, 0.40, 0.16, 0.68, 0.50),
        ("GLM 4.6", 0.76, 0.43, 0.11, 0.60, 0.42),
        ("Kimi K2", 0.65, 0.40, 0.15, 0.93, 0.65),
        ("Gemini 3 Pro", 0.93, 0.91, 0.76, 2.03, 1.46),
        ("Claude Opus 4.5", 0.98, 0.97, 0.69, 2.24, 1.60),
        ("CUDA Agent", 1.00, 1.00, 1.00, 3.27, 2.80),
    ],
    "Level 3": [
        ("Seed1.6 (base)", 0.42, 0.12, 0.02, 0.60, 0.40),
        ("GLM 4.6", 0.54, 0.24, 0.10, 0.83, 0.62),
        ("Kimi K2", 0.34, 0.12, 0.06, 0.40, 0.29),
        ("Gemini 3 Pro", 0.80, 0.76, 0.52, 1.58, 1.17),
        ("Claude Opus 4.5", 0.88, 0.82, 0.50, 1.52, 1.10),
        ("CUDA Agent", 0.94, 0.94, 0.90, 1.80, 1.52),
    ],
}
PAPER_TABLE1: dict[str, list[dict[str, Any]]] = {
    subset: [{"model": row[0], **dict(zip(_TABLE1_COLUMNS, row[1:]))} for row in rows]
    for subset, rows in _TABLE1_ROWS.items()
}



def percent(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def times(x: float | None, none: str = "n/a") -> str:
    return none if x is None else f"{x:.2f}x"


def shorten(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters at a word's end where one is near."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 3]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "..."


def _cell(value: Any, limit: int | None = None) -> str:
    """Text safe inside a Markdown table cell: one line, pipes escaped, optionally cut."""
    text = shorten(value, limit) if limit is not None else " ".join(str(value).split())
    return text.replace("|", "\\|")  # escape after cutting so an escape is never split


REASON_CHARS = 160  # a problem row's error or missing speed-up: its gist; report.json has it all


def why(record: dict) -> str:
    """A problem's error, or why its correct result has no speed-up; empty when neither."""
    return record.get("error") or record.get("no_speedup") or ""


def _kv(d: dict) -> str:
    return ", ".join(f"{k}: {v if isinstance(v, (str, int, float)) else json.dumps(v)}"
                     for k, v in d.items())


def _subsets(report: dict) -> list[dict]:
    """Overall first, then levels in numeric order: the paper's row order."""
    levels = [report["levels"][k] for k in sorted(report.get("levels", {}), key=int)]
    return ([report["overall"]] if report.get("overall") else []) + levels


def _table_row(subset: str, model: str, m: dict) -> str:
    return (f"| {subset} | {model} | {percent(m['pass_rate'])} | {percent(m['faster_vs_eager'])} | "
            f"{percent(m['faster_vs_compile'])} | {times(m['speedup_vs_eager'])} | "
            f"{times(m['speedup_vs_compile'])} |")


def render_markdown(report: dict) -> str:
    """The report as Markdown: Table 1 beside the paper's rows, fast_p, flags, every problem."""
    label = str(report.get("label", "run"))
    out = [f"# KernelBench report: {label}", ""]
    if report.get("created"):
        out.append(f"Created {report['created']}.")
    if report.get("device"):
        out.append(f"Device: {_kv(report['device'])}.")
    if report.get("settings"):
        out.append(f"Settings: {_kv(report['settings'])}.")
    if (report.get("settings") or {}).get("baselines_only"):
        return "\n".join(out + [""] + _baselines_section(report)
                         + ["![eager and torch.compile per problem](baselines.png)", ""]
                         + _flagged_section(report) + _reference_table(report)) + "\n"
    out += ["", "## Results (layout of the CUDA Agent paper, Table 1)", "",
            "| subset | model | pass | faster vs eager | faster vs compile | speed-up vs eager "
            "| speed-up vs compile |",
            "|---|---|---|---|---|---|---|"]
    for m in _subsets(report):
        subset = m["subset"]
        out.append(_table_row(f"{subset} ({m['problems']})", f"**{_cell(label)}**", m))
        for row in PAPER_TABLE1.get(subset, []):
            out.append(_table_row("", f"{row['model']} [paper]", row))
    out += ["", "Rates are over all problems of a subset (missing or failed solutions count as "
            "failures); speed-ups are geometric means over correct solutions with timings. "
            "Our rows cover only the problems listed below (their count is in brackets) on our "
            "device; the paper's rows are on the full KernelBench levels (100/100/50 problems) "
            "on its own GPU, so the comparison is indicative only.", ""]

    out += ["## fast_p (KernelBench)", "",
            "fast_p = share of problems whose solution is correct and more than p times as fast "
            "as the baseline.", ""]
    for m in _subsets(report):
        keys = list(m["fast_p"].get("eager", {}))
        out += [f"### {m['subset']}", "",
                "| baseline | " + " | ".join(f"p = {k}" for k in keys) + " |",
                "|---|" + "---|" * len(keys)]
        for b in BASELINES:
            row = m["fast_p"].get(b, {})
            out.append(f"| vs {b} | " + " | ".join(percent(row.get(k)) for k in keys) + " |")
        out.append("")

    out += _baselines_section(report)

    out += ["## Rooflines", ""]
    if report.get("rooflines"):
        out += [f"- Level {level}: [{name}]({name}) (eager and torch.compile of every problem, and its solution "
                "where one was judged, against the device's peaks; problems whose FLOPs torch does not count "
                "appear only on the bandwidth panel)" for level, name in report["rooflines"].items()] + [""]
    else:
        backend = (report.get("settings") or {}).get("backend")
        out += [NOT_ON_CPU + "." if backend == "cpu" else "None drawn: no judged problem has a roofline.", ""]

    problems = sorted(report.get("problems", []), key=lambda r: (r["level"], r["problem_id"]))
    out += _flagged_section(report)

    out += _sol_section(report)

    out += ["## Problems", "",
            "| level | id | name | status | speed-up vs eager | speed-up vs compile | SOL score vs compile "
            "| flags | error, or why no speed-up |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in problems:
        out.append(
            f"| {r['level']} | {r['problem_id']} | {_cell(r.get('name', ''))} | "
            f"{_cell(r.get('status', ''))} | {times(r.get('speedup_vs_eager'), '-')} | "
            f"{times(r.get('speedup_vs_compile'), '-')} | {_score(r.get('sol_vs_compile'))} | "
            f"{_cell(', '.join(r.get('flags') or []))} | {_cell(why(r), REASON_CHARS)} |")
    return "\n".join(out) + "\n"


def no_speedup_table(report: dict):
    """The terminal's list of correct results without a speed-up, with why (None if there is none)."""
    from rich.table import Table

    rows = [r for r in sorted(report.get("problems", []), key=lambda r: (r["level"], r["problem_id"]))
            if r.get("correct") and r.get("speedup_vs_eager") is None]
    if not rows:
        return None
    table = Table(title="Correct, without a speed-up")
    for column in ("level", "id", "name", "why"):
        table.add_column(column, overflow="fold" if column == "why" else "ellipsis")
    for r in rows:
        table.add_row(str(r["level"]), str(r["problem_id"]), str(r.get("name", "")), shorten(why(r), REASON_CHARS))
    return table


def gigabytes(count: int | None) -> str:
    return f"{count / 1e9:.2f} GB" if count else "-"


def _baselines_section(report: dict) -> list[str]:
    out = ["## Baselines", "",
           "Every problem's reference, checked and timed here (means over timed calls; check time is "
           "the sum of each check's own seconds, which overlap when checks run at once; host memory is "
           "the most a check's worker process held, and the most a judging process held, which the pool "
           "reuses from check to check).", "",
           "| subset | problems | checked | timed | flagged | eager total | compile total | check time | "
           "largest worker (problem) | largest judge process |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for subset, b in (report.get("baselines") or {}).items():
        worker = (f"{gigabytes(b.get('worker_peak_bytes'))} ({b['worker_peak_problem']})"
                  if b.get("worker_peak_bytes") else "-")
        out.append(f"| {'all' if subset == 'all' else 'level ' + subset} | {b['problems']} | {b['checked']} | "
                   f"{b['timed']} | {b['flagged']} | {b['eager_ms_total']:.1f} ms | {b['compile_ms_total']:.1f} ms | "
                   f"{b['check_seconds']:.0f} s | {worker} | {gigabytes(b.get('judge_peak_bytes'))} |")
    return out + [""]


def _reference_table(report: dict) -> list[str]:
    def ms(stats: dict | None) -> str:
        return f"{stats['mean_ms']:.4g} / {stats['median_ms']:.4g}" if stats else "-"

    out = ["## Every reference", "", "| level | id | name | eager mean / median (ms) | compile mean / median (ms) | "
           "flags | error |", "|---|---|---|---|---|---|---|"]
    for r in sorted(report.get("references", []), key=lambda r: (r["level"], r["problem_id"])):
        out.append(f"| {r['level']} | {r['problem_id']} | {_cell(r['name'])} | {ms(r.get('eager'))} | "
                   f"{ms(r.get('compile'))} | {_cell(', '.join(r.get('flags') or []))} | {_cell(r.get('error') or '', 80)} |")
    return out + [""]


def _flagged_section(report: dict) -> list[str]:
    problems = sorted(report.get("problems", []), key=lambda r: (r["level"], r["problem_id"]))
    flagged = [r for r in problems if r.get("flags")]
    out = ["## Flagged problems", ""]
    if not flagged:
        return out + ["None.", ""]
    for r in flagged:
        out.append(f"- Level {r['level']} problem {r['problem_id']} ({_cell(r.get('name', ''))}): {', '.join(r['flags'])}")
    out += ["", "Flags:"]
    out += [f"- `{flag}`: {FLAG_MEANINGS.get(flag, 'no description')}" for flag in sorted({f for r in flagged for f in r["flags"]})]
    return out + [""]


def _speedups(records: list[dict], baseline: str) -> list[float]:
    key = f"speedup_vs_{baseline}"
    return [r[key] for r in records if r.get("correct") and r.get(key) is not None]


def _score(value: float | None) -> str:
    return f"{value:.3f}" if value is not None else "-"


def sol_scores(records: list[dict], baseline: str) -> list[float]:
    """The SOL scores against ``baseline`` of the records that have one (a correct solution, its
    speedup paid, on a GPU, where the judge draws rooflines)."""
    return [r[f"sol_vs_{baseline}"] for r in records if r.get(f"sol_vs_{baseline}") is not None]


def _sol_section(report: dict) -> list[str]:
    """Per level, the mean SOL score of the solutions that have one (``judge.roofline.sol_score``:
    0.5 at the baseline's time, 1 at the device's limit)."""
    out = ["## SOL score", "",
           "How much of the gap between a baseline's time and the least time the device's peaks allow "
           "a solution closes (SOL-ExecBench's score): 0.5 at the baseline, 1 at the limit. Means over "
           "the solutions that have one (correct, speedup paid, on a GPU).", ""]
    levels = _by_level(report)
    if not any(sol_scores(records, b) for _, _, records in levels for b in BASELINES):
        backend = (report.get("settings") or {}).get("backend")
        return out + [NOT_ON_CPU + "." if backend == "cpu" else "None measured: no judged solution has one.", ""]
    out += ["| level | solutions with a score | mean vs eager | mean vs compile |", "|---|---|---|---|"]
    for _, m, records in levels:
        means = [sum(v) / len(v) if v else None for v in (sol_scores(records, b) for b in BASELINES)]
        out.append(f"| {m['subset']} | {len(sol_scores(records, 'eager'))} | {_score(means[0])} | {_score(means[1])} |")
    return out + ["", "Per problem: [sol.png](sol.png).", ""]


def _plot_sol(report: dict) -> bytes:
    """One panel per level: each solution's SOL score against eager and against compile, with
    the baseline's 0.5 and the limit's 1 marked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = _by_level(report)
    fig, axes = plt.subplots(1, max(len(levels), 1), figsize=(4 * max(len(levels), 1), 4), squeeze=False)
    jitter = random.Random(0)
    try:
        for ax, (_, m, records) in zip(axes[0], levels):
            ax.set_title(f"{m['subset']}")
            ax.axhline(0.5, color="grey", linestyle="--", linewidth=1, label="the baseline")
            ax.axhline(1.0, color="black", linewidth=1, label="the device's limit")
            for i, baseline in enumerate(BASELINES):
                values = sol_scores(records, baseline)
                if values:
                    ax.scatter([i + jitter.uniform(-0.15, 0.15) for _ in values], values, s=14, alpha=0.7)
            ax.set_xticks(range(len(BASELINES)), [f"vs {b}" for b in BASELINES])
            ax.set_xlim(-0.6, len(BASELINES) - 0.4)
            ax.set_ylim(0.0, 1.05)
            ax.set_ylabel("SOL score")
            ax.legend(fontsize=8, loc="lower right")
        fig.suptitle(f"{report.get('label', '')}: SOL scores of correct solutions")
        return _png(fig)
    finally:
        plt.close(fig)


def _by_level(report: dict) -> list[tuple[str, dict, list[dict]]]:
    problems = report.get("problems", [])
    return [(k, report["levels"][k], [r for r in problems if str(r["level"]) == k])
            for k in sorted(report.get("levels", {}), key=int)]


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    return buf.getvalue()


def _plot_speedups(report: dict) -> bytes:
    """One panel per level: log2 speed-ups of correct solutions vs eager and vs compile."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = _by_level(report)
    fig, axes = plt.subplots(1, max(len(levels), 1), figsize=(4 * max(len(levels), 1), 4),
                             squeeze=False)
    jitter = random.Random(0)  # fixed seed: the same report gives the same picture
    try:
        for ax, (_, m, records) in zip(axes[0], levels):
            ax.set_title(f"{m['subset']} ({m['problems']} problems)")
            ax.axhline(0.0, color="grey", linestyle="--", linewidth=1)  # 1x: as fast as baseline
            data = [[math.log2(s) for s in _speedups(records, b)] for b in BASELINES]
            if not any(data):
                ax.text(0.5, 0.5, "no correct solutions\nwith speed-ups", ha="center",
                        va="center", transform=ax.transAxes)
                ax.set_ylim(-1.0, 1.0)  # keep the 1x line in the middle of the empty panel
            for i, values in enumerate(data):
                if values:
                    ax.boxplot(values, positions=[i], widths=0.5, showfliers=False)
                    ax.scatter([i + jitter.uniform(-0.15, 0.15) for _ in values], values,
                               s=12, alpha=0.6)
            ax.set_xticks(range(len(BASELINES)), [f"vs {b}" for b in BASELINES])
            ax.set_xlim(-0.6, len(BASELINES) - 0.4)
            ax.set_ylabel("log2 speed-up (0 = 1x)")
        for ax in axes[0][len(levels):]:
            ax.text(0.5, 0.5, "no levels", ha="center", va="center", transform=ax.transAxes)
        fig.suptitle(f"{report.get('label', '')}: speed-ups of correct solutions")
        return _png(fig)
    finally:
        plt.close(fig)


def _plot_fast_p(report: dict) -> bytes:
    """fast_p against p for each level, vs eager and vs compile: p from 0 to 3, or on to just
    past the largest speed-up, so every curve reaches zero."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    speedups = [r[f"speedup_vs_{b}"] for r in report.get("problems", []) for b in BASELINES
                if r.get("correct") and r.get(f"speedup_vs_{b}")]
    top = max([3.0] + [1.05 * s for s in speedups])
    ps = [top * i / 600 for i in range(601)]
    fig, axes = plt.subplots(1, len(BASELINES), figsize=(10, 4), sharey=True)
    try:
        for ax, b in zip(axes, BASELINES):
            for _, m, records in _by_level(report):
                ax.plot(ps, fast_p_curve(records, m["problems"], b, ps), label=m["subset"])
            ax.axvline(1.0, color="grey", linestyle="--", linewidth=1)
            ax.set_title(f"fast_p vs {b}")
            ax.set_xlabel("p (speed-up threshold)")
            ax.set_ylim(-0.02, 1.02)
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("share of problems correct and > p")
        if _by_level(report):
            axes[0].legend()
        fig.suptitle(str(report.get("label", "")))
        return _png(fig)
    finally:
        plt.close(fig)


def _plot_baselines(report: dict) -> bytes:
    """One panel per level: each problem's eager and torch.compile time (means over timed calls),
    log scale; a problem whose reference failed has no points."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from matplotlib.ticker import MaxNLocator

    references = report.get("references", [])
    levels = sorted({str(r["level"]) for r in references}, key=int) or sorted(report.get("levels", {}), key=int)
    fig, axes = plt.subplots(1, max(len(levels), 1), figsize=(5 * max(len(levels), 1), 4), squeeze=False)
    try:
        for ax, level in zip(axes[0], levels):
            rows = [r for r in references if str(r["level"]) == level]
            timed = 0
            for mode, marker in (("eager", "o"), ("compile", "s")):
                points = [(r["problem_id"], r[mode]["mean_ms"]) for r in rows
                          if (r.get(mode) or {}).get("mean_ms")]
                timed = max(timed, len(points))
                if points:
                    ax.scatter(*zip(*points), marker=marker, s=24, alpha=0.7,
                               label="torch.compile" if mode == "compile" else mode)
            if timed:
                ax.set_yscale("log")
                ax.legend(fontsize=8)
            else:
                ax.text(0.5, 0.5, "no reference timed", ha="center", va="center", transform=ax.transAxes)
            ax.set_title(f"Level {level}: {timed} of {len(rows)} problems timed")
            ax.set_xlabel("problem id")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_ylabel("time per call (ms, log scale)")
            ax.grid(alpha=0.3, which="both")
        if not levels:
            axes[0][0].text(0.5, 0.5, "no levels", ha="center", va="center", transform=axes[0][0].transAxes)
        device = (report.get("device") or {}).get("name") or (report.get("settings") or {}).get("backend", "")
        fig.suptitle("Baselines: eager and torch.compile per problem" + (f" on {device}" if device else ""))
        return _png(fig)
    finally:
        plt.close(fig)


def rooflines(out_dir: Path, report: dict) -> dict[str, dict]:
    """Each level's rooflines: {level: {"device", "problems": [{"id", "name", "roofline"}]}}, only
    where the judge drew one. A judged problem's comes from its verdict (eager, compile and the
    solution); a problem without one from its reference check (eager and compile)."""
    checked = {(str(r["level"]), r["problem_id"]): r.get("roofline") or {} for r in report.get("references", [])}
    found: dict[str, dict] = {}
    for level, _, records in _by_level(report):
        for r in records:
            try:
                roof = json.loads((Path(out_dir) / r["verdict"]).read_text()).get("roofline") or {}
            except (KeyError, TypeError, OSError, ValueError):
                roof = {}
            if not roof.get("drawn"):
                roof = checked.get((level, r["problem_id"]), {})
            if roof.get("drawn"):
                entry = found.setdefault(level, {"device": roof["device"], "problems": []})
                entry["problems"].append({"id": r["problem_id"], "name": r.get("name", ""), "roofline": roof})
    return found


_POINTS = (("eager", "o", 28), ("compile", "s", 28), ("candidate", "*", 70))


def _plot_roofline(level: str, entry: dict) -> bytes:
    """Two panels. Left, the roofline: achieved FLOP/s against arithmetic intensity, log-log,
    under the device's roofs, for problems with counted FLOPs (matmuls, convolutions,
    attention: what torch's FLOP counter counts). Right, every problem's achieved bandwidth
    against the bytes it must move, under the peak bandwidth: elementwise and reduction
    problems, whose FLOPs are not counted, show only there."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    problems = entry["problems"]
    counted = [p for p in problems if p["roofline"]["flops"] > 0]
    roofs = {(p["roofline"]["precision"], p["roofline"]["peak_flops_per_s"], p["roofline"]["peak_bytes_per_s"])
             for p in problems}
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    try:
        intensities = [p["roofline"]["intensity"] for p in counted]
        low, high = min(intensities + [1e-1]) / 3, max(intensities + [1e3]) * 3
        xs = [low * (high / low) ** (i / 200) for i in range(201)]
        for precision, flops, bandwidth in sorted(roofs):
            left.plot(xs, [min(flops, x * bandwidth) for x in xs], linewidth=1.5,
                      label=f"roof, {precision} ({flops / 1e12:.3g} TFLOP/s, {bandwidth / 1e12:.3g} TB/s)")
        _points_panel(left, counted, "intensity", "flops_per_s", "arithmetic intensity (FLOP per byte moved at least)",
                      "achieved FLOP/s", f"roofline: {len(counted)} problems with counted FLOPs")

        for bandwidth in sorted({b for _, _, b in roofs}):
            right.axhline(bandwidth, linewidth=1.5, label=f"peak bandwidth ({bandwidth / 1e12:.3g} TB/s)")
        _points_panel(right, problems, "bytes", "bytes_per_s", "bytes moved at least (inputs, weights, outputs)",
                      "achieved bytes/s", f"bandwidth: all {len(problems)} problems")
        fig.suptitle(f"Level {level} on {entry['device']}")
        return _png(fig)
    finally:
        plt.close(fig)


def _points_panel(ax, problems: list[dict], x: str, y: str, xlabel: str, ylabel: str, title: str) -> None:
    """One log-log panel over the lines already drawn on ``ax``: each problem's eager, compile
    and candidate points at its roofline's ``x`` and the point's ``y`` (problems with no
    positive ``x`` left out)."""
    for name, marker, size in _POINTS:
        points = [(p["roofline"][x], p["roofline"]["points"][name][y]) for p in problems
                  if name in p["roofline"]["points"] and (p["roofline"][x] or 0) > 0]
        if points:
            ax.scatter(*zip(*points), marker=marker, s=size, alpha=0.8, label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)


def write_report(out_dir: Path, report: dict) -> dict[str, Path]:
    """Write report.json, report.md and the plots into ``out_dir``: speedups.png and fast_p.png,
    or, for a run of baselines alone (nothing to speed up), baselines.png; and, on a GPU, one
    roofline_level{N}.png per level.

    Each file is written atomically. Returns ``{"json": ..., "markdown": ..., "speedups": ...,
    "fast_p": ... (or "baselines": ...), "roofline_level1": ..., ...}``.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "report.json", "markdown": out_dir / "report.md"}
    if (report.get("settings") or {}).get("baselines_only"):
        plots = {"baselines": _plot_baselines}
    else:
        plots = {"speedups": _plot_speedups, "fast_p": _plot_fast_p}
        if any(sol_scores(records, b) for _, _, records in _by_level(report) for b in BASELINES):
            plots["sol"] = _plot_sol
    drawn = rooflines(out_dir, report)
    report["rooflines"] = {level: f"roofline_level{level}.png" for level in drawn}
    write_atomic(paths["json"], json.dumps(report, indent=1) + "\n")
    write_atomic(paths["markdown"], render_markdown(report))
    for name, plot in plots.items():
        paths[name] = out_dir / f"{name}.png"
        write_atomic(paths[name], plot(report))
    for level, entry in drawn.items():
        paths[f"roofline_level{level}"] = out_dir / report["rooflines"][level]
        write_atomic(paths[f"roofline_level{level}"], _plot_roofline(level, entry))
    return paths
