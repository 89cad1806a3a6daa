"""The comparison of our baselines with KernelBench's: ratios, their spread, and the reasons given."""

from __future__ import annotations

import pytest

from cuda_agent.bench.baseline_comparison import compare, likely_reason, spread, to_markdown


def _reference(level: int, name: str, eager: float, compiled: float) -> dict:
    return {"level": level, "problem_id": int(name.split("_")[0]), "name": name,
            "eager": {"mean_ms": eager}, "compile": {"mean_ms": compiled},
            "device": {"name": "GPU X", "torch_version": "2.11"}}


def _theirs(rows: dict[str, tuple[float, float]]) -> dict:
    return {mode: {key: {"mean": values[i], "hardware": "GPU Y"} for key, values in rows.items()}
            for i, mode in enumerate(("eager", "compile"))}


def test_spread_is_the_median_and_quantiles_of_the_ratios():
    s = spread([0.5, 1.0, 1.1, 1.2, 3.0])
    assert s["median"] == 1.1 and s["min"] == 0.5 and s["max"] == 3.0
    assert s["p25"] == pytest.approx(1.0) and s["p75"] == pytest.approx(1.2)
    assert s["within_25pct"] == 3
    assert spread([]) == {"problems": 0}


def test_outliers_are_listed_with_the_reason_the_numbers_give():
    references = [_reference(1, "1_A.py", 2.0, 1.0), _reference(1, "2_B.py", 1.0, 2.0),
                  _reference(2, "1_C.py", 2.0, 2.0), _reference(2, "2_D.py", 1.1, 0.9),
                  _reference(3, "1_E.py", 0.05, 0.05), _reference(3, "2_F.py", 1.0, 1.0)]
    theirs = _theirs({"level1/1_A.py": (1.0, 1.0), "level1/2_B.py": (1.0, 1.0), "level2/1_C.py": (1.0, 1.0),
                      "level2/2_D.py": (1.0, 1.0), "level3/1_E.py": (0.02, 0.05)})
    result = compare(references, theirs, min_ms=0.1)
    reasons = {row["name"]: row["reason"] for row in result["outliers"]}
    assert set(reasons) == {"1_A.py", "2_B.py", "1_C.py", "1_E.py"}  # 2_D is within 25% in both modes
    assert "eager alone slower" in reasons["1_A.py"]
    assert "torch.compile alone slower" in reasons["2_B.py"]
    assert "both slower" in reasons["1_C.py"]
    assert "under 0.1 ms" in reasons["1_E.py"]
    assert result["unmatched"] == ["level3/2_F.py"]
    assert result["modes"]["eager"]["problems"] == 5 and result["levels"]["2"]["eager"]["median"] == pytest.approx(1.55)
    assert result["ours"] == {"device": "GPU X", "torch": "2.11"} and result["theirs"] == {"hardware": "GPU Y"}
    text = to_markdown(result)
    assert "| all | eager | 5 |" in text and "| L2 1_C.py | 2 / 1 | 2 |" in text


def test_a_problem_faster_here_in_one_mode_and_slower_in_the_other():
    reason = likely_reason({"eager": 0.5, "compile": 1.6}, {"eager": 1.0, "compile": 1.0}, 0.1)
    assert "opposite directions" in reason


def test_training_mode_layers_and_far_off_eager_times_are_named():
    references = [_reference(1, "33_BatchNorm.py", 3.5, 2.8), _reference(1, "12_Diag.py", 0.5, 0.5)]
    theirs = _theirs({"level1/33_BatchNorm.py": (8.8, 4.4), "level1/12_Diag.py": (2.7, 2.7)})
    result = compare(references, theirs, min_ms=0.1, train_mode_differs={"level1/33_BatchNorm.py"})
    reasons = {row["name"]: row["reason"] for row in result["outliers"]}
    assert reasons["33_BatchNorm.py"].startswith("the model has layers that run otherwise in training mode")
    assert "training mode" in reasons["33_BatchNorm.py"]
    assert "over 2x off in eager" in reasons["12_Diag.py"] and "over 2x" not in reasons["33_BatchNorm.py"]


def test_mode_dependent_sources():
    from cuda_agent.bench.baseline_comparison import mode_dependent

    assert mode_dependent("self.bn = nn.BatchNorm2d(c)") and mode_dependent("x = F.dropout(x, 0.1)")
    assert not mode_dependent("self.norm = nn.LayerNorm(c)")
    # cuDNN's RNNs and attention's fast path are told the mode, whatever their dropout
    assert mode_dependent("self.lstm = nn.LSTM(i, h, n, batch_first=True, dropout=0.0)")
    assert mode_dependent("self.attn = nn.MultiheadAttention(d, heads)")
    # a rate that is not a literal 0 may be live; one that is cannot
    assert mode_dependent("self.drop = nn.Dropout(drop)") and mode_dependent("nn.Dropout(p=0.1)")
    assert mode_dependent("layer = Block(d, dropout=rate)")
    assert not mode_dependent("self.drop = nn.Dropout(0.0)") and not mode_dependent("nn.Dropout(p=0.)")
    assert not mode_dependent("def __init__(self, c, dropout=0.0):\n    self.c = c\n")
    # words in docstrings and comments are not layers
    assert not mode_dependent('def f(x):\n    """If non-zero, introduces a Dropout layer."""\n    return x  # no BatchNorm\n')


def test_an_unsteady_time_of_ours_is_named_before_other_reasons():
    lstm = _reference(3, "35_LSTM.py", 64.6, 55.6)
    lstm["eager"].update(stable=False, sessions_ms=[20.0, 23.7, 346.8, 25.4, 25.6], median_ms=25.4)
    steady = _reference(3, "36_LSTMHn.py", 18.9, 22.1)
    steady["eager"].update(stable=True, sessions_ms=[18.0, 18.5, 19.0, 18.9, 18.7])
    theirs = _theirs({"level3/35_LSTM.py": (27.2, 37.4), "level3/36_LSTMHn.py": (35.8, 35.4)})
    result = compare([lstm, steady], theirs, train_mode_differs={"level3/35_LSTM.py", "level3/36_LSTMHn.py"})
    reasons = {row["name"]: row["reason"] for row in result["outliers"]}
    assert reasons["35_LSTM.py"].startswith("our timing was unsteady")
    assert "(eager 20-347 ms, median call 25.4 ms)" in reasons["35_LSTM.py"]  # compile's sessions agreed
    assert "training mode" in reasons["35_LSTM.py"]
    assert "unsteady" not in reasons["36_LSTMHn.py"] and "training mode" in reasons["36_LSTMHn.py"]


def test_the_spread_without_training_mode_layers_leaves_them_out():
    references = [_reference(1, "1_A.py", 1.0, 1.0), _reference(1, "2_BN.py", 0.4, 0.4)]
    theirs = _theirs({"level1/1_A.py": (1.0, 1.0), "level1/2_BN.py": (1.0, 1.0)})
    result = compare(references, theirs, train_mode_differs={"level1/2_BN.py"})
    assert result["modes"]["eager"]["problems"] == 2
    assert result["modes_without_training_mode_layers"]["eager"] == spread([1.0])
    assert "| all without training-mode layers | eager | 1 |" in to_markdown(result)


def test_a_problem_not_timed_here_is_not_called_missing_from_their_files():
    failed = {"level": 1, "problem_id": 3, "name": "3_G.py", "eager": None, "compile": None}
    theirs = _theirs({"level1/3_G.py": (1.0, 1.0)})
    result = compare([failed, _reference(1, "4_H.py", 1.0, 1.0)], theirs)
    assert result["not_timed_here"] == ["level1/3_G.py"] and result["unmatched"] == ["level1/4_H.py"]
    text = to_markdown(result)
    assert "not timed here" in text and "Not in KernelBench's files: level1/4_H.py" in text


def test_a_mode_not_compared_is_not_said_to_agree():
    reason = likely_reason({"eager": 2.0, "compile": None}, {"eager": 1.0, "compile": None}, 0.1)
    assert "torch.compile not compared" in reason and "alone" not in reason
    reason = likely_reason({"eager": None, "compile": 0.5}, {"eager": None, "compile": 1.0}, 0.1)
    assert "eager not compared" in reason and "alone" not in reason
