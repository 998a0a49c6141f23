"""Judge a re-run (``ictrepro check --rerun``, :mod:`ictrepro.stages.check`) against the
pinned results, bit for bit where that can be expected, statistically otherwise.

Which mode, and why: both sides' numerics (:mod:`ictrepro.determinism`) are printed. When
every re-run count equals the pinned one the check is bit-identical and passes. When the
numerics and the CPU are the same as the pinning run's, any difference is a change of the
build and fails. Otherwise (another CPU type, other library versions, results pinned before
the numerics were recorded) the re-run passes when it is statistically consistent with the
pinned per-problem counts (:mod:`ictrepro.results.rerun_stats`: false-alarm rate
``FALSE_ALARM``, calibrated by simulation).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ictrepro.determinism import differences
from ictrepro.results.pinned import (
    RESULTS_DIR,
    ResultsError,
    collect_scores,
    load_provenance,
    pinned_world,
    read_pinned_scores,
    world_identity,
)
from ictrepro.results.rerun_stats import between_run_variance, rerun_test
from ictrepro.rundir import RunDir, load_record


def between_run_variances(records: list[dict[str, Any]]) -> dict[str, float]:
    """``{benchmark: tau2}`` from the pinned seeds of every method (``rerun_stats``)."""
    runs: dict[str, dict[str, list[Any]]] = {}
    for r in records:
        if r["seed"] is not None:
            runs.setdefault(r["benchmark"], {}).setdefault(r["method"], []).append(
                np.asarray(r["n_correct"])
            )
    n = _one_sample_size(records)
    return {b: between_run_variance(list(m.values()), n) for b, m in runs.items()}


def _one_sample_size(records: list[dict[str, Any]]) -> int:
    sizes = {r["n_samples"] for r in records}
    if len(sizes) != 1:
        raise ResultsError(f"pinned records have different n_samples {sorted(sizes)}; re-pin")
    return sizes.pop()


@dataclass(frozen=True)
class RerunOutcome:
    """What ``check --rerun`` found. ``mode``: ``"bit-identical"`` (every count must
    equal the pinned one) or ``"statistical"`` (:mod:`ictrepro.results.rerun_stats`)."""

    mode: str
    passed: bool
    pinned_numerics: dict[str, Any]
    here_numerics: dict[str, Any]
    numerics_differ: list[str]
    #: Each stage's first divergence from the pinned run: ``{"prepare": "identical", ...}``.
    stages: dict[str, str]
    identical_pairs: int
    total_pairs: int
    problems: list[str]
    test: Any = None  # rerun_stats.RerunTest in statistical mode

    def lines(self) -> list[str]:
        """The outcome as printable lines (provenance of both sides, mode, per pair)."""
        out = ["numerics (pinned | here):"]
        pinned, here = _flat(self.pinned_numerics), _flat(self.here_numerics)
        for key in sorted(set(pinned) | set(here)):
            a, b = pinned.get(key, "(not recorded)"), here.get(key, "(not recorded)")
            out.append(f"  {'  ' if a == b else '!='} {key}: {a} | {b}")
        out.append("stages: " + ", ".join(f"{k} {v}" for k, v in self.stages.items()))
        out.append(
            f"mode: {self.mode} ({self.identical_pairs} of {self.total_pairs} (model, "
            "benchmark) pairs bit-identical to the pinned counts)"
        )
        if self.test is not None:
            t = self.test
            out.append(
                f"statistical test: pass@1 difference per pair, simultaneous "
                f"{100 * (1 - t.false_alarm):.1f}% intervals (critical |z| {t.critical:.2f}, "
                f"calibrated by simulated honest re-runs)"
            )
            for p in t.pairs:
                out.append(
                    f"  {'pass' if p.passed else 'FAIL'} {p.model:<12} {p.benchmark:<15} "
                    f"pinned {100 * p.pinned:5.1f}%  here {100 * p.rerun:5.1f}%  "
                    f"diff {100 * p.diff:+5.1f} pts  [{100 * p.low:+5.1f}, {100 * p.high:+5.1f}]  "
                    f"adjusted p {p.p_adjusted:.3f}"
                )
        return out


def _flat(record: dict[str, Any]) -> dict[str, str]:
    """``{"cpu.model": "AMD EPYC", "threads": "1", ...}``: nested fields one per line."""
    flat = {}
    for key, value in record.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": str(v) for k, v in value.items()})
        else:
            flat[key] = str(value)
    return flat


def judge_rerun(
    preset: str, work_dir: Path, here: dict[str, Any], *, results_dir: Path = RESULTS_DIR
) -> RerunOutcome:
    """Compare the evaluated re-run in ``work_dir``, made with numerics ``here``, with the
    pinned results of ``preset`` (the modes: :func:`ictrepro.stages.check.rerun_check`)."""
    provenance = load_provenance(preset, results_dir)
    records = read_pinned_scores(preset, results_dir)
    pinned = {(r["model"], r["benchmark"]): r for r in records}
    there = provenance.get("numerics") or {}
    differ = differences(there, here)
    same_cpu = there.get("cpu") == here.get("cpu")

    problems, stages = [], _stage_divergence(provenance, preset, work_dir, results_dir)
    new = {(r["model"], r["benchmark"]): r for r in collect_scores(work_dir)}
    for key in sorted(new.keys() - pinned.keys()):
        problems.append(f"{key}: not in the pinned results")
    keys = sorted(new.keys() & pinned.keys())
    identical = sum(new[k]["n_correct"] == pinned[k]["n_correct"] for k in keys)
    if keys and identical == len(keys) and not problems:
        return RerunOutcome(
            "bit-identical", True, there, here, differ, stages, identical, len(keys), []
        )
    if not differ and same_cpu and there:
        for k in keys:
            if new[k]["n_correct"] != pinned[k]["n_correct"]:
                diff = sum(
                    a != b for a, b in zip(new[k]["n_correct"], pinned[k]["n_correct"], strict=True)
                )
                problems.append(
                    f"{k}: {diff} problems' correct counts differ from the pinned run, on the "
                    "same CPU with the same numerics: the build changed the numbers"
                )
        return RerunOutcome(
            "bit-identical", False, there, here, differ, stages, identical, len(keys), problems
        )
    n = _one_sample_size(records)
    test = rerun_test(
        {k: np.asarray(pinned[k]["n_correct"]) for k in keys},
        {k: np.asarray(new[k]["n_correct"]) for k in keys},
        n,
        between_run_variances(records),
    )
    for p in test.pairs:
        if not p.passed:
            problems.append(
                f"({p.model}, {p.benchmark}): pass@1 {100 * p.rerun:.1f}% here against "
                f"{100 * p.pinned:.1f}% pinned, outside the interval an honest re-run stays in "
                f"(adjusted p {p.p_adjusted:.3f})"
            )
    return RerunOutcome(
        "statistical",
        not problems,
        there,
        here,
        differ,
        stages,
        identical,
        len(keys),
        problems,
        test,
    )


def _stage_divergence(
    provenance: dict[str, Any], preset: str, work_dir: Path, results_dir: Path
) -> dict[str, str]:
    """Per stage, whether the re-run's outputs equal the pinned run's by hash: the base
    model (prepare) and each re-run training run's final model."""
    stages = {}
    world = pinned_world(preset, results_dir)
    here = world_identity(work_dir)
    base = world.get("base_model_sha256")
    stages["prepare"] = (
        "not recorded"
        if base is None
        else "identical"
        if here["base_model_sha256"] == base
        else "differs"
    )
    for model, folder in RunDir(work_dir).training_runs().items():
        pinned_run = (provenance.get("training") or {}).get(model.name)
        record = load_record(folder, "train")
        if pinned_run is None or record is None:
            continue
        # The trained model only: metrics.jsonl also holds wall times.
        mine = {k: v for k, v in record["outputs"].items() if k.startswith("final_model/")}
        theirs = {k: v for k, v in pinned_run["outputs_sha256"] if k.startswith("final_model/")}
        same = mine == theirs
        stages[f"train {model.name}"] = "identical" if same else "differs"
    return stages
