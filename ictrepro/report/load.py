"""Reading a run directory for the report: the only module of :mod:`ictrepro.report` that
opens files.

:func:`load_run` reads

- ``RUN/eval/<model>/<benchmark>.samples.jsonl``: per problem, ``n_correct`` and the number
  of ``responses``, from which each problem's pass@1 and pass@4 are computed;
- ``RUN/eval/<model>/<benchmark>.score.json``: the decoding settings, and the recorded
  pass@k (only compared with the recomputed one);
- ``RUN/train/<method>-seed<s>/metrics.jsonl``: the training curves;
- ``RUN/prepare.json`` and ``RUN/train/*/train.json``: the preset, and each training run's
  ``config.rl``.

``<model>`` is ``base`` or ``<method>-seed<s>``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ictrepro.errors import DataError, RunDirError
from ictrepro.evaluate.passk import pass_at_k
from ictrepro.io import read_jsonl

BASE = "base"
_MODEL = re.compile(r"^(?P<method>.+)-seed(?P<seed>\d+)$")
_SAMPLES = ".samples.jsonl"

Seed = int | None
"""A training seed; None for the base model, which is one model."""


@dataclass(frozen=True)
class ProblemScores:
    """One model on one benchmark, per gradable problem (fractions in [0, 1]).

    Attributes:
        ids: the ``P`` gradable problems' ids.
        p1, p4: float ``[P]``, each problem's unbiased pass@1 and pass@4.
        n_samples: the distinct numbers of responses per problem.
        n_ungradable: problems left out for an "ungradable" verdict.
        settings: the decoding settings recorded in ``score.json`` (None without one).
        recorded: ``score.json``'s ``pass_at`` (only checked against ours).
    """

    path: Path
    ids: tuple[str, ...]
    p1: np.ndarray
    p4: np.ndarray
    n_samples: tuple[int, ...]
    n_ungradable: int
    settings: dict[str, Any] | None
    recorded: dict[str, float] | None


@dataclass(frozen=True)
class LoadedRun:
    """What the report reads from a run directory.

    Attributes:
        presets: the presets recorded by ``prepare.json`` and the ``train.json`` files.
        evaluated: ``[method][seed][benchmark]``, in file-name order.
        trained: ``[method][seed]``: the rows of the run's ``metrics.jsonl``.
        rl_configs: ``[run folder name]``: ``(method, config.rl of its train.json)``.
    """

    run_dir: Path
    presets: tuple[str, ...]
    evaluated: dict[str, dict[Seed, dict[str, ProblemScores]]]
    trained: dict[str, dict[int, list[dict[str, Any]]]]
    rl_configs: dict[str, tuple[str, dict[str, Any]]]


def load_run(run_dir: Path | str, methods: Collection[str] | None = None) -> LoadedRun:
    """Read ``run_dir``: every model's samples, or only ``methods``' (and the base model's).

    Raises :class:`RunDirError` if the run directory does not exist or has neither
    evaluation samples nor training metrics."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"run directory {run_dir} does not exist")
    evaluated, trained = _find_samples(run_dir), _find_metrics(run_dir)
    if not evaluated and not trained:
        raise RunDirError(
            f"{run_dir} has no eval/<model>/*.samples.jsonl and no train/*/metrics.jsonl; "
            "run `ictrepro train` and `ictrepro eval` first"
        )

    def keep(method: str) -> bool:
        return methods is None or method == BASE or method in methods

    return LoadedRun(
        run_dir=run_dir,
        presets=_presets(run_dir),
        evaluated={
            m: {s: {b: read_samples(p) for b, p in files.items()} for s, files in per.items()}
            for m, per in evaluated.items()
            if keep(m)
        },
        trained={
            m: {s: read_jsonl(p) for s, p in per.items()} for m, per in trained.items() if keep(m)
        },
        rl_configs={k: v for k, v in _rl_configs(run_dir).items() if keep(v[0])},
    )


def read_samples(path: Path) -> ProblemScores:
    """Per-problem pass@1 and pass@4 of one ``samples.jsonl``, computed from ``n_correct``
    and the number of responses; problems with an "ungradable" verdict are left out."""
    ids, p1, p4, ns, ungradable = [], [], [], set(), 0
    for lineno, row in enumerate(read_jsonl(path), start=1):
        where = f"{path}:{lineno}"
        for key in ("id", "responses", "verdicts", "n_correct"):
            if key not in row:
                raise DataError(f"{where}: missing field {key!r}")
        if "ungradable" in row["verdicts"]:
            ungradable += 1
            continue
        n, c = len(row["responses"]), row["n_correct"]
        if len(row["verdicts"]) != n:
            raise DataError(f"{where}: {len(row['verdicts'])} verdicts for {n} responses")
        try:
            p1.append(pass_at_k(n, c, 1))
            p4.append(pass_at_k(n, c, 4))
        except (TypeError, ValueError) as e:  # a bad count in the file, named by line
            raise DataError(f"{where}: {e}") from None
        ids.append(str(row["id"]))
        ns.add(n)
    if len(set(ids)) != len(ids):
        raise DataError(f"{path}: a problem id occurs more than once")
    settings, recorded = _read_score_file(path)
    return ProblemScores(
        path,
        tuple(ids),
        np.asarray(p1, dtype=np.float64),
        np.asarray(p4, dtype=np.float64),
        tuple(sorted(ns)),
        ungradable,
        settings,
        recorded,
    )


def _read_score_file(samples_path: Path) -> tuple[dict[str, Any] | None, dict[str, float] | None]:
    """Decoding settings and recorded pass@k from the ``score.json`` beside a samples file;
    an unreadable one counts as absent (the samples alone give every score)."""
    path = samples_path.with_name(samples_path.name.removesuffix(_SAMPLES) + ".score.json")
    if not path.is_file():
        return None, None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return None, None
    identity = record.get("identity") or {}
    sampling = (identity.get("settings") or {}).get("sampling")
    settings = None
    if sampling is not None:
        settings = {
            **sampling,
            "ks": (identity.get("settings") or {}).get("ks"),
            "backend": identity.get("backend"),
            "seed": identity.get("seed"),
        }
    recorded = record.get("pass_at")
    return settings, recorded if isinstance(recorded, dict) else None


def parse_model(name: str) -> tuple[str, Seed] | None:
    """``(method, seed)`` of a model folder name (``base`` or ``<method>-seed<s>``)."""
    if name == BASE:
        return BASE, None
    m = _MODEL.match(name)
    return (m["method"], int(m["seed"])) if m else None


def _find_samples(run_dir: Path) -> dict[str, dict[Seed, dict[str, Path]]]:
    """``{method: {seed: {benchmark: samples path}}}`` under ``RUN/eval/``."""
    found: dict[str, dict[Seed, dict[str, Path]]] = {}
    root = run_dir / "eval"
    if not root.is_dir():
        return found
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        parsed = parse_model(folder.name)
        if parsed is None:
            continue
        method, seed = parsed
        files = {p.name.removesuffix(_SAMPLES): p for p in sorted(folder.glob(f"*{_SAMPLES}"))}
        if files:
            found.setdefault(method, {})[seed] = files
    return found


def _find_metrics(run_dir: Path) -> dict[str, dict[int, Path]]:
    """``{method: {seed: metrics.jsonl}}`` under ``RUN/train/``."""
    found: dict[str, dict[int, Path]] = {}
    root = run_dir / "train"
    if not root.is_dir():
        return found
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        parsed = parse_model(folder.name)
        if parsed is None or parsed[1] is None or not (folder / "metrics.jsonl").is_file():
            continue
        found.setdefault(parsed[0], {})[parsed[1]] = folder / "metrics.jsonl"
    return found


def _train_records(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "train").glob("*/train.json"))


def _config(path: Path, *keys: str) -> Any:
    """``config.<keys>`` of a ``prepare.json``/``train.json``; None if the file or the field
    is missing or unreadable (an unfinished run has no record yet)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))["config"]
        for key in keys:
            value = value[key]
    except (OSError, json.JSONDecodeError, KeyError, TypeError):
        return None
    return value


def _presets(run_dir: Path) -> tuple[str, ...]:
    """Presets recorded by ``prepare.json`` and the training runs' ``train.json``."""
    records = [run_dir / "prepare.json", *_train_records(run_dir)]
    presets = {str(p) for p in (_config(path, "preset") for path in records) if p is not None}
    return tuple(sorted(presets))


def _rl_configs(run_dir: Path) -> dict[str, tuple[str, dict[str, Any]]]:
    """``{run folder: (method, config.rl)}`` of the ``train.json`` files, in name order."""
    out = {}
    for path in _train_records(run_dir):
        parsed = parse_model(path.parent.name)
        rl = _config(path, "rl")
        if parsed is not None and rl is not None:
            out[path.parent.name] = (parsed[0], rl)
    return out
