"""``ictrepro report``: the tables, gains, plots and summary of a run directory.

Reads ``RUN/eval/<model>/<benchmark>.samples.jsonl`` (``<model>`` is ``base`` or
``<method>-seed<s>``), ``RUN/eval/<model>/<benchmark>.score.json`` (decoding settings only)
and ``RUN/train/<method>-seed<s>/metrics.jsonl``, and writes to ``RUN/report/``::

    report.md          what was run, tables per method, gains, the paper's numbers, plots
    summary.json       every number of report.md, machine-readable (percent / points)
    plots/*.png        training curves, pass@1 / pass@4 bars

The numbers (all in percent; gains in percentage points):

- P@k of a (model, benchmark): the mean over the benchmark's gradable problems of the
  unbiased pass@k, recomputed here from each problem's ``n_correct`` and number of
  responses (a problem with an ``ungradable`` verdict is left out). Never read from
  ``score.json``. Total = (P@1 + P@4) / 2, per problem and hence per benchmark.
- A (method, benchmark) cell: mean, std (ddof 1) and two-level bootstrap interval over
  training seeds (:func:`ictrepro.evaluate.aggregate.aggregate_seeds`). ``base`` is one model.
- A method's average: per seed, the mean over the benchmarks that every seed of the method
  has; then mean, std and bootstrap interval over seeds. A benchmark without results (or
  with results from only some seeds) is shown as such and left out of the average, never
  counted as 0.
- Gain of the focus method (ICT) over a baseline on a benchmark: the difference of the two
  means over seeds. Average gain: its mean over the benchmarks both have. Maximum gain: its
  largest value over those benchmarks. Best baseline: the highest average Total.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import math
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from ictrepro.config import EVAL_SUITES
from ictrepro.data.benchmarks import PAPER_BENCHMARKS
from ictrepro.evaluate.aggregate import SeedAggregate, aggregate_seeds
from ictrepro.evaluate.passk import pass_at_k
from ictrepro.io import atomic_write_bytes, atomic_write_text, read_jsonl
from ictrepro.results.paper import PaperNumbers, load_paper

BASE = "base"
METRICS = ("p1", "p4", "total")
METRIC_LABELS = {"p1": "P@1", "p4": "P@4", "total": "Total"}
METHOD_LABELS = {
    "base": "Base",
    "grpo": "GRPO",
    "entropy": "20-Entropy",
    "stapo": "STAPO",
    "ict": "ICT",
    "random": "Random-10%",
}
STANDS_FOR = {
    "tiny-gsm8k": "GSM8K",
    "tiny-math500": "MATH500",
    "tiny-mmlu-stem": "MMLU-STEM",
    "tiny-gpqa": "GPQA",
    "tiny-aime23": "AIME23",
    "tiny-aime24": "AIME24",
    "tiny-aime25": "AIME25",
    "math500": "MATH500",
    "gsm8k": "GSM8K",
    "mmlu_stem": "MMLU-STEM",
    "gpqa_diamond": "GPQA",
    "aime23": "AIME23",
    "aime24": "AIME24",
    "aime25": "AIME25",
}
#: Training curves: (file stem, title, [(metrics.jsonl key, line style)]).
CURVES = (
    ("reward", "Reward (mean over responses)", (("reward_mean", "-"),)),
    ("entropy", "Shannon entropy H (response tokens)", (("entropy_mean", "-"),)),
    ("renyi2", "Rényi-2 entropy H2 = -log sum p^2", (("renyi2_mean", "-"),)),
    ("selected-fraction", "Selected fraction of response tokens", (("selected_fraction", "-"),)),
    (
        "js",
        "Group JS u: selected (solid) vs unselected (dashed) tokens",
        (("js_selected_mean", "-"), ("js_unselected_mean", "--")),
    ),
)
BARS_PLOT = "passk-bars"
_MODEL = re.compile(r"^(?P<method>.+)-seed(?P<seed>\d+)$")
_SAMPLES = ".samples.jsonl"

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
PAPER_SCALE_STATEMENT = (
    "**Paper-scale preset `{preset}`.** Compare with the paper's numbers only where model, "
    "training data and decoding match; the paper does not state its decoding settings or "
    "its number of samples per problem."
)


# ---------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Score:
    """One metric over seeds, in percent: mean and std (ddof 1) of the per-seed scores,
    the bootstrap interval of :func:`aggregate_seeds`, and the per-seed scores."""

    mean: float
    std: float
    ci_low: float
    ci_high: float
    confidence: float
    per_seed: tuple[float, ...]

    @classmethod
    def from_aggregate(cls, agg: SeedAggregate) -> Score:
        return cls(
            100 * agg.mean,
            100 * agg.std,
            100 * agg.ci_low,
            100 * agg.ci_high,
            agg.confidence,
            tuple(100 * x for x in agg.per_seed),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "mean": self.mean,
            "std": self.std,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "confidence": self.confidence,
            "per_seed": list(self.per_seed),
        }

    def text(self, *, ci: bool = False) -> str:
        out = f"{self.mean:.2f}" if len(self.per_seed) < 2 else f"{self.mean:.2f} ± {self.std:.2f}"
        if ci:
            out += f" [{self.ci_low:.2f}, {self.ci_high:.2f}]"
        return out


@dataclass(frozen=True)
class ProblemScores:
    """One model on one benchmark, per gradable problem (fractions in [0, 1])."""

    path: Path
    ids: tuple[str, ...]
    p1: np.ndarray  # [P]
    p4: np.ndarray  # [P]
    n_samples: tuple[int, ...]  # the distinct numbers of responses per problem
    n_ungradable: int
    settings: dict[str, Any] | None  # decoding settings from score.json, if present
    recorded: dict[str, float] | None  # score.json's pass_at (only checked against ours)


@dataclass(frozen=True)
class Cell:
    """One method on one benchmark. ``status``: "ok" (every seed of the method has it),
    "partial" (only ``seeds`` have it; left out of the average) or "missing"."""

    status: str
    seeds: tuple[int | None, ...]
    n_problems: int
    scores: dict[str, Score]
    matrices: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "seeds": list(self.seeds),
            "n_problems": self.n_problems,
            **{m: s.to_json() for m, s in self.scores.items()},
        }


@dataclass(frozen=True)
class Average:
    """A method's average over ``benchmarks`` (its "ok" cells); ``excluded`` were left out."""

    benchmarks: tuple[str, ...]
    excluded: tuple[str, ...]
    scores: dict[str, Score]

    def to_json(self) -> dict[str, Any]:
        return {
            "benchmarks": list(self.benchmarks),
            "excluded": list(self.excluded),
            **{m: s.to_json() for m, s in self.scores.items()},
        }


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

    def to_json(self) -> dict[str, Any]:
        return {
            "average": self.average,
            "maximum": self.maximum,
            "argmax": self.argmax,
            "benchmarks": list(self.per_benchmark),
            "per_benchmark": self.per_benchmark,
        }


@dataclass
class Report:
    """What :func:`score_run` computed (scores in percent, gains in points) and what
    :func:`build_report` wrote from it."""

    run_dir: Path
    preset: str
    focus: str
    baselines: tuple[str, ...]
    methods: tuple[str, ...]  # table rows: base first if evaluated
    benchmarks: tuple[str, ...]
    seeds: dict[str, tuple[int | None, ...]]  # evaluated seeds; (None,) for base
    settings: dict[str, dict[str, Any]]  # per benchmark: problems, n samples, decoding
    cells: dict[str, dict[str, Cell]]  # [method][benchmark]
    averages: dict[str, Average | None]
    gains: dict[str, dict[str, Gain]]  # [baseline or "base"][metric]
    best_baseline: str | None
    training: dict[str, dict[int, Path]]  # [method][seed] -> metrics.jsonl
    notes: list[str]
    out_dir: Path | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    markdown: str = ""
    paths: dict[str, Path] = field(default_factory=dict)


# ------------------------------------------------------------------------- reading


def read_samples(path: Path) -> ProblemScores:
    """Per-problem pass@1 and pass@4 of one ``samples.jsonl``, recomputed from ``n_correct``
    and the number of responses; problems with an "ungradable" verdict are left out."""
    ids, p1, p4, ns, ungradable = [], [], [], set(), 0
    for lineno, row in enumerate(read_jsonl(path), start=1):
        where = f"{path}:{lineno}"
        for key in ("id", "responses", "verdicts", "n_correct"):
            if key not in row:
                raise ValueError(f"{where}: missing field {key!r}")
        if "ungradable" in row["verdicts"]:
            ungradable += 1
            continue
        n, c = len(row["responses"]), row["n_correct"]
        if len(row["verdicts"]) != n:
            raise ValueError(f"{where}: {len(row['verdicts'])} verdicts for {n} responses")
        try:
            p1.append(pass_at_k(n, c, 1))
            p4.append(pass_at_k(n, c, 4))
        except (TypeError, ValueError) as e:
            raise ValueError(f"{where}: {e}") from None
        ids.append(str(row["id"]))
        ns.add(n)
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: a problem id occurs more than once")
    settings, recorded = _read_score_file(path)
    return ProblemScores(
        path,
        tuple(ids),
        np.asarray(p1, dtype=np.float64),
        np.asarray(p4, dtype=np.float64),
        tuple(sorted(ns)),
        ungradable,
        settings,
        recorded,
    )


def _read_score_file(samples_path: Path) -> tuple[dict[str, Any] | None, dict[str, float] | None]:
    """Decoding settings and recorded pass@k from the ``score.json`` beside a samples file."""
    path = samples_path.with_name(samples_path.name.removesuffix(_SAMPLES) + ".score.json")
    if not path.is_file():
        return None, None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return None, None
    identity = record.get("identity") or {}
    sampling = (identity.get("settings") or {}).get("sampling")
    settings = None
    if sampling is not None:
        settings = {
            **sampling,
            "ks": (identity.get("settings") or {}).get("ks"),
            "backend": identity.get("backend"),
            "seed": identity.get("seed"),
        }
    recorded = record.get("pass_at")
    return settings, recorded if isinstance(recorded, dict) else None


def _parse_model(name: str) -> tuple[str, int | None] | None:
    if name == BASE:
        return BASE, None
    m = _MODEL.match(name)
    return (m["method"], int(m["seed"])) if m else None


def discover_eval(run_dir: Path) -> dict[str, dict[int | None, dict[str, Path]]]:
    """``{method: {seed: {benchmark: samples path}}}`` under ``RUN/eval/``."""
    found: dict[str, dict[int | None, dict[str, Path]]] = {}
    root = run_dir / "eval"
    if not root.is_dir():
        return found
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        parsed = _parse_model(folder.name)
        if parsed is None:
            continue
        method, seed = parsed
        files = {p.name.removesuffix(_SAMPLES): p for p in sorted(folder.glob(f"*{_SAMPLES}"))}
        if files:
            found.setdefault(method, {})[seed] = files
    return found


def discover_training(run_dir: Path) -> dict[str, dict[int, Path]]:
    """``{method: {seed: metrics.jsonl}}`` under ``RUN/train/``."""
    found: dict[str, dict[int, Path]] = {}
    root = run_dir / "train"
    if not root.is_dir():
        return found
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        parsed = _parse_model(folder.name)
        if parsed is None or parsed[1] is None or not (folder / "metrics.jsonl").is_file():
            continue
        found.setdefault(parsed[0], {})[parsed[1]] = folder / "metrics.jsonl"
    return found


def _presets(run_dir: Path) -> list[str]:
    """Presets recorded by ``prepare.json`` and the training runs' ``train.json``."""
    records = [run_dir / "prepare.json", *sorted((run_dir / "train").glob("*/train.json"))]
    presets = set()
    for path in records:
        try:
            preset = json.loads(path.read_text(encoding="utf-8"))["config"]["preset"]
        except (OSError, json.JSONDecodeError, KeyError, TypeError):
            continue
        presets.add(str(preset))
    return sorted(presets)


def _config_notes(run_dir: Path, methods: Sequence[str]) -> list[str]:
    """A note per shared training field (``config.rl``) whose value differs between the
    runs of ``methods``: a comparison is only fair when they share it."""
    values: dict[str, dict[str, list[str]]] = {}
    for path in sorted((run_dir / "train").glob("*/train.json")):
        parsed = _parse_model(path.parent.name)
        if parsed is None or parsed[0] not in methods:
            continue
        try:
            rl = json.loads(path.read_text(encoding="utf-8"))["config"]["rl"]
        except (OSError, json.JSONDecodeError, KeyError, TypeError):
            continue
        for key, value in rl.items():
            values.setdefault(key, {}).setdefault(json.dumps(value), []).append(path.parent.name)
    return [
        f"training runs differ in rl.{key}: "
        + "; ".join(f"{v} ({', '.join(runs)})" for v, runs in by_value.items())
        + "."
        for key, by_value in values.items()
        if len(by_value) > 1
    ]


def benchmark_order(names: Collection[str]) -> list[str]:
    """The tiny suites and the paper's benchmarks in their canonical order, then the rest."""
    canonical = [*EVAL_SUITES, *PAPER_BENCHMARKS]
    known = [b for b in canonical if b in names]
    return known + sorted(set(names) - set(canonical))


def label(method: str) -> str:
    return METHOD_LABELS.get(method, method)


# ---------------------------------------------------------------------- aggregation


def score_cell(per_seed: dict[int | None, ProblemScores], all_seeds: Sequence[int | None]) -> Cell:
    """Aggregate one (method, benchmark) over the seeds that have it.

    Every seed must have the same gradable problems (matched by id)."""
    if not per_seed:
        return Cell("missing", (), 0, {})
    seeds = tuple(s for s in all_seeds if s in per_seed)
    first = per_seed[seeds[0]]
    if not any(ps.ids for ps in per_seed.values()):  # no gradable problem at all
        return Cell("missing", (), 0, {})
    order = {pid: i for i, pid in enumerate(first.ids)}
    rows = {"p1": [], "p4": []}
    for s in seeds:
        ps = per_seed[s]
        if set(ps.ids) != set(order):
            raise ValueError(
                f"{ps.path} and {first.path} have different gradable problems; "
                "re-run `ictrepro eval` so every model is scored on the same problems"
            )
        idx = np.asarray([order[pid] for pid in ps.ids])
        for m in rows:
            row = np.empty(len(order))
            row[idx] = getattr(ps, m)
            rows[m].append(row)
    matrices = {m: np.stack(v) for m, v in rows.items()}
    matrices["total"] = (matrices["p1"] + matrices["p4"]) / 2
    scores = {m: Score.from_aggregate(aggregate_seeds(matrices[m])) for m in METRICS}
    status = "ok" if len(seeds) == len(all_seeds) else "partial"
    return Cell(status, seeds, len(order), scores, matrices)


def score_average(cells: dict[str, Cell], benchmarks: Sequence[str]) -> Average | None:
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
    scores = {}
    total = sum(cells[b].n_problems for b in included)
    for m in METRICS:
        pooled = np.concatenate(
            [
                cells[b].matrices[m] * (total / (len(included) * cells[b].n_problems))
                for b in included
            ],
            axis=1,
        )
        scores[m] = Score.from_aggregate(aggregate_seeds(pooled))
    return Average(tuple(included), excluded, scores)


def compute_gain(
    cells: dict[str, dict[str, Cell]], focus: str, baseline: str, metric: str
) -> Gain | None:
    """``focus`` minus ``baseline`` per benchmark where both cells are "ok"; None if none."""
    per = {
        b: cells[focus][b].scores[metric].mean - cells[baseline][b].scores[metric].mean
        for b in cells[focus]
        if cells[focus][b].status == "ok" and cells[baseline][b].status == "ok"
    }
    if not per:
        return None
    argmax = max(per, key=lambda b: per[b])
    return Gain(
        focus, baseline, metric, per, float(np.mean(list(per.values()))), per[argmax], argmax
    )


# --------------------------------------------------------------------------- plots


def _png(fig: Any, path: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    atomic_write_bytes(path, buf.getvalue())
    return path


def _curve(rows_by_seed: dict[int, list[dict]], key: str) -> dict[int, tuple[Any, Any]]:
    """``{seed: (steps, values)}`` of one metric; null becomes NaN; a seed whose values
    are all null is left out."""
    out = {}
    for seed, rows in rows_by_seed.items():
        steps = np.asarray([r.get("step", i + 1) for i, r in enumerate(rows)], dtype=np.float64)
        values = np.asarray([np.nan if r.get(key) is None else r[key] for r in rows], dtype=float)
        if np.isfinite(values).any():
            out[seed] = (steps, values)
    return out


def _mean_curve(series: dict[int, tuple[Any, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """Mean over seeds at each step, over the seeds with a value there (NaN where none)."""
    steps = np.unique(np.concatenate([s for s, _ in series.values()]))
    table = np.full((len(series), len(steps)), np.nan)
    for i, (s, v) in enumerate(series.values()):
        table[i, np.searchsorted(steps, s)] = v
    counts = np.isfinite(table).sum(axis=0)
    sums = np.where(np.isfinite(table), table, 0.0).sum(axis=0)
    return steps, np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def plot_training_curves(
    report: Report, plot_dir: Path
) -> tuple[dict[str, Path], dict[str, dict[str, Any]]]:
    """One PNG per curve of :data:`CURVES`: per method the mean over seeds (thick) and each
    seed (thin). A method whose values are all null is left out; a curve with nothing to
    draw is not written. Returns the paths and the mean curves (for summary.json)."""
    from matplotlib.figure import Figure

    metrics = {
        m: {seed: read_jsonl(path) for seed, path in runs.items()}
        for m, runs in report.training.items()
    }
    colors = _colors(report.methods)
    paths: dict[str, Path] = {}
    data: dict[str, dict[str, Any]] = {}
    for stem, title, keys in CURVES:
        fig = Figure(figsize=(7, 4))
        ax = fig.add_subplot()
        for method, rows_by_seed in metrics.items():
            for key, style in keys:
                series = _curve(rows_by_seed, key)
                if not series:
                    continue
                for steps, values in series.values():
                    ax.plot(steps, values, style, color=colors[method], lw=0.7, alpha=0.35)
                steps, mean = _mean_curve(series)
                name = label(method) + ("" if len(keys) == 1 else f" {key.split('_')[1]}")
                ax.plot(steps, mean, style, color=colors[method], lw=2, label=name)
                data.setdefault(key, {})[method] = {
                    "seeds": sorted(series),
                    "steps": steps.tolist(),
                    "mean": [None if math.isnan(x) else x for x in mean.tolist()],
                }
        if ax.lines:
            ax.set(title=title, xlabel="training step")
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
            ax.grid(alpha=0.3)
            paths[stem] = _png(fig, plot_dir / f"curves-{stem}.png")
    return paths, data


def plot_passk_bars(report: Report, plot_dir: Path) -> Path | None:
    """Grouped bars of P@1 and P@4 per benchmark, one bar per method (mean over seeds,
    error bar = std over seeds); a missing cell has no bar. None if nothing to draw."""
    from matplotlib.figure import Figure

    methods, benchmarks = report.methods, report.benchmarks
    if not benchmarks:
        return None
    colors = _colors(methods)
    fig = Figure(figsize=(max(7, 1.3 * len(benchmarks)), 6.5))
    width = 0.8 / len(methods)
    for row, metric in enumerate(("p1", "p4")):
        ax = fig.add_subplot(2, 1, row + 1)
        for i, method in enumerate(methods):
            offset = (i - (len(methods) - 1) / 2) * width
            shown = [
                (j, c) for j, b in enumerate(benchmarks) if (c := report.cells[method][b]).scores
            ]
            if shown:
                ax.bar(
                    [j + offset for j, _ in shown],
                    [c.scores[metric].mean for _, c in shown],
                    width,
                    yerr=[c.scores[metric].std for _, c in shown],
                    capsize=2,
                    color=colors[method],
                    label=label(method),
                )
        ax.set_xticks(range(len(benchmarks)), [b.removeprefix("tiny-") for b in benchmarks])
        ax.set_ylabel(f"{METRIC_LABELS[metric]} (%)")
        ax.grid(axis="y", alpha=0.3)
    fig.axes[0].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.axes[0].set_title("pass@k per benchmark (mean over seeds, error bar = std over seeds)")
    return _png(fig, plot_dir / f"{BARS_PLOT}.png")


def write_plots(report: Report, plot_dir: Path) -> tuple[dict[str, Path], dict[str, Any]]:
    """Draw every plot; delete this module's plots of an earlier report that were not
    redrawn. Returns ``{name: path}`` and the mean training curves."""
    curves, data = plot_training_curves(report, plot_dir)
    plots = {f"curves-{k}": v for k, v in curves.items()}
    bars = plot_passk_bars(report, plot_dir)
    if bars is not None:
        plots[BARS_PLOT] = bars
    ours = {f"curves-{stem}" for stem, _, _ in CURVES} | {BARS_PLOT}
    for name in ours - set(plots):
        (plot_dir / f"{name}.png").unlink(missing_ok=True)
    for stem, _, keys in CURVES:
        if stem not in curves:
            report.notes.append(
                f"no training curve of {', '.join(k for k, _ in keys)}: every value is null "
                "or no training run was found."
            )
    return plots, data


def _colors(methods: Sequence[str]) -> dict[str, Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return {m: cmap(i % 10) for i, m in enumerate(methods)}


# ------------------------------------------------------------------------ building


def score_run(
    run_dir: Path | str,
    *,
    methods: Sequence[str] | None = None,
    baselines: Sequence[str] = ("grpo", "entropy", "stapo"),
    focus: str = "ict",
) -> Report:
    """Every number of the report of ``run_dir``, computed from the per-problem samples;
    nothing is written (``markdown``, ``summary`` and ``paths`` are left empty)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run directory {run_dir} does not exist")
    evaluated, training = discover_eval(run_dir), discover_training(run_dir)
    if not evaluated and not training:
        raise FileNotFoundError(
            f"{run_dir} has no eval/<model>/*.samples.jsonl and no train/*/metrics.jsonl; "
            "run `ictrepro train` and `ictrepro eval` first"
        )
    notes: list[str] = []
    shown = _choose_methods(evaluated, training, methods, baselines, focus)
    rows = ([BASE] if BASE in evaluated else []) + [m for m in shown if m != BASE]
    benchmarks = benchmark_order({b for per in evaluated.values() for f in per.values() for b in f})
    for m in rows:
        if m not in evaluated:
            notes.append(f"{m}: no evaluation results; every benchmark is missing.")
        untested = sorted(set(training.get(m, {})) - set(evaluated.get(m, {})))
        if untested:
            notes.append(f"{m}: seeds {untested} were trained but not evaluated.")

    seeds = {m: tuple(sorted(evaluated.get(m, {}), key=lambda s: s or 0)) for m in rows}
    loaded = {
        (m, s, b): read_samples(path)
        for m in rows
        for s, files in evaluated.get(m, {}).items()
        for b, path in files.items()
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
    settings = _settings(loaded, benchmarks, notes)

    present = [b for b in baselines if b in rows and averages.get(b) is not None]
    best = max(present, key=lambda b: averages[b].scores["total"].mean) if present else None
    gains: dict[str, dict[str, Gain]] = {}
    if averages.get(focus) is None:
        notes.append(f"focus method {focus!r} has no results: no gains are reported.")
    else:
        for other in [*present, *([BASE] if BASE in rows else [])]:
            per = {m: compute_gain(cells, focus, other, m) for m in METRICS}
            gains[other] = {m: g for m, g in per.items() if g is not None}
        notes += [
            f"baseline {b!r} has no results: not compared." for b in baselines if b not in present
        ]
        if len({averages[b].benchmarks for b in present}) > 1:
            notes.append(
                "the baselines' averages cover different benchmarks, so choosing the best "
                "baseline by average Total compares averages over different sets."
            )
    notes += _config_notes(run_dir, rows)
    presets = _presets(run_dir)
    return Report(
        run_dir=run_dir,
        preset=", ".join(presets) if presets else "unknown",
        focus=focus,
        baselines=tuple(baselines),
        methods=tuple(rows),
        benchmarks=tuple(benchmarks),
        seeds=seeds,
        settings=settings,
        cells=cells,
        averages=averages,
        gains=gains,
        best_baseline=best,
        training={m: training[m] for m in rows if m in training},
        notes=notes,
    )


def build_report(
    run_dir: Path | str,
    *,
    out_dir: Path | str | None = None,
    methods: Sequence[str] | None = None,
    baselines: Sequence[str] = ("grpo", "entropy", "stapo"),
    focus: str = "ict",
    console: Console | None = None,
    paper_dir: Path | str | None = None,
) -> Report:
    """Score ``run_dir`` (:func:`score_run`) and write report.md, summary.json and the plots
    to ``out_dir`` (default ``RUN/report/``), each file atomically; print the averages and
    gains to ``console``.

    Args:
        methods: trained methods to show (default: every method found under ``eval/`` or
            ``train/``); ``base`` is always shown when it was evaluated.
        baselines: the methods ``focus`` is compared with; the best baseline is the one
            with the highest average Total.
        focus: the method whose gains are reported (ICT).
        console: where the tables are printed (default: a new rich Console).
        paper_dir: the paper's data files (default ``results/paper/``).
    """
    paper = load_paper(paper_dir)  # first: a bad paper file fails before any work
    report = score_run(run_dir, methods=methods, baselines=baselines, focus=focus)
    report.out_dir = Path(out_dir) if out_dir is not None else report.run_dir / "report"
    plots, curves = write_plots(report, report.out_dir / "plots")
    report.paths = {
        "report.md": report.out_dir / "report.md",
        "summary.json": report.out_dir / "summary.json",
        **{f"plots/{p.name}": p for p in plots.values()},
    }
    report.summary = build_summary(report, paper, curves)
    report.markdown = render_markdown(report, paper)
    atomic_write_text(report.paths["report.md"], report.markdown)
    text = json.dumps(report.summary, indent=2, sort_keys=True, allow_nan=False)
    atomic_write_text(report.paths["summary.json"], text + "\n")
    console = console or Console()
    for table in console_tables(report):
        console.print(table)
    console.print(f"report: {report.paths['report.md']}")
    return report


def _choose_methods(
    evaluated: dict[str, Any],
    training: dict[str, Any],
    methods: Sequence[str] | None,
    baselines: Sequence[str],
    focus: str,
) -> list[str]:
    """The trained methods to show: ``methods`` as given, or every one found, ordered
    baselines, focus, then the rest alphabetically."""
    if methods:
        return list(dict.fromkeys(methods))
    found = (set(evaluated) | set(training)) - {BASE}
    ordered = [m for m in (*baselines, focus) if m in found]
    return list(dict.fromkeys(ordered + sorted(found - set(ordered))))


def _cell_notes(cells: dict[str, dict[str, Cell]], benchmarks: Sequence[str]) -> list[str]:
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


def _consistency_notes(loaded: dict[tuple[str, int | None, str], ProblemScores]) -> list[str]:
    """Where a score file's recorded pass@k differs from the one recomputed from samples."""
    notes = []
    for (m, s, b), ps in loaded.items():
        if not ps.recorded or not ps.ids:
            continue
        for k, ours in (("1", ps.p1.mean()), ("4", ps.p4.mean())):
            theirs = ps.recorded.get(k)
            if isinstance(theirs, (int, float)) and abs(theirs - ours) > 1e-9:
                model = BASE if s is None else f"{m}-seed{s}"
                notes.append(
                    f"{model} on {b}: score.json records pass@{k} = {theirs:.6f}, the samples "
                    f"give {ours:.6f}; the report uses the samples."
                )
    return notes


def _settings(
    loaded: dict[tuple[str, int | None, str], ProblemScores],
    benchmarks: Sequence[str],
    notes: list[str],
) -> dict[str, dict[str, Any]]:
    """Per benchmark: gradable problems, ungradable ones, responses per problem (from the
    samples) and the distinct decoding settings recorded in the score files."""
    out = {}
    for b in benchmarks:
        scores = [ps for (_, _, bb), ps in loaded.items() if bb == b]
        decodings = []
        for ps in scores:
            if ps.settings is not None and ps.settings not in decodings:
                decodings.append(ps.settings)
        out[b] = {
            "stands_for": STANDS_FOR.get(b),
            "n_problems": sorted({len(ps.ids) for ps in scores}),
            "n_ungradable": sorted({ps.n_ungradable for ps in scores}),
            "n_samples": sorted({n for ps in scores for n in ps.n_samples}),
            "decoding": decodings,
        }
        if len(decodings) > 1:
            notes.append(f"{b}: the models were decoded with different settings: {decodings}.")
        if not decodings and scores:
            notes.append(f"{b}: no score.json with decoding settings was found.")
    return out


# ----------------------------------------------------------------- paper comparisons


def paper_comparisons(
    paper: PaperNumbers, focus: str, baselines: Sequence[str]
) -> dict[str, dict[str, dict[str, float]]]:
    """From the paper's averages table: ``{size: {other: {metric: focus - other}}}`` for
    each baseline, ``"best"`` (the baseline with the highest Total at that size) and base.
    Empty if the paper has no column for ``focus``."""
    a = paper.averages
    if focus not in a.labels:
        return {}
    out: dict[str, dict[str, dict[str, float]]] = {}
    known = [b for b in baselines if b in a.labels]
    for size in a.sizes:
        row: dict[str, dict[str, float]] = {}
        for other in [*known, *([BASE] if BASE in a.labels else [])]:
            row[other] = {m: a.difference(size, focus, other, m) for m in METRICS}
        if known:
            best = max(known, key=lambda b: a.cells[size][b].total)
            row["best"] = {**row[best], "baseline": best}  # type: ignore[dict-item]
        out[size] = row
    return out


def _stated_gain_matches(paper: PaperNumbers, comparisons: dict[str, Any]) -> list[str]:
    """Which differences of the paper's averages table equal its stated gains (to 0.01)."""
    g = paper.gains
    matches = []
    for size, stated in g.per_size.items():
        for other, diffs in comparisons.get(size, {}).items():
            if abs(diffs[g.metric] - stated) <= 0.01:
                matches.append(f"{size}: vs {other} ({diffs[g.metric]:.2f})")
    return matches


# --------------------------------------------------------------------- definitions


def definitions(focus: str, n_benchmarks: int) -> dict[str, str]:
    """What each reported quantity is, in words (printed in report.md and summary.json)."""
    f = label(focus)
    return {
        "pass_at_k": (
            "P@k of a model on a benchmark = mean over the benchmark's gradable problems of the "
            "unbiased pass@k 1 - C(n-c, k) / C(n, k), with n responses of which c are correct, "
            "recomputed from samples.jsonl (a problem with an 'ungradable' verdict is left out)."
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
    }


# ------------------------------------------------------------------------ markdown


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "l") -> str:
    sep = ["---" if i == 0 or align == "l" else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _cell_text(cell: Cell, metric: str, n_seeds: int) -> str:
    if cell.status == "missing":
        return "missing"
    text = cell.scores[metric].text()
    return text if cell.status == "ok" else f"{text} (partial: {len(cell.seeds)}/{n_seeds} seeds)"


def _seeds_text(seeds: Sequence[int | None]) -> str:
    if list(seeds) == [None]:
        return "one model"
    return ", ".join(str(s) for s in seeds) if seeds else "none"


def _n_steps(path: Path) -> int:
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


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


def _sign(x: float) -> str:
    return f"{x:+.2f}"


def render_markdown(report: Report, paper: PaperNumbers) -> str:
    """The text of report.md."""
    r, f = report, label(report.focus)
    defs = definitions(r.focus, len(r.benchmarks))
    if r.preset.startswith("tiny"):
        statement = SCALE_STATEMENT.format(preset=r.preset)
    elif r.preset.startswith("paper-"):
        statement = PAPER_SCALE_STATEMENT.format(preset=r.preset)
    else:
        statement = OTHER_SCALE_STATEMENT.format(preset=r.preset)
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
                + ", ".join(f"seed {k} ({_n_steps(p)} steps)" for k, p in runs.items())
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

    out += ["## Scores per method (percent)", ""]
    out += [f"- {defs[k]}" for k in ("pass_at_k", "total", "mean_std", "average")] + [""]
    for m in r.methods:
        n = len(r.seeds[m])
        out += [f"### {label(m)} (`{m}`; seeds: {_seeds_text(r.seeds[m])})", ""]
        rows = [
            [f"`{b}`", STANDS_FOR.get(b, "–"), *(_cell_text(r.cells[m][b], x, n) for x in METRICS)]
            for b in r.benchmarks
        ]
        avg = r.averages[m]
        if avg is None:
            rows.append(["**average**", "", "no benchmark with results", "", ""])
        else:
            name = f"**average** ({len(avg.benchmarks)} of {len(r.benchmarks)} benchmarks)"
            rows.append([name, "", *(avg.scores[x].text(ci=True) for x in METRICS)])
        out += [_md_table(["benchmark", "stands for", "P@1", "P@4", "Total"], rows), ""]
        if avg is not None and avg.excluded:
            out += [
                f"The average leaves out {', '.join(f'`{b}`' for b in avg.excluded)} "
                "(missing or not from every seed), so it is not comparable with an average over "
                f"all {len(r.benchmarks)} benchmarks.",
                "",
            ]

    out += _markdown_overview(r, paper)
    out += _markdown_gains(r, paper, defs)
    out += _markdown_paper(paper)
    out += ["## Plots", ""]
    for name, path in r.paths.items():
        if name.startswith("plots/"):
            out += [f"![{path.stem}]({name})", ""]
    if not any(k.startswith("plots/") for k in r.paths):
        out += ["No plots (no training metrics and no evaluation results).", ""]
    out += ["## Notes", ""]
    out += [f"- {n}" for n in r.notes] or ["- none"]
    return "\n".join(out) + "\n"


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
            [avg.scores[x].text() for x in METRICS]
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
    for b in compared:
        words = []
        for m, g in r.gains[b].items():
            verdict = "above" if g.average > 0 else ("below: loses" if g.average < 0 else "level")
            words.append(f"{METRIC_LABELS[m]} {_sign(g.average)} ({verdict})")
        out.append(f"- {f} vs {label(b)}, average gain: " + "; ".join(words) + ".")
    out += [
        "",
        "Compare each gain with the std over seeds in the tables above: with a few seeds, a gain "
        "smaller than about two standard deviations is not established.",
        "",
    ]
    return out + _markdown_stated(paper)


def _markdown_stated(paper: PaperNumbers) -> list[str]:
    """The paper's 4.58 and 14.9: what they are, and which of its comparisons they match."""
    g, metric = paper.gains, METRIC_LABELS[paper.gains.metric]
    stated = ", ".join(f"{v:.2f} ({s})" for s, v in g.per_size.items())
    others = [m for m in paper.averages.labels if m not in ("ict", BASE)]
    matches = _stated_gain_matches(paper, paper_comparisons(paper, "ict", others))
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


# ---------------------------------------------------------------- summary, console


def build_summary(r: Report, paper: PaperNumbers, curves: dict[str, Any]) -> dict[str, Any]:
    """Every number of the report, machine-readable (scores in percent, gains in points)."""
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
        "scores": {m: {b: c.to_json() for b, c in per.items()} for m, per in r.cells.items()},
        "averages": {m: None if a is None else a.to_json() for m, a in r.averages.items()},
        "gains": {o: {m: g.to_json() for m, g in per.items()} for o, per in r.gains.items()},
        "paper": paper.to_json(),
        "paper_comparisons": paper_comparisons(paper, r.focus, r.baselines),
        "training_curves": curves,
        "files": sorted(r.paths),
        "notes": r.notes,
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
            cells = [a.scores[x].text() for x in METRICS]
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
