"""Synthetic suites: deterministic, disjoint splits, self-consistent answers, real verifier."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from ictrepro.data.records import Problem
from ictrepro.data.suites import SUITES, generate_suite, option_letter
from ictrepro.errors import ConfigError
from ictrepro.verify import Verdict, grade

N_TRAIN, N_TEST = 300, 60
CHOICE_SUITES = ["tiny-gpqa", "tiny-mmlu-stem"]
#: tiny-mix holds both kinds (every evaluation family).
MATH_SUITES = sorted(set(SUITES) - set(CHOICE_SUITES) - {"tiny-mix"})


@pytest.fixture(scope="module", params=sorted(SUITES))
def suite(request):
    return request.param, generate_suite(request.param, seed=3, n_train=N_TRAIN, n_test=N_TEST)


def test_deterministic_per_seed_and_seed_matters(suite):
    name, splits = suite
    again = generate_suite(name, seed=3, n_train=N_TRAIN, n_test=N_TEST)
    assert again == splits
    other = generate_suite(name, seed=4, n_train=N_TRAIN, n_test=N_TEST)
    assert [p.problem for p in other["test"]] != [p.problem for p in splits["test"]]


def test_splits_are_disjoint_and_ids_unique(suite):
    _, splits = suite
    assert len(splits["train"]) == N_TRAIN and len(splits["test"]) == N_TEST
    assert not {p.problem for p in splits["train"]} & {p.problem for p in splits["test"]}
    ids = [p.id for split in splits.values() for p in split]
    assert len(ids) == len(set(ids))


def last_box(text: str) -> str:
    return re.findall(r"\\boxed\{(.*)\}", text)[-1]


def test_solution_ends_in_the_gold_answer(suite):
    _, splits = suite
    for p in splits["test"] + splits["train"][:50]:
        assert last_box(p.solution) == p.answer, p


@pytest.mark.parametrize("name", CHOICE_SUITES)
def test_multiple_choice_is_consistent(name):
    splits = generate_suite(name, seed=3, n_train=N_TRAIN, n_test=N_TEST)
    for p in splits["test"]:
        assert p.answer in "ABCD" and len(p.choices) == 4 and len(set(p.choices)) == 4
        # The worked solution's last computed number is the option the gold letter names.
        value = re.findall(r"= (-?\d+)\.", p.solution)[-1]
        assert p.choices["ABCD".index(p.answer)] == value
        wrong = [c for c in p.choices if c != value]
        assert len(wrong) == 3
        # Every option sits at the letter its last digit fixes, so only the value decides.
        assert [option_letter(int(c)) for c in p.choices] == list("ABCD")
        assert f"Last digit {value[-1]}: option {p.answer}." in p.solution


@pytest.mark.parametrize("name", CHOICE_SUITES)
def test_multiple_choice_letters_are_balanced(name):
    """A guess that ignores the question scores chance: each letter is gold ~25% of the time."""
    train = generate_suite(name, seed=5, n_train=2000, n_test=8)["train"]
    counts = Counter(p.answer for p in train)
    # Binomial(2000, 1/4): a standard deviation is ~19 problems; 5 of them is ~95 problems.
    assert all(abs(counts[letter] - len(train) / 4) < 95 for letter in "ABCD"), counts


def test_option_letter_by_hand():
    assert [option_letter(v) for v in (0, 11, 22, 33, 44, 105, 7766, 37, 8, 19)] == list(
        "ABCDABCDAB"
    )


@pytest.mark.parametrize("name", MATH_SUITES)
def test_gold_verifies_against_itself_through_the_verifier(name):
    splits = generate_suite(name, seed=3, n_train=N_TRAIN, n_test=N_TEST)
    assert all(p.choices is None for p in splits["test"])
    answers = [p.answer for p in splits["test"]]
    for p in splits["test"]:
        assert grade(f"\\boxed{{{p.answer}}}", p.answer, kind="math") == Verdict.CORRECT, p
        assert grade(p.solution, p.answer, kind="math") == Verdict.CORRECT, p
    # ... and a different problem's answer is not accepted (unless the values coincide).
    shifted = answers[1:] + answers[:1]
    accepted = sum(
        grade(f"\\boxed{{{b}}}", a, kind="math") == Verdict.CORRECT
        for a, b in zip(answers, shifted, strict=True)
    )
    coincide = sum(a == b for a, b in zip(answers, shifted, strict=True))
    assert accepted <= coincide + 0.1 * len(answers)


@pytest.mark.parametrize("name", CHOICE_SUITES)
def test_gold_letter_verifies_and_every_wrong_letter_does_not(name):
    splits = generate_suite(name, seed=3, n_train=N_TRAIN, n_test=N_TEST)
    for p in splits["test"]:
        assert grade(p.solution, p.answer, kind="choice") == Verdict.CORRECT, p
        for letter in set("ABCD") - {p.answer}:
            assert grade(f"\\boxed{{{letter}}}", p.answer, kind="choice") == Verdict.WRONG


def test_exclude_keeps_given_texts_out_of_both_splits():
    first = generate_suite("tiny-gsm8k", seed=0, n_train=50, n_test=50)
    banned = {p.problem for p in first["test"][:25] + first["train"][:25]}
    again = generate_suite("tiny-gsm8k", seed=0, n_train=50, n_test=50, exclude=banned)
    assert not banned & {p.problem for split in again.values() for p in split}


def test_records_round_trip_json(suite):
    _, splits = suite
    for p in splits["test"][:10]:
        assert Problem.from_json(p.to_json()) == p


def test_bad_names_and_seeds():
    with pytest.raises(
        ConfigError, match="unknown suite 'tiny-gsm9k'; valid: tiny-gsm8k, tiny-math500"
    ):
        generate_suite("tiny-gsm9k", seed=0, n_train=1, n_test=1)
    with pytest.raises(TypeError, match="seed must be an integer"):
        generate_suite("tiny-gsm8k", seed="0", n_train=1, n_test=1)


def test_record_errors_name_the_field():
    with pytest.raises(ValueError, match="line 7: missing field 'answer'"):
        Problem.from_json({"id": "x", "problem": "p"}, where="line 7")
    with pytest.raises(ValueError, match="field 'answer' must be a string"):
        Problem.from_json({"id": "x", "problem": "p", "answer": 3})


def test_the_mix_draws_every_evaluation_family_in_turn():
    splits = generate_suite("tiny-mix", seed=3, n_train=70, n_test=0)
    generators = [p.meta["generator"] for p in splits["train"]]
    assert len(set(generators)) == 7 and generators[:7] == generators[7:14]
    for p in splits["train"]:
        kind = "choice" if p.choices else "math"
        assert grade(p.solution, p.answer, kind=kind) == Verdict.CORRECT, p
