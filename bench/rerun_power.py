"""The statistical mode of ``check --rerun``, calibrated on a pinned reproduction: how often
an honest re-run passes, and how often two broken builds are caught.

    python bench/rerun_power.py tiny-fork-rare [--results results]

Simulates re-runs of the ``check --rerun`` subset (base, grpo-seed0, ict-seed0 x the
benchmarks) from the pinned per-problem counts, as ``tests/test_rerun_stats.py`` does, and
prints the critical |z|, the pass rate of honest re-runs (4,000), and the power against a
build whose trained models lose half their pass@1 and one whose training learns nothing
(2,000 each). Prints only; docs/regression.md quotes it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from ictrepro.results import rerun_stats as rs
from ictrepro.results.pinned import read_pinned_scores
from ictrepro.results.rerun import between_run_variances


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preset")
    parser.add_argument("--results", type=Path, default=Path("results"))
    args = parser.parse_args()
    records = read_pinned_scores(args.preset, args.results)
    counts = {(r["model"], r["benchmark"]): np.asarray(r["n_correct"]) for r in records}
    n, tau2 = records[0]["n_samples"], between_run_variances(records)
    keys = [k for k in counts if k[0] in ("base", "grpo-seed0", "ict-seed0")]
    rates = {k: rs.smoothed_rates(counts[k], n) for k in keys}
    critical = rs.critical_value(rs.calibrate(rates, n, tau2))
    halved = {k: v * (0.5 if k[0] != "base" else 1.0) for k, v in rates.items()}
    nothing = {k: rates[("base", k[1])] for k in rates}
    print(f"{args.preset}: {len(keys)} pairs, n = {n}, critical |z| {critical:.2f}")
    honest = rs.pass_rate(rates, rates, n, tau2, critical, runs=4000, seed=11)
    print(f"honest re-runs passing: {100 * honest:.2f}%")
    for name, broken in (("halved pass@1", halved), ("learns nothing", nothing)):
        power = rs.power(rates, broken, n, tau2, critical, runs=2000)
        print(f"build with {name} caught: {100 * power:.2f}%")


if __name__ == "__main__":
    main()
