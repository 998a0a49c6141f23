"""The report of a run: numbers recomputed from the samples, seeds, gains, missing cells,
plots, summary.json, the paper's data. Every expected value is computed by hand below.

The synthetic run (n responses per problem, of which c correct):

- ``tiny-gsm8k``, n = 4, three problems: pass@1 = c/4, pass@4 = 1 if c >= 1.
- ``tiny-math500``, n = 5, two problems and one ungradable one (left out): pass@1 = c/5,
  pass@4 = 1 - C(5-c, 4)/C(5, 4): 0 for c = 0, 0.8 for c = 1, 1 for c >= 2.
- ``tiny-aime24``, n = 4, two problems; STAPO has no results on it.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import flat
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from ictrepro.algos import selection
from ictrepro.algos.selection import register_selection
from ictrepro.data.suites import stands_for
from ictrepro.errors import DataError, RunDirError
from ictrepro.report import build_report, score_run
from ictrepro.report.aggregate import score_average, score_cell
from ictrepro.report.comparisons import mask_activity
from ictrepro.report.labels import label
from ictrepro.report.load import ProblemScores, load_run
from ictrepro.results.paper import PAPER_DIR, PaperDataError, load_paper
from ictrepro.rundir import ModelId, ProblemCount, RunDir, ScoreRecord

N = {"tiny-gsm8k": 4, "tiny-math500": 5, "tiny-aime24": 4, "tiny-gpqa": 4, "tiny-fork-backward": 4}
#: n_correct per problem: CORRECT[model][benchmark].
CORRECT = {
    "base": {"tiny-gsm8k": [1, 0, 0], "tiny-math500": [1, 0], "tiny-aime24": [0, 0]},
    "grpo-seed0": {"tiny-gsm8k": [1, 0, 0], "tiny-math500": [1, 1], "tiny-aime24": [0, 0]},
    "grpo-seed1": {"tiny-gsm8k": [2, 1, 0], "tiny-math500": [0, 0], "tiny-aime24": [1, 0]},
    "stapo-seed0": {"tiny-gsm8k": [0, 0, 0], "tiny-math500": [2, 0]},
    "stapo-seed1": {"tiny-gsm8k": [4, 0, 0], "tiny-math500": [5, 1]},
    "ict-seed0": {"tiny-gsm8k": [2, 2, 0], "tiny-math500": [1, 0], "tiny-aime24": [1, 1]},
    "ict-seed1": {"tiny-gsm8k": [4, 1, 1], "tiny-math500": [1, 0], "tiny-aime24": [0, 0]},
}
SETTINGS = {"max_new_tokens": 96, "n": 4, "temperature": 1.0, "top_p": 1.0}


def _std(a: float, b: float) -> float:
    """Sample standard deviation (ddof 1) of two values."""
    return abs(a - b) / math.sqrt(2)


def write_eval(run: Path, model: str, bench: str, correct: list[int], *, ungradable: int = 0):
    """A score record of ``model`` on ``bench`` with these per-problem correct counts."""
    n = N[bench]
    record = ScoreRecord(
        benchmark=bench,
        model=ModelId.parse(model),
        pass_at={1: 0.99, 4: 0.99},  # deliberately wrong: the report must use the counts
        problems=tuple(ProblemCount(f"{bench}-{i}", n, c) for i, c in enumerate(correct)),
        ungradable=tuple(f"{bench}-u{i}" for i in range(ungradable)),
        identity={
            "settings": {"sampling": {**SETTINGS, "n": n}, "ks": [1, 4]},
            "backend": "hf",
            "seed": 0,
        },
    )
    run_dir = RunDir(run)
    run_dir.eval_dir(record.model).mkdir(parents=True, exist_ok=True)
    record.write(run_dir.score_path(record.model, bench))


def write_metrics(run: Path, method: str, seed: int, *, js: bool = True):
    folder = run / "train" / f"{method}-seed{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    rows = [
        {
            "step": step,
            "reward_mean": 0.1 * step + 0.01 * seed,
            "entropy_mean": 0.5 - 0.01 * step,
            "renyi2_mean": 0.4 - 0.01 * step,
            "selected_fraction": 0.1 if method == "ict" else 1.0,
            "js_selected_mean": (0.3 if js else None),
            "js_unselected_mean": (0.1 if js and method == "ict" else None),
            "kl": None if step == 1 else 0.01,
            "update_skipped": False,
        }
        for step in (1, 2, 3)
    ]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def make_run(root: Path, *, js: bool = True, correct: dict | None = None) -> Path:
    run = root / "run"
    run.mkdir()
    (run / "prepare.json").write_text(json.dumps({"config": {"preset": "tiny"}}))
    for model, per in (correct or CORRECT).items():
        for bench, values in per.items():
            write_eval(run, model, bench, values, ungradable=int(bench == "tiny-math500"))
        if model != "base":
            method, seed = model.rsplit("-seed", 1)
            write_metrics(run, method, int(seed), js=js)
    return run


def build(run: Path, **kwargs):
    out = io.StringIO()
    report = build_report(
        run, baselines=("grpo", "stapo"), console=Console(file=out, width=150), **kwargs
    )
    return report, out.getvalue()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    run = make_run(tmp_path_factory.mktemp("report"))
    return build(run)


# ------------------------------------------------------------------------ numbers


def test_cells_are_recomputed_from_the_samples(built):
    report, _ = built
    ict = report.cells["ict"]["tiny-gsm8k"].scores  # fractions; percent only when rendered
    # seed 0: c = [2, 2, 0] -> pass@1 (0.5 + 0.5 + 0) / 3 = 1/3, pass@4 2/3
    # seed 1: c = [4, 1, 1] -> pass@1 (1 + 0.25 + 0.25) / 3 = 1/2, pass@4 1
    assert ict["p1"].per_seed == pytest.approx((1 / 3, 1 / 2))
    assert ict["p4"].per_seed == pytest.approx((2 / 3, 1))
    assert ict["p1"].mean == pytest.approx(5 / 12)
    assert ict["p1"].std == pytest.approx(_std(1 / 3, 1 / 2))
    assert ict["total"].mean == pytest.approx(((5 / 12) + (5 / 6)) / 2)
    # n = 5, the ungradable problem is left out: STAPO seed 1 c = [5, 1] ->
    # pass@1 (1 + 0.2) / 2 = 0.6, pass@4 (1 + 0.8) / 2 = 0.9
    stapo = report.cells["stapo"]["tiny-math500"]
    assert stapo.n_problems == 2
    assert stapo.scores["p1"].per_seed == pytest.approx((0.2, 0.6))
    assert stapo.scores["p4"].per_seed == pytest.approx((0.5, 0.9))
    # The base model is one model: std 0.
    base = report.cells["base"]["tiny-math500"].scores
    assert (base["p1"].mean, base["p4"].mean, base["p1"].std) == pytest.approx((0.1, 0.4, 0))
    for cell in report.cells["ict"].values():
        for s in cell.scores.values():
            assert s.ci_low <= s.mean <= s.ci_high
    assert any("records pass@1 = 0.990000" in n for n in report.notes)


def test_average_over_benchmarks_is_mean_over_seeds_of_per_seed_averages(built):
    report, _ = built
    avg = report.averages["grpo"]
    # Total per seed and benchmark: s0 gsm8k (1/12 + 1/3)/2, math500 (0.2 + 0.8)/2, aime24 0;
    # s1 gsm8k (1/4 + 2/3)/2, math500 0, aime24 (1/8 + 1/2)/2.
    s0 = ((1 / 12 + 1 / 3) / 2 + 0.5 + 0) / 3
    s1 = ((1 / 4 + 2 / 3) / 2 + 0 + (1 / 8 + 1 / 2) / 2) / 3
    assert avg.benchmarks == ("tiny-gsm8k", "tiny-math500", "tiny-aime24")
    assert avg.scores["total"].per_seed == pytest.approx((s0, s1))
    assert avg.scores["total"].mean == pytest.approx((s0 + s1) / 2)
    assert avg.scores["total"].std == pytest.approx(_std(s0, s1))
    assert avg.scores["total"].ci_low <= avg.scores["total"].mean <= avg.scores["total"].ci_high


def test_missing_benchmark_is_shown_and_left_out_of_the_average(built):
    report, _ = built
    assert report.cells["stapo"]["tiny-aime24"].status == "missing"
    avg = report.averages["stapo"]
    assert avg.benchmarks == ("tiny-gsm8k", "tiny-math500")
    assert avg.excluded == ("tiny-aime24",)
    # Not counted as 0: the mean over the two benchmarks it has.
    # P@1 per seed: s0 (0 + 0.2) / 2 = 0.1, s1 (1/3 + 0.6) / 2.
    assert avg.scores["p1"].per_seed == pytest.approx((0.1, (1 / 3 + 0.6) / 2))
    stapo_table = report.files.markdown.split("### STAPO", 1)[1].split("###", 1)[0]
    assert "| `tiny-aime24` | AIME24 | missing | missing | missing |" in stapo_table
    assert "**average** (2 of 3 benchmarks)" in stapo_table
    assert "leaves out `tiny-aime24`" in stapo_table
    assert any("stapo has no results on tiny-aime24" in n for n in report.notes)


def test_gains_against_each_baseline_and_the_best(built):
    report, _ = built
    g = report.gains["grpo"]["p1"]
    # ICT P@1 means: gsm8k 5/12, math500 0.1, aime24 (1/4 + 0)/2 = 1/8.
    # GRPO: gsm8k (1/12 + 1/4)/2 = 1/6, math500 (0.2 + 0)/2 = 0.1, aime24 (0 + 1/8)/2 = 1/16.
    per = {"tiny-gsm8k": 25.0, "tiny-math500": 0.0, "tiny-aime24": 6.25}
    assert g.per_benchmark == pytest.approx(per)
    assert g.average == pytest.approx(sum(per.values()) / 3)
    assert (g.maximum, g.argmax) == (pytest.approx(25.0), "tiny-gsm8k")
    # STAPO only over the two benchmarks both have; ICT loses on math500 P@1:
    # gsm8k 5/12 - 1/6 = 25 points; math500 0.1 - (0.2 + 0.6)/2 = -30 points.
    s = report.gains["stapo"]["p1"]
    assert s.per_benchmark == pytest.approx({"tiny-gsm8k": 25.0, "tiny-math500": -30.0})
    assert s.average == pytest.approx(-2.5)
    # P@4: gsm8k (2/3 + 1)/2 - (0 + 1/3)/2 = 2/3; math500 0.4 - (0.5 + 0.9)/2 = -0.3.
    assert report.gains["stapo"]["p4"].average == pytest.approx(100 * (2 / 3 - 0.3) / 2)
    # Best baseline = highest average Total: STAPO (its average is over two benchmarks).
    stapo_total = ((0 + 0.35) + (1 / 3 + 0.75)) / 4
    assert report.averages["stapo"].scores["total"].mean == pytest.approx(stapo_total)
    assert report.best_baseline == "stapo"
    assert any("cover different benchmarks" in n for n in report.notes)
    assert "vs best baseline (STAPO)" in report.files.markdown
    assert "P@1 -2.50 (below: loses)" in report.files.markdown


def test_a_focus_method_that_loses_everywhere_gets_negative_gains(tmp_path):
    correct = {m: dict(per) for m, per in CORRECT.items()}
    for seed in (0, 1):
        correct[f"ict-seed{seed}"] = {b: [0] * len(v) for b, v in CORRECT["base"].items()}
    report, printed = build(make_run(tmp_path, correct=correct))
    for baseline in ("grpo", "stapo"):
        for gain in report.gains[baseline].values():
            assert gain.average < 0
            assert gain.maximum <= 0
    # GRPO's average P@4 over the three benchmarks, means over seeds: gsm8k (1/3 + 2/3)/2,
    # math500 (0.8 + 0)/2, aime24 (0 + 1/2)/2; ICT's is 0.
    p4 = ((1 / 3 + 2 / 3) / 2 + 0.4 + 0.25) / 3
    assert report.gains["grpo"]["p4"].average == pytest.approx(-100 * p4)
    assert f"P@4 {-100 * p4:+.2f} (below: loses)" in report.files.markdown
    assert "-" in printed.split("Gains of ICT", 1)[1]


def test_a_benchmark_from_only_some_seeds_is_partial_and_left_out(tmp_path):
    correct = {m: dict(per) for m, per in CORRECT.items()}
    del correct["ict-seed1"]["tiny-aime24"]
    report, _ = build(make_run(tmp_path, correct=correct))
    cell = report.cells["ict"]["tiny-aime24"]
    assert (cell.status, cell.seeds) == ("partial", (0,))
    assert report.averages["ict"].excluded == ("tiny-aime24",)
    assert "tiny-aime24" not in report.gains["grpo"]["p1"].per_benchmark
    assert "(partial: 1/2 seeds)" in report.files.markdown


def test_training_runs_with_different_settings_are_noted(tmp_path):
    run = make_run(tmp_path)
    for name, lr in (("grpo-seed0", 1e-12), ("ict-seed0", 1e-4), ("ict-seed1", 1e-4)):
        record = {"config": {"preset": "tiny", "rl": {"lr": lr, "steps": 3}}}
        (run / "train" / name / "train.json").write_text(json.dumps(record))
    report = score_run(run, baselines=("grpo", "stapo"))  # scores only, writes nothing
    assert report.notes[-1] == (
        "training runs differ in rl.lr: 1e-12 (grpo-seed0); 0.0001 (ict-seed0, ict-seed1)."
    )
    assert not (run / "report").exists()


def test_score_run_alone_has_every_note_and_the_report_is_frozen(tmp_path):
    # The curve notes come from the numbers, not from drawing: no call order can drop them.
    run = make_run(tmp_path, js=False)
    report = score_run(run, baselines=("grpo", "stapo"))
    assert report.files is None and not (run / "report").exists()
    assert report.notes[-1] == (
        "no training curve of js_selected_mean, js_unselected_mean: every value is null "
        "or no training run was found."
    )
    assert set(report.curves) == {"reward_mean", "entropy_mean", "renyi2_mean", "selected_fraction"}
    assert report.training["ict"] == {0: 3, 1: 3}
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.notes = ()  # type: ignore[misc]
    written, _ = build(run, out_dir=tmp_path / "out")
    assert written.notes == report.notes
    assert written.files.summary["notes"] == list(report.notes)


def test_only_the_chosen_methods_are_read(tmp_path):
    run = make_run(tmp_path)
    (run / "eval" / "stapo-seed0" / "tiny-gsm8k.score.json").write_text("{broken\n")
    report = score_run(run, methods=("ict", "grpo"), baselines=("grpo",))
    assert report.methods == ("base", "ict", "grpo")
    assert set(report.cells) == {"base", "ict", "grpo"}
    with pytest.raises(DataError, match=r"stapo-seed0/tiny-gsm8k\.score\.json: not valid JSON"):
        score_run(run)


def test_unreadable_runs_and_samples_name_the_problem(tmp_path):
    with pytest.raises(RunDirError, match="does not exist"):
        load_run(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunDirError, match="run `ictrepro train` and `ictrepro eval` first"):
        load_run(tmp_path / "empty")
    run = make_run(tmp_path)
    path = run / "eval" / "ict-seed0" / "tiny-gsm8k.score.json"
    record = json.loads(path.read_text())
    record["problems"][1][2] = 9  # of 4 responses
    path.write_text(json.dumps(record))
    with pytest.raises(
        DataError, match=rf"{path}: problems\[1\] must be \[id, n_samples, n_correct\]"
    ):
        load_run(run)
    record["problems"][1] = ["another-problem", 4, 1]
    path.write_text(json.dumps(record))
    with pytest.raises(DataError, match="have different gradable problems"):
        score_run(run)


def test_labels_come_from_the_registries(monkeypatch):
    names = {m: label(m) for m in ("base", "grpo", "entropy", "stapo", "ict", "random")}
    assert names == {
        "base": "Base",
        "grpo": "GRPO",
        "entropy": "20-Entropy",
        "stapo": "STAPO",
        "ict": "ICT",
        "random": "Random-10%",
    }
    monkeypatch.setattr(selection, "_REGISTRY", dict(selection._REGISTRY))

    @register_selection("lowprob")
    def lowprob(inputs):
        return inputs.response_mask.clone()

    @register_selection("lowprob-labelled", label="Low-p")
    def lowprob_labelled(inputs):
        return inputs.response_mask.clone()

    assert (label("lowprob"), label("lowprob-labelled"), label("unregistered")) == (
        "lowprob",
        "Low-p",
        "unregistered",
    )
    assert [stands_for(b) for b in ("tiny-gsm8k", "tiny-gpqa", "gpqa_diamond", "mmlu_stem")] == [
        "GSM8K",
        "GPQA",
        "GPQA",
        "MMLU-STEM",
    ]
    assert [stands_for(b) for b in ("tiny-train", "amc23", "gsm8k_train", "custom")] == [None] * 4


def _problem_scores(p1: np.ndarray, p4: np.ndarray) -> ProblemScores:
    ids = tuple(f"q{i}" for i in range(len(p1)))
    return ProblemScores(Path("x"), ids, p1, p4, (4,), 0, None, None)


@st.composite
def benchmark_scores(draw):
    """Per benchmark, a [seeds, problems] matrix of pass@1 in [0, 1] (pass@4 = its square
    root, so pass@4 >= pass@1); 1-4 benchmarks of 1-9 problems, 1-4 seeds."""
    n_seeds = draw(st.integers(1, 4))
    sizes = draw(st.lists(st.integers(1, 9), min_size=1, max_size=4))
    unit = st.floats(0, 1, allow_nan=False)
    return [
        np.asarray(draw(st.lists(unit, min_size=n_seeds * p, max_size=n_seeds * p))).reshape(
            n_seeds, p
        )
        for p in sizes
    ]


@settings(max_examples=40, deadline=None)
@given(benchmark_scores())
def test_average_is_per_seed_mean_over_benchmarks_of_their_means(matrices):
    seeds = tuple(range(matrices[0].shape[0]))
    names = [f"b{i}" for i in range(len(matrices))]
    cells = {
        b: score_cell({s: _problem_scores(m[s], np.sqrt(m[s])) for s in seeds}, seeds)
        for b, m in zip(names, matrices, strict=True)
    }
    avg = score_average(cells, names)
    for metric, of in (("p1", lambda m: m), ("p4", np.sqrt)):
        naive = [
            math.fsum(math.fsum(of(m[s]).tolist()) / m.shape[1] for m in matrices) / len(matrices)
            for s in seeds
        ]
        assert avg.scores[metric].per_seed == pytest.approx(naive, abs=1e-12)
        assert avg.scores[metric].mean == pytest.approx(math.fsum(naive) / len(naive), abs=1e-12)
    p1, p4 = avg.scores["p1"].per_seed, avg.scores["p4"].per_seed
    total = [(a + b) / 2 for a, b in zip(p1, p4, strict=True)]
    assert avg.scores["total"].per_seed == pytest.approx(total, abs=1e-12)


# ---------------------------------------------------------------- files and text


def test_files_plots_and_console(built):
    report, printed = built
    files = report.files
    assert files.out_dir == report.run_dir / "report"
    names = {"report.md", "summary.json", "plots/passk-bars.png"} | {
        f"plots/curves-{c}.png" for c in ("reward", "entropy", "renyi2", "selected-fraction", "js")
    }
    assert set(files.paths) == names
    for name in names:
        path = files.out_dir / name
        assert path.is_file() and path.stat().st_size > 0
        if name.endswith(".png"):
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (files.out_dir / "report.md").read_text() == files.markdown
    assert "Averages over benchmarks" in printed and "Gains of ICT" in printed
    assert "STAPO (best)" in printed


def test_a_curve_whose_values_are_all_null_is_skipped(tmp_path):
    report, _ = build(make_run(tmp_path, js=False), out_dir=tmp_path / "out")
    assert report.files.out_dir == tmp_path / "out"
    assert "plots/curves-js.png" not in report.files.paths
    assert not (tmp_path / "out" / "plots" / "curves-js.png").exists()
    assert (tmp_path / "out" / "plots" / "curves-reward.png").stat().st_size > 0
    assert any("js_selected_mean" in n for n in report.notes)


def test_summary_json_round_trips(built):
    report, _ = built
    summary = json.loads((report.files.out_dir / "summary.json").read_text())
    assert summary == json.loads(json.dumps(report.files.summary))
    assert summary["scores"]["ict"]["tiny-gsm8k"]["p1"]["mean"] == pytest.approx(100 * 5 / 12)
    assert summary["scores"]["stapo"]["tiny-aime24"]["status"] == "missing"
    assert summary["averages"]["stapo"]["excluded"] == ["tiny-aime24"]
    assert summary["gains"]["stapo"]["p1"]["average"] == pytest.approx(-2.5)
    assert summary["best_baseline"] == "stapo"
    assert summary["settings"]["tiny-math500"]["n_samples"] == [5]
    assert summary["settings"]["tiny-math500"]["n_ungradable"] == [1]
    assert summary["paper"]["gains"]["headline_mean"] == 4.58
    assert summary["training_curves"]["reward_mean"]["ict"]["mean"] == pytest.approx(
        [0.105, 0.205, 0.305]
    )
    assert sorted(summary["files"]) == sorted(report.files.paths)


def test_markdown_defines_the_numbers_and_states_the_scale(built):
    report, _ = built
    md = report.files.markdown
    assert "do not reproduce the paper's absolute numbers" in md
    assert "preset `tiny`" in md
    assert (
        "average P@4 gain = mean over the benchmarks of ICT's P@4 minus the baseline's P@4, "
        "each the mean over seeds"
    ) in md
    assert "maximum gain = the largest gain on a single benchmark" in md
    assert "best baseline = the baseline with the highest average Total" in md
    assert "**4.58** (headline) = the mean of the P@4 gains" in md
    assert "4.37 (0.5B), 4.98 (1.5B), 4.38 (7B)" in md
    assert "none of them equals ICT's P@4 minus another column" in md
    assert "**14.9** (maximum) is a single (model size, benchmark) cell" in md
    assert "paper 0.5B (P@1 / P@4 / Total)" in md and "paper 7B (P@1 / P@4 / Total)" in md
    assert "40.27 / 54.16 / 46.28†" in md  # a flagged 7B Total
    assert "| `tiny-math500` | MATH500 | 2 | 1 | 5 | 1.0 | 1.0 | 96 | hf | 0 |" in md


# -------------------------------------------------------------------- paper data


def test_paper_data_loads():
    paper = load_paper()
    a = paper.averages
    assert a.sizes == ("0.5B", "1.5B", "7B")
    assert a.cells["0.5B"]["ict"].p4 == 21.75
    assert a.inconsistent_totals == {("7B", "grpo"), ("7B", "entropy")}
    assert a.source["arxiv"] == "2606.19771"
    assert paper.gains.per_size == {"0.5B": 4.37, "1.5B": 4.98, "7B": 4.38}
    assert paper.gains.headline_mean == 4.58 and paper.gains.max_cell is None
    rows = {r.name: r for r in paper.ablation.rows}
    assert rows["ICT 10%"].p4 == 85.31 and rows["Random 10%"].p4 is None


@pytest.mark.parametrize(
    ("file", "edit", "message"),
    [
        ("averages.json", lambda d: d["sizes"]["0.5B"]["ict"].update(p4="x"), "sizes.0.5B.ict.p4"),
        (
            "averages.json",
            lambda d: d["sizes"]["1.5B"]["ict"].update(total=30.0),
            "sizes.1.5B.ict.total",
        ),
        ("averages.json", lambda d: d.pop("inconsistent_totals"), "inconsistent_totals"),
        ("averages.json", lambda d: d["source"].pop("arxiv"), "source.arxiv"),
        ("gains.json", lambda d: d.update(headline_mean=5.0), "headline_mean"),
        ("ablation.json", lambda d: d["rows"][0].pop("p1"), "rows[0].p1"),
    ],
)
def test_a_corrupted_paper_file_errors_naming_file_and_field(tmp_path, file, edit, message):
    paper_dir = tmp_path / "paper"
    shutil.copytree(PAPER_DIR, paper_dir)
    data = json.loads((paper_dir / file).read_text())
    edit(data)
    (paper_dir / file).write_text(json.dumps(data))
    with pytest.raises(PaperDataError) as err:
        load_paper(paper_dir)
    assert str(paper_dir / file) in str(err.value)
    assert f"field {message!r}" in str(err.value)


def test_a_paper_file_that_is_not_json_errors_naming_it(tmp_path):
    paper_dir = tmp_path / "paper"
    shutil.copytree(PAPER_DIR, paper_dir)
    (paper_dir / "gains.json").write_text("{not json")
    with pytest.raises(PaperDataError, match=r"gains\.json: not valid JSON"):
        load_paper(paper_dir)
    run = make_run(tmp_path)
    with pytest.raises(PaperDataError, match=r"gains\.json"):
        build(run, paper_dir=paper_dir)
    assert not (run / "report").exists()  # nothing written


def _uniform_run(root: Path, ict: int, others: int) -> Path:
    """Two seeds of grpo, stapo and ict, and base, on tiny-gsm8k and tiny-aime24 (N
    samples each): every problem answered ``ict`` / ``others`` times correctly, except one
    problem per model that varies so the intervals have a spread."""
    n = {b: N[b] for b in ("tiny-gsm8k", "tiny-aime24")}
    correct = {}
    for model in ("base", "grpo-seed0", "grpo-seed1", "stapo-seed0", "stapo-seed1",
                  "ict-seed0", "ict-seed1"):  # fmt: skip
        c = ict if model.startswith("ict") else others
        correct[model] = {b: [c] * 7 + [(c + len(model)) % (k + 1)] for b, k in n.items()}
    root.mkdir(parents=True)
    return make_run(root, correct=correct)


def test_paired_comparisons_say_who_wins_and_the_claims_verdict(tmp_path):
    high = min(N["tiny-gsm8k"], N["tiny-aime24"])
    won = score_run(_uniform_run(tmp_path / "won", high, 0), baselines=("grpo", "stapo"))
    pairs = {(c.a, c.b): c for c in won.comparisons}
    assert set(pairs) == {("ict", "grpo"), ("ict", "stapo"), ("grpo", "base"),
                          ("stapo", "base"), ("ict", "base")}  # fmt: skip
    p4 = pairs["ict", "grpo"].diffs["p4"]
    assert p4.resolved and p4.mean > 0.5 and p4.detectable >= p4.half_width >= 0
    assert won.claim == "reproduced"
    assert won.mechanism_verdicts["pass_at_4"].startswith("seen")

    lost = score_run(_uniform_run(tmp_path / "lost", 0, high), baselines=("grpo", "stapo"))
    assert lost.claim == "contradicted"
    report, _ = build(_uniform_run(tmp_path / "lost-built", 0, high))
    text = report.files.markdown
    assert "## Paired comparisons" in text and "(ICT loses)" in text
    assert "**Here: contradicted.**" in text and "## Mechanism" in text
    summary = report.files.summary
    assert summary["claim"]["verdict"] == "contradicted"
    assert {(c["a"], c["b"]) for c in summary["paired_comparisons"]} >= {("ict", "grpo")}


def test_claims_the_positive_control_and_the_flags(tmp_path):
    """ICT against each baseline and the random control; GRPO against GRPO at lr/4 (the
    planted difference); a rule whose mask never acted; a multiple-choice suite at chance."""
    high = 4
    scores = {"base": 1, "grpo": high, "grpo-lr4": 0, "stapo": 0, "ict": high, "random": high}
    correct = {}
    for method, c in scores.items():
        for model in [method] if method == "base" else [f"{method}-seed{s}" for s in (0, 1)]:
            per = {
                b: [c] * 7 + [(c + len(model)) % (N[b] + 1)] for b in ("tiny-gsm8k", "tiny-aime24")
            }
            per["tiny-gpqa"] = [1] * 6 + [0, 2]  # P@1 25%: guessing among four letters
            correct[model] = per
    (tmp_path / "r").mkdir()
    report, _ = build(make_run(tmp_path / "r", correct=correct))
    verdicts = {(c.a, c.b): c.verdict for c in report.claims}
    # STAPO's and the random mask's masks never acted (below): they trained as GRPO did, so
    # ICT against them is no comparison of rules, whatever its interval.
    assert verdicts == {
        ("ict", "grpo"): "not resolved",
        ("ict", "stapo"): "not a comparison",
        ("ict", "random"): "not a comparison",
    }
    stapo = next(c for c in report.claims if c.b == "stapo")
    assert stapo.diff.ci_low > 0  # resolved, and still not reported as a verdict
    assert report.claim == "not resolved at this size"
    assert report.positive_control.verdict == "reproduced"
    assert (report.positive_control.a, report.positive_control.b) == ("grpo", "grpo-lr4")
    # write_metrics logs selected_fraction 1 for every rule but ICT.
    assert set(report.inactive_masks) == {"stapo", "random"}
    assert {(m, b) for m, b, _, _ in report.at_chance} >= {
        ("base", "tiny-gpqa"),
        ("ict", "tiny-gpqa"),
    }
    assert all(c == 0.25 for *_, c in report.at_chance)
    # Every seed logged the same entropies: the paired interval is [0, 0], not "seen".
    assert report.mechanism_verdicts["entropy"].startswith("not resolved")
    assert report.mechanism_verdicts["entropy_vs_control"].startswith("not resolved")
    text = flat(report.files.markdown)
    assert (
        "## Verdicts per claim" in text
        and "Positive control: the planted difference is resolved" in text
    )
    assert "**Mask never acted:** STAPO (`stapo`), Random-10% (`random`)" in text
    assert "| STAPO | 0 of 6 (0.0%) | 0% |" in report.files.markdown
    assert "| ICT | 6 of 6 (100.0%) | 90% |" in report.files.markdown
    assert "**At chance:**" in text and "largest by chance: mean / 95%" in text
    assert "two standard deviations" not in text
    summary = report.files.summary
    # The positive control is the one reproduced claim.
    assert sorted(c["verdict"] for c in summary["claims"]) == [
        "not a comparison",
        "not a comparison",
        "not resolved",
        "reproduced",
    ]
    assert "not a comparison (STAPO's mask left tokens out at fewer than 50% of its steps" in text
    assert summary["flags"]["inactive_masks"] == list(report.inactive_masks)
    assert all(c["detectable_80"] >= c["half_width"] for c in summary["claims"])


def test_claims_say_how_many_seeds_would_resolve_the_papers_gain(tmp_path):
    """Each claim carries its comparison's variance components: at the run's own design
    they give the paired interval's 80% figure (where no component is estimated at 0), and
    the report projects from them the seeds that would resolve the paper's headline gain
    (4.58 points), in report.md and summary.json alike."""
    from ictrepro.evaluate.power import detectable, seeds_to_resolve
    from ictrepro.results.paper import load_paper

    benches = ("tiny-gsm8k", "tiny-aime24")
    correct = {"base": {b: [2] * 8 for b in benches}}
    for s in (0, 1, 2):
        # ICT fails the first 2 + s problems (a problem and a seed effect); the other rules
        # one problem that moves with the seed.
        correct[f"ict-seed{s}"] = {b: [0 if j < 2 + s else 2 for j in range(8)] for b in benches}
        for i, method in enumerate(("stapo", "random")):
            counts = [0 if j == 7 - (s + i) % 3 else 3 for j in range(8)]
            correct[f"{method}-seed{s}"] = {b: counts for b in benches}
        # The planted difference: each GRPO seed solves one more problem, a different one.
        correct[f"grpo-seed{s}"] = {b: [2 + (j == s) for j in range(8)] for b in benches}
        correct[f"grpo-lr4-seed{s}"] = {b: [2] * 8 for b in benches}
    (tmp_path / "r").mkdir()
    report, _ = build(make_run(tmp_path / "r", correct=correct))
    target = load_paper().gains.headline_mean / 100
    summary = {(c["a"], c["b"]): c for c in report.files.summary["claims"]}
    assert report.positive_control is not None
    for claim in (*report.claims, report.positive_control):
        c = claim.components
        assert c is not None and c.S == 3 and claim.seeds_known
        needed = claim.seeds_to_resolve(target)
        assert needed == seeds_to_resolve(c, target)
        assert summary[claim.a, claim.b]["seeds_to_resolve_paper_gain"] == needed
        assert summary[claim.a, claim.b]["detectable_80_unlimited_seeds"] == pytest.approx(
            100 * claim.floor
        )
    for claim in report.claims:
        c = claim.components
        assert c.seed > 0 and c.problem > 0
        own = detectable(c, S=c.S, J=c.J, n=c.n)
        assert own == pytest.approx(claim.diff.detectable, rel=1e-9)
        # Their problem spread alone exceeds 4.58 points: no number of seeds does it.
        assert claim.floor > target and claim.seeds_to_resolve(target) is None
    assert "none (" in report.files.markdown
    # The planted difference varies only within seeds, not with the seed or the problem
    # on average: a few seeds more than the run's resolve 4.58 points.
    needed = report.positive_control.seeds_to_resolve(target)
    assert needed is not None and needed > report.positive_control.components.S
    assert "| seeds to resolve 4.58 |" in report.files.markdown
    assert f"| {needed} | **" in report.files.markdown


def test_the_sparsity_control_is_compared_once_when_also_named_a_baseline(tmp_path):
    """``compare`` of a new rule against pinned baselines that include the random control:
    one comparison per pair, not the control twice."""
    correct = {}
    for method in ("base", "grpo", "random", "ict"):
        for model in [method] if method == "base" else [f"{method}-seed{s}" for s in (0, 1)]:
            correct[model] = {b: [2] * 7 + [len(model) % 3] for b in ("tiny-gsm8k", "tiny-aime24")}
    (tmp_path / "r").mkdir()
    report = score_run(make_run(tmp_path / "r", correct=correct), baselines=("grpo", "random"))
    pairs = [(c.a, c.b) for c in report.comparisons]
    assert len(pairs) == len(set(pairs))
    assert [p for p in pairs if p[0] == "ict"] == [
        ("ict", "grpo"),
        ("ict", "random"),
        ("ict", "base"),
    ]


def test_a_method_that_does_not_differ_from_the_base_model_is_flagged(tmp_path):
    """GRPO answers as the base model does (P@4 'wins' over a method that lost ground are
    then not its own); ICT gained on every problem and is not flagged."""
    correct = {}
    for method, c in {"base": 2, "grpo": 2, "stapo": 2, "ict": 4}.items():
        for model in [method] if method == "base" else [f"{method}-seed{s}" for s in (0, 1)]:
            correct[model] = {b: [c] * 7 + [len(model) % 3] for b in ("tiny-gsm8k", "tiny-aime24")}
    (tmp_path / "r").mkdir()
    report, _ = build(make_run(tmp_path / "r", correct=correct))
    assert report.unchanged == ("grpo", "stapo")
    text = flat(report.files.markdown)
    assert "**No resolved change from the base model:** GRPO (`grpo`), STAPO (`stapo`)" in text
    assert report.files.summary["flags"]["unchanged_from_base"] == ["grpo", "stapo"]


def test_a_reversed_positive_control_is_said_to_be_reversed_not_unresolved(tmp_path):
    """GRPO resolved below GRPO at lr/4: the instrument resolves a difference, but RL
    harms the model, which the report must say instead of "not resolved"."""
    correct = {}
    for method, c in {"base": 4, "grpo": 0, "grpo-lr4": 4, "ict": 2, "random": 2}.items():
        for model in [method] if method == "base" else [f"{method}-seed{s}" for s in (0, 1)]:
            correct[model] = {
                b: [c] * 7 + [(c + len(model)) % (N[b] + 1)] for b in ("tiny-gsm8k", "tiny-aime24")
            }
    (tmp_path / "r").mkdir()
    report, _ = build(make_run(tmp_path / "r", correct=correct))
    assert report.positive_control.verdict == "contradicted"
    text = flat(report.files.markdown)
    assert "**Positive control reversed: GRPO at the full learning rate is resolved" in text
    assert "is not resolved, so this instrument is broken" not in text


def test_fork_world_runs_get_the_fork_plots_and_other_runs_no_note_of_them(tmp_path, built):
    from ictrepro.train.forks import FORK_METRICS

    report, _ = built
    assert not any("fork" in n for n in report.notes)
    assert not any("fork" in name for name in report.files.paths)
    run = make_run(tmp_path)
    for folder in (run / "train").iterdir():
        path = folder / "metrics.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        for row in rows:
            row.update({k: 0.25 for k in FORK_METRICS})
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    forked, _ = build(run)
    names = set(forked.files.paths)
    assert {"plots/fork-offsets.png", "plots/curves-fork-minority.png"} <= names
    assert {"plots/curves-fork-js.png", "plots/curves-fork-entropy.png"} <= names
    assert forked.curves["fork_selected_at"]["ict"].mean.tolist() == [0.25] * 3


def test_collapse_on_the_fork_worlds_minority_subset_is_stated(tmp_path):
    bench = "tiny-fork-backward"
    correct = {
        "base": {bench: [2] * 8},
        "grpo-seed0": {bench: [0] * 7 + [1]},
        "grpo-seed1": {bench: [0] * 7 + [1]},
        "ict-seed0": {bench: [2] * 7 + [3]},
        "ict-seed1": {bench: [3] * 8},
    }
    (tmp_path / "r").mkdir()
    report, _ = build(make_run(tmp_path / "r", correct=correct))
    text = flat(report.files.markdown)
    assert "**Collapse on the minority subset**" in text
    rows = [line for line in report.files.markdown.splitlines() if f"`{bench}`" in line]
    shown = {
        line.split("|")[1].strip(): line.split("|")[-2].strip()
        for line in rows
        if "**yes**" in line or "| no |" in line
    }
    assert shown == {"GRPO": "**yes**", "ICT": "no"}


def test_the_largest_of_several_null_differences_by_simulation_and_by_hand():
    from ictrepro.report.comparisons import expected_maximum

    # One difference: its mean is 0 and its 95th percentile 1.645 se.
    mean, p95 = expected_maximum([2.0], draws=200_000)
    assert abs(mean) < 0.02 and p95 == pytest.approx(2 * 1.6449, rel=0.01)
    # Two with equal se: E[max] = se / sqrt(pi).
    mean, _ = expected_maximum([1.0, 1.0], draws=200_000)
    assert mean == pytest.approx(1 / math.sqrt(math.pi), rel=0.02)
    assert expected_maximum([]) == (0.0, 0.0)


def test_probe_curve_starts_at_step_0_and_joins_the_probe_steps(tmp_path):
    from ictrepro.report.curves import training_curves

    rows = [
        {"step": 1, "probe_reward": None, "probe_reward_initial": 0.2},
        {"step": 2, "probe_reward": 0.3, "probe_reward_initial": None},
        {"step": 3, "probe_reward": 0.5, "probe_reward_initial": None},
    ]
    curve = training_curves({"grpo": {0: rows}})["probe_reward"]["grpo"]
    steps, values = curve.per_seed[0]
    assert steps.tolist() == [0.0, 2.0, 3.0] and values.tolist() == [0.2, 0.3, 0.5]


def test_mask_activity_counts_the_steps_and_the_tokens_each_mask_left_out():
    """Steps with a share under 1 count as acting; the share left out is averaged over the
    logged steps of every seed; GRPO (dense by definition) is not listed."""
    trained = {
        "grpo": {0: [{"selected_fraction": 1.0}]},
        "stapo": {
            0: [{"selected_fraction": 1.0}, {"selected_fraction": 0.999}],
            1: [{"selected_fraction": 1.0}, {"selected_fraction": None}],
        },
        "ict": {0: [{"selected_fraction": 1.0}, {"selected_fraction": 0.1}]},
    }
    activity = {a.method: a for a in mask_activity(trained)}
    assert set(activity) == {"stapo", "ict"}
    assert (activity["stapo"].steps_acted, activity["stapo"].steps) == (1, 3)
    assert activity["stapo"].left_out == pytest.approx(0.001 / 3)
    assert (activity["ict"].steps_acted, activity["ict"].steps) == (1, 2)
    assert activity["ict"].left_out == pytest.approx(0.45)
    assert not any(a.never_acted for a in activity.values())
    [dense] = mask_activity({"stapo": {0: [{"selected_fraction": 1.0}]}})
    assert dense.method == "stapo" and dense.never_acted
