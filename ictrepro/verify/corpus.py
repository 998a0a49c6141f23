"""A corpus of graded-to-be responses, for checking the verifier's fast path and timing it.

Each problem's gold answer is answered in model style (``... The answer is \\boxed{X}.``,
``The answer is $X$.``, GSM8K ``#### X``, an earlier box corrected by a later one), with X
the gold itself, rewritten forms of it (``\\dfrac``, a decimal, ``1,000``, a sign, percent,
a unit, a leading zero, a trailing period, a fraction for an integer, a root with its square
factor inside), perturbed values (off by one, reciprocal, another coefficient) and the gold
of another problem of the same set; plus a response without an answer, and any responses
the source brings with it (worked solutions, recorded model responses).

The variants are written from the gold's text with plain string rules, independently of
:mod:`~ictrepro.verify.quick`, so that the corpus does not share the fast path's blind spots.

Sources (:func:`build_corpus`): the real benchmark files of a data directory (every
benchmark found there) and the generated tiny suites (:mod:`ictrepro.data.verifier_corpus`),
and ``tests/data/smollm2_graded.jsonl`` (real responses of a small model) when given.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ictrepro.verify.pool import GradeRequest

REASONING = "We simplify step by step and check the result against the conditions. "
CHOICE_LETTERS = "ABCD"

_INTEGER = re.compile(r"-?\d+")
_DECIMAL = re.compile(r"-?\d+\.\d+")
_FRACTION = re.compile(r"(-?)\\[dt]?frac\{(\d+)\}\{(\d+)\}")
_ROOT = re.compile(r"(-?)(\d*)\\sqrt\{(\d+)\}")


@dataclass(frozen=True)
class Source:
    """The problems of one set: ``(gold, kind)`` pairs, and recorded responses
    ``(response, index of the problem)`` to grade too."""

    name: str
    golds: Sequence[tuple[str, str]]
    recorded: Sequence[tuple[str, int]] = ()


def _integer_variants(n: int) -> list[str]:
    return [
        f"{n:,}",
        f"{n}.0",
        f"{n}.00",
        f"{n}.5",
        f"{n}\\%",
        f"{n} \\text{{ cm}}",
        f"\\${n}",
        f"0{n}" if n >= 0 else f"-0{-n}",
        f"\\frac{{{2 * n}}}{{2}}",
        str(n + 1),
        str(n - 1),
        str(-n),
        str(10 * n),
        f"{n / 100:g}",
        f"{n * 1000 + 1:,}",
    ]


def _fraction_variants(sign: str, a: int, b: int) -> list[str]:
    other = "" if sign else "-"
    variants = [
        f"{sign}\\dfrac{{{a}}}{{{b}}}",
        f"{sign}\\frac{{{2 * a}}}{{{2 * b}}}",
        f"\\frac{{{sign}{a}}}{{{b}}}",
        f"{other}\\frac{{{a}}}{{{b}}}",
        f"{sign}{a}/{b}",
        f"{sign}\\frac{{{a + 1}}}{{{b}}}",
        f"{sign}{a / b:.6f}",
        f"{sign}{a / b:g}",
    ]
    if a:
        variants.append(f"{sign}\\frac{{{b}}}{{{a}}}")
    return variants


def _root_variants(sign: str, coefficient: int, radicand: int) -> list[str]:
    return [
        f"{sign}\\sqrt{{{coefficient * coefficient * radicand}}}",
        f"{sign}{coefficient + 1}\\sqrt{{{radicand}}}",
        f"{sign}{coefficient}\\sqrt{{{radicand + 1}}}",
        f"{sign}\\frac{{{2 * coefficient}\\sqrt{{{radicand}}}}}{{2}}",
        f"{sign}{coefficient * radicand**0.5:.6f}",
    ]


def answer_variants(gold: str) -> list[str]:
    """Rewritten and perturbed forms of a math gold answer (not all equal to it)."""
    text = gold.strip()
    variants = [f"{text}.", f" {text} ", text.replace("\\frac", "\\dfrac")]
    if _INTEGER.fullmatch(text):
        variants += _integer_variants(int(text))
    elif _DECIMAL.fullmatch(text):
        value = float(text)
        variants += [f"{text}0", f"{value:g}", f"{value + 0.1:g}", f"{-value:g}", f"{value}\\%"]
    elif fraction := _FRACTION.fullmatch(text):
        variants += _fraction_variants(fraction[1], int(fraction[2]), int(fraction[3]))
    elif root := _ROOT.fullmatch(text):
        variants += _root_variants(root[1], int(root[2] or 1), int(root[3]))
    else:
        variants += [f"x = {text}", text.replace(" ", ""), f"{text} + 1", f"-{text}"]
    return list(dict.fromkeys(variants))


def _math_response(answer: str, rng: random.Random) -> str:
    body = REASONING * rng.randint(1, 3)
    style = rng.randrange(4)
    if style == 0:
        return f"{body}The answer is $\\boxed{{{answer}}}$."
    if style == 1:
        return f"{body}The answer is ${answer}$."
    if style == 2 and "\\" not in answer and "\n" not in answer:
        return f"{body}\n#### {answer}"
    return f"{body}At first \\boxed{{0}}, but checking again, \\boxed{{{answer}}}."


def _choice_responses(gold: str, other: str) -> list[str]:
    return [
        *(f"{REASONING}The answer is \\boxed{{{letter}}}." for letter in CHOICE_LETTERS),
        f"{REASONING}The answer is ({gold}).",
        f"{REASONING}So \\boxed{{\\text{{{other}}}}}.",
        f"{REASONING}I am not sure.",
    ]


def responses_for(source: Source, seed: int = 0) -> list[GradeRequest]:
    """Model-style responses for every problem of ``source`` (module docstring), in order."""
    rng = random.Random(f"{source.name}/{seed}")
    golds = list(source.golds)
    requests: list[GradeRequest] = []
    for i, (gold, kind) in enumerate(golds):
        # The gold of another problem of the set (the next one), as an answer to this one.
        other = golds[(i + 1) % len(golds)][0]
        if kind == "choice":
            requests += [GradeRequest(r, gold, kind) for r in _choice_responses(gold, other)]
            continue
        # A worked gold's first line is its answer (the responses below write no work).
        answer, other = gold.split("\n", 1)[0], other.split("\n", 1)[0]
        answers = [answer, other, *answer_variants(answer)]
        requests += [GradeRequest(_math_response(a, rng), gold, kind) for a in answers]
        requests.append(GradeRequest(f"{REASONING}I could not finish.", gold, kind))
    requests += [GradeRequest(response, *golds[i]) for response, i in source.recorded]
    return requests


def recorded_source(path: Path) -> Source:
    """Recorded responses of a JSON Lines file of ``{"response", "gold", "kind"}`` rows."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return Source(
        path.stem,
        [(row["gold"], row["kind"]) for row in rows],
        [(row["response"], i) for i, row in enumerate(rows)],
    )


def build_corpus(sources: Iterable[Source], seed: int = 0) -> dict[str, list[GradeRequest]]:
    """The corpus of each source, by name."""
    return {source.name: responses_for(source, seed) for source in sources}
