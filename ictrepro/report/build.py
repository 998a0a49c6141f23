"""``ictrepro report``: score a run, draw its plots, write report.md and summary.json."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from ictrepro.io import atomic_write_text
from ictrepro.report.plots import draw_plots
from ictrepro.report.render import build_summary, console_tables, render_markdown
from ictrepro.report.tables import Report, ReportFiles, score_run
from ictrepro.results.paper import load_paper


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
    """Score ``run_dir`` (:func:`~ictrepro.report.tables.score_run`) and write report.md,
    summary.json and the plots to ``out_dir`` (default ``RUN/report/``), each file
    atomically; print the averages and gains to ``console``. Returns the report with its
    ``files``.

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
    out = Path(out_dir) if out_dir is not None else report.run_dir / "report"
    plots = draw_plots(report, out / "plots")
    paths = {"report.md": out / "report.md", "summary.json": out / "summary.json", **plots}
    markdown = render_markdown(report, paper, plots)
    summary = build_summary(report, paper, files=list(paths))
    atomic_write_text(paths["report.md"], markdown)
    text = json.dumps(summary, indent=2, sort_keys=True, allow_nan=False)
    atomic_write_text(paths["summary.json"], text + "\n")
    console = console or Console()
    for table in console_tables(report):
        console.print(table)
    console.print(f"report: {paths['report.md']}")
    return dataclasses.replace(report, files=ReportFiles(out, paths, markdown, summary))
