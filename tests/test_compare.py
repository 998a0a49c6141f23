"""A user's own rule from a file: `--method-module`, and `ictrepro compare` against pinned results.

The pinned baselines are a tiny-smoke reproduction evaluated through the scripted policy
(``conftest.script_policy``): their counts are known and not all zero, so a count lost or
misplaced on the way into the compare run fails.
"""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest
from conftest import copy_world, flat, script_policy
from typer.testing import CliRunner

from ictrepro.algos.selection import MethodModuleError, available_selections, load_method_module
from ictrepro.cli import app
from ictrepro.data.suites import load_test_split
from ictrepro.results.pinned import pin_run, read_pinned_scores
from ictrepro.rundir import ModelId, RunDir, read_score
from ictrepro.stages.compare import compare
from ictrepro.stages.reproduce import make_plan, reproduce

LOWPROB = '''
import torch
from ictrepro.algos.selection import SelectionInputs, register_selection, top_fraction_mask


@register_selection("lowprob_{tag}", needs=("logprob",))
def lowprob(inputs: SelectionInputs, *, rho: float = 0.1) -> torch.Tensor:
    """The rho least probable tokens of each response."""
    return top_fraction_mask(-inputs.logprob, inputs.response_mask, rho, "sequence")
'''

#: A rule whose mask has one column instead of the response's width.
WRONG_SHAPE = """
from ictrepro.algos.selection import register_selection


@register_selection("broken_{tag}")
def broken(inputs):
    return inputs.response_mask[:, :1].clone()
"""


# Rules loaded from test files must not leak into other tests' lists of methods.
pytestmark = pytest.mark.usefixtures("restore_registry")


def rule_file(tmp_path, tag: str, body: str = LOWPROB):
    path = tmp_path / f"rule_{tag}.py"
    path.write_text(textwrap.dedent(body.replace("{tag}", tag)))
    return path


@pytest.fixture(scope="module")
def pinned_smoke(tmp_path_factory):
    """A pinned tiny-smoke reproduction (grpo, ict; seed 0; scripted policy) in a private
    results folder."""
    root = tmp_path_factory.mktemp("cmp")
    results = root / "results"
    run_dir = root / "baseline-run"
    with pytest.MonkeyPatch.context() as mp:
        script_policy(mp)
        plan = make_plan("tiny-smoke", run_dir, methods=("grpo", "ict"), seeds=(0,))
        reproduce(plan, show_progress=False)
    pin_run(run_dir, "tiny-smoke", results_dir=results)
    return run_dir, results


def test_loading_a_rule_file_registers_it_once(tmp_path):
    path = rule_file(tmp_path, "once")
    assert load_method_module(path) == ["lowprob_once"]
    assert load_method_module(path) == ["lowprob_once"]  # idempotent
    assert available_selections()["lowprob_once"].defaults == {"rho": 0.1}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("import nonexistent_package_xyz\n", "failed to import: ModuleNotFoundError"),
        ("x = 1\n", "registered no selection rule"),
    ],
)
def test_bad_modules_are_named(tmp_path, body, message):
    path = rule_file(tmp_path, "bad", body)
    with pytest.raises(MethodModuleError, match=message) as err:
        load_method_module(path)
    assert str(path) in str(err.value)
    with pytest.raises(MethodModuleError, match="does not exist"):
        load_method_module(tmp_path / "missing.py")


def test_compare_trains_only_the_new_rule_and_reports_it_against_the_pinned(
    pinned_smoke, tmp_path, scripted_policy
):
    baseline_run, results = pinned_smoke
    path = rule_file(tmp_path, "cmp")
    load_method_module(path)
    run_dir = tmp_path / "compare"
    # Start from the same prepared world, as a user comparing on this version's preset does.
    copy_world(baseline_run, run_dir, only_prepared=True)
    report = compare(  # no seeds: those of the pinned baselines (seed 0 only here)
        "lowprob_cmp",
        "tiny-smoke",
        run_dir,
        method_module=path,
        results_dir=results,
        show_progress=False,
    )
    assert sorted(p.name for p in (run_dir / "train").iterdir()) == ["lowprob_cmp-seed0"]
    record = json.loads((run_dir / "train" / "lowprob_cmp-seed0" / "train.json").read_text())
    assert record["info"]["inputs"]["method_module"] == str(path)
    assert {"grpo-seed0", "ict-seed0", "base", "lowprob_cmp-seed0"} <= {
        p.name for p in (run_dir / "eval").iterdir()
    }
    # The pinned baselines' counts are the pinned ones, on this run's problems, as score
    # records without samples (no stand-in samples file).
    rundir = RunDir(run_dir)
    for row in read_pinned_scores("tiny-smoke", results):
        model = ModelId.parse(row["model"])
        if model.is_base:
            continue
        copied = read_score(rundir.score_path(model, row["benchmark"]))
        problems = load_test_split(run_dir, row["benchmark"])
        assert copied.pinned and copied.n_correct == row["n_correct"]
        assert copied.n_correct == scripted_policy(run_dir, row["benchmark"], trained=True)
        assert [q.id for q in copied.problems] == [p.id for p in problems]
        assert {str(k): v for k, v in copied.pass_at.items()} == row["pass_at"]
        assert not rundir.samples_path(model, row["benchmark"]).exists()
    assert set(rundir.load_scores()) == {
        ModelId("grpo", 0),
        ModelId("ict", 0),
        ModelId("base"),
        ModelId("lowprob_cmp", 0),
    }
    # The report reads the baselines from their score records.
    text = (run_dir / "report" / "report.md").read_text()
    assert "lowprob_cmp" in text and "GRPO" in text
    assert set(report.gains) >= {"grpo", "ict"}
    # Which world each number comes from: the pinned baselines' and this run's are one.
    record = json.loads((run_dir / "compare.json").read_text())
    assert (
        record["world"]["base_model_sha256"]
        == json.loads((results / "tiny-smoke" / "provenance.json").read_text())["world"][
            "base_model_sha256"
        ]
    )
    assert "(pinned;" in record["numbers_from"]["grpo"]
    assert "the pinned world" in record["numbers_from"]["lowprob_cmp"]


def test_compare_refuses_another_prepared_world(pinned_smoke, tmp_path):
    from ictrepro.presets import prepare_preset
    from ictrepro.results.pinned import ResultsError
    from ictrepro.stages.compare import materialise_pinned
    from ictrepro.stages.prepare import prepare

    _, results = pinned_smoke
    other = tmp_path / "other"
    prepare(prepare_preset("tiny-smoke", seed=5), other, show_progress=False)
    with pytest.raises(ResultsError, match="prepared with another config"):
        materialise_pinned(other, "tiny-smoke", results_dir=results, skip_methods=set())


def _results_of_another_world(results, tmp_path):
    """A copy of the pinned results whose base model came from another machine's prepare
    (its hash in provenance.json differs from what this machine builds)."""
    from ictrepro.results.pinned import write_manifest

    other = shutil.copytree(results, tmp_path / "results")
    path = other / "tiny-smoke" / "provenance.json"
    provenance = json.loads(path.read_text())
    provenance["world"]["base_model_sha256"] = "ab" * 32
    provenance["world"]["base_weights_sha256"] = "ab" * 32
    provenance["numerics"]["cpu"] = {"vendor": "GenuineIntel", "model": "Xeon", "flags": "avx2"}
    path.write_text(json.dumps(provenance))
    write_manifest(other)
    return other


def test_compare_stops_before_training_in_another_world(pinned_smoke, tmp_path):
    from ictrepro.results.pinned import ResultsError

    baseline_run, results = pinned_smoke
    other = _results_of_another_world(results, tmp_path)
    run_dir = copy_world(baseline_run, tmp_path / "compare", only_prepared=True)
    path = rule_file(tmp_path, "world")
    load_method_module(path)
    with pytest.raises(ResultsError) as info:
        compare(
            "lowprob_world",
            "tiny-smoke",
            run_dir,
            seeds=(0,),
            method_module=path,
            results_dir=other,
            show_progress=False,
        )
    text = flat(str(info.value))
    assert "another world than the pinned baselines of tiny-smoke" in text
    assert f"here, {'ab' * 6} pinned" in text and "base_weights " in text
    assert "--rerun-baselines" in text and "took " in text  # the way out, with its cost
    assert "cpu: " in text  # the numerics that differ are named
    assert not (run_dir / "train").exists()  # nothing was trained


def test_compare_reruns_the_baselines_in_another_world_when_asked(pinned_smoke, tmp_path):
    baseline_run, results = pinned_smoke
    other = _results_of_another_world(results, tmp_path)
    run_dir = copy_world(baseline_run, tmp_path / "compare", only_prepared=True)
    path = rule_file(tmp_path, "again")
    load_method_module(path)
    compare(
        "lowprob_again",
        "tiny-smoke",
        run_dir,
        seeds=(0,),
        method_module=path,
        results_dir=other,
        rerun_baselines=True,
        show_progress=False,
    )
    assert sorted(p.name for p in (run_dir / "train").iterdir()) == [
        "grpo-seed0",
        "ict-seed0",
        "lowprob_again-seed0",
    ]
    record = json.loads((run_dir / "compare.json").read_text())
    assert set(record["numbers_from"]) == {"base", "grpo", "ict", "lowprob_again"}
    assert all("this run" in where for where in record["numbers_from"].values())
    scores = RunDir(run_dir).load_scores()
    assert set(scores) == {
        ModelId("base"),
        ModelId("grpo", 0),
        ModelId("ict", 0),
        ModelId("lowprob_again", 0),
    }
    assert not any(score.pinned for per in scores.values() for score in per.values())


def test_a_rule_returning_the_wrong_shape_is_named_with_its_module(pinned_smoke, tmp_path):
    baseline_run, _ = pinned_smoke
    path = rule_file(tmp_path, "shape", WRONG_SHAPE)
    run_dir = copy_world(baseline_run, tmp_path / "run", only_prepared=True)
    result = CliRunner().invoke(
        app,
        [
            "train",
            "--method",
            "broken_shape",
            "--method-module",
            str(path),
            "--preset",
            "tiny-smoke",
            "--run",
            str(run_dir),
            "--quiet",
        ],
    )
    assert result.exit_code == 2
    text = flat(result.output)
    assert "broken_shape" in text and "rule_shape.py" in text and "returned shape" in text


def test_a_failing_rule_in_a_worker_process_is_named_with_its_log(pinned_smoke, tmp_path):
    """The same broken rule under `reproduce --jobs 2`: the worker loads the rule file, the
    error comes back naming the run, the module's problem and the run's log."""
    baseline_run, _ = pinned_smoke
    path = rule_file(tmp_path, "worker", WRONG_SHAPE)
    load_method_module(path)
    run_dir = copy_world(baseline_run, tmp_path / "run", only_prepared=True)
    plan = make_plan("tiny-smoke", run_dir, methods=("broken_worker",), seeds=(0,))
    with pytest.raises(RuntimeError) as info:
        reproduce(plan, jobs=2, show_progress=False, method_module=path)
    text = flat(str(info.value))
    assert "train broken_worker-seed0 failed" in text and "rule_worker.py" in text
    assert "returned shape" in text
    log = run_dir / "logs" / "train-broken_worker-seed0.log"
    assert log.is_file() and f"see {log}" in text


def test_compare_cli_bad_module(tmp_path):
    result = CliRunner().invoke(
        app, ["compare", "--method", "x", "--method-module", str(tmp_path / "nope.py"), "--quiet"]
    )
    assert result.exit_code == 2 and "does not exist" in flat(result.output)


def _rewrite_version(model_dir, version: str) -> None:
    """Write ``model_dir``'s configs as transformers ``version`` would (same content)."""
    for name in ("config.json", "generation_config.json"):
        path = model_dir / name
        content = json.loads(path.read_text())
        content["transformers_version"] = version
        path.write_text(json.dumps(content, indent=2, sort_keys=True) + "\n")


def _world_prepared_by(version: str, baseline_run, target):
    """A copy of the prepared world as another transformers version writes it: the base
    model's configs record ``version``, and prepare's record hashes the files as written."""
    run_dir = copy_world(baseline_run, target, only_prepared=True)
    _rewrite_version(run_dir / "base_model", version)
    _record_as_prepared(run_dir)
    return run_dir


def _record_as_prepared(run_dir):
    """Prepare's record of ``run_dir`` hashing its files as they are now (as the prepare
    that wrote them would have recorded them)."""
    from ictrepro.io import atomic_write_json, sha256_file

    record = json.loads((run_dir / "prepare.json").read_text())
    for rel in record["outputs"]:
        record["outputs"][rel] = sha256_file(run_dir / rel)
    atomic_write_json(run_dir / "prepare.json", record)


@pytest.mark.parametrize("pins", ["current", "legacy"])
def test_a_world_is_identified_by_what_decides_its_numbers(pinned_smoke, tmp_path, pins):
    """Weights, tokenizer, data and prepare config identify a world; the transformers
    version written into the base model's configs is information, also against results
    pinned before the world recorded more than the whole-folder hash ("legacy")."""
    from ictrepro.results.pinned import write_manifest
    from ictrepro.stages.compare import world_mismatch

    baseline_run, results = pinned_smoke
    if pins == "legacy":
        results = shutil.copytree(results, tmp_path / "results")
        path = results / "tiny-smoke" / "provenance.json"
        provenance = json.loads(path.read_text())
        provenance["world"] = {"base_model_sha256": provenance["world"]["base_model_sha256"]}
        path.write_text(json.dumps(provenance))
        write_manifest(results)
    run_dir = _world_prepared_by("0.0.1-other", baseline_run, tmp_path / "run")
    mismatches, information = world_mismatch(run_dir, "tiny-smoke", results)
    assert mismatches == []
    assert len(information) == 1 and "transformers 0.0.1-other here" in information[0]
    # A world whose prepare made other weights is a different world, whatever the pins
    # recorded.
    weights = run_dir / "base_model" / "model.safetensors"
    blob = bytearray(weights.read_bytes())
    blob[-1] ^= 1
    weights.write_bytes(bytes(blob))
    _record_as_prepared(run_dir)
    mismatches, _ = world_mismatch(run_dir, "tiny-smoke", results)
    assert len(mismatches) == 1
    assert mismatches[0].startswith("base_weights " if pins == "current" else "base_model ")


def test_compare_accepts_a_world_written_by_another_transformers(pinned_smoke, tmp_path):
    baseline_run, results = pinned_smoke
    run_dir = _world_prepared_by("0.0.1-other", baseline_run, tmp_path / "compare")
    path = rule_file(tmp_path, "version")
    load_method_module(path)
    compare(
        "lowprob_version",
        "tiny-smoke",
        run_dir,
        seeds=(0,),
        method_module=path,
        results_dir=results,
        show_progress=False,
    )
    record = json.loads((run_dir / "compare.json").read_text())
    assert "(pinned;" in record["numbers_from"]["grpo"]
    assert record["world"]["base_transformers_version"] == "0.0.1-other"


def test_compare_reuses_a_prepared_pinned_world(pinned_smoke, tmp_path):
    from ictrepro.stages.compare import reuse_world

    baseline_run, results = pinned_smoke
    run_dir = tmp_path / "compare"
    assert reuse_world(baseline_run, run_dir, "tiny-smoke", results)
    prepared = (baseline_run / "prepare.json").read_bytes()
    assert (run_dir / "prepare.json").read_bytes() == prepared
    # The base model's evaluation comes along, byte for byte; no trained model's does.
    assert not (run_dir / "train").exists()
    assert [p.name for p in (run_dir / "eval").iterdir()] == ["base"]
    base_files = sorted((baseline_run / "eval" / "base").iterdir())
    assert base_files and all(
        (run_dir / "eval" / "base" / f.name).read_bytes() == f.read_bytes() for f in base_files
    )
    # Not into a directory that holds something, nor from a world that is not the pinned one.
    assert not reuse_world(baseline_run, run_dir, "tiny-smoke", results)
    other = _results_of_another_world(results, tmp_path)
    assert not reuse_world(baseline_run, tmp_path / "elsewhere", "tiny-smoke", other)
    assert not (tmp_path / "elsewhere").exists()
    # compare then finds the world current and prepares nothing.
    path = rule_file(tmp_path, "reuse")
    load_method_module(path)
    compare(
        "lowprob_reuse",
        "tiny-smoke",
        tmp_path / "compare2",
        seeds=(0,),
        method_module=path,
        results_dir=results,
        world=baseline_run,
        show_progress=False,
    )
    assert (tmp_path / "compare2" / "prepare.json").read_bytes() == prepared
    # The copied base evaluation is up to date (same model, problems, settings), so the eval
    # stage kept it rather than sampling the base model again.
    assert all(
        (tmp_path / "compare2" / "eval" / "base" / f.name).read_bytes() == f.read_bytes()
        for f in base_files
    )
