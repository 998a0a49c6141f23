"""Design power: the sampling variance of pass@k, variance components recovered from
simulated designs, and the projected 80%-power difference against the paired interval's."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ictrepro.evaluate.paired import paired_difference
from ictrepro.evaluate.passk import pass_at_k
from ictrepro.evaluate.power import (
    MAX_SEEDS,
    Components,
    components,
    detectable,
    detectable_unlimited_seeds,
    passk_sampling_variance,
    seeds_to_resolve,
    variance_of_mean,
)


def test_sampling_variance_of_pass_at_k_by_hand_and_by_simulation():
    # n = k: the estimate is 1[c > 0], a Bernoulli(q) with q = 1 - (1 - p)^k.
    q = 1 - 0.5**4
    assert passk_sampling_variance(0.5, 4, 4) == pytest.approx(q * (1 - q))
    assert passk_sampling_variance(0.0, 16, 4) == 0.0
    assert passk_sampling_variance(1.0, 16, 4) == 0.0
    rng = np.random.default_rng(0)
    c = rng.binomial(16, 0.3, size=200_000)
    est = np.asarray([pass_at_k(16, x, 4) for x in range(17)])[c]
    assert passk_sampling_variance(0.3, 16, 4) == pytest.approx(est.var(), rel=0.02)
    # More samples, less noise.
    assert passk_sampling_variance(0.3, 64, 4) < passk_sampling_variance(0.3, 16, 4)
    with pytest.raises(ValueError, match="p must be"):
        passk_sampling_variance(1.5, 4, 1)


def _design(rng, S, K, J, seed_sd, problem_sd, res_sd, shift=0.0):
    seed = rng.normal(0, seed_sd, size=(S, 1))
    a = [
        shift + seed + rng.normal(0, problem_sd, (1, J)) + rng.normal(0, res_sd, (S, J))
        for _ in range(K)
    ]
    return a, [np.zeros((S, J))] * K


def test_components_are_recovered_from_a_simulated_design():
    rng = np.random.default_rng(1)
    seeds, problems, residuals = [], [], []
    for _ in range(120):
        a, b = _design(rng, S=5, K=3, J=100, seed_sd=0.05, problem_sd=0.1, res_sd=0.2)
        c = components(a, b, [np.zeros((5, 100))] * 3, [np.zeros((5, 100))] * 3, n=4, k=4)
        seeds.append(c.seed)
        problems.append(c.problem)
        residuals.append(c.residual)
    # Method-of-moments estimates (clamped at 0) average to the true components.
    assert np.mean(seeds) == pytest.approx(0.05**2, rel=0.2)
    assert np.mean(problems) == pytest.approx(0.1**2, rel=0.1)
    assert np.mean(residuals) == pytest.approx(0.2**2, rel=0.02)


def test_the_projected_power_matches_the_paired_interval_and_its_simulated_power():
    """At the run's own design the projection equals the paired interval's 80% figure
    (up to estimation noise), and a planted difference of that size is resolved about 80%
    of the time; more seeds or problems shrink it."""
    rng = np.random.default_rng(2)
    a, b = _design(rng, S=5, K=3, J=80, seed_sd=0.03, problem_sd=0.1, res_sd=0.25)
    c = components(a, b, [np.zeros((5, 80))] * 3, [np.zeros((5, 80))] * 3, n=4, k=4)
    own = detectable(c, S=5, J=80, n=4)
    assert own == pytest.approx(paired_difference(a, b).detectable, rel=0.15)
    assert detectable(c, S=10, J=80, n=4) < own and detectable(c, S=5, J=160, n=4) < own
    resolved = sum(
        paired_difference(*_design(rng, 5, 3, 80, 0.03, 0.1, 0.25, shift=own)).resolved
        for _ in range(300)
    )
    assert 0.7 <= resolved / 300 <= 0.9


@pytest.mark.parametrize("S", [3, 5, 8])
def test_at_the_runs_own_design_the_projection_has_the_paired_intervals_df(S):
    """Not only the standard error: the degrees of freedom too, which with few seeds come
    from the seed mean square (it carries the residual), however small the seed component."""
    rng = np.random.default_rng(S)
    a, b = _design(rng, S=S, K=3, J=48, seed_sd=0.04, problem_sd=0.15, res_sd=0.3)
    zeros = [np.zeros((S, 48))] * 3
    c = components(a, b, zeros, zeros, n=16, k=4)
    assert c.seed > 0 and c.problem > 0  # no component clamped at 0
    var, df = variance_of_mean(c, S=S, J=48, n=16)
    paired = paired_difference(a, b)
    assert math.sqrt(var) == pytest.approx(paired.se, rel=1e-9)
    assert df == pytest.approx(paired.df, rel=1e-9)
    assert detectable(c, S=S, J=48, n=16) == pytest.approx(paired.detectable, rel=1e-9)


def test_more_samples_shrink_only_the_sampling_part():
    rng = np.random.default_rng(3)
    S, J = 4, 60
    rates = [rng.uniform(0.1, 0.6, (S, J))]
    a = [np.asarray([[pass_at_k(4, round(4 * p), 4) for p in row] for row in rates[0]])]
    b = [np.zeros((S, J))]
    c = components(a, b, rates, [np.zeros((S, J))], n=4, k=4)
    assert c.models == 2 and c.sampling_at(16) < c.sampling_at(4) == c.sampling
    # Both models' rates count (B's are all 0 here: no noise), twice for a difference.
    per_problem = [passk_sampling_variance(float(p), 16, 4) for p in np.ravel(rates)]
    assert c.sampling_at(16) == pytest.approx(2 * np.mean(per_problem + [0.0] * S * J))
    # Against one model (the base, one row) only A's noise varies from seed to seed; B's
    # rates here are 0 (no noise), so the two counts agree.
    one = components(a, [np.zeros((1, J))], rates, [np.zeros((1, J))], n=4, k=4)
    assert one.models == 1 and one.sampling == pytest.approx(c.sampling)
    assert one.sampling_at(16) == pytest.approx(np.mean(per_problem))


def _hand_components(seed: float, problem: float, residual: float, *, S=5, K=3, J=48.0):
    return Components(seed, problem, residual, 0.0, K, J, S, 16, 4, 2, np.empty(0))


def test_seeds_to_resolve_by_hand():
    """Only a seed component: Var(D) = seed / S at S - 1 degrees of freedom, so the
    detectable difference is (t_0.975 + t_0.8; S - 1) * sqrt(seed / S), computed here
    by hand; the answer is the first S where it is at most the target."""
    c = _hand_components(seed=0.01, problem=0.0, residual=0.0)

    def by_hand(S):
        t = stats.t.ppf(0.975, S - 1) + stats.t.ppf(0.8, S - 1)
        return t * math.sqrt(0.01 / S)

    target = 0.0458
    expected = next(S for S in range(2, 200) if by_hand(S) <= target)
    assert by_hand(expected - 1) > target  # the search has a real boundary
    assert seeds_to_resolve(c, target) == expected
    assert detectable(c, S=expected, J=48, n=16) == pytest.approx(by_hand(expected), rel=1e-9)
    # More than MAX_SEEDS: None.
    assert seeds_to_resolve(c, by_hand(MAX_SEEDS + 5)) is None
    assert seeds_to_resolve(c, by_hand(MAX_SEEDS + 5), max_seeds=MAX_SEEDS + 5) == MAX_SEEDS + 5


def test_the_problem_term_is_a_floor_no_number_of_seeds_gets_below():
    """With unlimited seeds only problem / (K J) is left, at K (J - 1) degrees of freedom:
    a target below that floor is never resolved, one above it is."""
    c = _hand_components(seed=0.002, problem=0.05, residual=0.1)
    floor = (stats.t.ppf(0.975, 3 * 47) + stats.t.ppf(0.8, 3 * 47)) * math.sqrt(0.05 / 144)
    assert detectable_unlimited_seeds(c) == pytest.approx(floor, rel=1e-6)
    assert seeds_to_resolve(c, 0.99 * floor) is None
    assert seeds_to_resolve(c, 1.2 * floor) is not None
    assert all(detectable(c, S=S, J=48, n=16) > floor for S in (2, 5, 64))


def test_seeds_to_resolve_needs_a_known_seed_spread_and_a_positive_target():
    with pytest.raises(ValueError, match="at least 2 seeds"):
        seeds_to_resolve(_hand_components(0.01, 0.01, 0.01, S=1), 0.05)
    with pytest.raises(ValueError, match="target must be > 0"):
        seeds_to_resolve(_hand_components(0.01, 0.01, 0.01), 0.0)


def test_components_without_rates_project_seeds_at_the_runs_own_n_only():
    """Without success rates the residual is not split: the same seed, problem and
    residual, the same figure at the run's design as the paired interval's, and no
    projection to another n."""
    rng = np.random.default_rng(4)
    a, b = _design(rng, S=5, K=3, J=48, seed_sd=0.04, problem_sd=0.15, res_sd=0.3)
    zeros = [np.zeros((5, 48))] * 3
    split = components(a, b, zeros, zeros, n=16, k=4)
    whole = components(a, b, None, None, n=16, k=4)
    assert (whole.seed, whole.problem, whole.residual) == (
        split.seed,
        split.problem,
        split.residual,
    )
    assert whole.sampling == 0.0 and whole.interaction == whole.residual
    own = detectable(whole, S=5, J=48, n=16)
    assert own == pytest.approx(paired_difference(a, b).detectable, rel=1e-9)
    assert seeds_to_resolve(whole, own) == 5  # the run's own figure needs its own seeds
    with pytest.raises(ValueError, match="without success rates"):
        whole.sampling_at(4)
