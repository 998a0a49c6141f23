"""Verdicts that are certain without math-verify: the verifier's fast path.

:func:`quick_verdict` compares an extracted answer with the gold answer, both already
normalised by :func:`~ictrepro.verify.grade.to_latex`, and decides correct or wrong
only where math-verify's own comparison (``verify`` on the ``parse`` of each, as
``grade`` calls them) is known to give the same verdict; otherwise ``None``, and the
caller runs math-verify. Two rules:

**Same text.** Equal normalised strings parse to equal lists (``parse`` is deterministic),
and math-verify compares a gradable gold's first expression with itself structurally
(``sympy_str_eq``) before anything else; where that raises (``nan``, ``zoo``) the string
items of both lists are equal and non-empty, which it accepts. So: ``CORRECT``, provided the
gold is gradable, which the caller has established.

**Exact value.** Both strings are one of these forms (the whole string, between ``$``):

- an integer: ``42``, ``-7``, ``007``, or with thousands separators ``12,345`` (exactly
  ``-?[1-9]\\d{0,2}(,\\d{3})+``; latex2sympy reads those as one number, and ``0,5`` as a
  decimal, so a leading 0 is not accepted);
- a fraction ``\\frac{a}{b}`` (also ``\\dfrac``, ``\\tfrac``) of integers, ``b > 0``;
- a root ``c\\sqrt{r}`` or ``\\frac{c\\sqrt{r}}{b}`` (``c`` optional), ``c, r > 0``;

each with an optional ``-`` in front, and for fractions in the numerator too. Their values
are computed exactly here (a rational times the square root of a square-free integer).
math-verify parses integers and fractions to sympy ``Integer``/``Rational`` (evaluated),
and roots to unevaluated products such as ``sqrt(12)`` or ``-1*2*sqrt(3)``. How it then
compares them (``sympy_expr_eq``, for expressions that are no relations, sets or symbols):

- when at least one side is a sympy number (the form has no root), by exact equality
  (``doit()`` then ``==``, then ``simplify(a - b).is_zero``): the verdict is exactly whether
  the values are equal;
- when both have roots, numerically: ``(a - b).evalf(15, chop=True) == 0``, then
  ``simplify(a - b).is_zero``. Equal values are equal there too; unequal values are
  certainly unequal only if they are far apart compared with 15 digits (``chop`` drops
  differences near ``2**-49``), so ``WRONG`` is returned only when they differ by more than
  ``MIN_RELATIVE_GAP`` of their size, and otherwise math-verify decides.

Decimals (``2.5``; math-verify rounds floats to 6 places and even reads ``0.5`` as
``\\frac{1}{2}``), percent, units, spaces, ``\\left``, sets, intervals and everything else
are left to math-verify. ``tests/test_verify_quick.py`` checks every rule against
math-verify, and the corpus test checks the whole path on real benchmark answers.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

MAX_DIGITS = 12
"""Longer numbers are left to math-verify: values stay exact in a float's range, and
``int()`` never meets its 4,300-digit limit."""
MAX_RADICAND = 10**6
"""Larger numbers under a root are left to math-verify (square factors found by trial division)."""
MIN_RELATIVE_GAP = 1e-6
"""Two values with roots are called unequal only when they differ by more than this share
of the larger (math-verify compares them to 15 digits)."""

_INT = rf"\d{{1,{MAX_DIGITS}}}"
_POSITIVE = rf"[1-9]\d{{0,{MAX_DIGITS - 1}}}"


def _root(prefix: str) -> str:
    """``c\\sqrt{r}`` with ``c`` optional, as named groups ``<prefix>coef``, ``<prefix>radicand``."""
    return rf"(?P<{prefix}coef>{_POSITIVE})?\\sqrt\{{(?P<{prefix}radicand>{_POSITIVE})\}}"


_EXACT_FORM = re.compile(
    r"\$(?P<sign>-?)(?:"
    rf"(?P<integer>{_INT}|[1-9]\d{{0,2}}(?:,\d{{3}}){{1,3}})"
    rf"|{_root('')}"
    r"|\\[dt]?frac\{(?P<num_sign>-?)"
    rf"(?:(?P<numerator>{_INT})|{_root('num_')})"
    rf"\}}\{{(?P<denominator>{_POSITIVE})\}}"
    r")\$"
)


class ExactValue(NamedTuple):
    """``rational * sqrt(radicand)``, ``radicand`` square-free (1 for a rational)."""

    rational: Fraction
    radicand: int
    has_root: bool
    """Written with ``\\sqrt``: math-verify keeps it unevaluated and compares numerically."""

    def as_float(self) -> float:
        return float(self.rational) * math.sqrt(self.radicand)


def _square_free(n: int) -> tuple[int, int]:
    """``(s, m)`` with ``n == s * s * m`` and ``m`` square-free."""
    outside, inside, p = 1, n, 2
    while p * p <= inside:
        while inside % (p * p) == 0:
            inside //= p * p
            outside *= p
        p += 1
    return outside, inside


@lru_cache(maxsize=65536)
def exact_value(latex: str) -> ExactValue | None:
    """The exact value of ``latex`` (output of ``to_latex``) if it is one of the forms of
    the module docstring, else ``None``."""
    form = _EXACT_FORM.fullmatch(latex)
    if form is None:
        return None
    parts = form.groupdict()
    sign = -1 if parts["sign"] else 1
    if parts["integer"] is not None:
        return ExactValue(Fraction(sign * int(parts["integer"].replace(",", ""))), 1, False)
    prefix = "" if parts["radicand"] is not None else "num_"
    if parts["denominator"] is not None:
        sign *= -1 if parts["num_sign"] else 1
        denominator = int(parts["denominator"])
    else:
        denominator = 1
    if parts[f"{prefix}radicand"] is None:  # a fraction of integers
        return ExactValue(Fraction(sign * int(parts["numerator"]), denominator), 1, False)
    if int(parts[f"{prefix}radicand"]) > MAX_RADICAND:
        return None
    outside, inside = _square_free(int(parts[f"{prefix}radicand"]))
    coefficient = int(parts[f"{prefix}coef"] or 1)
    return ExactValue(Fraction(sign * coefficient * outside, denominator), inside, True)


class QuickDecision(NamedTuple):
    correct: bool
    rule: str
    """``"same text"`` or ``"exact value"``."""


def quick_verdict(answer_latex: str, gold_latex: str) -> QuickDecision | None:
    """math-verify's verdict on answer against gold where it is certain without running it
    (module docstring), else ``None``. Both arguments are ``to_latex`` output; the gold must
    be gradable."""
    if answer_latex == gold_latex:
        return QuickDecision(True, "same text")
    gold, answer = exact_value(gold_latex), exact_value(answer_latex)
    if gold is None or answer is None:
        return None
    if (gold.rational, gold.radicand) == (answer.rational, answer.radicand):
        return QuickDecision(True, "exact value")
    if not (gold.has_root and answer.has_root):
        return QuickDecision(False, "exact value")
    gold_float, answer_float = gold.as_float(), answer.as_float()
    gap = abs(gold_float - answer_float)
    if gap > MIN_RELATIVE_GAP * max(1.0, abs(gold_float), abs(answer_float)):
        return QuickDecision(False, "exact value")
    return None
