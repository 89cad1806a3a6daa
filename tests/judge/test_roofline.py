"""Roofline feedback: the device's peaks (a datasheet table, else the judge's measurement), where
a timing stands against them, its lines in the verdict, and the bench report's plot per level."""

from __future__ import annotations

import json

import pytest
import torch

from cuda_agent.bench.report import rooflines, write_report
from cuda_agent.judge.floor import Peaks, count_workload
from cuda_agent.judge.roofline import NOT_ON_CPU, device_peaks, floor_peaks, not_drawn, render, roofline, sol_score

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
H100 = device_peaks("NVIDIA H100 80GB HBM3", None)


def test_known_gpus_come_from_the_table_and_others_from_the_measurement():
    assert H100.name == "H100 SXM" and H100.bytes_per_s == 3.35e12 and H100.flops_per_s[32] == 67e12
    assert "datasheet" in H100.source
    assert device_peaks("NVIDIA H200", None).bytes_per_s == 4.8e12
    assert device_peaks("NVIDIA H100 PCIe", None).name == "H100 PCIe"
    assert device_peaks("NVIDIA A100-SXM4-80GB", None).bytes_per_s == 2.039e12
    measured = device_peaks("Tesla T4", Peaks(bytes_per_s=3e11, flops_per_s=6e13))
    assert measured.bytes_per_s == 3e11 and measured.flops_per_s[16] == 6e13 and "measured" in measured.source
    assert device_peaks("Tesla T4", None) is None


def test_an_elementwise_task_is_memory_bound_and_its_points_are_fractions_of_peak():
    # 4M float32 elements in, 4M out, one FLOP each.
    n = 4 * 1024 * 1024
    workload = {"flops": float(n), "input_bytes": 4.0 * n, "output_bytes": 4.0 * n, "float_bits": 32.0}
    least_ms = 8.0 * n / 3.35e12 * 1e3
    roof = roofline(workload, H100, {"candidate": least_ms * 2, "eager": least_ms * 4, "compile": None})
    assert roof["drawn"] and roof["bound"] == "memory" and roof["precision"] == "float32"
    assert roof["intensity"] == pytest.approx(0.125) and roof["ridge"] == pytest.approx(67e12 / 3.35e12)
    assert roof["least_ms"] == pytest.approx(least_ms)
    assert set(roof["points"]) == {"candidate", "eager"}  # no time, no point
    candidate = roof["points"]["candidate"]
    assert candidate["of_roofline"] == pytest.approx(0.5) and candidate["bytes_fraction"] == pytest.approx(0.5)
    assert roof["points"]["eager"]["of_roofline"] == pytest.approx(0.25)
    lines = render(roof)
    assert "memory-bound" in lines[0] and "H100 SXM" in lines[0]
    assert lines[1].startswith("  candidate") and "50% of the roofline" in lines[1]
    # SOL score: the candidate at twice the limit, eager at four times:
    # 1 / (1 + (2 - 1) / (4 - 1)) = 0.75; none against a baseline with no time.
    assert roof["sol_score"] == {"eager": pytest.approx(0.75)}
    assert lines[-1] == "  SOL score (0.5 at the baseline, 1 at the limit): 0.750 against eager"


def test_the_sol_score_is_a_half_at_the_baseline_and_one_at_the_limit():
    assert sol_score(4.0, 4.0, 1.0) == pytest.approx(0.5)
    assert sol_score(1.0, 4.0, 1.0) == pytest.approx(1.0)
    assert sol_score(7.0, 4.0, 1.0) == pytest.approx(1 / 3)  # slower than the baseline: below a half
    assert sol_score(2.0, 1.0, 1.0) is None  # a baseline at the limit leaves no gap to close
    # Below the estimated limit (redundant work skipped): 1, never more and never a wrap-around.
    assert [sol_score(t, 1.1, 1.0) for t in (0.91, 0.9, 0.89, 0.5)] == [1.0, 1.0, 1.0, 1.0]


def test_a_half_precision_gemm_is_compute_bound_against_the_tensor_cores():
    n = 8192
    workload = {"flops": 2.0 * n**3, "input_bytes": 2.0 * 2 * n * n, "output_bytes": 2.0 * n * n, "float_bits": 16.0}
    roof = roofline(workload, H100, {"candidate": 2.0})
    assert roof["bound"] == "compute" and roof["peak_flops_per_s"] == 989.4e12
    assert roof["points"]["candidate"]["flops_fraction"] == pytest.approx(2.0 * n**3 / 2e-3 / 989.4e12)


def test_not_drawn_says_why():
    assert render(not_drawn(NOT_ON_CPU)) == [f"roofline: not drawn ({NOT_ON_CPU})"]
    assert render({}) == []


def test_the_workload_counts_inputs_parameters_and_outputs():
    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(64, 32)

        def forward(self, x, scale):  # a non-tensor argument moves no bytes
            return self.linear(x) * scale

    model, x = Scaled(), torch.randn(8, 64)
    out = model(x, 3)
    w = count_workload(model, [x, 3], [out])
    assert w["flops"] == 2 * 8 * 64 * 32  # the matmul; the flop counter counts no elementwise ops
    assert w["input_bytes"] == 4 * (8 * 64 + 64 * 32 + 32) and w["output_bytes"] == 4 * 8 * 32
    assert w["float_bits"] == 32


def test_the_bench_report_draws_one_roofline_per_level_from_the_verdicts(tmp_path):
    workload = {"flops": 1e9, "input_bytes": 4e7, "output_bytes": 4e7, "float_bits": 32.0}
    problems = []
    for pid in (1, 2):
        roof = roofline(workload, H100, {"candidate": 0.05 * pid, "eager": 0.1, "compile": 0.08})
        path = tmp_path / "verdicts" / f"p{pid}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps({"roofline": roof}))
        problems.append({"level": 1, "problem_id": pid, "name": f"{pid}_Op.py", "status": "ok", "correct": True,
                         "speedup_vs_eager": 1.0, "speedup_vs_compile": 1.0, "verdict": f"verdicts/p{pid}.json",
                         "flags": []})
    problems.append({"level": 2, "problem_id": 1, "name": "1_Op.py", "status": "missing", "correct": False,
                     "flags": []})
    # Level 1 problem 3 has no solution and no counted FLOPs (elementwise): its reference check's
    # roofline puts its baselines on the bandwidth panel.
    elementwise = roofline({**workload, "flops": 0.0}, H100, {"eager": 0.2, "compile": 0.1})
    problems.append({"level": 1, "problem_id": 3, "name": "3_Op.py", "status": "missing", "correct": False,
                     "flags": []})
    references = [{"level": 1, "problem_id": 3, "roofline": elementwise},
                  {"level": 2, "problem_id": 1, "roofline": not_drawn("no reason")}]
    from cuda_agent.bench.metrics import level_metrics, overall_metrics

    levels = {str(k): level_metrics(k, [p for p in problems if p["level"] == k], 3) for k in (1, 2)}
    report = {"label": "t", "settings": {"backend": "cuda"}, "levels": {k: m.to_dict() for k, m in levels.items()},
              "overall": overall_metrics(list(levels.values())).to_dict(), "problems": problems,
              "references": references}
    drawn = rooflines(tmp_path, report)
    assert [p["id"] for p in drawn["1"]["problems"]] == [1, 2, 3] and "2" not in drawn
    assert set(drawn["1"]["problems"][2]["roofline"]["points"]) == {"eager", "compile"}
    paths = write_report(tmp_path, report)
    assert paths["roofline_level1"].name == "roofline_level1.png" and "roofline_level2" not in paths
    assert paths["roofline_level1"].read_bytes().startswith(PNG_MAGIC)
    assert "[roofline_level1.png](roofline_level1.png)" in paths["markdown"].read_text()

    report["settings"]["backend"] = "cpu"
    report["references"] = []
    for p in problems:
        p.pop("verdict", None)
    cpu = write_report(tmp_path / "cpu", report)
    assert not [k for k in cpu if k.startswith("roofline")]
    assert NOT_ON_CPU in cpu["markdown"].read_text()


def test_the_floor_never_divides_by_less_than_a_known_gpus_datasheet_bandwidth():
    # A copy timed while other processes shared the GPU read 0.45 TB/s on an H200 (4.8 TB/s):
    # that floor refused honest kernels. The datasheet's bandwidth bounds it from below.
    shared = Peaks(bytes_per_s=4.5e11, flops_per_s=9e14)
    assert floor_peaks("NVIDIA H200", shared) == Peaks(4.8e12, 9e14)
    quiet = Peaks(bytes_per_s=5.0e12, flops_per_s=9e14)
    assert floor_peaks("NVIDIA H200", quiet) == quiet
    assert floor_peaks("Some Future GPU", shared) == shared  # unknown: the measurement stands
