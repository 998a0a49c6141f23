"""Paired comparisons, the paper's claim with a verdict, and the mechanism per method.

- A comparison is model A minus model B on the average P@1, P@4 and Total over the
  benchmarks where both have every seed, paired problem by problem (and seed by seed for two
  trained methods), with the interval of :func:`ictrepro.evaluate.paired.paired_difference`.
  The focus method (ICT) is compared with each baseline and every method with the base model.
- The paper's claim: the focus method's P@4 is above every baseline's. Reproduced when every
  such difference is resolved above 0, contradicted when one is resolved below 0, otherwise
  not resolved at this size.
- The claims, one per comparison: the focus method's P@4 above each baseline and above the
  random control of the same mask size (the sparsity control: a gain that the random mask
  also has is sparsity, not the rule). Each is "reproduced" (interval above 0),
  "contradicted" (below 0) or "not resolved", with the difference resolvable at 80% power
  and the variance components it rests on (``ictrepro.evaluate.power``), from which the
  report projects how many seeds would resolve the paper's headline gain.
- The positive control: GRPO against GRPO at a quarter of the learning rate
  (``grpo-lr4``), a planted difference the instrument must resolve; if it does not, the
  comparisons of the run cannot be trusted to find anything.
- The mechanism: each method's mean token entropy at its first and last training step
  (mean over seeds), and its P@4 - P@1 (the room sampling gives). Whether the focus method
  ends with more entropy than GRPO and than the random control is a paired interval over
  seeds of the final entropies; P@4 from the paired comparison.
- Flags: a sparsifying rule whose mask never left a token out (it trained as GRPO), a
  trained method that does not differ from the base model (its wins are the others'
  losses), and a multiple-choice benchmark on which a model does not beat guessing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from ictrepro.data.suites import is_minority_suite
from ictrepro.evaluate.paired import PairedDifference, paired_difference
from ictrepro.evaluate.power import (
    Components,
    components,
    detectable_unlimited_seeds,
    seeds_to_resolve,
)
from ictrepro.report.aggregate import METRICS, Average, Cell
from ictrepro.report.load import BASE, Seed

#: The random mask of the focus method's size: the sparsity control of every claim.
SPARSITY_CONTROL = "random"
#: The planted difference: (the stronger, the weaker) method; the instrument must resolve it.
POSITIVE_CONTROL = ("grpo", "grpo-lr4")
#: The instrument's controls: compared with, never baselines of the paper's claim.
CONTROLS = frozenset({SPARSITY_CONTROL, POSITIVE_CONTROL[1]})
#: A sparsifying rule whose mask left tokens out at fewer of its steps than this share is
#: not compared with the focus method: at most of its steps it trained as GRPO did.
MIN_ACTED_SHARE = 0.5
#: Rules whose mask is dense by design (no flag when they select every token).
DENSE_RULES = frozenset({"grpo", "grpo-lr4"})


@dataclass(frozen=True)
class Comparison:
    """``a`` minus ``b`` per metric over ``benchmarks`` (fractions)."""

    a: str
    b: str
    benchmarks: tuple[str, ...]
    seeds: tuple[Seed, ...]
    diffs: dict[str, PairedDifference]
    #: ``[metric]``: the paired difference on each of ``benchmarks`` alone.
    per_benchmark: dict[str, tuple[PairedDifference, ...]] = field(default_factory=dict)
    #: ``[metric]``: the variance components of ``diffs[metric]`` (residual not split).
    components: dict[str, Components] = field(default_factory=dict)


@dataclass(frozen=True)
class Mechanism:
    """Per method: entropy at the first and last step (mean over seeds; None without
    training metrics) and P@4 - P@1 of its average (fraction)."""

    entropy_start: dict[str, float | None]
    entropy_end: dict[str, float | None]
    sampling_room: dict[str, float]
    #: ``[method][seed]``: the entropy at the last step of each seed's run.
    entropy_end_by_seed: dict[str, dict[int, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Claim:
    """One tested claim: ``a`` above ``b`` on ``metric``; ``verdict`` is "reproduced",
    "contradicted", "not resolved" or "not tested" (no paired comparison)."""

    text: str
    a: str
    b: str
    metric: str
    diff: PairedDifference | None
    #: The variance components behind ``diff`` (None when not tested).
    components: Components | None = None
    #: Why this is no comparison of two rules (``b``'s mask never acted, so ``b`` trained
    #: as GRPO did); None when it is one.
    not_a_comparison: str | None = None

    @property
    def seeds_known(self) -> bool:
        """Whether the seed variance is known (components from two seeds or more)."""
        return self.components is not None and self.components.S >= 2

    def seeds_to_resolve(self, target: float) -> int | None:
        """Training seeds with which this run's design (its problems and samples per
        problem) resolves a true difference of ``target`` (fraction) with 80% power; None
        when more than ``MAX_SEEDS`` or the seed variance is not known (``seeds_known``)."""
        if not self.seeds_known:
            return None
        return seeds_to_resolve(self.components, target)

    @property
    def floor(self) -> float | None:
        """The 80%-power difference with unlimited seeds at this design's problems (what
        no number of seeds gets below); None when the seed variance is not known."""
        return detectable_unlimited_seeds(self.components) if self.seeds_known else None

    @property
    def verdict(self) -> str:
        if self.not_a_comparison is not None:
            return "not a comparison"
        if self.diff is None:
            return "not tested"
        if self.diff.ci_low > 0:
            return "reproduced"
        if self.diff.ci_high < 0:
            return "contradicted"
        return "not resolved"


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
    diffs, per_benchmark, parts = {}, {}, {}
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
        per_benchmark[metric] = tuple(
            paired_difference([x], [y]) for x, y in zip(xs, ys, strict=True)
        )
        # n and k only label the components: without rates they project at this design's n.
        parts[metric] = components(xs, ys, None, None, n=0, k=0)
    return Comparison(a, b, tuple(shared), tuple(paired_seeds), diffs, per_benchmark, parts)


def all_comparisons(
    cells: Mapping[str, Mapping[str, Cell]],
    seeds: Mapping[str, Sequence[Seed]],
    focus: str,
    baselines: Sequence[str],
) -> list[Comparison]:
    """The focus method against each baseline and the sparsity control, the positive
    control, then every trained method against base."""
    others = dict.fromkeys((*baselines, SPARSITY_CONTROL))  # the control once, if a baseline too
    pairs = [(focus, b) for b in others if focus in cells and b in cells and b != focus]
    if all(m in cells for m in POSITIVE_CONTROL):
        pairs.append(POSITIVE_CONTROL)
    if BASE in cells:
        pairs += [(m, BASE) for m in cells if m != BASE]
    found = [compare(cells, seeds, a, b) for a, b in pairs]
    return [c for c in found if c is not None]


def claim_verdict(
    comparisons: Sequence[Comparison],
    focus: str,
    baselines: Sequence[str],
    inactive: Collection[str] = (),
) -> str:
    """The paper's claim (focus P@4 above every baseline) here: "reproduced",
    "contradicted", "not resolved at this size", or "not tested" (no baseline compared).
    A baseline in ``inactive`` (``MaskActivity.mostly_idle``) is no baseline of its own."""
    baselines = [b for b in baselines if b not in inactive]
    p4 = [c.diffs["p4"] for c in comparisons if c.a == focus and c.b in baselines]
    if not p4:
        return "not tested"
    if any(d.ci_high < 0 for d in p4):
        return "contradicted"
    if all(d.ci_low > 0 for d in p4) and len(p4) == len(baselines):
        return "reproduced"
    return "not resolved at this size"


def _find(comparisons: Sequence[Comparison], a: str, b: str, metric: str):
    return next((c.diffs[metric] for c in comparisons if (c.a, c.b) == (a, b)), None)


def _claim(comparisons: Sequence[Comparison], text: str, a: str, b: str, metric: str) -> Claim:
    found = next((c for c in comparisons if (c.a, c.b) == (a, b)), None)
    if found is None:
        return Claim(text, a, b, metric, None)
    return Claim(text, a, b, metric, found.diffs[metric], found.components.get(metric))


def claims(
    comparisons: Sequence[Comparison],
    focus: str,
    baselines: Sequence[str],
    labels: Any = str,
    inactive: Collection[str] = (),
) -> list[Claim]:
    """The focus method's P@4 above each baseline and above the sparsity control; a claim
    against a rule in ``inactive`` (``MaskActivity.mostly_idle``) is marked no comparison."""
    out = []
    for b in (*baselines, SPARSITY_CONTROL):
        text = f"{labels(focus)}'s P@4 above {labels(b)}'s" + (
            " (the sparsity control)" if b == SPARSITY_CONTROL else ""
        )
        found = _claim(comparisons, text, focus, b, "p4")
        if b in inactive:
            why = (
                f"{labels(b)}'s mask left tokens out at fewer than {MIN_ACTED_SHARE:.0%} of its "
                "steps: it trained as GRPO did"
            )
            found = dataclasses.replace(found, not_a_comparison=why)
        out.append(found)
    return out


def positive_control(comparisons: Sequence[Comparison]) -> Claim | None:
    """The planted difference (GRPO above GRPO at lr/4 on P@1), when both were run."""
    text = "GRPO's P@1 above GRPO's at a quarter of the learning rate"
    found = _claim(comparisons, text, *POSITIVE_CONTROL, "p1")
    return None if found.diff is None else found


def minority_collapse(
    comparisons: Sequence[Comparison],
) -> list[tuple[str, str, PairedDifference]]:
    """``(method, benchmark, P@4 difference against base)`` on each minority-only subset of
    a fork world (``is_minority_suite``): the paper's phenomenon is there when a
    method's interval lies below 0 (collapse onto the majority strategy lost problems)."""
    out = []
    for c in comparisons:
        if c.b != BASE or not c.per_benchmark:
            continue
        for i, bench in enumerate(c.benchmarks):
            if is_minority_suite(bench):
                out.append((c.a, bench, c.per_benchmark["p4"][i]))
    return out


@dataclass(frozen=True)
class MaskActivity:
    """How a sparsifying rule's mask acted over every logged step of every seed."""

    method: str
    #: Steps whose mask left at least one response token out, of ``steps``.
    steps_acted: int
    steps: int
    #: Share of the response tokens left out, mean over the steps.
    left_out: float

    @property
    def acted_share(self) -> float:
        return self.steps_acted / self.steps if self.steps else 0.0

    @property
    def mostly_idle(self) -> bool:
        """Left tokens out at fewer than ``MIN_ACTED_SHARE`` of its steps: at most steps it
        trained as GRPO did, so a comparison with it is not one of its rule."""
        return self.acted_share < MIN_ACTED_SHARE

    @property
    def never_acted(self) -> bool:
        """Selected every response token at every step: the rule trained as GRPO did."""
        return self.steps_acted == 0


def mask_activity(trained: Mapping[str, Mapping[int, list[dict[str, Any]]]]) -> list[MaskActivity]:
    """Per sparsifying rule (not GRPO), from ``selected_fraction`` of its ``metrics.jsonl``
    rows: how many steps left tokens out, and how many tokens, on average."""
    out = []
    for method, runs in trained.items():
        if method in DENSE_RULES:
            continue
        shares = [
            r["selected_fraction"]
            for rows in runs.values()
            for r in rows
            if r.get("selected_fraction") is not None
        ]
        if shares:
            acted = sum(share < 1.0 for share in shares)
            left_out = 1.0 - float(np.mean(shares))
            out.append(MaskActivity(method, acted, len(shares), left_out))
    return out


def unchanged_from_base(comparisons: Sequence[Comparison]) -> list[str]:
    """The trained methods whose average P@1, P@4 and Total each differ from the base
    model's by no resolved amount: what they win or lose against other methods is those
    methods' change from the base model, not a change of their own."""
    return [
        c.a
        for c in comparisons
        if c.b == BASE and c.diffs and not any(d.resolved for d in c.diffs.values())
    ]


def chance_flags(
    cells: Mapping[str, Mapping[str, Cell]], chance: Mapping[str, float]
) -> list[tuple[str, str, float, float]]:
    """``(method, benchmark, P@1, chance)`` for every multiple-choice cell (``chance``:
    benchmark -> the P@1 of uniform guessing) whose P@1 interval reaches down to chance."""
    out = []
    for method, per in cells.items():
        for bench, level in chance.items():
            cell = per.get(bench)
            if cell is None or cell.status != "ok":
                continue
            p1 = cell.scores["p1"]
            if p1.ci_low <= level:
                out.append((method, bench, p1.mean, level))
    return out


def expected_maximum(
    ses: Sequence[float], *, draws: int = 20000, seed: int = 0
) -> tuple[float, float]:
    """The mean and 95th percentile of the largest of independent N(0, se_b^2) differences:
    how large the largest of several per-benchmark gains is when no method differs."""
    if not ses:
        return 0.0, 0.0
    rng = np.random.default_rng(seed)
    largest = (rng.standard_normal((draws, len(ses))) * np.asarray(ses)).max(axis=1)
    return float(largest.mean()), float(np.quantile(largest, 0.95))


def entropy_difference(
    mech: Mechanism, a: str, b: str, *, confidence: float = 0.95
) -> tuple[float, float, float, int] | None:
    """``a``'s final entropy minus ``b``'s, paired by training seed: ``(mean, low, high,
    seeds)`` with a t interval over seeds; None with fewer than two shared seeds."""
    ea, eb = mech.entropy_end_by_seed.get(a, {}), mech.entropy_end_by_seed.get(b, {})
    shared = sorted(set(ea) & set(eb))
    if len(shared) < 2:
        return None
    d = np.asarray([ea[s] - eb[s] for s in shared])
    half = float(stats.t.ppf(0.5 + confidence / 2, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d)))
    return float(d.mean()), float(d.mean() - half), float(d.mean() + half), len(d)


def mechanism(
    trained: Mapping[str, Mapping[int, list[dict[str, Any]]]],
    averages: Mapping[str, Average | None],
) -> Mechanism:
    start: dict[str, float | None] = {}
    end: dict[str, float | None] = {}
    by_seed: dict[str, dict[int, float]] = {}
    for method, runs in trained.items():
        firsts, lasts = [], []
        for seed, rows in runs.items():
            values = [r["entropy_mean"] for r in rows if r.get("entropy_mean") is not None]
            if values:
                firsts.append(values[0])
                lasts.append(values[-1])
                by_seed.setdefault(method, {})[seed] = values[-1]
        start[method] = float(np.mean(firsts)) if firsts else None
        end[method] = float(np.mean(lasts)) if lasts else None
    room = {
        m: a.scores["p4"].mean - a.scores["p1"].mean for m, a in averages.items() if a is not None
    }
    return Mechanism(start, end, room, by_seed)


def mechanism_verdicts(
    mech: Mechanism, comparisons: Sequence[Comparison], focus: str, reference: str = "grpo"
) -> dict[str, str]:
    """Whether the focus method ends training with more entropy than ``reference`` and than
    the sparsity control (``entropy``, ``entropy_vs_control``: a paired interval over
    seeds), and has a P@4 resolved above ``reference`` (``pass_at_4``); "seen" only where
    the interval excludes 0."""
    out = {}
    for key, other in (("entropy", reference), ("entropy_vs_control", SPARSITY_CONTROL)):
        d = entropy_difference(mech, focus, other)
        if d is None:
            out[key] = (
                f"not tested: fewer than two seeds of both {focus} and {other} logged entropy"
            )
            continue
        mean, low, high, n = d
        seen = "seen" if low > 0 else ("reversed" if high < 0 else "not resolved")
        out[key] = (
            f"{seen}: final entropy {focus} − {other} {mean:+.4f} nats "
            f"[{low:+.4f}, {high:+.4f}], paired over {n} seeds"
        )
    p4 = _find(comparisons, focus, reference, "p4")
    if p4 is None:
        out["pass_at_4"] = "not tested: the two methods were not both evaluated"
    else:
        seen = "seen" if p4.ci_low > 0 else ("reversed" if p4.ci_high < 0 else "not resolved")
        out["pass_at_4"] = (
            f"{seen}: P@4 difference {100 * p4.mean:+.2f} points "
            f"[{100 * p4.ci_low:+.2f}, {100 * p4.ci_high:+.2f}]"
        )
    return out
