"""``ictrepro reproduce``: every stage of a preset in order, resuming where it stopped.

    prepare -> train (every method x every seed) -> eval (base + every trained model) -> report

Each stage skips what is already done with unchanged inputs (the stages' own records and
hashes decide), so re-running after an interruption continues with the first unfinished
piece and loses nothing that was finished. Training runs that were cut short resume from
their last checkpoint.

``--jobs 2`` trains two runs at a time, and evaluates two sets of models at a time, in
separate processes of one thread each (on two cores that is faster than one process with
two threads); the numbers depend on the thread count, so a reproduction states the
``jobs`` it was made with.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from ictrepro.config import EVAL_SUITES, PREPARE_PRESETS, TRAIN_PRESETS, train_preset

#: The methods of the paper's comparison and the paper's random-10% control.
DEFAULT_METHODS = ("grpo", "entropy", "stapo", "ict", "random")
DEFAULT_SEEDS = (0, 1, 2)


@dataclass(frozen=True)
class Plan:
    """What a reproduction runs: the stages, the training runs and the samples drawn."""

    preset: str
    run_dir: Path
    methods: tuple[str, ...]
    seeds: tuple[int, ...]
    benchmarks: tuple[str, ...]
    train_runs: tuple[tuple[str, int], ...] = field(default=())

    def describe(self) -> list[str]:
        """Human-readable lines: stages, runs, and how many responses each stage samples."""
        config = train_preset(self.preset, method=self.methods[0])
        rl = config.rl
        per_run = rl.steps * rl.prompts_per_step * rl.group_size
        lines = [
            f"preset {self.preset} -> {self.run_dir}",
            "1. prepare: data, tokenizer, warm-started base model, calibration"
            if self.preset in PREPARE_PRESETS
            else f"1. prepare: NOT AVAILABLE for {self.preset} (paper-scale prepare is not built)",
            f"2. train: {len(self.train_runs)} runs ({len(self.methods)} methods x "
            f"{len(self.seeds)} seeds), each {rl.steps} steps x {rl.prompts_per_step} prompts x "
            f"G={rl.group_size} = {per_run:,} sampled responses of <= {rl.max_new_tokens} tokens",
        ]
        for method, seed in self.train_runs:
            lines.append(f"   - {method} seed {seed}")
        models = 1 + len(self.train_runs)
        eval_line = f"3. eval: {models} models (base + trained) x {len(self.benchmarks)} benchmarks"
        samples = _eval_samples(self.preset, self.benchmarks)
        if samples is not None:
            eval_line += f" = {models * samples:,} sampled responses ({samples:,} per model)"
        lines += [eval_line, f"   benchmarks: {', '.join(self.benchmarks)}", "4. report"]
        return lines


def _eval_samples(preset: str, benchmarks: Sequence[str]) -> int | None:
    """Responses one model's evaluation samples (None when the sizes are not known here)."""
    from ictrepro.config import prepare_preset
    from ictrepro.stages.eval import TINY_SETTINGS

    if preset in PREPARE_PRESETS:
        n_test = prepare_preset(preset).data.n_test
        return sum(n_test * TINY_SETTINGS.n for b in benchmarks if b in EVAL_SUITES)
    from ictrepro.data.benchmarks import BENCHMARKS

    return sum(BENCHMARKS[b].size * BENCHMARKS[b].n for b in benchmarks)


def make_plan(
    preset: str,
    run_dir: Path,
    *,
    methods: Sequence[str] = DEFAULT_METHODS,
    seeds: Sequence[int] = DEFAULT_SEEDS,
) -> Plan:
    """The plan of a reproduction; unknown presets and methods list the valid ones."""
    if preset not in TRAIN_PRESETS:
        raise KeyError(f"unknown preset {preset!r}; valid: {', '.join(TRAIN_PRESETS)}")
    for method in methods:
        train_preset(preset, method=method)  # raises on an unknown method
    if not seeds:
        raise ValueError("no seeds given")
    if preset in PREPARE_PRESETS:
        benchmarks: tuple[str, ...] = EVAL_SUITES
    else:
        from ictrepro.data.benchmarks import PAPER_BENCHMARKS

        benchmarks = tuple(PAPER_BENCHMARKS)
    runs = tuple((m, s) for s in seeds for m in methods)
    return Plan(preset, Path(run_dir), tuple(methods), tuple(seeds), benchmarks, runs)


def reproduce(
    plan: Plan,
    *,
    jobs: int = 1,
    show_progress: bool = True,
    console: Console | None = None,
    method_module: Path | None = None,
    report: bool = True,
) -> dict[str, Any]:
    """Run every stage of ``plan``; returns the wall time of each stage (seconds).

    ``method_module``: a user's file registering a method of the plan (loaded here and by
    every training process). ``report=False`` stops after the evaluation.
    """
    from ictrepro.config import prepare_preset
    from ictrepro.stages.eval import evaluate_run
    from ictrepro.stages.prepare import prepare

    console = console or Console(quiet=not show_progress)
    if plan.preset not in PREPARE_PRESETS:
        raise NotImplementedError(
            f"reproduce --preset {plan.preset}: the paper-scale prepare stage (downloading "
            "Qwen2.5 and the benchmarks onto a GPU machine) is not built yet; use --dry-run to "
            "see the plan, or run `ictrepro train` / `ictrepro eval` with --set model=... and "
            "--set train_data=..."
        )
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    times: dict[str, Any] = {}
    total = 3 + len(plan.train_runs)
    done = 0

    def header(text: str) -> None:
        console.rule(f"[bold][{done}/{total}] {text}")

    start = time.perf_counter()
    header("prepare")
    prepare(prepare_preset(plan.preset), plan.run_dir, show_progress=show_progress, console=console)
    times["prepare_s"] = time.perf_counter() - start
    done += 1

    t = time.perf_counter()
    if jobs == 1:
        from ictrepro.stages.train import train

        for method, seed in plan.train_runs:
            header(f"train {method} seed {seed}")
            config = train_preset(plan.preset, method=method, seed=seed)
            train(
                config,
                plan.run_dir,
                resume=True,
                show_progress=show_progress,
                console=console,
                method_module=method_module,
            )
            done += 1
    else:
        header(f"train {len(plan.train_runs)} runs, {jobs} at a time")
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for (method, seed), rc in zip(
                plan.train_runs,
                pool.map(lambda r: _train_in_subprocess(plan, *r, method_module), plan.train_runs),
                strict=True,
            ):
                done += 1
                status = "[green]done[/]" if rc == 0 else f"[red]failed (exit {rc})[/]"
                console.print(f"[{done}/{total}] train {method} seed {seed}: {status}")
                if rc != 0:
                    raise RuntimeError(
                        f"training {method} seed {seed} failed (exit {rc}); see "
                        f"{log_file(plan.run_dir, method, seed)}; re-run reproduce to resume"
                    )
    times["train_s"] = time.perf_counter() - t

    t = time.perf_counter()
    header("eval")
    if jobs == 1:
        evaluate_run(plan.run_dir, show_progress=show_progress, console=console)
    else:
        _evaluate_in_subprocesses(plan, jobs, console)
    times["eval_s"] = time.perf_counter() - t
    done += 1

    if report:
        t = time.perf_counter()
        header("report")
        _report(plan.run_dir, console)
        times["report_s"] = time.perf_counter() - t
    times["total_s"] = time.perf_counter() - start
    done += 1
    console.rule(f"[bold green]reproduce: done in {times['total_s']:.0f} s -> {plan.run_dir}")
    return times


def _evaluate_in_subprocesses(plan: Plan, jobs: int, console: Console) -> None:
    """``ictrepro eval`` over ``jobs`` disjoint sets of models, one thread each (grading in
    process), then one in-process pass that finds everything current and prints the table."""
    from ictrepro.stages.eval import evaluate_run, run_models

    models = list(run_models(plan.run_dir))
    shares = [models[i::jobs] for i in range(jobs)]
    logs = plan.run_dir / "logs"

    def run(index: int) -> int:
        args = ["eval", "--run", str(plan.run_dir), "--models", ",".join(shares[index])]
        return _run_cli([*args, "--workers", "0", "--quiet"], logs / f"eval-{index}.log")

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        codes = list(pool.map(run, [i for i, share in enumerate(shares) if share]))
    if any(codes):
        raise RuntimeError(
            f"evaluation failed (exit codes {codes}); see {logs}/eval-*.log; re-run to resume"
        )
    evaluate_run(plan.run_dir, show_progress=False, console=console)


def log_file(run_dir: Path, method: str, seed: int) -> Path:
    return run_dir / "logs" / f"train-{method}-seed{seed}.log"


def _train_in_subprocess(
    plan: Plan, method: str, seed: int, method_module: Path | None = None
) -> int:
    """``ictrepro train ... --resume`` in a process of one thread; its output goes to
    ``RUN/logs/`` (not into the run's folder, which the train stage keeps to itself)."""
    args = [
        "train", "--method", method, "--preset", plan.preset, "--seed", str(seed),
        "--run", str(plan.run_dir), "--resume", "--quiet",
    ]  # fmt: skip
    if method_module is not None:
        args += ["--method-module", str(method_module)]
    return _run_cli(args, log_file(plan.run_dir, method, seed))


def _run_cli(args: list[str], log_path: Path) -> int:
    """``ictrepro ARGS`` in a process of one thread, its output to ``log_path``; exit code."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "ictrepro.cli", *args]
    with log_path.open("w", encoding="utf-8") as log:
        return subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT).returncode


def _report(run_dir: Path, console: Console) -> None:
    try:
        from ictrepro.results.report import build_report
    except ImportError:
        console.print("report: not available in this version")
        return
    build_report(run_dir, console=console)
