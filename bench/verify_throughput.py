"""Throughput of the answer verifier, in-process and with worker processes, side by side.

Grades the same mixed list of responses with ``Verifier(workers=w)`` for each ``w`` (default
0, 1 and 2) and prints responses per second. The mix is seeded: integers, fractions and
roots in boxes, "The answer is ...", GSM8K ``####``, wrong answers, responses without an
answer and multiple-choice letters, each after a few hundred characters of reasoning, with
8 responses per gold answer (as in pass@k sampling). Worker start-up (spawn, imports and a
warm-up grading) is timed apart: it is paid once per ``Verifier``. Every setting must give
the same verdicts; the script fails if they differ.

Usage::

    python bench/verify_throughput.py            # 2,000 responses, workers 0 1 2
    python bench/verify_throughput.py --quick    # 300 responses
    python bench/verify_throughput.py -n 5000 --workers 0 4 8
"""

from __future__ import annotations

import argparse
import random
import time

from rich.console import Console
from rich.table import Table

from ictrepro.verify import GradeRequest, Verifier, count_verdicts, grade

SAMPLES_PER_GOLD = 8
REASONING = (
    "We set up the equation from the statement and simplify both sides step by step, "
    "checking each intermediate value against the constraints given in the problem. "
)


def _math_gold(rng: random.Random) -> str:
    form = rng.randrange(3)
    if form == 0:
        return str(rng.randint(-999, 9999))
    if form == 1:
        return f"\\frac{{{rng.randint(1, 40)}}}{{{rng.randint(41, 90)}}}"
    return f"{rng.randint(2, 9)}\\sqrt{{{rng.choice([2, 3, 5, 7])}}}"


def _math_response(rng: random.Random, gold: str) -> str:
    answer = gold if rng.random() < 0.5 else _math_gold(rng)  # about half correct
    body = REASONING * rng.randint(1, 6)
    style = rng.randrange(5)
    if style == 0:
        return f"{body}So the result is $\\boxed{{{answer}}}$."
    if style == 1:
        return f"{body}The answer is ${answer}$."
    if style == 2 and "\\" not in answer:
        return f"{body}\n#### {answer}"
    if style == 3:
        return f"{body}I could not finish the computation."
    return f"{body}First guess \\boxed{{0}}; on reflection \\boxed{{{answer}}}."


def make_requests(n: int, seed: int = 0) -> list[GradeRequest]:
    """``n`` seeded requests, ``SAMPLES_PER_GOLD`` per gold; about 1 in 5 multiple choice."""
    rng = random.Random(seed)
    requests: list[GradeRequest] = []
    while len(requests) < n:
        if rng.random() < 0.2:
            gold = rng.choice("ABCD")
            for _ in range(SAMPLES_PER_GOLD):
                letter = rng.choice("ABCD")
                response = REASONING * rng.randint(1, 6) + f"The answer is \\boxed{{({letter})}}."
                requests.append(GradeRequest(response, gold, "choice"))
        else:
            gold = _math_gold(rng)
            requests.extend(
                GradeRequest(_math_response(rng, gold), gold, "math")
                for _ in range(SAMPLES_PER_GOLD)
            )
    return requests[:n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=2000, help="responses to grade (default 2000)")
    parser.add_argument("--quick", action="store_true", help="grade 300 responses")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--timeout-s", type=float, default=5.0)
    args = parser.parse_args()
    n = 300 if args.quick else args.n
    requests = make_requests(n)
    grade("\\boxed{1}", "1", kind="math")  # in-process warm-up, as the workers do theirs

    table = Table(title=f"Verifier throughput: {n} responses")
    for column in ("workers", "start-up s", "grading s", "responses/s", "speed-up"):
        table.add_column(column, justify="right")
    reference = None
    base_rate = None
    for workers in args.workers:
        started = time.perf_counter()
        with Verifier(workers=workers, timeout_s=args.timeout_s) as verifier:
            startup = time.perf_counter() - started
            started = time.perf_counter()
            verdicts = verifier.grade_many(requests)
            elapsed = time.perf_counter() - started
        if reference is None:
            reference = verdicts
        elif verdicts != reference:
            raise SystemExit(f"workers={workers} gave different verdicts from the first setting")
        rate = n / elapsed
        base_rate = base_rate or rate
        table.add_row(
            str(workers),
            f"{startup:.2f}",
            f"{elapsed:.2f}",
            f"{rate:,.0f}",
            f"{rate / base_rate:.2f}x",
        )
    console = Console()
    console.print(table)
    console.print(f"verdicts: {count_verdicts(reference or [])}")


if __name__ == "__main__":  # required: workers are spawned and re-import this module
    main()
