"""The run directory: every path in it, the names of its models, its stage records and
its result files.

Layout (every stage writes only its own part)::

    RUN/prepare.json                           prepare's record
    RUN/data/test/<suite>.jsonl                evaluation problems of each tiny suite
    RUN/data/sft.jsonl, RUN/data/rl_train.jsonl
    RUN/data/eval.json                         a pretrained run's evaluation settings
    RUN/base_model/                            the warm-started model (HF format)
    RUN/sft_log.jsonl, RUN/calibration.json    the tiny world's warm start and its scores
    RUN/train/<method>-seed<s>/                train.json, metrics.jsonl, checkpoints/,
                                               final_model/, tracking/ (:class:`TrainDir`)
    RUN/eval/<model>/<benchmark>.samples.jsonl per problem: id, responses, verdicts
    RUN/eval/<model>/<benchmark>.score.json    pass@k and the per-problem counts behind it
    RUN/report/                                report.md, summary.json, plots/
    RUN/logs/                                  one log per worker task of `reproduce`
    RUN/reproduce.json                         what the last reproduction ran
    RUN/compare.json                           what `compare` ran, and its numbers' origins

``<model>`` is a :class:`ModelId`'s name: ``base`` or ``<method>-seed<s>``.

A score record (:class:`ScoreRecord`) carries every problem's sample and correct counts,
so pass@k, the report and the pinned results are computed from score records alone; the
samples file (:class:`SamplesFile`) keeps the responses behind them.

Each stage leaves a JSON record (:class:`StageRecord`) of its config and its outputs'
hashes; it is how a re-run knows what to do:

- no record and an empty (or absent) directory: run;
- a record of the same config whose outputs all still hash to the recorded values: current,
  nothing to do;
- a record of the same config that is unfinished (an interrupted run) or whose outputs are
  missing or changed: run again, overwriting only this stage's own outputs;
- a record of a different config, or files that no record explains: refuse, unless forced.

The record is written twice: ``status: "running"`` before the stage touches anything, so an
interrupted stage is recognisable, and ``status: "done"`` with the output hashes last.
:func:`is_current` is the one "done and current" check of every stage (a score record is
the eval stage's record of one model on one benchmark).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from ictrepro import __version__
from ictrepro.errors import ConfigError, DataError, RunDirError
from ictrepro.io import (
    atomic_write_json,
    atomic_write_jsonl,
    hash_outputs,
    read_jsonl_numbered,
    sha256_json,
)

SAMPLES_SUFFIX = ".samples.jsonl"
SCORE_SUFFIX = ".score.json"
#: Version of the score record's JSON form; a record of another version is re-made by
#: `ictrepro eval` (the counts per problem were added in version 1).
SCORE_SCHEMA = 1
SAMPLES_SCHEMA = 1
RECORD_SCHEMA = 1
#: Relative to ``RUN/data/``: the evaluation settings of a pretrained run.
EVAL_SETTINGS = "eval.json"

_MODEL_NAME = re.compile(r"^(?P<method>[A-Za-z0-9_.-]+?)-seed(?P<seed>\d+)$")


# ----------------------------------------------------------------------------- models


@dataclass(frozen=True, order=True)
class ModelId:
    """A model of a run directory: the base model, or the final model of one training run
    (``method``, ``seed``). Its :attr:`name` is the folder name under ``train/`` and ``eval/``."""

    method: str
    seed: int | None = None
    BASE_NAME: ClassVar[str] = "base"

    def __post_init__(self) -> None:
        if (self.method == self.BASE_NAME) != (self.seed is None):
            raise ValueError(
                f"ModelId({self.method!r}, {self.seed!r}): the base model has no seed and "
                "a trained model has one"
            )

    @property
    def is_base(self) -> bool:
        return self.method == self.BASE_NAME

    @property
    def name(self) -> str:
        """``base`` or ``<method>-seed<s>``."""
        return self.BASE_NAME if self.seed is None else f"{self.method}-seed{self.seed}"

    @classmethod
    def parse(cls, name: str) -> ModelId:
        """The model of ``name`` (``base`` or ``<method>-seed<s>``); a clear error otherwise."""
        if name == cls.BASE_NAME:
            return BASE
        match = _MODEL_NAME.match(name)
        if match is None:
            raise ConfigError(
                f"model name {name!r} is not 'base' or '<method>-seed<s>' (e.g. 'ict-seed0')"
            )
        return cls(match["method"], int(match["seed"]))

    def __str__(self) -> str:
        return self.name


BASE = ModelId(ModelId.BASE_NAME)


# ------------------------------------------------------------------------------ paths


@dataclass(frozen=True)
class RunDir:
    """Every path of one run directory (nothing is created by asking for a path)."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    # prepare
    def record(self, stage: str) -> Path:
        """The stage record of a run-wide stage (``prepare.json``)."""
        return record_file(self.root, stage)

    @property
    def data(self) -> Path:
        return self.root / "data"

    def test_suite(self, suite: str) -> Path:
        return data_file(self.data, f"test/{suite}")

    @property
    def rl_train(self) -> Path:
        return data_file(self.data, "rl_train")

    @property
    def eval_settings(self) -> Path:
        return self.data / EVAL_SETTINGS

    @property
    def base_model(self) -> Path:
        return self.root / "base_model"

    @property
    def sft_log(self) -> Path:
        return self.root / "sft_log.jsonl"

    @property
    def calibration(self) -> Path:
        return self.root / "calibration.json"

    def relative(self, *paths: Path) -> tuple[str, ...]:
        """``paths`` as names relative to the root (how a record lists its outputs)."""
        return tuple(Path(p).relative_to(self.root).as_posix() for p in paths)

    # train
    @property
    def train_root(self) -> Path:
        return self.root / "train"

    def train_dir(self, model: ModelId) -> Path:
        if model.is_base:
            raise ValueError("the base model has no training directory")
        return self.train_root / model.name

    def train_run(self, model: ModelId) -> TrainDir:
        """The paths of one training run's folder."""
        return TrainDir(self.train_dir(model))

    def model_dir(self, model: ModelId) -> Path:
        """Where the weights of ``model`` are: ``base_model/`` or its run's ``final_model/``."""
        return self.base_model if model.is_base else self.train_run(model).final_model

    def metrics(self, model: ModelId) -> Path:
        return self.train_run(model).metrics

    # eval
    def eval_dir(self, model: ModelId) -> Path:
        return self.root / "eval" / model.name

    def samples_path(self, model: ModelId, benchmark: str) -> Path:
        return self.eval_dir(model) / f"{benchmark}{SAMPLES_SUFFIX}"

    def score_path(self, model: ModelId, benchmark: str) -> Path:
        return self.eval_dir(model) / f"{benchmark}{SCORE_SUFFIX}"

    # report, logs, reproduce
    @property
    def report_dir(self) -> Path:
        return self.root / "report"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def log(self, kind: str, model: ModelId) -> Path:
        """The log of one worker task of ``reproduce``: ``logs/<kind>-<model>.log``."""
        return self.logs / f"{kind}-{model.name}.log"

    @property
    def reproduce_record(self) -> Path:
        return self.root / "reproduce.json"

    @property
    def compare_record(self) -> Path:
        """``compare.json``: the rule ``compare`` ran and where each method's numbers are from."""
        return self.root / "compare.json"

    # discovery
    def training_runs(self) -> dict[ModelId, Path]:
        """``{model: RUN/train/<model>/}`` of every folder named like a training run."""
        if not self.train_root.is_dir():
            return {}
        found = {}
        for folder in sorted(p for p in self.train_root.iterdir() if p.is_dir()):
            model = _parse_or_none(folder.name)
            if model is not None and not model.is_base:
                found[model] = folder
        return found

    def training_metrics(self) -> dict[ModelId, Path]:
        """``{model: metrics.jsonl}`` of every training run that has one (the report's curves)."""
        return {
            m: TrainDir(d).metrics
            for m, d in self.training_runs().items()
            if TrainDir(d).metrics.is_file()
        }

    def score_files(self) -> dict[ModelId, dict[str, Path]]:
        """``{model: {benchmark: score.json}}`` under ``RUN/eval/`` (folders not named like a
        model are not the run's and are left out)."""
        root = self.root / "eval"
        if not root.is_dir():
            return {}
        found: dict[ModelId, dict[str, Path]] = {}
        for folder in sorted(p for p in root.iterdir() if p.is_dir()):
            model = _parse_or_none(folder.name)
            files = sorted(folder.glob(f"*{SCORE_SUFFIX}"))
            if model is not None and files:
                found[model] = {p.name.removesuffix(SCORE_SUFFIX): p for p in files}
        return found

    def load_scores(self) -> dict[ModelId, dict[str, ScoreRecord]]:
        """Every score record under ``RUN/eval/``, read and checked: what the report's numbers
        and the pinned results are computed from."""
        return {
            model: {bench: read_score(path) for bench, path in files.items()}
            for model, files in self.score_files().items()
        }


@dataclass(frozen=True)
class TrainDir:
    """Every path of one training run's folder, ``RUN/train/<method>-seed<s>/``."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def record(self) -> Path:
        """``train.json``: the train stage's record."""
        return record_file(self.root, "train")

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def probe(self) -> Path:
        """``probe.jsonl``: each probe's rewards per probe problem (with ``rl.probe_problems``),
        so a before/after difference can be paired problem by problem."""
        return self.root / "probe.jsonl"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def final_model(self) -> Path:
        return self.root / "final_model"

    @property
    def tracking(self) -> Path:
        """Accelerate's trackers' folder (``infra.report_to``)."""
        return self.root / "tracking"

    @property
    def outputs(self) -> tuple[str, ...]:
        """The outputs ``train.json`` hashes, relative to the folder."""
        return tuple(p.relative_to(self.root).as_posix() for p in (self.final_model, self.metrics))


def data_file(data: Path, name: str) -> Path:
    """A problems file under a data folder: ``test/<suite>`` -> ``data/test/<suite>.jsonl``."""
    return Path(data) / f"{name}.jsonl"


def load_reproduce_record(run_dir: Path) -> dict[str, Any] | None:
    """``reproduce.json`` of ``run_dir``: the preset, methods, seeds, worker count and stage
    times of its last completed reproduction (None if there is none). The preset is the
    run's own: a preset may train in another preset's prepared world, so ``prepare.json``
    alone does not name it."""
    path = RunDir(run_dir).reproduce_record
    if not path.is_file():
        return None
    return dict(json.loads(path.read_text(encoding="utf-8")))


def _parse_or_none(name: str) -> ModelId | None:
    try:
        return ModelId.parse(name)
    except ConfigError:
        return None


# ---------------------------------------------------------------------- samples files


@dataclass(frozen=True)
class ProblemSamples:
    """One problem's responses and their verdicts (``finished``: stopped before the token
    limit, when the sampler reports it)."""

    id: str
    responses: tuple[str, ...]
    verdicts: tuple[str, ...]
    finished: tuple[bool, ...] | None = None

    @property
    def n_correct(self) -> int:
        return self.verdicts.count("correct")

    @property
    def ungradable(self) -> bool:
        return "ungradable" in self.verdicts

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "responses": list(self.responses),
            "verdicts": list(self.verdicts),
            "n_correct": self.n_correct,
            **({"finished": list(self.finished)} if self.finished is not None else {}),
        }


@dataclass(frozen=True)
class SamplesFile:
    """``<benchmark>.samples.jsonl``: one line per problem, in the benchmark's order."""

    problems: tuple[ProblemSamples, ...]

    def write(self, path: Path) -> None:
        atomic_write_jsonl(path, (p.to_json() for p in self.problems))

    @classmethod
    def read(cls, path: Path) -> SamplesFile:
        """The samples of ``path``; a bad line is named (file:line) with the field."""
        problems = []
        for lineno, row in _numbered(path):
            where = f"{path}:{lineno}"
            for key in ("id", "responses", "verdicts"):
                if key not in row:
                    raise DataError(f"{where}: missing field {key!r}; re-run `ictrepro eval`")
            if len(row["verdicts"]) != len(row["responses"]):
                raise DataError(
                    f"{where}: {len(row['verdicts'])} verdicts for {len(row['responses'])} "
                    "responses; re-run `ictrepro eval --force`"
                )
            finished = row.get("finished")
            problems.append(
                ProblemSamples(
                    str(row["id"]),
                    tuple(row["responses"]),
                    tuple(row["verdicts"]),
                    None if finished is None else tuple(finished),
                )
            )
        return cls(tuple(problems))


def _numbered(path: Path) -> list[tuple[int, dict[str, Any]]]:
    try:
        return read_jsonl_numbered(path)
    except FileNotFoundError:
        raise DataError(f"{path} does not exist; run `ictrepro eval` first") from None
    except ValueError as e:  # read_jsonl_numbered names the file and line
        raise DataError(str(e)) from None


# ------------------------------------------------------------------------ score records


@dataclass(frozen=True)
class ProblemCount:
    """One gradable problem of a score: samples drawn and how many were correct."""

    id: str
    n_samples: int
    n_correct: int


@dataclass(frozen=True)
class ScoreRecord:
    """``<benchmark>.score.json``: one model on one benchmark.

    ``problems``: the gradable problems in the benchmark's order with their counts (pass@k
    is their mean, :func:`ictrepro.evaluate.passk.mean_pass_at`); ``ungradable``: ids of problems whose gold answer
    could not be parsed (left out, never scored 0). ``identity``: what the score was made
    from (model and problems hashes, decoding settings, seed, backend) and ``samples_sha256``
    the hash of the samples file beside it; both are ``None`` for a pinned result
    (``pinned=True``: copied from ``results/<preset>/``, no samples exist).
    """

    benchmark: str
    model: ModelId
    pass_at: dict[int, float]
    problems: tuple[ProblemCount, ...]
    ungradable: tuple[str, ...] = ()
    verdicts: dict[str, int] = field(default_factory=dict)
    identity: dict[str, Any] | None = None
    samples_sha256: str | None = None
    pinned: bool = False
    lm_eval_pass_at: dict[int, float] | None = None

    @property
    def n_correct(self) -> list[int]:
        return [p.n_correct for p in self.problems]

    def settings(self) -> dict[str, Any] | None:
        """The decoding settings (sampling, ks, backend, seed) from the identity, if any."""
        if self.identity is None:
            return None
        settings = self.identity.get("settings") or {}
        return {
            **(settings.get("sampling") or {}),
            "ks": settings.get("ks"),
            "backend": self.identity.get("backend"),
            "seed": self.identity.get("seed"),
        }

    def to_json(self) -> dict[str, Any]:
        """The file's JSON; ``status``, ``config_sha256`` and ``outputs`` make it the eval
        stage's record of this (model, benchmark), checked by :func:`is_current`."""
        out: dict[str, Any] = {
            "schema": SCORE_SCHEMA,
            "benchmark": self.benchmark,
            "model": self.model.name,
            "pass_at": {str(k): v for k, v in self.pass_at.items()},
            "n_problems": len(self.problems),
            "n_ungradable": len(self.ungradable),
            "problems": [[p.id, p.n_samples, p.n_correct] for p in self.problems],
            "ungradable": list(self.ungradable),
            "verdicts": self.verdicts,
            "identity": self.identity,
            "pinned": self.pinned,
            "status": "done",
            # A pinned record is never current for an evaluation: no samples stand behind it.
            "config_sha256": (
                None if self.identity is None or self.pinned else sha256_json(self.identity)
            ),
            "outputs": (
                {}
                if self.samples_sha256 is None
                else {f"{self.benchmark}{SAMPLES_SUFFIX}": self.samples_sha256}
            ),
        }
        if self.lm_eval_pass_at is not None:
            out["lm_eval_pass_at"] = {str(k): v for k, v in self.lm_eval_pass_at.items()}
        return out

    def write(self, path: Path) -> None:
        atomic_write_json(path, self.to_json())

    @classmethod
    def from_json(cls, record: Mapping[str, Any], *, where: str) -> ScoreRecord:
        """Parse and check a score record; errors name ``where`` and the field."""
        if record.get("schema") != SCORE_SCHEMA:
            raise DataError(
                f"{where}: score record of schema {record.get('schema')!r}, this version reads "
                f"{SCORE_SCHEMA}; re-make it with `ictrepro eval --force`"
            )
        for key in ("benchmark", "model", "pass_at", "problems", "ungradable", "identity"):
            if key not in record:
                raise DataError(f"{where}: missing field {key!r}")
        problems = []
        for i, item in enumerate(record["problems"]):
            ok = isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)
            ok = ok and all(isinstance(x, int) and not isinstance(x, bool) for x in item[1:])
            if not ok or not 0 <= item[2] <= item[1]:
                raise DataError(
                    f"{where}: problems[{i}] must be [id, n_samples, n_correct] with "
                    f"0 <= n_correct <= n_samples, got {item!r}"
                )
            problems.append(ProblemCount(*item))
        try:
            model = ModelId.parse(str(record["model"]))
            pass_at = {int(k): float(v) for k, v in record["pass_at"].items()}
            lm = record.get("lm_eval_pass_at")
            lm_pass_at = None if lm is None else {int(k): float(v) for k, v in lm.items()}
        except (ValueError, TypeError, AttributeError) as e:
            raise DataError(
                f"{where}: bad field 'model', 'pass_at' or 'lm_eval_pass_at' ({e})"
            ) from None
        outputs = record.get("outputs") or {}
        return cls(
            benchmark=str(record["benchmark"]),
            model=model,
            pass_at=pass_at,
            problems=tuple(problems),
            ungradable=tuple(str(i) for i in record["ungradable"]),
            verdicts=dict(record.get("verdicts") or {}),
            identity=record["identity"],
            samples_sha256=next(iter(outputs.values()), None),
            pinned=bool(record.get("pinned", False)),
            lm_eval_pass_at=lm_pass_at,
        )


def read_score(path: Path) -> ScoreRecord:
    """The score record of ``path``; a missing, non-JSON or malformed file is named."""
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path} does not exist; run `ictrepro eval` first") from None
    except json.JSONDecodeError as e:
        raise DataError(
            f"{path}: not valid JSON ({e.msg} at line {e.lineno}); re-run `ictrepro eval --force`"
        ) from None
    if not isinstance(record, dict):
        raise DataError(f"{path}: expected a JSON object")
    return ScoreRecord.from_json(record, where=str(path))


# ----------------------------------------------------------------------- stage records

Decision = Literal["fresh", "current", "redo", "resume"]


class RunDirConflict(RunDirError):
    """A run directory holds outputs of another config (or unknown files)."""


@dataclass(frozen=True)
class StageRecord:
    """A stage's record: its ``config``, its ``identity`` (what makes its outputs what they
    are; ``config_sha256`` is its hash), its outputs' hashes and free ``info``."""

    stage: str
    status: str
    config: dict[str, Any]
    identity: Any
    outputs: dict[str, str]
    info: dict[str, Any]

    @property
    def config_sha256(self) -> str:
        return sha256_json(self.identity)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": RECORD_SCHEMA,
            "ictrepro_version": __version__,
            "stage": self.stage,
            "status": self.status,
            "config_sha256": self.config_sha256,
            "config": self.config,
            "identity": self.identity,
            "outputs": self.outputs,
            "info": self.info,
            "written_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }


def record_file(folder: Path, stage: str) -> Path:
    """The record of ``stage`` in ``folder``: ``<folder>/<stage>.json``."""
    return Path(folder) / f"{stage}.json"


def load_record(folder: Path, stage: str) -> dict[str, Any] | None:
    """The stage's record, or ``None``; an unreadable record is an error naming the file."""
    path = record_file(folder, stage)
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


def write_record(folder: Path, record: StageRecord) -> None:
    atomic_write_json(record_file(folder, record.stage), record.to_json())


def decide(
    record: Path,
    identity: Any,
    *,
    resume: bool | None = None,
    force: bool = False,
    shared: bool = False,
) -> Decision:
    """What a stage does, from its record file ``record`` (the stage's outputs lie beside
    it) and the ``identity`` it would run with (what ``config_sha256`` hashes):

    - ``"fresh"``: nothing of the stage is there (its folder is absent or empty): run;
    - ``"current"``: done, of this identity, every output as recorded: nothing to do;
    - ``"redo"``: forced, or of this identity but unfinished or with outputs changed while
      the stage cannot resume (``resume=None``): run again over its own outputs;
    - ``"resume"``: of this identity and unfinished, with ``resume=True``: continue.

    Refused (:class:`RunDirConflict`, naming the fix): a folder with files but no record,
    a record of another identity, an unfinished run with ``resume=False``. ``shared=True``
    (a score record, one of many in its folder) refuses nothing: a record that is missing,
    unreadable or not current is re-made.
    """
    record = Path(record)
    folder, stage, sha = record.parent, record.stem, sha256_json(identity)
    if shared:
        try:
            loaded = json.loads(record.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return "redo" if force else "fresh"
        except json.JSONDecodeError:  # an interrupted write of an older version
            return "redo"
        return "current" if not force and is_current(loaded, sha, folder) else "redo"
    if not folder.exists() or not any(folder.iterdir()):
        return "fresh"
    if force:
        return "redo"
    loaded = load_record(folder, stage)
    if loaded is None:
        raise RunDirConflict(
            f"{folder} is not empty and has no {stage}.json record, so it was not made by "
            f"`ictrepro {stage}`; choose an empty or new directory, or pass --force to write "
            "into it anyway"
        )
    if loaded["config_sha256"] != sha:
        recorded = loaded.get("identity")
        diff = (
            config_diff(recorded, identity)
            if isinstance(recorded, dict) and isinstance(identity, dict)
            else []
        ) or [f"config hash: {loaded['config_sha256'][:12]} (recorded) != {sha[:12]} (now)"]
        raise RunDirConflict(
            f"{record} was made by a different config; use another directory, or --force to "
            "start over. Differing fields:\n  " + "\n  ".join(diff)
        )
    if is_current(loaded, sha, folder):
        return "current"
    if resume is None:
        return "redo"
    if not resume:
        raise RunDirConflict(
            f"{folder} holds an unfinished run of this config; pass --resume to continue it "
            "from its last checkpoint, or --force to start over"
        )
    return "resume"


def config_diff(recorded: dict[str, Any], current: dict[str, Any], prefix: str = "") -> list[str]:
    """``["rl.lr: 0.0002 (recorded) != 0.0001 (now)", ...]`` for every differing leaf."""
    lines = []
    for key in sorted(set(recorded) | set(current)):
        a, b = recorded.get(key, "<absent>"), current.get(key, "<absent>")
        if isinstance(a, dict) and isinstance(b, dict):
            lines += config_diff(a, b, f"{prefix}{key}.")
        elif a != b:
            lines.append(f"{prefix}{key}: {a!r} (recorded) != {b!r} (now)")
    return lines


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
