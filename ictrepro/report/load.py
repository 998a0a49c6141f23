"""Reading a run directory for the report: the only module of :mod:`ictrepro.report` that
opens files, all through :mod:`ictrepro.rundir`.

:func:`load_run` reads

- every score record (``RUN/eval/<model>/<benchmark>.score.json``): per problem, the
  number of samples and of correct ones, from which each problem's pass@1 and pass@4 are
  computed; the decoding settings; the recorded pass@k (only compared with the
  recomputed one). Pinned baselines (``ictrepro compare``) are score records too;
- ``RUN/train/<model>/metrics.jsonl``: the training curves;
- ``RUN/prepare.json`` and ``RUN/train/*/train.json``: the preset, and each training run's
  ``config.rl``.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ictrepro.errors import DataError, RunDirError
from ictrepro.evaluate.passk import pass_at_k
from ictrepro.io import read_jsonl
from ictrepro.rundir import ModelId, RunDir, ScoreRecord, TrainDir, read_score

BASE = ModelId.BASE_NAME

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
    #: What ``prepare`` recorded as deviating from the paper's set-up (a training set or
    #: benchmark left out or subset).
    deviations: tuple[str, ...]
    evaluated: dict[str, dict[Seed, dict[str, ProblemScores]]]
    trained: dict[str, dict[int, list[dict[str, Any]]]]
    rl_configs: dict[str, tuple[str, dict[str, Any]]]


def load_run(run_dir: Path | str, methods: Collection[str] | None = None) -> LoadedRun:
    """Read ``run_dir``: every model's scores, or only ``methods``' (and the base model's).

    Raises :class:`RunDirError` if the run directory does not exist or has neither score
    records nor training metrics."""
    run = RunDir(Path(run_dir))
    if not run.root.is_dir():
        raise RunDirError(f"run directory {run.root} does not exist")

    def keep(model: ModelId) -> bool:
        return methods is None or model.is_base or model.method in methods

    score_files = {m: files for m, files in run.score_files().items() if keep(m)}
    metrics = {m: path for m, path in run.training_metrics().items() if keep(m)}
    if not score_files and not metrics:
        raise RunDirError(
            f"{run.root} has no eval/<model>/*.score.json and no train/*/metrics.jsonl; "
            "run `ictrepro train` and `ictrepro eval` first"
        )
    evaluated: dict[str, dict[Seed, dict[str, ProblemScores]]] = {}
    for model, files in score_files.items():
        scores = {bench: problem_scores(path) for bench, path in files.items()}
        evaluated.setdefault(model.method, {})[model.seed] = scores
    trained: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for model, path in metrics.items():
        trained.setdefault(model.method, {})[model.seed] = read_jsonl(path)
    return LoadedRun(
        run_dir=run.root,
        presets=_presets(run),
        deviations=prepare_deviations(run.root),
        evaluated=evaluated,
        trained=trained,
        rl_configs={
            model.name: (model.method, rl)
            for model, folder in run.training_runs().items()
            if keep(model) and (rl := _config(TrainDir(folder).record, "rl")) is not None
        },
    )


def problem_scores(path: Path) -> ProblemScores:
    """Per-problem pass@1 and pass@4 of one score record, from its counts (problems with
    an ungradable gold answer are not in them)."""
    record: ScoreRecord = read_score(path)
    try:
        p1 = [pass_at_k(p.n_samples, p.n_correct, 1) for p in record.problems]
        p4 = [pass_at_k(p.n_samples, p.n_correct, 4) for p in record.problems]
    except (TypeError, ValueError) as e:  # a count the estimator refuses, named by file
        raise DataError(f"{path}: {e}") from None
    return ProblemScores(
        path,
        tuple(p.id for p in record.problems),
        np.asarray(p1, dtype=np.float64),
        np.asarray(p4, dtype=np.float64),
        tuple(sorted({p.n_samples for p in record.problems})),
        len(record.ungradable),
        record.settings(),
        {str(k): v for k, v in record.pass_at.items()},
    )


def prepare_deviations(run_dir: Path) -> tuple[str, ...]:
    """What ``prepare.json`` records as deviating from the paper's set-up (none if absent)."""
    recorded = _config(RunDir(Path(run_dir)).record("prepare"), "deviations", section="info")
    return tuple(recorded or ())


def _config(path: Path, *keys: str, section: str = "config") -> Any:
    """``<section>.<keys>`` of a ``prepare.json``/``train.json`` (section ``config`` or
    ``info``); None if the file or the field is missing or unreadable (an unfinished run
    has no record yet)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))[section]
        for key in keys:
            value = value[key]
    except (OSError, json.JSONDecodeError, KeyError, TypeError):
        return None
    return value


def _presets(run: RunDir) -> tuple[str, ...]:
    """The presets the run's models trained under (``train.json``); with no training run,
    the one ``prepare.json`` records. A preset may train in another's prepared world
    (``tiny-fork-tally-lr10`` in ``tiny-fork-tally``'s), so the world's preset is not the run's."""

    def named(records: list[Path]) -> set[str]:
        return {str(p) for p in (_config(path, "preset") for path in records) if p is not None}

    trained = named([TrainDir(d).record for d in run.training_runs().values()])
    return tuple(sorted(trained or named([run.record("prepare")])))
