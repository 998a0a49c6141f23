"""A confirmatory analysis fixed in a plan before its run: the plan's family of paired
comparisons, each with a p-value and Holm's step-down adjustment.

A preset that names a plan (``Preset.plan``, a file under ``docs/plans/``) gets this
analysis in its report. The family is the plan's: the primary comparison and the
secondary ones are tested together with Holm's correction (family-wise error 5%); the
mechanism comparison and the positive control are reported with their own intervals,
outside the family. A rule whose
mask acted at fewer than ``min_acted_share`` of its steps is dropped from the family
before any p-value is looked at, with the reason: it trained as GRPO did, so a
comparison with it would repeat ICT − GRPO; so does a rule the run left out (a plan may
leave out a rule an earlier run found idle). Everything else in the report is exploratory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from scipy import stats

from ictrepro.evaluate.paired import PairedDifference, detectable_difference
from ictrepro.io import sha256_file
from ictrepro.report.comparisons import MIN_ACTED_SHARE, Comparison, MaskActivity, compare

#: The family-wise error rate of the confirmatory family.
ALPHA = 0.05


@dataclass(frozen=True)
class AnalysisPlan:
    """What a plan fixes before its run (the plan file says why)."""

    #: The plan's file, relative to the repository root.
    path: str
    #: ``(a, b)``: the primary comparison, ``a`` minus ``b`` on ``metric``.
    primary: tuple[str, str] = ("ict", "grpo")
    secondary: tuple[tuple[str, str], ...] = (
        ("ict", "entropy"),
        ("ict", "stapo"),
        ("ict", "random"),
    )
    #: Outside the Holm family: does ICT's view of the choice matter?
    mechanism: tuple[str, str] = ("ict", "ict-nochoice")
    metric: str = "p4"
    #: The planted difference (more RL gains more reward) and where it is planted: P@1 on
    #: the suite of the majority strategy, where reward and score agree.
    positive: tuple[str, str] = ("grpo", "grpo-lr4")
    positive_benchmark: str = "tiny-lock-up"
    #: A sparsifying rule whose mask left tokens out at fewer of its steps than this share
    #: leaves the family (its comparison would be ICT − GRPO again).
    min_acted_share: float = MIN_ACTED_SHARE

    @property
    def family(self) -> tuple[tuple[str, str], ...]:
        return (self.primary, *self.secondary)


@dataclass(frozen=True)
class PlannedTest:
    """One comparison of the plan: ``a`` minus ``b``; ``p``: two-sided p-value of the
    paired t statistic; ``p_holm``: Holm-adjusted (None outside the family or dropped)."""

    a: str
    b: str
    role: str  # "primary", "secondary", "mechanism" or "positive control"
    diff: PairedDifference | None
    p: float | None = None
    p_holm: float | None = None
    #: Why the comparison left the family (None when it is tested).
    dropped: str | None = None
    #: The 80%-power difference at the level Holm's first step uses (alpha / m).
    detectable_holm: float | None = None

    @property
    def verdict(self) -> str:
        if self.dropped is not None:
            return "not a comparison"
        if self.diff is None:
            return "not tested"
        level = self.p_holm if self.p_holm is not None else self.p
        if level is None or level >= ALPHA:
            return "not resolved"
        return "above 0" if self.diff.mean > 0 else "below 0"


@dataclass(frozen=True)
class PlannedAnalysis:
    plan: AnalysisPlan
    #: The plan file's sha256 now (the run's provenance holds the one it ran under).
    plan_sha256: str | None
    tests: tuple[PlannedTest, ...] = field(default_factory=tuple)


def p_value(diff: PairedDifference) -> float:
    """Two-sided p-value of ``diff.mean / diff.se`` under a t distribution with ``diff.df``
    degrees of freedom (normal for infinite df); 1 when the standard error is 0 and the
    mean is 0, 0 when only the standard error is 0."""
    if diff.se == 0:
        return 1.0 if diff.mean == 0 else 0.0
    t = abs(diff.mean) / diff.se
    tail = stats.t.sf(t, diff.df) if math.isfinite(diff.df) else stats.norm.sf(t)
    return float(min(1.0, 2 * tail))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input's order: sorted ascending, the
    i-th (0-based) of m is multiplied by m - i, made monotone, capped at 1."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def planned_analysis(
    plan: AnalysisPlan,
    cells: Mapping,
    seeds: Mapping,
    activity: Sequence[MaskActivity],
    root: Path,
) -> PlannedAnalysis:
    """The plan's tests on a run's cells (``score_run``'s), Holm-adjusted over the family
    that is left once the rules that did not act are dropped."""
    acted = {a.method: a.acted_share for a in activity}

    def diff(a: str, b: str) -> PairedDifference | None:
        if a not in cells or b not in cells:
            return None
        found: Comparison | None = compare(cells, seeds, a, b)
        return None if found is None else found.diffs[plan.metric]

    tests: list[PlannedTest] = []
    for i, (a, b) in enumerate(plan.family):
        role = "primary" if i == 0 else "secondary"
        share = acted.get(b)
        dropped = None
        if a in cells and b not in cells:
            dropped = "it was not run in this reproduction (its plan says why)"
        elif share is not None and share < plan.min_acted_share:
            dropped = (
                f"its mask left tokens out at {share:.1%} of its steps, under the plan's "
                f"{plan.min_acted_share:.0%}: it trained as GRPO did"
            )
        d = diff(a, b)
        tests.append(PlannedTest(a, b, role, d, None if d is None else p_value(d), dropped=dropped))
    live = [i for i, t in enumerate(tests) if t.dropped is None and t.p is not None]
    adjusted = holm([tests[i].p for i in live])
    m = len(live)
    for i, p_adj in zip(live, adjusted, strict=True):
        t = tests[i]
        level = 1 - ALPHA / m
        detect = detectable_difference(t.diff.se, t.diff.df, confidence=level)
        tests[i] = PlannedTest(t.a, t.b, t.role, t.diff, t.p, p_adj, None, detect)
    a, b = plan.mechanism
    d = diff(a, b)
    tests.append(PlannedTest(a, b, "mechanism", d, None if d is None else p_value(d)))
    a, b = plan.positive
    found = compare(cells, seeds, a, b) if a in cells and b in cells else None
    d = None
    if found is not None and plan.positive_benchmark in found.benchmarks:
        d = found.per_benchmark["p1"][found.benchmarks.index(plan.positive_benchmark)]
    tests.append(PlannedTest(a, b, "positive control", d, None if d is None else p_value(d)))
    file = root / plan.path
    return PlannedAnalysis(plan, sha256_file(file) if file.is_file() else None, tuple(tests))
