"""``prepare`` of a pretrained base model and the real data layout (paper presets,
smollm2-135m), on a small local Hugging Face model and hand-written data: records, hashes,
refusals and ``--force`` as in the tiny world, and the errors for missing parts."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ictrepro.cli import app
from ictrepro.config import ModelSpec
from ictrepro.data.records import Problem
from ictrepro.errors import ConfigError, DataError
from ictrepro.presets import prepare_preset
from ictrepro.rundir import RunDirConflict
from ictrepro.stages.prepare import prepare
from ictrepro.stages.prepare_pretrained import (
    deviations,
    fixed_subset,
    prepared_benchmarks,
)
from tests.conftest import flat


def _rows(prefix: str, n: int, *, choice: bool = False) -> list[dict]:
    if choice:
        return [
            {
                "id": f"{prefix}-{i}",
                "problem": f"Pick {i}?",
                "answer": "B",
                "choices": ["x", "y", "z", "w"],
            }
            for i in range(n)
        ]
    return [
        {"id": f"{prefix}-{i}", "problem": f"{prefix}: {i} + 1 = ?", "answer": str(i + 1)}
        for i in range(n)
    ]


def write_data(root: Path, *, skip: tuple[str, ...] = ()) -> Path:
    """Every training set and benchmark of the paper in the --data-dir layout, a few rows each."""
    files = {
        "gsm8k_train/train.jsonl": _rows("gtrain", 6),
        "math_train/train.jsonl": _rows("mtrain", 4),
        "math500/test.jsonl": _rows("m500", 5),
        "gsm8k/test.jsonl": _rows("gsm", 5),
        "mmlu_stem/test.jsonl": _rows("mmlu", 3, choice=True),
        "gpqa_diamond/test.jsonl": _rows("gpqa", 2, choice=True),
        "aime23/test.jsonl": _rows("a23", 2),
        "aime24/test.jsonl": _rows("a24", 2),
        "aime25/test.jsonl": _rows("a25", 2),
    }
    for rel, rows in files.items():
        if rel.split("/")[0] in skip:
            continue
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """A small Qwen2 model and tokenizer saved as a local Hugging Face directory."""
    from ictrepro.models.build import build_model
    from ictrepro.models.tokenizer import train_tokenizer

    path = tmp_path_factory.mktemp("hf") / "model"
    tokenizer = train_tokenizer(["user\n1 + 1 = ?\nassistant\n\\boxed{2}"] * 4, vocab_size=300)
    spec = ModelSpec(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
    build_model(spec, tokenizer, seed=0).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def config_for(model_dir: Path, data_dir: Path, **fields):
    config = prepare_preset("paper-0.5b", model=str(model_dir), data_dir=data_dir)
    return dataclasses.replace(config, dtype="float32", **fields)


def test_prepare_writes_the_run_directory_and_is_current_after(model_dir, tmp_path):
    data = write_data(tmp_path / "data")
    run = tmp_path / "run"
    config = config_for(model_dir, data, eval_limits=(("gsm8k", 3),))
    result = prepare(config, run, show_progress=False)
    record = json.loads((run / "prepare.json").read_text())
    assert not result.skipped and record["status"] == "done"
    rl = [json.loads(x)["id"] for x in (run / "data" / "rl_train.jsonl").read_text().splitlines()]
    assert rl == [f"gtrain-{i}" for i in range(6)] + [f"mtrain-{i}" for i in range(4)]
    assert record["info"]["rl_train"] == {"gsm8k_train": 6, "math_train": 4}
    assert (
        record["info"]["benchmarks"]["gsm8k"] == 3 and record["info"]["benchmarks"]["math500"] == 5
    )
    assert record["info"]["source"]["kind"] == "dir"
    assert record["info"]["deviations"] == ["gsm8k: a fixed subset of 3 problems (of 1319)"]
    # Every output is hashed; eval reads the prepared benchmarks and their decoding.
    assert "base_model/config.json" in record["outputs"] and "data/eval.json" in record["outputs"]
    prepared = prepared_benchmarks(run)
    assert list(prepared) == list(config.benchmarks)
    assert (prepared["aime24"].sampling.n, prepared["aime24"].ks) == (16, (1, 4, 16))
    assert prepared["gsm8k"].sampling.max_new_tokens == 1024

    assert prepare(config, run, show_progress=False).skipped
    with pytest.raises(RunDirConflict, match="different config"):
        prepare(dataclasses.replace(config, train_sets=("gsm8k_train",)), run, show_progress=False)
    # --force replaces it; a deleted output makes it redo.
    other = dataclasses.replace(config, train_sets=("gsm8k_train",))
    assert not prepare(other, run, force=True, show_progress=False).skipped
    (run / "data" / "test" / "gsm8k.jsonl").unlink()
    assert not prepare(other, run, show_progress=False).skipped


def test_eval_reads_the_prepared_benchmarks(model_dir, tmp_path):
    from ictrepro.stages.eval import default_benchmarks, load_task

    run = tmp_path / "run"
    prepare(config_for(model_dir, write_data(tmp_path / "data")), run, show_progress=False)
    assert default_benchmarks(run) == [
        "math500",
        "gsm8k",
        "mmlu_stem",
        "gpqa_diamond",
        "aime23",
        "aime24",
        "aime25",
    ]
    task = load_task("mmlu_stem", run_dir=run)
    assert [p.id for p in task.problems] == ["mmlu-0", "mmlu-1", "mmlu-2"]
    assert (task.sampling.n, task.ks) == (4, (1, 4))


def test_a_prepared_benchmark_wins_over_data_dir(model_dir, tmp_path):
    """`ictrepro eval --run R --data-dir D` scores R's prepared subset with R's decoding,
    not every problem of D (which would be all 1,319 of GSM8K on a real run)."""
    from ictrepro.stages.eval import load_task

    data = write_data(tmp_path / "data")
    run = tmp_path / "run"
    prepare(config_for(model_dir, data, eval_limits=(("gsm8k", 2),)), run, show_progress=False)
    prepared = load_task("gsm8k", run_dir=run)
    assert len(prepared.problems) == 2
    assert load_task("gsm8k", run_dir=run, data_dir=data) == prepared
    assert len(load_task("gsm8k", data_dir=data).problems) == 5  # without the run: all of D


def test_a_missing_training_set_names_it_and_the_subset_option(model_dir, tmp_path):
    data = write_data(tmp_path / "data", skip=("math_train",))
    with pytest.raises(
        DataError, match=r"RL training set 'math_train' is missing.*--train-sets gsm8k_train"
    ):
        prepare(config_for(model_dir, data), tmp_path / "run", show_progress=False)
    assert not (tmp_path / "run").exists()  # nothing written before the data were complete
    config = config_for(model_dir, data, train_sets=("gsm8k_train",))
    prepare(config, tmp_path / "run", show_progress=False)
    info = json.loads((tmp_path / "run" / "prepare.json").read_text())["info"]
    assert info["deviations"][0].startswith("RL training data: gsm8k_train only")


def test_gated_gpqa_says_how_to_get_access_and_how_to_skip(model_dir, tmp_path):
    data = write_data(tmp_path / "data", skip=("gpqa_diamond",))
    with pytest.raises(DataError) as err:
        prepare(config_for(model_dir, data), tmp_path / "run", show_progress=False)
    text = str(err.value)
    assert "Idavidrein/gpqa is gated" in text and "huggingface-cli login" in text
    assert "--skip-benchmarks gpqa_diamond" in text
    config = config_for(model_dir, data, skip_benchmarks=("gpqa_diamond",))
    prepare(config, tmp_path / "run", show_progress=False)
    assert "gpqa_diamond" not in prepared_benchmarks(tmp_path / "run")
    assert "not evaluated on the paper's benchmark(s) gpqa_diamond" in deviations(config)


def test_cli_prepare_errors_are_one_line(model_dir, tmp_path):
    data = write_data(tmp_path / "data", skip=("math_train",))
    args = ["prepare", "--preset", "paper-0.5b", "--model", str(model_dir), "--data-dir", str(data)]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "run"), "--quiet"])
    assert result.exit_code == 2
    assert "RL training set 'math_train' is missing" in flat(result.output)
    result = CliRunner().invoke(app, ["prepare", "--preset", "tiny", "--model", "x", "--quiet"])
    assert result.exit_code == 2 and "--model: preset 'tiny' builds its own" in flat(result.output)


def test_fixed_subset_is_fixed_and_in_source_order():
    problems = [Problem(f"p{i}", f"q{i}", "1") for i in range(50)]
    a = fixed_subset(problems, "gsm8k", 8)
    assert a == fixed_subset(list(problems), "gsm8k", 8)
    assert [p.id for p in a] == sorted((p.id for p in a), key=lambda x: int(x[1:]))
    assert a != fixed_subset(problems, "math500", 8)
    assert fixed_subset(problems, "gsm8k", 80) == problems


def test_model_sources_and_their_errors(tmp_path):
    from ictrepro.models.load import resolve_source

    assert resolve_source("Qwen/Qwen2.5-0.5B").kind == "hub"
    with pytest.raises(ConfigError, match="no such GGUF file"):
        resolve_source(str(tmp_path / "m.gguf"))
    with pytest.raises(ConfigError, match="not a Hugging Face model directory"):
        resolve_source(str(tmp_path))
    with pytest.raises(ConfigError, match=r"package 'no_such_pkg'.*not installed"):
        resolve_source("pkg:no_such_pkg/model.gguf")
    with pytest.raises(ConfigError, match="expected pkg:<module>/<file>"):
        resolve_source("pkg:x")


def test_unknown_names_in_the_options_are_errors():
    with pytest.raises(ConfigError, match="unknown benchmark 'nope'"):
        prepare_preset("paper-7b", skip_benchmarks=["nope"])
    with pytest.raises(ConfigError, match="unknown RL training set 'gsm8k'; valid: gsm8k_train"):
        prepare_preset("paper-7b", train_sets=["gsm8k"])


def test_the_report_notes_the_recorded_deviations(model_dir, tmp_path):
    from types import SimpleNamespace

    from ictrepro.report.load import prepare_deviations
    from ictrepro.report.tables import _prepare_notes

    config = config_for(model_dir, write_data(tmp_path / "data"), skip_benchmarks=("aime23",))
    prepare(config, tmp_path / "run", show_progress=False)
    run = SimpleNamespace(deviations=prepare_deviations(tmp_path / "run"))
    assert _prepare_notes(run) == [
        "deviation from the paper: not evaluated on the paper's benchmark(s) aime23."
    ]


def test_a_hub_model_that_cannot_be_reached_says_how_to_use_a_local_copy(monkeypatch):
    from ictrepro.models.load import ModelSource, load_pretrained

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(
        ConfigError, match=r"huggingface-cli download .* --local-dir DIR.*--model DIR"
    ):
        load_pretrained(ModelSource("hub", "ictrepro-test/no-such-model"), dtype="float32")
