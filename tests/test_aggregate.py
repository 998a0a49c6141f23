"""Aggregation over seeds: hand-computed cases, a float64 loop reference (also on random
shapes, with hypothesis), bootstrap coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ictrepro.evaluate.aggregate import aggregate_seeds


def test_hand_computed_mean_and_std():
    # Seed scores 0.5 and 0.25 -> mean 0.375, std (ddof 1) = sqrt(2) * 0.125.
    agg = aggregate_seeds([[1.0, 0.0], [0.5, 0.0]])
    assert agg.per_seed == (0.5, 0.25)
    assert agg.mean == 0.375
    assert agg.std == pytest.approx(math.sqrt(2) * 0.125)
    assert agg.n_seeds == 2
    assert 0.0 <= agg.ci_low <= agg.mean <= agg.ci_high <= 1.0


def test_one_seed_has_zero_std_and_a_problem_bootstrap():
    agg = aggregate_seeds([[0.0, 1.0, 1.0, 0.0]])
    assert agg.std == 0.0 and agg.mean == 0.5
    assert agg.ci_low < 0.5 < agg.ci_high


def test_constant_scores_give_a_point_interval():
    agg = aggregate_seeds(np.full((3, 7), 0.25))
    assert (agg.ci_low, agg.mean, agg.ci_high) == (0.25, 0.25, 0.25)


def test_against_a_float64_loop_reference():
    rng = np.random.default_rng(1)
    for shape in ((1, 5), (3, 10), (5, 64)):
        scores = rng.random(shape)
        agg = aggregate_seeds(scores, n_boot=300, seed=7)
        ref_seed = [sum(row) / len(row) for row in scores.tolist()]
        assert agg.mean == pytest.approx(sum(ref_seed) / len(ref_seed), abs=1e-12)
        if shape[0] > 1:
            m = sum(ref_seed) / len(ref_seed)
            var = sum((x - m) ** 2 for x in ref_seed) / (len(ref_seed) - 1)
            assert agg.std == pytest.approx(math.sqrt(var), abs=1e-12)
        # Replicates by explicit loops over the same draws.
        draw = np.random.default_rng(7)
        seeds = draw.integers(0, shape[0], size=(300, shape[0]))
        problems = draw.integers(0, shape[1], size=(300, shape[1]))
        reps = [
            sum(scores[s, p] for s in seeds[b] for p in problems[b]) / (shape[0] * shape[1])
            for b in range(300)
        ]
        low, high = np.quantile(reps, [0.025, 0.975])
        assert (agg.ci_low, agg.ci_high) == pytest.approx((low, high), abs=1e-12)


@st.composite
def score_matrices(draw) -> np.ndarray:
    """A ``[seeds, problems]`` matrix of scores in [0, 1], 1-6 seeds by 1-30 problems."""
    n_seeds, n_problems = draw(st.integers(1, 6)), draw(st.integers(1, 30))
    unit = st.floats(0, 1, allow_nan=False)
    values = draw(st.lists(unit, min_size=n_seeds * n_problems, max_size=n_seeds * n_problems))
    return np.asarray(values, dtype=np.float64).reshape(n_seeds, n_problems)


@settings(max_examples=100, deadline=None)
@given(score_matrices(), st.integers(0, 2**32 - 1))
def test_property_mean_and_std_equal_a_naive_loop(scores, seed):
    agg = aggregate_seeds(scores, n_boot=50, seed=seed)
    per_seed = [math.fsum(row) / len(row) for row in scores.tolist()]
    mean = math.fsum(per_seed) / len(per_seed)
    assert agg.per_seed == pytest.approx(per_seed, abs=1e-12)
    assert agg.mean == pytest.approx(mean, abs=1e-12)
    if len(per_seed) > 1:
        var = math.fsum((x - mean) ** 2 for x in per_seed) / (len(per_seed) - 1)
        assert agg.std == pytest.approx(math.sqrt(var), abs=1e-12)
    else:
        assert agg.std == 0.0
    # Each replicate is a mean of the matrix's cells, so the interval lies within their range.
    assert scores.min() - 1e-12 <= agg.ci_low <= agg.ci_high <= scores.max() + 1e-12


def test_interval_covers_the_true_mean_about_as_often_as_claimed():
    rng = np.random.default_rng(0)
    true_p, covered, trials = 0.3, 0, 200
    for t in range(trials):
        scores = (rng.random((1, 80)) < true_p).astype(float)
        agg = aggregate_seeds(scores, n_boot=400, seed=t)
        covered += agg.ci_low <= true_p <= agg.ci_high
    assert 0.88 <= covered / trials <= 0.99  # nominal 0.95; percentile bootstrap, n = 80


def test_deterministic_given_the_seed():
    scores = np.random.default_rng(3).random((3, 20))
    assert aggregate_seeds(scores, seed=1) == aggregate_seeds(scores, seed=1)


@pytest.mark.parametrize(
    ("scores", "kwargs", "message"),
    [
        ([], {}, "non-empty"),
        ([[0.5, float("nan")]], {}, "NaN"),
        ([[0.5]], {"confidence": 1.0}, "confidence"),
        ([[0.5]], {"n_boot": 0}, "n_boot"),
    ],
)
def test_bad_input(scores, kwargs, message):
    with pytest.raises(ValueError, match=message):
        aggregate_seeds(scores, **kwargs)
