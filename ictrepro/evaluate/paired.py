"""Paired differences of two models' average score, with a 95% interval over seeds and problems.

Two models scored on the same problems (and, for two trained methods, the same training and
evaluation seeds) are compared problem by problem: ``d_b[s, j]`` is model A's score on
problem ``j`` of benchmark ``b`` with seed ``s`` minus model B's (the base model, one row,
is subtracted from every seed's row). The reported difference is the average over
benchmarks of the mean over seeds and problems, the quantity the report's averages use::

    D = mean_s sum_j w_j d[s, j],   w_j = 1 / (K * J_b) for a problem of benchmark b

Its variance has three sources: the seed (a trained model; shared by all problems), the
problem (shared by all seeds) and their interaction (sampling noise included). With
``S`` seeds and the variance components estimated from the crossed design,

    Var(D) = V_seed + V_prob - V_res
    V_seed = var_s(D_s) / S                       (D_s: seed s's weighted mean)
    V_prob = sum_b var_j(mean_s d_b[s, j]) / (K^2 J_b)
    V_res  = sum_j w_j^2 * MS_res / S             (counted in both terms above)

and the interval is ``D ± t * sqrt(Var(D))`` with Satterthwaite's degrees of freedom. A
plain bootstrap over 3 seeds cannot see the seed spread (it resamples 3 values and
ignores that their mean is itself uncertain by a t(2) margin), so it covers too rarely
when seeds differ; the t interval widens to match (``tests/test_paired.py`` simulates it).
With one seed the seed spread cannot be estimated and is left out (``seed_spread_known``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
#: The probability with which a difference of ``PairedDifference.detectable`` is resolved.
POWER = 0.8


@dataclass(frozen=True)
class PairedDifference:
    """A minus B, as fractions (the report shows points).

    Attributes:
        mean: the difference D of the averages.
        ci_low, ci_high: the ``confidence`` interval of D.
        se: its standard error; ``df`` the degrees of freedom of the t quantile.
        resolved: the interval excludes 0.
        half_width: the interval's half-width (a true difference of this size is resolved
            only about half the time).
        detectable: the smallest true |difference| this design resolves with probability
            ``POWER`` (80%): ``(t_{1-alpha/2} + t_{power}) * se`` at the same degrees of
            freedom (:func:`detectable_difference`).
        n_seeds: seeds paired; ``seed_spread_known``: False with one seed.
    """

    mean: float
    ci_low: float
    ci_high: float
    se: float
    df: float
    confidence: float
    n_seeds: int
    seed_spread_known: bool

    @property
    def resolved(self) -> bool:
        return self.ci_low > 0 or self.ci_high < 0

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2

    @property
    def detectable(self) -> float:
        return detectable_difference(self.se, self.df, confidence=self.confidence)


def _quantile(p: float, df: float) -> float:
    return float(stats.t.ppf(p, df)) if np.isfinite(df) else float(stats.norm.ppf(p))


def detectable_difference(
    se: float, df: float, *, confidence: float = CONFIDENCE, power: float = POWER
) -> float:
    """The smallest true difference that a two-sided ``confidence`` interval with standard
    error ``se`` and ``df`` degrees of freedom excludes from 0 with probability ``power``:
    ``(t_{(1+confidence)/2, df} + t_{power, df}) * se`` (the usual minimum detectable
    effect; a normal quantile for infinite ``df``)."""
    if se < 0:
        raise ValueError(f"se must be >= 0, got {se!r}")
    if not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1), got {power!r}")
    return (_quantile(0.5 + confidence / 2, df) + _quantile(power, df)) * se


def paired_difference(
    a: Sequence[np.ndarray], b: Sequence[np.ndarray], *, confidence: float = CONFIDENCE
) -> PairedDifference:
    """The paired difference of A's and B's average over benchmarks.

    Args:
        a: per benchmark, float ``[S, J_b]``: A's score per seed (rows) and problem.
        b: per benchmark, ``[S, J_b]`` (the same seeds, in the same order) or ``[1, J_b]``
            (one model, e.g. the base model, paired with every seed of A). Columns must be
            the same problems in the same order as ``a``'s.
    """
    if len(a) != len(b) or not a:
        raise ValueError(f"need the same non-zero number of benchmarks, got {len(a)} and {len(b)}")
    diffs = []
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
        if (
            x.ndim != 2
            or y.ndim != 2
            or x.shape[1] != y.shape[1]
            or y.shape[0] not in (1, x.shape[0])
        ):
            raise ValueError(f"benchmark {i}: shapes {x.shape} and {y.shape} do not pair")
        if x.shape[1] < 2:
            raise ValueError(f"benchmark {i}: need at least 2 problems, got {x.shape[1]}")
        diffs.append(x - y)
    S = diffs[0].shape[0]
    if any(d.shape[0] != S for d in diffs):
        raise ValueError("every benchmark needs the same seeds")
    return _interval(diffs, confidence)


def _interval(diffs: list[np.ndarray], confidence: float) -> PairedDifference:
    K, S = len(diffs), diffs[0].shape[0]
    seed_means = np.zeros(S)  # D_s
    v_prob = 0.0
    ss_res, df_res, sum_w2 = 0.0, 0, 0.0
    df_prob = 0
    for d in diffs:
        J = d.shape[1]
        seed_means += d.mean(axis=1) / K
        problem_means = d.mean(axis=0)
        v_prob += problem_means.var(ddof=1) / (K * K * J)
        df_prob += J - 1
        residual = d - d.mean(axis=1, keepdims=True) - problem_means + d.mean()
        ss_res += float((residual**2).sum())
        df_res += (S - 1) * (J - 1)
        sum_w2 += J / (K * J) ** 2
    mean = float(seed_means.mean())
    if S == 1:
        var, df, known = v_prob, float(df_prob), False
    else:
        v_seed = seed_means.var(ddof=1) / S
        v_res = sum_w2 * (ss_res / df_res) / S if df_res else 0.0
        # Each term's expectation is at most Var(D) (a variance component is >= 0).
        var = max(v_seed + v_prob - v_res, v_seed, v_prob)
        terms = v_seed**2 / (S - 1) + v_prob**2 / df_prob + (v_res**2 / df_res if df_res else 0.0)
        df, known = (var**2 / terms if terms > 0 else float("inf")), True
    se = float(np.sqrt(var))
    t = _quantile(0.5 + confidence / 2, df)
    return PairedDifference(mean, mean - t * se, mean + t * se, se, float(df), confidence, S, known)
