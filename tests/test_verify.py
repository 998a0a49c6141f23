"""The answer verifier in-process: one table of graded cases, extraction edge cases, errors."""

from __future__ import annotations

import logging
import signal
import threading

import pytest

from ictrepro.verify import KINDS, Verdict, extract_answer, grade, last_boxed
from ictrepro.verify.grade import MAX_EXAMINED_CHARS, TAIL_CHARS, to_latex

C, W, N, U = Verdict.CORRECT, Verdict.WRONG, Verdict.NO_ANSWER, Verdict.UNGRADABLE
FILLER = "Let me think about this step by step. " * 800  # > MAX_EXAMINED_CHARS

# (response, gold, kind, expected verdict)
CASES = [
    # --- worked: the answer counts only with one of the gold's lines of work
    ("Turn up: 1,2. \\boxed{2}", "2\nTurn up: 1,2.\nTurn down: 9,8,7,6,5,4,3,2.", "worked", C),
    ("Turn up: 2. \\boxed{2}", "2\nTurn up: 1,2.\nTurn down: 9,8,7,6,5,4,3,2.", "worked", W),
    # --- math: boxes
    ("So \\boxed{42}.", "42", "math", C),
    ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}", "math", C),
    ("\\boxed{\\boxed{7}}", "7", "math", C),
    ("First \\boxed{3}, no: \\boxed{4}", "4", "math", C),
    ("First \\boxed{3}, no: \\boxed{4}", "3", "math", W),
    ("\\fbox{12}", "12", "math", C),
    ("$\\boxed 5$", "5", "math", C),
    ("\\boxed{x = 5}", "5", "math", C),
    ("\\boxed{(1, 2)}", "(1,2)", "math", C),
    ("\\boxed{\\{1, 2\\}}", "\\{2, 1\\}", "math", C),
    # --- \dfrac, negative numbers, values rather than forms
    ("\\boxed{\\dfrac{3}{4}}", "\\frac{3}{4}", "math", C),
    ("\\boxed{\\frac{3}{4}}", "\\dfrac{3}{4}", "math", C),
    ("\\boxed{0.75}", "\\frac{3}{4}", "math", C),
    ("\\boxed{-3}", "-3", "math", C),
    ("\\boxed{3}", "-3", "math", W),
    ("\\boxed{-\\frac{1}{2}}", "-\\frac{1}{2}", "math", C),
    ("\\boxed{\\frac{2}{4}}", "\\frac{1}{2}", "math", C),
    ("\\boxed{\\sqrt{12}}", "2\\sqrt{3}", "math", C),
    ("\\boxed{2\\sqrt{3}}", "\\sqrt{12}", "math", C),
    ("\\boxed{3\\sqrt{2}}", "2\\sqrt{3}", "math", W),
    # --- percent, units, currency
    ("\\boxed{50\\%}", "50", "math", C),
    ("\\boxed{50}", "50\\%", "math", C),
    ("\\boxed{0.5}", "50\\%", "math", C),
    ("The answer is 50%.", "50", "math", C),
    ("\\boxed{40\\%}", "50", "math", W),
    ("\\boxed{5 \\text{ cm}}", "5", "math", C),
    ("\\boxed{5\\,\\text{cm}}", "5", "math", C),
    ("\\boxed{\\text{5 cm}}", "5", "math", C),
    ("\\boxed{6 \\text{ cm}}", "5", "math", W),
    ("\\boxed{\\$12}", "12", "math", C),
    # --- thousands separators
    ("\\boxed{1,000}", "1000", "math", C),
    ("\\boxed{1000}", "1,000", "math", C),
    ("\\boxed{1{,}000}", "1000", "math", C),
    ("\\boxed{1\\,000}", "1000", "math", C),
    ("\\boxed{1,001}", "1000", "math", W),
    # --- trailing period
    ("\\boxed{5.}", "5", "math", C),
    ("\\boxed{\\frac{1}{2}.}", "\\frac{1}{2}", "math", C),
    ("\\boxed{5}", "5.", "math", C),
    # --- "the answer is", GSM8K "####", and their precedence
    ("The answer is 7.", "7", "math", C),
    ("The answer is 7.", "8", "math", W),
    ("the answer is $\\frac{1}{2}$.", "\\frac{1}{2}", "math", C),
    ("So the final answer is 12", "12", "math", C),
    ("THE ANSWER IS 3.5.", "3.5", "math", C),
    ("The answer is $5$ cm. Done.", "5", "math", C),
    ("The answer is 8. Check: 2 + 6 = 8.", "8", "math", C),
    ("#### 42", "42", "math", C),
    ("Step 1.\n#### 41\nOops.\n#### 1,234,567\n", "1234567", "math", C),
    ("The answer is 3. Actually \\boxed{4}", "4", "math", C),
    ("The answer is 3. Actually \\boxed{4}", "3", "math", W),
    ("#### 5\nThe answer is 6.", "6", "math", C),
    ("\\boxed{} The answer is 9.", "9", "math", C),
    # --- no answer at all
    ("", "5", "math", N),
    ("  \n\t", "5", "math", N),
    ("I do not know.", "5", "math", N),
    ("\\boxed{}", "5", "math", N),
    ("\\boxed{\\frac{1}{2}", "\\frac{1}{2}", "math", N),
    ("The answer is.", "5", "math", N),
    # --- wrong answers, including unparsable ones
    ("\\boxed{41}", "42", "math", W),
    ("\\boxed{\\frac{1}{3}}", "\\frac{1}{2}", "math", W),
    ("\\boxed{???}", "42", "math", W),
    ("\\boxed{\\text{}}", "42", "math", W),
    ("\\boxed{x}", "42", "math", W),
    # --- unparsable gold: never "wrong", whatever the response
    ("\\boxed{42}", "", "math", U),
    ("\\boxed{42}", "???", "math", U),
    ("\\boxed{42}", "\\frac{", "math", U),
    ("", "???", "math", U),
    # --- enormous responses: only the last TAIL_CHARS characters are examined
    pytest.param(FILLER + "\\boxed{5}", "5", "math", C, id="enormous-box-at-end"),
    pytest.param("\\boxed{5}" + FILLER, "5", "math", N, id="enormous-box-at-start"),
    pytest.param("\\boxed{" * 5000 + "5", "5", "math", N, id="enormous-unclosed-boxes"),
    # --- multiple choice: every accepted form, right and wrong
    ("\\boxed{B}", "B", "choice", C),
    ("\\boxed{C}", "B", "choice", W),
    ("\\boxed{(B)}", "B", "choice", C),
    ("\\boxed{(A)}", "B", "choice", W),
    ("\\boxed{B.}", "B", "choice", C),
    ("\\boxed{D.}", "B", "choice", W),
    ("\\boxed{\\text{B}}", "B", "choice", C),
    ("\\boxed{\\text{C}}", "B", "choice", W),
    ("\\boxed{B) 42}", "B", "choice", C),
    ("\\boxed{A) 42}", "B", "choice", W),
    ("\\boxed{\\textbf{(B)} 42}", "B", "choice", C),
    ("The answer is (B).", "B", "choice", C),
    ("The answer is (D).", "B", "choice", W),
    ("so the answer is B", "B", "choice", C),
    ("so the answer is A", "B", "choice", W),
    ("Answer is: C", "C", "choice", C),
    ("\\boxed{A} no wait, \\boxed{B}", "B", "choice", C),
    ("The answer is (A). \\boxed{B}", "B", "choice", C),
    ("The answer is C, which is \\boxed{42}", "C", "choice", C),
    ("", "B", "choice", N),
    ("The options are all close.", "B", "choice", N),
    ("the answer is a trap", "A", "choice", N),
    ("\\boxed{E}", "B", "choice", N),
    ("\\boxed{AB}", "A", "choice", N),
    # --- invalid choice gold
    ("\\boxed{B}", "E", "choice", U),
    ("\\boxed{B}", "AB", "choice", U),
    ("\\boxed{B}", "(B)", "choice", U),
    ("\\boxed{B}", "", "choice", U),
    ("", "b", "choice", U),
]


def check(response: str, gold: str, kind: str, expected: Verdict) -> None:
    verdict = grade(response, gold, kind=kind)
    assert verdict is expected, f"{response[-80:]!r} vs gold {gold!r} ({kind})"
    assert verdict.is_correct == (expected is Verdict.CORRECT)


@pytest.mark.parametrize(("response", "gold", "kind", "expected"), CASES)
def test_grade(response, gold, kind, expected):
    check(response, gold, kind, expected)


def test_table_covers_every_verdict_but_timeout_and_both_kinds():
    rows = [getattr(case, "values", case) for case in CASES]  # unwrap pytest.param
    assert {row[3] for row in rows} == set(Verdict) - {Verdict.TIMEOUT}
    assert {row[2] for row in rows} == set(KINDS)
    assert len(FILLER) > MAX_EXAMINED_CHARS > TAIL_CHARS


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\boxed{5}", "5"),
        ("a \\boxed{1} b \\boxed{2} c", "2"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("\\boxed{\\frac{\\sqrt{2}}{2}} + 1", "\\frac{\\sqrt{2}}{2}"),
        ("\\boxed{\\boxed{7}}", "7"),
        ("\\fbox{3}", "3"),
        ("\\boxed 5", "5"),
        ("$\\boxed -5$.", "-5"),
        ("\\boxed {5}", "5"),
        ("\\boxed{\\{1,2\\}}", "\\{1,2\\}"),
        ("} stray \\boxed{a{b}c} }", "a{b}c"),
        ("\\boxed{}", ""),
        ("\\boxed{\\frac{1}{2}", None),
        ("\\boxed{1} then \\boxed{2", "1"),
        ("\\boxedx{5}", None),
        ("\\boxed", None),
        ("no box here", None),
        ("", None),
    ],
)
def test_last_boxed(text, expected):
    assert last_boxed(text) == expected


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("\\boxed{5}", "math", "5"),
        (" \\boxed{ x + 1 } ", "math", "x + 1"),
        ("The answer is 7.", "math", "7"),
        ("the answer is $\\frac{1}{2}$.", "math", "\\frac{1}{2}"),
        ("The final answer is: 3.5.", "math", "3.5"),
        ("The answer is 8. Check: 8 = 8.", "math", "8"),
        ("The answer is $5$ cm.", "math", "5"),
        ("the answer is 1\nthe answer is 2\n", "math", "2"),
        ("The answer is\n42", "math", "42"),
        ("#### 42", "math", "42"),
        ("#### 41\n#### 42", "math", "42"),
        ("#### $1,000.", "math", "1,000"),
        ("\\boxed{} The answer is 3.", "math", "3"),
        ("The answer is.", "math", None),
        ("####", "math", None),
        ("nothing here", "math", None),
        ("", "math", None),
        ("\\boxed{B}", "choice", "B"),
        ("\\boxed{(C)}", "choice", "C"),
        ("\\boxed{D.}", "choice", "D"),
        ("\\boxed{\\text{A}}", "choice", "A"),
        ("\\boxed{\\mathrm{(A)}}", "choice", "A"),
        ("\\boxed{B) 42}", "choice", "B"),
        ("The answer is (B).", "choice", "B"),
        ("the answer is C", "choice", "C"),
        ("Answer is: D", "choice", "D"),
        ("answer is A; no, the answer is (C)", "choice", "C"),
        ("the answer is a trap", "choice", None),
        ("The answer is Bob", "choice", None),
        ("\\boxed{b}", "choice", None),
        ("\\boxed{E}", "choice", None),
        ("\\boxed{AB}", "choice", None),
        ("", "choice", None),
    ],
)
def test_extract_answer(text, kind, expected):
    assert extract_answer(text, kind=kind) == expected


@pytest.mark.parametrize(
    ("answer", "latex"),
    [
        ("42", "$42$"),
        (" 5. ", "$5$"),
        ("\\text{5 cm}", "$5 cm$"),
        ("\\text{cm}", "$\\text{cm}$"),
        ("1\\,000\\,000", "$1000000$"),
        ("5\\,\\text{cm}", "$5\\,\\text{cm}$"),
        ("$x$", "$x$"),
        ("\\$5", "$\\$5$"),
    ],
)
def test_to_latex_normalises_lightly(answer, latex):
    assert to_latex(answer) == latex


def test_pathological_input_times_out_and_restores_the_alarm_handler():
    before = signal.getsignal(signal.SIGALRM)
    # 9^(9^9) has ~370 million digits: math-verify's comparison never ends on its own.
    assert grade("\\boxed{9^{9^{9}}}", "5", kind="math", timeout_s=0.3) is Verdict.TIMEOUT
    assert signal.getsignal(signal.SIGALRM) is before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert grade("\\boxed{5}", "5", kind="math", timeout_s=0.3) is Verdict.CORRECT


def test_unparsable_prediction_is_logged_at_debug(caplog):
    with caplog.at_level(logging.DEBUG, logger="ictrepro.verify.grade"):
        assert grade("\\boxed{???}", "42", kind="math") is Verdict.WRONG
    assert "'???'" in caplog.text and "could not parse" in caplog.text


def test_verdict_values_and_is_correct():
    assert [v.value for v in Verdict] == ["correct", "wrong", "no_answer", "ungradable", "timeout"]
    assert [v for v in Verdict if v.is_correct] == [Verdict.CORRECT]
    assert Verdict("timeout") is Verdict.TIMEOUT and Verdict.WRONG == "wrong"


def test_unknown_kind_names_the_valid_ones():
    message = "unknown answer kind 'maths'; valid kinds: math, choice"
    with pytest.raises(ValueError, match=message):
        grade("\\boxed{1}", "1", kind="maths")
    with pytest.raises(ValueError, match=message):
        extract_answer("\\boxed{1}", kind="maths")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"response": None}, TypeError, "response must be a str, got NoneType"),
        ({"gold": 42}, TypeError, "gold must be a str, got int"),
        ({"timeout_s": 0}, ValueError, "timeout_s must be a finite number > 0, got 0"),
        ({"timeout_s": float("nan")}, ValueError, "timeout_s must be a finite number > 0"),
        ({"timeout_s": True}, ValueError, "timeout_s must be a finite number > 0"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, match):
    arguments = {"response": "\\boxed{1}", "gold": "1", "kind": "math", **kwargs}
    with pytest.raises(error, match=match):
        grade(**arguments)


def test_math_needs_the_main_thread_but_choice_does_not():
    outcome: dict[str, object] = {}

    def run() -> None:
        outcome["choice"] = grade("\\boxed{B}", "B", kind="choice")
        try:
            grade("\\boxed{1}", "1", kind="math")
        except RuntimeError as exc:
            outcome["math"] = str(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert outcome["choice"] is Verdict.CORRECT
    assert "main thread" in str(outcome["math"]) and "Verifier(workers=1" in str(outcome["math"])


def test_the_verifier_imports_without_math_verify_and_names_it_where_needed():
    """A machine without math-verify (the bare GPU image) imports the verifier and grades
    answers the quick path settles; a comparison that needs math-verify names it."""
    import subprocess
    import sys

    # In a fresh interpreter, so this one's imported modules stay as they are.
    code = (
        "import sys; sys.modules['math_verify'] = None\n"
        "from ictrepro.verify.grade import grade, Verdict\n"
        "assert grade('The answer is \\\\boxed{7}.', '7', kind='math') == Verdict.CORRECT\n"
        "try:\n"
        "    grade('The answer is \\\\boxed{\\\\frac{1}{2}}.', 'x^2 + 1', kind='math')\n"
        "except ImportError as e:\n"
        "    assert 'math-verify' in str(e), e\n"
        "else:\n"
        "    raise SystemExit('no ImportError')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
