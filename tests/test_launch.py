"""The launch plan of `reproduce --preset paper-*` (stages/launch.py): what runs where,
the refusal without a GPU, and the generated `accelerate launch` command run for real on
the CPU (bf16 autocast) on tiny-smoke."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess

import pytest
from conftest import flat
from typer.testing import CliRunner

from ictrepro.cli import app
from ictrepro.rundir import load_record
from ictrepro.stages import reproduce as reproduce_module
from ictrepro.stages.launch import LaunchPlan, Machine, NoAcceleratorError, plan_launch
from ictrepro.stages.reproduce import make_plan, reproduce

H100 = Machine("cuda", 1, 80.0, "NVIDIA H100 80GB HBM3")
H200 = Machine("cuda", 1, 141.0, "NVIDIA H200")
NODE = Machine("cuda", 8, 80.0, "NVIDIA H100 80GB HBM3")
CPU = Machine("cpu", 0)


def test_one_gpu_runs_each_training_run_as_one_bf16_process_with_vllm():
    plan = plan_launch("paper-0.5b", machine=H100)
    assert (plan.strategy, plan.processes, plan.mixed_precision) == ("single", 1, "bf16")
    assert (plan.sampler, plan.eval_backend) == ("vllm", "vllm")
    command = plan.train_command("ict", 3, "RUN")
    text = " ".join(command)
    assert "-m accelerate.commands.launch --num_processes 1 --mixed_precision bf16" in text
    assert "-m ictrepro.cli train --method ict --preset paper-0.5b --seed 3 --run RUN" in text
    assert "--resume" in command and "--set rl.sampler=vllm" in text
    assert "--multi_gpu" not in command and "--use_fsdp" not in command
    assert plan.eval_command("RUN")[-4:] == ["--run", "RUN", "--backend", "vllm"]
    assert plan.memory is not None and plan.memory.fits


def test_several_gpus_use_ddp_when_a_replica_fits_else_fsdp2():
    small = plan_launch("paper-0.5b", machine=NODE)
    assert (small.strategy, small.processes) == ("ddp", 8)
    assert "--multi_gpu" in small.accelerate_args()
    large = plan_launch("paper-7b", machine=NODE)
    assert (large.strategy, large.processes) == ("fsdp2", 8)
    args = " ".join(large.accelerate_args())
    assert "--use_fsdp --fsdp_version 2" in args and "--num_processes 8" in args
    assert large.memory.strategy == "fsdp2" and large.memory.processes == 8


def test_no_gpu_refuses_a_paper_preset_unless_forced():
    with pytest.raises(NoAcceleratorError, match="--force-cpu") as refused:
        plan_launch("paper-0.5b", machine=CPU)
    # It lists every CPU-sized preset, and no paper-scale one.
    listed = str(refused.value).split("The CPU-sized presets: ")[1].rstrip(".").split(", ")
    assert {"tiny", "tiny-smoke", "smollm2-135m", "smollm2-135m-learn"} <= set(listed)
    assert not any(name.startswith("paper-") for name in listed)
    forced = plan_launch("paper-0.5b", machine=CPU, force_cpu=True)
    assert (forced.strategy, forced.mixed_precision, forced.sampler) == ("in-process", "no", "hf")
    # The CPU presets are never launched, on any machine.
    assert not plan_launch("tiny", machine=NODE).launched
    assert not plan_launch("smollm2-135m", machine=CPU).launched


def test_cli_refuses_before_preparing_anything(tmp_path, monkeypatch):
    monkeypatch.setattr(Machine, "detect", classmethod(lambda cls: CPU))
    out = tmp_path / "r"
    result = CliRunner().invoke(app, ["reproduce", "--preset", "paper-0.5b", "--out", str(out)])
    assert result.exit_code == 2
    text = flat(result.output)
    assert "torch sees no GPU" in text and "--force-cpu" in text
    assert not out.exists()


def test_dry_run_prints_the_launch_plan(monkeypatch):
    monkeypatch.setattr(Machine, "detect", classmethod(lambda cls: H200))
    result = CliRunner().invoke(app, ["reproduce", "--preset", "paper-0.5b", "--dry-run"])
    assert result.exit_code == 0
    text = flat(result.output)
    assert "1 process(es), single, mixed precision bf16, sampler vllm" in text
    assert "eval backend vllm, one engine at a time" in text
    assert "--mixed_precision bf16" in text and "rl.sampler=vllm" in text
    assert "reference model (fp32)" in text and "of 141 GB -> fits" in text
    monkeypatch.setattr(Machine, "detect", classmethod(lambda cls: CPU))
    result = CliRunner().invoke(app, ["reproduce", "--preset", "paper-0.5b", "--dry-run"])
    assert result.exit_code == 0
    assert "launch: refused on this machine" in flat(result.output)


def test_the_launched_command_trains_under_bf16(tmp_path):
    """The command of the plan, run: `accelerate launch` accepts it, and the run trains in
    bf16 (here on the CPU, tiny-smoke, one step; vLLM is not installed in this suite)."""
    from ictrepro.presets import prepare_preset
    from ictrepro.stages.prepare import prepare

    run_dir = tmp_path / "run"
    prepare(prepare_preset("tiny-smoke"), run_dir, show_progress=False)
    plan = LaunchPlan("tiny-smoke", H100, "single", 1, "bf16", "hf", "hf", {"rl.steps": 1})
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    subprocess.run(plan.train_command("grpo", 0, run_dir), check=True, env=env)
    record = load_record(run_dir / "train" / "grpo-seed0", "train")
    assert record["status"] == "done" and record["info"]["mixed_precision"] == "bf16"


def test_reproduce_launches_each_run_then_one_evaluation(tmp_path, monkeypatch):
    launched = []

    def fake_launch(command, log_path, console):
        launched.append((command, log_path.name))

    monkeypatch.setattr(reproduce_module, "_launch", fake_launch)
    plan = make_plan("tiny-smoke", tmp_path / "run", methods=("grpo", "ict"), seeds=(0, 1))
    gpu = LaunchPlan("tiny-smoke", H100, "single", 1, "bf16", "vllm", "hf", {"rl.sampler": "vllm"})
    times = reproduce(dataclasses.replace(plan, launch=gpu), show_progress=False, report=False)
    commands = [" ".join(c) for c, _ in launched]
    assert [log for _, log in launched] == [
        "train-grpo-seed0.log",
        "train-ict-seed0.log",
        "train-grpo-seed1.log",
        "train-ict-seed1.log",
        "eval.log",
    ]
    assert all("--mixed_precision bf16" in c and "rl.sampler=vllm" in c for c in commands[:4])
    assert commands[4].endswith("eval --run " + str(tmp_path / "run") + " --backend hf")
    assert {"prepare_s", "train_s", "eval_s"} <= set(times)
    shutil.rmtree(tmp_path / "run")


def test_the_plan_for_another_machine_from_a_laptop(tmp_path, monkeypatch):
    """`reproduce --dry-run --gpus N --gpu-memory GB` plans for that machine on one without
    a GPU; without --dry-run the options are refused before anything runs."""
    monkeypatch.setattr(Machine, "detect", classmethod(lambda cls: CPU))
    out = tmp_path / "r"
    args = ["reproduce", "--preset", "paper-7b", "--out", str(out), "--gpus", "8"]
    result = CliRunner().invoke(app, [*args, "--gpu-memory", "80", "--dry-run"])
    assert result.exit_code == 0, result.output
    text = flat(result.output)
    assert "8 x cuda" in text and "fsdp2" in text and "of 80 GB" in text
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 2 and "need --dry-run" in flat(refused.output)
    assert not out.exists()
