"""What the pinned results answer: every pinned world's verdicts per claim in one table.

The rows are read from the verdict table ("Verdicts per claim") of each
``results/<preset>/report.md``, the report of the reproduction that was pinned, so the
table holds the pinned reports' own numbers and nothing else. docs/findings.md shows it
(``python -m ictrepro.results.findings``), and ``tests/test_pinned.py`` checks that the
two agree, so the page cannot drift from the pins.
"""

from __future__ import annotations

from pathlib import Path

from ictrepro.results.pinned import RESULTS_DIR, ResultsError

#: The pinned worlds, in the order docs/findings.md discusses them.
WORLDS = (
    "tiny",
    "tiny-fork",
    "tiny-fork0",
    "tiny-fork-rare",
    "tiny-fork-tally",
    "tiny-fork-tally0",
    "tiny-fork-tally-lr10",
    "tiny-fork-tally0-lr10",
)
HEADING = "## Verdicts per claim"
#: The report's columns this table keeps (it leaves out the seeds projection).
COLUMNS = ("claim", "difference [95% interval]", "detectable (80%)", "verdict")


def verdict_rows(report: Path) -> list[dict[str, str]]:
    """The rows of the first table under :data:`HEADING` in ``report``, as column -> cell."""
    if not report.is_file():
        raise ResultsError(
            f"{report}: missing; pin a reproduction of that world (ictrepro check --pin RUN)"
        )
    lines = report.read_text(encoding="utf-8").splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith(HEADING))
    except StopIteration:
        raise ResultsError(
            f"{report}: no '{HEADING}' section; re-pin it from a report of this version"
        ) from None
    table = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("|"):
            table.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif table:
            break
    if len(table) < 3:
        raise ResultsError(f"{report}: the '{HEADING}' section has no table of claims")
    header, rows = table[0], table[2:]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise ResultsError(f"{report}: the table of claims lacks the columns {missing}")
    return [dict(zip(header, row, strict=True)) for row in rows]


def findings_table(results_dir: Path = RESULTS_DIR, worlds: tuple[str, ...] = WORLDS) -> str:
    """One markdown table: each world's claims, their differences and verdicts (points)."""
    out = [
        "| world | " + " | ".join(COLUMNS) + " |",
        "| --- | " + " | ".join("---" for _ in COLUMNS) + " |",
    ]
    for world in worlds:
        for row in verdict_rows(Path(results_dir) / world / "report.md"):
            out.append(f"| `{world}` | " + " | ".join(row[c] for c in COLUMNS) + " |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(findings_table(), end="")
