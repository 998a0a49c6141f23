"""Training curves: per method and metric, each seed's values against the step and their
mean over seeds, from the rows of ``metrics.jsonl``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

#: The curves drawn: (file stem, title, [(metrics.jsonl key, line style)]).
CURVES = (
    ("reward", "Reward (mean over responses)", (("reward_mean", "-"),)),
    (
        "probe",
        "Probe-set reward (fixed held-out prompts, fixed sampling seed)",
        (("probe_reward", "o-"),),
    ),
    ("entropy", "Shannon entropy H (response tokens)", (("entropy_mean", "-"),)),
    ("renyi2", "Rényi-2 entropy H2 = -log sum p^2", (("renyi2_mean", "-"),)),
    ("selected-fraction", "Selected fraction of response tokens", (("selected_fraction", "-"),)),
    (
        "js",
        "Group JS u: selected (solid) vs unselected (dashed) tokens",
        (("js_selected_mean", "-"), ("js_unselected_mean", "--")),
    ),
    # The fork world only (ictrepro/train/forks.py); optional like the probe.
    (
        "fork-minority",
        "Share of responses choosing the minority strategy at the fork",
        (("fork_minority_fraction", "-"),),
    ),
    ("fork-selected", "Share of fork tokens the rule selects", (("fork_selected_fraction", "-"),)),
    (
        "fork-js",
        "Group JS u at fork tokens (solid) vs the other tokens (dashed)",
        (("fork_js_mean", "-"), ("nonfork_js_mean", "--")),
    ),
    (
        "fork-entropy",
        "Entropy at fork tokens (solid) vs the other tokens (dashed)",
        (("fork_entropy_mean", "-"), ("nonfork_entropy_mean", "--")),
    ),
)
#: Curves drawn only when a run logged them.
OPTIONAL_CURVES = frozenset({"probe", "fork-minority", "fork-selected", "fork-js", "fork-entropy"})
#: Where selected tokens lie relative to the fork, and where all tokens lie: computed as
#: curves for the offsets plot (plots.py), not drawn as curves.
FORK_OFFSETS = ("before", "at", "near", "later")
OFFSET_KEYS = tuple(f"fork_{kind}_{o}" for kind in ("selected", "tokens") for o in FORK_OFFSETS)


@dataclass(frozen=True)
class Curve:
    """One metric of one method's training runs.

    Attributes:
        per_seed: ``{seed: (steps [N_s], values [N_s])}``, null values as NaN; a seed whose
            values are all null is left out.
        steps: float ``[N]``, every step any seed has.
        mean: float ``[N]``, the mean over the seeds with a value at the step (NaN if none).
    """

    per_seed: dict[int, tuple[np.ndarray, np.ndarray]]
    steps: np.ndarray
    mean: np.ndarray

    def to_json(self) -> dict[str, Any]:
        return {
            "seeds": sorted(self.per_seed),
            "steps": self.steps.tolist(),
            "mean": [None if math.isnan(x) else x for x in self.mean.tolist()],
        }


def training_curves(
    trained: Mapping[str, Mapping[int, list[dict[str, Any]]]],
) -> dict[str, dict[str, Curve]]:
    """``{metrics key: {method: Curve}}`` for every key of :data:`CURVES`; a method (or key)
    without a single non-null value is left out."""
    out: dict[str, dict[str, Curve]] = {}
    for _, _, keys in (*CURVES, ("offsets", "", tuple((k, "") for k in OFFSET_KEYS))):
        for method, rows_by_seed in trained.items():
            for key, _ in keys:
                series = _series(rows_by_seed, key)
                if series:
                    out.setdefault(key, {})[method] = Curve(series, *_mean_over_seeds(series))
    return out


def missing_curve_notes(curves: Mapping[str, Any]) -> list[str]:
    """A note per curve of :data:`CURVES` that has nothing to draw (the probe and fork
    curves are optional: a run with ``rl.probe_problems = 0``, or outside the fork world,
    has none)."""
    return [
        f"no training curve of {', '.join(k for k, _ in keys)}: every value is null "
        "or no training run was found."
        for stem, _, keys in CURVES
        if stem not in OPTIONAL_CURVES and not any(k in curves for k, _ in keys)
    ]


def _series(
    rows_by_seed: Mapping[int, list[dict[str, Any]]], key: str
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    out = {}
    for seed, rows in rows_by_seed.items():
        steps = np.asarray([r.get("step", i + 1) for i, r in enumerate(rows)], dtype=np.float64)
        values = np.asarray([np.nan if r.get(key) is None else r[key] for r in rows], dtype=float)
        if key == "probe_reward":
            # Evaluated every few steps only (the points are joined), and before step 1:
            # that value is the first line's probe_reward_initial, drawn at step 0.
            initial = rows[0].get("probe_reward_initial") if rows else None
            if initial is not None:
                steps, values = np.r_[0.0, steps], np.r_[initial, values]
            keep = np.isfinite(values)
            steps, values = steps[keep], values[keep]
        if np.isfinite(values).any():
            out[seed] = (steps, values)
    return out


def _mean_over_seeds(
    series: Mapping[int, tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray]:
    steps = np.unique(np.concatenate([s for s, _ in series.values()]))
    table = np.full((len(series), len(steps)), np.nan)  # [seeds, steps]
    for i, (s, v) in enumerate(series.values()):
        table[i, np.searchsorted(steps, s)] = v
    counts = np.isfinite(table).sum(axis=0)
    sums = np.where(np.isfinite(table), table, 0.0).sum(axis=0)
    return steps, np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
