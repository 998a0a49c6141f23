"""The verifier's fast path: each quick rule by hand (both directions, and where it must
stay silent), random exact forms, the caches, and the whole path against math-verify on a
corpus of real benchmark answers, the tiny suites and recorded responses."""

from __future__ import annotations

import importlib
import os
import random
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest

from ictrepro.data.verifier_corpus import benchmark_sources, tiny_suite_sources
from ictrepro.verify import GradeRequest, Verdict, Verifier
from ictrepro.verify.corpus import build_corpus, recorded_source
from ictrepro.verify.grade import (
    DECIDED_BY,
    clear_caches,
    grade,
    grade_explained,
    grade_full,
    to_latex,
)
from ictrepro.verify.quick import ExactValue, exact_value, quick_verdict

DATA_DIR = Path(
    os.environ.get("ICTREPRO_DATA_DIR")
    or Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks"
)
RECORDED = Path(__file__).parent / "data" / "smollm2_graded.jsonl"
# The module, not the function ``ictrepro.verify.grade`` that the package exports.
grade_module = importlib.import_module("ictrepro.verify.grade")


def decide(answer: str, gold: str):
    return quick_verdict(to_latex(answer), to_latex(gold))


def full_verdict(answer: str, gold: str) -> Verdict:
    return grade_full(f"So \\boxed{{{answer}}}.", gold, kind="math")


# ----------------------------------------------------------------------- rules by hand

# (answer, gold, rule, correct): the quick rule that decides, and its verdict.
DECIDED = [
    ("42", "42", "same text", True),
    (
        "\\left( 3, \\frac{\\pi}{2} \\right)",
        "\\left( 3, \\frac{\\pi}{2} \\right)",
        "same text",
        True,
    ),
    ("\\text{(C)}", "\\text{(C)}", "same text", True),
    ("5.", "5", "same text", True),  # to_latex drops the trailing period on both
    ("1,000", "1000", "exact value", True),
    ("1000", "1,000", "exact value", True),
    ("1,001", "1000", "exact value", False),
    ("007", "7", "exact value", True),
    ("-0", "0", "exact value", True),
    ("-3", "3", "exact value", False),
    ("41", "42", "exact value", False),
    ("\\frac{2}{4}", "\\frac{1}{2}", "exact value", True),
    ("\\dfrac{3}{4}", "\\frac{3}{4}", "exact value", True),
    ("\\tfrac{6}{3}", "2", "exact value", True),
    ("-\\frac{-3}{4}", "\\frac{3}{4}", "exact value", True),
    ("\\frac{-3}{4}", "-\\frac{3}{4}", "exact value", True),
    ("\\frac{3}{4}", "-\\frac{3}{4}", "exact value", False),
    ("\\frac{1}{3}", "\\frac{1}{2}", "exact value", False),
    ("\\frac{1000001}{1000000}", "1", "exact value", False),  # exact, however close
    ("\\sqrt{12}", "2\\sqrt{3}", "exact value", True),
    ("2\\sqrt{3}", "\\sqrt{12}", "exact value", True),
    ("\\frac{2\\sqrt{3}}{4}", "\\frac{\\sqrt{3}}{2}", "exact value", True),
    ("\\frac{-\\sqrt{2}}{2}", "-\\frac{\\sqrt{2}}{2}", "exact value", True),
    ("\\sqrt{4}", "2", "exact value", True),
    ("\\sqrt{4}", "3", "exact value", False),
    ("3\\sqrt{2}", "2\\sqrt{3}", "exact value", False),
    ("\\sqrt{3}", "\\frac{173}{100}", "exact value", False),
    ("\\sqrt{2}", "-\\sqrt{2}", "exact value", False),
]

# Left to math-verify: forms outside the rules, and roots too close to call.
UNDECIDED = [
    ("0.5", "\\frac{1}{2}"),
    ("3.50", "3.5"),
    ("3.5", "\\frac{7}{2}"),
    ("50\\%", "50"),
    ("0.5", "50\\%"),
    ("5 \\text{ cm}", "5"),
    ("\\$12", "12"),
    ("x = 5", "5"),
    ("1,00", "100"),  # latex2sympy reads this as the set {1, 0}
    ("0,500", "500"),  # ... and this as 0.5
    ("1234567890123", "123456789012"),  # longer than MAX_DIGITS
    ("\\sqrt{1000001}", "1000"),  # radicand above MAX_RADICAND
    ("\\sqrt{999999}", "\\sqrt{999998}"),  # roots closer than MIN_RELATIVE_GAP
    ("\\frac{1}{0}", "1"),
    ("0\\sqrt{3}", "0"),
    ("\\frac {1}{2}", "\\frac{1}{2}"),
]


@pytest.mark.parametrize(("answer", "gold", "rule", "correct"), DECIDED)
def test_quick_rule_decides_as_math_verify_does(answer, gold, rule, correct):
    decision = decide(answer, gold)
    assert decision is not None and (decision.rule, decision.correct) == (rule, correct)
    assert full_verdict(answer, gold) is (Verdict.CORRECT if correct else Verdict.WRONG)
    assert grade(f"So \\boxed{{{answer}}}.", gold, kind="math") is full_verdict(answer, gold)


@pytest.mark.parametrize(("answer", "gold"), UNDECIDED)
def test_quick_rules_leave_the_rest_to_math_verify(answer, gold):
    assert decide(answer, gold) is None
    verdict, decided_by = grade_explained(f"So \\boxed{{{answer}}}.", gold, kind="math")
    assert decided_by == "math-verify"
    assert verdict is full_verdict(answer, gold)


def test_hand_cases_cover_both_verdicts_of_both_rules():
    assert {(rule, correct) for _, _, rule, correct in DECIDED} == {
        ("same text", True),
        ("exact value", True),
        ("exact value", False),
    }


@pytest.mark.parametrize(
    ("latex", "value"),
    [
        ("$-12,345$", ExactValue(Fraction(-12345), 1, False)),
        ("$\\dfrac{6}{4}$", ExactValue(Fraction(3, 2), 1, False)),
        ("$-\\frac{-1}{3}$", ExactValue(Fraction(1, 3), 1, False)),
        ("$3\\sqrt{18}$", ExactValue(Fraction(9), 2, True)),
        ("$\\frac{\\sqrt{8}}{6}$", ExactValue(Fraction(1, 3), 2, True)),
        ("$\\sqrt{9}$", ExactValue(Fraction(3), 1, True)),
        ("42", None),  # not to_latex output
        ("$4.2$", None),
        ("$\\frac{1}{0}$", None),
        ("$12,34$", None),
        ("$2 \\sqrt{3}$", None),
    ],
)
def test_exact_value(latex, value):
    assert exact_value(latex) == value


def _random_value(rng: random.Random) -> tuple[str, int, int, int]:
    """``(sign, numerator, denominator, radicand)`` from a small set."""
    return (
        rng.choice(["", "", "-"]),
        rng.randint(0, 6),
        rng.choice([1, 1, 2, 3]),
        rng.choice([1, 1, 2, 3]),
    )


def _write_exact_form(value: tuple[str, int, int, int], rng: random.Random) -> str:
    """``value`` in one of the exact forms, chosen at random: e.g. 2/3 sqrt(2) as
    ``\\frac{4\\sqrt{8}}{12}``, 2 as ``\\dfrac{4}{2}``, -1/2 as ``\\frac{-1}{2}``."""
    sign, numerator, denominator, radicand = value
    scale = rng.choice([1, 1, 2, 3])
    if radicand == 1 or numerator == 0:
        if denominator * scale == 1:
            return f"{sign}{numerator}"
        frac = rng.choice(["frac", "dfrac"])
        top, bottom = numerator * scale, denominator * scale
        if rng.random() < 0.3:
            return f"\\{frac}{{{sign}{top}}}{{{bottom}}}"
        return f"{sign}\\{frac}{{{top}}}{{{bottom}}}"
    inside = rng.choice([1, 2])  # a square factor inside the root: sqrt(8) = 2 sqrt(2)
    coefficient, bottom = numerator * scale, denominator * inside * scale
    root = f"{coefficient if coefficient != 1 else ''}\\sqrt{{{radicand * inside * inside}}}"
    return f"{sign}{root}" if bottom == 1 else f"{sign}\\frac{{{root}}}{{{bottom}}}"


def _random_exact_form(rng: random.Random) -> str:
    return _write_exact_form(_random_value(rng), rng)


def test_random_exact_forms_decide_as_math_verify_does():
    """Pairs of random exact forms: half of them one value written twice (often differently)."""
    rng = random.Random(0)
    pairs = []
    for _ in range(80):
        value = _random_value(rng)
        pairs.append((_write_exact_form(value, rng), _write_exact_form(value, rng)))
        pairs.append((_random_exact_form(rng), _random_exact_form(rng)))
    outcomes = Counter()
    for answer, gold in pairs:
        decision = decide(answer, gold)
        assert decision is not None, (answer, gold)
        expected = full_verdict(answer, gold)
        assert expected.is_correct == decision.correct, (answer, gold, decision)
        outcomes[decision.rule, decision.correct] += 1
    assert min(outcomes.values()) >= 5 and len(outcomes) == 3, outcomes


def test_exact_form_golds_are_gradable_without_being_parsed():
    """The fast path skips parsing a gold of an exact form; math-verify can always read it."""
    rng = random.Random(1)
    for gold in {_random_exact_form(rng) for _ in range(40)}:
        assert grade_module._parse_gold(gold) is not None, gold


def test_caches_give_identical_verdicts():
    """Grading twice (gold forms, parsed golds and exact values cached) and again with every
    cache emptied gives the same verdicts."""
    rng = random.Random(2)
    forms = [_random_exact_form(rng) for _ in range(15)] + ["5 \\text{ cm}", "0.5", "x = 2"]
    requests = [(f"The answer is \\boxed{{{a}}}.", g) for a in forms for g in forms[:6]]
    first = [grade(r, g, kind="math") for r, g in requests]
    assert [grade(r, g, kind="math") for r, g in requests] == first
    clear_caches()
    assert grade_module._parse_gold.cache_info().currsize == 0
    assert [grade(r, g, kind="math") for r, g in requests] == first
    assert [grade_full(r, g, kind="math") for r, g in requests] == first


def test_grade_explained_names_what_decided():
    cases = {
        ("\\boxed{B}", "B", "choice"): "letter",
        ("Turn up: 2. \\boxed{2}", "2\nTurn up: 1,2.", "worked"): "work missing",
        ("\\boxed{5}", "???", "math"): "ungradable gold",
        ("no answer here", "5", "math"): "no answer",
        ("\\boxed{x^2}", "x^2", "math"): "same text",
        ("\\boxed{6}", "5", "math"): "exact value",
        ("\\boxed{0.5}", "\\frac{1}{2}", "math"): "math-verify",
        ("\\boxed{9^{9^{9}}}", "5", "math"): "time limit",
    }
    for (response, gold, kind), expected in cases.items():
        assert grade_explained(response, gold, kind=kind, timeout_s=0.5)[1] == expected
    assert set(cases.values()) == set(DECIDED_BY)


# ------------------------------------------------------------------------------ corpus


def corpus_sources(with_benchmarks: bool = True):
    sources = [*tiny_suite_sources(), recorded_source(RECORDED)]
    if with_benchmarks and (DATA_DIR / "math500" / "test.jsonl").is_file():
        sources = benchmark_sources(DATA_DIR) + sources
    return sources


def assert_fast_path_agrees(corpus: dict[str, list[GradeRequest]], workers: int) -> Counter:
    """Grade every request with the fast and the full path; they must agree everywhere.
    A generous time limit, so that a loaded machine cannot turn a verdict into TIMEOUT."""
    requests = [r for source in corpus.values() for r in source]
    with Verifier(workers=workers, timeout_s=30.0) as fast:
        fast_verdicts = fast.grade_many(requests)
    with Verifier(workers=workers, timeout_s=30.0, grade_fn=grade_full) as full:
        full_verdicts = full.grade_many(requests)
    differ = [
        (r.gold, r.response[-60:], f.value, g.value)
        for r, f, g in zip(requests, fast_verdicts, full_verdicts, strict=True)
        if f is not g
    ]
    assert not differ, f"{len(differ)} of {len(requests)} verdicts differ: {differ[:10]}"
    return Counter(fast_verdicts)


def test_fast_path_agrees_with_math_verify_on_a_sample_of_the_corpus():
    """Every 80th response of every source (the slow test below grades all of them)."""
    if not (DATA_DIR / "math500" / "test.jsonl").is_file():
        print(f"benchmark files not found at {DATA_DIR}: tiny suites and recorded responses only")
    corpus = {name: rs[::80] for name, rs in build_corpus(corpus_sources()).items()}
    counts = assert_fast_path_agrees(corpus, workers=0)
    # Both verdicts in numbers, with or without the benchmark files (without: 95 and 29).
    assert counts[Verdict.CORRECT] >= 20 and counts[Verdict.WRONG] >= 20, counts


@pytest.mark.slow
def test_fast_path_agrees_with_math_verify_on_the_whole_corpus():
    if not (DATA_DIR / "math500" / "test.jsonl").is_file():
        pytest.skip(
            f"shared benchmark files not found at {DATA_DIR} (set ICTREPRO_DATA_DIR to the "
            "folder holding math500/, gsm8k/, ...)"
        )
    corpus = build_corpus(corpus_sources())
    assert {"math500", "gsm8k", "gsm8k_train", "mmlu_stem", "aime24", "aime25", "amc23"} <= set(
        corpus
    )
    counts = assert_fast_path_agrees(corpus, workers=2)
    verdicts = {v.value: n for v, n in counts.items()}
    print(f"\ncorpus: {sum(counts.values())} responses, verdicts {verdicts}, none differ")
