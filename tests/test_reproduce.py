"""`ictrepro reproduce` on the seconds-scale `tiny-smoke` preset."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import torch
from conftest import flat
from typer.testing import CliRunner

from ictrepro.cli import app
from ictrepro.rundir import load_record
from ictrepro.stages.reproduce import make_plan, reproduce


def stamps(run_dir):
    """mtime of every stage record and score file."""
    paths = [run_dir / "prepare.json", *run_dir.glob("train/*/train.json")]
    paths += list(run_dir.glob("eval/*/*.score.json"))
    return {p: p.stat().st_mtime_ns for p in paths}


def result_hashes(run_dir):
    """sha256 of every trained model's weights and every evaluation's samples."""
    paths = [*run_dir.glob("train/*/final_model/model.safetensors")]
    paths += list(run_dir.glob("eval/*/*.samples.jsonl"))
    return {str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("repro") / "run"
    plan = make_plan("tiny-smoke", run_dir, methods=("grpo", "ict"), seeds=(0,))
    # One thread, as the command line's pinned numerics run a reproduction in process.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        times = reproduce(plan, show_progress=False)
    finally:
        torch.set_num_threads(threads)
    return run_dir, times


def test_every_stage_runs(reproduced):
    run_dir, times = reproduced
    assert load_record(run_dir, "prepare")["status"] == "done"
    for name in ("grpo-seed0", "ict-seed0"):
        assert load_record(run_dir / "train" / name, "train")["status"] == "done"
    for model in ("base", "grpo-seed0", "ict-seed0"):
        scores = sorted(p.name for p in (run_dir / "eval" / model).glob("*.score.json"))
        assert len(scores) == 7
    assert set(times) >= {"prepare_s", "train_s", "eval_s", "report_s", "total_s"}
    record = json.loads((run_dir / "reproduce.json").read_text())
    assert record["jobs"] == 1 and record["methods"] == ["grpo", "ict"]
    assert record["times_s"]["total_s"] == round(times["total_s"], 1)
    report = (run_dir / "report" / "report.md").read_text()
    assert "Not the paper's scale" in report and "ICT" in report
    assert (run_dir / "report" / "summary.json").is_file()


def test_report_command_writes_elsewhere(reproduced, tmp_path):
    result = CliRunner().invoke(
        app, ["report", "--run", str(reproduced[0]), "--out", str(tmp_path / "rep"), "--quiet"]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "rep" / "report.md").is_file()
    assert sorted(p.name for p in (tmp_path / "rep" / "plots").glob("*.png"))
    missing = CliRunner().invoke(app, ["report", "--run", str(tmp_path / "nothing"), "--quiet"])
    assert missing.exit_code == 2


def test_rerun_skips_everything_and_resumes_what_is_missing(reproduced, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(reproduced[0], run_dir)
    plan = make_plan("tiny-smoke", run_dir, methods=("grpo", "ict"), seeds=(0,))
    before = stamps(run_dir)
    reproduce(plan, show_progress=False)
    assert stamps(run_dir) == before
    # An interruption: one training run lost its final record, one score is missing.
    shutil.rmtree(run_dir / "train" / "ict-seed0")
    (run_dir / "eval" / "base" / "tiny-gsm8k.score.json").unlink()
    reproduce(plan, show_progress=False)
    after = stamps(run_dir)
    redone = {p for p in after if before.get(p) != after[p]}
    assert run_dir / "eval" / "base" / "tiny-gsm8k.score.json" in redone
    assert run_dir / "train" / "ict-seed0" / "train.json" in redone
    assert run_dir / "prepare.json" not in redone
    assert run_dir / "train" / "grpo-seed0" / "train.json" not in redone
    assert run_dir / "eval" / "grpo-seed0" / "tiny-gsm8k.score.json" not in redone


def test_parallel_jobs_train_and_evaluate_in_worker_processes(reproduced, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(reproduced[0], run_dir, ignore=shutil.ignore_patterns("train", "eval"))
    plan = make_plan("tiny-smoke", run_dir, methods=("grpo", "ict"), seeds=(0,))
    times = reproduce(plan, jobs=3, show_progress=False)
    assert "train_eval_s" in times  # training and evaluation overlap: one figure
    assert json.loads((run_dir / "reproduce.json").read_text())["jobs"] == 3
    # Every task runs on one thread whatever the worker count: the same weights and samples
    # as one process (so --jobs only changes the time).
    hashes = result_hashes(run_dir)
    assert len(hashes) == 2 + 3 * 7
    assert hashes == result_hashes(reproduced[0])
    for name in ("grpo-seed0", "ict-seed0"):
        record = load_record(run_dir / "train" / name, "train")
        assert record["status"] == "done"
        assert (run_dir / "logs" / f"train-{name}.log").is_file()
    lines = (run_dir / "train" / "ict-seed0" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [1, 2, 3]
    # Each model was evaluated by a worker too, as soon as it existed.
    for model in ("base", "grpo-seed0", "ict-seed0"):
        assert (run_dir / "logs" / f"eval-{model}.log").is_file()
        assert len(list((run_dir / "eval" / model).glob("*.score.json"))) == 7


@pytest.mark.parametrize("jobs", [1, 2])
def test_only_the_presets_benchmarks_are_evaluated(reproduced, tmp_path, jobs):
    """A preset may evaluate fewer suites than its world was prepared with (the lock
    world's screen reads only validation): the reproduction evaluates the preset's."""
    import dataclasses

    run_dir = tmp_path / "run"
    shutil.copytree(reproduced[0], run_dir, ignore=shutil.ignore_patterns("eval", "report"))
    plan = make_plan("tiny-smoke", run_dir, methods=("grpo", "ict"), seeds=(0,))
    plan = dataclasses.replace(plan, benchmarks=("tiny-gsm8k",))
    reproduce(plan, jobs=jobs, show_progress=False)
    for model in ("base", "grpo-seed0", "ict-seed0"):
        scores = [p.name for p in (run_dir / "eval" / model).glob("*.score.json")]
        assert scores == ["tiny-gsm8k.score.json"]


def test_dry_run_prints_the_plan():
    result = CliRunner().invoke(app, ["reproduce", "--preset", "tiny", "--dry-run"])
    assert result.exit_code == 0
    text = flat(result.output)
    assert "2. train: 30 runs (6 methods x 5 seeds)" in text
    assert "31 models (base + trained) x 7 benchmarks = 222,208 sampled responses" in text
    result = CliRunner().invoke(app, ["reproduce", "--preset", "paper-7b", "--dry-run"])
    text = flat(result.output)
    assert result.exit_code == 0 and "NOT AVAILABLE" not in text
    assert "1. prepare: base model Qwen/Qwen2.5-7B (bfloat16)" in text
    # The paper's five seeds by default.
    assert "2. train: 25 runs (5 methods x 5 seeds)" in text


def test_dry_run_of_a_pretrained_preset_names_the_deviations(tmp_path):
    args = ["reproduce", "--preset", "paper-0.5b", "--dry-run", "--methods", "grpo,ict"]
    args += ["--seeds", "0", "--data-dir", str(tmp_path), "--train-sets", "gsm8k_train"]
    result = CliRunner().invoke(app, [*args, "--skip-benchmarks", "gpqa_diamond"])
    text = flat(result.output)
    assert result.exit_code == 0, text
    assert f"benchmarks from {tmp_path}" in text
    assert "deviation from the paper: RL training data: gsm8k_train only" in text
    assert "not evaluated on the paper's benchmark(s) gpqa_diamond" in text
    assert "benchmarks: math500, gsm8k, mmlu_stem, aime23, aime24, aime25" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--preset", "huge"], "unknown preset 'huge'; valid: tiny"),
        (["--methods", "grpo,nope"], "unknown token-selection method 'nope'"),
        (["--seeds", "a"], "--seeds must be comma-separated integers"),
        (["--preset", "tiny", "--data-dir", "x"], "--data-dir: preset 'tiny' builds its own"),
        (["--preset", "paper-0.5b", "--train-sets", "nope"], "unknown RL training set 'nope'"),
    ],
)
def test_bad_input(args, message, tmp_path):
    result = CliRunner().invoke(app, ["reproduce", "--out", str(tmp_path / "r"), "--quiet", *args])
    assert result.exit_code == 2
    assert message in flat(result.output)


def test_a_run_directory_of_another_config_is_refused_with_the_fix(tmp_path):
    from ictrepro.presets import prepare_preset
    from ictrepro.stages.prepare import prepare

    run_dir = tmp_path / "run"
    prepare(prepare_preset("tiny-smoke", seed=5), run_dir, show_progress=False)
    result = CliRunner().invoke(
        app, ["reproduce", "--preset", "tiny-smoke", "--out", str(run_dir), "--quiet"]
    )
    assert result.exit_code == 2
    text = flat(result.output)
    assert "made by a different config" in text and "--force" in text
