"""`ictrepro eval`, `sample` and `score` on the `tiny-smoke` world.

Most tests evaluate through a scripted policy (``conftest.scripted_policy``) whose
per-problem correct counts are known (0..4 of 4, different for the base and the trained
model), so a wrong count, a sample in the wrong file or a wrong pass@k fails; the real
tiny-smoke models answer nothing correctly.
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import AlternatingVerifier, copy_world, flat, scripted_response
from typer.testing import CliRunner

from ictrepro.cli import app
from ictrepro.data.suites import load_test_split
from ictrepro.errors import ConfigError
from ictrepro.evaluate.passk import mean_pass_at_k
from ictrepro.evaluate.score import score_problems
from ictrepro.presets import train_preset
from ictrepro.rundir import BASE, ModelId, RunDir, SamplesFile, read_score
from ictrepro.stages.eval import evaluate_run, load_task, run_models
from ictrepro.stages.train import train
from ictrepro.verify import Verdict

SUITES = ["tiny-gsm8k", "tiny-mmlu-stem"]
ICT = ModelId("ict", 0)
C, W, U = Verdict.CORRECT, Verdict.WRONG, Verdict.UNGRADABLE


@pytest.fixture(scope="module")
def trained(smoke_world, tmp_path_factory):
    run_dir = copy_world(smoke_world, tmp_path_factory.mktemp("eval") / "run")
    config = train_preset("tiny-smoke", method="ict", overrides={"rl.steps": 1})
    train(config, run_dir, show_progress=False, verifier=AlternatingVerifier())
    return run_dir


@pytest.fixture
def run_dir(trained, tmp_path):
    return copy_world(trained, tmp_path / "run")


def test_eval_scores_every_model_and_writes_samples(run_dir, scripted_policy):
    results = evaluate_run(run_dir, benchmarks=SUITES, workers=0, show_progress=False)
    assert set(results) == {BASE, ICT} == set(run_models(run_dir))
    rundir = RunDir(run_dir)
    for model, per in results.items():
        for suite in SUITES:
            problems = load_test_split(run_dir, suite)
            expected = scripted_policy(run_dir, suite, trained=model == ICT)
            assert len(problems) == 8 and sum(expected) > 0
            # The samples file holds exactly the policy's responses and their verdicts.
            samples = SamplesFile.read(rundir.samples_path(model, suite))
            assert [s.id for s in samples.problems] == [p.id for p in problems]
            for s, p, c in zip(samples.problems, problems, expected, strict=True):
                assert s.responses == tuple(scripted_response(p, j < c) for j in range(4))
                assert s.verdicts == ("correct",) * c + ("no_answer",) * (4 - c)
            # The score record carries the per-problem counts, and pass@k is their mean.
            record = read_score(rundir.score_path(model, suite))
            assert record == per[suite]
            assert [(q.id, q.n_samples, q.n_correct) for q in record.problems] == [
                (p.id, 4, c) for p, c in zip(problems, expected, strict=True)
            ]
            assert record.ungradable == () and record.verdicts["correct"] == sum(expected)
            for k in (1, 4):
                assert record.pass_at[k] == mean_pass_at_k([4] * 8, expected, k)
            assert record.identity["settings"]["sampling"]["n"] == 4
    # The two models' counts differ, so a model's samples in the other's file would fail.
    assert scripted_policy(run_dir, "tiny-gsm8k", True) != scripted_policy(
        run_dir, "tiny-gsm8k", False
    )


def test_eval_rerun_skips_and_resumes_only_what_is_missing(run_dir, scripted_policy):
    evaluate_run(run_dir, benchmarks=SUITES, workers=0, show_progress=False)
    scores = sorted((run_dir / "eval").rglob("*.score.json"))
    mtimes = {p: p.stat().st_mtime_ns for p in scores}
    evaluate_run(run_dir, benchmarks=SUITES, workers=0, show_progress=False)
    assert {p: p.stat().st_mtime_ns for p in scores} == mtimes
    victim = run_dir / "eval" / "base" / "tiny-gsm8k.score.json"
    victim.unlink()  # as if the run had been interrupted before writing it
    # A samples file changed after its score was recorded: the pair is no longer current.
    edited = run_dir / "eval" / "ict-seed0" / "tiny-mmlu-stem.samples.jsonl"
    edited.write_text(edited.read_text().replace("correct", "wrong"))
    evaluate_run(run_dir, benchmarks=SUITES, workers=0, show_progress=False)
    assert victim.exists()
    redone = {victim, edited.with_name("tiny-mmlu-stem.score.json")}
    assert {p: p.stat().st_mtime_ns for p in scores if p not in redone} == {
        p: m for p, m in mtimes.items() if p not in redone
    }
    record = read_score(edited.with_name("tiny-mmlu-stem.score.json"))
    assert record.n_correct == scripted_policy(run_dir, "tiny-mmlu-stem", trained=True)


def test_eval_same_seed_same_samples(run_dir):
    """The real sampler: the same seed draws the very same responses."""
    samples = RunDir(run_dir).samples_path(BASE, "tiny-gsm8k")
    evaluate_run(run_dir, benchmarks=SUITES[:1], models=["base"], workers=0, show_progress=False)
    first = samples.read_bytes()
    evaluate_run(
        run_dir, benchmarks=SUITES[:1], models=["base"], workers=0, force=True, show_progress=False
    )
    assert samples.read_bytes() == first
    assert all(len(p.responses) == 4 for p in SamplesFile.read(samples).problems)


def test_sample_then_score_matches_eval(run_dir, tmp_path, scripted_policy):
    runner = CliRunner()
    out = tmp_path / "responses.jsonl"
    result = runner.invoke(
        app,
        [
            "sample",
            "--model",
            str(run_dir / "base_model"),
            "--benchmark",
            "tiny-gsm8k",
            "--run",
            str(run_dir),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 8 * 4 and {"id", "sample", "response"} <= set(lines[0])
    result = runner.invoke(
        app,
        [
            "score",
            "--benchmark",
            "tiny-gsm8k",
            "--run",
            str(run_dir),
            "--responses",
            str(out),
            "--workers",
            "0",
        ],
    )
    assert result.exit_code == 0, result.output
    assert re.search(r"\d+\.\d\d%", result.output)  # pass@k printed with its unit
    verdicts = [
        json.loads(x) for x in (tmp_path / "responses.verdicts.jsonl").read_text().splitlines()
    ]
    assert len(verdicts) == 32 and verdicts[0]["line"] == 1
    # The same policy gives the same samples as eval: the same counts, the same pass@1.
    ours = evaluate_run(
        run_dir, benchmarks=["tiny-gsm8k"], models=["base"], workers=0, show_progress=False
    )
    record = ours[BASE]["tiny-gsm8k"]
    counts = {q.id: 0 for q in record.problems}
    for line in verdicts:
        counts[line["id"]] += line["correct"]
    assert (
        list(counts.values()) == record.n_correct == scripted_policy(run_dir, "tiny-gsm8k", False)
    )
    assert record.pass_at[1] > 0
    assert f"{100 * record.pass_at[1]:.2f}" in flat(result.output)


def test_score_problems_by_hand():
    score = score_problems([[C, W, W, W], [C, C, W, W], [U, W, W, W]], ["a", "b", "c"], (1, 4))
    assert score.n_problems == 2 and score.n_ungradable == 1
    assert score.pass_at[1] == pytest.approx((0.25 + 0.5) / 2)
    assert score.pass_at[4] == 1.0
    # Different n per problem: 2 samples (1 correct) and 4 samples (0 correct).
    assert score_problems([[C, W], [W] * 4], ["a", "b"], (1,)).pass_at[1] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="problem 'a' has 2 samples; pass@4 needs at least 4"):
        score_problems([[C, W]], ["a"], (1, 4))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"id": "x", "response": "1"}\n{oops\n', "responses.jsonl:2"),
        ('{"id": "tiny-gsm8k-test-00000"}\n', "missing field 'response'"),
        ('{"id": "nope", "response": "1"}\n', "id 'nope' is not a problem of tiny-gsm8k"),
        ("", "has no responses"),
    ],
)
def test_score_bad_input_is_named(run_dir, tmp_path, content, message):
    path = tmp_path / "responses.jsonl"
    path.write_text(content)
    result = CliRunner().invoke(
        app,
        [
            "score",
            "--benchmark",
            "tiny-gsm8k",
            "--run",
            str(run_dir),
            "--responses",
            str(path),
            "--workers",
            "0",
        ],
    )
    assert result.exit_code == 2
    assert message in flat(result.output)


def test_score_too_few_samples_for_k(run_dir, tmp_path):
    task = load_task("tiny-gsm8k", run_dir=run_dir)
    path = tmp_path / "responses.jsonl"
    path.write_text(json.dumps({"id": task.problems[0].id, "response": "\\boxed{1}"}) + "\n")
    result = CliRunner().invoke(
        app,
        [
            "score",
            "--benchmark",
            "tiny-gsm8k",
            "--run",
            str(run_dir),
            "--responses",
            str(path),
            "--workers",
            "0",
        ],
    )
    assert result.exit_code == 2 and "pass@4 needs at least 4" in flat(result.output)
    ok = CliRunner().invoke(
        app,
        [
            "score",
            "--benchmark",
            "tiny-gsm8k",
            "--run",
            str(run_dir),
            "--responses",
            str(path),
            "--workers",
            "0",
            "--k",
            "1",
        ],
    )
    assert ok.exit_code == 0 and "7 problems have no response" in flat(ok.output)


def test_eval_bad_input(run_dir):
    runner = CliRunner()
    result = runner.invoke(
        app, ["eval", "--run", str(run_dir), "--models", "grpo-seed9", "--quiet"]
    )
    assert result.exit_code == 2 and "no finished model ['grpo-seed9']" in flat(result.output)
    result = runner.invoke(
        app, ["eval", "--run", str(run_dir), "--benchmarks", "tiny-gsm8k", "--n", "2", "--quiet"]
    )
    assert result.exit_code == 2 and "pass@4 needs at least 4 samples" in flat(result.output)
    with pytest.raises(ValueError, match="needs --run"):
        load_task("tiny-gsm8k")


def test_stop_strings_only_for_the_plain_base_frame(run_dir):
    from transformers import AutoTokenizer

    from ictrepro.data.prompts import stop_strings

    tok = AutoTokenizer.from_pretrained(run_dir / "base_model")
    assert stop_strings(tok) == ()  # it has a chat template
    assert stop_strings(tok, style="base") == ("\nQuestion:",)


def test_paper_benchmarks_from_a_local_folder_and_bad_names(tmp_path):
    from ictrepro.io import atomic_write_jsonl

    folder = tmp_path / "benchmarks" / "aime24"
    atomic_write_jsonl(
        folder / "test.jsonl",
        ({"id": f"aime-{i}", "problem": f"Compute {i}+1.", "answer": str(i + 1)} for i in range(3)),
    )
    task = load_task("aime24", data_dir=tmp_path / "benchmarks")
    assert [p.answer for p in task.problems] == ["1", "2", "3"]
    assert task.sampling.n == 16 and max(task.ks) <= task.sampling.n
    with pytest.raises(ConfigError, match=r"'nope' is unknown; valid: tiny-gsm8k.*math500"):
        load_task("nope")
    with pytest.raises(ConfigError, match="'gsm8k_train' is a training set"):
        load_task("gsm8k_train")


@pytest.fixture
def scripted_lm_eval(monkeypatch):
    """lm-eval's HF model answers as the scripted policy does (by the document's index and
    the repeat), so lm-eval's own pass@k is tested on known non-zero counts."""
    from collections import Counter

    from conftest import scripted_correct
    from lm_eval.models.huggingface import HFLM

    def generate_until(self, requests, disable_tqdm=False):
        seen: Counter = Counter()
        out = []
        for req in requests:
            j = seen[req.task_name, req.doc_id]
            seen[req.task_name, req.doc_id] += 1
            correct = j < scripted_correct(req.doc_id, trained=False)
            out.append(scripted_response(_Gold(req.doc["answer"]), correct))
        return out

    monkeypatch.setattr(HFLM, "generate_until", generate_until)


class _Gold:
    def __init__(self, answer):
        self.answer = answer


def test_eval_through_lm_eval_matches_our_scoring_of_the_same_samples(
    run_dir, scripted_lm_eval, scripted_policy
):
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "--run",
            str(run_dir),
            "--harness",
            "lm-eval",
            "--models",
            "base",
            "--benchmarks",
            "tiny-gsm8k,tiny-mmlu-stem",
            "--workers",
            "0",
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    for suite in SUITES:
        record = read_score(RunDir(run_dir).score_path(BASE, suite))
        assert record.identity["backend"] == "lm-eval"
        assert record.n_correct == scripted_policy(run_dir, suite, trained=False)
        # lm-eval's own pass@k (its process_results) equals ours on the very same samples.
        for k in (1, 4):
            assert record.pass_at[k] > 0
            assert record.lm_eval_pass_at[k] == pytest.approx(record.pass_at[k], abs=1e-12)
        samples = SamplesFile.read(RunDir(run_dir).samples_path(BASE, suite))
        assert len(samples.problems) == 8 and all(len(p.responses) == 4 for p in samples.problems)
    bad = CliRunner().invoke(app, ["eval", "--run", str(run_dir), "--harness", "helm", "--quiet"])
    assert bad.exit_code == 2 and "unknown harness 'helm'; valid: ours, lm-eval" in flat(bad.output)
