"""The paper's reported numbers, loaded from ``ictrepro/results/paper_numbers/*.json`` and
validated.

They are fixed reference data, not results of this project, so they ship inside the package
(package data): ``ictrepro report`` finds them wherever the package is installed, and
``results/`` holds only the project's own pinned results.

Three files, each with a ``source`` field (arXiv id, which table, caveats):

- ``averages.json``: P@1 / P@4 / Total averaged over the seven benchmarks, per model size
  (0.5B, 1.5B, 7B) and method (Base, GRPO, 20-Entropy, STAPO, ICT), in percent. Two 7B
  Totals are not the mean of their P@1 and P@4; they are listed in ``inconsistent_totals``
  and every other Total must equal (P@1 + P@4) / 2 to rounding.
- ``gains.json``: the P@4 gains the paper states per size (4.37 / 4.98 / 4.38), their
  mean (the headline 4.58), and the maximum 14.9 whose (size, benchmark) cell is unknown.
- ``ablation.json``: Qwen2.5-1.5B on GSM8K, P@1 / P@4 per variant.

A malformed file raises :class:`PaperDataError` naming the file and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ictrepro.errors import DataError

#: The paper's numbers, shipped as package data.
PAPER_DIR = Path(__file__).resolve().parent / "paper_numbers"
METRICS = ("p1", "p4", "total")
#: Rounding slack when checking Total = (P@1 + P@4) / 2 and the headline mean.
_TOLERANCE = 0.0051


class PaperDataError(DataError):
    """A paper data file is missing, not JSON, or has a bad field."""


@dataclass(frozen=True)
class PaperCell:
    """One (size, method) cell of the averages table, in percent."""

    p1: float
    p4: float
    total: float

    def get(self, metric: str) -> float:
        return {"p1": self.p1, "p4": self.p4, "total": self.total}[metric]


@dataclass(frozen=True)
class PaperAverages:
    """The averages table: ``cells[size][method]``; methods keyed by ictrepro's names."""

    source: dict[str, Any]
    benchmarks: tuple[str, ...]
    labels: dict[str, str]  # {"grpo": "GRPO", ...}
    cells: dict[str, dict[str, PaperCell]]
    inconsistent_totals: frozenset[tuple[str, str]]  # {(size, method)}

    @property
    def sizes(self) -> tuple[str, ...]:
        return tuple(self.cells)

    def difference(self, size: str, focus: str, other: str, metric: str) -> float:
        """``focus`` minus ``other`` on the average ``metric`` at ``size``, in points.

        Both averages are over the same seven benchmarks, so this is also the mean over the
        benchmarks of the per-benchmark differences (up to the table's rounding)."""
        row = self.cells[size]
        return row[focus].get(metric) - row[other].get(metric)


@dataclass(frozen=True)
class PaperGains:
    """Gains stated in the paper's text (points). ``max_cell`` is None: never identified."""

    source: dict[str, Any]
    metric: str
    per_size: dict[str, float]
    headline_mean: float
    max_value: float
    max_cell: str | None


@dataclass(frozen=True)
class AblationRow:
    name: str
    p1: float
    p4: float | None  # not reported for every variant


@dataclass(frozen=True)
class PaperAblation:
    source: dict[str, Any]
    model: str
    benchmark: str
    rows: tuple[AblationRow, ...]


@dataclass(frozen=True)
class PaperNumbers:
    averages: PaperAverages
    gains: PaperGains
    ablation: PaperAblation

    def to_json(self) -> dict[str, Any]:
        a, g, b = self.averages, self.gains, self.ablation
        return {
            "averages": {
                "source": a.source,
                "unit": "percent",
                "labels": a.labels,
                "sizes": {
                    s: {m: {k: c.get(k) for k in METRICS} for m, c in row.items()}
                    for s, row in a.cells.items()
                },
                "inconsistent_totals": sorted(list(x) for x in a.inconsistent_totals),
            },
            "gains": {
                "source": g.source,
                "unit": "points",
                "metric": g.metric,
                "per_size": g.per_size,
                "headline_mean": g.headline_mean,
                "max_gain": {"value": g.max_value, "cell": g.max_cell},
            },
            "ablation": {
                "source": b.source,
                "unit": "percent",
                "model": b.model,
                "benchmark": b.benchmark,
                "rows": [{"name": r.name, "p1": r.p1, "p4": r.p4} for r in b.rows],
            },
        }


# ------------------------------------------------------------------------- reading


class _Reader:
    """Field access that names the file and the dotted field in every error."""

    def __init__(self, path: Path):
        self.path = path
        if not path.is_file():
            raise PaperDataError(f"{path}: paper data file not found")
        try:
            self.data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise PaperDataError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
        if not isinstance(self.data, dict):
            raise PaperDataError(f"{path}: expected a JSON object at the top level")

    def fail(self, field: str, problem: str) -> PaperDataError:
        return PaperDataError(f"{self.path}: field {field!r}: {problem}")

    def get(self, obj: Any, key: str, field: str, kind: type | tuple[type, ...]) -> Any:
        if not isinstance(obj, dict) or key not in obj:
            raise self.fail(field, "missing")
        value = obj[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise self.fail(field, f"expected {_kind_name(kind)}, got {value!r}")
        return value

    def percent(self, obj: Any, key: str, field: str, *, nullable: bool = False) -> float | None:
        if nullable and isinstance(obj, dict) and obj.get(key, 0) is None:
            return None
        value = float(self.get(obj, key, field, (int, float)))
        if not 0.0 <= value <= 100.0:
            raise self.fail(field, f"expected a number in [0, 100], got {value!r}")
        return value

    def source(self) -> dict[str, Any]:
        source = self.get(self.data, "source", "source", dict)
        for key in ("paper", "arxiv", "table"):
            self.get(source, key, f"source.{key}", str)
        caveats = self.get(source, "caveats", "source.caveats", list)
        if not all(isinstance(c, str) for c in caveats):
            raise self.fail("source.caveats", "expected a list of strings")
        return source


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {int: "a number", float: "a number", str: "a string", dict: "an object", list: "a list"}
    return " or ".join(sorted({names.get(k, k.__name__) for k in kinds}))


def load_averages(path: Path) -> PaperAverages:
    r = _Reader(path)
    source = r.source()
    benchmarks = r.get(r.data, "benchmarks", "benchmarks", list)
    labels = r.get(r.data, "methods", "methods", dict)
    sizes = r.get(r.data, "sizes", "sizes", dict)
    flagged = set()
    for i, item in enumerate(r.get(r.data, "inconsistent_totals", "inconsistent_totals", list)):
        size = r.get(item, "size", f"inconsistent_totals[{i}].size", str)
        method = r.get(item, "method", f"inconsistent_totals[{i}].method", str)
        flagged.add((size, method))
    cells: dict[str, dict[str, PaperCell]] = {}
    for size, row in sizes.items():
        r.get(sizes, size, f"sizes.{size}", dict)
        cells[size] = {}
        for method in labels:
            where = f"sizes.{size}.{method}"
            cell_json = r.get(row, method, where, dict)
            cell = PaperCell(*(r.percent(cell_json, k, f"{where}.{k}") for k in METRICS))
            off = abs(cell.total - (cell.p1 + cell.p4) / 2) > _TOLERANCE
            if off and (size, method) not in flagged:
                raise r.fail(
                    f"{where}.total",
                    f"{cell.total} is not (p1 + p4) / 2 = {(cell.p1 + cell.p4) / 2:.3f}; fix "
                    "the transcription or list the cell in 'inconsistent_totals'",
                )
            if not off and (size, method) in flagged:
                raise r.fail(
                    "inconsistent_totals",
                    f"{size} {method} is listed but its Total equals (p1 + p4) / 2; remove it",
                )
            cells[size][method] = cell
    unknown = {f for f in flagged if f[0] not in cells or f[1] not in labels}
    if unknown:
        raise r.fail("inconsistent_totals", f"unknown (size, method) {sorted(unknown)}")
    return PaperAverages(source, tuple(benchmarks), dict(labels), cells, frozenset(flagged))


def load_gains(path: Path) -> PaperGains:
    r = _Reader(path)
    source = r.source()
    metric = r.get(r.data, "metric", "metric", str)
    if metric not in METRICS:
        raise r.fail("metric", f"expected one of {', '.join(METRICS)}, got {metric!r}")
    per_size_json = r.get(r.data, "per_size", "per_size", dict)
    if not per_size_json:
        raise r.fail("per_size", "empty")
    per_size = {s: r.percent(per_size_json, s, f"per_size.{s}") for s in per_size_json}
    headline = r.percent(r.data, "headline_mean", "headline_mean")
    mean = sum(per_size.values()) / len(per_size)
    if abs(mean - headline) > _TOLERANCE:
        raise r.fail("headline_mean", f"{headline} is not the mean of per_size ({mean:.4f})")
    max_json = r.get(r.data, "max_gain", "max_gain", dict)
    max_value = r.percent(max_json, "value", "max_gain.value")
    cell = max_json.get("cell")
    if cell is not None and not isinstance(cell, str):
        raise r.fail("max_gain.cell", f"expected a string or null, got {cell!r}")
    return PaperGains(source, metric, per_size, headline, max_value, cell)


def load_ablation(path: Path) -> PaperAblation:
    r = _Reader(path)
    source = r.source()
    model = r.get(r.data, "model", "model", str)
    benchmark = r.get(r.data, "benchmark", "benchmark", str)
    rows = []
    for i, row in enumerate(r.get(r.data, "rows", "rows", list)):
        name = r.get(row, "name", f"rows[{i}].name", str)
        p1 = r.percent(row, "p1", f"rows[{i}].p1")
        p4 = r.percent(row, "p4", f"rows[{i}].p4", nullable=True)
        rows.append(AblationRow(name, p1, p4))
    return PaperAblation(source, model, benchmark, tuple(rows))


def load_paper(paper_dir: Path | str | None = None) -> PaperNumbers:
    """The paper's numbers from ``paper_dir`` (default: the package's, :data:`PAPER_DIR`),
    validated."""
    root = Path(paper_dir) if paper_dir is not None else PAPER_DIR
    averages = load_averages(root / "averages.json")
    gains = load_gains(root / "gains.json")
    unknown = set(gains.per_size) - set(averages.sizes)
    if unknown:
        raise PaperDataError(
            f"{root / 'gains.json'}: field 'per_size': sizes {sorted(unknown)} are not in "
            f"averages.json ({', '.join(averages.sizes)})"
        )
    return PaperNumbers(averages, gains, load_ablation(root / "ablation.json"))
