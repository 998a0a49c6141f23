"""The paper's side of the comparison: the same gains computed from its averages table, and
which of them its stated figures (4.37 / 4.98 / 4.38) match. Percent, as the paper's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ictrepro.report.aggregate import METRICS
from ictrepro.report.load import BASE
from ictrepro.results.paper import PaperNumbers


def paper_comparisons(
    paper: PaperNumbers, focus: str, baselines: Sequence[str]
) -> dict[str, dict[str, dict[str, Any]]]:
    """From the paper's averages table: ``{size: {other: {metric: focus - other}}}`` for
    each baseline, ``"best"`` (the baseline with the highest Total at that size, named in
    its ``"baseline"`` entry) and base. Empty if the paper has no column for ``focus``."""
    a = paper.averages
    if focus not in a.labels:
        return {}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    known = [b for b in baselines if b in a.labels]
    for size in a.sizes:
        row: dict[str, dict[str, Any]] = {}
        for other in [*known, *([BASE] if BASE in a.labels else [])]:
            row[other] = {m: a.difference(size, focus, other, m) for m in METRICS}
        if known:
            best = max(known, key=lambda b: a.cells[size][b].total)
            row["best"] = {**row[best], "baseline": best}
        out[size] = row
    return out


def stated_gain_matches(paper: PaperNumbers, comparisons: dict[str, Any]) -> list[str]:
    """Which differences of the paper's averages table equal its stated gains (to 0.01)."""
    g = paper.gains
    matches = []
    for size, stated in g.per_size.items():
        for other, diffs in comparisons.get(size, {}).items():
            if abs(diffs[g.metric] - stated) <= 0.01:
                matches.append(f"{size}: vs {other} ({diffs[g.metric]:.2f})")
    return matches
