"""What the pinned results answer: the confirmatory analysis of the world with a plan,
then every pinned world's verdicts per claim in one table.

The rows are read from the pinned reports (``results/<preset>/report.md``, the report of
the reproduction that was pinned): the "Confirmatory analysis" of each run bound to a
plan (``tiny-lock-replication``, then ``tiny-lock``) and each world's "Verdicts per claim", so the tables hold the pinned reports' own numbers and
nothing else. docs/findings.md shows it
(``python -m ictrepro.results.findings``), and ``tests/test_pinned.py`` checks that the
two agree, so the page cannot drift from the pins.
"""

from __future__ import annotations

from pathlib import Path

from ictrepro.results.pinned import RESULTS_DIR, ResultsError

#: The pinned worlds, in the order docs/findings.md discusses them.
WORLDS = (
    "tiny-lock-replication",
    "tiny-lock",
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
#: The runs whose plans fixed their analysis before they ran (the decisive one first), and
#: that analysis's section.
CONFIRMATORY_WORLDS = ("tiny-lock-replication", "tiny-lock")
CONFIRMATORY_HEADING = "## Confirmatory analysis"
#: The report's columns this table keeps (it leaves out the seeds projection).
COLUMNS = ("claim", "difference [95% interval]", "detectable (80%)", "verdict")


def verdict_rows(
    report: Path, heading: str = HEADING, required: tuple[str, ...] = COLUMNS
) -> list[dict[str, str]]:
    """The rows of the first table under ``heading`` in ``report``, as column -> cell; the
    table must have the ``required`` columns."""
    if not report.is_file():
        raise ResultsError(
            f"{report}: missing; pin a reproduction of that world (ictrepro check --pin RUN)"
        )
    lines = report.read_text(encoding="utf-8").splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    except StopIteration:
        raise ResultsError(
            f"{report}: no '{heading}' section; re-pin it from a report of this version"
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
        raise ResultsError(f"{report}: the '{heading}' section has no table")
    header, rows = table[0], table[2:]
    missing = [c for c in required if c not in header]
    if missing:
        raise ResultsError(f"{report}: the table under '{heading}' lacks the columns {missing}")
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


def confirmatory_table(results_dir: Path = RESULTS_DIR, world: str = CONFIRMATORY_WORLDS[0]) -> str:
    """The pinned confirmatory analysis of ``world``, as its report gives it."""
    rows = verdict_rows(Path(results_dir) / world / "report.md", CONFIRMATORY_HEADING, ())
    header = list(rows[0])
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    out += ["| " + " | ".join(row[c] for c in header) + " |" for row in rows]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    for world in CONFIRMATORY_WORLDS:
        print(f"<!-- confirmatory:{world}:begin -->")
        print(confirmatory_table(world=world), end="")
        print(f"<!-- confirmatory:{world}:end -->\n")
    print(findings_table(), end="")
