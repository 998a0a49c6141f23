"""The run directory's names and files: ModelId, score records, samples files, the one
"done and current" check."""

from __future__ import annotations

import json

import pytest

from ictrepro.errors import ConfigError, DataError
from ictrepro.evaluate.passk import mean_pass_at
from ictrepro.io import hash_outputs, sha256_file, sha256_json
from ictrepro.rundir import (
    BASE,
    ModelId,
    ProblemCount,
    ProblemSamples,
    RunDir,
    RunDirConflict,
    SamplesFile,
    ScoreRecord,
    StageRecord,
    decide,
    is_current,
    read_score,
    write_record,
)


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("base", BASE),
        ("ict-seed0", ModelId("ict", 0)),
        ("lowprob_cmp-seed12", ModelId("lowprob_cmp", 12)),
        ("my-rule-seed3", ModelId("my-rule", 3)),
    ],
)
def test_model_names_round_trip(name, model):
    assert ModelId.parse(name) == model and model.name == name == str(model)


@pytest.mark.parametrize("name", ["ict", "ict-seed", "ict-seedx", "-seed0", "ict-seed0/x"])
def test_bad_model_names_are_named(name):
    with pytest.raises(ConfigError, match=f"model name {name!r} is not 'base' or"):
        ModelId.parse(name)


def test_base_has_no_seed_and_a_run_has_one():
    with pytest.raises(ValueError, match="the base model has no seed"):
        ModelId("base", 0)
    with pytest.raises(ValueError, match="the base model has no seed"):
        ModelId("ict")


def test_paths(tmp_path):
    run = RunDir(tmp_path)
    ict = ModelId("ict", 1)
    assert run.test_suite("tiny-gsm8k") == tmp_path / "data/test/tiny-gsm8k.jsonl"
    assert run.model_dir(BASE) == tmp_path / "base_model"
    assert run.model_dir(ict) == tmp_path / "train/ict-seed1/final_model"
    assert run.score_path(ict, "tiny-gsm8k") == tmp_path / "eval/ict-seed1/tiny-gsm8k.score.json"
    assert run.log("train", ict) == tmp_path / "logs/train-ict-seed1.log"


def _record(tmp_path) -> tuple[ScoreRecord, SamplesFile]:
    samples = SamplesFile(
        (
            ProblemSamples("a", ("x", "y"), ("correct", "wrong")),
            ProblemSamples("b", ("x", "y"), ("ungradable", "ungradable")),
            ProblemSamples("c", ("x", "y"), ("correct", "correct"), (True, False)),
        )
    )
    path = RunDir(tmp_path).samples_path(BASE, "tiny-gsm8k")
    samples.write(path)
    problems = (ProblemCount("a", 2, 1), ProblemCount("c", 2, 2))
    record = ScoreRecord(
        benchmark="tiny-gsm8k",
        model=BASE,
        pass_at=mean_pass_at(problems, (1, 2)),
        problems=problems,
        ungradable=("b",),
        verdicts={"correct": 3, "wrong": 1, "ungradable": 2},
        identity={"seed": 0},
        samples_sha256=sha256_file(path),
    )
    return record, samples


def test_score_record_and_samples_file_round_trip(tmp_path):
    record, samples = _record(tmp_path)
    path = RunDir(tmp_path).score_path(BASE, "tiny-gsm8k")
    record.write(path)
    assert read_score(path) == record
    assert record.pass_at == {1: 0.75, 2: 1.0}  # (1/2 + 1) / 2 and (1 + 1) / 2, by hand
    assert SamplesFile.read(RunDir(tmp_path).samples_path(BASE, "tiny-gsm8k")) == samples
    assert [p.n_correct for p in samples.problems] == [1, 0, 2]
    assert RunDir(tmp_path).load_scores() == {BASE: {"tiny-gsm8k": record}}


def test_a_score_record_is_current_until_its_samples_change(tmp_path):
    record, _ = _record(tmp_path)
    path = RunDir(tmp_path).score_path(BASE, "tiny-gsm8k")
    record.write(path)
    raw = json.loads(path.read_text())
    assert is_current(raw, sha256_json({"seed": 0}), path.parent)
    assert not is_current(raw, sha256_json({"seed": 1}), path.parent)
    samples = RunDir(tmp_path).samples_path(BASE, "tiny-gsm8k")
    samples.write_text(samples.read_text() + "\n")
    assert not is_current(raw, sha256_json({"seed": 0}), path.parent)
    assert not is_current(None, sha256_json({"seed": 0}), path.parent)


def test_a_score_record_is_decided_on_its_own_in_a_shared_folder(tmp_path):
    """Eval's records share ``eval/<model>/``: nothing is refused, whatever is not current
    is re-made, and --force re-makes a current one."""
    record, _ = _record(tmp_path)
    path = RunDir(tmp_path).score_path(BASE, "tiny-gsm8k")
    assert decide(path, {"seed": 0}, shared=True) == "fresh"
    record.write(path)
    assert decide(path, {"seed": 0}, shared=True) == "current"
    assert decide(path, {"seed": 0}, shared=True, force=True) == "redo"
    assert decide(path, {"seed": 1}, shared=True) == "redo"
    path.write_text("{not json")
    assert decide(path, {"seed": 0}, shared=True) == "redo"


def _stage(folder, identity, status="done"):
    """A stage in ``folder`` with one output file and its record."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "out.txt").write_text("result")
    outputs = hash_outputs(folder, ["out.txt"]) if status == "done" else {}
    write_record(folder, StageRecord("demo", status, {"c": 1}, identity, outputs, {}))
    return folder / "demo.json"


def test_decide_runs_a_stage_once_and_redoes_a_changed_output(tmp_path):
    record = tmp_path / "run" / "demo.json"
    assert decide(record, {"lr": 1}) == "fresh"  # no folder
    record.parent.mkdir()
    assert decide(record, {"lr": 1}) == "fresh"  # an empty folder
    _stage(record.parent, {"lr": 1})
    assert decide(record, {"lr": 1}) == "current"
    assert decide(record, {"lr": 1}, force=True) == "redo"
    (record.parent / "out.txt").write_text("edited")
    assert decide(record, {"lr": 1}) == "redo"  # a stage without resume runs again
    with pytest.raises(RunDirConflict, match="--resume"):
        decide(record, {"lr": 1}, resume=False)
    assert decide(record, {"lr": 1}, resume=True) == "resume"


def test_decide_resumes_only_when_asked(tmp_path):
    record = _stage(tmp_path / "run", {"lr": 1}, status="running")
    assert decide(record, {"lr": 1}) == "redo"
    assert decide(record, {"lr": 1}, resume=True) == "resume"
    with pytest.raises(RunDirConflict, match="unfinished run of this config; pass --resume"):
        decide(record, {"lr": 1}, resume=False)


def test_decide_refuses_another_config_and_foreign_files(tmp_path):
    record = _stage(tmp_path / "run", {"rl": {"lr": 1, "beta": 0}})
    with pytest.raises(RunDirConflict, match=r"different config.*--force") as err:
        decide(record, {"rl": {"lr": 2, "beta": 0}}, resume=True)
    assert "rl.lr: 1 (recorded) != 2 (now)" in str(err.value)
    assert "beta" not in str(err.value)
    assert decide(record, {"rl": {"lr": 2, "beta": 0}}, force=True) == "redo"
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(RunDirConflict, match="not made by `ictrepro demo`"):
        decide(foreign / "demo.json", {"lr": 1})


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r.pop("schema"), "score record of schema None, this version reads 1"),
        (lambda r: r.pop("problems"), "missing field 'problems'"),
        (lambda r: r["problems"].__setitem__(0, ["a", 2, 3]), r"problems\[0\] must be"),
        (lambda r: r.update(model="ict"), "bad field 'model'"),
    ],
)
def test_a_bad_score_record_is_named(tmp_path, edit, message):
    record, _ = _record(tmp_path)
    path = tmp_path / "x.score.json"
    raw = record.to_json()
    edit(raw)
    path.write_text(json.dumps(raw))
    with pytest.raises(DataError, match=message) as err:
        read_score(path)
    assert str(path) in str(err.value)
    path.write_text("{oops")
    with pytest.raises(DataError, match=r"x.score.json: not valid JSON"):
        read_score(path)


def test_a_bad_samples_line_is_named(tmp_path):
    path = tmp_path / "s.samples.jsonl"
    path.write_text('{"id": "a", "responses": ["x"], "verdicts": ["correct"]}\n{"id": "b"}\n')
    with pytest.raises(DataError, match=r"s.samples.jsonl:2: missing field 'responses'"):
        SamplesFile.read(path)
    path.write_text('{"id": "a", "responses": ["x"], "verdicts": []}\n')
    with pytest.raises(DataError, match=r"s.samples.jsonl:1: 0 verdicts for 1 responses"):
        SamplesFile.read(path)
    path.write_text("{oops\n")
    with pytest.raises(DataError, match=r"s.samples.jsonl:1: not valid JSON"):
        SamplesFile.read(path)


def test_train_dir_layout(tmp_path):
    """A training run's paths, and the outputs its record hashes, are RunDir's."""
    run = RunDir(tmp_path)
    model = ModelId("ict", 1)
    folder = run.train_run(model)
    assert folder.root == tmp_path / "train" / "ict-seed1"
    assert folder.record == folder.root / "train.json"
    assert run.metrics(model) == folder.metrics == folder.root / "metrics.jsonl"
    assert run.model_dir(model) == folder.final_model == folder.root / "final_model"
    assert folder.outputs == ("final_model", "metrics.jsonl")
    assert run.relative(run.data, run.calibration) == ("data", "calibration.json")
