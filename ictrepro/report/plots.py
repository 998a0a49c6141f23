"""The report's plots, drawn from a :class:`~ictrepro.report.tables.Report`'s numbers.

- ``curves-<stem>.png`` per curve of :data:`~ictrepro.report.curves.CURVES`: per method the
  mean over seeds (thick) and each seed (thin); a curve with nothing to draw is not written.
- ``passk-bars.png``: P@1 and P@4 per benchmark, one bar per method (mean over seeds,
  error bar = std over seeds); a missing cell has no bar.
- ``fork-offsets.png`` (the fork world): per method, where its selected tokens lie relative
  to the fork, beside where all response tokens lie.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ictrepro.io import atomic_write_bytes
from ictrepro.report.aggregate import PERCENT
from ictrepro.report.curves import CURVES, FORK_OFFSETS
from ictrepro.report.labels import METRIC_LABELS, label
from ictrepro.report.tables import Report

BARS_PLOT = "passk-bars"
OFFSETS_PLOT = "fork-offsets"


def draw_plots(report: Report, plot_dir: Path) -> dict[str, Path]:
    """Draw every plot into ``plot_dir`` and delete this module's plots of an earlier report
    that were not redrawn. Returns ``{"plots/<file>": path}``, curves first."""
    drawn = [
        *_draw_curves(report, plot_dir),
        _draw_passk_bars(report, plot_dir),
        _draw_fork_offsets(report, plot_dir),
    ]
    paths = {f"plots/{p.name}": p for p in drawn if p is not None}
    ours = {f"curves-{stem}.png" for stem, _, _ in CURVES}
    ours |= {f"{BARS_PLOT}.png", f"{OFFSETS_PLOT}.png"}
    for name in ours - {p.name for p in paths.values()}:
        (plot_dir / name).unlink(missing_ok=True)
    return paths


def _draw_curves(report: Report, plot_dir: Path) -> list[Path]:
    colors = _colors(report.methods)
    paths = []
    for stem, title, keys in CURVES:
        fig = Figure(figsize=(7, 4))
        ax = fig.add_subplot()
        for method in report.training:
            for key, style in keys:
                curve = report.curves.get(key, {}).get(method)
                if curve is None:
                    continue
                for steps, values in curve.per_seed.values():
                    ax.plot(steps, values, style, color=colors[method], lw=0.7, alpha=0.35)
                name = label(method) + ("" if len(keys) == 1 else f" {key.split('_')[1]}")
                ax.plot(curve.steps, curve.mean, style, color=colors[method], lw=2, label=name)
        if ax.lines:
            ax.set(title=title, xlabel="training step")
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
            ax.grid(alpha=0.3)
            paths.append(_png(fig, plot_dir / f"curves-{stem}.png"))
    return paths


def _draw_passk_bars(report: Report, plot_dir: Path) -> Path | None:
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
                    [PERCENT * c.scores[metric].mean for _, c in shown],
                    width,
                    yerr=[PERCENT * c.scores[metric].std for _, c in shown],
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


def _draw_fork_offsets(report: Report, plot_dir: Path) -> Path | None:
    """Per method, where its selected tokens lie relative to the fork (mean over seeds and
    steps), beside where all response tokens lie (what a uniform mask selects)."""

    def mean(key: str, method: str) -> float | None:
        curve = report.curves.get(key, {}).get(method)
        if curve is None or not np.isfinite(curve.mean).any():
            return None
        return float(np.nanmean(curve.mean))

    methods = [m for m in report.training if mean("fork_selected_at", m) is not None]
    if not methods:
        return None
    colors = _colors(report.methods)
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    width = 0.8 / (len(methods) + 1)
    uniform = [mean(f"fork_tokens_{o}", methods[0]) or 0.0 for o in FORK_OFFSETS]
    ax.bar(
        [j - 0.4 + width / 2 for j in range(len(FORK_OFFSETS))],
        [PERCENT * u for u in uniform],
        width,
        color="lightgrey",
        label="all tokens",
    )
    for i, method in enumerate(methods, start=1):
        shares = [mean(f"fork_selected_{o}", method) or 0.0 for o in FORK_OFFSETS]
        ax.bar(
            [j - 0.4 + width / 2 + i * width for j in range(len(FORK_OFFSETS))],
            [PERCENT * v for v in shares],
            width,
            color=colors[method],
            label=label(method),
        )
    names = ["before the fork", "at the fork", "1-3 after", "later"]
    ax.set_xticks(range(len(FORK_OFFSETS)), names)
    ax.set(ylabel="share of selected tokens (%)", title="Where each rule's selected tokens lie")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)
    return _png(fig, plot_dir / f"{OFFSETS_PLOT}.png")


def _png(fig: Any, path: Path) -> Path:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    atomic_write_bytes(path, buf.getvalue())
    return path


def _colors(methods: Sequence[str]) -> dict[str, Any]:
    cmap = colormaps["tab10"]
    return {m: cmap(i % 10) for i, m in enumerate(methods)}
