"""From per-problem scores to the report's cells and averages, over training seeds.

A cell is one method on one benchmark: :func:`~ictrepro.evaluate.aggregate.aggregate_seeds`
on the ``[seeds, problems]`` matrix of each metric. Everything here is a fraction in
[0, 1]; :mod:`ictrepro.report.render` shows percent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ictrepro.errors import DataError
from ictrepro.evaluate.aggregate import SeedAggregate, aggregate_seeds
from ictrepro.report.load import ProblemScores, Seed

METRICS = ("p1", "p4", "total")
PERCENT = 100.0
"""The factor from these fractions to the percent the report shows."""


@dataclass(frozen=True)
class Cell:
    """One method on one benchmark. ``status``: "ok" (every seed of the method has it),
    "partial" (only ``seeds`` have it; left out of the average) or "missing".

    ``matrices[metric]`` is the float ``[S, P]`` matrix the scores aggregate (rows in
    ``seeds`` order, columns in the first seed's problem order)."""

    status: str
    seeds: tuple[Seed, ...]
    n_problems: int
    scores: dict[str, SeedAggregate]
    matrices: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    #: The problems of the matrices' columns, in order (pairs cells of two methods).
    ids: tuple[str, ...] = field(default=(), repr=False, compare=False)


@dataclass(frozen=True)
class Average:
    """A method's average over ``benchmarks`` (its "ok" cells); ``excluded`` were left out."""

    benchmarks: tuple[str, ...]
    excluded: tuple[str, ...]
    scores: dict[str, SeedAggregate]


MISSING = Cell("missing", (), 0, {})


def score_cell(per_seed: Mapping[Seed, ProblemScores], all_seeds: Sequence[Seed]) -> Cell:
    """Aggregate one (method, benchmark) over the seeds that have it.

    Every seed must have the same gradable problems (matched by id)."""
    if not per_seed or not any(ps.ids for ps in per_seed.values()):
        return MISSING  # no file, or no gradable problem at all
    seeds = tuple(s for s in all_seeds if s in per_seed)
    first = per_seed[seeds[0]]
    order = {pid: i for i, pid in enumerate(first.ids)}
    rows: dict[str, list[np.ndarray]] = {"p1": [], "p4": []}
    for s in seeds:
        ps = per_seed[s]
        if set(ps.ids) != set(order):
            raise DataError(
                f"{ps.path} and {first.path} have different gradable problems; "
                "re-run `ictrepro eval` so every model is scored on the same problems"
            )
        idx = np.asarray([order[pid] for pid in ps.ids])
        for m, matrix_rows in rows.items():
            row = np.empty(len(order))
            row[idx] = getattr(ps, m)
            matrix_rows.append(row)
    matrices = {m: np.stack(v) for m, v in rows.items()}
    matrices["total"] = (matrices["p1"] + matrices["p4"]) / 2
    scores = {m: aggregate_seeds(matrices[m]) for m in METRICS}
    status = "ok" if len(seeds) == len(all_seeds) else "partial"
    return Cell(status, seeds, len(order), scores, matrices, first.ids)


def score_average(cells: Mapping[str, Cell], benchmarks: Sequence[str]) -> Average | None:
    """Average over the benchmarks whose cell is "ok" (every seed has it).

    Per seed, the mean over those benchmarks of the benchmark scores; mean and std over
    seeds. The bootstrap interval comes from :func:`aggregate_seeds` on the benchmarks'
    problems pooled into one matrix, each problem weighted by 1 / (B * P_b) (times the
    pooled count) so that a seed's row mean is exactly its average over benchmarks. It
    resamples problems from the pool rather than within each benchmark, so it is somewhat
    wider (conservative) than a bootstrap stratified by benchmark."""
    included = [b for b in benchmarks if cells[b].status == "ok"]
    excluded = tuple(b for b in benchmarks if cells[b].status != "ok")
    if not included:
        return None
    total = sum(cells[b].n_problems for b in included)
    scores = {}
    for m in METRICS:
        pooled = np.concatenate(
            [
                cells[b].matrices[m] * (total / (len(included) * cells[b].n_problems))
                for b in included
            ],
            axis=1,
        )
        scores[m] = aggregate_seeds(pooled)
    return Average(tuple(included), excluded, scores)
