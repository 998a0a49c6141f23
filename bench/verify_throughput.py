"""Throughput of the answer verifier: the old path and the new one side by side, in-process
and with worker processes.

The old path is today's verifier before the fast path: every math answer parsed and
compared by math-verify (``grade_full``), one message per result from a worker
(``flush_interval_s=0``). The new path decides what it can with the quick rules of
``ictrepro.verify.quick`` and falls back to math-verify for the rest (``grade``), and its
workers send results in batches. Each is run with ``Verifier(workers=w)`` for each ``w``
(default 0, 1 and 2), on the same list of responses; every setting must give the same
verdicts (the script fails if not). Worker start-up (spawn, imports and a warm-up grading)
is timed apart: it is paid once per ``Verifier``. The table ends with the share of
responses decided by each path (``grade_explained``).

Two mixes:

- ``synthetic`` (default): seeded integers, fractions and roots in boxes, "The answer is
  ...", GSM8K ``####``, wrong answers, responses without an answer and multiple-choice
  letters, each after a few hundred characters of reasoning, with 8 responses per gold
  answer (as in pass@k sampling);
- ``corpus``: a seeded sample of the corpus of ``ictrepro.verify.corpus`` (model-style
  responses to the real benchmark answers of ``--data-dir`` and the tiny suites), where many
  more answers need math-verify.

Usage::

    python bench/verify_throughput.py            # 2,000 synthetic responses, workers 0 1 2
    python bench/verify_throughput.py --quick    # 300 responses
    python bench/verify_throughput.py --mix corpus --data-dir ../shared/benchmarks
    python bench/verify_throughput.py -n 5000 --workers 0 4 8
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ictrepro.data.verifier_corpus import benchmark_sources, tiny_suite_sources
from ictrepro.verify import GradeRequest, Verifier, count_verdicts
from ictrepro.verify.corpus import build_corpus
from ictrepro.verify.grade import DECIDED_BY, clear_caches, grade, grade_explained, grade_full
from ictrepro.verify.pool import warm_up

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


def corpus_sample(n: int, data_dir: Path | None, seed: int = 0) -> list[GradeRequest]:
    """``n`` responses drawn (seeded) from the corpus of the benchmarks and tiny suites."""
    sources = tiny_suite_sources()
    if data_dir is not None:
        sources = benchmark_sources(data_dir) + sources
    everything = [r for requests in build_corpus(sources).values() for r in requests]
    return random.Random(seed).sample(everything, min(n, len(everything)))


def timed(requests: list[GradeRequest], workers: int, timeout_s: float, new: bool):
    """(start-up s, grading s, verdicts) of one setting."""
    settings = {} if new else {"grade_fn": grade_full, "flush_interval_s": 0}
    clear_caches()  # in-process, no setting starts with the golds another one parsed
    started = time.perf_counter()
    with Verifier(workers=workers, timeout_s=timeout_s, **settings) as verifier:
        startup = time.perf_counter() - started
        started = time.perf_counter()
        verdicts = verifier.grade_many(requests)
        return startup, time.perf_counter() - started, verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=2000, help="responses to grade (default 2000)")
    parser.add_argument("--quick", action="store_true", help="grade 300 responses")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--timeout-s", type=float, default=5.0)
    parser.add_argument("--mix", choices=("synthetic", "corpus"), default="synthetic")
    parser.add_argument("--data-dir", type=Path, help="benchmark files for --mix corpus")
    args = parser.parse_args()
    n = 300 if args.quick else args.n
    requests = make_requests(n) if args.mix == "synthetic" else corpus_sample(n, args.data_dir)
    n = len(requests)
    warm_up(grade, args.timeout_s)  # in-process, as the workers do theirs

    table = Table(title=f"Verifier throughput: {n} responses ({args.mix} mix), old and new path")
    columns = ("workers", "start-up s old/new", "old responses/s", "new responses/s", "new/old")
    for column in columns:
        table.add_column(column, justify="right")
    reference = None
    for workers in args.workers:
        rates, startups = [], []
        for new in (False, True):
            startup, elapsed, verdicts = timed(requests, workers, args.timeout_s, new)
            if reference is None:
                reference = verdicts
            elif verdicts != reference:
                path = "new" if new else "old"
                raise SystemExit(f"the {path} path with workers={workers} changed verdicts")
            rates.append(n / elapsed)
            startups.append(startup)
        table.add_row(
            str(workers),
            f"{startups[0]:.2f} / {startups[1]:.2f}",
            f"{rates[0]:,.0f}",
            f"{rates[1]:,.0f}",
            f"{rates[1] / rates[0]:.1f}x",
        )
    decided = Counter(
        grade_explained(r.response, r.gold, kind=r.kind, timeout_s=args.timeout_s)[1]
        for r in requests
    )
    console = Console()
    console.print(table)
    console.print(f"verdicts (the same in every setting): {count_verdicts(reference or [])}")
    shares = ", ".join(f"{path} {decided[path] / n:.1%}" for path in DECIDED_BY if decided[path])
    console.print(f"decided by (new path): {shares}")


if __name__ == "__main__":  # required: workers are spawned and re-import this module
    main()
