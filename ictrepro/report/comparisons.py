"""Paired comparisons, the paper's claim with a verdict, and the mechanism per method.

- A comparison is model A minus model B on the average P@1, P@4 and Total over the
  benchmarks where both have every seed, paired problem by problem (and seed by seed for two
  trained methods), with the interval of :func:`ictrepro.evaluate.paired.paired_difference`.
  The focus method (ICT) is compared with each baseline and every method with the base model.
- The paper's claim: the focus method's P@4 is above every baseline's. Reproduced when every
  such difference is resolved above 0, contradicted when one is resolved below 0, otherwise
  not resolved at this size.
- The mechanism: each method's mean token entropy at its first and last training step
  (mean over seeds), and its P@4 - P@1 (the room sampling gives). Whether the focus method
  keeps entropy and P@4 above GRPO's is "seen" or "not seen" from those numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ictrepro.evaluate.paired import PairedDifference, paired_difference
from ictrepro.report.aggregate import METRICS, Average, Cell
from ictrepro.report.load import BASE, Seed


@dataclass(frozen=True)
class Comparison:
    """``a`` minus ``b`` per metric over ``benchmarks`` (fractions)."""

    a: str
    b: str
    benchmarks: tuple[str, ...]
    seeds: tuple[Seed, ...]
    diffs: dict[str, PairedDifference]


@dataclass(frozen=True)
class Mechanism:
    """Per method: entropy at the first and last step (mean over seeds; None without
    training metrics) and P@4 - P@1 of its average (fraction)."""

    entropy_start: dict[str, float | None]
    entropy_end: dict[str, float | None]
    sampling_room: dict[str, float]


def compare(
    cells: Mapping[str, Mapping[str, Cell]],
    seeds: Mapping[str, Sequence[Seed]],
    a: str,
    b: str,
) -> Comparison | None:
    """``a`` minus ``b`` on the benchmarks where both cells are "ok", paired by problem id
    and (unless ``b`` is one model) by seed; None when they share no benchmark or seed."""
    shared = [x for x in cells[a] if cells[a][x].status == "ok" and cells[b][x].status == "ok"]
    one_model = list(seeds[b]) == [None]
    paired_seeds = list(seeds[a]) if one_model else [s for s in seeds[a] if s in seeds[b]]
    if not shared or not paired_seeds:
        return None
    diffs = {}
    for metric in METRICS:
        xs, ys = [], []
        for bench in shared:
            ca, cb = cells[a][bench], cells[b][bench]
            columns = {pid: j for j, pid in enumerate(cb.ids)}
            order = np.asarray([columns[pid] for pid in ca.ids])
            rows_a = [ca.seeds.index(s) for s in paired_seeds]
            rows_b = [0] if one_model else [cb.seeds.index(s) for s in paired_seeds]
            xs.append(ca.matrices[metric][rows_a])
            ys.append(cb.matrices[metric][rows_b][:, order])
        diffs[metric] = paired_difference(xs, ys)
    return Comparison(a, b, tuple(shared), tuple(paired_seeds), diffs)


def all_comparisons(
    cells: Mapping[str, Mapping[str, Cell]],
    seeds: Mapping[str, Sequence[Seed]],
    focus: str,
    baselines: Sequence[str],
) -> list[Comparison]:
    """The focus method against each baseline, then every trained method against base."""
    pairs = [(focus, b) for b in baselines if focus in cells and b in cells]
    if BASE in cells:
        pairs += [(m, BASE) for m in cells if m != BASE]
    found = [compare(cells, seeds, a, b) for a, b in pairs]
    return [c for c in found if c is not None]


def claim_verdict(comparisons: Sequence[Comparison], focus: str, baselines: Sequence[str]) -> str:
    """The paper's claim (focus P@4 above every baseline) here: "reproduced",
    "contradicted", "not resolved at this size", or "not tested" (no baseline compared)."""
    p4 = [c.diffs["p4"] for c in comparisons if c.a == focus and c.b in baselines]
    if not p4:
        return "not tested"
    if any(d.ci_high < 0 for d in p4):
        return "contradicted"
    if all(d.ci_low > 0 for d in p4) and len(p4) == len(baselines):
        return "reproduced"
    return "not resolved at this size"


def mechanism(
    trained: Mapping[str, Mapping[int, list[dict[str, Any]]]],
    averages: Mapping[str, Average | None],
) -> Mechanism:
    start: dict[str, float | None] = {}
    end: dict[str, float | None] = {}
    for method, runs in trained.items():
        firsts, lasts = [], []
        for rows in runs.values():
            values = [r["entropy_mean"] for r in rows if r.get("entropy_mean") is not None]
            if values:
                firsts.append(values[0])
                lasts.append(values[-1])
        start[method] = float(np.mean(firsts)) if firsts else None
        end[method] = float(np.mean(lasts)) if lasts else None
    room = {
        m: a.scores["p4"].mean - a.scores["p1"].mean for m, a in averages.items() if a is not None
    }
    return Mechanism(start, end, room)


def mechanism_verdicts(
    mech: Mechanism, comparisons: Sequence[Comparison], focus: str, reference: str = "grpo"
) -> dict[str, str]:
    """``{"entropy": ..., "pass_at_4": ...}``: whether the focus method ends training with
    more entropy than ``reference`` and has a P@4 resolved above it ("seen" / "not seen",
    with the numbers in words)."""
    out = {}
    ours, theirs = mech.entropy_end.get(focus), mech.entropy_end.get(reference)
    if ours is None or theirs is None:
        out["entropy"] = "not seen: no training metrics of both methods"
    else:
        seen = "seen" if ours > theirs else "not seen"
        out["entropy"] = f"{seen}: final entropy {ours:.3f} vs {theirs:.3f} nats"
    p4 = next((c.diffs["p4"] for c in comparisons if (c.a, c.b) == (focus, reference)), None)
    if p4 is None:
        out["pass_at_4"] = "not seen: the two methods were not both evaluated"
    else:
        state = "resolved" if p4.resolved else "not resolved"
        seen = "seen" if p4.ci_low > 0 else "not seen"
        out["pass_at_4"] = f"{seen}: P@4 difference {100 * p4.mean:+.2f} points ({state})"
    return out
