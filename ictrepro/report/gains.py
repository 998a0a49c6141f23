"""Gains of the focus method (ICT) over a baseline, in percentage points.

Gain on a benchmark: the focus method's percent score minus the baseline's, each the mean
over seeds. Average gain: its mean over the benchmarks where both cells are "ok".
Maximum gain: its largest value there. Best baseline: the highest average Total.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ictrepro.report.aggregate import PERCENT, Average, Cell


@dataclass(frozen=True)
class Gain:
    """Focus minus baseline on one metric, in points, over the benchmarks both have.

    ``per_benchmark[b]`` = focus's mean over seeds minus the baseline's; ``average`` is their
    mean, ``maximum`` their largest value, reached on ``argmax``."""

    focus: str
    baseline: str
    metric: str
    per_benchmark: dict[str, float]
    average: float
    maximum: float
    argmax: str


def compute_gain(
    cells: Mapping[str, Mapping[str, Cell]], focus: str, baseline: str, metric: str
) -> Gain | None:
    """``focus`` minus ``baseline`` per benchmark where both cells are "ok"; None if none."""
    per = {
        # The difference of the two percentages as shown, not 100 x the difference.
        b: PERCENT * cells[focus][b].scores[metric].mean
        - PERCENT * cells[baseline][b].scores[metric].mean
        for b in cells[focus]
        if cells[focus][b].status == "ok" and cells[baseline][b].status == "ok"
    }
    if not per:
        return None
    argmax = max(per, key=lambda b: per[b])
    return Gain(
        focus, baseline, metric, per, float(np.mean(list(per.values()))), per[argmax], argmax
    )


def best_baseline(averages: Mapping[str, Average | None], baselines: Sequence[str]) -> str | None:
    """The baseline with the highest average Total (the first on a tie); None if none has one."""
    present = [b for b in baselines if averages.get(b) is not None]
    return max(present, key=lambda b: averages[b].scores["total"].mean) if present else None
