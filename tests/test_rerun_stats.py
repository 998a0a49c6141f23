"""The re-run test's statistics: hand-computed cases, float64 references on random inputs,
and its calibration on the pinned tiny results (false alarms and power, simulated)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ictrepro.results import rerun_stats as rs
from ictrepro.stages.check import RERUN_METHODS

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"


def test_null_variance_hand_computed():
    x = np.array([0.0, 0.25, 0.5, 1.0])
    y = np.array([0.25, 0.25, 1.0, 1.0])
    # pooled p = [1/8, 1/4, 3/4, 1]; 2 p (1 - p) = [7/32, 3/8, 3/8, 0], sum 31/32; / n / P**2
    assert rs.null_variance(x, y, 4) == pytest.approx(31 / 32 / 4 / 16, rel=1e-15)
    with pytest.raises(ValueError, match="equal"):
        rs.null_variance(x, y[:2], 4)


@pytest.mark.parametrize("size", [1, 7, 64, 500])
def test_null_variance_matches_a_naive_float64_loop(size):
    rng = np.random.default_rng(size)
    x, y = rng.integers(0, 5, size) / 4, rng.integers(0, 5, size) / 4
    naive = 0.0
    for a, b in zip(x.tolist(), y.tolist(), strict=True):
        p = (a + b) / 2
        naive += 2 * p * (1 - p) / 4
    assert rs.null_variance(x, y, 4) == pytest.approx(naive / size**2, rel=1e-12)


def test_null_variance_is_the_variance_of_the_difference_under_the_null():
    rng = np.random.default_rng(1)
    q = rng.uniform(0.05, 0.95, 16)
    x, y = rng.binomial(4, q, (20000, 16)) / 4, rng.binomial(4, q, (20000, 16)) / 4
    truth = float(np.sum(2 * q * (1 - q)) / 4 / 16**2)
    assert np.var(y.mean(axis=1) - x.mean(axis=1)) == pytest.approx(truth, rel=0.05)
    # The pooled estimate is biased low by the sampling spread of p; small at n = 4.
    estimates = [rs.null_variance(a, b, 4) for a, b in zip(x[:4000], y[:4000], strict=True)]
    assert np.mean(estimates) == pytest.approx(truth, rel=0.2)


def test_sampling_variance_hand_computed_and_unbiased():
    # x = [0, 0.5, 1]: x(1-x) = [0, 0.25, 0]; / (n - 1) = 3; / P**2 = 9
    assert rs.sampling_variance(np.array([0, 2, 4]), 4) == pytest.approx(0.25 / 3 / 9)
    # Unbiased for the variance of a run's mean: E[estimate] = sum q(1-q)/n / P**2.
    rng = np.random.default_rng(0)
    q = rng.uniform(0.05, 0.95, 16)
    draws = rng.binomial(4, q, size=(20000, 16))
    estimates = [rs.sampling_variance(d, 4) for d in draws[:4000]]
    truth = float(np.sum(q * (1 - q)) / 4 / 16**2)
    assert np.mean(estimates) == pytest.approx(truth, rel=0.03)
    assert np.var(draws.mean(axis=1) / 4) == pytest.approx(truth, rel=0.05)


def test_between_run_variance_hand_computed():
    """Two methods of two seeds, P = 2, n = 2. Method a: seed means 0.25 and 0.75 (variance
    0.125), sampling variances 0.25/1/4 = 0.0625 each; method b: means 0.5 and 0.5
    (variance 0), sampling 0.5/4 = 0.125 each. Pooled: ((0.125 - 0.0625) + (0 - 0.125)) / 2
    = -0.03125, floored at 0; method a alone: 0.0625."""
    a = [np.array([1, 0]), np.array([2, 1])]
    b = [np.array([1, 1]), np.array([1, 1])]
    assert rs.between_run_variance([a], 2) == pytest.approx(0.0625)
    assert rs.between_run_variance([a, b], 2) == 0.0
    assert rs.between_run_variance([[a[0]]], 2) == 0.0  # one seed: no estimate


def test_z_scores_hand_computed():
    pinned = {("m", "b"): np.array([4, 0, 2, 2])}
    rerun = {("m", "b"): np.array([2, 0, 2, 0])}
    # x = [1, 0, .5, .5], y = [.5, 0, .5, 0]: diff -0.25; pooled p = [.75, 0, .5, .25],
    # 2 p (1 - p) = [3/8, 0, 1/2, 3/8], sum 5/4, / n / P**2 = 5/256; + 2 * tau2 (0.01)
    [(diff, se, z)] = rs.z_scores(pinned, rerun, 4, {"b": 0.01}).values()
    assert diff == pytest.approx(-0.25)
    assert se == pytest.approx(np.sqrt(5 / 256 + 0.02))
    assert z == pytest.approx(-0.25 / np.sqrt(5 / 256 + 0.02))
    same = rs.z_scores(pinned, pinned, 4, {})
    assert same[("m", "b")] == (0.0, 0.125, 0.0)  # p = [1, 0, .5, .5]: se**2 = 1 / 4 / 16
    # Every problem moved by the same amount: finite (p = 1/2: se**2 = 2 * 2/4 / 4 / 4 = 1/16).
    shifted = rs.z_scores({("m", "b"): np.array([0, 0])}, {("m", "b"): np.array([4, 4])}, 4, {})
    assert shifted[("m", "b")] == pytest.approx((1.0, 0.25, 4.0))


def test_simulated_runs_have_the_intended_spread():
    rng = np.random.default_rng(3)
    rates = rng.uniform(0.1, 0.6, 64)
    binomial = float(np.sum(rates * (1 - rates)) / 4 / 64**2)
    plain = rs.simulate(rates, 4, 0.0, 20000, rng) / 4
    assert plain.mean() == pytest.approx(rates.mean(), abs=0.002)
    assert plain.mean(axis=1).var() == pytest.approx(binomial, rel=0.05)
    tau2 = 0.03**2
    spread = rs.simulate(rates, 4, tau2, 20000, rng) / 4
    assert spread.mean(axis=1).var() == pytest.approx(binomial + tau2, rel=0.1)


def test_smoothed_rates_stay_inside_zero_and_one():
    rates = rs.smoothed_rates(np.array([0, 0, 4, 4]), 4)
    assert np.all((rates > 0) & (rates < 1))
    assert rates[0] == pytest.approx(0.5 / 5) and rates[2] == pytest.approx(4.5 / 5)


def test_identical_counts_pass_with_zero_differences():
    rng = np.random.default_rng(5)
    counts = {("m", f"b{i}"): rng.integers(0, 5, 32) for i in range(3)}
    result = rs.rerun_test(counts, counts, 4, {}, runs=500)
    assert result.passed and all(p.diff == 0 and p.p_adjusted == 1.0 for p in result.pairs)


#: Per pinned reproduction, the least power against a build whose trained models lose half
#: their pass@1. Measured (docs/regression.md): 100% on tiny, 80.9% on tiny-fork, 62.0% on
#: tiny-fork0 and 92.35% on tiny-fork-rare; the fork worlds' seeds spread far more (the
#: run-to-run s.d. of tiny-fork-both is 9.3 points), so a halving of the few-percent pass@1
#: GRPO keeps on the down-only subset hides in it more often.
HALVED_POWER = {"tiny": 0.90, "tiny-fork": 0.75, "tiny-fork0": 0.55, "tiny-fork-rare": 0.85}


def _records(preset):
    from ictrepro.results.pinned import read_pinned_scores

    return read_pinned_scores(preset, RESULTS_DIR)


def _pinned(preset):
    """Counts of a pinned reproduction: ``{(model, benchmark): [P]}``, n, tau2."""
    from ictrepro.results.rerun import between_run_variances

    records = _records(preset)
    counts = {(r["model"], r["benchmark"]): np.asarray(r["n_correct"]) for r in records}
    return counts, records[0]["n_samples"], between_run_variances(records)


@pytest.mark.parametrize("preset", list(HALVED_POWER))
def test_calibrated_on_the_pinned_results_false_alarms_are_rare_and_drops_are_caught(preset):
    """The `check --rerun` subset (base, grpo-seed0, ict-seed0 x the benchmarks): honest
    re-runs simulated from the pinned per-problem rates pass >= 99% of the time (fresh
    draws, not the calibration's); a build whose trained models lose half their pass@1
    (a collapsing policy, e.g. a flipped policy-gradient sign), and one whose training
    learns nothing (trained models score as the base model does), fail >= 90% of the time
    (halved pass@1 on the fork worlds: ``HALVED_POWER``)."""
    counts, n, tau2 = _pinned(preset)
    keys = [k for k in counts if k[0] in ("base", "grpo-seed0", "ict-seed0")]
    rates = {k: rs.smoothed_rates(counts[k], n) for k in keys}
    critical = rs.critical_value(rs.calibrate(rates, n, tau2))
    assert rs.pass_rate(rates, rates, n, tau2, critical, runs=4000, seed=11) >= 0.99
    halved = {k: v * (0.5 if k[0] != "base" else 1.0) for k, v in rates.items()}
    assert rs.power(rates, halved, n, tau2, critical, runs=2000) >= HALVED_POWER[preset]
    nothing = {k: rates[("base", k[1])] for k in rates}
    assert rs.power(rates, nothing, n, tau2, critical, runs=2000) >= 0.90


@pytest.mark.parametrize("preset", list(HALVED_POWER))
def test_other_pinned_seeds_pass_as_reruns_of_seed_0(preset):
    """Real data: the other pinned seeds of each method `check --rerun` re-runs (seed 0 of
    each) are other runs of the same experiment, as a re-run on another machine is;
    checked against seed 0, none fails. (Not every rule's seeds are: in `tiny` the random
    mask's seed 0 learned less than its seeds 1 and 2 and fails against them;
    docs/regression.md.)"""
    counts, n, tau2 = _pinned(preset)
    benchmarks = sorted({b for _, b in counts})
    seeds: dict[str, set[int]] = {}
    for r in _records(preset):
        if r["seed"] is not None and r["method"] in RERUN_METHODS:
            seeds.setdefault(r["method"], set()).add(r["seed"])
    assert set(seeds) == set(RERUN_METHODS)
    assert all(len(trained) > 1 for trained in seeds.values())
    for method, trained in seeds.items():
        pinned = {(method, b): counts[(f"{method}-seed0", b)] for b in benchmarks}
        for seed in sorted(trained - {0}):
            rerun = {(method, b): counts[(f"{method}-seed{seed}", b)] for b in benchmarks}
            assert rs.rerun_test(pinned, rerun, n, tau2, runs=1000).passed, (method, seed)
