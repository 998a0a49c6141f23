"""Two processes under `accelerate launch` (gloo on CPU) against one process, same samples.

Each process takes whole groups; both runs sample in calls of one prompt, so the two
processes draw exactly what the single process draws, and every difference left is the
order of floating-point sums.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ictrepro.presets import prepare_preset
from ictrepro.rundir import load_record
from ictrepro.stages.prepare import prepare
from tests.helpers.train_scripted import read_selections

HELPER = Path(__file__).parent / "helpers" / "train_scripted.py"
OVERRIDES = ["method_args.warmup_steps=0", "rl.sample_batch_size=4"]


def read_metrics(out_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]


def launch(args: list[str], timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "accelerate.commands.launch", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("ddp") / "run"
    prepare(prepare_preset("tiny-smoke", seed=0), base, show_progress=False)
    single, double = base.parent / "single", base.parent / "double"
    shutil.copytree(base, single)
    shutil.copytree(base, double)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    subprocess.run(
        [sys.executable, str(HELPER), str(single), "ict", "--dump-masks", *OVERRIDES],
        check=True,
        capture_output=True,
        env=env,
        timeout=300,
    )
    result = launch(
        [
            "--multi_gpu",
            "--num_processes",
            "2",
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            "--main_process_port",
            "29533",
            str(HELPER),
            str(double),
            "ict",
            "--dump-masks",
            *OVERRIDES,
        ]
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return single / "train" / "ict-seed0", double / "train" / "ict-seed0"


def test_two_processes_train_in_sync(two_runs):
    _, double = two_runs
    assert load_record(double, "train")["info"]["num_processes"] == 2
    metrics = read_metrics(double)
    assert [m["step"] for m in metrics] == [1, 2, 3]
    # The replicas hold bit-identical parameters after every step.
    assert all(m["param_checksum_spread"] == 0.0 for m in metrics)


def test_two_processes_select_like_one(two_runs):
    single, double = (read_metrics(d) for d in two_runs)
    for one, two in zip(single, double, strict=True):
        assert two["reward_mean"] == one["reward_mean"]
        assert two["selected_fraction"] == one["selected_fraction"]  # integer counts
        assert two["response_length_mean"] == one["response_length_mean"]
        for key in ("entropy_mean", "renyi2_mean", "grad_norm", "kl"):
            assert two[key] == pytest.approx(one[key], rel=1e-5, abs=1e-7), key
        # JS is a difference of float32 entropies (~6 nats here): absolute rounding ~1e-6.
        assert two["js_selected_mean"] == pytest.approx(one["js_selected_mean"], abs=2e-6)
    assert single[-1]["selected_fraction"] < 0.2  # ICT after its warm-up: ~10% per response


def test_two_processes_select_the_same_tokens_as_one(two_runs):
    """The same token positions, not only as many: ICT's count depends on the response
    lengths alone, its positions on each process's group JS."""
    single, double = two_runs
    assert len(list(double.glob("selected-rank*.jsonl"))) == 2
    one, two = read_selections(single), read_selections(double)
    assert sorted(one) == sorted(two) == [1, 2, 3]
    for step in one:
        assert two[step] == one[step], step
    assert all(one.values())


CONFIGS = Path(__file__).parent.parent / "configs" / "accelerate"


def test_shipped_accelerate_configs_parse():
    import yaml

    names = sorted(p.name for p in CONFIGS.glob("*.yaml"))
    assert names == [
        "1gpu.yaml",
        "cpu-2proc.yaml",
        "cpu-fsdp-2proc.yaml",
        "ddp-8gpu.yaml",
        "fsdp-8gpu.yaml",
        "multinode-2x8gpu.yaml",
    ]
    for path in CONFIGS.glob("*.yaml"):
        config = yaml.safe_load(path.read_text())
        assert {"distributed_type", "num_processes", "num_machines"} <= set(config), path.name
        assert config["num_processes"] >= config["num_machines"], path.name


@pytest.mark.slow
def test_cli_under_accelerate_launch_with_the_shipped_cpu_config(tmp_path):
    run_dir = tmp_path / "run"
    prepare(prepare_preset("tiny-smoke", seed=0), run_dir, show_progress=False)
    result = launch(
        [
            "--config_file",
            str(CONFIGS / "cpu-2proc.yaml"),
            "-m",
            "ictrepro.cli",
            "train",
            "--method",
            "ict",
            "--preset",
            "tiny-smoke",
            "--run",
            str(run_dir),
            "--quiet",
        ]
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = run_dir / "train" / "ict-seed0"
    record = load_record(out, "train")
    assert record["status"] == "done" and record["info"]["num_processes"] == 2
    assert all(m["param_checksum_spread"] == 0.0 for m in read_metrics(out))
