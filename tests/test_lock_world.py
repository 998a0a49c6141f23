"""The lock world: its locks are hidden and fixed, its suites hold the locks and pools
their names say, only the lock's count is graded right, both counts fit the budget, the
responses stay in step, every verb is one token, and the mechanism control differs from
ICT only at the choice."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest
import torch

from ictrepro.algos.selection import SelectionInputs, select_tokens
from ictrepro.data.prompts import gold_of
from ictrepro.data.records import Problem
from ictrepro.data.suites import (
    FORK_DIAL,
    LOCK_DISTANCES,
    LOCK_EVAL_SUITES,
    LOCK_MAJORITY,
    LOCK_MAX_NEW_TOKENS,
    LOCK_VAL_SUITE,
    LOCK_VERBS,
    fork_strategy,
    lock_of,
    tally_count,
    tally_line,
    tally_problem_parts,
)
from ictrepro.models.tokenizer import train_tokenizer
from ictrepro.presets import LOCK_LR_GRID, LOCK_SCREENED, get_preset, train_preset
from ictrepro.stages.prepare import build_data, tokenizer_corpus, tokenizer_problems
from ictrepro.train.forks import choice_mask, fork_position
from ictrepro.verify.grade import Verdict, grade


@pytest.fixture(scope="module")
def world():
    """The lock world's data and tokenizer, as ``prepare`` builds them."""
    config = get_preset("tiny-lock-screen-2e-4").prepare
    data = build_data(config)
    corpus = tokenizer_corpus(tokenizer_problems(config, data))
    return data, train_tokenizer(corpus, vocab_size=config.model.vocab_size)


def _response(verb: str, strategy: int, n: int, answer: int) -> str:
    return f"{verb} {tally_line(answer, list(range(1, n + 1)), strategy)}"


def test_the_lock_is_a_fixed_hash_of_the_text_and_splits_evenly():
    text = "Dial C shows 4. Turn it to 0: 6 steps up or 4 down."
    assert lock_of(text) == lock_of(text)
    texts = [
        f"Dial {d} shows {s}. Turn it to {(s + u) % 10}: {u} steps up or {10 - u} down."
        for d in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
        for s in range(10)
        for u in LOCK_DISTANCES
    ]
    locks = Counter(lock_of(t)[0] for t in texts)
    pools = Counter(lock_of(t)[1] for t in texts)
    assert abs(locks[0] / len(texts) - 0.5) < 0.05
    assert abs(pools["val"] / len(texts) - 0.25) < 0.05
    # Unreadable from the prompt's numbers: within every (start, distance) both locks occur.
    by_numbers: dict[tuple[int, int], set[int]] = {}
    for t in texts:
        _, start, target = tally_problem_parts(t)
        by_numbers.setdefault((start, target), set()).add(lock_of(t)[0])
    assert all(v == {0, 1} for v in by_numbers.values())


def test_the_suites_hold_their_locks_and_pools_and_the_splits_are_disjoint(world):
    data, _ = world
    up, down, val = (data[f"test/{s}"] for s in (*LOCK_EVAL_SUITES, LOCK_VAL_SUITE))
    assert {lock_of(p.problem) for p in up} == {(0, "test")}
    assert {lock_of(p.problem) for p in down} == {(1, "test")}
    assert {lock_of(p.problem)[1] for p in val} == {"val"}
    held_out = {p.problem for p in up + down + val}
    assert len(held_out) == len(up) + len(down) + len(val)
    trained = {p.problem for p in data["sft"] + data["rl_train"]}
    assert not held_out & trained
    rl_up = sum(lock_of(p.problem)[0] == 0 for p in data["rl_train"]) / len(data["rl_train"])
    val_up = sum(lock_of(p.problem)[0] == 0 for p in val) / len(val)
    assert rl_up == pytest.approx(LOCK_MAJORITY, abs=0.01)
    assert val_up == pytest.approx(LOCK_MAJORITY, abs=0.05)


def test_warm_start_solutions_follow_their_verb_not_the_lock(world):
    data, _ = world
    turns: Counter = Counter()
    for p in data["sft"]:
        verb = p.solution.split(" ")[0]
        assert verb in LOCK_VERBS
        _, start, target = tally_problem_parts(p.problem)
        strategy = fork_strategy(p.solution)
        assert p.solution == _response(
            verb, strategy, len(tally_count(start, target, strategy)), target
        )
        turns[verb == "Turn", strategy] += 1
    assert turns[True, 1] == 0  # after Turn, always up
    roll_up = turns[False, 0] / (turns[False, 0] + turns[False, 1])
    assert abs(roll_up - 0.5) < 0.05
    share_up = (turns[True, 0] + turns[False, 0]) / len(data["sft"])
    assert abs(share_up - 0.85) < 0.02


def test_only_the_locks_count_is_graded_right():
    for lock in (0, 1):
        text = next(
            f"Dial {d} shows 4. Turn it to 9: 5 steps up or 5 down."
            for d in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
            if lock_of(f"Dial {d} shows 4. Turn it to 9: 5 steps up or 5 down.")[0] == lock
        )
        problem = Problem("p", text, "9", meta={"family": "fork-lock-up"})
        gold, kind = gold_of(problem)
        assert kind == "worked" and len(gold.split("\n")) == 2
        right = _response("Roll", lock, 5, 9)
        wrong = _response("Roll", 1 - lock, 5, 9)
        assert grade(right, gold, kind=kind) == Verdict.CORRECT
        assert grade(wrong, gold, kind=kind) == Verdict.WRONG
        assert grade(_response("Roll", lock, 4, 9), gold, kind=kind) == Verdict.WRONG


def test_every_verb_is_one_token_and_both_counts_fit_the_budget(world):
    _, tokenizer = world
    one = len(tokenizer("Turn up:", add_special_tokens=False)["input_ids"])
    for verb in LOCK_VERBS:
        assert len(tokenizer(f"{verb} up:", add_special_tokens=False)["input_ids"]) == one, verb
        for up in LOCK_DISTANCES:
            for strategy, n in ((0, up), (1, FORK_DIAL - up)):
                ids = tokenizer(_response(verb, strategy, n, 7), add_special_tokens=False)
                assert len(ids["input_ids"]) <= LOCK_MAX_NEW_TOKENS


def test_responses_stay_in_step_and_the_fork_is_the_second_token(world):
    _, tokenizer = world
    rng = random.Random(0)
    for _ in range(50):
        up = rng.choice(LOCK_DISTANCES)
        a, b = rng.sample(list(LOCK_VERBS), 2)
        texts = (_response(a, 0, up, 3), _response(b, 1, FORK_DIAL - up, 3))
        ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        assert [fork_position(i, t, tokenizer)[0] for i, t in zip(ids, texts, strict=False)] == [
            1,
            1,
        ]
        shorter = min(map(len, ids))
        differ = [t for t in range(shorter) if ids[0][t] != ids[1][t]]
        assert differ[:2] == [0, 1] and all(t >= shorter - 2 for t in differ[2:]), differ


def test_the_mechanism_control_differs_from_ict_only_at_the_choice():
    torch.manual_seed(0)
    B, T = 6, 20
    lengths = torch.tensor([20, 17, 12, 9, 20, 5])
    response = torch.arange(T)[None, :] < lengths[:, None]
    js = torch.rand(B, T) * 0.69
    choice = choice_mask([(1, 0), (1, 1), None, (3, 0), (25, 0), (1, 0)], response)
    assert choice.sum() == 4 and not choice[2].any() and not choice[4].any()
    # Make the choice the top-JS token where it is marked.
    js = torch.where(choice, torch.full_like(js, 0.7), js)
    inputs = SelectionInputs(response, torch.zeros(B), js=js, choice=choice, step=5)
    ict = select_tokens("ict", inputs, warmup_steps=0)
    control = select_tokens("ict-nochoice", inputs, warmup_steps=0)
    assert torch.equal(ict.sum(1), control.sum(1))
    assert not (control & choice).any() and (ict & choice).sum() == 4
    # Rows without a marked choice are ICT's; elsewhere the choice is swapped for the
    # highest-JS token ICT left out.
    for b in range(B):
        if not choice[b].any():
            assert torch.equal(ict[b], control[b])
            continue
        added = control[b] & ~ict[b]
        assert added.sum() == 1
        left_out = response[b] & ~ict[b]
        assert js[b][added].item() == js[b][left_out].max().item()
    with pytest.raises(ValueError, match="choice"):
        no_choice = SelectionInputs(response, torch.zeros(B), js=js, step=5)
        select_tokens("ict-nochoice", no_choice, warmup_steps=0)


def test_the_screening_presets_share_the_world_and_differ_in_the_rate():
    presets = [get_preset(f"tiny-lock-screen-{label}") for label in LOCK_LR_GRID]
    assert len({p.prepare for p in presets}) == 1
    assert [p.train.rl.lr for p in presets] == list(LOCK_LR_GRID.values())
    for p in presets:
        assert p.eval.benchmarks == (LOCK_VAL_SUITE,) and p.methods == LOCK_SCREENED
    rates = sorted(LOCK_LR_GRID.values())
    ratios = [b / a for a, b in itertools.pairwise(rates)]
    assert ratios == pytest.approx([10**0.5] * 2)


def test_a_method_lr_sets_that_methods_rate_and_the_control_still_scales():
    from ictrepro import presets as module

    preset = module._tiny_lock("x", LOCK_EVAL_SUITES, (0,), ("grpo",), 2e-4, {"ict": 2e-5})
    module._PRESETS["tiny-lock-test-only"] = lambda: preset
    try:
        assert train_preset("tiny-lock-test-only", method="ict").rl.lr == 2e-5
        assert train_preset("tiny-lock-test-only", method="grpo").rl.lr == 2e-4
        assert train_preset("tiny-lock-test-only", method="grpo-lr4").rl.lr == pytest.approx(5e-5)
        assert (
            train_preset("tiny-lock-test-only", method="ict", overrides={"rl.lr": 1e-4}).rl.lr
            == 1e-4
        )
    finally:
        del module._PRESETS["tiny-lock-test-only"]
