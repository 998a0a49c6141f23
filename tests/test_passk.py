"""pass@k against exact rational arithmetic, hand cases, properties and bad input."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ictrepro.evaluate.passk import mean_pass_at_k, pass_at_k

PROPERTY = settings(max_examples=300, deadline=None)
#: Float slack of the product form against exact or neighbouring values.
SLACK = 1e-12


def exact(n: int, c: int, k: int) -> Fraction:
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (4, 1, 1, 0.25),
        (4, 1, 4, 1.0),
        (5, 2, 2, 0.7),
        (4, 0, 4, 0.0),
        (8, 8, 1, 1.0),
        (10, 3, 4, 1 - 35 / 210),
    ],
)
def test_hand_computed(n, c, k, expected):
    assert math.isclose(pass_at_k(n, c, k), expected, rel_tol=1e-12, abs_tol=1e-15)


@pytest.mark.parametrize("n", [1, 2, 5, 16, 64, 257])
def test_matches_exact_binomials(n):
    for k in sorted(k for k in {1, 2, 4, n // 2 or 1, n} if k <= n):
        for c in range(n + 1):
            assert math.isclose(
                pass_at_k(n, c, k), float(exact(n, c, k)), rel_tol=1e-10, abs_tol=1e-13
            )


def test_pass_at_1_is_the_fraction_correct_and_large_n_is_stable():
    assert math.isclose(pass_at_k(1000, 123, 1), 0.123, rel_tol=1e-12)
    value = pass_at_k(100_000, 3, 50)  # C(100000, 50) overflows float; the product form does not
    assert math.isclose(value, float(exact(100_000, 3, 50)), rel_tol=1e-9)


@st.composite
def counts(draw, max_n: int = 300) -> tuple[int, int, int]:
    """(n, c, k) with 0 <= c <= n and 1 <= k <= n."""
    n = draw(st.integers(1, max_n))
    return n, draw(st.integers(0, n)), draw(st.integers(1, n))


@PROPERTY
@given(counts())
def test_property_equals_one_minus_the_binomial_ratio(nck):
    n, c, k = nck
    assert math.isclose(pass_at_k(n, c, k), float(exact(n, c, k)), rel_tol=1e-10, abs_tol=1e-13)


@PROPERTY
@given(counts())
def test_property_monotone_in_k_and_in_c(nck):
    n, c, k = nck
    value = pass_at_k(n, c, k)
    assert 0.0 <= value <= 1.0
    if k < n:  # one more draw can only help
        assert pass_at_k(n, c, k + 1) >= value - SLACK
    if c < n:  # one more correct response can only help
        assert pass_at_k(n, c + 1, k) >= value - SLACK
    assert (value == 0.0) == (c == 0)
    if n - c < k:  # every draw of k holds a correct response (else 1.0 only by rounding)
        assert value == 1.0


@PROPERTY
@given(counts())
def test_property_pass_at_1_is_the_fraction_correct(nck):
    n, c, _ = nck
    assert math.isclose(pass_at_k(n, c, 1), c / n, rel_tol=1e-11, abs_tol=SLACK)


@PROPERTY
@given(st.lists(counts(max_n=20), min_size=1, max_size=10), st.integers(1, 20))
def test_property_mean_is_the_mean_over_problems(problems, k):
    problems = [(n, c) for n, c, _ in problems if n >= k]
    if not problems:
        return
    ns, cs = zip(*problems, strict=True)
    expected = math.fsum(float(exact(n, c, k)) for n, c in problems) / len(problems)
    assert math.isclose(mean_pass_at_k(ns, cs, k), expected, rel_tol=1e-10, abs_tol=1e-13)


def test_mean_over_problems():
    assert math.isclose(mean_pass_at_k([4, 4, 4], [0, 1, 4], 1), (0 + 0.25 + 1) / 3)


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((3, 1, 4), ValueError, "needs at least k=4 samples per problem, got n=3"),
        ((4, 5, 1), ValueError, r"c must be in \[0, n=4\]"),
        ((4, -1, 1), ValueError, "c must be in"),
        ((4, 1, 0), ValueError, "k must be >= 1"),
        ((4.0, 1, 1), TypeError, "n must be an int"),
    ],
)
def test_bad_input(args, error, match):
    with pytest.raises(error, match=match):
        pass_at_k(*args)


def test_mean_rejects_mismatched_or_empty():
    with pytest.raises(ValueError, match="differ in length"):
        mean_pass_at_k([4, 4], [1], 1)
    with pytest.raises(ValueError, match="no problems"):
        mean_pass_at_k([], [], 1)
