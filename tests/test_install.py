"""Installed outside the checkout, as a new user would: a fresh venv, a non-editable
`pip install .`, and the working directory elsewhere. Nothing may be found through the
checkout: the lm-eval tasks and the paper's numbers ship with the package, and `check`
reads `results/` of the working directory (or `--results`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[1]


def run(args, *, cwd, env, ok=True):
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    output = result.stdout + result.stderr
    if ok:
        assert result.returncode == 0, f"{args}: exit {result.returncode}\n{output[-3000:]}"
    return result.returncode, " ".join(output.split())


@pytest.mark.slow
def test_a_non_editable_install_works_outside_the_checkout(tmp_path):
    # A copy of the sources, so the build's egg-info and build/ stay out of the checkout.
    source = tmp_path / "source"
    shutil.copytree(
        CHECKOUT,
        source,
        ignore=shutil.ignore_patterns(".git", "runs", "build", "*.egg-info", "__pycache__", ".*"),
    )
    env_dir = tmp_path / "venv"
    # The system's packages (torch, transformers, lm-eval, ...) without the network; the
    # checkout's own editable ictrepro is shadowed by the venv's installed copy.
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"PATH": f"{env_dir / 'bin'}:{env['PATH']}", "VIRTUAL_ENV": str(env_dir)}
    env |= {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    # The system's pip and setuptools (visible to the venv) install into the venv.
    pip = [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
    run([*pip, "."], cwd=source, env=env)
    shutil.rmtree(source)  # nothing may be read from the sources any more
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _, where = run(
        [str(python), "-c", "import ictrepro; print(ictrepro.__file__)"], cwd=elsewhere, env=env
    )
    assert str(env_dir) in where, where
    _, tasks = run(
        [
            str(python),
            "-c",
            "from ictrepro.evaluate.lm_eval_bridge import TASKS_DIR as T; print(T)",
        ],
        cwd=elsewhere,
        env=env,
    )
    assert str(env_dir) in tasks and tasks.endswith("ictrepro/tasks"), tasks  # package data

    ictrepro = str(env_dir / "bin" / "ictrepro")
    _, out = run([ictrepro, "methods"], cwd=elsewhere, env=env)
    assert "ict" in out and "grpo" in out
    run(
        [ictrepro, "prepare", "--preset", "tiny-smoke", "--out", "run", "--quiet"],
        cwd=elsewhere,
        env=env,
    )
    run(
        [ictrepro, "eval", "--run", "run", "--harness", "lm-eval", "--workers", "0", "--quiet"],
        cwd=elsewhere,
        env=env,
    )
    assert len(list((elsewhere / "run" / "eval" / "base").glob("*.score.json"))) == 7
    _, out = run(
        [ictrepro, "check", "--results", str(CHECKOUT / "results")], cwd=elsewhere, env=env
    )
    assert "is intact" in out

    # `check` in a directory whose results/ was tampered with fails, naming the file.
    shutil.copytree(CHECKOUT / "results", elsewhere / "results")
    (elsewhere / "results" / "tiny" / "report.md").write_text("edited\n")
    code, out = run([ictrepro, "check"], cwd=elsewhere, env=env, ok=False)
    assert code == 1 and "report.md: modified" in out
