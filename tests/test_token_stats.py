"""token_stats against float64 references, JS properties, fused == unfused, bad input."""

from __future__ import annotations

import math

import pytest
import torch
from reference import js_divergence, stats_reference
from torch import Tensor

from ictrepro.algos.selection import SelectionInputs, select_tokens
from ictrepro.algos.token_stats import (
    group_js,
    head_dtype,
    sampled_logprobs,
    sampled_logprobs_from_hidden,
    token_stats,
    token_stats_from_hidden,
)

STATS = ("logprob", "entropy", "renyi2", "js")


def make_batch(seed: int, group_sizes: list[int], T: int, V: int, dtype=torch.float32, scale=3.0):
    """Random logits with padded responses of unequal lengths and shuffled, uneven groups."""
    gen = torch.Generator().manual_seed(seed)
    B = sum(group_sizes)
    gids = torch.cat([torch.full((n,), g * 7 + 3) for g, n in enumerate(group_sizes)])
    gids = gids[torch.randperm(B, generator=gen)]  # group members need not be adjacent
    logits = (torch.randn(B, T, V, generator=gen) * scale).to(dtype)
    tokens = torch.randint(0, V, (B, T), generator=gen)
    lengths = torch.randint(1, T + 1, (B,), generator=gen)
    lengths[0] = T
    mask = torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)
    tokens[~mask] = -100  # padding ids outside the vocabulary must be ignored
    logits[~mask] = float("nan")  # and so must garbage logits at padding
    return logits, tokens, mask, gids


CASES = [
    # (group sizes, T, V, temperature, chunk_size)
    ([4, 4], 9, 17, 1.0, None),
    ([3, 5, 1], 12, 64, 0.7, 5),  # chunk does not divide T; a group of one
    ([2, 6], 7, 257, 1.3, 7),  # chunk == T
    ([8], 16, 1000, 1.0, 3),
    ([1, 2, 3, 4], 5, 33, 0.5, 1),
]


@pytest.mark.parametrize(("group_sizes", "T", "V", "temperature", "chunk"), CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_float64_reference(group_sizes, T, V, temperature, chunk, seed):
    logits, tokens, mask, gids = make_batch(seed, group_sizes, T, V)
    got = token_stats(
        logits, tokens, mask, gids, temperature=temperature, chunk_size=chunk, kernel="eager"
    )
    ref = stats_reference(torch.nan_to_num(logits), tokens, mask, gids, temperature)
    for name in STATS:
        torch.testing.assert_close(
            getattr(got, name).double(), ref[name], rtol=1e-5, atol=2e-5, msg=name
        )
        assert bool((getattr(got, name)[~mask] == 0).all()), f"{name} not zero outside the mask"


def test_without_groups_has_no_js_and_same_other_stats():
    logits, tokens, mask, gids = make_batch(3, [3, 3], 10, 40)
    with_groups = token_stats(logits, tokens, mask, gids, chunk_size=4)
    alone = token_stats(logits, tokens, mask, chunk_size=4)
    assert alone.js is None
    for name in ("logprob", "entropy", "renyi2"):
        torch.testing.assert_close(getattr(alone, name), getattr(with_groups, name))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_inputs_accumulate_in_float32(dtype):
    logits, tokens, mask, gids = make_batch(4, [4, 3], 11, 300, dtype=dtype)
    got = token_stats(logits, tokens, mask, gids, temperature=0.9, chunk_size=4)
    # The reference sees the same rounded logits, so only float32 accumulation error remains.
    ref = stats_reference(torch.nan_to_num(logits.float()), tokens, mask, gids, 0.9)
    for name in STATS:
        assert getattr(got, name).dtype == torch.float32
        torch.testing.assert_close(
            getattr(got, name).double(), ref[name], rtol=1e-5, atol=3e-5, msg=name
        )


def test_compiled_kernel_matches_reference():
    logits, tokens, mask, gids = make_batch(5, [3, 4], 13, 96)
    got = token_stats(logits, tokens, mask, gids, temperature=0.8, chunk_size=5, kernel="compiled")
    ref = stats_reference(torch.nan_to_num(logits), tokens, mask, gids, 0.8)
    for name in STATS:
        torch.testing.assert_close(
            getattr(got, name).double(), ref[name], rtol=1e-5, atol=2e-5, msg=name
        )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("chunk", [None, 2, 5])
def test_fused_from_hidden_equals_unfused(dtype, chunk):
    gen = torch.Generator().manual_seed(11)
    _, tokens, mask, gids = make_batch(6, [4, 2], 9, 120)
    hidden = torch.randn(6, 9, 24, generator=gen).to(dtype)
    head = torch.randn(120, 24, generator=gen).to(dtype)
    fused = token_stats_from_hidden(
        hidden, head, tokens, mask, gids, temperature=0.6, chunk_size=chunk
    )
    unfused = token_stats(hidden @ head.T, tokens, mask, gids, temperature=0.6, chunk_size=chunk)
    for name in STATS:
        torch.testing.assert_close(
            getattr(fused, name), getattr(unfused, name), rtol=1e-6, atol=1e-6
        )


def test_hand_computed_two_token_vocab():
    # Response a: p = (1/2, 1/2); response b: p = (1, 0) (logit -inf). Mean = (3/4, 1/4).
    logits = torch.tensor([[[0.0, 0.0]], [[0.0, -math.inf]]])
    tokens = torch.tensor([[1], [0]])
    mask = torch.ones(2, 1, dtype=torch.bool)
    stats = token_stats(logits, tokens, mask, torch.tensor([0, 0]))
    h = lambda *q: -sum(x * math.log(x) for x in q if x > 0)  # noqa: E731
    expected_js_a = h(5 / 8, 3 / 8) - (h(0.5, 0.5) + h(0.75, 0.25)) / 2
    expected_js_b = h(7 / 8, 1 / 8) - (h(1.0) + h(0.75, 0.25)) / 2
    torch.testing.assert_close(stats.logprob, torch.tensor([[math.log(0.5)], [0.0]]))
    torch.testing.assert_close(stats.entropy, torch.tensor([[math.log(2)], [0.0]]))
    torch.testing.assert_close(stats.renyi2, torch.tensor([[math.log(2)], [0.0]]))
    torch.testing.assert_close(stats.js, torch.tensor([[expected_js_a], [expected_js_b]]))


def test_js_is_zero_for_identical_distributions():
    row = torch.randn(1, 6, 50).expand(5, 6, 50).clone()
    mask = torch.ones(5, 6, dtype=torch.bool)
    js = group_js(row, mask, torch.zeros(5, dtype=torch.long))
    assert float(js.abs().max()) < 1e-6


def test_js_is_zero_where_a_group_has_one_active_response():
    logits = torch.randn(3, 4, 30) * 5
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]], dtype=torch.bool)
    js = group_js(logits, mask, torch.tensor([0, 0, 1]))
    assert bool((js[0, 2:] == 0).all())  # only row 0 of group 0 is active at t >= 2
    assert bool((js[2] == 0).all())  # group 1 has a single member
    assert bool((js[:2, :2] > 0).all())


@pytest.mark.parametrize("seed", range(5))
def test_js_bounds_and_symmetry(seed):
    gen = torch.Generator().manual_seed(seed)
    # Near-disjoint supports push JS towards its upper bound ln 2.
    logits = torch.randn(2, 8, 40, generator=gen) * 30
    mask = torch.ones(2, 8, dtype=torch.bool)
    js = group_js(logits, mask, torch.tensor([0, 0]))
    assert float(js.min()) >= 0 and float(js.max()) <= math.log(2)
    p = torch.softmax(logits.double(), -1)
    for t in range(8):
        assert abs(float(js_divergence(p[0, t], p[1, t]) - js_divergence(p[1, t], p[0, t]))) < 1e-12


def js_ceiling(G: int) -> float:
    """The largest group JS of a group of ``G`` active responses, worked by hand: with
    ``p`` disjoint from the other rows' mean ``Q``, ``P = p/G + (G-1)/G Q`` and
    ``m = (p + P)/2 = (G+1)/(2G) p + (G-1)/(2G) Q``, so ``KL(p||m) = ln(2G/(G+1))`` and
    ``KL(P||m) = (1/G) ln(2/(G+1)) + ((G-1)/G) ln 2``, whatever ``p`` and ``Q`` are."""
    return 0.5 * (math.log(2 * G / (G + 1)) + math.log(2 / (G + 1)) / G + (G - 1) / G * math.log(2))


@pytest.mark.parametrize("G", [2, 5, 8])
@pytest.mark.parametrize("own", ["sure", "even over two", "even over five"])
def test_js_ceiling_ignores_a_rows_own_uncertainty(G, own):
    # Row 0 puts its mass on tokens 0-4 (how it spreads it is ``own``), the others on tokens
    # 5.. only: its u is the ceiling whether it is sure (a step of a walk) or undecided (a
    # fork). So the rule ranks an undecided fork no higher than a sure token out of step.
    V, big = 12, 60.0
    logits = torch.full((G, 1, V), -big, dtype=torch.float64)
    spread = {"sure": 1, "even over two": 2, "even over five": 5}[own]
    logits[0, 0, :spread] = 0.0
    for j in range(1, G):
        logits[j, 0, 5 + j % 7] = 0.0
    js = group_js(logits, torch.ones(G, 1, dtype=torch.bool), torch.zeros(G, dtype=torch.long))
    assert abs(float(js[0, 0]) - js_ceiling(G)) < 1e-5


def test_js_ceiling_of_a_group_of_eight_is_the_documented_value():
    assert js_ceiling(8) == pytest.approx(0.4969, abs=5e-5)  # docs/worlds/fork.md


def test_statistics_carry_no_gradient_and_sampled_logprobs_does():
    logits, tokens, mask, gids = make_batch(7, [2, 2], 5, 20)
    logits = torch.nan_to_num(logits).requires_grad_(True)
    stats = token_stats(logits, tokens, mask, gids)
    assert not stats.js.requires_grad
    lp = sampled_logprobs(logits, tokens.clamp_min(0), temperature=0.5)
    ref = stats_reference(logits.detach(), tokens, mask, None, 0.5)["logprob"]
    torch.testing.assert_close(torch.where(mask, lp, 0.0).double(), ref, rtol=1e-5, atol=1e-5)
    lp[mask].sum().backward()
    assert logits.grad is not None and bool(torch.isfinite(logits.grad).all())


# ----------------------------------------------------------------------------- errors


def _ok():
    logits, tokens, mask, gids = make_batch(0, [2, 2], 4, 10)
    return torch.nan_to_num(logits), tokens, mask, gids


@pytest.mark.parametrize(
    ("mutate", "error", "match"),
    [
        (
            lambda a: {**a, "logits": a["logits"][0]},
            ValueError,
            "logits_BTV must have 3 dimensions",
        ),
        (lambda a: {**a, "logits": a["logits"].long()}, TypeError, "floating"),
        (lambda a: {**a, "tokens": a["tokens"][:, :3]}, ValueError, "tokens_BT must have shape"),
        (lambda a: {**a, "tokens": a["tokens"].float()}, TypeError, "token ids"),
        (
            lambda a: {**a, "tokens": a["tokens"].masked_fill(a["mask"], 10)},
            ValueError,
            "vocabulary mismatch",
        ),
        (
            lambda a: {**a, "mask": a["mask"].float()},
            TypeError,
            "response_mask_BT must be torch.bool",
        ),
        (lambda a: {**a, "mask": a["mask"][:, :2]}, ValueError, "response_mask_BT must have shape"),
        (lambda a: {**a, "mask": torch.zeros_like(a["mask"])}, ValueError, "selects no tokens"),
        (lambda a: {**a, "gids": a["gids"][:3]}, ValueError, "group_ids_B must have shape"),
        (lambda a: {**a, "gids": a["gids"].float()}, TypeError, "integer ids"),
        (lambda a: {**a, "temperature": 0.0}, ValueError, "temperature"),
        (lambda a: {**a, "temperature": float("nan")}, ValueError, "temperature"),
        (lambda a: {**a, "chunk_size": 0}, ValueError, "chunk_size"),
        (lambda a: {**a, "kernel": "fast"}, ValueError, "kernel must be"),
    ],
)
def test_bad_input_is_named(mutate, error, match):
    logits, tokens, mask, gids = _ok()
    args = mutate(
        {
            "logits": logits,
            "tokens": tokens,
            "mask": mask,
            "gids": gids,
            "temperature": 1.0,
            "chunk_size": None,
            "kernel": "auto",
        }
    )
    with pytest.raises(error, match=match):
        token_stats(
            args["logits"],
            args["tokens"],
            args["mask"],
            args["gids"],
            temperature=args["temperature"],
            chunk_size=args["chunk_size"],
            kernel=args["kernel"],
        )


def test_empty_batch_is_rejected():
    with pytest.raises(ValueError, match="empty"):
        token_stats(
            torch.zeros(0, 3, 5),
            torch.zeros(0, 3, dtype=torch.long),
            torch.zeros(0, 3, dtype=torch.bool),
        )


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_logits_at_response_tokens_are_rejected(bad):
    logits, tokens, mask, gids = _ok()
    logits[1, 0, 3] = bad
    with pytest.raises(
        ValueError, match=r"non-finite statistics at response position \(b=1, t=0\)"
    ):
        token_stats(logits, tokens, mask, gids)


def test_sampled_token_with_zero_probability_is_rejected():
    logits, tokens, mask, gids = _ok()
    logits[0, 1, int(tokens[0, 1])] = -math.inf
    with pytest.raises(ValueError, match=r"\(b=0, t=1\)"):
        token_stats(logits, tokens, mask, gids)


def test_fused_rejects_hidden_size_mismatch():
    _, tokens, mask, gids = _ok()
    with pytest.raises(ValueError, match="hidden size mismatch"):
        token_stats_from_hidden(torch.randn(4, 4, 8), torch.randn(10, 6), tokens, mask, gids)


def test_compile_failure_falls_back_to_eager_with_a_warning(monkeypatch):
    from ictrepro.algos import token_stats as module

    def broken(*args):
        raise RuntimeError("no C++ compiler")

    monkeypatch.setattr(module, "_compiled_kernel", broken)
    logits, tokens, mask, gids = _ok()
    with pytest.warns(UserWarning, match="torch.compile failed.*no C\\+\\+ compiler"):
        got = token_stats(logits, tokens, mask, gids, kernel="compiled")
    ref = stats_reference(logits, tokens, mask, gids, 1.0)
    torch.testing.assert_close(got.js.double(), ref["js"], rtol=1e-5, atol=2e-5)


def test_group_js_with_minus_inf_at_token_zero():
    """A vocabulary whose id 0 can never be sampled (logit -inf) is ordinary: group JS works."""
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 5, 9, generator=gen, dtype=torch.float64)
    logits[..., 0] = -torch.inf
    mask = torch.ones(4, 5, dtype=torch.bool)
    groups = torch.tensor([0, 0, 1, 1])
    got = group_js(logits, mask, groups)
    expected = stats_reference(logits, torch.ones(4, 5, dtype=torch.long), mask, groups, 1.0)["js"]
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-6)


def hidden_logprob_reference(h, w, tokens, mask, temperature):
    """Plain float64 formula: full logits, full log-softmax, gather; 0 outside the mask."""
    logp = torch.log_softmax((h.double() @ w.double().T) / temperature, dim=-1)
    return torch.where(mask, logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1), 0.0)


@pytest.mark.parametrize(
    ("B", "T", "D", "V", "chunk"), [(1, 1, 3, 2, None), (3, 5, 4, 7, 2), (4, 9, 8, 33, 5)]
)
@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_sampled_logprobs_from_hidden_value_and_gradient(B, T, D, V, chunk, temperature):
    gen = torch.Generator().manual_seed(B * 100 + T)
    h = torch.randn(B, T, D, generator=gen, requires_grad=True)
    w = torch.randn(V, D, generator=gen, requires_grad=True)
    tokens = torch.randint(0, V, (B, T), generator=gen)
    mask = torch.rand(B, T, generator=gen) > 0.3
    mask[0, 0] = True
    weights = torch.randn(B, T, generator=gen)
    got = sampled_logprobs_from_hidden(
        h, w, tokens, mask, temperature=temperature, chunk_size=chunk
    )
    h64, w64 = h.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    expected = hidden_logprob_reference(h64, w64, tokens, mask, temperature)
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5)
    (got * weights).sum().backward()
    (expected * weights.double()).sum().backward()
    torch.testing.assert_close(h.grad.double(), h64.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(w.grad.double(), w64.grad, rtol=1e-4, atol=1e-5)


def test_sampled_logprobs_from_hidden_gradcheck():
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(2, 3, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    tokens = torch.randint(0, 6, (2, 3), generator=gen)
    mask = torch.tensor([[True, True, False], [True, False, True]])

    def f(h, w):
        return sampled_logprobs_from_hidden(h, w, tokens, mask, temperature=0.7, chunk_size=2)

    assert torch.autograd.gradcheck(f, (h, w))


def test_sampled_logprobs_from_hidden_bf16_close_to_float32():
    gen = torch.Generator().manual_seed(1)
    h = torch.randn(2, 4, 16, generator=gen)
    w = torch.randn(50, 16, generator=gen) / 4
    tokens = torch.randint(0, 50, (2, 4), generator=gen)
    mask = torch.ones(2, 4, dtype=torch.bool)
    full = sampled_logprobs_from_hidden(h, w, tokens, mask)
    half = sampled_logprobs_from_hidden(h.bfloat16(), w.bfloat16(), tokens, mask)
    assert half.dtype == torch.float32
    torch.testing.assert_close(half, full, rtol=0.05, atol=0.05)


def bf16_reference(h, w, tokens, mask, temperature):
    """Float64 log-probs and their gradients from the logits a bf16 head gives: ``h`` and
    ``w`` rounded to bf16, their product rounded to bf16 (what autocast's matmul returns),
    everything after it in float64. Returns (logprob [B, T], d/dh, d/dw) of ``logprob.sum()``.
    """
    h16, w16 = h.bfloat16().double(), w.bfloat16().double()
    z = (h16 @ w16.T).bfloat16().double() / temperature
    logp = torch.log_softmax(z, dim=-1)
    logprob = torch.where(mask, logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1), 0.0)
    # d logp / d z = onehot(token) - softmax(z), over tau; the rounding passes the gradient.
    dz = (torch.nn.functional.one_hot(tokens, w.shape[0]) - logp.exp()) / temperature
    dz = torch.where(mask.unsqueeze(-1), dz, 0.0)
    return logprob, dz @ w16, torch.einsum("btv,btd->vd", dz, h16)


@pytest.mark.parametrize(("B", "T", "D", "V", "chunk"), [(2, 3, 8, 11, 2), (3, 7, 16, 64, None)])
def test_sampled_logprobs_from_hidden_under_bf16_autocast(B, T, D, V, chunk):
    """Under bf16 autocast the chunked head computes the logits the model's own head does
    (bf16) in both passes: log-probs and gradients of a float64 reference built on those
    logits, and the plain logits path's log-probs."""
    gen = torch.Generator().manual_seed(V)
    h = torch.randn(B, T, D, generator=gen, requires_grad=True)
    w = torch.randn(V, D, generator=gen, requires_grad=True)
    tokens = torch.randint(0, V, (B, T), generator=gen)
    mask = torch.rand(B, T, generator=gen) > 0.3
    mask[0, 0] = True
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = sampled_logprobs_from_hidden(h, w, tokens, mask, temperature=0.7, chunk_size=chunk)
        plain = sampled_logprobs(h @ w.T, tokens, temperature=0.7)
    got.sum().backward()  # outside autocast: custom_bwd restores the forward's state
    expected, grad_h, grad_w = bf16_reference(h.detach(), w.detach(), tokens, mask, 0.7)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[mask], plain[mask], rtol=1e-5, atol=1e-5)
    # d/dw accumulates in float32 from the bf16-rounded h; d/dh is one bf16 matmul (the
    # incoming gradient rounded to bf16, as the logits path's is): 2^-8 relative.
    torch.testing.assert_close(w.grad.double(), grad_w, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(h.grad.double(), grad_h, rtol=1e-2, atol=1e-2)
    # The float32 head (the old statistics pass) is measurably different: the test can fail.
    fp32 = hidden_logprob_reference(h.detach(), w.detach(), tokens, mask, 0.7)
    assert (fp32 - expected).abs().max() > 1e-3


def test_head_dtype_follows_autocast():
    x = torch.zeros(2, dtype=torch.float32)
    assert head_dtype(x) == torch.float32
    assert head_dtype(x.double()) == torch.float64
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert head_dtype(x) == torch.bfloat16
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
        assert head_dtype(x) == torch.float32


def test_sampled_logprobs_from_hidden_equals_the_logits_path():
    gen = torch.Generator().manual_seed(2)
    h, w = torch.randn(3, 5, 8, generator=gen), torch.randn(20, 8, generator=gen)
    tokens = torch.randint(0, 20, (3, 5), generator=gen)
    mask = torch.ones(3, 5, dtype=torch.bool)
    torch.testing.assert_close(
        sampled_logprobs_from_hidden(h, w, tokens, mask, temperature=0.8),
        sampled_logprobs(h @ w.T, tokens, temperature=0.8),
    )


def _unary_group(fork_depends_on_preamble: bool) -> tuple[Tensor, Tensor]:
    """Logits ``[8, T, 6]`` of a group whose walks are written in unary, and its response
    mask (docs/worlds/fork.md, "Why ICT never selects the fork"). Tokens: 0/1 a preamble,
    2/3 the fork (up/down), 4 a step, 5 the end. Position 0: every row even over the
    preambles (one context). Position 1: the fork, even over up/down, or, where it depends
    on the preamble, 0.8/0.2 after preamble 0 and 0.2/0.8 after preamble 1. Then steps,
    sure and the same in every row, until the row's last position, sure on the end. Rows
    turning up write 13 tokens, rows turning down 17 (each row's top 10% is 2 tokens)."""
    G, T, V = 8, 17, 6
    logits = torch.full((G, T, V), -30.0, dtype=torch.float64)
    lengths = torch.tensor([13, 17] * 4)
    for i in range(G):
        logits[i, 0, :2] = 0.0
        preamble, turned = i % 4 < 2, i % 2  # half the rows each preamble, each direction
        if fork_depends_on_preamble:
            logits[i, 1, 2 + (0 if preamble else 1)] = math.log(0.8)
            logits[i, 1, 2 + (1 if preamble else 0)] = math.log(0.2)
        else:
            logits[i, 1, 2:4] = 0.0
        logits[i, 2 : lengths[i] - 1, 4] = 0.0
        logits[i, lengths[i] - 1, 5] = 0.0
        assert turned == int(lengths[i] == 17)
    mask = torch.arange(T)[None, :] < lengths[:, None]
    return logits, mask


@pytest.mark.parametrize("depends", [True, False])
def test_ict_selects_a_fork_only_when_its_distribution_differs_and_the_rest_is_in_step(depends):
    logits, mask = _unary_group(depends)
    js = group_js(logits, mask, torch.zeros(8, dtype=torch.long))
    assert bool((js[:, 0] == 0).all())  # one context: u = 0 at the preamble
    inputs = SelectionInputs(mask, torch.zeros(8), js=js, step=10)
    selected = select_tokens("ict", inputs, warmup_steps=0)
    assert selected.sum(1).tolist() == [2] * 8
    short = torch.arange(8) % 2 == 0  # each short row's end is out of step with the long rows
    assert bool(selected[short, 12].all())
    if depends:
        assert float(js[:, 1].min()) > 0.04  # the fork differs across the group (0.051 nats)
        assert bool(selected[:, 1].all())  # ... and every row's fork is selected
    else:
        assert float(js[:, 1].abs().max()) < 1e-6  # the fork as every row reaches it alike
        # u ties with the in-step tokens there, and ties go to earlier tokens (the preamble).
        assert not bool(selected[:, 1].any())
