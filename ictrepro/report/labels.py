"""How the report names methods, benchmarks and metrics. The names live in their registries:
a method's in its selection rule (``register_selection(..., label=...)``), a benchmark's in
the benchmark and suite registries (:func:`ictrepro.data.suites.stands_for`)."""

from __future__ import annotations

from ictrepro.algos.selection import available_selections
from ictrepro.data.suites import stands_for
from ictrepro.report.load import BASE

METRIC_LABELS = {"p1": "P@1", "p4": "P@4", "total": "Total"}

__all__ = ["METRIC_LABELS", "label", "stands_for"]


def label(method: str) -> str:
    """A method's name in tables: its rule's label, "Base" for the model before RL, or the
    name itself for a method no rule is registered under in this process."""
    if method == BASE:
        return "Base"
    rule = available_selections().get(method)
    return rule.label if rule is not None else method
