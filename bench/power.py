"""The power of a design, from a run's own variance components.

    python bench/power.py SCORES [--a ict] [--b grpo] [--k 4] [--target 4.58]
                          [--seeds 3,5,8] [--problems 64,128,256] [--samples 4,16]

SCORES is a run directory (its score records) or a pinned ``scores.jsonl``
(``results/<preset>/scores.jsonl``). Prints the variance components of the paired
difference A - B of the average pass@k over the run's benchmarks
(``ictrepro/evaluate/power.py``), the difference the run's own design resolves with 80%
power, how many seeds would resolve ``--target`` at the run's problems and samples (the
report's "seeds to resolve" column) or the floor unlimited seeds leave, and the same for other designs (seeds, problems per benchmark, samples per
problem), marking those that resolve ``--target`` points. Not a test: it only prints;
docs/power.md quotes it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from ictrepro.evaluate.passk import pass_at_k
from ictrepro.evaluate.power import (
    MAX_SEEDS,
    components,
    detectable,
    detectable_unlimited_seeds,
    seeds_to_resolve,
    variance_of_mean,
)


def read_scores(path: Path) -> list[dict]:
    if path.is_dir():
        from ictrepro.results.pinned import collect_scores

        return collect_scores(path)
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def matrices(rows: list[dict], method: str, k: int) -> tuple[dict, dict, int]:
    """Per benchmark, ``[S, J]`` pass@k and success rates of ``method`` (seeds sorted)."""
    by_bench: dict[str, dict] = {}
    n = None
    for r in rows:
        if r["method"] != method:
            continue
        n = r["n_samples"]
        by_bench.setdefault(r["benchmark"], {})[r["seed"]] = r["n_correct"]
    scores, rates = {}, {}
    for bench, seeds in sorted(by_bench.items()):
        order = sorted(seeds, key=lambda s: -1 if s is None else s)
        scores[bench] = np.asarray([[pass_at_k(n, c, k) for c in seeds[s]] for s in order])
        rates[bench] = np.asarray([[c / n for c in seeds[s]] for s in order])
    return scores, rates, n


def paired_components(rows: list[dict], a: str, b: str, k: int):
    """``(benchmarks, A's and B's [S, J] pass@k per benchmark, components of A - B)`` on
    the benchmarks both have."""
    sa, ra, n = matrices(rows, a, k)
    sb, rb, _ = matrices(rows, b, k)
    benches = sorted(set(sa) & set(sb))
    xs, ys = [sa[x] for x in benches], [sb[x] for x in benches]
    c = components(xs, ys, [ra[x] for x in benches], [rb[x] for x in benches], n=n, k=k)
    return benches, xs, ys, c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scores", type=Path)
    parser.add_argument("--a", default="ict")
    parser.add_argument("--b", default="grpo")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--target", type=float, default=4.58, help="Points to resolve.")
    parser.add_argument("--seeds", default="3,5,8")
    parser.add_argument("--problems", default="64,128,256")
    parser.add_argument("--samples", default="4,16")
    parser.add_argument(
        "--family",
        type=int,
        default=1,
        help="Comparisons in a Holm family: the level is Holm's first (5%% / FAMILY).",
    )
    args = parser.parse_args()
    level = 1 - 0.05 / args.family

    rows = read_scores(args.scores)
    benches, _, _, c = paired_components(rows, args.a, args.b, args.k)
    pts = 100.0
    print(f"{args.a} - {args.b}, average P@{args.k} over {c.K} benchmarks ({', '.join(benches)})")
    print(f"run design: S = {c.S} seeds, J = {c.J:g} problems per benchmark, n = {c.n} samples")
    print(
        "variance components (points^2): "
        f"seed {pts**2 * c.seed:.2f}, problem {pts**2 * c.problem:.1f}, "
        f"residual {pts**2 * c.residual:.1f} (sampling at n = {c.n}: {pts**2 * c.sampling:.1f}, "
        f"the rest: {pts**2 * c.interaction:.1f})"
    )
    var, df = variance_of_mean(c, S=c.S, J=c.J, n=c.n)
    own = detectable(c, S=c.S, J=c.J, n=c.n, confidence=level)
    print(f"the run's own design: se {pts * var**0.5:.2f} points, df {df:.1f}, "
          f"detectable at 80% power {pts * own:.2f} points")  # fmt: skip
    floor = detectable_unlimited_seeds(c, confidence=level)
    needed = seeds_to_resolve(c, args.target / pts, confidence=level)
    if needed is not None:
        verdict = f"{needed} seeds resolve {args.target:g} points"
    elif floor > args.target / pts:
        verdict = f"no number of seeds resolves {args.target:g} points"
    else:
        verdict = f"more than {MAX_SEEDS} seeds needed for {args.target:g} points"
    print(f"at these problems and samples: {verdict}; unlimited seeds: {pts * floor:.2f} points")
    print(f"(80% power at the two-sided level {level:.4f}: 5% over a family of {args.family})")
    print()
    print(
        f"| seeds | problems per benchmark | samples per problem | detectable (80%), points | resolves {args.target:g}? |"
    )
    print("|---|---|---|---|---|")
    for S in (int(x) for x in args.seeds.split(",")):
        for J in (int(x) for x in args.problems.split(",")):
            for m in (int(x) for x in args.samples.split(",")):
                d = pts * detectable(c, S=S, J=J, n=m, confidence=level)
                print(f"| {S} | {J} | {m} | {d:.2f} | {'yes' if d <= args.target else 'no'} |")


if __name__ == "__main__":
    main()
