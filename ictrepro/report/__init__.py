"""The report of a run: tables, gains, plots and summary (``ictrepro report``).

Reads the score records ``RUN/eval/<model>/<benchmark>.score.json`` (``<model>`` is
``base`` or ``<method>-seed<s>``: each problem's sample and correct counts, and the decoding
settings; the samples files beside them are not read) and
``RUN/train/<method>-seed<s>/metrics.jsonl``, and writes to ``RUN/report/``::

    report.md          what was run, tables per method, gains, the paper's numbers, plots
    summary.json       every number of report.md, machine-readable (percent / points)
    plots/*.png        training curves, pass@1 / pass@4 bars

One module per step, each feeding the next:

    load       the run directory's files -> LoadedRun (per-problem pass@k, metrics rows)
    aggregate  per-problem scores over seeds -> Cell, Average (SeedAggregate, fractions)
    gains      focus minus baseline per benchmark -> Gain (percentage points)
    curves     metrics rows -> training curves, mean over seeds
    paper      the same gains from the paper's averages table
    tables     all of the above in one pass -> Report (immutable; score_run)
    plots      Report -> PNG files
    render     Report -> report.md text, summary.json, console tables (percent)
    build      build_report: the steps in order, each file written atomically

The numbers (all in percent; gains in percentage points):

- P@k of a (model, benchmark): the mean over the benchmark's gradable problems of the
  unbiased pass@k, recomputed here from each problem's counts in its score record (a
  problem with an ``ungradable`` gold answer is left out). Never the record's own
  ``pass_at``. Total = (P@1 + P@4) / 2, per problem and hence per benchmark.
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

from ictrepro.report.build import build_report
from ictrepro.report.tables import Report, ReportFiles, score_run

__all__ = ["Report", "ReportFiles", "build_report", "score_run"]
