"""Training checkpoints: save, list and restore the whole state of a run.

A checkpoint is ``OUT/checkpoints/step-NNNNNN/``: accelerate's saved state (model,
optimiser, scheduler, RNG states of every process) and ``trainer_state.json`` (the steps
it completed). A save writes a temporary folder and renames it, so a killed process leaves
either the previous checkpoint or the complete new one; ``list_checkpoints`` ignores the
temporary folder of a save that was cut short.
"""

from __future__ import annotations

import json
import logging
import shutil
import warnings
from pathlib import Path
from typing import Any

from accelerate import Accelerator

from ictrepro.io import atomic_directory, atomic_write_json
from ictrepro.rundir import TrainDir

CHECKPOINT_PREFIX = "step-"
TRAINER_STATE = "trainer_state.json"


def checkpoint_dir(out_dir: Path) -> Path:
    return TrainDir(out_dir).checkpoints


def list_checkpoints(directory: Path) -> list[Path]:
    """Complete checkpoints in ``directory``, oldest first."""
    if not directory.is_dir():
        return []
    done = [
        p
        for p in directory.iterdir()
        if p.is_dir() and p.name.startswith(CHECKPOINT_PREFIX) and (p / TRAINER_STATE).is_file()
    ]
    return sorted(done, key=lambda p: p.name)


def save_checkpoint(
    accelerator: Accelerator,
    directory: Path,
    completed_steps: int,
    state: dict[str, Any],
    *,
    keep: int,
) -> Path:
    """Save the accelerator's state after ``completed_steps``, with ``state`` as
    ``trainer_state.json`` (plus ``completed_steps``); keep the newest ``keep`` checkpoints.

    Every process calls this (each saves its RNG state); only the main one writes the rest.
    """
    final = directory / f"{CHECKPOINT_PREFIX}{completed_steps:06d}"
    tmp = final.with_name(f".{final.name}.tmp")
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    accelerator.wait_for_everyone()
    # accelerate warns that it drops the tied LM head from the safetensors file; the
    # tie is restored on load (resume is tested to give bit-identical weights).
    quiet = logging.getLogger("accelerate.utils.other")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        accelerator.save_state(str(tmp))
    finally:
        quiet.setLevel(level)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        atomic_write_json(tmp / TRAINER_STATE, {"completed_steps": completed_steps, **state})
        shutil.rmtree(final, ignore_errors=True)
        tmp.replace(final)
        for old in list_checkpoints(directory)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return final


def load_checkpoint(accelerator: Accelerator, path: Path) -> int:
    """Restore the accelerator's state from checkpoint ``path``; returns its completed steps."""
    state = json.loads((path / TRAINER_STATE).read_text(encoding="utf-8"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        accelerator.load_state(str(path))
    return int(state["completed_steps"])


def save_final_model(accelerator: Accelerator, model: Any, tokenizer: Any, path: Path) -> None:
    """The trained policy in Hugging Face format (model + tokenizer), atomically."""
    state_dict = accelerator.get_state_dict(model)
    if accelerator.is_main_process:
        with atomic_directory(path) as tmp:
            accelerator.unwrap_model(model).save_pretrained(tmp, state_dict=state_dict)
            tokenizer.save_pretrained(tmp)
    accelerator.wait_for_everyone()
