"""The lock world's quick design: which arms and seeds resolve the most of ICT − GRPO
within the README's first command's 10 minutes on 2 cores (docs/power.md, "The quick
design").

    python studies/lock/quick_design.py results/tiny-lock-replication/scores.jsonl \
        --run runs/tiny-lock-replication [--budget 600] [--jobs 2]

The variance components of ICT − GRPO (average P@4 over the two test suites) come from
the pinned scores (``bench/power.py``'s model, ``ictrepro/evaluate/power.py``); the cost
of a training run with its evaluation from RUN's ``reproduce.json`` (its training and
evaluation wall time over its runs, at its worker count), plus the fixed part (prepare from
the shipped world, the base model's evaluation, the report) measured by
``bench/time_targets.py`` (``--fixed``). A design is a set of arms and a number of seeds;
its wall time is its rounds of ``jobs`` runs times the cost of one, plus the fixed part.
Prints every design considered with its 80%-power difference of the primary at the 95%
level (the quick run is exploratory: one comparison, no family), marking those within the
budget less a margin for a slower machine (15%). The design chosen: the smallest
detectable difference among those within; a tie goes to more controls. Not a test: it
only prints.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from power import paired_components, read_scores

from ictrepro.evaluate.power import detectable
from ictrepro.rundir import load_reproduce_record

ARM_SETS = {
    "GRPO, ICT": ("grpo", "ict"),
    "GRPO, ICT, positive control": ("grpo", "ict", "grpo-lr4"),
    "GRPO, ICT, Random-10%, positive control": ("grpo", "ict", "random", "grpo-lr4"),
}


def run_cost(run: Path) -> float:
    """Wall seconds one training run and its evaluation take at the run's worker count:
    the reproduction's train-and-eval time over its rounds of ``jobs`` runs."""
    record = load_reproduce_record(run)
    if record is None:
        raise SystemExit(f"{run} has no reproduce.json")
    runs = len(record["methods"]) * len(record["seeds"])
    rounds = math.ceil(runs / record["jobs"])
    return record["times_s"]["train_eval_s"] / rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scores", type=Path)
    parser.add_argument("--run", type=Path, required=True, help="A reproduction of the world.")
    parser.add_argument("--budget", type=float, default=600.0, help="Wall seconds.")
    parser.add_argument(
        "--margin",
        type=float,
        default=0.15,
        help="Share of the budget kept free for a slower machine (a design is within when "
        "its projected wall time is at most budget x (1 - margin)).",
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--fixed",
        type=float,
        default=40.0,
        help="Seconds outside the runs (prepare, base eval, report).",
    )
    args = parser.parse_args()
    _, _, _, c = paired_components(read_scores(args.scores), "ict", "grpo", 4)
    per_round = run_cost(args.run)
    print(
        f"ICT − GRPO components (points^2): seed {1e4 * c.seed:.2f}, problem {1e4 * c.problem:.1f}, "
        f"residual {1e4 * c.residual:.1f}; {per_round:.0f} s a round of {args.jobs} runs, "
        f"{args.fixed:.0f} s fixed"
    )
    print(
        "| arms | seeds | runs | wall s (projected) | detectable (80%, 95% level), points | within |"
    )
    print("|---|---|---|---|---|---|")
    for name, arms in ARM_SETS.items():
        for seeds in range(2, 9):
            runs = len(arms) * seeds
            wall = math.ceil(runs / args.jobs) * per_round + args.fixed
            d = 100 * detectable(c, S=seeds, J=c.J, n=c.n)
            mark = "yes" if wall <= args.budget * (1 - args.margin) else "no"
            print(f"| {name} | {seeds} | {runs} | {wall:.0f} | {d:.2f} | {mark} |")


if __name__ == "__main__":
    main()
