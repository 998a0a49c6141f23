"""Synthetic task suites of the CPU scale, one per family of the paper's seven benchmarks.

Each suite is generated from a seed by code, so the CPU world needs no downloads. Names
show the mapping to the paper's benchmarks:

| suite | stands for | answers |
|---|---|---|
| ``tiny-gsm8k`` | GSM8K | integers, from two-step word problems |
| ``tiny-math500`` | MATH500 | LaTeX: reduced fractions, negative integers, simplified roots |
| ``tiny-mmlu-stem`` | MMLU-STEM | a letter A-D (two-step questions) |
| ``tiny-gpqa`` | GPQA | a letter A-D (three-step questions, closer distractors) |
| ``tiny-aime23`` / ``24`` / ``25`` | AIME 2023/24/25 | integers 0-999 from three different multi-step generators (power remainders, divisor counts, arithmetic sequences) |

Every record carries a short worked solution ending in ``\\boxed{answer}``: the format the
SFT warm start teaches and the verifier reads. Train and test splits come from different
random streams and any training problem whose text also occurs in the test split is
dropped, so the splits are disjoint by construction.

The training mixture ``tiny-train`` mixes the GSM8K- and MATH-like generators, in the spirit
of the paper's GSM8K + MATH training data.

The fork world's suites (``tiny-fork-*``: a dial turned up or down, one suite per subset
of problems and a ``-mix`` of RL prompts) are described where they are generated, below,
and in docs/worlds/fork.md.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ictrepro.data.benchmarks import BENCHMARKS
from ictrepro.data.records import Problem
from ictrepro.errors import ConfigError, DataError
from ictrepro.io import read_jsonl_numbered
from ictrepro.rundir import RunDir

Generated = tuple[str, str, str, tuple[str, ...] | None]
"""(problem, solution, answer, choices) of one generated item."""

NAMES = ("Ana", "Ben", "Caro", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun")
ITEMS = ("apple", "book", "coin", "pen", "shell", "stamp", "card", "marble")
LETTERS = "ABCD"


#: How every generated solution states its final answer.
ANSWER_LEAD = "The answer is"
#: Words that may stand in for a word of ``ANSWER_LEAD`` in a warm-start solution
#: (``data.wording_noise``): the words of the math instruction every prompt ends with, so
#: each is one token after a space in every tiny world's tokenizer; the verifier reads only
#: the boxed answer (and, in the fork world, the walk), so a solution stays right.
WORDING_VARIANTS = ("reason", "step", "by", "and", "put", "your", "final", "within")


def _boxed(steps: list[str], answer: str) -> str:
    return " ".join([*steps, f"{ANSWER_LEAD} \\boxed{{{answer}}}."])


def with_varied_lead(solution: str, rng: random.Random, noise: float) -> str:
    """``solution`` with each word of its last answer lead (``ANSWER_LEAD``) replaced, with
    chance ``noise``, by another word drawn from ``WORDING_VARIANTS``; the number of words
    stays the same. A solution without the lead is returned as it is."""
    at = solution.rfind(ANSWER_LEAD)
    if at < 0:
        return solution
    words = [
        rng.choice([v for v in WORDING_VARIANTS if v != w]) if rng.random() < noise else w
        for w in ANSWER_LEAD.split()
    ]
    return solution[:at] + " ".join(words) + solution[at + len(ANSWER_LEAD) :]


def bare_solution(answer: str) -> str:
    """A solution that states the final answer without working it out."""
    return _boxed([], answer)


def is_bare(response: str) -> bool:
    """Whether ``response`` states its answer without working it out first (as
    :func:`bare_solution` writes it)."""
    return response.lstrip().startswith(ANSWER_LEAD)


# ------------------------------------------------------------------------ GSM8K-like


def gen_gsm8k(rng: random.Random) -> Generated:
    """Two-step word problems on single-digit numbers."""
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    if rng.random() < 0.5:
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        c = rng.randint(1, a + b)
        ans = a + b - c
        problem = (
            f"{name} has {a} {item}s, gets {b} more and gives away {c}. How many {item}s are left?"
        )
        steps = [f"{a} + {b} = {a + b}.", f"{a + b} - {c} = {ans}."]
    else:
        a, b, c = rng.randint(2, 5), rng.randint(2, 9), rng.randint(1, 9)
        ans = a * b + c
        problem = f"{name} buys {a} bags with {b} {item}s each and finds {c} more. How many {item}s in all?"
        steps = [f"{a} * {b} = {a * b}.", f"{a * b} + {c} = {ans}."]
    return problem, _boxed(steps, str(ans)), str(ans), None


# ---------------------------------------------------------------------- MATH500-like


def _latex_fraction(num: int, den: int) -> str:
    g = math.gcd(num, den)
    num, den = num // g, den // g
    if den < 0:
        num, den = -num, -den
    if den == 1:
        return str(num)
    sign = "-" if num < 0 else ""
    return f"{sign}\\frac{{{abs(num)}}}{{{den}}}"


def gen_math500(rng: random.Random) -> Generated:
    """LaTeX answers: reduced fractions, negative integers, simplified roots."""
    kind = rng.randrange(3)
    if kind == 0:
        d = rng.randint(3, 12)
        a, c = rng.randint(1, 9), rng.randint(1, 9)
        op = rng.choice("+-")
        num = a + c if op == "+" else a - c
        ans = _latex_fraction(num, d)
        raw = f"\\frac{{{num}}}{{{d}}}"
        problem = f"Compute $\\frac{{{a}}}{{{d}}} {op} \\frac{{{c}}}{{{d}}}$."
        steps = [
            f"${a} {op} {c} = {num}$, so the result is ${raw}"
            + (f" = {ans}$." if ans != raw else "$.")
        ]
    elif kind == 1:
        a, x, b = rng.randint(2, 3), rng.randint(-9, 9), rng.randint(1, 9)
        c = a * x + b
        ans = str(x)
        problem = f"Solve for $x$: ${a}x + {b} = {c}$."
        steps = [f"${a}x = {c} - {b} = {c - b}$.", f"$x = {c - b} / {a} = {x}$."]
    else:
        k, m = rng.randint(2, 9), rng.choice((2, 3, 5, 6, 7))
        n = k * k * m
        ans = f"{k}\\sqrt{{{m}}}"
        problem = f"Simplify $\\sqrt{{{n}}}$."
        steps = [f"${n} = {k * k} \\cdot {m}$, so $\\sqrt{{{n}}} = {ans}$."]
    return problem, _boxed(steps, ans), ans, None


# ---------------------------------------------------------------- multiple choice


def option_letter(value: int) -> str:
    """The letter every tiny multiple-choice option sits at: fixed by its value's last digit.

    Digits 0, 4, 8 -> A; 1, 5, 9 -> B; 2, 6 -> C; 3, 7 -> D. A model of this scale computes
    the value but cannot find it in a list of options (docs/history.md, "The multiple-choice
    designs that measured nothing"), so the letter is a function of the value it has just
    written.
    """
    return LETTERS[value % 10 % 4]


def _choice_item(
    rng: random.Random, draw: Callable[[random.Random], tuple[str, list[str], int]], near: int
) -> Generated:
    """A multiple-choice item: the gold letter uniform over A-D, four options within ``near``.

    ``draw`` gives (question, worked steps, value) and is drawn again until the value's
    letter is the gold letter, so that a guess that ignores the question scores 25%.
    Every option, distractors included, sits at the letter its last digit fixes
    (:func:`option_letter`), so the list says nothing about which option is right: the
    value has to be computed. The solution restates the last digit, then names the letter.
    """
    letter = rng.choice(LETTERS)
    for _ in range(1000):
        problem, steps, correct = draw(rng)
        if option_letter(correct) == letter:
            break
    else:
        raise ConfigError(f"the generator gives no value with option letter {letter}")
    at_letter = {letter: correct}
    nearby = [v for v in range(max(0, correct - near), correct + near + 1) if v != correct]
    for other in LETTERS:
        if other != letter:
            candidates = [v for v in nearby if option_letter(v) == other]
            if not candidates:
                raise ConfigError(f"no option within {near} of {correct} has letter {other}")
            at_letter[other] = rng.choice(candidates)
    steps = [*steps, f"Last digit {correct % 10}: option {letter}."]
    return problem, _boxed(steps, letter), letter, tuple(str(at_letter[x]) for x in LETTERS)


UNITS = (
    ("meters", "centimeters", 100),
    ("kilometers", "meters", 1000),
    ("kilograms", "grams", 1000),
    ("centimeters", "millimeters", 10),
)


# Every value below ends in a loose count (1-9), so its last digit, and with it the option
# letter, is near uniform whatever the rest of the question: the letter the rejection in
# ``_choice_item`` asks for says little about which kind of question was drawn.


def _boxes(rng: random.Random) -> tuple[str, list[str], int]:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    a, b, c = rng.randint(2, 9), rng.randint(2, 9), rng.randint(1, 9)
    stem = (
        f"{name} has {a} boxes of {b} {item}s and {c} loose {item}s. "
        f"How many {item}s does {name} have?"
    )
    return stem, [f"{a} * {b} = {a * b}.", f"{a * b} + {c} = {a * b + c}."], a * b + c


def _conversion(rng: random.Random) -> tuple[str, list[str], int]:
    unit, small, factor = rng.choice(UNITS)
    m, r = rng.randint(2, 99), rng.randint(1, 9)
    steps = [f"{m} * {factor} = {m * factor}.", f"{m * factor} + {r} = {m * factor + r}."]
    return f"How many {small} are in {m} {unit} and {r} {small}?", steps, m * factor + r


def gen_mmlu_stem(rng: random.Random) -> Generated:
    """Boxes and loose items, or a unit conversion with a remainder; distractors up to 9 away."""
    return _choice_item(rng, lambda r: (_boxes if r.random() < 0.5 else _conversion)(r), 9)


def _packing(rng: random.Random) -> tuple[str, list[str], int]:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    a, b, c, d = rng.randint(1, 6), rng.randint(1, 6), rng.randint(2, 5), rng.randint(1, 9)
    value = (a + b) * c + d
    steps = [
        f"{a} + {b} = {a + b}.",
        f"{a + b} * {c} = {(a + b) * c}.",
        f"{(a + b) * c} + {d} = {value}.",
    ]
    stem = (
        f"{name} packs {c} boxes, each with {a} red and {b} blue {item}s, "
        f"and {d} loose {item}s. How many {item}s are there?"
    )
    return stem, steps, value


def gen_gpqa(rng: random.Random) -> Generated:
    """Three-step questions whose distractors are within 3 of the answer."""
    return _choice_item(rng, _packing, 3)


# ------------------------------------------------------------------------- AIME-like


def gen_aime23(rng: random.Random) -> Generated:
    """Remainder of a * b + c modulo m: three dependent steps."""
    a, b, c, m = rng.randint(2, 9), rng.randint(2, 9), rng.randint(1, 20), rng.randint(3, 9)
    value = a * b + c
    ans = value % m
    problem = f"Find the remainder when ${a} \\cdot {b} + {c}$ is divided by ${m}$."
    steps = [
        f"{a} * {b} = {a * b}.",
        f"{a * b} + {c} = {value}.",
        f"{value} = {value // m} * {m} + {ans}.",
    ]
    return problem, _boxed(steps, str(ans)), str(ans), None


def gen_aime24(rng: random.Random) -> Generated:
    """Count the divisors of a number given as a product of prime powers."""
    primes = sorted(rng.sample((2, 3, 5, 7, 11, 13), rng.choice((2, 3))))
    powers = [rng.randint(1, 4) for _ in primes]
    ans = math.prod(a + 1 for a in powers)
    factored = " \\cdot ".join(f"{p}^{{{a}}}" for p, a in zip(primes, powers, strict=True))
    problem = f"How many positive divisors does $N = {factored}$ have?"
    steps, acc = [], 1
    for a in powers:
        steps.append(f"{acc} * ({a} + 1) = {acc * (a + 1)}.")
        acc *= a + 1
    return problem, _boxed(steps, str(ans)), str(ans), None


def gen_aime25(rng: random.Random) -> Generated:
    """Term of an arithmetic sequence: a + (n - 1) d."""
    a, d, n = rng.randint(1, 40), rng.randint(2, 9), rng.randint(2, 6)
    ans = a + (n - 1) * d
    problem = (
        f"A sequence starts at ${a}$ and each term is ${d}$ more than the one before. "
        f"Find term number ${n}$."
    )
    steps = [
        f"{n} - 1 = {n - 1}.",
        f"{n - 1} * {d} = {(n - 1) * d}.",
        f"{a} + {(n - 1) * d} = {ans}.",
    ]
    return problem, _boxed(steps, str(ans)), str(ans), None


# ----------------------------------------------------------------------- the fork world
#
# A walk with two strategies (docs/worlds/fork.md, "The fork world"): a dial of the digits
# 0-9 shows one digit and must be turned to another in steps of k (1, 3, 7 or 9, each of
# which reaches every digit). A worked solution turns it up (with k = 3: 3, 6, 9, 2, ...)
# or down (3, 0, 7, 4, ...), writing each digit it passes, until it reaches the target,
# then states the target. Turning up writes d digits, where d is the number of steps up
# ((target - start) / k mod 10); turning down writes 10 - d. Within the token
# budget a walk can write at most FORK_REACH digits, so which strategy solves a problem
# depends on d: only turning up reaches d = 1-3, both reach d = 4-6, only turning down
# reaches d = 7-9. The RL prompts hold mostly up-only problems, so collapsing onto turning
# up maximises mean reward and loses the down-only problems: pass@k rewards keeping both.
#
# Each step of a walk depends on the last digit and k only (a successor table, which a
# small model learns), and the walk stops at a digit the prompt states; which way is
# shorter, though, depends on all three numbers of the prompt at once, and the fork must
# decide it before the walk starts. The target is in the prompt, so an answer counts only
# after a valid walk (``fork_gold``).
#
# The strategy is chosen at one token ("up" or "down" of the marker). In the ``tiny-fork``
# suites a preamble of 2 or 3 tokens comes first, so the responses of one group reach the
# fork at different positions and their distributions there differ (group JS > 0 at the
# fork). The ``tiny-fork0`` control trains the same base model on the same problems with
# ``FORK_CONTROL_PREAMBLE`` written into every prompt (``data.response_prefix``), so every
# response of a group reaches the fork with the same context, as at a first token (group
# JS = 0 there by construction).

#: The dial's digits; a distance up is 1 .. FORK_DIAL - 1 steps.
FORK_DIAL = 10
#: The step sizes: those coprime to FORK_DIAL, so that a walk reaches every digit. With
#: the start and the target they make 360 problems, 120 per subset.
FORK_STEPS = (1, 3, 7, 9)
#: How many digits a walk can write within ``FORK_MAX_NEW_TOKENS`` (counted with the tiny
#: tokenizer: a step is 2 tokens, a comma and a digit, as digits are tokens of their own;
#: tests/test_fork_world.py checks it).
FORK_REACH = 6
#: (majority, minority) strategy: how a worked solution starts its walk.
FORK_MARKERS = ("Turn up:", "Turn down:")
#: The fork token's word in each marker: what a response chooses.
FORK_DIRECTIONS = ("up", "down")
#: Preambles of 2, 2, 3 and 3 tokens, drawn per solution in the ``tiny-fork`` suites; the
#: spread (1 token) is under one step (2 tokens), so the budget separates the subsets
#: whatever the preamble.
FORK_PREAMBLES = ("So.", "Okay.", "I see.", "Now then.")
#: The control's response prefix: a longest preamble (3 tokens), so the control's responses
#: are the ``tiny-fork`` responses that drew it, and the budget left after it
#: (``FORK_CONTROL_MAX_NEW_TOKENS``) separates the subsets as the whole budget does there.
FORK_CONTROL_PREAMBLE = FORK_PREAMBLES[2]
#: The token budget of the fork world: the longest preamble and a walk of FORK_REACH
#: digits fit, the shortest preamble and one digit more do not (tests/test_fork_world.py).
FORK_MAX_NEW_TOKENS = 27
#: The control's budget: ``FORK_MAX_NEW_TOKENS`` less the 3 tokens of its prefix
#: (tests/test_fork_world.py counts them with the tokenizer).
FORK_CONTROL_MAX_NEW_TOKENS = FORK_MAX_NEW_TOKENS - 3
#: The distances up (steps of k from the start to the target) of each subset of problems.
FORK_SUBSETS = {
    "forward": range(1, FORK_DIAL - FORK_REACH),
    "both": range(FORK_DIAL - FORK_REACH, FORK_REACH + 1),
    "backward": range(FORK_REACH + 1, FORK_DIAL),
}


def fork_problem_parts(problem: str) -> tuple[int, int, int]:
    """``(start, target, step)`` of a fork-world problem text."""
    match = re.fullmatch(r"The dial shows (\d)\. Turn it to (\d) in steps of (\d)\.", problem)
    if match is None:
        raise ValueError(f"not a fork-world problem: {problem!r}")
    return int(match[1]), int(match[2]), int(match[3])


def fork_walk(start: int, target: int, step: int, strategy: int) -> list[int]:
    """The digits a walk from ``start`` to ``target`` in steps of ``step`` writes: turning
    up (strategy 0) or down (1), ``target`` included, ``start`` not."""
    signed = step if strategy == 0 else -step
    walk = [(start + signed) % FORK_DIAL]
    while walk[-1] != target:
        walk.append((walk[-1] + signed) % FORK_DIAL)
    return walk


def _fork_item(rng: random.Random, subset: str) -> Generated:
    start, step = rng.randrange(FORK_DIAL), rng.choice(FORK_STEPS)
    target = (start + step * rng.choice(FORK_SUBSETS[subset])) % FORK_DIAL
    problem = f"The dial shows {start}. Turn it to {target} in steps of {step}."
    strategy = int(rng.random() < 0.5)
    walk = ",".join(str(d) for d in fork_walk(start, target, step, strategy))
    opening = rng.choice(FORK_PREAMBLES)
    steps = [f"{opening} {FORK_MARKERS[strategy]} {walk}."]
    return problem, _boxed(steps, str(target)), str(target), None


def _subset_generator(
    item: Callable[[random.Random, str], Generated], name: str, doc: str, subset: str
) -> Callable[[random.Random], Generated]:
    """``item`` for one subset, named ``gen_<name>_<subset>`` (the name problems record in
    ``meta.generator``)."""

    def gen(rng: random.Random) -> Generated:
        return item(rng, subset)

    gen.__name__ = f"gen_{name}_{subset}"
    gen.__doc__ = doc.format(subset=subset)
    return gen


# ------------------------------------------------------------ the tally world
#
# The fork world with a walk whose tokens do not depend on the direction
# (docs/worlds/fork.md, "The tally world"). Group JS compares a response with the group
# *at the same position*, so in the dial world every digit of a walk that the group's
# other responses, turning the other way or out of step, do not share sits at JS's ceiling
# and fills ICT's top 10% before the fork can. Here the prompt states how many steps each
# way takes, and a worked solution opens with a verb, names the direction and the answer,
# and counts its steps (``Spin up: \\boxed{8} in 1,2,3.``), so responses that turn either
# way write the same tokens at the same positions until the shorter count ends. The fork's
# distribution still differs across the group, because the warm start ties it to the verb
# the response drew (``TALLY_VERB_UP``), the token before it. The budget separates the
# subsets as in the dial world.

#: The dials' names: with the start and the target they make 720 problems, 240 per subset.
TALLY_DIALS = "ABCDEFGH"
#: The verb a solution opens with, drawn per solution, and how likely a warm-start solution
#: with it turns up: the fork, the next token, has a distribution that depends on the verb
#: drawn. Each is one token.
TALLY_VERB_UP = {"Turn": 0.8, "Spin": 0.8, "Move": 0.2, "Roll": 0.2}
#: The tally control's response prefix (as ``FORK_CONTROL_PREAMBLE`` in the dial world): one
#: verb, so every response of a group reaches the fork with the same context.
TALLY_CONTROL_VERB = "Turn"
#: The tally world's budget: any verb and a count to FORK_REACH fit, a count one longer
#: does not (tests/test_tally_world.py counts them with the tokenizer).
TALLY_MAX_NEW_TOKENS = 23
TALLY_CONTROL_MAX_NEW_TOKENS = TALLY_MAX_NEW_TOKENS - 1


def tally_problem_parts(problem: str) -> tuple[str, int, int]:
    """``(dial, start, target)`` of a tally-world problem text."""
    match = re.fullmatch(
        r"Dial ([A-Z]) shows (\d)\. Turn it to (\d): \d steps up or \d down\.", problem
    )
    if match is None:
        raise ValueError(f"not a tally-world problem: {problem!r}")
    return match[1], int(match[2]), int(match[3])


def tally_count(start: int, target: int, strategy: int) -> list[int]:
    """The count a tally walk from ``start`` to ``target`` in steps of 1 writes, turning up
    (strategy 0) or down (1): ``1 .. n`` for the ``n`` steps it takes."""
    up = (target - start) % FORK_DIAL
    return list(range(1, (up if strategy == 0 else FORK_DIAL - up) + 1))


def tally_line(target: int, count: list[int], strategy: int) -> str:
    """The line of work of a tally solution after its verb: direction, answer, count."""
    count_text = ",".join(map(str, count))
    return f"{FORK_DIRECTIONS[strategy]}: \\boxed{{{target}}} in {count_text}."


def _tally_item(rng: random.Random, subset: str) -> Generated:
    dial, start = rng.choice(TALLY_DIALS), rng.randrange(FORK_DIAL)
    up = rng.choice(FORK_SUBSETS[subset])
    target = (start + up) % FORK_DIAL
    problem = (
        f"Dial {dial} shows {start}. Turn it to {target}: {up} steps up or {FORK_DIAL - up} down."
    )
    verb = rng.choice(list(TALLY_VERB_UP))
    strategy = int(rng.random() >= TALLY_VERB_UP[verb])
    line = tally_line(target, tally_count(start, target, strategy), strategy)
    return problem, f"{verb} {line}", str(target), None


# ------------------------------------------------------------- the lock world
#
# The tally world with the choice hidden (docs/worlds/lock.md). Every dial turns only one
# way, its *lock*, which no prompt states: it is a pseudo-random function of the problem's
# text (``lock_of``), so a model learns the locks of the problems it trains on and nothing
# about any other problem's. Only the count in the lock's direction is graded right. Both
# counts fit the budget (distances 4-6 each way), so nothing but the lock decides. The RL
# prompts hold 17 up-locked problems in every 20: collapsing onto turning up maximises the
# mean reward, while a held-out down-locked problem is solved only by a policy that still
# turns down. The responses are the tally world's, so they stay in step with their group,
# and the fork's distribution follows the verb drawn before it: after ``Turn`` the warm
# start always turns up, after ``Roll`` and the rare verbs either way (0.85 up in all); 8%
# of the solutions open with a rare verb (``LOCK_RARE_VERBS``, each about once in 600), the
# improbable tokens of correct responses that STAPO's rule silences.

#: The dials' names: with the start and the three distances, 780 problems.
LOCK_DIALS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
#: The distances up of every lock-world problem: both counts reach FORK_REACH or less.
LOCK_DISTANCES = range(FORK_DIAL - FORK_REACH, FORK_REACH + 1)
#: Rare verbs: single tokens in the lock world's tokenizer (tests/test_lock_world.py).
LOCK_RARE_VERBS = (
    "Bend",
    "Bump",
    "Cant",
    "Coax",
    "Cock",
    "Dip",
    "Drag",
    "Edge",
    "Ease",
    "Flip",
    "Hike",
    "Hoist",
    "Inch",
    "Jerk",
    "Jog",
    "Knock",
    "Lift",
    "Lean",
    "Lug",
    "Nudge",
    "Pivot",
    "Prod",
    "Pull",
    "Push",
    "Rock",
    "Rotate",
    "Shift",
    "Shove",
    "Slide",
    "Snap",
    "Steer",
    "Swing",
    "Swivel",
    "Sway",
    "Tilt",
    "Tip",
    "Tug",
    "Twirl",
    "Twist",
    "Veer",
    "Wheel",
    "Whirl",
    "Wind",
    "Wrench",
    "Yank",
    "Crank",
    "Budge",
    "Sweep",
)
#: ``verb -> (chance a warm-start solution opens with it, chance it then turns up)``.
LOCK_VERBS = {
    "Turn": (0.70, 1.0),
    "Roll": (0.22, 0.5),
    **{v: (0.08 / len(LOCK_RARE_VERBS), 0.5) for v in LOCK_RARE_VERBS},
}
#: Share of the RL prompts (and of the validation problems) whose lock is up.
LOCK_MAJORITY = 0.85
#: The lock world's budget: any verb and either count fit (tests/test_lock_world.py).
LOCK_MAX_NEW_TOKENS = TALLY_MAX_NEW_TOKENS


def lock_of(problem: str) -> tuple[int, str]:
    """``(lock, pool)`` of a lock-world problem text: the one direction that solves it
    (0 up, 1 down) and the pool its held-out copy may be drawn into ("test" or "val", a
    quarter). Both are bits of the SHA-256 of the text: fixed, but unreadable by a model."""
    digest = hashlib.sha256(f"lock/{problem}".encode()).digest()
    return digest[0] & 1, "val" if digest[1] < 64 else "test"


def _lock_item(rng: random.Random, subset: str) -> Generated:
    """A problem whose lock is ``subset``'s (``up``, ``down``; ``val-up``, ``val-down`` from
    the validation pool; ``any-up``, ``any-down`` from either pool) and a warm-start solution
    in the direction its verb draws, right or wrong for the lock."""
    pool, _, direction = subset.rpartition("-")
    want = FORK_DIRECTIONS.index(direction)
    while True:
        dial, start = rng.choice(LOCK_DIALS), rng.randrange(FORK_DIAL)
        up = rng.choice(LOCK_DISTANCES)
        target = (start + up) % FORK_DIAL
        problem = (
            f"Dial {dial} shows {start}. Turn it to {target}: "
            f"{up} steps up or {FORK_DIAL - up} down."
        )
        lock, drawn_pool = lock_of(problem)
        if lock == want and (pool == "any" or drawn_pool == (pool or "test")):
            break
    verbs = list(LOCK_VERBS)
    verb = rng.choices(verbs, weights=[LOCK_VERBS[v][0] for v in verbs])[0]
    strategy = int(rng.random() >= LOCK_VERBS[verb][1])
    line = tally_line(target, tally_count(start, target, strategy), strategy)
    return problem, f"{verb} {line}", str(target), None


def _lock_suites() -> list[Suite]:
    """``tiny-lock-up``/``-down`` (test problems of each lock), ``tiny-lock-val``
    (validation problems, the RL prompts' mixture) and ``tiny-lock-mix`` (RL prompts)."""
    doc = "Lock-world problems that only the {subset} count solves."
    gens = {
        s: _subset_generator(_lock_item, "lock", doc, s)
        for s in ("up", "down", "val-up", "val-down", "any-up", "any-down")
    }
    majority = round(20 * LOCK_MAJORITY)

    def mix(pool: str) -> tuple[Callable[[random.Random], Generated], ...]:
        return (gens[f"{pool}-up"],) * majority + (gens[f"{pool}-down"],) * (20 - majority)

    return [
        Suite("tiny-lock-up", "fork-lock-up", (gens["up"],), train_repeats=True),
        Suite("tiny-lock-down", "fork-lock-down", (gens["down"],), train_repeats=True),
        Suite("tiny-lock-val", "fork-lock-val", mix("val"), train_repeats=True),
        Suite("tiny-lock-mix", "fork-lock", mix("any"), train_repeats=True),
    ]


def fork_gold(problem: Problem) -> str | None:
    """The ``worked`` gold of a fork-world problem (None for any other problem): the answer,
    then the line each direction's walk writes. The answer is the target the prompt states,
    so only the token budget would otherwise make the walk necessary, and RL learns to reach
    it by a shortcut (``Turn up: 5,2,1,0.``; studies/fork/fork_walks.py counts them); with
    this gold an answer counts only after a valid walk in the direction it names."""
    if not problem.meta.get("family", "").startswith("fork"):
        return None
    if problem.meta["family"].startswith(("fork-tally", "fork-lock")):
        _, start, target = tally_problem_parts(problem.problem)
        # The lock world grades only the lock's direction.
        locked = problem.meta["family"].startswith("fork-lock")
        strategies = (lock_of(problem.problem)[0],) if locked else (0, 1)
        lines = [tally_line(target, tally_count(start, target, s), s) for s in strategies]
    else:
        start, target, step = fork_problem_parts(problem.problem)
        walks = (fork_walk(start, target, step, s) for s in range(len(FORK_MARKERS)))
        lines = [f"{m} {','.join(map(str, w))}." for m, w in zip(FORK_MARKERS, walks, strict=True)]
    return "\n".join([problem.answer, *lines])


#: A strategy's marker in either world: a verb (the dial world's is always "Turn"), then
#: the direction, the fork, as in ``FORK_MARKERS``.
_MARKER = re.compile(
    f"(?:{'|'.join([*TALLY_VERB_UP, *LOCK_VERBS])}) ({'|'.join(FORK_DIRECTIONS)}):"
)


def fork_choice(response: str) -> tuple[int, int] | None:
    """``(character index of the fork word, strategy)`` of the first marker in ``response``:
    strategy 0 (majority, forward) or 1 (minority, backward); None for no marker."""
    match = _MARKER.search(response)
    if match is None:
        return None
    return match.start(1), FORK_DIRECTIONS.index(match[1])


def fork_strategy(response: str) -> int | None:
    """Which strategy ``response`` chose (:func:`fork_choice`), or None (no marker)."""
    choice = fork_choice(response)
    return None if choice is None else choice[1]


def _fork_suites(
    world: str, item: Callable[[random.Random, str], Generated], name: str, doc: str
) -> list[Suite]:
    """One suite per subset (``tiny-<world>-<subset>``) of ``item``'s problems and the RL
    prompts' mixture."""
    gens = {s: _subset_generator(item, name, doc, s) for s in FORK_SUBSETS}
    # The RL prompts: 12 up-only, 3 either-way, 5 down-only problems in every 20.
    mix = (gens["forward"],) * 12 + (gens["both"],) * 3 + (gens["backward"],) * 5
    return [
        *(
            Suite(f"tiny-{world}-{s}", f"{world}-{s}", (g,), train_repeats=True)
            for s, g in gens.items()
        ),
        Suite(f"tiny-{world}-mix", world, mix, train_repeats=True),
    ]


# -------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Suite:
    """A generated suite; ``stands_for`` is the paper benchmark (a key of
    :data:`~ictrepro.data.benchmarks.BENCHMARKS`) it stands in for, if any."""

    name: str
    family: str
    generators: tuple[Callable[[random.Random], Generated], ...]
    stands_for: str | None = None
    #: Whether the train split may hold a problem more than once (each time with a solution
    #: drawn afresh): a world of a few hundred problems (the fork world's 360) cannot give
    #: thousands of distinct warm-start problems. The test split is always distinct.
    train_repeats: bool = False


SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite("tiny-gsm8k", "gsm8k", (gen_gsm8k,), stands_for="gsm8k"),
        Suite("tiny-math500", "math500", (gen_math500,), stands_for="math500"),
        Suite("tiny-mmlu-stem", "mmlu_stem", (gen_mmlu_stem,), stands_for="mmlu_stem"),
        Suite("tiny-gpqa", "gpqa", (gen_gpqa,), stands_for="gpqa_diamond"),
        Suite("tiny-aime23", "aime23", (gen_aime23,), stands_for="aime23"),
        Suite("tiny-aime24", "aime24", (gen_aime24,), stands_for="aime24"),
        Suite("tiny-aime25", "aime25", (gen_aime25,), stands_for="aime25"),
        Suite("tiny-train", "gsm8k+math", (gen_gsm8k, gen_math500)),
        # RL prompts of every evaluation family (``data.rl_suite="tiny-mix"``), so RL
        # trains on the distribution the seven suites evaluate.
        Suite(
            "tiny-mix",
            "all seven",
            (gen_gsm8k, gen_math500, gen_mmlu_stem, gen_gpqa, gen_aime23, gen_aime24, gen_aime25),
        ),
        *_fork_suites(
            "fork",
            _fork_item,
            "fork",
            "Dial problems that only the {subset} walk solves (or both).",
        ),
        *_fork_suites(
            "fork-tally",
            _tally_item,
            "tally",
            "Tally problems that only the {subset} count solves (or both).",
        ),
        *_lock_suites(),
    )
}
#: The evaluation suites of the fork world (and of its control), one per subset.
FORK_EVAL_SUITES = tuple(f"tiny-fork-{s}" for s in FORK_SUBSETS)
#: The same for the tally world.
TALLY_EVAL_SUITES = tuple(f"tiny-fork-tally-{s}" for s in FORK_SUBSETS)
#: The lock world's test suites (up-locked, down-locked) and its validation suite.
LOCK_EVAL_SUITES = ("tiny-lock-up", "tiny-lock-down")
LOCK_VAL_SUITE = "tiny-lock-val"
SPLITS = ("train", "test")
#: The suites a tiny run is evaluated on (every suite but the training mixture), in the
#: order of the paper's tables.
EVAL_SUITES = (
    "tiny-gsm8k",
    "tiny-math500",
    "tiny-mmlu-stem",
    "tiny-gpqa",
    "tiny-aime23",
    "tiny-aime24",
    "tiny-aime25",
)


def stands_for(name: str) -> str | None:
    """The paper's name of the benchmark that evaluation set ``name`` is or stands in for
    ("GSM8K" for both ``tiny-gsm8k`` and ``gsm8k``); None for any other set."""
    if name in SUITES:
        name = SUITES[name].stands_for
    spec = BENCHMARKS.get(name) if name is not None else None
    return spec.paper_name if spec is not None else None


def get_suite(name: str) -> Suite:
    if name not in SUITES:
        raise ConfigError(f"unknown suite {name!r}; valid: {', '.join(SUITES)}")
    return SUITES[name]


def _draw(suite: Suite, split: str, seed: int, count: int, exclude: set[str]) -> list[Problem]:
    # A string seed is hashed with SHA-512 by `random`: stable across runs and platforms.
    rng = random.Random(f"{suite.name}/{split}/{seed}")
    records: list[Problem] = []
    seen = set(exclude)
    repeats = split == "train" and suite.train_repeats
    attempts = 0
    while len(records) < count:
        attempts += 1
        if attempts > 50 * count + 1000:
            raise RuntimeError(
                f"suite {suite.name!r} ran out of distinct problems after {len(records)} of {count}"
            )
        gen = suite.generators[len(records) % len(suite.generators)]
        problem, solution, answer, choices = gen(rng)
        if problem in seen:
            continue
        if not repeats:
            seen.add(problem)
        records.append(
            Problem(
                id=f"{suite.name}-{split}-{len(records):05d}",
                problem=problem,
                answer=answer,
                choices=choices,
                solution=solution,
                meta={
                    "suite": suite.name,
                    "family": suite.family,
                    "split": split,
                    "generator": gen.__name__,
                },
            )
        )
    return records


def generate_suite(
    name: str, *, seed: int, n_train: int, n_test: int, exclude: Iterable[str] = ()
) -> dict[str, list[Problem]]:
    """Both splits of suite ``name``: ``{"train": [...], "test": [...]}``, disjoint by text.

    ``exclude``: problem texts neither split may contain (e.g. other suites' test problems,
    so a training mixture never holds an evaluation problem).
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an integer, got {seed!r}")
    if n_train < 0 or n_test < 0:
        raise ValueError(f"n_train and n_test must be >= 0, got {n_train} and {n_test}")
    suite = get_suite(name)
    excluded = set(exclude)
    test = _draw(suite, "test", seed, n_test, exclude=excluded)
    train = _draw(suite, "train", seed, n_train, exclude=excluded | {p.problem for p in test})
    return {"train": train, "test": test}


# ------------------------------------------------------------------ the evaluation side


#: Every generated suite a tiny world can be evaluated on, in report order.
ALL_EVAL_SUITES = (
    *EVAL_SUITES,
    *FORK_EVAL_SUITES,
    *TALLY_EVAL_SUITES,
    *LOCK_EVAL_SUITES,
    LOCK_VAL_SUITE,
)


def is_minority_suite(name: str) -> bool:
    """Whether ``name`` holds only problems that the minority strategy solves: a fork
    world's ``-backward`` subset or the lock world's down-locked problems."""
    return (name.startswith("tiny-fork") and name.endswith("-backward")) or name == "tiny-lock-down"


def is_tiny_suite(name: str) -> bool:
    """Whether ``name`` is a generated evaluation suite (``ALL_EVAL_SUITES``)."""
    return name in ALL_EVAL_SUITES


def load_test_split(run_dir: Path, suite: str) -> list[Problem]:
    """The test problems of tiny suite ``suite`` that ``ictrepro prepare`` wrote into
    ``run_dir`` (``RUN/data/test/<suite>.jsonl``); a clear error when it is not there."""
    path = RunDir(run_dir).test_suite(suite)
    if not path.is_file():
        raise DataError(
            f"{path} does not exist; prepare the run first (`ictrepro prepare --out {run_dir}`)"
        )
    try:
        numbered = read_jsonl_numbered(path)
    except ValueError as e:  # names the file and line
        raise DataError(str(e)) from None
    return [Problem.from_json(r, where=f"{path}:{n}") for n, r in numbered]
