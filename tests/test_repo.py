"""Repository wiring: CI runs exactly the README's test command."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Test", 1)[1]
    command = re.search(r"```(?:bash|sh)?\n(.+?)\n```", section, re.S).group(1).strip()
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert command in ci_lines, f"README test command {command!r} is not a line of .ci/run"


def test_every_timing_script_named_in_the_docs_exists():
    """The timing scripts live in bench/ (not benchmarks/, which reads as
    ``ictrepro/data/benchmarks.py``); every `bench/NAME.py` the docs or nox name exists."""
    texts = [ROOT / "README.md", ROOT / "noxfile.py", *sorted((ROOT / "docs").glob("*.md"))]
    named = {m for p in texts for m in re.findall(r"\bbench/\w+\.py", p.read_text())}
    assert "bench/token_stats.py" in named  # the nox `bench` session
    assert sorted(n for n in named if not (ROOT / n).is_file()) == []
    stale = [p.name for p in texts if re.search(r"(?<![\w/])benchmarks/\w+\.py", p.read_text())]
    assert stale == [], f"{stale} still name the old benchmarks/ folder"


def test_every_package_is_listed_for_the_wheel():
    """pyproject lists the packages (tasks/ is mapped to ``ictrepro.tasks``): a new
    subpackage missing from the list would be missing from every non-editable install."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {
        ".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "ictrepro").rglob("__init__.py")
    }
    assert config["package-dir"] == {"ictrepro.tasks": "tasks"}
    assert (ROOT / "tasks" / "__init__.py").is_file()
    assert sorted(config["packages"]) == sorted(on_disk | {"ictrepro.tasks"})
