"""``ictrepro train``: one (method, seed) run of the GRPO loop inside a prepared run directory.

Writes ``RUN/train/<method>-seed<seed>/``::

    train.json          record: config + inputs, their hash, status, output hashes
    metrics.jsonl       one line of metrics per step
    checkpoints/step-N/ model, optimiser, scheduler, RNG states (accelerate) + step
    final_model/        the trained policy in Hugging Face format (+ tokenizer)

Re-running with the same config and inputs does nothing when the run is finished;
``--resume`` continues an interrupted run from its last checkpoint; a different config or
different inputs is refused with the fields that differ (``--force`` starts over). The
``infra`` fields (checkpoint cadence, kept checkpoints, verifier workers) do not change
results, so they are not part of the run's identity: a changed value is used, and named.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from rich.console import Console

from ictrepro.config import TrainConfig
from ictrepro.data.records import Problem
from ictrepro.errors import RunDirError
from ictrepro.io import hash_outputs, read_jsonl, sha256_json
from ictrepro.rundir import (
    ModelId,
    RunDir,
    StageRecord,
    TrainDir,
    config_diff,
    decide,
    load_record,
    write_record,
)
from ictrepro.train.checkpoint import list_checkpoints
from ictrepro.train.distributed import enable_cpu_fsdp
from ictrepro.train.grpo import GRPOTrainer
from ictrepro.train.metrics import MetricsLog
from ictrepro.verify import Verifier

STAGE = "train"


@dataclass(frozen=True)
class TrainResult:
    out_dir: Path
    skipped: bool
    metrics: list[dict[str, Any]]


def train_dir(run_dir: Path, method: str, seed: int) -> Path:
    return RunDir(run_dir).train_dir(ModelId(method, seed))


def resolve_inputs(config: TrainConfig, run_dir: Path) -> tuple[str, Path, dict[str, Any]]:
    """(model path or hub id, training-data file, a description of both with hashes)."""
    run_dir = Path(run_dir)
    model = config.model or str(RunDir(run_dir).base_model)
    data = Path(config.train_data) if config.train_data else RunDir(run_dir).rl_train
    hint = (
        f"run `ictrepro prepare --preset {config.preset} --out {run_dir}` first"
        if not (config.model and config.train_data)
        else "check the paths in the config"
    )
    if not data.is_file():
        raise RunDirError(f"training data {data} does not exist; {hint}")
    prepare_record = load_record(run_dir, "prepare") if not config.model else None
    if prepare_record is not None and prepare_record.get("status") == "done":
        # Reuse the hashes prepare recorded rather than hashing the model again.
        model_hashes = {
            k: v for k, v in prepare_record["outputs"].items() if k.startswith("base_model/")
        }
    elif Path(model).is_dir():
        model_hashes = hash_outputs(Path(model), ["."])
    elif not config.model:
        raise RunDirError(f"{model} does not exist; {hint}")
    else:
        model_hashes = {"hub_id": model}  # resolved by transformers at load time
    inputs = {
        "model": model if config.model else "RUN/base_model",
        "model_sha256": sha256_json(model_hashes),
        "train_data": str(data) if config.train_data else "RUN/data/rl_train.jsonl",
        "train_data_sha256": sha256_json(hash_outputs(data.parent, [data.name])),
    }
    return model, data, inputs


def load_problems(path: Path) -> list[Problem]:
    return [Problem.from_json(r, where=f"{path}:{i + 1}") for i, r in enumerate(read_jsonl(path))]


def infra_changes(out_dir: Path, config: TrainConfig) -> list[str]:
    """The ``infra`` fields whose value differs from the run's record (``config_diff`` lines)."""
    record = load_record(out_dir, STAGE) or {}
    recorded = record.get("config", {}).get("infra", {})
    return config_diff({"infra": recorded}, {"infra": config.to_json()["infra"]})


def train(
    config: TrainConfig,
    run_dir: Path,
    *,
    resume: bool = False,
    force: bool = False,
    show_progress: bool = True,
    console: Console | None = None,
    verifier: Any | None = None,
    accelerator: Any | None = None,
    method_module: Path | None = None,
) -> TrainResult:
    """Train ``config`` in ``run_dir`` (see the module docstring). Works under ``accelerate
    launch``: every process calls this; only the main one writes records and logs."""
    console = console or Console(quiet=not show_progress)
    run_dir = Path(run_dir)
    out_dir = train_dir(run_dir, config.method, config.seed)
    model_path, data_path, inputs = resolve_inputs(config, run_dir)
    if method_module is not None:
        # The rule's code is an input: an edited module makes a finished run out of date.
        inputs["method_module"] = str(method_module)
        inputs["method_module_sha256"] = sha256_json(
            hash_outputs(Path(method_module).parent, [Path(method_module).name])
        )
    identity = {"config": config.identity_json(), "inputs": inputs}
    sha = sha256_json(identity)
    # cpu=True on a machine without GPUs is what makes accelerate use gloo when launched
    # with several processes (`accelerate launch --multi_gpu --num_processes 2` on CPU).
    cpu = torch.accelerator.current_accelerator() is None
    report_to = config.infra.report_to
    acc = accelerator or Accelerator(
        cpu=cpu,
        step_scheduler_with_optimizer=False,
        log_with=None if report_to == "none" else report_to,
        project_dir=TrainDir(out_dir).tracking,
    )
    if accelerator is None and cpu:
        enable_cpu_fsdp(acc)  # the CPU stand-in of an FSDP launch (cpu-fsdp-2proc.yaml)
    state = decide(TrainDir(out_dir).record, identity, resume=resume, force=force)
    ignored = infra_changes(out_dir, config) if state in ("current", "resume") else []
    if ignored:
        console.print(
            "train: infra fields changed since the run started (they do not change results): "
            + "; ".join(ignored)
        )
    acc.wait_for_everyone()  # every process decided before the main one writes anything
    if state == "current":
        console.print(f"[green]train: {out_dir} is finished[/] (config {sha[:12]})")
        return TrainResult(out_dir, True, MetricsLog(TrainDir(out_dir).metrics).read())
    if acc.is_main_process:
        if state in ("fresh", "redo") and out_dir.exists():  # forced: start over
            shutil.rmtree(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        info = {"inputs": inputs, **({"infra_changed": ignored} if ignored else {})}
        write_record(out_dir, StageRecord(STAGE, "running", config.to_json(), identity, {}, info))
    acc.wait_for_everyone()

    problems = load_problems(data_path)
    own_verifier = verifier is None
    if own_verifier:
        verifier = Verifier(
            workers=config.infra.verifier_workers, timeout_s=config.rl.verifier_timeout_s
        )
    try:
        trainer = GRPOTrainer(
            config,
            model_path,
            problems,
            out_dir,
            acc,
            verifier,
            show_progress=show_progress,
            method_module=method_module,
        )
        start = 0
        checkpoints = list_checkpoints(trainer.checkpoint_dir)
        if state == "resume" and checkpoints:
            start = trainer.load_checkpoint(checkpoints[-1])
            console.print(f"train: resuming {out_dir.name} after step {start}")
        trainer.train(start)
        trainer.save_final_model(TrainDir(out_dir).final_model)
    finally:
        if own_verifier:
            verifier.close()
    metrics = trainer.log.read() if acc.is_main_process else []
    if acc.is_main_process:
        info = {
            "inputs": inputs,
            **({"infra_changed": ignored} if ignored else {}),
            "num_processes": acc.num_processes,
            "mixed_precision": acc.mixed_precision,
            "train_time_s": sum(m["time_step_s"] for m in metrics),
        }
        outputs = hash_outputs(out_dir, TrainDir(out_dir).outputs)
        write_record(out_dir, StageRecord(STAGE, "done", config.to_json(), identity, outputs, info))
        last = metrics[-1] if metrics else {}
        console.print(
            f"train: {config.method} seed {config.seed} done -> {out_dir} "
            f"(final reward {last.get('reward_mean', float('nan')):.3f})"
        )
    acc.wait_for_everyone()
    return TrainResult(out_dir, False, metrics)
