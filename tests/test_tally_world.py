"""The tally world: its subsets, gold and token budget, that its responses stay in step
whichever way they turn, and that its control leaves the budget of its verb."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter

import pytest

from ictrepro.data.prompts import gold_of, render_prompt
from ictrepro.data.records import Problem
from ictrepro.data.suites import (
    FORK_DIAL,
    FORK_REACH,
    FORK_SUBSETS,
    TALLY_CONTROL_MAX_NEW_TOKENS,
    TALLY_CONTROL_VERB,
    TALLY_DIALS,
    TALLY_MAX_NEW_TOKENS,
    TALLY_VERB_UP,
    fork_strategy,
    generate_suite,
    tally_count,
    tally_line,
    tally_problem_parts,
)
from ictrepro.models.tokenizer import train_tokenizer
from ictrepro.presets import get_preset, train_preset
from ictrepro.stages.prepare import tokenizer_corpus
from ictrepro.train.forks import fork_position
from ictrepro.verify.grade import Verdict, grade

_TEXT = "Dial A shows 4. Turn it to 0: 6 steps up or 4 down."


@pytest.fixture(scope="module")
def tokenizer():
    """The tiny tokenizer as prepare trains it on the tally world's text."""
    problems = []
    for subset in FORK_SUBSETS:
        suite = f"tiny-fork-tally-{subset}"
        problems += generate_suite(suite, seed=0, n_train=200, n_test=0)["train"]
    return train_tokenizer(tokenizer_corpus(problems), vocab_size=1024)


def _response(verb: str, strategy: int, n: int, answer: int = 7) -> str:
    """A response that counts ``n`` steps turning ``strategy``'s way."""
    return f"{verb} {tally_line(answer, list(range(1, n + 1)), strategy)}"


def test_a_count_by_hand():
    assert tally_count(3, 8, 0) == [1, 2, 3, 4, 5]
    assert tally_count(3, 8, 1) == [1, 2, 3, 4, 5]
    assert tally_count(9, 0, 0) == [1]
    assert tally_count(9, 0, 1) == list(range(1, 10))
    assert tally_count(2, 0, 0) == list(range(1, 9))
    assert tally_problem_parts("Dial C shows 3. Turn it to 8: 5 steps up or 5 down.") == (
        "C",
        3,
        8,
    )
    assert tally_line(8, [1, 2], 1) == "down: \\boxed{8} in 1,2."
    with pytest.raises(ValueError, match="not a tally-world problem"):
        tally_problem_parts("The dial shows 3. Turn it to 8 in steps of 7.")


def test_each_subset_holds_the_distances_its_name_says_and_the_verb_leans():
    """Every solution counts the steps of the direction it names; the subsets hold the
    distances their names say; and the direction drawn follows the verb's lean."""
    turns = Counter()
    for subset, distances in FORK_SUBSETS.items():
        problems = generate_suite(f"tiny-fork-tally-{subset}", seed=3, n_train=400, n_test=48)
        assert len({p.problem for p in problems["test"]}) == 48
        for p in problems["train"] + problems["test"]:
            dial, start, target = tally_problem_parts(p.problem)
            assert dial in TALLY_DIALS and p.answer == str(target)
            assert len(tally_count(start, target, 0)) in distances
            strategy = fork_strategy(p.solution)
            verb = p.solution.split(" ")[0]
            assert verb in TALLY_VERB_UP
            count = [int(c) for c in p.solution.split(" in ")[1].rstrip(".").split(",")]
            assert count == tally_count(start, target, strategy)
            up = len(tally_count(start, target, 0))
            assert p.problem.endswith(f": {up} steps up or {FORK_DIAL - up} down.")
            assert grade(p.solution, gold_of(p)[0], kind="worked") == Verdict.CORRECT
            turns[verb, strategy] += 1
    for verb, up in TALLY_VERB_UP.items():
        share = turns[verb, 0] / (turns[verb, 0] + turns[verb, 1])
        assert abs(share - up) < 0.05, (verb, share)


def test_an_answer_counts_only_after_the_count_of_the_direction_it_names():
    problem = Problem("p", _TEXT, "0", meta={"family": "fork-tally-both"})
    gold, kind = gold_of(problem)
    lines = ["up: \\boxed{0} in 1,2,3,4,5,6.", "down: \\boxed{0} in 1,2,3,4."]
    assert kind == "worked" and gold.split("\n") == ["0", *lines]
    cases = {
        _response("Spin", 0, 6, answer=0): Verdict.CORRECT,
        _response("Roll", 1, 4, answer=0): Verdict.CORRECT,
        _response("Spin", 1, 4, answer=9): Verdict.WRONG,
        _response("Spin", 1, 6, answer=0): Verdict.WRONG,
        _response("Spin", 0, 5, answer=0): Verdict.WRONG,
    }
    for response, verdict in cases.items():
        assert grade(response, gold, kind=kind) == verdict, response


def test_the_budget_separates_the_subsets_whatever_the_verb(tokenizer):
    for verb in TALLY_VERB_UP:
        for n in range(1, FORK_DIAL):
            for strategy in (0, 1):
                text = _response(verb, strategy, n)
                length = len(tokenizer(text, add_special_tokens=False)["input_ids"])
                assert (length <= TALLY_MAX_NEW_TOKENS) == (n <= FORK_REACH), (text, length)


def test_responses_stay_in_step_whichever_way_they_turn(tokenizer):
    """Group JS compares tokens at one position: two responses of one problem hold the
    same tokens at every position but the verb's word, the fork and the end of the
    shorter count."""
    rng = random.Random(0)
    for _ in range(50):
        n_up = rng.randrange(1, FORK_DIAL)
        a, b = rng.sample(list(TALLY_VERB_UP), 2)
        up = tokenizer(_response(a, 0, n_up), add_special_tokens=False)["input_ids"]
        down = tokenizer(_response(b, 1, FORK_DIAL - n_up), add_special_tokens=False)["input_ids"]
        fork_up, _ = fork_position(up, _response(a, 0, n_up), tokenizer)
        fork_down, _ = fork_position(down, _response(b, 1, FORK_DIAL - n_up), tokenizer)
        assert fork_up == fork_down
        shorter = min(len(up), len(down))
        differ = [t for t in range(shorter) if up[t] != down[t]]
        assert fork_up == 1 and differ[:2] == [0, 1]
        assert all(t >= shorter - 2 for t in differ[2:]), differ


def test_the_control_prefix_leaves_the_budget_of_its_verb(tokenizer):
    problem = Problem("p", _TEXT, "0", meta={"family": "fork-tally-both"})
    prefixed = dataclasses.replace(
        problem, meta={**problem.meta, "response_prefix": TALLY_CONTROL_VERB}
    )
    ids = tokenizer(render_prompt(problem, tokenizer), add_special_tokens=False)["input_ids"]
    both = tokenizer(render_prompt(prefixed, tokenizer), add_special_tokens=False)["input_ids"]
    opening = tokenizer(TALLY_CONTROL_VERB, add_special_tokens=False)["input_ids"]
    assert both == ids + opening
    assert len(opening) == TALLY_MAX_NEW_TOKENS - TALLY_CONTROL_MAX_NEW_TOKENS
    for n in range(1, FORK_DIAL):
        whole = _response(TALLY_CONTROL_VERB, 1, n)
        rest = whole.removeprefix(TALLY_CONTROL_VERB)
        rest_ids = tokenizer(rest, add_special_tokens=False)["input_ids"]
        assert tokenizer(whole, add_special_tokens=False)["input_ids"] == opening + rest_ids
        assert (len(rest_ids) <= TALLY_CONTROL_MAX_NEW_TOKENS) == (n <= FORK_REACH)
        # The control's response opens with the fork; it is found with the prompt's prefix.
        assert fork_position(rest_ids, rest, tokenizer) is None
        assert fork_position(rest_ids, rest, tokenizer, TALLY_CONTROL_VERB) == (0, 1)
        assert gold_of(prefixed)[0].split("\n")[0] == "0"


def test_the_presets_differ_only_in_the_prefix_and_its_budget():
    world, control = get_preset("tiny-fork-tally"), get_preset("tiny-fork-tally0")
    assert world.prepare.data.rl_suite == "tiny-fork-tally-mix"
    assert world.eval.benchmarks == tuple(f"tiny-fork-tally-{s}" for s in FORK_SUBSETS)
    assert control.prepare.data.response_prefix == TALLY_CONTROL_VERB
    assert world.prepare.data.response_prefix == ""
    same_data = dataclasses.replace(control.prepare.data, response_prefix="")
    assert same_data == world.prepare.data
    assert control.train.rl.max_new_tokens == TALLY_CONTROL_MAX_NEW_TOKENS
    assert world.train.rl.max_new_tokens == TALLY_MAX_NEW_TOKENS


@pytest.mark.parametrize("name", ["tiny-fork-tally", "tiny-fork-tally0"])
def test_the_lr10_presets_share_the_world_at_a_tenth_of_the_step(name):
    base, slow = get_preset(name), get_preset(f"{name}-lr10")
    # The same prepare config: the same world, so one prepared folder serves both.
    assert slow.prepare == base.prepare
    assert slow.eval == base.eval and slow.seeds == base.seeds and slow.methods == base.methods
    assert slow.train.rl == dataclasses.replace(base.train.rl, lr=base.train.rl.lr * 0.1)
    for method, scale in (("grpo", 0.1), ("ict", 0.1), ("grpo-lr4", 0.025)):
        rl = train_preset(f"{name}-lr10", method=method).rl
        assert rl.lr == pytest.approx(base.train.rl.lr * scale, rel=1e-12)
