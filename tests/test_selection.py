"""Token-selection rules: hand-computed cases, a loop reference, invariants, errors."""

from __future__ import annotations

import math

import pytest
import torch

from ictrepro.algos import selection
from ictrepro.algos.selection import (
    SelectionInputs,
    available_selections,
    ceil_fraction,
    get_selection,
    register_selection,
    select_tokens,
    top_fraction_mask,
)
from ictrepro.errors import ConfigError


def lengths_mask(lengths: list[int], T: int) -> torch.Tensor:
    return torch.arange(T).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)


def inputs_for(mask, **kw) -> SelectionInputs:
    kw.setdefault("advantages", torch.zeros(mask.shape[0]))
    return SelectionInputs(response_mask=mask, **kw)


def top_fraction_reference(scores, mask, rho, scope):
    """Loop reference: sort (-score, flat index) pairs; take the first ceil(rho n)."""
    B, T = mask.shape
    rows = [list(range(B))] if scope == "batch" else [[b] for b in range(B)]
    out = torch.zeros(B, T, dtype=torch.bool)
    for group in rows:
        cand = [(-float(scores[b, t]), b * T + t) for b in group for t in range(T) if mask[b, t]]
        k = math.ceil(round(rho * len(cand), 9))
        for _, flat in sorted(cand)[:k]:
            out[flat // T, flat % T] = True
    return out


# ------------------------------------------------------------------ sizes and ties


@pytest.mark.parametrize(
    ("n", "rho", "k"),
    [
        (30, 0.1, 3),
        (31, 0.1, 4),
        (1, 0.1, 1),
        (10, 0.2, 2),
        (11, 0.2, 3),
        (7, 1.0, 7),
        (100, 0.3, 30),
        (0, 0.1, 0),
    ],
)
def test_ceil_rule_is_exact(n, rho, k):
    assert int(ceil_fraction(torch.tensor(n), rho)) == k


def test_ties_go_to_earlier_tokens():
    mask = lengths_mask([5, 5], 5)
    scores = torch.ones(2, 5)
    seq = top_fraction_mask(scores, mask, 0.4, "sequence")
    assert seq.tolist() == [[True, True, False, False, False]] * 2
    batch = top_fraction_mask(scores, mask, 0.3, "batch")  # k = ceil(3.0) = 3, row-major
    assert batch.tolist() == [[True, True, True, False, False], [False] * 5]


@pytest.mark.parametrize("scope", ["sequence", "batch"])
@pytest.mark.parametrize("rho", [0.1, 0.2, 0.35, 1.0])
@pytest.mark.parametrize("seed", range(4))
def test_top_fraction_matches_loop_reference(scope, rho, seed):
    gen = torch.Generator().manual_seed(seed)
    B, T = 6, 13
    mask = lengths_mask(torch.randint(0, T + 1, (B,), generator=gen).tolist(), T)
    scores = torch.randint(0, 4, (B, T), generator=gen).float()  # many ties
    got = top_fraction_mask(scores, mask, rho, scope)
    assert torch.equal(got, top_fraction_reference(scores, mask, rho, scope))


# --------------------------------------------------------------------------- rules


def test_grpo_is_dense():
    mask = lengths_mask([3, 1, 4], 4)
    assert torch.equal(select_tokens("grpo", inputs_for(mask)), mask)


def test_entropy_batch_and_sequence_scope_hand_computed():
    mask = lengths_mask([5, 3], 5)
    entropy = torch.tensor(
        [[0.1, 0.9, 0.2, 0.3, 0.4], [0.8, 0.05, 0.7, 9.0, 9.0]]
    )  # 9.0 is padding
    inputs = inputs_for(mask, entropy=entropy)
    # N = 8, k = ceil(1.6) = 2: the two largest of the batch, 0.9 and 0.8.
    got = select_tokens("entropy", inputs)
    assert torch.nonzero(got).tolist() == [[0, 1], [1, 0]]
    # Per sequence: k = ceil(0.2 * 5) = 1 and ceil(0.2 * 3) = 1.
    got = select_tokens("entropy", inputs, scope="sequence")
    assert torch.nonzero(got).tolist() == [[0, 1], [1, 0]]
    got = select_tokens("entropy", inputs, rho=0.5)  # k = 4: 0.9, 0.8, 0.7, 0.4
    assert torch.nonzero(got).tolist() == [[0, 1], [0, 4], [1, 0], [1, 2]]


def stapo_case():
    """Row 0: positive advantage; row 1: negative. Probabilities and entropies by hand."""
    mask = lengths_mask([7, 3], 7)
    prob = torch.tensor(
        [[1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 0.5, 0.5], [1e-3, 1e-3, 0.5, 0.5, 0.5, 0.5, 0.5]]
    )
    entropy = torch.tensor(
        [[1.0, 2.0, 3.0, 4.0, 5.0, 0.1, 0.2], [0.1, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1]]
    )
    return inputs_for(
        mask, advantages=torch.tensor([1.0, -1.0]), logprob=prob.log(), entropy=entropy
    )


def test_stapo_silences_exactly_the_three_condition_tokens():
    inputs = stapo_case()
    got = select_tokens("stapo", inputs)
    # Low-prob positive tokens have H = 1..5; the 0.75 quantile is 4, so H < 4 is silenced.
    silenced = inputs.response_mask & ~got
    assert torch.nonzero(silenced).tolist() == [[0, 0], [0, 1], [0, 2]]


def test_stapo_each_condition_on_its_own():
    inputs = stapo_case()
    got = select_tokens("stapo", inputs)
    assert bool(got[0, 5]) and bool(got[0, 6])  # low entropy but probable: kept
    assert bool(got[1, 0]) and bool(got[1, 1])  # improbable, low entropy, but A < 0: kept
    assert bool(got[0, 3]) and bool(got[0, 4])  # improbable, A > 0, but entropy >= tau_h: kept
    # Raising tau_p makes the probable tokens of row 0 candidates too.
    loose = select_tokens("stapo", inputs, tau_p=0.9)
    assert not bool(loose[0, 5])


def test_stapo_with_no_candidates_keeps_everything():
    inputs = stapo_case()
    inputs = SelectionInputs(
        inputs.response_mask, -inputs.advantages.abs(), inputs.logprob, inputs.entropy
    )
    assert torch.equal(select_tokens("stapo", inputs), inputs.response_mask)


def test_ict_per_sequence_counts_and_warmup():
    gen = torch.Generator().manual_seed(0)
    mask = lengths_mask([30, 31, 9, 1], 31)
    js = torch.rand(4, 31, generator=gen) * math.log(2)
    for step in range(10):
        assert torch.equal(select_tokens("ict", inputs_for(mask, js=js, step=step)), mask)
    got = select_tokens("ict", inputs_for(mask, js=js, step=10))
    assert got.sum(1).tolist() == [3, 4, 1, 1]
    for b in range(4):  # the selected are the largest of their row
        sel, rest = js[b][got[b]], js[b][mask[b] & ~got[b]]
        assert rest.numel() == 0 or float(sel.min()) >= float(rest.max())
    low = select_tokens("ict", inputs_for(mask, js=js, step=10), highest=False, rho=0.9)
    assert low.sum(1).tolist() == [27, 28, 9, 1]
    assert float(js[0][low[0]].max()) <= float(js[0][mask[0] & ~low[0]].min())
    assert torch.equal(select_tokens("ict", inputs_for(mask, js=js), warmup_steps=0), got)


def test_random_control_matches_ict_size_and_is_seeded():
    mask = lengths_mask([30, 31, 9, 1], 31)
    js = torch.rand(4, 31)

    def run(seed):
        inputs = inputs_for(mask, step=10, generator=torch.Generator().manual_seed(seed))
        return select_tokens("random", inputs)

    ict_mask = select_tokens("ict", inputs_for(mask, js=js, step=10))
    assert torch.equal(run(1).sum(1), ict_mask.sum(1))
    assert torch.equal(run(1), run(1))
    assert not torch.equal(run(1), run(2))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("name", ["grpo", "entropy", "stapo", "ict", "random"])
def test_every_rule_selects_a_subset_of_the_response(name, seed):
    gen = torch.Generator().manual_seed(seed)
    B, T = 8, 20
    mask = lengths_mask(torch.randint(0, T + 1, (B,), generator=gen).tolist(), T)
    inputs = SelectionInputs(
        response_mask=mask,
        advantages=torch.randn(B, generator=gen),
        logprob=-torch.rand(B, T, generator=gen) * 10,
        entropy=torch.rand(B, T, generator=gen) * 3,
        js=torch.rand(B, T, generator=gen) * 0.6,
        step=20,
        generator=gen,
    )
    got = select_tokens(name, inputs)
    assert got.dtype == torch.bool and got.shape == mask.shape
    assert not bool((got & ~mask).any())


# -------------------------------------------------------------------------- registry


def test_registry_lists_the_paper_methods_with_defaults():
    rules = available_selections()
    assert {"grpo", "entropy", "stapo", "ict", "random"} <= set(rules)
    assert rules["ict"].defaults == {
        "rho": 0.1,
        "scope": "sequence",
        "warmup_steps": 10,
        "highest": True,
    }
    assert rules["entropy"].defaults == {"rho": 0.2, "scope": "batch"}
    assert rules["stapo"].defaults == {"tau_p": 0.002, "quantile": 0.75}
    assert rules["ict"].needs == frozenset({"js"})


def test_unknown_method_lists_valid_ones():
    with pytest.raises(
        ConfigError,
        match="unknown token-selection method 'ictt'; valid: entropy, grpo, grpo-lr4, ict",
    ):
        get_selection("ictt")


@pytest.mark.parametrize("rho", [0.0, -0.1, 1.5, float("nan")])
@pytest.mark.parametrize("name", ["entropy", "ict", "random"])
def test_rho_outside_unit_interval_is_rejected(name, rho):
    mask = lengths_mask([4], 4)
    inputs = inputs_for(mask, entropy=torch.rand(1, 4), js=torch.rand(1, 4), step=0)
    with pytest.raises(ValueError, match=r"rho must be in \(0, 1\]"):
        select_tokens(name, inputs, rho=rho)


def test_unknown_hyperparameter_and_missing_statistic_are_named():
    mask = lengths_mask([4], 4)
    with pytest.raises(
        TypeError, match=r"no hyperparameter\(s\) \['rhoo'\]; valid: \['highest', 'rho'"
    ):
        select_tokens("ict", inputs_for(mask), rhoo=0.2)
    with pytest.raises(ValueError, match="'ict' needs 'js'"):
        select_tokens("ict", inputs_for(mask, step=99))
    with pytest.raises(TypeError, match="response_mask must be a bool"):
        select_tokens("grpo", inputs_for(mask.float()))


@pytest.fixture
def scratch_registry(monkeypatch):
    monkeypatch.setattr(selection, "_REGISTRY", dict(selection._REGISTRY))


def test_user_rule_registers_and_bad_outputs_are_caught(scratch_registry):
    @register_selection("lowprob", needs=("logprob",))
    def lowprob(inputs, *, rho: float = 0.5):
        """Lowest-probability tokens."""
        return top_fraction_mask(-inputs.logprob, inputs.response_mask, rho)

    mask = lengths_mask([4, 2], 4)
    logprob = torch.tensor([[-1.0, -5.0, -2.0, -9.0], [-3.0, -1.0, 0.0, 0.0]])
    got = select_tokens("lowprob", inputs_for(mask, logprob=logprob))
    assert torch.nonzero(got).tolist() == [[0, 1], [0, 3], [1, 0]]
    assert get_selection("lowprob").description == "Lowest-probability tokens."

    register_selection("floaty")(lambda inputs: inputs.response_mask.float())
    with pytest.raises(TypeError, match=r"'floaty' must return a torch.bool tensor"):
        select_tokens("floaty", inputs_for(mask))
    register_selection("wide")(lambda inputs: torch.ones(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"'wide' returned shape \[2, 5\], expected \[2, 4\]"):
        select_tokens("wide", inputs_for(mask))
    register_selection("leaky")(lambda inputs: torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="'leaky' selected tokens outside the response mask"):
        select_tokens("leaky", inputs_for(mask))
    with pytest.raises(ValueError, match="already registered"):
        register_selection("grpo")(lambda inputs: inputs.response_mask)
    with pytest.raises(TypeError, match="must be keyword-only with a default"):
        register_selection("positional")(lambda inputs, rho: inputs.response_mask)


def test_the_positive_control_is_dense_grpo_at_a_quarter_of_the_learning_rate():
    from ictrepro.presets import train_preset

    rule = available_selections()["grpo-lr4"]
    mask = torch.tensor([[True, True, False], [True, False, False]])
    inputs = SelectionInputs(response_mask=mask, advantages=torch.tensor([1.0, -1.0]), step=5)
    assert torch.equal(select_tokens("grpo-lr4", inputs), mask)
    assert rule.lr_scale == 0.25 and available_selections()["grpo"].lr_scale == 1.0
    grpo = train_preset("tiny", method="grpo")
    assert train_preset("tiny", method="grpo-lr4").rl.lr == grpo.rl.lr / 4
    # A learning rate given on the command line is scaled too.
    given = train_preset("tiny", method="grpo-lr4", overrides={"rl.lr": 1e-3})
    assert given.rl.lr == pytest.approx(2.5e-4)
    with pytest.raises(ValueError, match="lr_scale"):
        register_selection("bad_scale", lr_scale=0.0)
