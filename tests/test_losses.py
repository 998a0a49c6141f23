"""The shared GRPO objective against loop references, gradients, the normalisation trap."""

from __future__ import annotations

import math

import pytest
import torch

from ictrepro.algos.losses import (
    AGG_MODES,
    aggregate,
    clipped_policy_objective,
    group_advantages,
    grpo_loss,
    kl_k3,
)


def advantages_reference(rewards, gids, normalize_std, eps=1e-6):
    out = []
    for i in range(len(rewards)):
        group = [float(rewards[j]) for j in range(len(rewards)) if gids[j] == gids[i]]
        mean = sum(group) / len(group)
        if max(group) == min(group):
            out.append(0.0)
            continue
        a = float(rewards[i]) - mean
        if normalize_std:
            std = math.sqrt(sum((g - mean) ** 2 for g in group) / (len(group) - 1))
            a /= std + eps
        out.append(a)
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("normalize_std", [True, False])
@pytest.mark.parametrize("seed", range(5))
def test_group_advantages_match_reference(normalize_std, seed):
    gen = torch.Generator().manual_seed(seed)
    gids = torch.randint(0, 5, (23,), generator=gen)
    rewards = torch.randint(0, 2, (23,), generator=gen).float()
    rewards[gids == 2] = 1.0  # one group with equal rewards
    got = group_advantages(rewards, gids, normalize_std=normalize_std)
    torch.testing.assert_close(
        got.double(), advantages_reference(rewards, gids, normalize_std), rtol=1e-6, atol=1e-6
    )


def test_group_advantages_hand_computed():
    got = group_advantages(
        torch.tensor([1.0, 0.0, 0.0, 1.0, 0.3, 0.3, 0.3, 5.0]),
        torch.tensor([0, 0, 0, 0, 1, 1, 1, 2]),
    )
    a = 0.5 / (math.sqrt(1 / 3) + 1e-6)  # mean 0.5, unbiased std sqrt(1/3)
    torch.testing.assert_close(got, torch.tensor([a, -a, -a, a, 0, 0, 0, 0], dtype=torch.float32))
    assert bool((got[4:] == 0).all())  # equal rewards and a group of one: exactly zero


def test_clipped_objective_hand_computed():
    ratio = torch.tensor([[1.5, 1.5, 0.5, 0.5, 1.1]])
    adv = torch.tensor([1.0])
    obj, clipped = clipped_policy_objective(ratio.log(), torch.zeros(1, 5), adv)
    torch.testing.assert_close(obj, torch.tensor([[1.2, 1.2, 0.5, 0.5, 1.1]]))
    assert clipped.tolist() == [[True, True, False, False, False]]
    obj, clipped = clipped_policy_objective(
        ratio.log(), torch.zeros(1, 5), -adv, clip_low=0.1, clip_high=0.3
    )
    torch.testing.assert_close(obj, torch.tensor([[-1.5, -1.5, -0.9, -0.9, -1.1]]))
    assert clipped.tolist() == [[False, False, True, True, False]]


@pytest.mark.parametrize("seed", range(3))
def test_clipped_objective_and_k3_match_elementwise_reference(seed):
    gen = torch.Generator().manual_seed(seed)
    lp, old, ref = (-torch.rand(4, 9, generator=gen) * 3 for _ in range(3))
    adv = torch.randn(4, generator=gen)
    obj, _ = clipped_policy_objective(lp, old, adv, clip_low=0.2, clip_high=0.28)
    kl = kl_k3(lp, ref)
    for b in range(4):
        for t in range(9):
            r = math.exp(float(lp[b, t]) - float(old[b, t]))
            a = float(adv[b])
            assert math.isclose(
                float(obj[b, t]), min(r * a, min(max(r, 0.8), 1.28) * a), rel_tol=1e-5, abs_tol=1e-6
            )
            d = float(ref[b, t]) - float(lp[b, t])
            assert math.isclose(float(kl[b, t]), math.exp(d) - d - 1, rel_tol=1e-4, abs_tol=1e-6)


def test_k3_is_nonnegative_and_zero_at_equality():
    gen = torch.Generator().manual_seed(0)
    lp, ref = torch.randn(50, 50, generator=gen) * 30, torch.randn(50, 50, generator=gen) * 30
    kl = kl_k3(lp, ref)
    assert bool((kl >= 0).all()) and bool(torch.isfinite(kl).all())
    assert bool((kl_k3(lp, lp) == 0).all())


def aggregate_reference(values, mask, mode):
    B, T = mask.shape
    if mode == "token-mean":
        sel = [float(values[b, t]) for b in range(B) for t in range(T) if mask[b, t]]
        return sum(sel) / max(1, len(sel))
    per_seq = []
    for b in range(B):
        sel = [float(values[b, t]) for t in range(T) if mask[b, t]]
        per_seq.append(sum(sel) / (max(1, len(sel)) if mode == "seq-mean-token-mean" else 1))
    return sum(per_seq) / B


@pytest.mark.parametrize("mode", AGG_MODES)
@pytest.mark.parametrize("seed", range(3))
def test_aggregate_matches_reference(mode, seed):
    gen = torch.Generator().manual_seed(seed)
    values = torch.randn(5, 8, generator=gen)
    mask = torch.rand(5, 8, generator=gen) < 0.4
    mask[0] = False  # a response with nothing selected still counts in the mean over G
    assert math.isclose(
        float(aggregate(values, mask, mode)),
        aggregate_reference(values, mask, mode),
        rel_tol=1e-5,
        abs_tol=1e-7,
    )


def _batch(seed=0, B=4, T=6):
    gen = torch.Generator().manual_seed(seed)
    old = -torch.rand(B, T, generator=gen) * 2
    lp = (old + torch.randn(B, T, generator=gen) * 0.1).requires_grad_(True)
    ref = old + torch.randn(B, T, generator=gen) * 0.1
    response = torch.ones(B, T, dtype=torch.bool)
    response[1, 4:] = False
    token_mask = response & (torch.rand(B, T, generator=gen) < 0.5)
    return lp, old, ref, response, token_mask


@pytest.mark.parametrize("mode", AGG_MODES)
def test_unselected_tokens_get_exactly_zero_gradient(mode):
    lp, old, ref, response, token_mask = _batch()
    with torch.no_grad():  # even absurd values on unselected tokens must not leak
        lp[~token_mask] = torch.tensor([math.inf, -math.inf, 1e30]).repeat(
            int((~token_mask).sum())
        )[: int((~token_mask).sum())]
    loss, _ = grpo_loss(
        lp, old, torch.randn(4), token_mask, response, ref_logprob_BT=ref, agg_mode=mode
    )
    loss.backward()
    assert bool(torch.isfinite(lp.grad).all())
    assert bool((lp.grad[~token_mask] == 0).all())
    assert bool((lp.grad[token_mask] != 0).any())


def test_equal_rewards_give_zero_advantage_and_zero_policy_gradient():
    lp, old, _, response, token_mask = _batch()
    adv = group_advantages(torch.ones(4), torch.tensor([0, 0, 0, 0]))
    assert bool((adv == 0).all())
    loss, _ = grpo_loss(lp, old, adv, token_mask, response, kl_coef=0.0)
    loss.backward()
    assert bool((lp.grad == 0).all())


def test_normalisation_trap_scales_gradient_by_mask_ratio():
    """Masking psi but dividing by |o_i| (not sum M) scales response i by sum M / |o_i|."""
    lp, old, _, response, token_mask = _batch(seed=1)
    adv = torch.tensor([1.0, -0.5, 2.0, 0.7])
    right, _ = grpo_loss(lp, old, adv, token_mask, response, kl_coef=0.0)
    (g_right,) = torch.autograd.grad(right, lp)

    obj, _ = clipped_policy_objective(lp, old, adv)
    trap = -(torch.where(token_mask, obj, 0.0).sum(1) / response.sum(1)).mean()
    (g_trap,) = torch.autograd.grad(trap, lp)

    ratio = (token_mask.sum(1) / response.sum(1)).unsqueeze(1)
    torch.testing.assert_close(g_trap, g_right * ratio)
    assert not torch.allclose(g_trap, g_right)


def test_grpo_loss_metrics_hand_computed():
    lp = torch.log(torch.tensor([[1.5, 1.0, 1.0, 1.0]]))
    response = torch.tensor([[True, True, True, False]])
    token_mask = torch.tensor([[True, True, False, False]])
    loss, m = grpo_loss(
        lp,
        torch.zeros(1, 4),
        torch.tensor([1.0]),
        token_mask,
        response,
        ref_logprob_BT=lp,
        kl_coef=0.5,
    )
    assert math.isclose(float(loss), -(1.2 + 1.0) / 2, rel_tol=1e-6)  # KL is 0 here
    assert m["clip_fraction"] == 0.5 and math.isclose(m["selected_fraction"], 2 / 3, rel_tol=1e-6)
    assert m["kl"] == 0.0 and math.isclose(m["ratio_mean"], 1.25, rel_tol=1e-6)


def test_kl_enters_the_loss_with_its_coefficient():
    lp, old, ref, response, token_mask = _batch(seed=2)
    adv = torch.randn(4)
    base, _ = grpo_loss(lp, old, adv, token_mask, response, kl_coef=0.0)
    with_kl, m = grpo_loss(lp, old, adv, token_mask, response, ref_logprob_BT=ref, kl_coef=0.1)
    expected = float(base.detach()) + 0.1 * float(aggregate(kl_k3(lp, ref), token_mask).detach())
    assert math.isclose(float(with_kl.detach()), expected, rel_tol=1e-5) and m["kl"] > 0


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"token_mask_BT": "float"}, TypeError, "token_mask_BT must be torch.bool"),
        ({"response_mask_BT": "short"}, ValueError, r"response_mask_BT must have shape \[4, 6\]"),
        ({"old_logprob_BT": "short"}, ValueError, "old_logprob_BT must have shape"),
        ({"advantages_B": "short"}, ValueError, "advantages_B must have shape"),
        ({"kl_coef": 0.1}, ValueError, "needs ref_logprob_BT"),
        ({"kl_coef": -1.0}, ValueError, "kl_coef must be >= 0"),
        (
            {"agg_mode": "mean"},
            ValueError,
            "unknown aggregation mode 'mean'; valid: seq-mean-token-mean",
        ),
        ({"token_mask_BT": "outside"}, ValueError, "outside response_mask_BT"),
    ],
)
def test_bad_input_is_named(kwargs, error, match):
    lp, old, _, response, token_mask = _batch()
    args = {
        "logprob_BT": lp,
        "old_logprob_BT": old,
        "advantages_B": torch.zeros(4),
        "token_mask_BT": token_mask,
        "response_mask_BT": response,
        "kl_coef": 0.0,
    }
    for key, value in kwargs.items():
        if value == "float":
            args[key] = args[key].float()
        elif value == "short":
            args[key] = args[key][:2]
        elif value == "outside":
            args[key] = torch.ones(4, 6, dtype=torch.bool)
        else:
            args[key] = value
    positional = [
        args.pop(k)
        for k in (
            "logprob_BT",
            "old_logprob_BT",
            "advantages_B",
            "token_mask_BT",
            "response_mask_BT",
        )
    ]
    with pytest.raises(error, match=match):
        grpo_loss(*positional, **args)


def test_advantage_inputs_are_checked():
    with pytest.raises(ValueError, match="group_ids_B must have shape"):
        group_advantages(torch.zeros(4), torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="NaN or inf"):
        group_advantages(torch.tensor([0.0, math.nan]), torch.zeros(2, dtype=torch.long))


def dual_clip_reference(r: float, a: float, low: float, high: float, c: float | None) -> float:
    """verl's ``compute_policy_loss_vanilla`` in objective form, one token in float64."""
    objective = min(r * a, min(max(r, 1 - low), 1 + high) * a)
    if c is not None and a < 0:
        objective = max(objective, c * a)
    return objective


@pytest.mark.parametrize("dual_clip", [None, 3.0, 1.5])
@pytest.mark.parametrize("seed", range(3))
def test_dual_clip_matches_elementwise_reference(seed, dual_clip):
    gen = torch.Generator().manual_seed(seed)
    lp = torch.randn(5, 11, generator=gen, dtype=torch.float64) * 1.5  # ratios from 0.01 to 90
    old = torch.zeros(5, 11, dtype=torch.float64)
    adv = torch.randn(5, generator=gen, dtype=torch.float64)
    obj, active = clipped_policy_objective(lp, old, adv, clip_high=0.28, dual_clip=dual_clip)
    for b in range(5):
        for t in range(11):
            r, a = math.exp(float(lp[b, t])), float(adv[b])
            expected = dual_clip_reference(r, a, 0.2, 0.28, dual_clip)
            assert math.isclose(float(obj[b, t]), expected, rel_tol=1e-12, abs_tol=1e-12)
            unclipped_wins = math.isclose(expected, r * a, rel_tol=1e-12)
            assert bool(active[b, t]) == (not unclipped_wins)


def test_dual_clip_hand_computed_and_gradient():
    ratio = torch.tensor([[5.0, 2.0, 0.5]], requires_grad=True)
    obj, active = clipped_policy_objective(
        ratio.log(), torch.zeros(1, 3), torch.tensor([-1.0]), dual_clip=3.0
    )
    # rho A = -5 < 3 A = -3: floored; -2 and -0.8 (clip(0.5) = 0.8) stay.
    torch.testing.assert_close(obj, torch.tensor([[-3.0, -2.0, -0.8]]))
    assert active.tolist() == [[True, False, True]]
    obj.sum().backward()
    assert float(ratio.grad[0, 0]) == 0.0 and float(ratio.grad[0, 1]) != 0.0
    with pytest.raises(ValueError, match="dual_clip"):
        clipped_policy_objective(ratio.log(), torch.zeros(1, 3), torch.tensor([1.0]), dual_clip=1.0)


def test_k3_bound_hand_computed():
    lp = torch.tensor([[0.0, -1.0, 0.0]])
    ref = torch.tensor([[0.0, 0.0, 4.0]])  # d = 0, 1, 4
    unbounded = kl_k3(lp, ref, kl_max=None)
    expected = [0.0, math.e - 2, math.exp(4) - 5]
    torch.testing.assert_close(unbounded, torch.tensor([expected]))
    torch.testing.assert_close(kl_k3(lp, ref), torch.tensor([[0.0, math.e - 2, 10.0]]))
    # d far outside +-20 is clamped first: finite, and bounded by kl_max.
    far = kl_k3(torch.tensor([[0.0, 0.0]]), torch.tensor([[100.0, -100.0]]), kl_max=None)
    torch.testing.assert_close(far, torch.tensor([[math.exp(20) - 21, math.exp(-20) + 19]]))
    with pytest.raises(ValueError, match="kl_max"):
        kl_k3(lp, ref, kl_max=0.0)


def test_k3_bound_stops_the_gradient_of_bounded_tokens():
    lp = torch.tensor([[0.0, -1.0]], requires_grad=True)
    kl_k3(lp, torch.tensor([[4.0, 0.0]]), kl_max=10.0).sum().backward()
    assert float(lp.grad[0, 0]) == 0.0  # k3 = e^4 - 5 > 10: bounded
    assert math.isclose(float(lp.grad[0, 1]), -(math.e - 1), rel_tol=1e-6)  # d(k3)/d(lp) = 1 - e^d


@pytest.mark.parametrize("kl_max", [None, 0.05])
def test_grpo_loss_passes_kl_bound_and_dual_clip(kl_max):
    gen = torch.Generator().manual_seed(3)
    lp = -torch.rand(3, 6, generator=gen) * 2
    old = lp + torch.randn(3, 6, generator=gen)
    ref = -torch.rand(3, 6, generator=gen) * 2
    adv = torch.tensor([1.0, -1.0, -0.5])
    mask = torch.ones(3, 6, dtype=torch.bool)
    loss, _ = grpo_loss(
        lp, old, adv, mask, mask, ref_logprob_BT=ref, kl_coef=0.1, kl_max=kl_max, dual_clip=2.0
    )
    obj, _ = clipped_policy_objective(lp, old, adv, dual_clip=2.0)
    expected = -aggregate(obj - 0.1 * kl_k3(lp, ref, kl_max=kl_max), mask)
    torch.testing.assert_close(loss, expected)
