"""Every number of a run's report, computed in one pass into an immutable :class:`Report`.

:func:`score_run` reads the run (:func:`~ictrepro.report.load.load_run`), chooses the rows
(base, then the baselines, the focus method and the rest), and computes the cells and
averages (:mod:`.aggregate`), the gains (:mod:`.gains`), the training curves
(:mod:`.curves`), the "what was run" settings, and the notes. Nothing is written.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ictrepro.data.benchmarks import BENCHMARKS, PAPER_BENCHMARKS
from ictrepro.data.suites import ALL_EVAL_SUITES, LETTERS, SUITES
from ictrepro.presets import CHECKOUT, get_preset, preset_names
from ictrepro.report.aggregate import METRICS, Average, Cell, score_average, score_cell
from ictrepro.report.comparisons import (
    Claim,
    Comparison,
    MaskActivity,
    Mechanism,
    all_comparisons,
    chance_flags,
    claim_verdict,
    claims,
    mask_activity,
    mechanism,
    mechanism_verdicts,
    positive_control,
    unchanged_from_base,
)
from ictrepro.report.curves import Curve, missing_curve_notes, training_curves
from ictrepro.report.gains import Gain, best_baseline, compute_gain
from ictrepro.report.labels import label, stands_for
from ictrepro.report.learning import ProbeChange, probe_changes
from ictrepro.report.load import BASE, LoadedRun, ProblemScores, Seed, load_run
from ictrepro.report.planned import AnalysisPlan, PlannedAnalysis, planned_analysis

Loaded = dict[tuple[str, Seed, str], ProblemScores]
"""``[(method, seed, benchmark)]``: the per-problem scores of the report's rows."""


@dataclass(frozen=True)
class ReportFiles:
    """What :func:`~ictrepro.report.build.build_report` wrote: ``paths`` by name relative to
    ``out_dir`` ("report.md", "summary.json", "plots/<name>.png"), and the two texts."""

    out_dir: Path
    paths: dict[str, Path]
    markdown: str
    summary: dict[str, Any]


@dataclass(frozen=True)
class Report:
    """Every number of a run's report (scores as fractions, gains in percentage points).

    Attributes:
        methods: the table rows; base first if it was evaluated.
        seeds: evaluated seeds per method; ``(None,)`` for base.
        settings: per benchmark, problems and responses counted from the samples and the
            decoding settings recorded in the score files.
        cells: ``[method][benchmark]``.
        gains: ``[baseline or "base"][metric]``.
        training: ``[method][seed]``: training steps in ``metrics.jsonl``.
        curves: ``[metrics key][method]``: the training curves.
        comparisons: paired differences (focus vs each baseline, each method vs base).
        claim: the paper's claim (focus P@4 above every baseline) here: a verdict.
        mechanism, mechanism_verdicts: entropy and P@4 - P@1 per method; whether the focus
            method keeps entropy above GRPO and the random control, and P@4 above GRPO
            (paired intervals).
        claims: the focus method's P@4 above each baseline and the sparsity control.
        positive_control: the planted difference (GRPO vs GRPO at lr/4), when run.
        files: the files written, once :func:`build_report` has written them.
    """

    run_dir: Path
    preset: str
    focus: str
    baselines: tuple[str, ...]
    methods: tuple[str, ...]
    benchmarks: tuple[str, ...]
    seeds: dict[str, tuple[Seed, ...]]
    settings: dict[str, dict[str, Any]]
    cells: dict[str, dict[str, Cell]]
    averages: dict[str, Average | None]
    gains: dict[str, dict[str, Gain]]
    best_baseline: str | None
    training: dict[str, dict[int, int]]
    curves: dict[str, dict[str, Curve]]
    notes: tuple[str, ...]
    comparisons: tuple[Comparison, ...] = ()
    claim: str = "not tested"
    mechanism: Mechanism | None = None
    mechanism_verdicts: dict[str, str] | None = None
    claims: tuple[Claim, ...] = ()
    positive_control: Claim | None = None
    #: How often each sparsifying rule's mask left tokens out, and how many.
    mask_activity: tuple[MaskActivity, ...] = ()
    #: Trained methods with no resolved difference from the base model on any average.
    unchanged: tuple[str, ...] = ()
    #: ``(method, benchmark, P@1, chance P@1)``: multiple-choice cells not above guessing.
    at_chance: tuple[tuple[str, str, float, float], ...] = ()
    #: Each training run's probe reward, first probe against last, paired by problem.
    probes: tuple[ProbeChange, ...] = ()
    #: The confirmatory analysis of a preset with a plan (None: all exploratory).
    planned: PlannedAnalysis | None = None
    files: ReportFiles | None = None

    @property
    def inactive_masks(self) -> tuple[str, ...]:
        """Sparsifying rules whose mask never left a token out (they trained as GRPO)."""
        return tuple(a.method for a in self.mask_activity if a.never_acted)


def score_run(
    run_dir: Path | str,
    *,
    methods: Sequence[str] | None = None,
    baselines: Sequence[str] = ("grpo", "entropy", "stapo"),
    focus: str = "ict",
) -> Report:
    """Every number of the report of ``run_dir``, computed from the per-problem samples and
    the training metrics; nothing is written.

    Args:
        methods: trained methods to show (default: every method found under ``eval/`` or
            ``train/``); ``base`` is always shown when it was evaluated.
        baselines: the methods ``focus`` is compared with.
        focus: the method whose gains are reported (ICT).
    """
    run = load_run(run_dir, methods=methods or None)
    shown = _choose_methods(run, methods, baselines, focus)
    rows = ([BASE] if BASE in run.evaluated else []) + [m for m in shown if m != BASE]
    benchmarks = benchmark_order(
        {b for per in run.evaluated.values() for files in per.values() for b in files}
    )
    notes = _prepare_notes(run) + _unevaluated_notes(run, rows)
    seeds = {m: tuple(sorted(run.evaluated.get(m, {}), key=lambda s: s or 0)) for m in rows}
    loaded: Loaded = {
        (m, s, b): ps
        for m in rows
        for s, files in run.evaluated.get(m, {}).items()
        for b, ps in files.items()
    }
    cells = {
        m: {
            b: score_cell({s: loaded[m, s, b] for s in seeds[m] if (m, s, b) in loaded}, seeds[m])
            for b in benchmarks
        }
        for m in rows
    }
    averages = {m: score_average(cells[m], benchmarks) for m in rows}
    notes += _cell_notes(cells, benchmarks) + _consistency_notes(loaded)
    settings, settings_notes = _settings(loaded, benchmarks)
    notes += settings_notes

    present = [b for b in baselines if b in rows and averages.get(b) is not None]
    gains, gain_notes = _gains(cells, averages, focus, baselines, present)
    notes += gain_notes + _config_notes(run, rows)
    trained = {m: run.trained[m] for m in rows if m in run.trained}
    curves = training_curves(trained)
    notes += missing_curve_notes(curves)
    comparisons = all_comparisons(cells, seeds, focus, present)
    mech = mechanism(trained, averages)
    activity = mask_activity(trained)
    inactive = {a.method for a in activity if a.mostly_idle}
    return Report(
        run_dir=run.run_dir,
        preset=", ".join(run.presets) if run.presets else "unknown",
        focus=focus,
        baselines=tuple(baselines),
        methods=tuple(rows),
        benchmarks=tuple(benchmarks),
        seeds=seeds,
        settings=settings,
        cells=cells,
        averages=averages,
        gains=gains,
        best_baseline=best_baseline(averages, present),
        training={m: {s: len(r) for s, r in per.items()} for m, per in trained.items()},
        curves=curves,
        notes=tuple(notes),
        comparisons=tuple(comparisons),
        claim=claim_verdict(comparisons, focus, baselines, inactive),
        mechanism=mech,
        mechanism_verdicts=mechanism_verdicts(mech, comparisons, focus),
        claims=tuple(claims(comparisons, focus, present, labels=label, inactive=inactive)),
        positive_control=positive_control(comparisons),
        mask_activity=tuple(activity),
        unchanged=tuple(unchanged_from_base(comparisons)),
        at_chance=tuple(chance_flags(cells, chance_levels(benchmarks))),
        probes=tuple(probe_changes(run.run_dir, set(rows))),
        planned=_planned(run.presets, cells, seeds, activity),
    )


def _planned(presets, cells, seeds, activity) -> PlannedAnalysis | None:
    """The plan's analysis when the run's one preset names a plan."""
    if len(presets) != 1 or presets[0] not in preset_names():
        return None
    plan = get_preset(presets[0]).plan
    if plan is None:
        return None
    return planned_analysis(AnalysisPlan(plan), cells, seeds, activity, CHECKOUT)


def chance_levels(benchmarks: Sequence[str]) -> dict[str, float]:
    """P@1 of uniform guessing on each multiple-choice benchmark (or tiny suite standing
    for one) among ``benchmarks``: 1 / (number of options), 4 options in every such set."""
    out = {}
    for name in benchmarks:
        key = SUITES[name].stands_for if name in SUITES else name
        spec = BENCHMARKS.get(key) if key is not None else None
        if spec is not None and spec.kind == "choice":
            out[name] = 1 / len(LETTERS)
    return out


def _gains(
    cells: Mapping[str, Mapping[str, Cell]],
    averages: Mapping[str, Average | None],
    focus: str,
    baselines: Sequence[str],
    present: Sequence[str],
) -> tuple[dict[str, dict[str, Gain]], list[str]]:
    """``[other][metric]``: the focus method's gains over each baseline with results
    (``present``) and over base; and the notes on what could not be compared."""
    if averages.get(focus) is None:
        return {}, [f"focus method {focus!r} has no results: no gains are reported."]
    gains = {}
    for other in [*present, *([BASE] if BASE in cells else [])]:
        per = {m: compute_gain(cells, focus, other, m) for m in METRICS}
        gains[other] = {m: g for m, g in per.items() if g is not None}
    notes = [f"baseline {b!r} has no results: not compared." for b in baselines if b not in present]
    if len({averages[b].benchmarks for b in present}) > 1:
        notes.append(
            "the baselines' averages cover different benchmarks, so choosing the best "
            "baseline by average Total compares averages over different sets."
        )
    return gains, notes


def benchmark_order(names: Collection[str]) -> list[str]:
    """The tiny suites and the paper's benchmarks in their canonical order, then the rest."""
    canonical = [*ALL_EVAL_SUITES, *PAPER_BENCHMARKS]
    known = [b for b in canonical if b in names]
    return known + sorted(set(names) - set(canonical))


def _choose_methods(
    run: LoadedRun, methods: Sequence[str] | None, baselines: Sequence[str], focus: str
) -> list[str]:
    """The trained methods to show: ``methods`` as given, or every one found, ordered
    baselines, focus, then the rest alphabetically."""
    if methods:
        return list(dict.fromkeys(methods))
    found = (set(run.evaluated) | set(run.trained)) - {BASE}
    ordered = [m for m in (*baselines, focus) if m in found]
    return list(dict.fromkeys(ordered + sorted(found - set(ordered))))


def _unevaluated_notes(run: LoadedRun, rows: Sequence[str]) -> list[str]:
    notes = []
    for m in rows:
        if m not in run.evaluated:
            notes.append(f"{m}: no evaluation results; every benchmark is missing.")
        untested = sorted(set(run.trained.get(m, {})) - set(run.evaluated.get(m, {})))
        if untested:
            notes.append(f"{m}: seeds {untested} were trained but not evaluated.")
    return notes


def _cell_notes(cells: Mapping[str, Mapping[str, Cell]], benchmarks: Sequence[str]) -> list[str]:
    notes = []
    for m, per in cells.items():
        if all(c.status == "missing" for c in per.values()):
            continue  # noted once already
        for b in benchmarks:
            c = per[b]
            if c.status == "missing":
                notes.append(
                    f"{m} has no results on {b}: shown as missing and left out of its average "
                    "(not counted as 0)."
                )
            elif c.status == "partial":
                notes.append(
                    f"{m} on {b}: only seeds {list(c.seeds)} have results; shown, but left out "
                    "of its average, which needs every seed."
                )
    return notes


def _consistency_notes(loaded: Loaded) -> list[str]:
    """Where a score record's pass@k differs from the one recomputed from its counts."""
    notes = []
    for (m, s, b), ps in loaded.items():
        if not ps.recorded or not ps.ids:
            continue
        for k, ours in (("1", ps.p1.mean()), ("4", ps.p4.mean())):
            theirs = ps.recorded.get(k)
            if isinstance(theirs, (int, float)) and abs(theirs - ours) > 1e-9:
                model = BASE if s is None else f"{m}-seed{s}"
                notes.append(
                    f"{model} on {b}: the score record records pass@{k} = {theirs:.6f}, its "
                    f"per-problem counts give {ours:.6f}; the report uses the counts."
                )
    return notes


def _settings(
    loaded: Loaded, benchmarks: Sequence[str]
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Per benchmark: gradable problems, ungradable ones, responses per problem (from the
    samples) and the distinct decoding settings recorded in the score files; and notes
    where those settings differ or are missing."""
    out, notes = {}, []
    for b in benchmarks:
        scores = [ps for (_, _, bb), ps in loaded.items() if bb == b]
        decodings = []
        for ps in scores:
            if ps.settings is not None and ps.settings not in decodings:
                decodings.append(ps.settings)
        out[b] = {
            "stands_for": stands_for(b),
            "n_problems": sorted({len(ps.ids) for ps in scores}),
            "n_ungradable": sorted({ps.n_ungradable for ps in scores}),
            "n_samples": sorted({n for ps in scores for n in ps.n_samples}),
            "decoding": decodings,
        }
        if len(decodings) > 1:
            notes.append(f"{b}: the models were decoded with different settings: {decodings}.")
        if not decodings and scores:
            notes.append(f"{b}: no score.json with decoding settings was found.")
    return out, notes


def _prepare_notes(run: LoadedRun) -> list[str]:
    """The deviations from the paper's set-up that ``prepare`` recorded (a training set left
    out, a benchmark skipped or subset), so the report says what its numbers are not."""
    return [f"deviation from the paper: {d}." for d in run.deviations]


def _config_notes(run: LoadedRun, rows: Sequence[str]) -> list[str]:
    """A note per shared training field (``config.rl``) whose value differs between the
    runs of ``rows``: a comparison is only fair when they share it."""
    values: dict[str, dict[str, list[str]]] = {}
    for name, (method, rl) in run.rl_configs.items():
        if method not in rows:
            continue
        for key, value in rl.items():
            values.setdefault(key, {}).setdefault(json.dumps(value), []).append(name)
    return [
        f"training runs differ in rl.{key}: "
        + "; ".join(f"{v} ({', '.join(runs)})" for v, runs in by_value.items())
        + "."
        for key, by_value in values.items()
        if len(by_value) > 1
    ]
