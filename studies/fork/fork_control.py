"""The fork world against its control: does ICT's advantage over the random mask depend
on group JS seeing the fork?

    python studies/fork/fork_control.py runs/tiny-fork runs/tiny-fork0 [--methods ict,random,grpo]
    python studies/fork/fork_control.py runs/tiny-fork-tally runs/tiny-fork-tally0

``tiny-fork`` puts a preamble of random length before the fork, so the responses of a
group reach it in different contexts; ``tiny-fork0`` writes one preamble into every
prompt, so they all reach it in the same context and group JS there is 0. Both train from
the same base model (the base models' hashes are compared; the problems are not: both
worlds draw them from the same suites and seed) and each method's scores pair by problem
id and seed across the two. Prints, for the average over the
subsets: each pair of methods within each variant, and the change of each method, and of
each pair's difference, from the control to the fork world, all paired with 95% intervals
and the difference resolvable with 80% power; then what each rule did at the fork
(``metrics.jsonl``, mean over seeds, steps after the sparse rules' warm-up).

If ICT's selection of the fork is what matters, ICT - Random should be larger in
``tiny-fork`` than in ``tiny-fork0``; if it is not, whatever ICT does is not the fork.
The tally world and its control (``tiny-fork-tally``, ``tiny-fork-tally0``: one verb
written into every prompt) pair the same way.
"""

from __future__ import annotations

import argparse
import statistics
from itertools import combinations
from pathlib import Path

import numpy as np

from ictrepro.evaluate.paired import paired_difference
from ictrepro.report.aggregate import PERCENT, score_cell
from ictrepro.report.load import LoadedRun, load_run
from ictrepro.results.pinned import world_identity

WARMUP = 3  # the sparse rules' dense warm-up steps in the fork presets


def matrices(run: LoadedRun, method: str, metric: str) -> dict[str, tuple[tuple, np.ndarray]]:
    """Per benchmark: (problem ids, ``[S, P]`` scores over the run's seeds in order)."""
    per_seed = run.evaluated[method]
    benches = sorted(next(iter(per_seed.values())))
    out = {}
    for bench in benches:
        cell = score_cell({s: per_seed[s][bench] for s in per_seed}, sorted(per_seed))
        out[bench] = (cell.ids, cell.matrices[metric])
    return out


def in_order(scores: dict, reference: dict) -> list[np.ndarray]:
    """``scores``' matrices per benchmark of ``reference`` (sorted), their columns in
    ``reference``'s problem order, so that every method and variant pairs column by column."""
    out = []
    for bench in sorted(reference):
        ids, matrix = scores[bench]
        column = {pid: j for j, pid in enumerate(ids)}
        out.append(matrix[:, [column[pid] for pid in reference[bench][0]]])
    return out


def row(label: str, xs: list[np.ndarray], ys: list[np.ndarray]) -> str:
    d = paired_difference(xs, ys)
    lo, hi = PERCENT * d.ci_low, PERCENT * d.ci_high
    verdict = "resolved" if d.resolved else "not resolved"
    return (
        f"| {label} | {PERCENT * d.mean:+.2f} | [{lo:+.2f}, {hi:+.2f}] | {verdict} "
        f"| {PERCENT * d.detectable:.2f} |"
    )


def fork_means(run: LoadedRun, method: str) -> dict[str, float | None]:
    """Mean over seeds of the ``fork_*`` metrics after the warm-up, and the share of
    responses turning down in the first and last ten steps."""

    def mean(key: str, rows: list[dict]) -> float | None:
        values = [r[key] for r in rows if r.get(key) is not None]
        return statistics.fmean(values) if values else None

    keys = ("fork_selected_fraction", "fork_js_mean", "nonfork_js_mean")
    per_seed = list(run.trained[method].values())
    out: dict[str, float | None] = {}
    for key in keys:
        values = [mean(key, rows[WARMUP:]) for rows in per_seed]
        known = [v for v in values if v is not None]
        out[key] = statistics.fmean(known) if known else None
    for name, part in (("down_first", slice(0, 10)), ("down_last", slice(-10, None))):
        values = [mean("fork_minority_fraction", rows[part]) for rows in per_seed]
        out[name] = statistics.fmean(v for v in values if v is not None)
    return out


def fork_cells(run: LoadedRun, method: str) -> str:
    """``fork_means`` of ``method`` as table cells: fork tokens selected | JS at the fork /
    elsewhere | turned down, first -> last ten steps."""
    f = fork_means(run, method)
    js = (
        f"{f['fork_js_mean']:.3f} / {f['nonfork_js_mean']:.3f}"
        if f["fork_js_mean"] is not None
        else "–"
    )
    down = f"{100 * f['down_first']:.0f}% -> {100 * f['down_last']:.1f}%"
    return f"{100 * f['fork_selected_fraction']:.1f}% | {js} | {down}"


def same_world(fork: Path, control: Path) -> None:
    """Stop unless both runs prepared the same base model (``world_identity``: weights,
    tokenizer and configs, by hash)."""
    keys = ("base_weights_sha256", "base_tokenizer_sha256", "base_config_sha256")
    worlds = [world_identity(run) for run in (fork, control)]
    if any(worlds[0][k] is None or worlds[0][k] != worlds[1][k] for k in keys):
        raise SystemExit(f"{fork} and {control} prepared different base models")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fork", type=Path, help="a tiny-fork (or -tally) run, reproduced")
    parser.add_argument("control", type=Path, help="its control's run, same base model")
    parser.add_argument("--methods", default="ict,random,grpo")
    args = parser.parse_args()
    same_world(args.fork, args.control)
    methods = args.methods.split(",")
    # Labelled by folder (e.g. tiny-fork / tiny-fork0, or tiny-fork-tally / -tally0).
    world, control = args.fork.name, args.control.name
    if world == control:
        raise SystemExit("name the two runs' folders apart: they label the rows")
    runs = {world: load_run(args.fork, methods), control: load_run(args.control, methods)}
    print("Both runs prepared the same base model (weights, tokenizer and configs by hash).\n")
    for metric, name in (("p1", "P@1"), ("p4", "P@4")):
        reference = matrices(runs[world], methods[0], metric)
        m = {
            v: {x: in_order(matrices(r, x, metric), reference) for x in methods}
            for v, r in runs.items()
        }
        print(f"### {name}, average over the subsets (points)\n")
        print("| difference | mean | 95% interval | | resolvable at 80% power |")
        print("|---|---|---|---|---|")
        for a, b in combinations(methods, 2):
            for variant in runs:
                print(row(f"{a} - {b}, {variant}", m[variant][a], m[variant][b]))
        for x in methods:
            print(row(f"{x}: {world} - {control}", m[world][x], m[control][x]))
        for a, b in combinations(methods, 2):
            gaps = ([x - y for x, y in zip(m[v][a], m[v][b], strict=True)] for v in runs)
            print(row(f"({a} - {b}): {world} - {control}", *gaps))
        print()
    print("### At the fork (metrics.jsonl, mean over seeds)\n")
    print(
        "| method | variant | fork tokens selected | JS at fork / elsewhere (nats) | turned down, first -> last 10 steps |"
    )
    print("|---|---|---|---|---|")
    for x in methods:
        for variant, run in runs.items():
            print(f"| {x} | {variant} | {fork_cells(run, x)} |")


if __name__ == "__main__":
    main()
