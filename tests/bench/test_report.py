"""KernelBench reports: files, Markdown layout and plots."""

from __future__ import annotations

import json

from cuda_agent.bench.metrics import Metrics, level_metrics, overall_metrics
from cuda_agent.bench.report import PAPER_TABLE1, REASON_CHARS, render_markdown, write_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def rec(level, pid, *, correct=False, eager=None, compile=None, status=None, flags=(),
        error=None, sol=None):
    return {"level": level, "problem_id": pid, "name": f"{pid}_Op.py", "sample": 0,
            "status": status or ("ok" if correct else "incorrect"), "correct": correct,
            "speedup_vs_eager": eager, "speedup_vs_compile": compile,
            "sol_vs_eager": sol and sol[0], "sol_vs_compile": sol and sol[1], "candidate_ms": None,
            "eager_ms": None, "compile_ms": None, "reward": 0, "flags": list(flags),
            "error": error}


def make_report(records: dict[int, tuple[list[dict], int]], label="my-model") -> dict:
    levels = {str(k): level_metrics(k, rs, n) for k, (rs, n) in records.items()}
    return {"label": label, "created": "2025-01-01T00:00:00+00:00",
            "device": {"name": "Test GPU", "capability": "9.0"},
            "settings": {"backend": "inductor", "samples": 1},
            "levels": {k: m.to_dict() for k, m in levels.items()},
            "overall": overall_metrics(list(levels.values())).to_dict(),
            "problems": [r for rs, _ in records.values() for r in rs]}


LONG_ERROR = "RuntimeError: shape | mismatch " + "x" * 200


def sample_report() -> dict:
    return make_report({
        1: ([rec(1, 1, correct=True, eager=2.0, compile=1.5),
             rec(1, 2, correct=True, eager=1.5, compile=0.8),
             rec(1, 3, correct=True, eager=0.5, compile=0.25),
             rec(1, 4, status="runtime_error", error=LONG_ERROR)], 5),
        3: ([rec(3, 1, status="incorrect", flags=["reference_nondeterministic"]),
             rec(3, 2, status="compile_error", error="nvcc: a|b")], 2),
    })


def test_markdown_table_rows_and_paper_rows():
    md = render_markdown(sample_report())
    assert md.startswith("# KernelBench report: my-model")
    assert "Test GPU" in md and "inductor" in md
    # Level 1: pass 3/5, faster 2/5 and 1/5, geomeans (2*1.5*0.5)^(1/3) = 1.14, 0.3^(1/3) = 0.67.
    assert "| Level 1 (5) | **my-model** | 60.0% | 40.0% | 20.0% | 1.14x | 0.67x |" in md
    # Level 3 has no correct solution.
    assert "| Level 3 (2) | **my-model** | 0.0% | 0.0% | 0.0% | n/a | n/a |" in md
    # Overall over 7 problems: pass 3/7 = 42.9%.
    assert "| Overall (7) | **my-model** | 42.9% |" in md
    # The paper's rows for the same subsets, but not for Level 2 (not in this report).
    assert "|  | CUDA Agent [paper] | 98.8% | 98.4% | 96.8% | 2.60x | 2.11x |" in md
    assert "|  | CUDA Agent [paper] | 100.0% | 99.0% | 97.0% | 2.48x | 1.87x |" in md
    assert "3.27x" not in md
    assert "100/100/50" in md


def test_markdown_fast_p_flags_and_problems():
    md = render_markdown(sample_report())
    assert "## fast_p" in md and "p = 1.5" in md
    assert "| vs eager | 60.0% | 40.0% | 40.0% | 40.0% | 20.0% | 0.0% |" in md
    flagged = md.split("## Flagged problems")[1].split("## Problems")[0]
    assert "Level 3 problem 1" in flagged and "reference_nondeterministic" in flagged
    assert "not the solution's fault" in flagged
    assert "Level 1 problem" not in flagged
    assert "nvcc: a\\|b" in md  # pipes escaped
    row = next(line for line in md.splitlines() if line.startswith("| 1 | 4 |"))
    assert "shape \\| mismatch" in row and row.endswith("... |") and "x" * REASON_CHARS not in row
    assert "| 1 | 1 | 1_Op.py | ok | 2.00x | 1.50x |" in md
    # Every table row of the problem table has exactly 9 cells (unescaped pipes).
    for line in md.split("## Problems")[1].splitlines():
        if line.startswith("|"):
            assert line.replace("\\|", "").count("|") == 10


def test_write_report_files(tmp_path):
    report = sample_report()
    paths = write_report(tmp_path / "out", report)
    assert set(paths) == {"json", "markdown", "speedups", "fast_p"}
    assert {p.name for p in paths.values()} == {"report.json", "report.md", "speedups.png",
                                                "fast_p.png"}
    for key in ("speedups", "fast_p"):
        data = paths[key].read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000
    assert paths["markdown"].read_text() == render_markdown(report)
    loaded = json.loads(paths["json"].read_text())
    assert loaded == report
    assert Metrics.from_dict(loaded["levels"]["1"]).to_dict() == report["levels"]["1"]


def test_level_with_no_correct_solutions_renders(tmp_path):
    report = make_report({3: ([rec(3, 1), rec(3, 2, status="timeout")], 50)}, label="weak")
    paths = write_report(tmp_path, report)
    md = paths["markdown"].read_text()
    assert "| Level 3 (50) | **weak** | 0.0% | 0.0% | 0.0% | n/a | n/a |" in md
    assert "Flagged problems\n\nNone." in md
    assert paths["speedups"].read_bytes().startswith(PNG_MAGIC)
    assert paths["fast_p"].read_bytes().startswith(PNG_MAGIC)


def test_paper_table_is_complete():
    assert set(PAPER_TABLE1) == {"Overall", "Level 1", "Level 2", "Level 3"}
    for rows in PAPER_TABLE1.values():
        assert [r["model"] for r in rows][-1] == "CUDA Agent" and len(rows) == 6
        for r in rows:
            assert all(0 <= r[k] <= 1 for k in ("pass_rate", "faster_vs_eager",
                                                "faster_vs_compile"))
    agent = {s: rows[-1] for s, rows in PAPER_TABLE1.items()}
    assert agent["Level 2"]["speedup_vs_compile"] == 2.80
    assert agent["Overall"]["pass_rate"] == 0.988


def test_the_baseline_summary_counts_a_failed_reference_once():
    from cuda_agent.bench.assemble import baseline_summary

    references = [{"level": 1, "name": "1_A.py", "ok": True, "flags": ["baseline_too_fast"], "seconds": 2.0,
                   "eager": {"mean_ms": 0.05}, "compile": {"mean_ms": 0.04}},
                  {"level": 1, "name": "2_B.py", "ok": False, "flags": ["reference_failed"], "seconds": 1.0},
                  {"level": 1, "name": "3_C.py", "ok": True, "flags": [], "seconds": 3.0,
                   "eager": {"mean_ms": 1.0}, "compile": {"mean_ms": 0.5}}]
    summary = baseline_summary(references, {1: [object()] * 4})
    level = summary["1"]
    assert (level["problems"], level["checked"], level["timed"]) == (4, 3, 2)
    assert level["failed"] == ["2_B.py"] and level["flagged"] == 1
    assert level["eager_ms_total"] == 1.05 and level["check_seconds"] == 6.0
    assert summary["all"]["flagged"] == 1


def test_the_baseline_summary_names_the_problem_whose_worker_held_the_most_host_memory():
    from cuda_agent.bench.assemble import baseline_summary
    from cuda_agent.bench.report import _baselines_section

    references = [{"level": 1, "name": "1_A.py", "ok": True, "seconds": 1.0, "worker_peak_bytes": 2_000_000_000,
                   "judge_peak_bytes": 700_000_000},
                  {"level": 1, "name": "2_B.py", "ok": True, "seconds": 1.0, "worker_peak_bytes": 9_500_000_000,
                   "judge_peak_bytes": 600_000_000},
                  {"level": 2, "name": "1_C.py", "ok": True, "seconds": 1.0}]  # recorded before peaks were
    summary = baseline_summary(references, {1: [object()] * 2, 2: [object()]})
    assert (summary["1"]["worker_peak_bytes"], summary["1"]["worker_peak_problem"]) == (9_500_000_000, "2_B.py")
    assert summary["1"]["judge_peak_bytes"] == 700_000_000
    assert summary["2"]["worker_peak_bytes"] is None and summary["2"]["judge_peak_bytes"] is None
    assert summary["all"]["worker_peak_problem"] == "2_B.py"
    lines = "\n".join(_baselines_section({"baselines": summary}))
    assert "| 9.50 GB (2_B.py) | 0.70 GB |" in lines and "| - | - |" in lines


def test_a_long_reason_is_cut_at_a_words_end():
    reason = "no speed-up: " + " ".join(f"cause{i}" for i in range(60))
    report = make_report({1: ([{**rec(1, 1, correct=True), "no_speedup": reason}], 1)})
    row = next(line for line in render_markdown(report).splitlines() if line.startswith("| 1 | 1 |"))
    cell = row.split(" | ")[-1]
    assert cell.startswith("no speed-up: cause0 cause1") and cell.endswith("... |")
    assert len(cell) <= REASON_CHARS + 2 and reason.startswith(cell[:-len("... |")] + " ")


def test_a_baselines_only_report_draws_the_baselines_not_empty_speedups(tmp_path):
    def reference(pid, eager, compile):
        return {"level": 1, "problem_id": pid, "name": f"{pid}_Op.py", "ok": eager is not None, "flags": [],
                "eager": eager and {"mean_ms": eager, "median_ms": eager},
                "compile": compile and {"mean_ms": compile, "median_ms": compile}}

    report = make_report({1: ([], 3)}, label="baselines")
    report["settings"]["baselines_only"] = True
    report["references"] = [reference(1, 12.0, 9.0), reference(2, 0.4, 0.5), reference(3, None, None)]
    paths = write_report(tmp_path, report)
    assert set(paths) == {"json", "markdown", "baselines"}
    assert paths["baselines"].read_bytes().startswith(PNG_MAGIC) and len(paths["baselines"].read_bytes()) > 5000
    assert not (tmp_path / "speedups.png").exists() and not (tmp_path / "fast_p.png").exists()
    assert "(baselines.png)" in paths["markdown"].read_text()


def test_sol_scores_get_a_column_a_section_and_a_plot(tmp_path):
    report = make_report({1: ([rec(1, 1, correct=True, eager=2.0, compile=1.5, sol=(0.8, 0.7)),
                               rec(1, 2, correct=True, eager=1.1, compile=0.9, sol=(0.6, 0.4)),
                               rec(1, 3, status="incorrect")], 3)})
    md = render_markdown(report)
    assert "| Level 1 | 2 | 0.700 | 0.550 |" in md.split("## SOL score")[1]
    assert "| 1 | 1 | 1_Op.py | ok | 2.00x | 1.50x | 0.700 |" in md
    assert "| 1 | 3 | 3_Op.py | incorrect | - | - | - |" in md
    paths = write_report(tmp_path, report)
    assert paths["sol"].name == "sol.png" and paths["sol"].read_bytes().startswith(PNG_MAGIC)
    # Without a score (the cpu backend draws no roofline): the section says why, and no plot.
    plain = sample_report()
    plain["settings"]["backend"] = "cpu"
    assert "no roofline on the CPU backend" in render_markdown(plain).split("## SOL score")[1]
    assert "sol" not in write_report(tmp_path / "plain", plain)
