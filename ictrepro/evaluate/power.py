"""Design power of a paired comparison: variance components from a run, and the smallest
difference a design (seeds, problems, samples per problem) resolves with 80% power.

The report's paired difference of two methods' average score (``paired.py``) is modelled as

    d[b, s, j] = D + a_s + b_j + e_sj

over benchmarks ``b`` (``K`` of them, ``J`` problems each), training seeds ``s`` (``S``)
and problems ``j``: ``a`` the seed effect on the average (variance ``seed``), ``b`` the
problem effect (``problem``), ``e`` the rest (``residual``), which includes the sampling
noise of each model's pass@k estimate from ``n`` samples. The average over the design has

    Var(D_hat) = seed / S + problem / (K J) + residual / (K J S)

:func:`components` estimates the three from a run's per-problem scores (method of moments
on the crossed seeds x problems table) and splits the residual into the sampling noise the
run's ``n`` implies (:func:`passk_sampling_variance` at each problem's observed rate, both
models) and the rest. :func:`detectable` projects the 80%-power difference to another
design: more seeds shrink the seed term, more problems the problem term, more samples only
the sampling part of the residual. ``bench/power.py`` prints it for a run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats

from ictrepro.evaluate.paired import CONFIDENCE, POWER, detectable_difference
from ictrepro.evaluate.passk import pass_at_k

#: The most training seeds :func:`seeds_to_resolve` considers.
MAX_SEEDS = 64
#: A number of seeds that stands for "unlimited" (every 1/S term is then negligible).
_UNLIMITED = 10**9


@lru_cache(maxsize=4096)
def _estimates(n: int, k: int) -> np.ndarray:
    return np.asarray([pass_at_k(n, c, k) for c in range(n + 1)])


def passk_sampling_variance(p: float, n: int, k: int) -> float:
    """Variance of the unbiased pass@k estimate from ``n`` samples of a problem solved with
    probability ``p``: ``sum_c Binom(c; n, p) est(c)^2 - (1 - (1 - p)^k)^2``."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p!r}")
    est = _estimates(n, k)
    weights = stats.binom.pmf(np.arange(n + 1), n, p)
    mean = 1.0 - (1.0 - p) ** k
    return max(0.0, float(weights @ est**2) - mean**2)


@dataclass(frozen=True)
class Components:
    """Per-unit variance components of a paired difference (fractions squared).

    ``residual`` = ``interaction`` + ``sampling`` (at the run's ``n``); ``K`` benchmarks of
    ``J`` problems (the mean count), ``S`` seeds, ``n`` samples and ``k``: the run's design.
    ``rates``: the observed success rates c / n of the models whose sampling noise varies
    from seed to seed (both trained methods, or only A against the one base model)."""

    seed: float
    problem: float
    residual: float
    sampling: float
    K: int
    J: float
    S: int
    n: int
    k: int
    models: int
    rates: np.ndarray

    @property
    def interaction(self) -> float:
        return max(0.0, self.residual - self.sampling)

    def sampling_at(self, n: int) -> float:
        """The sampling part of the residual with ``n`` samples per problem."""
        if n == self.n:
            return self.sampling
        if self.rates.size == 0:
            raise ValueError(
                f"these components were estimated without success rates, so the residual "
                f"cannot be projected from n = {self.n} to n = {n} samples"
            )
        return self.models * _mean_sampling(self.rates, n, self.k)


def _mean_sampling(rates: np.ndarray, n: int, k: int) -> float:
    values = [passk_sampling_variance(float(p), n, k) for p in np.ravel(rates)]
    return float(np.mean(values)) if values else 0.0


def components(
    a: Sequence[np.ndarray],
    b: Sequence[np.ndarray],
    rates_a: Sequence[np.ndarray] | None,
    rates_b: Sequence[np.ndarray] | None,
    *,
    n: int,
    k: int,
) -> Components:
    """Variance components of ``a - b`` (per benchmark ``[S, J_b]`` pass@k scores; ``b``
    may be one row against ``S >= 2``, as the base model is) and the sampling variance
    their ``n`` samples imply (``rates_*``: per benchmark, success rates c / n of the same
    shapes). Without rates (None) the residual is not split: such components project
    to other seeds and problems, but only at the run's own ``n``."""
    diffs = [
        np.asarray(x, np.float64) - np.asarray(y, np.float64) for x, y in zip(a, b, strict=True)
    ]
    K, S = len(diffs), diffs[0].shape[0]
    J = float(np.mean([d.shape[1] for d in diffs]))
    ss_res, df_res, problem_var = 0.0, 0, []
    for d in diffs:
        residual = d - d.mean(axis=1, keepdims=True) - d.mean(axis=0) + d.mean()
        ss_res += float((residual**2).sum())
        df_res += (S - 1) * (d.shape[1] - 1)
        problem_var.append(d.mean(axis=0).var(ddof=1))
    residual = ss_res / df_res if df_res else 0.0
    # E[var_j(mean_s d)] = problem + residual / S; E[var_s(D_s)] = seed + residual / (K J).
    problem = max(0.0, float(np.mean(problem_var)) - residual / S)
    seed_means = np.mean([d.mean(axis=1) for d in diffs], axis=0)
    seed = max(0.0, float(seed_means.var(ddof=1)) - residual / (K * J)) if S > 1 else 0.0
    # One model against every seed (the base): its sampling noise is the same for every
    # seed, so it is part of the problem term, and only A's varies in the residual.
    one_model = S > 1 and all(np.shape(y)[0] == 1 for y in b)
    models = 1 if one_model else 2
    if rates_a is None or rates_b is None:
        return Components(seed, problem, residual, 0.0, K, J, S, n, k, models, np.empty(0))
    varying = [*rates_a] if one_model else [*rates_a, *rates_b]
    rates = np.concatenate([np.ravel(r) for r in varying])
    sampling = models * _mean_sampling(rates, n, k)
    return Components(seed, problem, residual, sampling, K, J, S, n, k, models, rates)


def variance_of_mean(c: Components, *, S: int, J: float, n: int) -> tuple[float, float]:
    """``(Var(D_hat), Satterthwaite df)`` of a design with ``S`` seeds, ``J`` problems per
    benchmark (``c.K`` benchmarks) and ``n`` samples per problem.

    The degrees of freedom are those the paired interval (``paired.py``) will have: it
    estimates the variance from the seed, problem and residual mean squares, whose
    expectations at this design are projected here. The seed mean square carries the
    residual too, so with few seeds it decides the df even when the seed component is
    small (summing the components' own df instead would overstate the power).
    """
    residual = c.interaction + c.sampling_at(n)
    v_seed = (c.seed + residual / (c.K * J)) / S
    v_prob = (c.problem + residual / S) / (c.K * J)
    v_res = residual / (c.K * J * S)
    var = c.seed / S + c.problem / (c.K * J) + v_res  # = v_seed + v_prob - v_res
    if S < 2:  # no seed spread to estimate: the problem term alone, as paired.py does
        return v_prob, c.K * (J - 1)
    terms = [(v_seed, S - 1), (v_prob, c.K * (J - 1)), (v_res, c.K * (J - 1) * (S - 1))]
    denom = sum(v**2 / df for v, df in terms if df > 0 and v > 0)
    return var, (var**2 / denom if denom > 0 else math.inf)


def detectable(
    c: Components,
    *,
    S: int,
    J: float,
    n: int,
    confidence: float = CONFIDENCE,
    power: float = POWER,
) -> float:
    """The smallest true difference a design resolves with ``power`` (fraction)."""
    var, df = variance_of_mean(c, S=S, J=J, n=n)
    return detectable_difference(math.sqrt(var), df, confidence=confidence, power=power)


def detectable_unlimited_seeds(c: Components, *, confidence: float = CONFIDENCE) -> float:
    """The difference the design of ``c`` (its problems and samples) resolves with 80%
    power as the number of seeds grows without bound: the seed and residual terms vanish
    and the problem term, which only more problems divide, is left."""
    return detectable(c, S=_UNLIMITED, J=c.J, n=c.n, confidence=confidence)


def seeds_to_resolve(
    c: Components, target: float, *, max_seeds: int = MAX_SEEDS, confidence: float = CONFIDENCE
) -> int | None:
    """The fewest training seeds with which the design of ``c`` (its benchmarks, problems
    and samples per problem) resolves a true difference of ``target`` (a fraction) with 80%
    power at the two-sided ``confidence``; None when more than ``max_seeds`` would be needed.

    Needs components estimated from at least 2 seeds: with one the seed variance, which
    more seeds divide, is unknown (a ``ValueError``).
    """
    if c.S < 2:
        raise ValueError(f"the seed variance needs at least 2 seeds, these components have {c.S}")
    if target <= 0:
        raise ValueError(f"target must be > 0, got {target!r}")
    if detectable_unlimited_seeds(c, confidence=confidence) > target:
        return None
    # The detectable difference falls with S: fewer variance and more degrees of freedom.
    for S in range(2, max_seeds + 1):
        if detectable(c, S=S, J=c.J, n=c.n, confidence=confidence) <= target:
            return S
    return None
