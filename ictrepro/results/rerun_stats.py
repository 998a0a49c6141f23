"""Is a re-run consistent with the pinned run? A test with a known false-alarm rate.

Where a re-run is not bit-identical to the pinned one (another CPU, another library
version), each of its models is another draw of the same experiment: the same problems,
other samples, and a model trained along another floating-point path, which behaves like
another training seed. The test compares, for every (model, benchmark) pair, the re-run's
per-problem fraction correct ``y_i = c_i / n`` with the pinned ``x_i`` (``P`` problems):

- ``diff = mean(y) - mean(x)`` (pass@1 difference, a fraction);
- ``se**2 = sum_i 2 p_i (1 - p_i) / n / P**2 + 2 * tau2``: the binomial variance of the
  paired difference if both sides solved problem ``i`` at the pooled rate
  ``p_i = (x_i + y_i) / 2`` (as a score test does: it stays finite when every problem
  moved by the same amount, where the differences' own variance is 0), plus the
  between-run variance ``tau2`` of a benchmark's mean for each side, estimated from the
  pinned seeds of every method (:func:`between_run_variance`);
- ``z = diff / se``, and the check fails when ``max |z|`` over all pairs exceeds a critical
  value ``c`` found by simulation (:func:`calibrate`): honest re-runs simulated from the
  pinned per-problem rates, with a run effect of variance ``tau2``, exceed it with
  probability ``FALSE_ALARM``. The max over pairs is the correction for the many
  comparisons (it is exact for their dependence, unlike Bonferroni).

Each pair reports ``diff``, the simultaneous interval ``diff +- c * se`` and the adjusted
p-value ``P(max |z| >= |z_obs|)`` under simulated honest re-runs. :func:`power` simulates
re-runs of a regressed build (given per-problem rates) through the same test.

Shapes: a model's counts on a benchmark are ``[P]`` integer arrays, ``0 <= c <= n``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

#: Probability that an honest re-run fails the check (the critical value's quantile).
FALSE_ALARM = 0.005
#: Simulated honest re-runs behind the critical value.
CALIBRATION_RUNS = 4000

Key = tuple[str, str]  # (model, benchmark)


def fractions(counts: Sequence[int], n: int) -> np.ndarray:
    """``[P]`` float64 fraction correct per problem."""
    return np.asarray(counts, dtype=np.float64) / n


def null_variance(x: np.ndarray, y: np.ndarray, n: int) -> float:
    """Variance of ``mean(y - x)`` (``[P]`` fractions each) if both sides drew ``n`` samples
    of each problem at its pooled rate ``p_i = (x_i + y_i) / 2``:
    ``sum_i 2 p_i (1 - p_i) / n / P**2``."""
    if x.shape != y.shape or x.ndim != 1 or x.size < 1:
        raise ValueError(f"need two equal [P] arrays with P >= 1, got {x.shape} and {y.shape}")
    p = (x + y) / 2
    return float(np.sum(2 * p * (1 - p)) / n / x.size**2)


def sampling_variance(counts: np.ndarray, n: int) -> float:
    """Unbiased estimate of the binomial variance of a run's mean fraction correct:
    ``sum_i x_i (1 - x_i) / (n - 1) / P**2`` (``x_i(1-x_i) n/(n-1)`` estimates ``q(1-q)``)."""
    x = fractions(counts, n)
    return float(np.sum(x * (1 - x)) / (n - 1) / x.size**2)


def between_run_variance(runs_by_method: Sequence[Sequence[np.ndarray]], n: int) -> float:
    """``tau2`` of one benchmark: variance of the mean fraction correct between runs of
    the same method that is not sampling noise (method of moments, pooled over methods
    with at least two seeds, floored at 0). ``runs_by_method``: per method, one ``[P]``
    count array per seed."""
    excess, dof = 0.0, 0
    for runs in runs_by_method:
        if len(runs) < 2:
            continue
        means = np.array([fractions(r, n).mean() for r in runs])
        noise = np.mean([sampling_variance(np.asarray(r), n) for r in runs])
        excess += (np.var(means, ddof=1) - noise) * (len(runs) - 1)
        dof += len(runs) - 1
    return max(excess / dof, 0.0) if dof else 0.0


def z_scores(
    pinned: Mapping[Key, np.ndarray],
    rerun: Mapping[Key, np.ndarray],
    n: int,
    tau2: Mapping[str, float],
) -> dict[Key, tuple[float, float, float]]:
    """``{(model, benchmark): (diff, se, z)}`` for the pairs in both (counts ``[P]``).
    ``z`` is 0 when ``diff`` is, and infinite when a non-zero ``diff`` has ``se`` 0."""
    out = {}
    for key in pinned.keys() & rerun.keys():
        x, y = fractions(pinned[key], n), fractions(rerun[key], n)
        diff = float(y.mean() - x.mean())
        se = float(np.sqrt(null_variance(x, y, n) + 2 * tau2.get(key[1], 0.0)))
        z = 0.0 if diff == 0 else (diff / se if se > 0 else float(np.copysign(np.inf, diff)))
        out[key] = (diff, se, z)
    return out


def smoothed_rates(counts: np.ndarray, n: int) -> np.ndarray:
    """``[P]`` per-problem success rates to simulate from: ``(c + m) / (n + 1)`` with ``m``
    the benchmark's mean fraction, kept within ``[0.5, n + 0.5] / (n + 1)``: a problem
    never solved keeps a small rate instead of an impossible 0, one always solved a rate
    below 1."""
    x = fractions(counts, n)
    rates = (np.asarray(counts, dtype=np.float64) + x.mean()) / (n + 1)
    return np.clip(rates, 0.5 / (n + 1), (n + 0.5) / (n + 1))


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return np.log(p) - np.log1p(-p)


def simulate(
    rates: np.ndarray, n: int, tau2: float, runs: int, rng: np.random.Generator
) -> np.ndarray:
    """``[runs, P]`` counts of independent runs: each run shifts every problem's rate by
    one logit-scale effect ``u ~ N(0, s**2)``, ``s`` chosen so the run mean's variance is
    ``tau2`` (delta method: ``s = sqrt(tau2) / mean(q (1 - q))``), then draws
    ``Binomial(n, q)`` per problem."""
    spread = float(np.mean(rates * (1 - rates)))
    s = np.sqrt(tau2) / spread if spread > 0 else 0.0
    u = rng.normal(0.0, s, size=(runs, 1))
    q = 1 / (1 + np.exp(-(_logit(rates)[None, :] + u)))
    return rng.binomial(n, q)


def _max_abs_z(
    rates: Mapping[Key, np.ndarray],
    rerun_rates: Mapping[Key, np.ndarray],
    n: int,
    tau2: Mapping[str, float],
    runs: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """``[runs]`` ``max |z|`` over pairs: pinned side simulated from ``rates``, re-run side
    from ``rerun_rates`` (equal to ``rates`` for an honest re-run)."""
    worst = np.zeros(runs)
    for key, q in rates.items():
        t = tau2.get(key[1], 0.0)
        x = simulate(q, n, t, runs, rng) / n
        y = simulate(rerun_rates[key], n, t, runs, rng) / n
        diff = y.mean(axis=1) - x.mean(axis=1)
        p = (x + y) / 2
        var = np.sum(2 * p * (1 - p), axis=1) / n / q.size**2 + 2 * t
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(diff == 0, 0.0, np.abs(diff) / np.sqrt(var))
        worst = np.maximum(worst, np.nan_to_num(z, posinf=np.inf))
    return worst


def calibrate(
    rates: Mapping[Key, np.ndarray],
    n: int,
    tau2: Mapping[str, float],
    *,
    runs: int = CALIBRATION_RUNS,
    seed: int = 0,
) -> np.ndarray:
    """Sorted ``[runs]`` null distribution of ``max |z|`` (honest re-runs)."""
    rng = np.random.default_rng(seed)
    return np.sort(_max_abs_z(rates, rates, n, tau2, runs, rng))


def critical_value(null: np.ndarray, false_alarm: float = FALSE_ALARM) -> float:
    """The ``1 - false_alarm`` quantile of the simulated ``max |z|``."""
    return float(np.quantile(null, 1 - false_alarm, method="higher"))


def pass_rate(
    rates: Mapping[Key, np.ndarray],
    rerun_rates: Mapping[Key, np.ndarray],
    n: int,
    tau2: Mapping[str, float],
    critical: float,
    *,
    runs: int = 2000,
    seed: int = 1,
) -> float:
    """Fraction of simulated re-runs (from ``rerun_rates``) that pass at ``critical``:
    the honest pass rate when ``rerun_rates is rates``, ``1 - power`` otherwise."""
    rng = np.random.default_rng(seed)
    return float(np.mean(_max_abs_z(rates, rerun_rates, n, tau2, runs, rng) <= critical))


def power(
    rates: Mapping[Key, np.ndarray],
    regressed: Mapping[Key, np.ndarray],
    n: int,
    tau2: Mapping[str, float],
    critical: float,
    *,
    runs: int = 2000,
    seed: int = 2,
) -> float:
    """Probability that a build whose re-run draws from ``regressed`` rates fails."""
    return 1 - pass_rate(rates, regressed, n, tau2, critical, runs=runs, seed=seed)


@dataclass(frozen=True)
class PairResult:
    """One (model, benchmark) of a statistical re-run check (fractions, not percent)."""

    model: str
    benchmark: str
    pinned: float
    rerun: float
    diff: float
    low: float
    high: float
    p_adjusted: float
    passed: bool


@dataclass(frozen=True)
class RerunTest:
    """A statistical re-run check: every pair, and the test's own calibration."""

    pairs: tuple[PairResult, ...]
    critical: float
    false_alarm: float
    tau2: dict[str, float]

    @property
    def passed(self) -> bool:
        return all(p.passed for p in self.pairs)


def rerun_test(
    pinned: Mapping[Key, np.ndarray],
    rerun: Mapping[Key, np.ndarray],
    n: int,
    tau2: Mapping[str, float],
    *,
    false_alarm: float = FALSE_ALARM,
    runs: int = CALIBRATION_RUNS,
) -> RerunTest:
    """Test the pairs of ``rerun`` against ``pinned`` (counts ``[P]`` per pair), calibrated
    by simulation from the pinned counts (module docstring)."""
    missing = rerun.keys() - pinned.keys()
    if missing:
        raise ValueError(f"pairs not in the pinned results: {sorted(missing)}")
    rates = {k: smoothed_rates(np.asarray(pinned[k]), n) for k in rerun}
    null = calibrate(rates, n, tau2, runs=runs)
    critical = critical_value(null, false_alarm)
    pairs = []
    for key, (diff, se, z) in sorted(z_scores(pinned, rerun, n, tau2).items()):
        x = fractions(pinned[key], n).mean()
        p_adjusted = float(np.mean(null >= abs(z)))
        pairs.append(
            PairResult(
                model=key[0],
                benchmark=key[1],
                pinned=float(x),
                rerun=float(x + diff),
                diff=diff,
                low=diff - critical * se,
                high=diff + critical * se,
                p_adjusted=p_adjusted,
                passed=abs(z) <= critical,
            )
        )
    return RerunTest(tuple(pairs), critical, false_alarm, dict(tau2))
