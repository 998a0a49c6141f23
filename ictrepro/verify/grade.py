"""Grade one response against its gold answer, in the current process.

``grade`` returns a :class:`Verdict`. For ``kind="math"`` the answer is found with
:func:`~ictrepro.verify.extract.extract_answer`, and gold and prediction are compared by
value with math-verify (``\\frac{2}{4}`` equals ``\\frac{1}{2}``, ``2\\sqrt{3}`` equals
``\\sqrt{12}``). For ``kind="choice"`` the extracted letter must equal the gold letter.

What math-verify already handles, and is relied on: ``\\dfrac``/``\\tfrac``, thousands
separators ``1,000`` and ``1{,}000``, percent (``50\\%`` equals ``50`` and ``0.5``, both
ways), unit text after a number (``5 \\text{ cm}``, ``5\\,\\text{cm}``, ``5 \\mbox{cm}``), ``\\$``,
``x = 5`` against ``5``, and a trailing period inside ``$...$``. The light normalisation
added here (:func:`to_latex`, applied to gold and prediction alike):

- a trailing period is removed (math-verify reads ``\\boxed{5.}`` and ``\\frac{1}{2}.`` as
  unparsable strings);
- ``\\text{...}`` whose content starts with a number is unwrapped, so ``\\text{5 cm}`` reads
  as ``5 cm`` (math-verify would make it one symbol ``5cm``);
- a thin space between digit groups is dropped, so ``1\\,000`` is 1000 (not ``1*0``);
- text without math delimiters is wrapped in ``$...$``, so plain strings such as ``42``,
  ``-3``, ``\\frac{3}{4}`` and ``2\\sqrt{3}`` parse as LaTeX.

Fast path: math-verify's parse and comparison take milliseconds per answer (tens for roots
compared symbolically). Where the verdict is certain without them, they are skipped: an
answer whose normalised text equals the gold's, or an answer and a gold that are both plain
integers, fractions or simple roots, compared exactly (:mod:`~ictrepro.verify.quick` says
why each rule gives math-verify's verdict). A gold of those forms is known to be gradable,
so it is not parsed at all; any other gold is parsed once per process (cached).
:func:`grade_full` runs math-verify on every answer: the reference the fast path is tested
against (``tests/test_verify_quick.py``).

Time limit: the whole of one math grading (parsing gold and prediction, and comparing)
runs under one ``SIGALRM`` timer of ``timeout_s`` seconds (``setitimer``, so fractions of a
second work); math-verify's own per-call alarms are switched off so that they cannot
cancel it. Like math-verify, this needs the main thread of the process; use
:class:`~ictrepro.verify.pool.Verifier` with workers from anywhere else. A computation stuck
inside one long C call cannot be interrupted by a signal: only the worker pool's outer
deadline bounds that.

Enormous responses: a response longer than ``MAX_EXAMINED_CHARS`` (20,000) characters is
graded on its last ``TAIL_CHARS`` (4,000) characters only, where a final answer is, so
that brace matching and regular expressions cannot stall on it.
"""

from __future__ import annotations

import logging
import math
import re
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from functools import lru_cache
from typing import Any

from sympy.core.cache import clear_cache as clear_sympy_cache

from ictrepro.verify.extract import CHOICE_LETTERS, check_kind, extract_answer
from ictrepro.verify.quick import exact_value, quick_verdict

logger = logging.getLogger(__name__)

MAX_EXAMINED_CHARS = 20_000
TAIL_CHARS = 4_000


class Verdict(str, Enum):
    """Outcome of grading one response."""

    CORRECT = "correct"
    WRONG = "wrong"
    NO_ANSWER = "no_answer"
    """The response holds no extractable answer; counts as wrong for reward and pass@k."""
    UNGRADABLE = "ungradable"
    """The GOLD answer could not be parsed: a data problem, reported apart, never "wrong"."""
    TIMEOUT = "timeout"
    """Grading exceeded its time limit (or its worker died); counts as not correct."""

    @property
    def is_correct(self) -> bool:
        """True only for ``CORRECT``: every other verdict earns no reward."""
        return self is Verdict.CORRECT


# --------------------------------------------------------------------------- time limit


class _GradingTimeout(BaseException):
    """Raised by the alarm handler. A ``BaseException`` so that the many ``except
    Exception`` blocks inside math-verify and sympy cannot swallow it and keep computing."""


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError(
            "grade() with kind='math' must run in the main thread: its time limit uses "
            "SIGALRM, as math-verify does. From other threads use "
            "Verifier(workers=1 or more), which grades in worker processes."
        )
    armed = True

    def on_alarm(signum: int, frame: Any) -> None:
        if armed:  # an alarm delivered after the body finished must not raise
            raise _GradingTimeout

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        # Nested so that the handler is restored even if the alarm fires in between.
        try:
            armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)
        finally:
            signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)


class _DropDisabledTimeoutNotice(logging.Filter):
    """math-verify warns once per process that its timeout is off; here it is off on
    purpose (``_time_limit`` replaces it), so the notice would only mislead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Timeout is disabled")


for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_DropDisabledTimeoutNotice())


# ------------------------------------------------------------------------ normalisation

_TRAILING_PERIODS = re.compile(r"[\s.]+$")
_TEXT_NUMBER = re.compile(r"\\(?:text|textrm|mbox)\s*\{\s*(-?\d[^{}]*)\}")
_THIN_SPACE_THOUSANDS = re.compile(r"(?<=\d)\\,(?=\d{3}(?!\d))")
_MATH_DELIMITER = re.compile(r"(?<!\\)\$|\\\(|\\\[")


def to_latex(answer: str) -> str:
    """The light normalisation applied before ``math_verify.parse`` (module docstring)."""
    text = _TRAILING_PERIODS.sub("", answer.strip())
    text = _TEXT_NUMBER.sub(r"\1", text)
    text = _THIN_SPACE_THOUSANDS.sub("", text)
    if not _MATH_DELIMITER.search(text):
        text = f"${text}$"
    return text


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def _math_verify() -> Any:
    """The math-verify package, imported on the first comparison that needs it: a
    machine without it (a bare GPU image) still trains and grades the fork worlds, whose
    answers the quick path settles, and fails here, by name, only where math is compared."""
    try:
        import math_verify
    except ImportError as e:
        raise ImportError(
            "grading a math answer needs math-verify: python -m pip install 'math-verify[antlr4_13_2]'"
        ) from e
    return math_verify


@lru_cache(maxsize=4096)
def _parse_gold(gold: str) -> tuple[Any, ...] | None:
    """Parsed gold, or ``None`` if math-verify finds no expression in it. Cached: every
    response to a problem is graded against the same gold."""
    mv = _math_verify()  # outside the try: a missing package is no ungradable gold
    try:
        parsed = mv.parse(to_latex(gold), parsing_timeout=None, raise_on_error=True)
    except Exception as exc:
        logger.debug("gold %r is ungradable: math-verify raised %s", gold, _describe(exc))
        return None
    # A bare string is math-verify's fallback for text it could not parse as math.
    if not any(not isinstance(item, str) for item in parsed):
        logger.debug("gold %r is ungradable: math-verify parsed it to %r", gold, parsed)
        return None
    return tuple(parsed)


def clear_caches() -> None:
    """Empty this process's caches of gold answers and exact values, and sympy's (the
    verdicts stay the same; ``tests/test_verify_quick.py`` checks it). For timings that
    start cold, as a new worker does."""
    _parse_gold.cache_clear()
    _gold_form.cache_clear()
    exact_value.cache_clear()
    clear_sympy_cache()  # math-verify's comparisons fill it


# ------------------------------------------------------------------------------ grading


def examined_text(response: str) -> str:
    """The part of ``response`` that is graded: all of it, or the tail of an enormous one."""
    return response[-TAIL_CHARS:] if len(response) > MAX_EXAMINED_CHARS else response


DECIDED_BY = (
    "letter",
    "work missing",
    "ungradable gold",
    "no answer",
    "same text",
    "exact value",
    "math-verify",
    "time limit",
)
"""What settled a verdict (:func:`grade_explained`): a choice letter compared; a worked
answer right but without any of its lines of work; for math, an
unparsable gold or a missing answer (before any comparison), one of the two rules of
:mod:`~ictrepro.verify.quick`, math-verify's parse and comparison, or the time limit."""


@lru_cache(maxsize=4096)
def _gold_form(gold: str) -> tuple[str, bool]:
    """The gold's ``to_latex`` form, and whether it is certainly gradable without parsing it
    (one of the exact-value forms, which math-verify always reads as a number). Cached."""
    latex = to_latex(gold)
    return latex, exact_value(latex) is not None


def _grade_math(text: str, gold: str, quick: bool) -> tuple[Verdict, str]:
    gold_latex, surely_gradable = _gold_form(gold)
    if not (quick and surely_gradable) and _parse_gold(gold) is None:
        return Verdict.UNGRADABLE, "ungradable gold"
    answer = extract_answer(text, kind="math")
    if answer is None:
        return Verdict.NO_ANSWER, "no answer"
    answer_latex = to_latex(answer)
    if quick and (decision := quick_verdict(answer_latex, gold_latex)) is not None:
        return (Verdict.CORRECT if decision.correct else Verdict.WRONG), decision.rule
    return _compare_with_math_verify(answer, answer_latex, gold), "math-verify"


def _compare_with_math_verify(answer: str, answer_latex: str, gold: str) -> Verdict:
    gold_parsed = _parse_gold(gold)
    assert gold_parsed is not None, "an ungradable gold is answered before any comparison"
    mv = _math_verify()
    try:
        predicted = mv.parse(answer_latex, parsing_timeout=None, raise_on_error=True)
    except Exception as exc:
        logger.debug("answer %r graded wrong: math-verify raised %s", answer, _describe(exc))
        return Verdict.WRONG
    if not any(not isinstance(item, str) for item in predicted):
        # Only math-verify's string fallback (or nothing): it can still equal the gold's
        # string form below, but as math it is unreadable, which the log should show.
        logger.debug("answer %r: math-verify could not parse it as math", answer)
    # Pair by pair (as math-verify's own list form does) so that one pair raising does not
    # hide a later pair that matches.
    for gold_item in gold_parsed:
        for predicted_item in predicted:
            try:
                if mv.verify(gold_item, predicted_item, timeout_seconds=None, raise_on_error=True):
                    return Verdict.CORRECT
            except Exception as exc:
                logger.debug(
                    "comparing answer %r with gold %r: math-verify raised %s (pair not equal)",
                    answer,
                    gold,
                    _describe(exc),
                )
    return Verdict.WRONG


def _grade_choice(text: str, gold: str) -> Verdict:
    letter = gold.strip()
    if len(letter) != 1 or letter not in CHOICE_LETTERS:
        logger.debug("choice gold %r is ungradable: it must be one letter of A-D", gold)
        return Verdict.UNGRADABLE
    answer = extract_answer(text, kind="choice")
    if answer is None:
        return Verdict.NO_ANSWER
    return Verdict.CORRECT if answer == letter else Verdict.WRONG


def grade(response: str, gold: str, *, kind: str, timeout_s: float = 5.0) -> Verdict:
    """Grade ``response`` against ``gold`` in the current process.

    Args:
        response: the model's full response.
        gold: the gold answer: a number or LaTeX for ``math``, one letter A-D for ``choice``;
            for ``worked``, the math answer and then, one per line, the lines of work of
            which the response must contain one verbatim to be correct.
        kind: ``"math"``, ``"choice"`` or ``"worked"``.
        timeout_s: time limit of one math grading, in seconds (fractions allowed).

    Returns ``UNGRADABLE`` when the gold cannot be parsed (checked first, whatever the
    response), ``NO_ANSWER`` when the response has no answer, ``TIMEOUT`` when the time
    limit ran out, else ``CORRECT`` or ``WRONG``. ``kind="math"`` must run in the main thread.
    Where :mod:`~ictrepro.verify.quick` is certain of math-verify's verdict, math-verify
    is not run; the verdict is the same (:func:`grade_full` always runs it).
    """
    return grade_explained(response, gold, kind=kind, timeout_s=timeout_s)[0]


def grade_full(response: str, gold: str, *, kind: str, timeout_s: float = 5.0) -> Verdict:
    """:func:`grade` with every math answer compared by math-verify (no quick rules): the
    reference the fast path is tested against, and the old path in the benchmark."""
    return grade_explained(response, gold, kind=kind, timeout_s=timeout_s, quick=False)[0]


def grade_explained(
    response: str, gold: str, *, kind: str, timeout_s: float = 5.0, quick: bool = True
) -> tuple[Verdict, str]:
    """:func:`grade`'s verdict and what settled it (one of :data:`DECIDED_BY`, or
    ``"time limit"`` for ``TIMEOUT``). ``quick=False`` is :func:`grade_full`."""
    check_kind(kind)
    for name, value in (("response", response), ("gold", gold)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str, got {type(value).__name__}: {value!r:.80}")
    if isinstance(timeout_s, bool) or not (
        isinstance(timeout_s, (int, float)) and math.isfinite(timeout_s) and timeout_s > 0
    ):
        raise ValueError(f"timeout_s must be a finite number > 0, got {timeout_s!r}")
    text = examined_text(response)
    if kind == "choice":
        # Regular expressions on bounded text: no timer.
        return _grade_choice(text, gold), "letter"
    if kind == "worked":
        answer, *work = gold.split("\n")
        if not work:
            logger.debug("worked gold %r is ungradable: it names no line of work", gold)
            return Verdict.UNGRADABLE, "ungradable gold"
        verdict, decided_by = grade_explained(
            response, answer, kind="math", timeout_s=timeout_s, quick=quick
        )
        # The answer alone is not enough where it can be reached without the work (the
        # fork world states its answer in the prompt; only a valid walk counts).
        if verdict == Verdict.CORRECT and not any(line in text for line in work):
            return Verdict.WRONG, "work missing"
        return verdict, decided_by
    try:
        with _time_limit(timeout_s):
            return _grade_math(text, gold, quick)
    except _GradingTimeout:
        logger.debug("grading against gold %r ran past %.3g s", gold, timeout_s)
        return Verdict.TIMEOUT, "time limit"
