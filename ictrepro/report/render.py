"""The report as text: ``report.md``, ``summary.json`` and the console tables.

Scores are shown in percent (the fractions of :mod:`.aggregate` times 100), gains in
percentage points, as the definitions printed with them say.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from ictrepro.evaluate.aggregate import SeedAggregate
from ictrepro.evaluate.paired import PairedDifference
from ictrepro.evaluate.power import MAX_SEEDS
from ictrepro.report.aggregate import METRICS, PERCENT, Average, Cell
from ictrepro.report.comparisons import Claim, expected_maximum, minority_collapse
from ictrepro.report.gains import Gain
from ictrepro.report.labels import METRIC_LABELS, label, stands_for
from ictrepro.report.load import BASE
from ictrepro.report.paper import paper_comparisons, stated_gain_matches
from ictrepro.report.planned import ALPHA, PlannedAnalysis
from ictrepro.report.tables import Report
from ictrepro.results.paper import PaperNumbers

SCALE_STATEMENT = (
    "**Not the paper's scale.** This run used preset `{preset}`: a small model trained on a "
    "CPU for a few RL steps and evaluated on synthetic suites that stand in for the paper's "
    "benchmarks. Its numbers do not reproduce the paper's absolute numbers (Qwen2.5 0.5B, "
    "1.5B and 7B on the real benchmarks) and are not comparable with them. At most the "
    "direction of a difference between methods can be compared, and only where it is "
    "larger than the spread over seeds."
)
OTHER_SCALE_STATEMENT = (
    "**Not a paper-scale preset.** This run used preset `{preset}`. Its numbers do not "
    "reproduce the paper's absolute numbers (Qwen2.5 0.5B, 1.5B and 7B on the real "
    "benchmarks) and are not comparable with them."
)
#: What a preset's report shows and what it does not, beside the scale statement.
PRESET_STATEMENTS = {
    "smollm2-135m-learn": (
        "**What this run shows:** whether binary-reward RL changes a real pretrained model "
        "(SmolLM2-135M-Instruct, its own tokenizer and chat template) on a task where the "
        "base model is right about a third of the time: the probe reward before and after "
        "training, and P@1 on the task's held-out test split against the base model, each "
        "paired problem by problem (section *Learning*). One training seed and "
        "a few steps. **What it does not show:** a comparison of methods at the paper's "
        "scale. GRPO and ICT are trained for a few steps on a CPU; with one seed the seed "
        "spread is unknown, and the real GSM8K and MATH500 subsets (a few problems) only "
        "check that nothing broke."
    ),
}
PAPER_SCALE_STATEMENT = (
    "**Paper-scale preset `{preset}`.** Compare with the paper's numbers only where model, "
    "training data and decoding match; the paper does not state its decoding settings or "
    "its number of samples per problem."
)


def score_json(agg: SeedAggregate) -> dict[str, Any]:
    """A score in percent, as summary.json holds it (``confidence`` stays a fraction)."""
    return {
        "mean": PERCENT * agg.mean,
        "std": PERCENT * agg.std,
        "ci_low": PERCENT * agg.ci_low,
        "ci_high": PERCENT * agg.ci_high,
        "confidence": agg.confidence,
        "per_seed": [PERCENT * x for x in agg.per_seed],
    }


def score_text(agg: SeedAggregate, *, ci: bool = False) -> str:
    """A score in percent: ``12.34``, or ``12.34 ± 1.20`` with two or more seeds; then
    `` [low, high]`` with ``ci``."""
    mean, std = PERCENT * agg.mean, PERCENT * agg.std
    out = f"{mean:.2f}" if agg.n_seeds < 2 else f"{mean:.2f} ± {std:.2f}"
    if ci:
        out += f" [{PERCENT * agg.ci_low:.2f}, {PERCENT * agg.ci_high:.2f}]"
    return out


def cell_json(cell: Cell) -> dict[str, Any]:
    return {
        "status": cell.status,
        "seeds": list(cell.seeds),
        "n_problems": cell.n_problems,
        **{m: score_json(s) for m, s in cell.scores.items()},
    }


def average_json(average: Average) -> dict[str, Any]:
    return {
        "benchmarks": list(average.benchmarks),
        "excluded": list(average.excluded),
        **{m: score_json(s) for m, s in average.scores.items()},
    }


def gain_json(gain: Gain) -> dict[str, Any]:
    return {
        "average": gain.average,
        "maximum": gain.maximum,
        "argmax": gain.argmax,
        "benchmarks": list(gain.per_benchmark),
        "per_benchmark": gain.per_benchmark,
    }


def definitions(focus: str, n_benchmarks: int) -> dict[str, str]:
    """What each reported quantity is, in words (printed in report.md and summary.json)."""
    f = label(focus)
    return {
        "pass_at_k": (
            "P@k of a model on a benchmark = mean over the benchmark's gradable problems of the "
            "unbiased pass@k 1 - C(n-c, k) / C(n, k), with n responses of which c are correct, "
            "recomputed from the per-problem counts of the score records (a problem with an "
            "'ungradable' verdict is left out)."
        ),
        "total": "Total = (P@1 + P@4) / 2.",
        "mean_std": (
            "mean ± std = mean and standard deviation (ddof 1) over training seeds of the per-seed "
            "score; [low, high] = 95% two-level bootstrap interval over seeds and problems "
            "(aggregate_seeds). The base model (and a method with one seed) has no std."
        ),
        "average": (
            "average = per seed, the mean over the benchmarks that every seed of the method has "
            "results for; then mean ± std over seeds. A missing benchmark is left out, never "
            "counted as 0. Its interval resamples problems pooled over benchmarks (weighted so "
            "each benchmark counts equally), which is slightly conservative."
        ),
        "gain_on_benchmark": (
            f"gain on a benchmark = {f}'s score on it minus the baseline's, each the mean over "
            "seeds, in percentage points; negative when the baseline is higher."
        ),
        "average_gain": (
            f"average gain = mean over the benchmarks both methods have (here up to "
            f"{n_benchmarks}) of the gain on a benchmark; e.g. average P@4 gain = mean over the "
            f"benchmarks of {f}'s P@4 minus the baseline's P@4, each the mean over seeds. When "
            "both averages cover the same benchmarks it equals the difference of the averages."
        ),
        "maximum_gain": (
            "maximum gain = the largest gain on a single benchmark (the benchmark is named). As "
            "the largest of several noisy differences, it is biased upwards."
        ),
        "best_baseline": "best baseline = the baseline with the highest average Total.",
        "seeds_to_resolve_paper_gain": (
            "seeds to resolve the paper's gain = the fewest training seeds with which this "
            "run's design (its problems and samples per problem) resolves a true difference of "
            "the paper's headline gain with 80% power, projected from the comparison's own "
            f"seed, problem and residual variance; null above {MAX_SEEDS} seeds or with one "
            "seed (its spread unknown)."
        ),
    }


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "l") -> str:
    sep = ["---" if i == 0 or align == "l" else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _cell_text(cell: Cell, metric: str, n_seeds: int) -> str:
    if cell.status == "missing":
        return "missing"
    text = score_text(cell.scores[metric])
    return text if cell.status == "ok" else f"{text} (partial: {len(cell.seeds)}/{n_seeds} seeds)"


def _seeds_text(seeds: Sequence[int | None]) -> str:
    if list(seeds) == [None]:
        return "one model"
    return ", ".join(str(s) for s in seeds) if seeds else "none"


def _settings_row(bench: str, s: dict[str, Any]) -> list[str]:
    """A row of the "what was run" table: counts, then the decoding if all models agree."""
    dec = s["decoding"]

    def pick(key: str) -> str:
        return "–" if not dec else ("varies" if len(dec) > 1 else str(dec[0].get(key)))

    counts = [
        ("/".join(map(str, s[k])) or "–") for k in ("n_problems", "n_ungradable", "n_samples")
    ]
    keys = ("temperature", "top_p", "max_new_tokens", "backend", "seed")
    return [f"`{bench}`", s["stands_for"] or "–", *counts, *(pick(k) for k in keys)]


def _interval_text(d: PairedDifference) -> str:
    """A paired difference and its interval in points: ``+1.23 [-0.40, +2.86]``."""
    return f"{_sign(PERCENT * d.mean)} [{PERCENT * d.ci_low:+.2f}, {PERCENT * d.ci_high:+.2f}]"


def _sign(x: float) -> str:
    return f"{x:+.2f}"


def render_markdown(report: Report, paper: PaperNumbers, plots: dict[str, Path]) -> str:
    """The text of report.md; ``plots``: ``{"plots/<file>": path}`` as drawn."""
    r, f = report, label(report.focus)
    defs = definitions(r.focus, len(r.benchmarks))
    if r.preset.startswith("tiny"):
        statement = SCALE_STATEMENT.format(preset=r.preset)
    elif r.preset.startswith("paper-"):
        statement = PAPER_SCALE_STATEMENT.format(preset=r.preset)
    else:
        statement = OTHER_SCALE_STATEMENT.format(preset=r.preset)
    if r.preset in PRESET_STATEMENTS:
        statement += "\n\n" + PRESET_STATEMENTS[r.preset]
    out = [
        f"# Reproduction report: {f} against {', '.join(label(b) for b in r.baselines)}",
        "",
        f"Run `{r.run_dir}`, written {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}.",
        "",
        statement,
        "",
        "## What was run",
        "",
        f"- preset: `{r.preset}`",
        "- methods and evaluated seeds: "
        + "; ".join(f"{label(m)} (`{m}`): {_seeds_text(r.seeds[m])}" for m in r.methods),
        "- training runs (metrics.jsonl): "
        + (
            "; ".join(
                f"{label(m)}: "
                + ", ".join(f"seed {k} ({steps} steps)" for k, steps in runs.items())
                for m, runs in r.training.items()
            )
            or "none found"
        ),
        f"- benchmarks: {len(r.benchmarks)}; problems and responses counted from the samples, "
        "decoding as recorded in the score files:",
        "",
    ]
    rows = [_settings_row(b, r.settings[b]) for b in r.benchmarks]
    header = ["benchmark", "stands for", "problems scored", "ungradable", "n samples",
              "temperature", "top-p", "max new tokens", "backend", "eval seed"]  # fmt: skip
    out += [_md_table(header, rows), ""]
    out += _markdown_planned(r)

    out += ["## Scores per method (percent)", ""]
    out += [f"- {defs[k]}" for k in ("pass_at_k", "total", "mean_std", "average")] + [""]
    for m in r.methods:
        n = len(r.seeds[m])
        out += [f"### {label(m)} (`{m}`; seeds: {_seeds_text(r.seeds[m])})", ""]
        rows = [
            [f"`{b}`", stands_for(b) or "–", *(_cell_text(r.cells[m][b], x, n) for x in METRICS)]
            for b in r.benchmarks
        ]
        avg = r.averages[m]
        if avg is None:
            rows.append(["**average**", "", "no benchmark with results", "", ""])
        else:
            name = f"**average** ({len(avg.benchmarks)} of {len(r.benchmarks)} benchmarks)"
            rows.append([name, "", *(score_text(avg.scores[x], ci=True) for x in METRICS)])
        out += [_md_table(["benchmark", "stands for", "P@1", "P@4", "Total"], rows), ""]
        if avg is not None and avg.excluded:
            out += [
                f"The average leaves out {', '.join(f'`{b}`' for b in avg.excluded)} "
                "(missing or not from every seed), so it is not comparable with an average over "
                f"all {len(r.benchmarks)} benchmarks.",
                "",
            ]

    out += _markdown_learning(r)
    out += _markdown_overview(r, paper)
    out += _markdown_gains(r, paper, defs)
    out += _markdown_paired(r, paper.gains.headline_mean / PERCENT)
    out += _markdown_mechanism(r)
    out += _markdown_paper(paper)
    out += ["## Plots", ""]
    for name, path in plots.items():
        out += [f"![{path.stem}]({name})", ""]
    if not plots:
        out += ["No plots (no training metrics and no evaluation results).", ""]
    out += ["## Notes", ""]
    out += [f"- {n}" for n in r.notes] or ["- none"]
    return "\n".join(out) + "\n"


def _markdown_learning(r: Report) -> list[str]:
    """The probe before and after training, and each trained model's P@1 minus the base
    model's per benchmark: whether training moved the policy (shown when a run has a probe)."""
    if not r.probes:
        return []
    out = [
        "## Learning: the probe before and after, P@1 against the base model",
        "",
        "Probe: the mean reward on the held-out probe problems (same problems, same sampling "
        "seed) at the first probe (step 0: before training) and the last; the difference is "
        "paired by problem, with a 95% t interval over problems (`ictrepro/report/learning.py`).",
        "",
    ]
    rows = [
        [
            f"`{p.run}`",
            f"{PERCENT * p.first:.2f} (step {p.first_step})",
            f"{PERCENT * p.last:.2f} (step {p.last_step})",
            "–" if p.diff is None else _interval_text(p.diff),
            "–" if p.diff is None else ("**resolved**" if p.diff.resolved else "not resolved"),
            str(p.n_problems),
        ]
        for p in r.probes
    ]
    header = ["run", "probe reward, first", "last", "last − first [95% interval]", "resolved?",
              "problems"]  # fmt: skip
    out += [_md_table(header, rows), ""]
    rows = []
    for c in r.comparisons:
        if c.b != BASE:
            continue
        for bench, d in zip(c.benchmarks, c.per_benchmark.get("p1", ()), strict=True):
            verdict = "**resolved**" if d.resolved else "not resolved"
            rows.append([f"{label(c.a)} − {label(BASE)}", f"`{bench}`", _interval_text(d), verdict])
    if rows:
        out += [
            "P@1 of each trained model minus the base model's, per benchmark, paired by "
            "problem on the same evaluation samples' seeds (points):",
            "",
            _md_table(
                ["comparison", "benchmark", "P@1 difference [95% interval]", "resolved?"], rows
            ),
            "",
        ]
    return out


def _markdown_overview(r: Report, paper: PaperNumbers) -> list[str]:
    """Our averages beside the paper's averages table (which is at 0.5B / 1.5B / 7B)."""
    a = paper.averages
    out = [
        "## Averages beside the paper's",
        "",
        "Ours: average over this run's benchmarks, mean ± std over seeds (percent). The paper's "
        f"numbers (arXiv {a.source['arxiv']}): {a.source['table']}. They are set beside ours "
        "for reference, not as a target at this scale.",
        "",
    ]
    methods = list(dict.fromkeys([*r.methods, *a.labels]))
    rows = []
    for m in methods:
        avg = r.averages.get(m)
        ours = (
            [score_text(avg.scores[x]) for x in METRICS]
            if avg
            else ["not run" if m not in r.methods else "missing"] * 3
        )
        papers = []
        for size in a.sizes:
            c = a.cells[size].get(m)
            mark = "†" if (size, m) in a.inconsistent_totals else ""
            papers.append("–" if c is None else f"{c.p1:.2f} / {c.p4:.2f} / {c.total:.2f}{mark}")
        rows.append([label(m), *ours, *papers])
    header = ["method", "ours P@1", "ours P@4", "ours Total",
              *(f"paper {s} (P@1 / P@4 / Total)" for s in a.sizes)]  # fmt: skip
    out += [_md_table(header, rows), ""]
    if a.inconsistent_totals:
        cells = ", ".join(f"{label(m)} {size}" for size, m in sorted(a.inconsistent_totals))
        out += [
            f"† Total is not (P@1 + P@4) / 2 for {cells}, as transcribed; the source "
            "transcription may be off (see the caveats below).",
            "",
        ]
    return out


def _markdown_gains(r: Report, paper: PaperNumbers, defs: dict[str, str]) -> list[str]:
    f = label(r.focus)
    keys = ("gain_on_benchmark", "average_gain", "maximum_gain", "best_baseline")
    out = [f"## Gains of {f} (percentage points)", "", *(f"- {defs[k]}" for k in keys), ""]
    if not r.gains:
        return [*out, "No gains: see the notes.", "", *_markdown_stated(paper)]
    comparisons = paper_comparisons(paper, r.focus, r.baselines)
    sizes = list(comparisons)
    out += [
        f"Best baseline here: **{label(r.best_baseline)}** (highest average Total)."
        if r.best_baseline
        else "No baseline has results.",
        "",
        "The paper columns are differences of the paper's own averages table at each size "
        "(its averages cover the same seven benchmarks, so they are its average gains, up to "
        "rounding); the paper's best baseline is chosen the same way, per size.",
        "",
    ]
    compared = [b for b in r.baselines if b in r.gains]
    entries = [(b, b, f"vs {label(b)}") for b in compared]
    if r.best_baseline:
        best_paper = "/".join(label(comparisons[s]["best"]["baseline"]) for s in sizes)
        name = f"vs best baseline ({label(r.best_baseline)})"
        entries.append(
            (r.best_baseline, "best", name + (f" [paper: {best_paper}]" if sizes else ""))
        )
    if BASE in r.gains:
        entries.append((BASE, BASE, "vs Base (the model before RL)"))
    rows = []
    for ours_key, paper_key, name in entries:
        for m in METRICS:
            g = r.gains[ours_key].get(m)
            ours = (
                ["–", "–"]
                if g is None
                else [_sign(g.average), f"{_sign(g.maximum)} (`{g.argmax}`)"]
            )
            theirs = [comparisons[s].get(paper_key) for s in sizes]
            cols = " / ".join("–" if d is None else _sign(d[m]) for d in theirs) or "–"
            rows.append([name, METRIC_LABELS[m], *ours, cols])
    header = ["comparison", "metric", "average gain", "maximum gain (benchmark)",
              "paper average gain " + " / ".join(sizes)]  # fmt: skip
    out += [_md_table(header, rows), ""]
    out += _markdown_max_by_chance(r)
    for b in compared:
        words = []
        for m, g in r.gains[b].items():
            verdict = "above" if g.average > 0 else ("below: loses" if g.average < 0 else "level")
            words.append(f"{METRIC_LABELS[m]} {_sign(g.average)} ({verdict})")
        out.append(f"- {f} vs {label(b)}, average gain: " + "; ".join(words) + ".")
    out += [
        "",
        "Whether a gain is established is read from the paired comparisons below (an "
        "interval over seeds and problems), not from the gains alone.",
        "",
    ]
    return out + _markdown_stated(paper)


def _markdown_max_by_chance(r: Report) -> list[str]:
    """How large the largest per-benchmark gain over each baseline is expected to be when no
    method differs, from each benchmark's paired standard error."""
    rows = []
    for c in r.comparisons:
        if c.a != r.focus or not c.per_benchmark:
            continue
        for m in METRICS:
            per = c.per_benchmark[m]
            observed = max(per, key=lambda d: d.mean)
            mean, p95 = expected_maximum([d.se for d in per])
            bench = c.benchmarks[per.index(observed)]
            rows.append(
                [
                    f"vs {label(c.b)}",
                    METRIC_LABELS[m],
                    f"{_sign(PERCENT * observed.mean)} (`{bench}`)",
                    f"{PERCENT * mean:.2f} / {PERCENT * p95:.2f}",
                ]
            )
    if not rows:
        return []
    return [
        f"The maximum gain by chance: the largest of {len(r.benchmarks)} per-benchmark "
        "differences is positive even when no method differs. Beside each observed maximum, "
        "the mean and 95th percentile of the largest of independent normal differences with "
        "each benchmark's paired standard error and true difference 0 (points):",
        "",
        _md_table(
            [
                "comparison",
                "metric",
                "observed maximum (benchmark)",
                "largest by chance: mean / 95%",
            ],
            rows,
        ),
        "",
    ]


def paired_json(d: PairedDifference) -> dict[str, Any]:
    """A paired difference in points, as summary.json holds it."""
    return {
        "difference": PERCENT * d.mean,
        "ci_low": PERCENT * d.ci_low,
        "ci_high": PERCENT * d.ci_high,
        "resolved": d.resolved,
        "half_width": PERCENT * d.half_width,
        "detectable_80": PERCENT * d.detectable,
        "df": d.df if math.isfinite(d.df) else None,  # None: no spread, normal quantile
        "n_seeds": d.n_seeds,
        "seed_spread_known": d.seed_spread_known,
    }


def _markdown_paired(r: Report, target: float) -> list[str]:
    """The paired table, the paper's claim and the claims (``target``: the paper's headline
    gain, a fraction, which the claims table says how many seeds would resolve)."""
    f = label(r.focus)
    out = [
        "## Paired comparisons (percentage points)",
        "",
        "A minus B on the average over the benchmarks both have, problem by problem on the "
        "same problems and evaluation seeds (and training seed by training seed for two "
        "trained methods). [low, high] is a 95% t interval whose variance has a seed, a "
        "problem and an interaction component, estimated from the seeds x problems spread "
        "(`ictrepro/evaluate/paired.py`). *Resolved*: the interval excludes 0. *Detectable "
        "(80%)*: the smallest true difference this design resolves with 80% power, "
        "(t_0.975 + t_0.8) × its standard error (a difference of the interval's half-width "
        "is resolved only half the time).",
        "",
    ]
    if not r.comparisons:
        return [*out, "No comparison: no two models were evaluated on the same benchmarks.", ""]
    rows = []
    for c in r.comparisons:
        for m in METRICS:
            d = c.diffs[m]
            verdict = "**resolved**" if d.resolved else "not resolved"
            if d.resolved and d.mean < 0:
                verdict += f" ({label(c.a)} loses)"
            rows.append(
                [
                    f"{label(c.a)} − {label(c.b)}",
                    METRIC_LABELS[m],
                    _interval_text(d),
                    verdict,
                    f"{PERCENT * d.detectable:.2f}",
                    f"{len(c.seeds) if c.seeds != (None,) else 1} × {len(c.benchmarks)}",
                ]
            )
    header = ["comparison", "metric", "difference [95% interval]", "resolved?",
              "detectable (80%)", "seeds × benchmarks"]  # fmt: skip
    out += [_md_table(header, rows), ""]
    if any(not d.seed_spread_known for c in r.comparisons for d in c.diffs.values()):
        out += ["With one seed the seed spread is unknown and left out of that interval.", ""]
    out += [
        f"**The paper's claim:** {f}'s P@4 is above every baseline's (the paper's "
        f"averages table, at every model size). **Here: {r.claim}.**",
        "",
    ]
    return out + _markdown_claims(r, target)


def _seeds_needed_text(c: Claim, target: float) -> str:
    if not c.seeds_known:
        return "–"
    needed = c.seeds_to_resolve(target)
    if needed is not None:
        return str(needed)
    floor = c.floor
    if floor is not None and floor > target:
        return f"none ({PERCENT * floor:.2f} with unlimited seeds)"
    return f"> {MAX_SEEDS}"


def _claim_row(c: Claim, target: float) -> list[str]:
    d = c.diff
    if c.not_a_comparison is not None:
        shown = "–" if d is None else _interval_text(d)
        return [c.text, shown, "–", "–", f"not a comparison ({c.not_a_comparison})"]
    if d is None:
        return [c.text, "–", "–", "–", "not tested"]
    return [
        c.text,
        _interval_text(d),
        f"{PERCENT * d.detectable:.2f}",
        _seeds_needed_text(c, target),
        f"**{c.verdict}**",
    ]


def _markdown_planned(r: Report) -> list[str]:
    """The confirmatory analysis, first: the plan's family with Holm-adjusted p-values."""
    a = r.planned
    if a is None:
        return []
    sha = a.plan_sha256 or "not found beside this installation"
    out = [
        "## Confirmatory analysis (fixed before the run)",
        "",
        f"The plan: [`{a.plan.path}`]({a.plan.path}) (sha256 `{sha}`; the plan's commit and "
        "sha256 at run time are in `reproduce.json`). Its family, ICT's P@4 against GRPO "
        "(primary), 20-Entropy, STAPO and Random-10% (secondary), is tested with Holm's "
        f"correction at a family-wise {100 * ALPHA:.0f}%; the mechanism comparison (ICT against "
        "its mask without the choice token) and the positive control (GRPO against GRPO at a "
        f"quarter of its rate, P@1 on `{a.plan.positive_benchmark}`) stand outside the family "
        "at 5%. Every other verdict of this report is exploratory.",
        "",
    ]
    rows = []
    for t in a.tests:
        diff = "–" if t.diff is None else _interval_text(t.diff)
        p = "–" if t.p is None else f"{t.p:.4f}"
        p_holm = "–" if t.p_holm is None else f"{t.p_holm:.4f}"
        detect = "–" if t.detectable_holm is None else f"{PERCENT * t.detectable_holm:.2f}"
        rows.append([t.role, f"{label(t.a)} − {label(t.b)}", diff, p, p_holm, detect, t.verdict])
    header = ["role", "comparison (P@4; the positive control P@1)", "difference [95% interval]", "p", "p (Holm)",
              "detectable (80%, Holm's first level)", "verdict"]  # fmt: skip
    out += [_md_table(header, rows), ""]
    out += [f"- {label(t.b)} left the family: {t.dropped}." for t in a.tests if t.dropped]
    return [*out, ""] if any(t.dropped for t in a.tests) else out


def _markdown_claims(r: Report, target: float) -> list[str]:
    out = [
        "## Verdicts per claim (percentage points)",
        "",
        "Each claim is one paired comparison: *reproduced* when its interval lies above 0, "
        "*contradicted* when below, otherwise *not resolved* (a true difference smaller than "
        "the 80%-power figure is likely to be missed). The random mask of the same size is "
        "the sparsity control: a gain over the baselines that the random mask also shows "
        "comes from updating fewer tokens, not from which tokens.",
        "",
    ]
    rows = [_claim_row(c, target) for c in r.claims]
    if r.positive_control is not None:
        rows.append(_claim_row(r.positive_control, target))
    points = f"{PERCENT * target:.2f}"
    header = ["claim", "difference [95% interval]", "detectable (80%)",
              f"seeds to resolve {points}", "verdict"]  # fmt: skip
    out += [_md_table(header, rows), ""] if rows else ["No claim was tested.", ""]
    if rows:
        out += [
            f"*Seeds to resolve {points}*: how many training seeds this run's design (its "
            f"problems and samples per problem) would need to resolve a true difference of "
            f"{points} points (the paper's headline gain) with 80% power, projected from this "
            "comparison's own seed, problem and residual variance (`ictrepro/evaluate/power.py`,"
            " docs/power.md); – with one seed, whose spread is unknown. *None*: even "
            "unlimited seeds leave the problem term, which only more problems shrink, above it.",
            "",
        ]
    pc = r.positive_control
    if pc is None:
        out += [
            "Positive control: not run (`grpo-lr4`, GRPO at a quarter of the learning rate, "
            "was not trained), so nothing shows that this instrument can resolve a planted "
            "difference.",
            "",
        ]
    elif pc.verdict == "reproduced":
        out += ["Positive control: the planted difference is resolved.", ""]
    elif pc.verdict == "contradicted":
        # Resolved, but the wrong way: the instrument is not blind to a difference of this
        # size, but more RL lowered the average, so "learns more" is not "scores higher".
        out += [
            "**Positive control reversed: GRPO at the full learning rate is resolved "
            "*below* GRPO at a quarter of it.** The instrument resolves a planted difference "
            "of this size, but more RL lowers this run's average P@1 (each method against "
            "Base above, and the subsets where it falls), so on these benchmarks a rule "
            "that learns more does not score higher.",
            "",
        ]
    else:
        out += [
            "**Positive control failed: the planted difference (GRPO against GRPO at a "
            "quarter of the learning rate) is not resolved, so this instrument is broken: "
            "no verdict above can be trusted.**",
            "",
        ]
    collapse = minority_collapse(r.comparisons)
    if collapse:
        out += [
            "**Collapse on the minority subset** (the fork world's backward-only problems, "
            "P@4 against the base model, points): the paper's phenomenon is shown where the "
            "interval lies below 0.",
            "",
            _md_table(
                ["method", "subset", "P@4 − base [95% interval]", "shown?"],
                [
                    [
                        label(m),
                        f"`{b}`",
                        _interval_text(d),
                        "**yes**" if d.ci_high < 0 else "no",
                    ]
                    for m, b, d in collapse
                ],
            ),
            "",
        ]
    if r.mask_activity:
        out += [
            "How often each rule's mask left response tokens out, over every logged training "
            "step of every seed (`selected_fraction` of `metrics.jsonl`; dense warm-up steps "
            "included):",
            "",
            _md_table(
                ["method", "steps that left tokens out", "response tokens left out (mean)"],
                [
                    [
                        label(a.method),
                        f"{a.steps_acted} of {a.steps} ({PERCENT * a.steps_acted / a.steps:.1f}%)",
                        f"{PERCENT * a.left_out:.3g}%",
                    ]
                    for a in r.mask_activity
                ],
            ),
            "",
        ]
    if r.inactive_masks:
        names = ", ".join(f"{label(m)} (`{m}`)" for m in r.inactive_masks)
        out += [
            f"**Mask never acted:** {names} selected every response token at every step of "
            "every seed, so it trained exactly as GRPO did; its comparisons say nothing "
            "about its rule.",
            "",
        ]
    if r.unchanged:
        names = ", ".join(f"{label(m)} (`{m}`)" for m in r.unchanged)
        out += [
            f"**No resolved change from the base model:** {names}: its average P@1, P@4 and "
            "Total each differ from the base model's by an interval that includes 0, so what "
            "it wins or loses against another method is that method's change from the base "
            "model, not a change of its own.",
            "",
        ]
    if r.at_chance:
        cells = "; ".join(
            f"{label(m)} on `{b}` (P@1 {PERCENT * p:.2f}%, chance {PERCENT * c:.0f}%)"
            for m, b, p, c in r.at_chance
        )
        out += [
            f"**At chance:** on these multiple-choice cells the P@1 interval reaches down to "
            f"uniform guessing, so they measure little: {cells}.",
            "",
        ]
    return out


def _markdown_mechanism(r: Report) -> list[str]:
    mech, verdicts = r.mechanism, r.mechanism_verdicts or {}
    out = [
        "## Mechanism: entropy and the room sampling gives",
        "",
        "Mean token entropy (nats, mean over seeds) at the first and last training step "
        "(its curve is `plots/curves-entropy.png`), and P@4 − P@1 of the average (points).",
        "",
    ]
    if mech is None:
        return [*out, "No training metrics or scores.", ""]
    rows = []
    for m in r.methods:
        start, end = mech.entropy_start.get(m), mech.entropy_end.get(m)
        room = mech.sampling_room.get(m)
        rows.append(
            [
                label(m),
                "–" if start is None else f"{start:.3f}",
                "–" if end is None else f"{end:.3f}",
                "–" if room is None else f"{PERCENT * room:.2f}",
            ]
        )
    out += [_md_table(["method", "entropy start", "entropy end", "P@4 − P@1"], rows), ""]
    f = label(r.focus)
    out += [
        f"- {f} keeps entropy above GRPO (the paper's argument): "
        f"{verdicts.get('entropy', 'not tested')}.",
        f"- {f} keeps entropy above the random mask of its size: "
        f"{verdicts.get('entropy_vs_control', 'not tested')}.",
        f"- {f} keeps P@4 above GRPO: {verdicts.get('pass_at_4', 'not tested')}.",
        "",
    ]
    return out


def _markdown_stated(paper: PaperNumbers) -> list[str]:
    """The paper's 4.58 and 14.9: what they are, and which of its comparisons they match."""
    g, metric = paper.gains, METRIC_LABELS[paper.gains.metric]
    stated = ", ".join(f"{v:.2f} ({s})" for s, v in g.per_size.items())
    others = [m for m in paper.averages.labels if m not in ("ict", BASE)]
    matches = stated_gain_matches(paper, paper_comparisons(paper, "ict", others))
    which = (
        f"none of them equals ICT's {metric} minus another column of its own averages table "
        "(Base, each baseline, the best baseline; checked to 0.01)."
        if not matches
        else f"within 0.01 they match these differences of its averages table: {'; '.join(matches)}."
    )
    cell = f" ({g.max_cell})" if g.max_cell else ""
    return [
        "### The paper's stated figures",
        "",
        f"- **{g.headline_mean:.2f}** (headline) = the mean of the {metric} gains the paper "
        f"states per model size: {stated}. Read as gains in the average {metric} over its seven "
        f"benchmarks at one size, they are the same kind of quantity as our 'average gain' rows "
        f"for {metric}. The paper does not state which comparison they are (which baseline, or "
        f"the best one); {which}",
        f"- **{g.max_value:.1f}** (maximum) is a single (model size, benchmark) cell of the paper "
        f"that no reading identified{cell}; our 'maximum gain' is the same kind of quantity (one "
        "benchmark), at this run's scale.",
        "",
    ]


def _markdown_paper(paper: PaperNumbers) -> list[str]:
    b = paper.ablation
    out = [
        "## The paper's ablation (not run here)",
        "",
        f"{b.source['table']} (arXiv {b.source['arxiv']}), percent:",
        "",
        _md_table(
            ["variant", "P@1", "P@4"],
            [[r.name, f"{r.p1:.2f}", "–" if r.p4 is None else f"{r.p4:.2f}"] for r in b.rows],
        ),
        "",
        "Caveats of the paper's numbers, as transcribed:",
        "",
    ]
    caveats = [
        *paper.averages.source["caveats"],
        *paper.gains.source["caveats"],
        *b.source["caveats"],
    ]
    return [*out, *(f"- {c}" for c in dict.fromkeys(caveats)), ""]


def planned_json(a: PlannedAnalysis) -> dict[str, Any]:
    return {
        "plan": a.plan.path,
        "plan_sha256": a.plan_sha256,
        "alpha": ALPHA,
        "tests": [
            {
                "role": t.role,
                "a": t.a,
                "b": t.b,
                "difference": None if t.diff is None else paired_json(t.diff),
                "p": t.p,
                "p_holm": t.p_holm,
                "detectable_holm": None
                if t.detectable_holm is None
                else PERCENT * t.detectable_holm,
                "dropped": t.dropped,
                "verdict": t.verdict,
            }
            for t in a.tests
        ],
    }


def build_summary(r: Report, paper: PaperNumbers, files: Sequence[str]) -> dict[str, Any]:
    """Every number of the report, machine-readable (scores in percent, gains in points);
    ``files``: the names of the files written, relative to the report's folder."""
    target = paper.gains.headline_mean / PERCENT
    return {
        "schema": 1,
        "run_dir": str(r.run_dir),
        "preset": r.preset,
        "units": {"scores": "percent (pass@k x 100)", "gains": "percentage points"},
        "definitions": definitions(r.focus, len(r.benchmarks)),
        "focus": r.focus,
        "baselines": list(r.baselines),
        "best_baseline": r.best_baseline,
        "methods": list(r.methods),
        "benchmarks": list(r.benchmarks),
        "seeds": {m: list(s) for m, s in r.seeds.items()},
        "settings": r.settings,
        "scores": {m: {b: cell_json(c) for b, c in per.items()} for m, per in r.cells.items()},
        "averages": {m: None if a is None else average_json(a) for m, a in r.averages.items()},
        "gains": {o: {m: gain_json(g) for m, g in per.items()} for o, per in r.gains.items()},
        "paper": paper.to_json(),
        "paper_comparisons": paper_comparisons(paper, r.focus, r.baselines),
        "planned": None if r.planned is None else planned_json(r.planned),
        "probes": [
            {
                "run": p.run,
                "first_step": p.first_step,
                "last_step": p.last_step,
                "first": PERCENT * p.first,
                "last": PERCENT * p.last,
                "n_problems": p.n_problems,
                "difference": None if p.diff is None else paired_json(p.diff),
            }
            for p in r.probes
        ],
        "paired_comparisons": [
            {
                "a": c.a,
                "b": c.b,
                "benchmarks": list(c.benchmarks),
                "seeds": list(c.seeds),
                **{m: paired_json(d) for m, d in c.diffs.items()},
            }
            for c in r.comparisons
        ],
        "claim": {"statement": "focus P@4 above every baseline", "verdict": r.claim},
        "claims": [
            {
                "claim": c.text,
                "a": c.a,
                "b": c.b,
                "metric": c.metric,
                "verdict": c.verdict,
                **({} if c.diff is None else paired_json(c.diff)),
                "seeds_to_resolve_paper_gain": c.seeds_to_resolve(target),
                "detectable_80_unlimited_seeds": None if c.floor is None else PERCENT * c.floor,
            }
            for c in (*r.claims, *([r.positive_control] if r.positive_control else []))
        ],
        "flags": {
            "inactive_masks": list(r.inactive_masks),
            "mask_activity": [
                {
                    "method": a.method,
                    "steps_acted": a.steps_acted,
                    "steps": a.steps,
                    "left_out_percent": PERCENT * a.left_out,
                }
                for a in r.mask_activity
            ],
            "unchanged_from_base": list(r.unchanged),
            "at_chance": [
                {"method": m, "benchmark": b, "p1": PERCENT * p, "chance_p1": PERCENT * c}
                for m, b, p, c in r.at_chance
            ],
        },
        "mechanism": None
        if r.mechanism is None
        else {
            "entropy_start": r.mechanism.entropy_start,
            "entropy_end": r.mechanism.entropy_end,
            "p4_minus_p1": {m: PERCENT * v for m, v in r.mechanism.sampling_room.items()},
            "verdicts": r.mechanism_verdicts,
        },
        "training_curves": {
            key: {m: c.to_json() for m, c in per.items()} for key, per in r.curves.items()
        },
        "files": sorted(files),
        "notes": list(r.notes),
    }


def console_tables(r: Report) -> list[Table]:
    """The averages per method and the focus method's gains, as rich tables."""
    avg = Table(title=f"Averages over benchmarks, percent, mean ± std over seeds ({r.run_dir})")
    avg.add_column("method", style="bold")
    for m in METRICS:
        avg.add_column(METRIC_LABELS[m], justify="right")
    avg.add_column("benchmarks", justify="right")
    avg.add_column("seeds", justify="right")
    for m in r.methods:
        a = r.averages[m]
        if a is None:
            avg.add_row(label(m), "missing", "missing", "missing", "0", _seeds_text(r.seeds[m]))
        else:
            cells = [score_text(a.scores[x]) for x in METRICS]
            avg.add_row(
                label(m),
                *cells,
                f"{len(a.benchmarks)}/{len(r.benchmarks)}",
                _seeds_text(r.seeds[m]),
            )
    tables = [avg]
    if r.gains:
        g = Table(title=f"Gains of {label(r.focus)}, points: average / maximum over benchmarks")
        g.add_column("vs", style="bold")
        for m in METRICS:
            g.add_column(METRIC_LABELS[m], justify="right")
        for other, per in r.gains.items():
            name = label(other) + (" (best)" if other == r.best_baseline else "")
            cells = [
                f"{_sign(per[m].average)} / {_sign(per[m].maximum)}" if m in per else "–"
                for m in METRICS
            ]
            g.add_row(name, *cells)
        tables.append(g)
    return tables
