"""Hash-pinned results: the project's own results of a preset, and a manifest of ``results/``.

``results/`` is the folder given (``ictrepro check --results``), by default ``results/`` in
the current directory, never a folder found from where the package is installed: checking
a checkout means running in it (or naming its ``results/``).

``results/<preset>/`` holds what a reproduction of ``<preset>`` produced:

- ``scores.jsonl``: one line per (model, benchmark): ``model`` (``base`` or
  ``<method>-seed<s>``), ``method``, ``seed``, ``benchmark``, ``n_correct`` (per problem,
  in the benchmark's order, ungradable problems left out), ``n_samples``, ``pass_at``;
- ``report.md``: the run's report (``ictrepro report``), when it has one;
- ``provenance.json``: preset, methods, seeds, the hashes that produced them (prepare
  config, each training run's config + outputs, each evaluation's model / problems /
  settings identity), ``world`` (the hashes of the prepare config, base model and data
  every model grew from: :func:`world_identity`), ``numerics`` (CPU, torch's kernel
  capability, MKL / oneDNN versions, threads, package versions and the determinism
  settings in effect: :func:`ictrepro.determinism.numerics_provenance`), the worker count
  and each stage's wall time.

``results/MANIFEST.sha256`` lists ``<sha256>  <path>`` for every file under ``results/``.
``check_results`` verifies the manifest (a modified, truncated, missing or unlisted file is
named), the schema of every result file and each ``pass_at`` against the one recomputed
from the counts (so an edited number is caught even under a rewritten manifest), and the
paper's numbers shipped with the package. ``pin_run`` copies a run's results in and
rewrites the manifest: that is how results are re-pinned after an intended change.
Re-running a preset and comparing it with these results: :mod:`ictrepro.results.rerun`.
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
from pathlib import Path
from typing import Any

from ictrepro import __version__
from ictrepro.determinism import numerics_provenance
from ictrepro.errors import DataError
from ictrepro.evaluate.passk import mean_pass_at_k
from ictrepro.io import (
    atomic_write_json,
    atomic_write_jsonl,
    atomic_write_text,
    sha256_file,
    sha256_json,
)
from ictrepro.results.paper import PaperDataError, load_paper
from ictrepro.rundir import RunDir, load_record, load_reproduce_record

#: Relative: ``results/`` of the current directory, as ``ictrepro check --help`` says.
RESULTS_DIR = Path("results")
MANIFEST = "MANIFEST.sha256"
SCORE_FIELDS = {
    "model": str,
    "method": str,
    "seed": (int, type(None)),
    "benchmark": str,
    "n_correct": list,
    "n_samples": int,
    "pass_at": dict,
}
#: |recorded - recomputed| pass@k allowed: the same counts give the same bits, so only
#: float formatting may differ.
PASS_AT_TOLERANCE = 1e-12


class ResultsError(DataError):
    """A pinned result file is missing, modified or malformed."""


# ---------------------------------------------------------------------------- pinning


def collect_scores(run_dir: Path) -> list[dict[str, Any]]:
    """One pinned record per (model, benchmark) of ``RUN/eval``, from its score record."""
    records = []
    for model, per in RunDir(run_dir).load_scores().items():
        for benchmark, score in per.items():
            sizes = {p.n_samples for p in score.problems}
            if len(sizes) > 1:
                raise ResultsError(
                    f"{RunDir(run_dir).score_path(model, benchmark)}: problems have different "
                    f"numbers of samples {sorted(sizes)}; a pinned record needs one"
                )
            records.append(
                {
                    "model": model.name,
                    "method": model.method,
                    "seed": model.seed,
                    "benchmark": benchmark,
                    "n_correct": score.n_correct,
                    "n_samples": sizes.pop() if sizes else 0,
                    "pass_at": {str(k): v for k, v in score.pass_at.items()},
                    "identity": score.identity,
                }
            )
    if not records:
        raise ResultsError(f"{run_dir} has no evaluation results (run `ictrepro eval` first)")
    return records


def read_pinned_scores(preset: str, results_dir: Path = RESULTS_DIR) -> list[dict[str, Any]]:
    """The records of ``results_dir/<preset>/scores.jsonl`` (fields: module docstring); a
    malformed line is named (file:line) with the field."""
    path = Path(results_dir) / preset / "scores.jsonl"
    if not path.is_file():
        raise ResultsError(f"{path} is missing; pin a run with `ictrepro check --pin RUN`")
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        record, problems = _parse_score_line(line, f"{path}:{number}")
        if problems:
            raise ResultsError("; ".join(problems))
        records.append(record)
    return records


def pin_run(
    run_dir: Path,
    preset: str | None = None,
    *,
    results_dir: Path = RESULTS_DIR,
    jobs: int | None = None,
) -> Path:
    """Copy ``run_dir``'s results into ``results_dir/<preset>/`` and rewrite the manifest.

    ``preset``: default the one the run was reproduced as (``RUN/reproduce.json``), else
    the one it was prepared for (``RUN/prepare.json``; a preset such as
    ``tiny-fork-tally-lr10`` trains in another's world); a given one must be that one, so a
    run is never pinned over another preset's results.
    ``jobs``: the worker processes the run was made with (default: its ``reproduce.json``).
    """
    import torch  # here: only pinning needs its version, and torch takes seconds to import

    run_dir = Path(run_dir)
    rundir = RunDir(run_dir)
    prepare = load_record(run_dir, "prepare") or {}
    prepared_for = prepare.get("config", {}).get("preset")
    if prepared_for is None:
        raise ResultsError(
            f"{run_dir}/prepare.json is missing or names no preset; pin a run that "
            "`ictrepro reproduce` made"
        )
    reproduction = load_reproduce_record(run_dir) or {}
    made_for, how = prepared_for, "prepared for"
    if reproduction:
        made_for, how = str(reproduction["preset"]), "reproduced as"
    if preset is not None and preset != made_for:
        raise ResultsError(
            f"{run_dir} was {how} preset {made_for!r}, not {preset!r}; pin it "
            f"as results/{made_for}/ (leave out --preset)"
        )
    preset = made_for
    jobs = jobs or (int(reproduction["jobs"]) if reproduction else None)
    if jobs is None:
        raise ResultsError(
            f"{run_dir} has no reproduce.json (it was not made by `ictrepro reproduce`); "
            "say how many worker processes made it with --jobs"
        )
    scores = collect_scores(run_dir)
    training = {}
    for model, folder in rundir.training_runs().items():
        record = load_record(folder, "train")
        if record is not None and record["status"] == "done":
            training[model.name] = {
                "config_sha256": record["config_sha256"],
                "outputs_sha256": sorted(record["outputs"].items()),
            }
    provenance = {
        "preset": preset,
        "methods": sorted({s["method"] for s in scores}),
        "seeds": sorted({s["seed"] for s in scores if s["seed"] is not None}),
        "benchmarks": sorted({s["benchmark"] for s in scores}),
        "prepare_config_sha256": prepare.get("config_sha256"),
        "training": training,
        "world": world_identity(run_dir),
        "ictrepro_version": __version__,
        "torch_version": torch.__version__,
        "platform": platform.platform(),
        # This process's numerics: pin on the machine, and with the settings, that made the run.
        "numerics": numerics_provenance(),
        "training_jobs": jobs,
        "times_s": dict(reproduction.get("times_s", {})),
        # The analysis plan the run was bound to (its path, sha256 and commit), if any.
        **({"plan": reproduction["plan"]} if reproduction.get("plan") else {}),
        "command": f"ictrepro reproduce --preset {preset} --jobs {jobs}",
    }
    out = Path(results_dir) / preset
    atomic_write_jsonl(out / "scores.jsonl", scores)
    atomic_write_json(out / "provenance.json", provenance)
    report = rundir.report_dir / "report.md"
    if report.is_file():  # the readable form of the same numbers (`ictrepro report`)
        atomic_write_text(out / "report.md", report.read_text(encoding="utf-8"))
    write_manifest(results_dir)
    return out


def write_manifest(results_dir: Path = RESULTS_DIR) -> Path:
    """``MANIFEST.sha256``: ``<sha256>  <relative path>`` of every other file, sorted."""
    root = Path(results_dir)
    lines = [
        f"{sha256_file(p)}  {p.relative_to(root).as_posix()}"
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    ]
    atomic_write_text(root / MANIFEST, "\n".join(lines) + "\n")
    return root / MANIFEST


# ---------------------------------------------------------------------------- checking


def check_results(results_dir: Path = RESULTS_DIR) -> list[str]:
    """Problems found in ``results_dir`` and in the package's paper numbers (empty when
    everything checks out)."""
    root = Path(results_dir)
    if not root.is_dir():
        return [f"{root}: no such folder; run in a checkout or pass --results CHECKOUT/results"]
    problems = _check_manifest(root)
    try:
        load_paper()
    except PaperDataError as e:
        problems.append(str(e))
    for scores in sorted(root.glob("*/scores.jsonl")):
        problems += _check_scores(scores)
        provenance = scores.with_name("provenance.json")
        if not provenance.is_file():
            problems.append(f"{provenance}: missing")
    return problems


def _check_manifest(root: Path) -> list[str]:
    path = root / MANIFEST
    if not path.is_file():
        return [f"{path}: missing; create it with `ictrepro check --pin` or write_manifest()"]
    listed: dict[str, str] = {}
    problems = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        digest, sep, rel = line.partition("  ")
        if not sep or not re.fullmatch(r"[0-9a-f]{64}", digest):
            problems.append(f"{path}:{number}: not '<sha256>  <path>'")
            continue
        listed[rel] = digest
    for rel, digest in listed.items():
        file = root / rel
        if not file.is_file():
            problems.append(f"{file}: listed in the manifest but missing")
        elif sha256_file(file) != digest:
            problems.append(f"{file}: modified (sha256 differs from the manifest)")
    for file in sorted(root.rglob("*")):
        rel = file.relative_to(root).as_posix()
        if file.is_file() and file.name != MANIFEST and rel not in listed:
            problems.append(f"{file}: not in the manifest (an extra file)")
    return problems


def _check_scores(path: Path) -> list[str]:
    problems = []
    text = path.read_text(encoding="utf-8")
    if text and not text.endswith("\n"):
        problems.append(f"{path}: truncated (the last line is incomplete)")
    for number, line in enumerate(text.splitlines(), 1):
        problems += _parse_score_line(line, f"{path}:{number}")[1]
    return problems


def _parse_score_line(line: str, where: str) -> tuple[dict[str, Any], list[str]]:
    """One line of ``scores.jsonl`` and what is wrong with it: JSON, fields and types,
    counts in ``[0, n_samples]``, and each ``pass_at`` equal to the one recomputed from
    the counts."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        return {}, [f"{where}: not valid JSON ({e.msg})"]
    if not isinstance(record, dict):
        return {}, [f"{where}: expected a JSON object"]
    problems = []
    for name, kind in SCORE_FIELDS.items():
        if name not in record:
            problems.append(f"{where}: missing field {name!r}")
        elif not isinstance(record[name], kind):
            problems.append(f"{where}: field {name!r} has the wrong type")
    if problems:
        return record, problems
    n, counts = record["n_samples"], record["n_correct"]
    if any(isinstance(c, bool) or not isinstance(c, int) or not 0 <= c <= n for c in counts):
        return record, [f"{where}: field 'n_correct' must hold integers in [0, n_samples]"]
    for k, value in record["pass_at"].items():
        if not (k.isdigit() and isinstance(value, (int, float)) and 0 <= value <= 1):
            problems.append(f"{where}: field 'pass_at' must map k to a value in [0, 1]")
        elif counts and 1 <= int(k) <= n:
            recomputed = mean_pass_at_k([n] * len(counts), counts, int(k))
            if abs(value - recomputed) > PASS_AT_TOLERANCE:
                problems.append(
                    f"{where}: pass_at[{k}] = {value!r}, but the counts give {recomputed!r}"
                )
        else:
            problems.append(f"{where}: pass_at[{k}] has no counts to be computed from")
    return record, problems


# ------------------------------------------------------------------------- re-running


def load_provenance(preset: str, results_dir: Path = RESULTS_DIR) -> dict[str, Any]:
    """The pinned results' ``provenance.json`` of ``preset``; a clear error when there are
    no pinned results (or they lack their scores) and how to make them."""
    pinned_dir = Path(results_dir) / preset
    for name in ("scores.jsonl", "provenance.json"):
        if not (pinned_dir / name).is_file():
            raise ResultsError(
                f"no pinned results of preset {preset!r} ({pinned_dir / name} is missing); run "
                f"`ictrepro reproduce --preset {preset}` and pin it with `ictrepro check --pin "
                f"RUN --preset {preset}`"
            )
    path = pinned_dir / "provenance.json"
    try:
        provenance = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ResultsError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(provenance, dict):
        raise ResultsError(f"{path}: expected a JSON object")
    return provenance


#: The files of a saved model that record the version of the library that wrote them. The
#: version string is not part of what decides the model's numbers, so the world's identity
#: hashes these files without it and reports a version difference as information.
VERSIONED_CONFIGS = ("config.json", "generation_config.json")
VERSION_KEY = "transformers_version"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt")
#: The world's hashes that decide its numbers, in the order a difference is named.
DECIDING = (
    "prepare_config_sha256",
    "data_sha256",
    "base_weights_sha256",
    "base_tokenizer_sha256",
    "base_config_sha256",
)


def _configs(model_dir: Path, files: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The contents of the versioned config files among ``files`` (relative names)."""
    return {
        name: json.loads((model_dir / name).read_text(encoding="utf-8"))
        for name in VERSIONED_CONFIGS
        if name in files
    }


def model_identity(model_dir: Path, files: dict[str, str]) -> dict[str, str | None]:
    """What decides a saved model's numbers, by hash: ``weights_sha256`` (weight files),
    ``tokenizer_sha256`` (tokenizer files and chat template: every other file),
    ``config_sha256`` (``config.json`` and ``generation_config.json`` without
    ``transformers_version``), and that ``transformers_version`` (information only).

    ``files``: ``{relative path: sha256}`` of the model's files as a stage record holds
    them, so the weights are not read again; only the two small configs are."""
    weights = {k: v for k, v in files.items() if k.endswith(WEIGHT_SUFFIXES)}
    others = {k: v for k, v in files.items() if k not in weights and k not in VERSIONED_CONFIGS}
    configs, version = {}, None
    for name, content in _configs(Path(model_dir), files).items():
        version = content.pop(VERSION_KEY, None) or version
        configs[name] = sha256_json(content)
    return {
        "weights_sha256": sha256_json(weights),
        "tokenizer_sha256": sha256_json(others),
        "config_sha256": sha256_json(configs),
        "transformers_version": version,
    }


def _prepared_files(record: dict[str, Any], folder: str) -> dict[str, str]:
    """``{path relative to folder: sha256}`` of a prepare record's outputs under ``folder``."""
    outputs = record.get("outputs") or {}
    return {k.removeprefix(folder): v for k, v in outputs.items() if k.startswith(folder)}


def world_identity(run_dir: Path) -> dict[str, str | None]:
    """What a run's models grow from, by hash (from its prepare record): the prepare
    config, the data files and the base model (:func:`model_identity`: weights, tokenizer,
    configs without the library version); ``base_model_sha256`` hashes every file of the
    base model as evaluations hash a model (it equals the base model's
    ``identity.model_sha256``). ``None`` where the run has no finished prepare."""
    record = load_record(run_dir, "prepare") or {}
    base_files = _prepared_files(record, "base_model/")
    data_files = _prepared_files(record, "data/")
    world: dict[str, str | None] = {
        "prepare_config_sha256": record.get("config_sha256"),
        "base_model_sha256": sha256_json(base_files) if base_files else None,
        "data_sha256": sha256_json(data_files) if data_files else None,
    }
    base = RunDir(run_dir).base_model
    identity = model_identity(base, base_files) if base_files else {}
    for key in ("weights_sha256", "tokenizer_sha256", "config_sha256", "transformers_version"):
        world[f"base_{key}"] = identity.get(key)
    return world


def _versioned_base_hash(model_dir: Path, files: dict[str, str], version: str) -> str:
    """``base_model_sha256`` of a model with these file hashes had its configs been written
    by transformers ``version`` (which writes them as ``json.dumps(indent=2,
    sort_keys=True)`` + newline): how a world is matched against results pinned before
    :func:`model_identity` existed."""
    files = dict(files)
    for name, content in _configs(Path(model_dir), files).items():
        if VERSION_KEY in content:
            content[VERSION_KEY] = version
            text = json.dumps(content, indent=2, sort_keys=True) + "\n"
            files[name] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return sha256_json(files)


def world_differences(
    run_dir: Path, pinned: dict[str, Any], pinned_version: str | None
) -> tuple[list[str], list[str]]:
    """How ``run_dir``'s world differs from ``pinned`` (a :func:`pinned_world`):
    ``(mismatches, information)``. Mismatches are the hashes that decide the numbers and
    differ; information names what differs without deciding them (the transformers version
    recorded in the base model's configs). A hash the pinned record lacks is not compared;
    results pinned with only ``base_model_sha256`` are matched by that hash, allowing for
    the configs' version string (``pinned_version``)."""
    here = world_identity(run_dir)
    mismatches = [
        f"{key.removesuffix('_sha256')} {str(here[key])[:12]} here, {str(pinned[key])[:12]} pinned"
        for key in DECIDING
        if pinned.get(key) is not None and here.get(key) != pinned[key]
    ]
    info = []
    theirs = pinned.get("base_transformers_version") or pinned_version
    ours = here.get("base_transformers_version")
    if theirs and ours and theirs != ours:
        info.append(
            f"the base model's configs were written by transformers {ours} here and "
            f"{theirs} for the pinned results (a version string, not a number of the model)"
        )
    legacy = pinned.get("base_weights_sha256") is None and pinned.get("base_model_sha256")
    if legacy and here.get("base_model_sha256") != legacy:
        outputs = (load_record(run_dir, "prepare") or {}).get("outputs") or {}
        files = {
            k.removeprefix("base_model/"): v
            for k, v in outputs.items()
            if k.startswith("base_model/")
        }
        same = (
            theirs is not None
            and _versioned_base_hash(RunDir(run_dir).base_model, files, theirs) == legacy
        )
        if not same:
            mismatches.append(
                f"base_model {str(here['base_model_sha256'])[:12]} here, {legacy[:12]} pinned"
            )
    return mismatches, info


def pinned_world(preset: str, results_dir: Path = RESULTS_DIR) -> dict[str, str | None]:
    """The world the pinned results grew from: ``provenance.json``'s ``world``; for results
    pinned before it was recorded, the base model's hash from its score records' identity."""
    provenance = load_provenance(preset, results_dir)
    world = dict(provenance.get("world") or {})
    world.setdefault("prepare_config_sha256", provenance.get("prepare_config_sha256"))
    if world.get("base_model_sha256") is None:
        hashes = {
            (r.get("identity") or {}).get("model_sha256")
            for r in read_pinned_scores(preset, results_dir)
            if r["model"] == "base"
        }
        world["base_model_sha256"] = hashes.pop() if len(hashes) == 1 else None
    world.setdefault("data_sha256", None)
    return world
