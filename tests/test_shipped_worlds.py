"""Shipped worlds (ictrepro/results/worlds.py): a pinned world's base model stored with the
results, used by `prepare` hash-checked instead of the warm start, and refused when changed."""

from __future__ import annotations

import json
import shutil

import pytest

from ictrepro.errors import ConfigError, DataError
from ictrepro.presets import prepare_preset
from ictrepro.results.pinned import check_results, world_identity, write_manifest
from ictrepro.results.worlds import RECORD, ship_world, world_dir
from ictrepro.rundir import RunDir, load_record
from ictrepro.stages.prepare import prepare


def _prepare(run, results, **options):
    return prepare(
        prepare_preset("tiny-smoke", seed=0), run, show_progress=False, results_dir=results,
        **options,
    )  # fmt: skip


def _as_if_from_another_config(folder):
    record = json.loads((folder / RECORD).read_text())
    (folder / RECORD).write_text(json.dumps({**record, "prepare_config_sha256": "0" * 64}))


@pytest.fixture()
def shipped(smoke_world, tmp_path):
    """A results folder whose worlds/ ships the smoke world's base model."""
    results = tmp_path / "results"
    results.mkdir()
    write_manifest(results)
    folder = ship_world(smoke_world, results)
    return results, folder


def test_shipping_stores_the_base_model_and_its_hashes_under_the_manifest(smoke_world, shipped):
    results, folder = shipped
    assert folder == world_dir("tiny-smoke", results)
    record = json.loads((folder / RECORD).read_text())
    assert record["prepare_config_sha256"] == load_record(smoke_world, "prepare")["config_sha256"]
    weights = [name for name in record["files"] if name.endswith(".safetensors")]
    assert weights and "sft_log.jsonl" in record["files"]
    for name in record["files"]:
        assert (folder / name).read_bytes() == (smoke_world / name).read_bytes()
    assert check_results(results) == []
    # Shipping the same world again changes nothing; a file edited afterwards is caught.
    assert ship_world(smoke_world, results) == folder
    (folder / "sft_log.jsonl").write_text("{}\n")
    assert any("sft_log.jsonl: modified" in p for p in check_results(results))


def test_prepare_uses_the_shipped_base_model_and_builds_the_same_world(
    smoke_world, shipped, tmp_path
):
    results, folder = shipped
    run = tmp_path / "run"
    _prepare(run, results)
    record = load_record(run, "prepare")
    assert record["info"]["base_model_from"] == str(folder)
    assert record["info"]["timings"]["sft_s"] < 30  # copied, not trained
    assert world_identity(run) == world_identity(smoke_world)
    assert json.loads(RunDir(run).calibration.read_text()) == json.loads(
        RunDir(smoke_world).calibration.read_text()
    )


def test_a_changed_shipped_file_is_named_and_nothing_is_trained(shipped, tmp_path):
    results, folder = shipped
    weights = next((folder / "base_model").glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:-1] + b"\0")
    with pytest.raises(DataError, match=f"{weights.name}: modified"):
        _prepare(tmp_path / "run", results)


def test_a_world_shipped_from_another_config_is_refused(shipped, tmp_path):
    results, folder = shipped
    _as_if_from_another_config(folder)
    with pytest.raises(DataError, match="--warm-start"):
        _prepare(tmp_path / "run", results)


def test_no_shipped_world_and_no_warm_start_allowed_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match=r"no shipped base model.*--warm-start"):
        _prepare(tmp_path / "run", tmp_path / "results", warm_start=False)


def test_shipping_another_base_model_of_a_shipped_world_is_refused(smoke_world, shipped, tmp_path):
    results, _ = shipped
    other = tmp_path / "other"
    shutil.copytree(smoke_world, other)
    weights = next((other / "base_model").glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:-1] + b"\1")
    with pytest.raises(DataError, match="ships another base model"):
        ship_world(other, results)


def test_the_warm_start_beside_a_shipped_world_says_whether_it_built_the_same(
    shipped, tmp_path, capsys
):
    from rich.console import Console

    results, _ = shipped
    run = tmp_path / "run"
    _prepare(run, results, warm_start=True, console=Console(force_terminal=False, width=200))
    assert load_record(run, "prepare")["info"]["base_model_from"] == "warm start"
    assert "built the base model as the shipped one" in capsys.readouterr().out


def test_a_warm_start_asked_for_trains_even_beside_a_shipped_world_of_another_config(
    shipped, tmp_path
):
    results, folder = shipped
    _as_if_from_another_config(folder)
    run = tmp_path / "run"
    _prepare(run, results, warm_start=True)
    assert load_record(run, "prepare")["info"]["base_model_from"] == "warm start"
