"""The lock world's learning-rate screen: each rule's validated rate, and the design the
confirmatory run needs (docs/plans/tiny-lock.md, "Learning rates" and "Power").

    python studies/lock/select_lr.py runs/screen   # holds <label>/ per grid rate

Each ``runs/screen/<label>`` is an ``ictrepro reproduce --preset tiny-lock-screen-<label>``
run: the five screened rules, seeds 0 and 1, evaluated on the validation suite
(``tiny-lock-val``: held-out problems with the RL prompts' 85/15 mix of locks). The rule,
fixed in the plan before the screen ran:

- a rate is *admissible* for a rule when each of its screening seeds' validation P@1 is at
  least the base model's minus 5 points (it did not break down);
- the rule's rate is its admissible rate with the highest mean validation P@1 over seeds;
  a tie (within 0.5 points) goes to the smaller rate; with no admissible rate, the
  smallest rate of the grid.

Then the power of the primary comparison (ICT − GRPO, average P@4) from the screen's own
variance components at the two selected rates, projected to the test design (two suites of
``J`` problems, ``S`` seeds, n = 16) at Holm's first level (5% / 4, two-sided), for the
designs considered. Prints only.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np

from ictrepro.evaluate.power import components, detectable
from ictrepro.presets import LOCK_LR_GRID, LOCK_SCREENED
from ictrepro.report.load import BASE, load_run

ADMISSIBLE_DROP = 0.05
TIE = 0.005
HOLM_FIRST_LEVEL = 1 - 0.05 / 4
TARGET = 0.0458
DESIGNS = [(S, J) for S in (3, 4, 5, 6, 8) for J in (48, 64, 96)]


def validation(run_dir: Path) -> dict:
    """``{method: {seed: ProblemScores}}`` on the validation suite, base included."""
    run = load_run(run_dir)
    return {
        m: {s: files["tiny-lock-val"] for s, files in per.items()}
        for m, per in run.evaluated.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("screen", type=Path)
    parser.add_argument("--json", type=Path, help="Also write the selection here.")
    args = parser.parse_args()
    runs = {label: validation(args.screen / label) for label in LOCK_LR_GRID}
    base = next(iter(runs.values()))[BASE][None]
    base_p1 = float(base.p1.mean())
    print(f"base model, validation P@1 {100 * base_p1:.1f}%, P@4 {100 * base.p4.mean():.1f}%")
    print(f"{'rule':10} " + " ".join(f"{label:>26}" for label in LOCK_LR_GRID))
    chosen = {}
    for method in LOCK_SCREENED:
        cells, candidates = [], []
        for label, lr in LOCK_LR_GRID.items():
            seeds = runs[label].get(method, {})
            p1 = [float(ps.p1.mean()) for ps in seeds.values()]
            p4 = [float(ps.p4.mean()) for ps in seeds.values()]
            if not p1:
                cells.append("missing")
                continue
            ok = all(x >= base_p1 - ADMISSIBLE_DROP for x in p1)
            cells.append(
                f"P@1 {100 * np.mean(p1):5.1f} P@4 {100 * np.mean(p4):5.1f}{'' if ok else ' X'}"
            )
            if ok:
                candidates.append((float(np.mean(p1)), lr, label))
        if candidates:
            best = max(c[0] for c in candidates)
            label = min((c for c in candidates if c[0] >= best - TIE), key=lambda c: c[1])[2]
        else:
            label = min(LOCK_LR_GRID, key=LOCK_LR_GRID.get)
        chosen[method] = label
        print(f"{method:10} " + " ".join(f"{c:>26}" for c in cells) + f"  -> {label}")
    print("(P@1, P@4: mean over seeds, percent; X: not admissible)")

    a = runs[chosen["ict"]]["ict"]
    b = runs[chosen["grpo"]]["grpo"]
    seeds = sorted(set(a) & set(b))
    xa = [np.stack([a[s].p4 for s in seeds])]
    xb = [np.stack([b[s].p4 for s in seeds])]
    ra = [np.stack([a[s].p1 for s in seeds])]
    rb = [np.stack([b[s].p1 for s in seeds])]
    c = components(xa, xb, ra, rb, n=16, k=4)
    print(
        f"\nICT - GRPO validation P@4 {100 * float(np.mean(xa[0] - xb[0])):+.2f} points; "
        f"components (points^2): seed {1e4 * c.seed:.2f}, problem {1e4 * c.problem:.2f}, "
        f"interaction {1e4 * c.interaction:.2f}, sampling {1e4 * c.sampling:.2f}"
    )
    test = dataclasses.replace(c, K=2)
    print("80%-power difference at Holm's first level (two suites of J problems, n = 16):")
    rows = {}
    for S, J in DESIGNS:
        d = detectable(test, S=S, J=J, n=16, confidence=HOLM_FIRST_LEVEL)
        rows[f"S={S},J={J}"] = d
        print(f"  S = {S}, J = {J:3}: {100 * d:5.2f} points{'  <= 4.58' if d <= TARGET else ''}")
    if args.json:
        args.json.write_text(json.dumps({"chosen": chosen, "detectable": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
