"""Results: the paper's reported numbers (:mod:`.paper`) and the pinned results of a
reproduction with their checks (:mod:`.pinned`). The report of a run is
:mod:`ictrepro.report`."""

from ictrepro.results.paper import PaperDataError, PaperNumbers, load_paper

__all__ = ["PaperDataError", "PaperNumbers", "load_paper"]
