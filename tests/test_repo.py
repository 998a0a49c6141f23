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


def _current_texts() -> list[Path]:
    """README, nox and the docs and study notes as they stand now. Left out: CHANGELOG (its
    entries keep the paths of their day) and docs/plans/ (a plan is fixed, and hashed, before
    its run)."""
    docs = [p for p in sorted((ROOT / "docs").rglob("*.md")) if "plans" not in p.parts]
    return [
        ROOT / "README.md",
        ROOT / "noxfile.py",
        *docs,
        *sorted((ROOT / "studies").rglob("*.md")),
    ]


def test_every_timing_script_named_in_the_docs_exists():
    """The timing scripts live in bench/ (not benchmarks/, which reads as
    ``ictrepro/data/benchmarks.py``); every `bench/NAME.py` the docs or nox name exists."""
    texts = _current_texts()
    named = {m for p in texts for m in re.findall(r"\bbench/\w+\.py", p.read_text())}
    assert "bench/token_stats.py" in named  # the nox `bench` session
    assert sorted(n for n in named if not (ROOT / n).is_file()) == []
    stale = [p.name for p in texts if re.search(r"(?<![\w/])benchmarks/\w+\.py", p.read_text())]
    assert stale == [], f"{stale} still name the old benchmarks/ folder"


def test_every_study_script_named_in_the_docs_exists():
    """Investigations of a world live in studies/<line>/; every script the docs, the code
    or the study notes name there exists (a path that names a folder a line once had fails)."""
    texts = [*_current_texts(), *sorted((ROOT / "ictrepro").rglob("*.py"))]
    pattern = r"\bstudies/[a-z]\w*/[a-z]\w*\.(?:py|sh)"  # not placeholders (NAME.py)
    named = {m for p in texts for m in re.findall(pattern, p.read_text())}
    assert "studies/fork/fork_js_alignment.py" in named
    assert sorted(n for n in named if not (ROOT / n).is_file()) == []


def test_every_study_line_has_a_readme_naming_its_scripts():
    """Each studies/<line>/ says what its scripts measured, and studies/README.md lists the line."""
    index = (ROOT / "studies" / "README.md").read_text()
    lines = sorted(
        p for p in (ROOT / "studies").iterdir() if p.is_dir() and not p.name.startswith((".", "_"))
    )
    assert [p.name for p in lines] != []
    for line in lines:
        assert f"`{line.name}/`" in index, f"studies/README.md does not list {line.name}/"
        readme = (line / "README.md").read_text()
        scripts = sorted(p.name for p in line.iterdir() if p.suffix in (".py", ".sh"))
        missing = [name for name in scripts if f"`{name}`" not in readme]
        assert missing == [], f"studies/{line.name}/README.md does not name {missing}"


def test_bench_holds_no_study_of_a_world():
    """bench/ keeps timing, memory, throughput and power tooling; the scripts that
    investigated a world moved to studies/ and must not come back beside a copy there."""
    bench = {p.name for p in (ROOT / "bench").iterdir()}
    studied = {p.name for p in (ROOT / "studies").rglob("*.py")}
    assert sorted(bench & studied) == []
    assert sorted(n for n in bench if n.startswith(("fork_", "rare_", "tally_"))) == []


def test_every_relative_markdown_link_resolves():
    """Every relative link of the README, the changelog, the docs and the study notes names a
    file or folder that exists (a moved or removed document leaves no dead link)."""
    pages = [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted((ROOT / "studies").rglob("*.md")),
    ]
    dead = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            if not (page.parent / target).exists():
                dead.append(f"{page.relative_to(ROOT)}: {target}")
    assert dead == []


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
