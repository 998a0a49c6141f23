"""Find the final answer in a model response.

Order of precedence (the first source that yields a usable candidate wins):

``kind="math"``
    1. the content of the last well-formed box: ``\\boxed{...}``, ``\\fbox{...}`` or
       ``\\boxed X`` (one token); a box whose braces never close is not a box;
    2. the rest of the sentence after the last "the answer is" / "final answer is" (case
       does not matter), cut at the first sentence end (a period followed by a space or the
       end, or a line break); if it holds a ``$...$`` span, that span's content; then stripped
       of a trailing period, ``$`` and white space;
    3. the text after the last GSM8K-style ``#### `` marker, to the end of its line.

``kind="worked"``
    as ``math`` (the work the gold requires is checked by ``grade.grade``).

``kind="choice"``
    1. a letter A-D read from the last well-formed box, written ``B``, ``(B)``, ``B.``,
       ``\\text{B}`` or ``B) 42`` (a letter followed by text after a space);
    2. the letter after the last "answer is" (``answer is (B)``, ``answer is: B``).

A source that is present but yields nothing usable (an empty box; for ``choice`` a box that
names no letter) falls through to the next. Letters are upper case only, so the English
article "a" is never read as option A. ``None`` means the response has no answer at all.
"""

from __future__ import annotations

import re

KINDS = ("math", "choice", "worked")
"""Answer kinds the verifier understands. ``worked`` is a math answer that counts only with
one of the gold's accepted lines of work written in the response (``grade.grade``)."""

CHOICE_LETTERS = "ABCD"

_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
# After the command: optional space then a brace (braced form), or space then one token.
_BRACED = re.compile(r"\s*\{")
_TOKEN = re.compile(r"\s+([^\s${}]+)")
# An escaped character (skipped: ``\{`` and ``\}`` are literal braces) or a brace.
_BRACE_OR_ESCAPE = re.compile(r"\\.|[{}]", re.DOTALL)

_ANSWER_IS = re.compile(r"(?:\bthe|\bfinal)\s+answer\s+is\b[:\s]*", re.IGNORECASE)
# The answer runs to the first sentence end: ". " / "." at the end, a line break, or the end.
# A period inside a number ("3.5") is not followed by a space, so it does not end it.
_SENTENCE = re.compile(r"(.*?)(?:\.(?=\s|$)|\n|$)")
_DOLLAR_SPAN = re.compile(r"(?<!\\)\$(.+?)(?<!\\)\$", re.DOTALL)
_GSM8K = re.compile(r"####[ \t]*([^\n]*)")

_TEXT_COMMAND = re.compile(r"\\(?:text|textbf|textrm|mathrm|mathbf)\s*\{([^{}]*)\}")
_LETTER_IN_BOX = re.compile(r"\(?([A-D])\)?[.:]?(?:\s.*)?", re.DOTALL)
# "[Aa]nswer" rather than re.IGNORECASE: the letter itself must stay upper case.
_LETTER_AFTER_ANSWER_IS = re.compile(r"[Aa]nswer\s+is[:\s]*\(?([A-D])\)?(?![A-Za-z0-9])")


def check_kind(kind: str) -> None:
    """Raise ``ValueError`` naming the valid kinds if ``kind`` is not one of them."""
    if kind not in KINDS:
        raise ValueError(f"unknown answer kind {kind!r}; valid kinds: {', '.join(KINDS)}")


def _matching_braces(text: str) -> dict[int, int]:
    """Map the index of every ``{`` that closes to the index of its ``}`` (one pass)."""
    pairs: dict[int, int] = {}
    open_at: list[int] = []
    for m in _BRACE_OR_ESCAPE.finditer(text):
        char = m.group()
        if char == "{":
            open_at.append(m.start())
        elif char == "}" and open_at:  # a stray "}" closes nothing
            pairs[open_at.pop()] = m.start()
    return pairs


def last_boxed(text: str) -> str | None:
    """Content of the last well-formed ``\\boxed{...}`` / ``\\fbox{...}`` / ``\\boxed X``.

    Nested braces are matched (``\\boxed{\\frac{1}{2}}`` gives ``\\frac{1}{2}``). A box whose
    brace never closes is skipped, so an earlier complete box can still be found. For
    nested boxes, the box that starts last (the innermost) wins. ``None`` if there is none.
    """
    commands = list(_BOX_COMMAND.finditer(text))
    if not commands:
        return None
    pairs: dict[int, int] | None = None  # computed lazily: most boxes are well formed
    for command in reversed(commands):
        braced = _BRACED.match(text, command.end())
        if braced:
            if pairs is None:
                pairs = _matching_braces(text)
            open_at = braced.end() - 1
            if open_at in pairs:
                return text[open_at + 1 : pairs[open_at]]
            continue
        token = _TOKEN.match(text, command.end())
        if token:
            return token.group(1)
    return None


def _clean_math(candidate: str) -> str:
    return candidate.strip().rstrip(".").strip().strip("$").strip()


def _after_answer_is(text: str) -> str | None:
    marks = list(_ANSWER_IS.finditer(text))
    if not marks:
        return None
    sentence = _SENTENCE.match(text, marks[-1].end())
    answer = sentence.group(1) if sentence else ""
    span = _DOLLAR_SPAN.search(answer)
    if span:
        answer = span.group(1)
    return _clean_math(answer) or None


def _after_hashes(text: str) -> str | None:
    marks = _GSM8K.findall(text)
    if not marks:
        return None
    return _clean_math(marks[-1]) or None


def _letter_from_box(content: str) -> str | None:
    simplified = _TEXT_COMMAND.sub(r"\1", content).strip()
    match = _LETTER_IN_BOX.fullmatch(simplified)
    return match.group(1) if match else None


def _extract_math(response: str) -> str | None:
    boxed = last_boxed(response)
    if boxed is not None and boxed.strip():
        return boxed.strip()
    return _after_answer_is(response) or _after_hashes(response)


def _extract_choice(response: str) -> str | None:
    boxed = last_boxed(response)
    if boxed is not None:
        letter = _letter_from_box(boxed)
        if letter is not None:
            return letter
    marks = _LETTER_AFTER_ANSWER_IS.findall(response)
    return marks[-1] if marks else None


def extract_answer(response: str, *, kind: str) -> str | None:
    """The final answer of ``response`` (see the module docstring for the order of sources).

    For ``kind="math"`` the answer text (LaTeX or plain), for ``kind="choice"`` one letter
    A-D; ``None`` when the response holds no answer. Raises ``ValueError`` for an unknown kind.
    """
    check_kind(kind)
    if not isinstance(response, str):
        raise TypeError(f"response must be a str, got {type(response).__name__}")
    if kind == "choice":
        return _extract_choice(response)
    return _extract_math(response)
