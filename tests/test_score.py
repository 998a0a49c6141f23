"""Verdicts -> pass@k per suite, on hand-computed cases."""

from __future__ import annotations

import math

import pytest

from ictrepro.evaluate.score import score_verdicts
from ictrepro.verify import Verdict

C, W, N, U = Verdict.CORRECT, Verdict.WRONG, Verdict.NO_ANSWER, Verdict.UNGRADABLE


def test_hand_computed_and_ungradable_left_out():
    score = score_verdicts([[C, W, W, N], [W, W, W, W], [U, U, U, U]], ks=[1, 2, 4])
    # Problem 1: c=1 of n=4 -> pass@1 = 1/4, pass@2 = 1 - C(3,2)/C(4,2) = 1/2, pass@4 = 1.
    assert score.pass_at[1] == pytest.approx((0.25 + 0) / 2)
    assert score.pass_at[2] == pytest.approx((0.5 + 0) / 2)
    assert score.pass_at[4] == pytest.approx((1 + 0) / 2)
    assert score.n_problems == 2 and score.n_samples == 4
    assert score.verdicts == {
        "correct": 1,
        "wrong": 6,
        "no_answer": 1,
        "ungradable": 4,
        "timeout": 0,
    }


def test_all_ungradable_is_nan_not_zero():
    assert math.isnan(score_verdicts([[U, U]], ks=[1]).pass_at[1])


@pytest.mark.parametrize(
    ("verdicts", "ks", "message"),
    [
        ([], [1], "no problems to score"),
        ([[C, W], [C]], [1], "same number of samples"),
        ([[C, W]], [1, 4], "pass@4 needs at least 4 samples per problem, got 2"),
    ],
)
def test_bad_input(verdicts, ks, message):
    with pytest.raises(ValueError, match=message):
        score_verdicts(verdicts, ks)
