"""The synthesised dataset and its card: files, loading through `datasets`, statistics, plots."""

from __future__ import annotations

import json
import math

import pyarrow.parquet as pq
import pytest

from cuda_agent.synth.card import (PAPER_TABLE3, SIMILARITY_PNG, TIMING_PNG, UNFINISHED,
                                   summarize, write_card)
from cuda_agent.synth.dataset import COLUMNS, SCHEMA, load_rows, task_row, write_dataset
from cuda_agent.synth.records import FILTER_MEANINGS, FILTERS, Candidate, FilterResult, Outcome

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SETTINGS = {"device": "Test GPU", "window_ms": [1, 100], "seed": 0, "model": "offline"}


def make(index, data_source, ops, *, fail_at=None, eager=None, sim=None, filters=True,
         composer="offline"):
    """An outcome that passed every filter up to ``fail_at`` (failed there), or all of them."""
    cand = Candidate(index=index, code=f"# task {index}\nclass Model: ...\n", ops=list(ops),
                     data_source=data_source, composer=composer,
                     input_shapes=[[8, 3, 32, 32], [4]], output_shape=[8, 16, 30, 30],
                     estimate_ms=None if eager is None else eager * 0.9)
    results = []
    for name in (FILTERS if filters else ()):
        failed = name == fail_at
        results.append(FilterResult(name, not failed, {"value": index, "diff": math.inf},
                                    "failed" if failed else ""))
        if failed:
            break
    return Outcome(cand, results, accepted=filters and fail_at is None, device="Test GPU",
                   eager_ms=eager, compile_ms=None if eager is None else eager / 2,
                   max_similarity=sim, most_similar=None if sim is None else "level1/1_x.py")


def sample() -> list[Outcome]:
    return [
        make(0, "torch#2", ["nn.Conv2d", "F.gelu"], eager=5.0, sim=0.3),
        make(1, "torch#2", ["nn.Linear", "F.relu"], eager=2.0, sim=0.25),
        make(2, "torch#1", ["torch.cumsum"], eager=1.5, sim=0.5),
        make(3, "transformers#1", ["LlamaMLP"], eager=20.0, sim=0.2, composer="llm:m"),
        make(4, "torch#3", ["nn.Conv2d", "F.relu", "torch.cumsum"], eager=50.0, sim=0.4),
        make(5, "torch#2", ["F.dropout", "F.relu"], fail_at="deterministic_ops"),
        make(6, "torch#2", ["nn.Conv2d", "F.gelu"], fail_at="duplicate"),
        make(7, "torch#1", ["nn.Conv2d"], fail_at="kernelbench_similarity", sim=0.95),
        make(8, "torch#2", ["torch.log", "F.relu"], fail_at="finite"),
        make(9, "torch#2", ["F.relu", "F.gelu"], fail_at="workload_window", eager=0.2),
        make(10, "torch#4", ["nn.Conv3d"] * 4, fail_at="workload_window", eager=300.0),
        make(11, "torch#2", ["torch.sort", "F.relu"], fail_at="compile_matches", eager=3.0),
        make(12, "torch#2", ["F.relu", "F.relu"], filters=False),
    ]


def build(out, outcomes, seed_counts=None, settings=SETTINGS):
    rows = [task_row(o, f"task-{o.candidate.index:04d}") for o in outcomes if o.accepted]
    paths = write_dataset(rows, out)
    readme = write_card(out, outcomes, seed_counts, settings)
    return rows, paths, readme


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("ds")
    rows, paths, readme = build(out, sample(), {"module": 10, "functional": 5, "transformers": 2})
    return out, rows, paths, readme


def is_png(path) -> bool:
    import matplotlib.image

    data = path.read_bytes()
    return (data.startswith(PNG_MAGIC) and len(data) > 1000
            and matplotlib.image.imread(path).ndim == 3)  # decodes as an image


# --- dataset rows and files ----------------------------------------------------------------------

def test_task_row_columns_and_filters_json():
    row = task_row(sample()[0], "t0")
    assert list(row) == list(COLUMNS)
    assert list(COLUMNS[:3]) == ["code", "ops", "data_source"]
    assert row["ops"] == ["nn.Conv2d", "F.gelu"] and row["data_source"] == "torch#2"
    assert row["n_ops"] == 2 and row["id"] == "t0" and row["eager_ms"] == 5.0
    assert row["max_kernelbench_similarity"] == 0.3
    filters = json.loads(row["filters"])
    assert list(filters) == list(FILTERS)
    assert filters["finite"] == {"passed": True, "measurement": {"value": 0, "diff": "inf"}}


def test_files_written_atomically_and_round_trip(built):
    out, rows, paths, _ = built
    assert paths == {"parquet": out / "data/train.parquet", "jsonl": out / "data/train.jsonl"}
    assert sorted(p.name for p in (out / "data").iterdir()) == ["train.jsonl", "train.parquet"]
    assert load_rows(paths["jsonl"]) == rows
    assert load_rows(paths["parquet"]) == rows
    assert load_rows(out) == rows
    assert pq.read_schema(paths["parquet"]).remove_metadata() == SCHEMA


def test_empty_and_all_null_columns_keep_their_types(tmp_path):
    paths = write_dataset([], tmp_path / "empty")
    assert pq.read_schema(paths["parquet"]).remove_metadata() == SCHEMA
    # No empty row group: readers that batch by the first row group's size would ask for 0 rows.
    assert pq.ParquetFile(paths["parquet"]).metadata.num_row_groups == 0
    assert load_rows(paths["parquet"]) == [] and load_rows(paths["jsonl"]) == []
    o = make(0, "torch#1", ["torch.cumsum"])  # no timings, no similarity
    o.candidate.output_shape = None
    paths = write_dataset([task_row(o, "a")], tmp_path / "nulls")
    assert pq.read_schema(paths["parquet"]).remove_metadata() == SCHEMA
    assert load_rows(paths["parquet"]) == load_rows(paths["jsonl"]) == [task_row(o, "a")]


def test_rows_with_wrong_columns_are_refused(tmp_path):
    row = task_row(sample()[0], "x")
    del row["device"]
    with pytest.raises(ValueError, match="device"):
        write_dataset([row], tmp_path)


def test_loads_with_datasets_both_ways(built, tmp_path):
    datasets = pytest.importorskip("datasets")
    out, rows, paths, _ = built
    by_folder = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "c1"))["train"]
    by_file = datasets.load_dataset("parquet", data_files=str(paths["parquet"]),
                                    cache_dir=str(tmp_path / "c2"))["train"]
    for ds in (by_folder, by_file):
        assert ds.column_names == list(COLUMNS)
        assert ds.num_rows == len(rows) == 5  # train.jsonl is not read as a second file
        assert ds[0]["ops"] == ["nn.Conv2d", "F.gelu"] and ds[0]["data_source"] == "torch#2"
        assert ds["data_source"] == [r["data_source"] for r in rows]
        assert ds["code"] == [r["code"] for r in rows]
    # The card's configs block is what names the data: one file, the Parquet one.
    builder = datasets.load_dataset_builder(str(out), cache_dir=str(tmp_path / "c3"))
    files = [str(f) for f in builder.config.data_files["train"]]
    assert len(files) == 1 and files[0].endswith("data/train.parquet")


# --- statistics ----------------------------------------------------------------------------------

def test_summarize_numbers():
    stats = summarize(sample(), {"transformers": 2, "module": 10, "custom": 1}, SETTINGS)
    assert stats["candidates"] == 13 and stats["accepted"] == 5
    assert stats["acceptance_rate"] == pytest.approx(5 / 13)
    reached_passed = {f["name"]: (f["reached"], f["passed"]) for f in stats["filters"]}
    assert [f["name"] for f in stats["filters"]] == list(FILTERS)
    assert reached_passed == {
        "deterministic_ops": (12, 11), "duplicate": (11, 10), "kernelbench_similarity": (10, 9),
        "eager_runs": (9, 9), "finite": (9, 8), "deterministic_runs": (8, 8),
        "not_constant": (8, 8), "input_dependent": (8, 8), "workload_window": (8, 6),
        "compile_matches": (6, 5)}
    assert stats["filters"][-2]["pass_rate"] == pytest.approx(0.75)
    assert stats["rejected_by"] == {
        "deterministic_ops": 1, "duplicate": 1, "kernelbench_similarity": 1, "finite": 1,
        "workload_window": 2, "compile_matches": 1, UNFINISHED: 1}
    assert list(stats["rejected_by"]) == ["deterministic_ops", "duplicate",
                                          "kernelbench_similarity", "finite", "workload_window",
                                          "compile_matches", UNFINISHED]
    mix = {r["category"]: (r["tasks"], r["share"], r["paper_share"]) for r in stats["op_mix"]}
    assert mix == {"1 torch op": (1, 0.2, 0.034), "2 torch ops": (2, 0.4, 0.8377),
                   "3 torch ops": (1, 0.2, 0.0762), "4 torch ops": (0, 0.0, 0.028),
                   "5 torch ops": (0, 0.0, 0.0123), "transformers op": (1, 0.2, 0.0118)}
    assert sum(PAPER_TABLE3.values()) == pytest.approx(1.0)
    assert stats["eager_ms"] == {"n": 5, "min": 1.5, "median": 5.0, "max": 50.0}
    assert stats["top_ops"][:3] == [{"op": "F.relu", "tasks": 2}, {"op": "nn.Conv2d", "tasks": 2},
                                    {"op": "torch.cumsum", "tasks": 2}]
    assert len(stats["top_ops"]) == 6
    sim = stats["kernelbench_similarity"]
    assert (sim["n"], sim["median"], sim["max"], sim["above_threshold"]) == (5, 0.3, 0.5, 0)
    assert stats["seed_counts"] == {"by_kind": {"module": 10, "transformers": 2, "custom": 1},
                                    "total": 13}
    assert stats["composers"] == {"llm:m": 1, "offline": 4}
    assert stats["settings"] == SETTINGS


# --- card ----------------------------------------------------------------------------------------

def test_card_files_and_content(built):
    yaml = pytest.importorskip("yaml")
    out, _, _, readme = built
    assert readme == out / "README.md"
    text = readme.read_text()
    front = yaml.safe_load(text.split("---\n")[1])
    assert front["license"] == "cc-by-4.0"
    assert front["task_categories"] == ["text-generation"]
    assert front["configs"] == [{"config_name": "default",
                                 "data_files": [{"split": "train", "path": "data/train.parquet"}]}]
    assert json.loads((out / "stats.json").read_text()) == json.loads(json.dumps(
        summarize(sample(), {"module": 10, "functional": 5, "transformers": 2}, SETTINGS)))
    assert is_png(out / TIMING_PNG) and is_png(out / SIMILARITY_PNG)
    assert f"]({TIMING_PNG})" in text and f"]({SIMILARITY_PNG})" in text
    assert "**5 of 13 candidates accepted (38.46%).**" in text
    assert "| 2 torch ops | 2 | 40.00% | 83.77% |" in text
    assert "| transformers op | 1 | 20.00% | 1.18% |" in text
    assert "| `workload_window` | 8 | 6 | 2 | 75.00% |" in text
    assert "eager time in [1, 100] ms on Test GPU" in text
    reasons = text.split("## Rejection reasons")[1].split("\n## ")[0]
    for name, count in summarize(sample(), None, SETTINGS)["rejected_by"].items():
        assert f"| `{name}` | {count} |" in reasons
        if name != UNFINISHED:
            assert FILTER_MEANINGS[name] in reasons
    for column in COLUMNS:
        assert f"| `{column}` |" in text
    assert "load_dataset" in text


def test_card_is_deterministic(tmp_path):
    for name in ("a", "b"):
        build(tmp_path / name, sample(), {"module": 3})
    for f in ("README.md", "stats.json", TIMING_PNG, SIMILARITY_PNG, "data/train.parquet",
              "data/train.jsonl"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f


def test_zero_accepted_still_writes_a_card(tmp_path):
    outcomes = [o for o in sample() if not o.accepted]
    for o in outcomes:
        o.max_similarity = None  # a run without a KernelBench checkout
    out = tmp_path / "none"
    out.mkdir()
    (out / SIMILARITY_PNG).write_bytes(b"stale")
    rows, paths, readme = build(out, outcomes, None, {"window_ms": [1, 100]})
    assert rows == [] and load_rows(paths["parquet"]) == []
    text = readme.read_text()
    assert "**0 of 8 candidates accepted (0.00%).**" in text
    assert "| 2 torch ops | 0 | n/a | 83.77% |" in text
    assert "No similarity measurements" in text
    assert is_png(out / TIMING_PNG)
    assert not (out / SIMILARITY_PNG).exists()  # nothing to plot, and no stale plot left behind
    stats = json.loads((out / "stats.json").read_text())
    assert stats["accepted"] == 0 and stats["eager_ms"]["median"] is None
    assert stats["rejected_by"]["workload_window"] == 2
    empty = build(tmp_path / "empty", [], None, {})[2].read_text()
    assert "**0 of 0 candidates accepted (n/a).**" in empty
    assert "No candidate was rejected." in empty


def test_the_card_names_only_the_sources_that_gave_seeds(tmp_path):
    without = build(tmp_path / "a", sample(), {"module": 10, "functional": 5, "tensor": 3, "transformers": 0})[2]
    text = without.read_text()
    assert "operators crawled from `torch` (18 seeds) were stacked" in text
    assert "1. **Seeds**: 18 operators crawled from `torch` (18 seeds) (10 module, 5 functional, 3 tensor)." in text
    assert "`transformers` (" not in text and "`transformers` modules stand alone" not in text

    both = build(tmp_path / "b", sample(), {"module": 10, "transformers": 1})[2].read_text()
    assert "crawled from `torch` (10 seeds) and `transformers` (1 seed) were stacked" in both
    assert "`transformers` modules stand alone" in both


def _drawn(monkeypatch) -> list:
    """The timing plots' figures, as titles and legend texts, captured as they are saved."""
    from cuda_agent.synth import card

    figures, save = [], card._save

    def keep(fig, path):
        if path.name == TIMING_PNG:
            ax = fig.axes[0]
            figures.append((ax.get_title(), [t.get_text() for t in ax.get_legend().get_texts()]))
        return save(fig, path)

    monkeypatch.setattr(card, "_save", keep)
    return figures


def _on_cpu(outcomes: list[Outcome]) -> list[Outcome]:
    """The outcomes as a run without a GPU records them: the window judged each task's estimate
    for the target GPU (a hundredth of its CPU time here), not the time measured on the CPU."""
    for o in outcomes:
        for f in o.filters:
            if f.name == "workload_window" and o.eager_ms:
                f.measurement = {"eager_ms": o.eager_ms / 100, "source": "estimate", "window_ms": [0.02, 0.5]}
    return outcomes


def test_the_timing_plot_says_the_window_applies_to_the_gpu_estimate(tmp_path, monkeypatch):
    figures = _drawn(monkeypatch)
    write_card(tmp_path / "cpu", _on_cpu(sample()), None, {**SETTINGS, "window_ms": [0.02, 0.5]})
    title, legend = figures[-1]
    assert "window 0.02 - 0.5 ms (on the target GPU's estimate)" in legend
    assert "accepted, estimated for the target GPU (5)" in legend
    assert "accepted, measured on this run's device (5)" in legend
    assert "the window judged the target GPU's estimate" in title

    write_card(tmp_path / "gpu", sample(), None, SETTINGS)  # measured on the GPU: the window is theirs
    title, legend = figures[-1]
    assert "window 1 - 100 ms" in legend and "accepted (5)" in legend
    assert not any("estimate" in text for text in legend + [title])


def test_the_card_counts_tasks_beyond_one_float32_shape(tmp_path):
    outcomes = sample()
    outcomes[0].candidate.batch_sizes = [64, 32, 16]
    outcomes[1].candidate.dtype = "bfloat16"
    _, _, readme = build(tmp_path, outcomes)
    assert "Tasks declaring several workloads: 1. By dtype: bfloat16 1, float32 4." in readme.read_text()
    assert summarize(outcomes, None, SETTINGS)["shapes_and_dtypes"] == {
        "multi_shape": 1, "dtypes": {"bfloat16": 1, "float32": 4}}
    # A run of float32 tasks of one shape (the paper's) says nothing of it.
    _, _, plain = build(tmp_path / "plain", sample())
    assert "Tasks declaring several workloads" not in plain.read_text()
