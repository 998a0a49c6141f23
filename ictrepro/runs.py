"""Run directories: each stage leaves a JSON record of its config and its outputs' hashes.

The record is how a re-run knows what to do:

- no record and an empty (or absent) directory: run;
- a record of the same config whose outputs all still hash to the recorded values: current,
  nothing to do;
- a record of the same config that is unfinished (an interrupted run) or whose outputs are
  missing or changed: run again, overwriting only this stage's own outputs;
- a record of a different config, or files that no record explains: refuse, unless forced.

The record is written twice: ``status: "running"`` before the stage touches anything, so an
interrupted stage is recognisable, and ``status: "done"`` with the output hashes last.

:func:`is_current` is the one "done and current" check of every stage: prepare
(:func:`stage_state`), train (``stages/train.py``) and eval (each score record is the eval
stage's record of one model on one benchmark, ``ictrepro.rundir.ScoreRecord``).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ictrepro import __version__
from ictrepro.errors import RunDirError
from ictrepro.io import atomic_write_json, hash_outputs

RECORD_SCHEMA = 1

State = Literal["fresh", "current", "redo"]


class RunDirConflict(RunDirError):
    """A run directory holds outputs of another config (or unknown files)."""


@dataclass(frozen=True)
class StageRecord:
    stage: str
    status: str
    config: dict[str, Any]
    config_sha256: str
    outputs: dict[str, str]
    info: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": RECORD_SCHEMA,
            "ictrepro_version": __version__,
            "stage": self.stage,
            "status": self.status,
            "config_sha256": self.config_sha256,
            "config": self.config,
            "outputs": self.outputs,
            "info": self.info,
            "written_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }


def record_path(run_dir: Path, stage: str) -> Path:
    return run_dir / f"{stage}.json"


def load_record(run_dir: Path, stage: str) -> dict[str, Any] | None:
    """The stage's record, or ``None``; an unreadable record is an error naming the file."""
    path = record_path(run_dir, stage)
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise RunDirConflict(
            f"{path} is not valid JSON ({e.msg} at line {e.lineno}); delete it or use --force"
        ) from None
    for key in ("stage", "status", "config_sha256", "outputs"):
        if key not in record:
            raise RunDirConflict(f"{path} has no field {key!r}; delete it or use --force")
    return record


def stage_state(run_dir: Path, stage: str, config_sha256: str, *, force: bool = False) -> State:
    """What a stage must do in ``run_dir`` (see the module docstring); raises on conflict."""
    if not run_dir.exists() or not any(run_dir.iterdir()):
        return "fresh"
    if force:
        return "redo"
    record = load_record(run_dir, stage)
    if record is None:
        raise RunDirConflict(
            f"{run_dir} is not empty and has no {stage}.json record, so it was not made by "
            f"`ictrepro {stage}`; choose an empty or new directory, or pass --force to write "
            "into it anyway"
        )
    if record["config_sha256"] != config_sha256:
        raise RunDirConflict(
            f"{record_path(run_dir, stage)} was made by a different config "
            f"(preset {record.get('config', {}).get('preset')!r}, seed "
            f"{record.get('config', {}).get('seed')!r}, config hash "
            f"{record['config_sha256'][:12]}); use another --out directory, or --force to "
            "replace it"
        )
    return "current" if is_current(record, config_sha256, run_dir) else "redo"


def is_current(record: Mapping[str, Any] | None, config_sha256: str, root: Path) -> bool:
    """Whether a stage is done and current: its record (``None``: none) is finished, of
    this config, and every output it lists (relative to ``root``) still hashes to the
    recorded value."""
    if record is None or record.get("status") != "done":
        return False
    if record.get("config_sha256") != config_sha256:
        return False
    recorded = record.get("outputs") or {}
    if not all((root / rel).is_file() for rel in recorded):
        return False
    return hash_outputs(root, sorted(recorded)) == recorded


def write_record(run_dir: Path, record: StageRecord) -> None:
    atomic_write_json(record_path(run_dir, record.stage), record.to_json())
