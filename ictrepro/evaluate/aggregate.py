"""Aggregate a benchmark score over seeds: mean, standard deviation, bootstrap interval.

Input is a matrix ``scores_SP[s, p]``: the per-problem pass@k of problem ``p`` for the
model trained with seed ``s`` (every seed evaluated on the same problems). The benchmark
score of a seed is its row mean; the reported score is the mean of the seed scores, with
their standard deviation (ddof 1; 0 for one seed).

The confidence interval is a two-level percentile bootstrap: each replicate resamples
seeds with replacement and, independently, problems with replacement (the same problems
for every seed of the replicate, since seeds share the benchmark), and takes the mean of
the resampled cells. It therefore covers both sources of variation, training seeds and
the finite benchmark; with one seed it is a problems-only bootstrap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SeedAggregate:
    """A benchmark score over seeds (fractions in [0, 1])."""

    mean: float
    std: float
    ci_low: float
    ci_high: float
    confidence: float
    per_seed: tuple[float, ...]

    @property
    def n_seeds(self) -> int:
        return len(self.per_seed)

    def to_json(self) -> dict[str, object]:
        return {
            "mean": self.mean,
            "std": self.std,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "confidence": self.confidence,
            "per_seed": list(self.per_seed),
        }


def aggregate_seeds(
    scores_SP: np.ndarray | list[list[float]],
    *,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> SeedAggregate:
    """Mean, std over seeds and bootstrap interval of ``scores_SP`` (``[seeds, problems]``).

    Args:
        scores_SP: per-problem scores, float ``[S, P]`` with S, P >= 1, values in [0, 1].
        confidence: central coverage of the percentile interval, in (0, 1).
        n_boot: bootstrap replicates.
        seed: seed of the bootstrap's random draws (the result is deterministic).
    """
    scores = np.asarray(scores_SP, dtype=np.float64)
    if scores.ndim != 2 or 0 in scores.shape:
        raise ValueError(
            f"scores must be a non-empty [seeds, problems] matrix, got shape {scores.shape}"
        )
    if not np.isfinite(scores).all():
        raise ValueError("scores contain NaN or inf (a benchmark without gradable problems?)")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    S, P = scores.shape
    per_seed = scores.mean(axis=1)
    rng = np.random.default_rng(seed)
    seed_idx = rng.integers(0, S, size=(n_boot, S))
    problem_idx = rng.integers(0, P, size=(n_boot, P))
    # Mean over the resampled (seed, problem) cells: rows of seeds, columns of problems.
    replicates = scores[seed_idx[:, :, None], problem_idx[:, None, :]].mean(axis=(1, 2))
    alpha = (1 - confidence) / 2
    low, high = np.quantile(replicates, [alpha, 1 - alpha])
    return SeedAggregate(
        mean=float(per_seed.mean()),
        std=float(per_seed.std(ddof=1)) if S > 1 else 0.0,
        ci_low=float(low),
        ci_high=float(high),
        confidence=confidence,
        per_seed=tuple(float(x) for x in per_seed),
    )
