"""Shipped worlds: a pinned CPU world's base model, stored with the pinned results.

A CPU world's base model is the product of a warm start (minutes on 2 cores) whose bits
depend on the machine's numerics (``ictrepro/determinism.py``). The pinned baselines grew
from one particular base model, so a machine that builds another cannot use them. Shipping
that model makes the world data: ``prepare`` copies it (hash-checked) instead of training
it, on any machine, and ``prepare --warm-start`` still trains it from scratch, which is
how the regression checks test the warm start.

``results/worlds/<world>/`` (``<world>``: the prepare config's ``preset``, which every
preset of that world shares) holds::

    base_model/     the warm-started model and tokenizer, as RUN/base_model/
    sft_log.jsonl   its warm start's loss per step
    world.json      the prepare config's sha256, every file's sha256, and the numerics and
                    command that built it

and ``results/MANIFEST.sha256`` covers them like every pinned file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ictrepro.determinism import numerics_provenance
from ictrepro.errors import DataError
from ictrepro.io import atomic_directory, atomic_write_json, atomic_write_text, hash_outputs
from ictrepro.results.pinned import RESULTS_DIR, WEIGHT_SUFFIXES, write_manifest
from ictrepro.rundir import RunDir, load_record

WORLDS = "worlds"
RECORD = "world.json"
#: Folders and files of a run's prepared world that ship (the data are rebuilt: seconds).
SHIPPED = ("base_model", "sft_log.jsonl")


def world_dir(world: str, results_dir: Path = RESULTS_DIR) -> Path:
    return Path(results_dir) / WORLDS / world


def _files(folder: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of the shipped files that exist under ``folder``."""
    return hash_outputs(folder, [name for name in SHIPPED if (Path(folder) / name).exists()])


def ship_world(run_dir: Path, results_dir: Path = RESULTS_DIR) -> Path | None:
    """Store ``run_dir``'s warm-started base model as its world's shipped one and rewrite
    the manifest; returns the folder, or None for a world that does not ship (a pretrained
    model's: it comes from its own source). A world already shipped with other files is
    refused: the results pinned in it grew from those."""
    run_dir = Path(run_dir)
    record = load_record(run_dir, "prepare") or {}
    config = record.get("config") or {}
    if record.get("status") != "done" or "sft" not in config:
        return None
    world = str(config["preset"])
    files = _files(run_dir)
    target = world_dir(world, results_dir)
    existing = read_world(target)
    if existing is not None:
        if existing["files"] == files and existing["prepare_config_sha256"] == record.get(
            "config_sha256"
        ):
            return target
        raise DataError(
            f"{target} ships another base model of world {world!r} than {run_dir} built; "
            "the results pinned in this world grew from the shipped one. Pin this run on a "
            "machine whose numerics build the shipped model (`ictrepro check --rerun`), or "
            f"re-pin every preset of the world after removing {target}"
        )
    with atomic_directory(target) as tmp:
        for name in SHIPPED:
            src = run_dir / name
            if src.is_dir():
                shutil.copytree(src, tmp / name)
            elif src.is_file():
                shutil.copy2(src, tmp / name)
        atomic_write_json(
            tmp / RECORD,
            {
                "world": world,
                "prepare_config_sha256": record.get("config_sha256"),
                "files": _files(tmp),
                "numerics": numerics_provenance(),
                "command": f"ictrepro prepare --preset {world} --warm-start",
            },
        )
    write_manifest(results_dir)
    return target


def read_world(folder: Path) -> dict[str, Any] | None:
    path = Path(folder) / RECORD
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None


def shipped_world(world: str, config_sha256: str, results_dir: Path = RESULTS_DIR) -> Path | None:
    """The shipped folder of ``world`` when it was built from the prepare config
    ``config_sha256``, every file checked against ``world.json``; None when none ships.
    A folder of another config, or a file that does not match, is an error that says how
    to go on (a silent warm start would build another world on another machine)."""
    folder = world_dir(world, results_dir)
    record = read_world(folder)
    if record is None:
        return None
    if record.get("prepare_config_sha256") != config_sha256:
        raise DataError(
            f"{folder / RECORD} ships world {world!r} built from prepare config "
            f"{str(record.get('prepare_config_sha256'))[:12]}, but this run's config is "
            f"{config_sha256[:12]}: train the base model with `--warm-start`"
        )
    found = _files(folder)
    for rel, digest in record.get("files", {}).items():
        if rel not in found:
            raise DataError(f"{folder / rel}: missing from the shipped world (`git checkout` it)")
        if found[rel] != digest:
            raise DataError(
                f"{folder / rel}: modified (its sha256 differs from {folder / RECORD}); "
                "restore it with `git checkout`, or train the base model with `--warm-start`"
            )
    return folder


def copy_shipped(folder: Path, run_dir: Path) -> None:
    """Copy a shipped world's base model and warm-start log into ``run_dir``."""
    rundir = RunDir(run_dir)
    with atomic_directory(rundir.base_model) as tmp:
        shutil.copytree(folder / "base_model", tmp, dirs_exist_ok=True)
    atomic_write_text(rundir.sft_log, (folder / "sft_log.jsonl").read_text(encoding="utf-8"))


def weights_match(shipped: Path, base_model: Path) -> bool:
    """Whether ``base_model``'s weight files are bit for bit the shipped world's."""

    def weights(folder: Path) -> dict[str, str]:
        files = hash_outputs(folder, ["."])
        return {name: digest for name, digest in files.items() if name.endswith(WEIGHT_SUFFIXES)}

    return weights(Path(shipped) / "base_model") == weights(Path(base_model))
