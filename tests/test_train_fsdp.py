"""FSDP2 across two CPU processes (gloo), launched with the shipped
``configs/accelerate/cpu-fsdp-2proc.yaml``, against one process on the same samples.

The CPU stand-in of ``fsdp-8gpu.yaml``: the same FSDP settings (per-layer units, reshard
after forward, sharded checkpoints, cpu-RAM-efficient loading, FSDP activation
checkpointing). The runs use the paper presets' update path (chunked LM head, micro-batches,
gradient checkpointing requested), with a KL term, so the reference model is used.
Run by ``nox -s fsdp`` (and ``nox -s slow``); under two minutes on 2 cores.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from ictrepro.presets import prepare_preset
from ictrepro.rundir import load_record
from ictrepro.stages.prepare import prepare
from tests.helpers.train_scripted import read_selections

pytestmark = pytest.mark.slow

HELPER = Path(__file__).parent / "helpers" / "train_scripted.py"
LAUNCH = [sys.executable, "-m", "accelerate.commands.launch"]
CONFIG = Path(__file__).parent.parent / "configs" / "accelerate" / "cpu-fsdp-2proc.yaml"
OVERRIDES = [
    "method_args.warmup_steps=0",
    "rl.sample_batch_size=4",
    "rl.chunked_logprobs=true",
    "rl.micro_batch_size=2",
    "infra.gradient_checkpointing=true",
    "infra.keep_checkpoints=3",
]
CLI_ARGS = ["train", "--method", "ict", "--preset", "tiny-smoke", "--quiet", "--run"]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def read_metrics(out_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]


def launch_fsdp(run_dir: Path, *flags: str, precision: str = "no") -> None:
    result = subprocess.run(
        [
            *LAUNCH,
            "--config_file",
            str(CONFIG),
            "--mixed_precision",
            precision,
            str(HELPER),
            str(run_dir),
            "ict",
            *flags,
            *OVERRIDES,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=ENV,
    )
    assert result.returncode == 0, result.stderr[-3000:]


def final_weights(out_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(out_dir / "final_model" / "model.safetensors")


def checksum(weights: dict[str, torch.Tensor]) -> float:
    """Sum of every distinct tensor (a tied LM head saved beside the embedding counts once)."""
    distinct = {k: v for k, v in weights.items() if k != "lm_head.weight"}
    return sum(float(t.double().sum()) for t in distinct.values())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("fsdp") / "run"
    prepare(prepare_preset("tiny-smoke", seed=0), base, show_progress=False)
    single, sharded = base.parent / "single", base.parent / "sharded"
    shutil.copytree(base, single)
    shutil.copytree(base, sharded)
    subprocess.run(
        [sys.executable, str(HELPER), str(single), "ict", "--dump-masks", *OVERRIDES],
        check=True,
        capture_output=True,
        env=ENV,
        timeout=600,
    )
    launch_fsdp(sharded, "--dump-sharding", "--dump-masks")
    return single / "train" / "ict-seed0", sharded / "train" / "ict-seed0"


def test_the_launch_trains_under_fsdp2_with_the_reference_sharded_and_whole(runs):
    _, sharded = runs
    assert load_record(sharded, "train")["info"]["num_processes"] == 2
    for rank in (0, 1):
        held = json.loads((sharded / f"sharding-rank{rank}.json").read_text())
        for name in ("policy", "reference"):
            # Every parameter a DTensor shard: each process holds half of the elements.
            assert held[name]["fsdp"] and held[name]["param_types"] == ["DTensor"], name
            assert 0 < held[name]["local_numel"] < held[name]["numel"], name
            assert not held[name]["meta"], name
        # One activation checkpointing: FSDP's (from the config), not HF's on top.
        assert held["policy"]["fsdp_checkpoint_wrapped"]
        assert not held["policy"]["hf_gradient_checkpointing"]


def agreeing_steps(runs) -> int:
    """How many steps, from the first, both runs' masks agree on.

    Group JS can hold a near-tie at ICT's 10% boundary, which float rounding breaks one
    way in one process and the other way over two (on tiny-smoke, a step-3 tie selects
    token 3 of a response in one run and token 4 in the other). From the first such step
    on, KL and grad norm (means over the selected tokens) and the weights follow the mask,
    so the runs are compared exactly up to it. GRPO, which selects everything, agrees at
    every step."""
    single, sharded = (read_selections(d) for d in runs)
    assert sorted(single) == sorted(sharded) == [1, 2, 3]
    agree = 0
    while agree < 3 and single[agree + 1] == sharded[agree + 1]:
        agree += 1
    if agree < 3:  # a tie moves a selection within a response; it never changes the count
        one, two = single[agree + 1], sharded[agree + 1]
        assert Counter(row for row, _ in one) == Counter(row for row, _ in two)
        assert len(one - two) <= len({row for row, _ in one ^ two})  # a token per response
    return agree


def test_gradients_and_kl_equal_the_single_process_run(runs):
    """Same samples and rewards; while the masks agree, the chunked LM head's gradient
    reaches the shards (grad norm) and the reference model is used (KL 0 at step 1, then
    growing as one)."""
    single, sharded = (read_metrics(d) for d in runs)
    agree = agreeing_steps(runs)
    assert agree >= 2, "the masks differ too early for the comparison to mean anything"
    assert [m["step"] for m in sharded] == [1, 2, 3]
    for step, (one, two) in enumerate(zip(single, sharded, strict=True), start=1):
        assert two["reward_mean"] == one["reward_mean"]
        assert two["selected_fraction"] == one["selected_fraction"]
        if step > agree + 1:
            continue  # the weights differ from here on
        # The statistics pass, fused inside the sharded model's call, on equal weights.
        for key in ("entropy_mean", "renyi2_mean"):
            assert two[key] == pytest.approx(one[key], rel=1e-5), key
        if step > agree:
            continue  # another mask: KL and grad norm are means over other tokens
        assert two["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-3)
        assert two["kl"] == pytest.approx(one["kl"], rel=1e-4, abs=1e-12)
        assert two["js_selected_mean"] == pytest.approx(one["js_selected_mean"], abs=2e-6)
    assert sharded[0]["grad_norm"] == pytest.approx(single[0]["grad_norm"], rel=1e-5)
    assert abs(sharded[0]["kl"]) < 1e-10 < sharded[1]["kl"]


def test_checksum_and_final_model_equal_the_single_process_run(runs):
    """The weights after every step whose mask agrees (the sharded run's logged checksum
    against the single run's checkpoint of that step; every tensor of the final model when
    all three agree) differ by float32 rounding only."""
    single, sharded = runs
    mine, theirs = final_weights(sharded), final_weights(single)
    # The logged checksum is the whole model's (the shards' sums added over processes).
    logged = [m["param_checksum"] for m in read_metrics(sharded)]
    assert logged[-1] == pytest.approx(checksum(mine), rel=1e-12)
    agree = agreeing_steps(runs)
    for step in range(1, agree + 1):
        # accelerate numbers the models in the order they were prepared: the reference
        # (model.safetensors), then the policy.
        kept = load_file(single / "checkpoints" / f"step-{step:06d}" / "model_1.safetensors")
        assert logged[step - 1] == pytest.approx(checksum(kept), rel=1e-7), step
    assert set(theirs) <= set(mine)
    if agree == 3:
        for name, tensor in theirs.items():
            torch.testing.assert_close(mine[name], tensor, rtol=0, atol=1e-5)


def test_resume_from_a_sharded_checkpoint_equals_the_uninterrupted_run(runs, tmp_path):
    """The run cut after step 2 (its step-3 checkpoint and outputs gone, the record back to
    running, as a kill leaves it), then --resume: step 3 and the weights are bit-identical."""
    _, sharded = runs
    run_dir = tmp_path / "run"
    shutil.copytree(sharded.parent.parent, run_dir)
    out = run_dir / "train" / "ict-seed0"
    shutil.rmtree(out / "checkpoints" / "step-000003")
    shutil.rmtree(out / "final_model")
    record = json.loads((out / "train.json").read_text())
    (out / "train.json").write_text(json.dumps({**record, "status": "running", "outputs": {}}))
    launch_fsdp(run_dir, "--resume")
    before, after = read_metrics(sharded), read_metrics(out)
    assert after[:2] == before[:2]  # steps 1-2 kept from the log, not re-run
    drop = {k for k in after[2] if k.startswith("time_")}
    assert {k: v for k, v in after[2].items() if k not in drop} == {
        k: v for k, v in before[2].items() if k not in drop
    }
    original, resumed = final_weights(sharded), final_weights(out)
    assert all(torch.equal(original[k], resumed[k]) for k in original)


def test_cli_under_accelerate_launch_with_the_shipped_fsdp_config(tmp_path):
    """The user's command line: ``accelerate launch --config_file cpu-fsdp-2proc.yaml -m
    ictrepro.cli train ...`` (the real verifier; the tiny-smoke model may earn no reward,
    which the numerics tests above do not depend on)."""
    run_dir = tmp_path / "run"
    prepare(prepare_preset("tiny-smoke", seed=0), run_dir, show_progress=False)
    result = subprocess.run(
        [*LAUNCH, "--config_file", str(CONFIG), "-m", "ictrepro.cli", *CLI_ARGS, str(run_dir)],
        capture_output=True,
        text=True,
        timeout=600,
        env=ENV,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = run_dir / "train" / "ict-seed0"
    record = load_record(out, "train")
    assert record["status"] == "done" and record["info"]["num_processes"] == 2
    logged = read_metrics(out)[-1]["param_checksum"]
    assert logged == pytest.approx(checksum(final_weights(out)), rel=1e-12)


def test_bf16_under_fsdp2_gives_ratio_one_at_step_one(runs, tmp_path):
    """bf16 mixed precision (FSDP2's bf16 parameters in forward, autocast): the statistics
    and the update apply the same bf16 head inside the head's forward, so an unchanged
    policy has KL and loss exactly 0 at step 1; the grad norm stays near fp32's."""
    single, _ = runs
    run_dir = tmp_path / "run"
    shutil.copytree(single.parent.parent, run_dir)
    shutil.rmtree(run_dir / "train")
    launch_fsdp(run_dir, precision="bf16")
    bf16, fp32 = read_metrics(run_dir / "train" / "ict-seed0"), read_metrics(single)
    assert bf16[0]["kl"] == 0.0 and bf16[0]["loss"] == 0.0
    assert bf16[0]["grad_norm"] == pytest.approx(fp32[0]["grad_norm"], rel=1e-3)


def test_generate_on_the_sharded_model_with_uneven_lengths(tmp_path):
    """Processes that sample different numbers of tokens (4 and 12) from the sharded model
    both finish (generate keeps the early one stepping), with exactly the completions an
    unsharded copy of the weights gives."""
    run_dir = tmp_path / "run"
    prepare(prepare_preset("tiny-smoke", seed=0), run_dir, show_progress=False)
    helper = Path(__file__).parent / "helpers" / "fsdp_generate.py"
    result = subprocess.run(
        [
            *LAUNCH,
            "--config_file",
            str(CONFIG),
            str(helper),
            str(run_dir / "base_model"),
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=ENV,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for rank, limit in ((0, 4), (1, 12)):
        record = json.loads((tmp_path / "out" / f"rank{rank}.json").read_text())
        assert record["sharded"] == record["whole"]
        lengths = [len(ids) for group in record["sharded"] for ids in group]
        assert max(lengths) == limit, lengths
        # The unsharded copy runs its prompts once (shared by their samples), then stops at
        # its own limit; the sharded model lets generate expand them and steps with the other.
        assert record["forwards"] == {"whole": 1 + limit, "sharded": 12}


def test_a_probe_set_that_does_not_split_over_the_processes_is_refused(runs, tmp_path):
    """Under FSDP every forward is a collective, so the processes must sample as many probe
    prompts; 3 over 2 processes is a clear error before any step."""
    single, _ = runs
    run_dir = tmp_path / "run"
    shutil.copytree(single.parent.parent, run_dir, ignore=shutil.ignore_patterns("train"))
    result = subprocess.run(
        [
            *LAUNCH,
            "--config_file",
            str(CONFIG),
            str(HELPER),
            str(run_dir),
            "ict",
            "rl.probe_problems=3",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=ENV,
    )
    assert result.returncode != 0
    assert "rl.probe_problems (3) must be divisible by the number of processes (2)" in (
        result.stderr
    )
