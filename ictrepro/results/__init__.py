"""Results: the paper's reported numbers (:mod:`.paper`) and the report of a run
(:mod:`.report`: tables, gains, plots and summary.json)."""

from ictrepro.results.paper import PaperDataError, PaperNumbers, load_paper
from ictrepro.results.report import Report, build_report

__all__ = ["PaperDataError", "PaperNumbers", "Report", "build_report", "load_paper"]
