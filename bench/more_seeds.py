"""A comparison with more training seeds than a pinned run has, against the power
projection made from the pinned seeds alone.

    python bench/more_seeds.py PINNED_SCORES RUN [--a ict] [--b random] [--target 4.58]

PINNED_SCORES is a pinned ``results/<preset>/scores.jsonl``; RUN a run of the same world
that trained A and B on further seeds (``ictrepro reproduce --preset P --out RUN --methods
A,B --seeds 5,6,...``; it also evaluates the base model again, which must score count for
count as the pinned one). Prints, for P@1 and P@4 of the average over the benchmarks: the
paired difference A - B on the pinned seeds, on the new seeds and on all of them, each
with its 80%-power figure; the figure the pinned seeds' variance components projected for
all the seeds; each seed's average for A and B; and, for the seeds RUN trained, each
seed's average P@4 beside its last probe reward (the training problems), correlated. Not a
test: it only prints; docs/power.md, docs/regression.md and docs/worlds/fork.md quote
it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from power import matrices, paired_components, read_scores  # bench/ is the script's own folder

from ictrepro.evaluate.paired import paired_difference
from ictrepro.evaluate.power import (
    MAX_SEEDS,
    detectable,
    detectable_unlimited_seeds,
    seeds_to_resolve,
)

PTS = 100.0


def merged(pinned: list[dict], run: list[dict]) -> list[dict]:
    """The rows of both; a (method, seed, benchmark) in both must have equal counts."""
    rows = {(r["method"], r["seed"], r["benchmark"]): r for r in pinned}
    for r in run:
        key = (r["method"], r["seed"], r["benchmark"])
        if key in rows and rows[key]["n_correct"] != r["n_correct"]:
            raise SystemExit(f"{key}: the run's counts differ from the pinned ones")
        rows[key] = r
    return list(rows.values())


def seeds_of(rows: list[dict], method: str) -> list[int]:
    return sorted({r["seed"] for r in rows if r["method"] == method})


def only(rows: list[dict], seeds: set[int]) -> list[dict]:
    return [r for r in rows if r["seed"] in seeds]


def pair(rows: list[dict], a: str, b: str, k: int):
    _, xs, ys, c = paired_components(rows, a, b, k)
    return paired_difference(xs, ys), c


def needed(c, target: float) -> str:
    """Seeds to resolve ``target`` points, or why none are given."""
    found = seeds_to_resolve(c, target / PTS)
    if found is not None:
        return str(found)
    floor = PTS * detectable_unlimited_seeds(c)
    if floor > target:
        return f"none (unlimited seeds: {floor:.2f} points)"
    return f"more than {MAX_SEEDS} (unlimited seeds: {floor:.2f} points)"


def line(name: str, d, S: int) -> str:
    verdict = "resolved" if d.resolved else "not resolved"
    return (
        f"| {name} | {S} | {PTS * d.mean:+.2f} [{PTS * d.ci_low:+.2f}, {PTS * d.ci_high:+.2f}] "
        f"| {verdict} | {PTS * d.detectable:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pinned", type=Path)
    parser.add_argument("run", type=Path)
    parser.add_argument("--a", default="ict")
    parser.add_argument("--b", default="random")
    parser.add_argument("--target", type=float, default=4.58, help="Points to resolve.")
    args = parser.parse_args()

    pinned, run = read_scores(args.pinned), read_scores(args.run)
    base_pinned = {r["benchmark"]: r["n_correct"] for r in pinned if r["method"] == "base"}
    base_run = {r["benchmark"]: r["n_correct"] for r in run if r["method"] == "base"}
    if base_run:
        same = base_run == base_pinned
        print(
            f"base model evaluated again: counts {'equal to' if same else 'DIFFER from'} the pinned"
        )
    rows = merged(pinned, run)
    old = set(seeds_of(pinned, args.a)) & set(seeds_of(pinned, args.b))
    new = (set(seeds_of(run, args.a)) & set(seeds_of(run, args.b))) - old
    both = old | new
    print(f"{args.a} - {args.b}: pinned seeds {sorted(old)}, new seeds {sorted(new)}")
    for k in (1, 4):
        print(f"\naverage P@{k}, points (95% interval; detectable at 80% power)\n")
        print("| seeds | S | difference | | detectable (80%) |")
        print("|---|---|---|---|---|")
        results = {}
        for name, seeds in (("pinned", old), ("new", new), ("all", both)):
            d, c = pair(only(rows, seeds), args.a, args.b, k)
            results[name] = c
            print(line(name, d, len(seeds)))
        c = results["pinned"]
        projected = detectable(c, S=len(both), J=c.J, n=c.n)
        print(
            f"\nprojected from the pinned seeds for S = {len(both)}: {PTS * projected:.2f} points; "
            f"seeds to resolve {args.target:g} points from the pinned seeds' components: "
            f"{needed(c, args.target)}, from all seeds': {needed(results['all'], args.target)}"
        )
        a = results["all"]
        print(
            f"components from all seeds (points^2): seed {PTS**2 * a.seed:.1f}, problem "
            f"{PTS**2 * a.problem:.1f}, residual {PTS**2 * a.residual:.1f}; from the pinned "
            f"seeds: seed {PTS**2 * c.seed:.1f}, problem {PTS**2 * c.problem:.1f}, residual "
            f"{PTS**2 * c.residual:.1f}"
        )
        per_seed = {}
        for m in (args.a, args.b):
            scores, _, _ = matrices(only(rows, both), m, k)
            per_seed[m] = np.mean([s.mean(axis=1) for s in scores.values()], axis=0)
        print(f"\nper seed ({sorted(both)}), average P@{k} (percent):")
        for m, v in per_seed.items():
            values = ", ".join(f"{PTS * x:.1f}" for x in v)
            print(f"- {m}: {values} (mean {PTS * v.mean():.1f}, sd {PTS * v.std(ddof=1):.1f})")
    print("\nthe seed spread and training on the RL problems (seeds trained in RUN):")
    for m in (args.a, args.b):
        probe_correlation(args.run, rows, m, sorted(new))


def probe_end(run: Path, method: str, seed: int) -> float | None:
    """The last probe reward a training run of ``run`` logged (None without one)."""
    path = run / "train" / f"{method}-seed{seed}" / "metrics.jsonl"
    if not path.exists():
        return None
    probes = [r["probe_reward"] for r in map(json.loads, path.read_text().splitlines())
              if r.get("probe_reward") is not None]  # fmt: skip
    return probes[-1] if probes else None


def probe_correlation(run: Path, rows: list[dict], method: str, seeds: list[int]) -> None:
    """Per seed trained in ``run``: average P@4 against the last probe reward (training
    problems), and their correlation: how much of the seed spread is how far training
    moved the model on its own problems."""
    scores, _, _ = matrices(only(rows, set(seeds)), method, 4)
    p4 = np.mean([s.mean(axis=1) for s in scores.values()], axis=0)
    probes = [probe_end(run, method, s) for s in seeds]
    if any(x is None for x in probes):
        return
    r = np.corrcoef(p4, probes)[0, 1]
    pairs = ", ".join(f"{PTS * a:.1f}/{PTS * b:.1f}" for a, b in zip(p4, probes, strict=True))
    print(f"- {method}, seeds {seeds[0]}-{seeds[-1]}: average P@4 / last probe reward (percent) "
          f"{pairs}; correlation {r:+.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
