"""The lock world's properties beside their targets, from a reproduction of it
(docs/worlds/lock.md, "Properties"; docs/plans/tiny-lock.md, section 4).

    python studies/lock/properties.py runs/tiny-lock

Prints, from the run's per-problem scores and ``metrics.jsonl``: collapse (GRPO − base P@4
on the down-locked suite, paired, 95% interval), room (the base model's average P@4), how
often each sparsifying rule's mask acted, ICT's stability (seed-to-seed SD of average P@4
against GRPO's), and per method the share of choice tokens its mask selected and the
share of responses that turned down over the first and last ten steps. Prints only.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from ictrepro.report.comparisons import compare, mask_activity
from ictrepro.report.load import BASE, load_run
from ictrepro.report.tables import score_run

PERCENT = 100.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    args = parser.parse_args()
    report = score_run(args.run)
    cells, seeds = report.cells, report.seeds

    collapse = compare(cells, seeds, "grpo", BASE)
    i = collapse.benchmarks.index("tiny-lock-down")
    d = collapse.per_benchmark["p4"][i]
    print(
        f"collapse: GRPO − base P@4 on tiny-lock-down {PERCENT * d.mean:+.2f} "
        f"[{PERCENT * d.ci_low:+.2f}, {PERCENT * d.ci_high:+.2f}] (target: interval below 0)"
    )
    base = report.averages[BASE]
    print(f"room: base average P@4 {PERCENT * base.scores['p4'].mean:.1f}% (target <= 75%)")

    def seed_sd(method: str) -> float:
        per_seed = report.averages[method].scores["p4"].per_seed
        return float(np.std(per_seed, ddof=1)) * PERCENT

    if "ict" in cells and "grpo" in cells:
        ict, grpo = seed_sd("ict"), seed_sd("grpo")
        print(
            f"stability: seed-to-seed SD of average P@4, ICT {ict:.2f} points, GRPO {grpo:.2f} "
            f"(target: ICT at most twice GRPO's, {2 * grpo:.2f})"
        )
    run = load_run(args.run)
    for a in mask_activity(run.trained):
        print(
            f"mask acted: {a.method} at {a.steps_acted} of {a.steps} steps "
            f"({PERCENT * a.acted_share:.1f}%), {PERCENT * a.left_out:.3g}% of tokens left out"
        )
    print(
        "\n| method | choice tokens selected (steps 4-100) | turned down, first -> last 10 steps |"
    )
    print("|---|---|---|")
    for method, runs in run.trained.items():
        selected, first, last = [], [], []
        for rows in runs.values():
            late = [
                r["fork_selected_fraction"]
                for r in rows[3:]
                if r.get("fork_selected_fraction") is not None
            ]
            selected.append(np.mean(late))
            down = [r["fork_minority_fraction"] for r in rows]
            # A run whose responses stopped reaching the choice (a breakdown) has no share.
            first += [np.mean(v) for v in [[d for d in down[:10] if d is not None]] if v]
            last += [np.mean(v) for v in [[d for d in down[-10:] if d is not None]] if v]
        print(
            f"| {method} | {PERCENT * np.mean(selected):.1f}% ({PERCENT * min(selected):.0f}-"
            f"{PERCENT * max(selected):.0f}%) | {PERCENT * np.mean(first):.1f}% -> "
            f"{PERCENT * np.mean(last):.1f}% ({len(last)} of {len(selected)} runs reach the "
            "choice) |"
        )


if __name__ == "__main__":
    main()
