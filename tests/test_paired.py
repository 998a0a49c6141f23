"""Paired differences (evaluate/paired.py): hand-computed cases, a float64 loop reference on
random shapes, and the interval's coverage on simulated benchmarks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ictrepro.evaluate.paired import detectable_difference, paired_difference


def test_hand_computed_two_seeds_two_problems():
    # d = a - b = [[1, 0], [1, 0]]: seeds agree, problems differ.
    a = [np.array([[1.0, 0.0], [1.0, 1.0]])]
    b = [np.array([[0.0, 0.0], [0.0, 1.0]])]
    r = paired_difference(a, b)
    # D = 0.5; seed means equal (V_seed = 0); problem means [1, 0], var 0.5, / (1 * 2)
    # = 0.25; no interaction. se = 0.5, Satterthwaite df = 0.25^2 / (0.25^2 / 1) = 1.
    assert r.mean == 0.5 and r.se == pytest.approx(0.5) and r.df == pytest.approx(1.0)
    assert r.ci_high == pytest.approx(0.5 + 12.7062047 * 0.5)
    assert not r.resolved and r.seed_spread_known


def test_a_constant_difference_is_resolved_with_no_width():
    a = [np.full((3, 5), 0.4), np.full((3, 7), 0.9)]
    b = [np.full((3, 5), 0.3), np.full((3, 7), 0.8)]
    r = paired_difference(a, b)
    assert r.mean == pytest.approx(0.1) and r.ci_low == pytest.approx(0.1)
    assert r.resolved and r.half_width == pytest.approx(0.0) and r.detectable == pytest.approx(0.0)


def test_one_model_against_every_seed_and_one_seed():
    base = [np.array([[0.0, 0.5, 1.0]])]
    method = [np.array([[0.5, 0.5, 1.0], [0.0, 1.0, 1.0]])]
    r = paired_difference(method, base)
    assert r.mean == pytest.approx(1 / 6)  # each seed: 0.5 more on one of 3 problems
    single = paired_difference([method[0][:1]], base)
    assert not single.seed_spread_known and single.n_seeds == 1
    with pytest.raises(ValueError, match="do not pair"):
        paired_difference([np.zeros((2, 3))], [np.zeros((2, 4))])


def loop_reference(a, b, confidence=0.95):
    """The formulas of the module docstring with explicit float64 loops."""
    K, S = len(a), len(a[0])
    diffs = []
    for x, y in zip(a, b, strict=True):
        J = len(x[0])
        diffs.append(
            [
                [float(x[s][j]) - float(y[s if len(y) > 1 else 0][j]) for j in range(J)]
                for s in range(S)
            ]
        )
    seed_means = [sum(sum(d[s]) / len(d[s]) for d in diffs) / K for s in range(S)]
    mean = sum(seed_means) / S
    v_prob = ss_res = sum_w2 = 0.0
    df_prob = df_res = 0
    for d in diffs:
        J = len(d[0])
        pm = [sum(d[s][j] for s in range(S)) / S for j in range(J)]
        rm = [sum(d[s]) / J for s in range(S)]
        g = sum(pm) / J
        v_prob += sum((p - g) ** 2 for p in pm) / (J - 1) / (K * K * J)
        df_prob += J - 1
        ss_res += sum((d[s][j] - rm[s] - pm[j] + g) ** 2 for s in range(S) for j in range(J))
        df_res += (S - 1) * (J - 1)
        sum_w2 += J * (1 / (K * J)) ** 2
    if S == 1:
        var, df = v_prob, df_prob
    else:
        v_seed = sum((m - mean) ** 2 for m in seed_means) / (S - 1) / S
        v_res = sum_w2 * ss_res / df_res / S
        var = max(v_seed + v_prob - v_res, v_seed, v_prob)
        df = var**2 / (v_seed**2 / (S - 1) + v_prob**2 / df_prob + v_res**2 / df_res)
    half = stats.t.ppf(0.5 + confidence / 2, df) * math.sqrt(var)
    return mean, mean - half, mean + half


@pytest.mark.parametrize(
    "seeds,sizes,base",
    [(3, (5, 8), False), (2, (3,), True), (1, (4, 6, 9), True), (4, (10, 2, 7), False)],
)
def test_equals_a_float64_loop_reference(seeds, sizes, base):
    rng = np.random.default_rng(seeds * 100 + len(sizes))
    a = [rng.random((seeds, J)) for J in sizes]
    b = [rng.random((1 if base else seeds, J)) for J in sizes]
    r = paired_difference(a, b)
    mean, low, high = loop_reference([x.tolist() for x in a], [y.tolist() for y in b])
    assert r.mean == pytest.approx(mean, rel=1e-12, abs=1e-12)
    assert r.ci_low == pytest.approx(low, rel=1e-9) and r.ci_high == pytest.approx(high, rel=1e-9)


def simulate_coverage(seed_halfwidth: float, *, base: bool, n_bench: int = 400) -> float:
    """Share of simulated benchmarks whose 95% interval of the P@1 difference covers the
    truth. 7 suites x 64 problems x 4 samples, 3 seeds; each problem has its difficulty and
    its own effect (mean 0.05: the truth), each trained model a seed shift."""
    rng = np.random.default_rng(12345 + int(1000 * seed_halfwidth) + base)
    delta, covered = 0.05, 0
    for _ in range(n_bench):
        a, b = [], []
        shift_a = rng.uniform(-seed_halfwidth, seed_halfwidth, size=(3, 1))
        shift_b = rng.uniform(-seed_halfwidth, seed_halfwidth, size=(3, 1))
        for _ in range(7):
            p = rng.uniform(0.15, 0.55, size=64)
            effect = delta + rng.uniform(-0.05, 0.05, size=64)
            pa = p + effect + shift_a  # [3, 64]
            pb = p[None, :] if base else p + shift_b
            a.append(rng.binomial(4, pa) / 4)
            b.append(rng.binomial(4, pb) / 4)
        r = paired_difference(a, b)
        covered += r.ci_low <= delta <= r.ci_high
    return covered / n_bench


@pytest.mark.parametrize("seed_halfwidth,base", [(0.0, False), (0.05, False), (0.05, True)])
def test_a_nominal_95_percent_interval_covers_the_truth_90_to_99_percent(seed_halfwidth, base):
    coverage = simulate_coverage(seed_halfwidth, base=base)
    assert 0.90 <= coverage <= 0.99, f"coverage {100 * coverage:.1f}%"


def test_the_detectable_difference_by_hand():
    # t_{0.975}(1) = 12.7062047, t_{0.8}(1) = 1.3763819; z_{0.975} + z_{0.8} = 2.8015852.
    assert detectable_difference(0.5, 1.0) == pytest.approx(0.5 * (12.7062047 + 1.3763819))
    assert detectable_difference(1.0, float("inf")) == pytest.approx(2.8015852)
    assert detectable_difference(2.0, float("inf"), power=0.5) == pytest.approx(2 * 1.959964)
    with pytest.raises(ValueError, match="power"):
        detectable_difference(1.0, 3.0, power=1.0)


def test_a_true_difference_of_the_detectable_size_is_resolved_80_percent_of_the_time():
    """Simulated seeds x problems designs with seed, problem and residual noise: the
    interval excludes 0 in about 80% of designs whose true difference is ``detectable``
    (computed from the true variance components at the design's degrees of freedom)."""
    rng = np.random.default_rng(7)
    S, J, K = 5, 40, 2
    sd_seed, sd_problem, sd_res = 0.02, 0.05, 0.2
    # Var(D) of the crossed design with these components (K benchmarks weighted equally).
    var = sd_seed**2 / S + sd_problem**2 / (K * J) + sd_res**2 / (S * K * J)
    probe = paired_difference([rng.normal(size=(S, J)) for _ in range(K)], [np.zeros((S, J))] * K)
    true = detectable_difference(float(np.sqrt(var)), probe.df)
    resolved = 0
    trials = 600
    for _ in range(trials):
        seed = rng.normal(0, sd_seed, size=(S, 1))
        a = [
            true + seed + rng.normal(0, sd_problem, size=(1, J)) + rng.normal(0, sd_res, (S, J))
            for _ in range(K)
        ]
        resolved += paired_difference(a, [np.zeros((S, J))] * K).resolved
    assert 0.72 <= resolved / trials <= 0.88
