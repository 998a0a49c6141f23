"""``build_report`` under the import path that ``cli.py``, ``stages/compare.py`` and
``stages/reproduce.py`` use; the report itself is :mod:`ictrepro.report`. Remove this
module once they import ``from ictrepro.report import build_report``."""

from ictrepro.report import build_report

__all__ = ["build_report"]
