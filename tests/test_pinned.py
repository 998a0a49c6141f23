"""Pinned results and `ictrepro check`: the repository's results/, and tampering detected."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from ictrepro.cli import app
from ictrepro.evaluate.passk import mean_pass_at_k
from ictrepro.results.pinned import (
    RESULTS_DIR,
    ResultsError,
    check_results,
    collect_scores,
    write_manifest,
)


def flat(output: str) -> str:
    return " ".join(output.split())


@pytest.fixture
def results(tmp_path):
    target = tmp_path / "results"
    shutil.copytree(RESULTS_DIR, target)
    return target


def test_the_repository_results_check_out():
    assert check_results() == []
    result = CliRunner().invoke(app, ["check"])
    assert result.exit_code == 0 and "is intact" in flat(result.output)


def test_pinned_tiny_scores_agree_with_their_samples():
    rows = [json.loads(x) for x in (RESULTS_DIR / "tiny" / "scores.jsonl").read_text().splitlines()]
    assert len(rows) == 16 * 7  # base + 5 methods x 3 seeds, seven suites
    for row in rows:
        n = row["n_samples"]
        for k, value in row["pass_at"].items():
            expected = mean_pass_at_k([n] * len(row["n_correct"]), row["n_correct"], int(k))
            assert value == pytest.approx(expected, abs=1e-12), (row["model"], row["benchmark"])


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda r: (r / "tiny" / "provenance.json").write_text("{}"), "provenance.json: modified"),
        (
            lambda r: (r / "paper" / "gains.json").unlink(),
            "gains.json: listed in the manifest but missing",
        ),
        (lambda r: (r / "tiny" / "extra.json").write_text("{}"), "extra.json: not in the manifest"),
    ],
)
def test_tampering_is_named(results, damage, message):
    damage(results)
    problems = check_results(results)
    assert any(message in p for p in problems), problems
    result = CliRunner().invoke(app, ["check", "--results", str(results)])
    assert result.exit_code == 1 and message in flat(result.output)


def test_truncated_and_malformed_scores_are_named_even_with_a_fresh_manifest(results):
    scores = results / "tiny" / "scores.jsonl"
    text = scores.read_text()
    scores.write_text(text[: len(text) // 2])  # cut mid-line
    write_manifest(results)  # so only the schema check can catch it
    problems = check_results(results)
    assert any("scores.jsonl: truncated" in p for p in problems)
    assert any("not valid JSON" in p for p in problems)
    first = json.loads(text.splitlines()[0])
    del first["pass_at"]
    first["n_correct"] = [99]
    scores.write_text(json.dumps(first) + "\n")
    write_manifest(results)
    problems = check_results(results)
    assert any("scores.jsonl:1: missing field 'pass_at'" in p for p in problems)


def test_pin_copies_a_run_and_rewrites_the_manifest(tmp_path):
    from ictrepro.presets import prepare_preset
    from ictrepro.results.pinned import pin_run
    from ictrepro.stages.eval import evaluate_run
    from ictrepro.stages.prepare import prepare

    run_dir = tmp_path / "run"
    prepare(prepare_preset("tiny-smoke", seed=0), run_dir, show_progress=False)
    evaluate_run(run_dir, benchmarks=["tiny-gsm8k"], workers=0, show_progress=False)
    results = tmp_path / "results"
    with pytest.raises(ResultsError, match=r"no reproduce\.json .* with --jobs"):
        pin_run(run_dir, "tiny-smoke", results_dir=results)
    out = pin_run(run_dir, "tiny-smoke", results_dir=results, jobs=1)
    problems = check_results(results)  # only the paper data are absent from this folder
    assert problems and all("paper" in p for p in problems)
    assert [r["model"] for r in collect_scores(run_dir)] == ["base"]
    assert (out / "scores.jsonl").is_file() and (results / "MANIFEST.sha256").is_file()


def test_rerun_reproduces_the_pinned_subset_and_catches_a_change(tmp_path):
    from ictrepro.results.pinned import pin_run, rerun_check
    from ictrepro.stages.reproduce import make_plan, reproduce

    results = tmp_path / "results"
    shutil.copytree(RESULTS_DIR / "paper", results / "paper")
    first = tmp_path / "first"
    reproduce(
        make_plan("tiny-smoke", first, methods=("grpo", "ict"), seeds=(0,)), show_progress=False
    )
    assert json.loads((first / "reproduce.json").read_text())["jobs"] == 1
    pin_run(first, "tiny-smoke", results_dir=results)  # the jobs from reproduce.json
    assert (
        json.loads((results / "tiny-smoke" / "provenance.json").read_text())["training_jobs"] == 1
    )
    assert check_results(results) == []
    mode, problems = rerun_check("tiny-smoke", tmp_path / "again", results_dir=results)
    assert (mode, problems) == ("identical", [])
    # Change one pinned count, as an unintended change of the code would.
    scores = results / "tiny-smoke" / "scores.jsonl"
    rows = [json.loads(x) for x in scores.read_text().splitlines()]
    rows[0]["n_correct"][0] = 4 - rows[0]["n_correct"][0]
    scores.write_text("".join(json.dumps(r) + "\n" for r in rows))
    mode, problems = rerun_check("tiny-smoke", tmp_path / "again", results_dir=results)
    assert mode == "identical"
    assert problems == [
        f"{(rows[0]['model'], rows[0]['benchmark'])}: 1 problems' correct counts differ from the pinned run"
    ]
