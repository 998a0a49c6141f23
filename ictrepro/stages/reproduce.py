"""``ictrepro reproduce``: every stage of a preset in order, resuming where it stopped.

    prepare -> train (every method x every seed) -> eval (base + every trained model) -> report

Each stage skips what is already done with unchanged inputs (the stages' own records and
hashes decide), so re-running after an interruption continues with the first unfinished
piece and loses nothing that was finished. Training runs that were cut short resume from
their last checkpoint.

With ``jobs > 1`` (the command line's default is 2), training runs and evaluations are
tasks of ``jobs`` long-lived worker processes of one thread each: on two cores that is
faster than one process of two threads, each model is evaluated as soon as its training
finished, and the imports are paid once per worker. The numbers depend on the thread
count, so ``RUN/reproduce.json`` records the ``jobs`` (and each stage's wall time).

A paper preset (``paper-*``) on a machine with GPUs runs the paper's way instead
(``stages.launch``): each training run is an ``accelerate launch`` across the GPUs in bf16
with the vLLM sampler, then one ``ictrepro eval --backend vllm`` process evaluates every
model, one engine at a time. Without a GPU such a preset is refused unless forced to the CPU.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from ictrepro.config import PretrainedPrepareConfig
from ictrepro.data.benchmarks import BENCHMARKS
from ictrepro.errors import ConfigError, IctreproError
from ictrepro.io import atomic_write_json, sha256_file
from ictrepro.presets import CHECKOUT, get_preset, prepare_preset, train_preset
from ictrepro.progress import progress_bar
from ictrepro.results.worlds import world_dir
from ictrepro.rundir import BASE, ModelId, RunDir
from ictrepro.stages.launch import LaunchPlan, Machine, NoAcceleratorError, plan_launch

#: Worker processes of the command line's reproduction: one per core of a 2-core laptop.
#: Every task runs on one thread whatever the count (the command line's pinned numerics, and
#: ``_init_worker``), so the results do not depend on it: more workers on more cores only
#: finish sooner (tests/test_reproduce.py).
DEFAULT_JOBS = 2

# The command line imports this module to answer at once (`ictrepro --help`, a bad option),
# so the stages that load torch or transformers are imported inside the functions using them.


@dataclass(frozen=True)
class Plan:
    """What a reproduction runs: the stages, the training runs and the samples drawn."""

    preset: str
    run_dir: Path
    methods: tuple[str, ...]
    seeds: tuple[int, ...]
    benchmarks: tuple[str, ...]
    train_runs: tuple[tuple[str, int], ...] = field(default=())
    #: ``prepare_preset`` options of a pretrained-model preset (``model``, ``data_dir``, ...).
    prepare_options: dict[str, Any] = field(default_factory=dict)
    #: How the runs are started (``stages.launch``); None where this machine refuses the
    #: preset, with the reason in ``refusal``.
    launch: LaunchPlan | None = None
    refusal: str | None = None

    def prepare_config(self) -> Any:
        return prepare_preset(self.preset, **self.prepare_options)

    def describe(self) -> list[str]:
        """Human-readable lines: stages, runs, and how many responses each stage samples."""
        preset = get_preset(self.preset)
        rl = train_preset(self.preset, method=self.methods[0]).rl
        per_run = rl.steps * rl.prompts_per_step * rl.group_size
        lines = [f"preset {self.preset} -> {self.run_dir}", *self._describe_prepare(preset)]
        lines += [
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
        if self.refusal is not None:
            lines.append(f"launch: refused on this machine: {self.refusal}")
        elif self.launch is not None:
            lines += self.launch.describe(self.run_dir, self.train_runs[0])
        return lines

    def _describe_prepare(self, preset: Any) -> list[str]:
        if not isinstance(preset.prepare, PretrainedPrepareConfig):
            world = world_dir(preset.prepare.preset)
            base = (
                f"the base model shipped in {world} (hash-checked; --warm-start trains it)"
                if (world / "world.json").is_file()
                else "tokenizer and warm-started base model (no shipped one in results/worlds/)"
            )
            return [f"1. prepare: data, {base}, calibration"]
        from ictrepro.stages.prepare_pretrained import deviations  # torch: see above

        config = self.prepare_config()
        source = config.data_dir or "the Hugging Face hub"
        data = [
            *config.train_sets,
            *([] if config.task is None else [f"{config.task} (generated)"]),
        ]
        lines = [
            f"1. prepare: base model {config.model} ({config.dtype}) -> RUN/base_model; "
            f"RL data {' + '.join(data)}; benchmarks from {source}"
        ]
        lines += [f"   deviation from the paper: {note}" for note in deviations(config)]
        return lines


def _eval_samples(preset: str, benchmarks: Sequence[str]) -> int | None:
    """Responses one model's evaluation samples (None when the sizes are not known here)."""
    spec = get_preset(preset)
    if isinstance(spec.prepare, PretrainedPrepareConfig):
        limits = dict(spec.prepare.eval_limits)
        sampling = spec.prepare.eval_sampling
        task = spec.prepare.task
        task_samples = 0
        if task is not None and task in benchmarks and spec.prepare.task_sampling is not None:
            task_samples = spec.prepare.task_test * spec.prepare.task_sampling.n
            benchmarks = [b for b in benchmarks if b != task]
        return task_samples + sum(
            min(limits.get(b, BENCHMARKS[b].size), BENCHMARKS[b].size)
            * (sampling.n if sampling is not None else BENCHMARKS[b].n or 1)
            for b in benchmarks
        )
    if spec.prepare is not None and spec.eval.sampling is not None:
        n_test = spec.prepare.data.n_test
        return sum(n_test * spec.eval.sampling.n for b in benchmarks if b in spec.eval.benchmarks)
    return sum(BENCHMARKS[b].size * (BENCHMARKS[b].n or 1) for b in benchmarks)


def make_plan(
    preset: str,
    run_dir: Path,
    *,
    methods: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    prepare_options: dict[str, Any] | None = None,
    machine: Machine | None = None,
    force_cpu: bool = False,
) -> Plan:
    """The plan of a reproduction; unknown presets and methods list the valid ones.

    ``methods``: None is the preset's (the fork world adds the positive control).
    ``seeds``: None is the preset's (the paper presets: the paper's five).
    ``prepare_options``: ``prepare_preset`` options (``model``, ``data_dir``, ...).
    ``machine``: where it runs (detected unless given); ``force_cpu``: run a paper preset
    on the CPU in-process instead of refusing it (``stages.launch``).
    """
    spec = get_preset(preset)  # raises on an unknown preset
    methods = spec.methods if methods is None else methods
    if not methods:
        raise ConfigError("no methods given")
    for method in methods:
        train_preset(preset, method=method)  # raises on an unknown method
    seeds = spec.seeds if seeds is None else seeds
    if not seeds:
        raise ConfigError("no seeds given")
    options = {k: v for k, v in (prepare_options or {}).items() if v is not None}
    config = prepare_preset(preset, **options)  # raises on options the preset does not take
    benchmarks = spec.eval.benchmarks
    if hasattr(config, "skip_benchmarks"):
        benchmarks = tuple(b for b in benchmarks if b not in config.skip_benchmarks)
    runs = tuple((m, s) for s in seeds for m in methods)
    launch, refusal = None, None
    try:
        model = getattr(config, "model", None)
        launch = plan_launch(preset, model, machine=machine, force_cpu=force_cpu)
    except NoAcceleratorError as e:
        refusal = str(e)
    return Plan(
        preset,
        Path(run_dir),
        tuple(methods),
        tuple(seeds),
        benchmarks,
        runs,
        options,
        launch,
        refusal,
    )


def reproduce(
    plan: Plan,
    *,
    jobs: int = 1,
    show_progress: bool = True,
    console: Console | None = None,
    method_module: Path | None = None,
    report: bool = True,
    warm_start: bool | None = None,
) -> dict[str, Any]:
    """Run every stage of ``plan``; returns the wall time of each stage (seconds).

    ``method_module``: a user's file registering a method of the plan (loaded here and by
    every training process). ``report=False`` stops after the evaluation. ``warm_start``:
    how a CPU world's base model is made (``prepare``'s: None, the shipped one where
    there is one; True, trained from scratch; False, the shipped one or an error).
    """
    # torch, transformers: see the note under DEFAULT_JOBS
    from ictrepro.stages.eval import evaluate_run
    from ictrepro.stages.prepare import prepare

    console = console or Console(quiet=not show_progress)
    if jobs < 1:
        raise ConfigError(f"--jobs must be >= 1, got {jobs}")
    if plan.refusal is not None:
        raise NoAcceleratorError(plan.refusal)
    times: dict[str, Any] = {}
    total = 3 + len(plan.train_runs)
    done = 0

    def header(text: str) -> None:
        console.rule(f"[bold][{done}/{total}] {text}")

    start = time.perf_counter()
    # Refuse a changed or uncommitted plan before any work; bind the run to it once
    # prepare has made the folder (prepare writes only into a folder of its own).
    record_plan(plan.preset, plan.run_dir, write=False)
    header("prepare")
    prepare(
        plan.prepare_config(),
        plan.run_dir,
        show_progress=show_progress,
        console=console,
        warm_start=warm_start,
    )
    analysis_plan = record_plan(plan.preset, plan.run_dir)
    times["prepare_s"] = time.perf_counter() - start
    done += 1

    if plan.launch is not None and plan.launch.launched:
        t = time.perf_counter()
        for method, seed in plan.train_runs:
            header(
                f"train {method} seed {seed} ({plan.launch.strategy} on {plan.launch.processes})"
            )
            log = RunDir(plan.run_dir).log("train", ModelId(method, seed))
            command = plan.launch.train_command(method, seed, plan.run_dir, method_module)
            _launch(command, log, console)
            done += 1
        times["train_s"] = time.perf_counter() - t
        t = time.perf_counter()
        header(f"eval ({plan.launch.eval_backend})")
        _launch(
            plan.launch.eval_command(plan.run_dir), RunDir(plan.run_dir).logs / "eval.log", console
        )
        times["eval_s"] = time.perf_counter() - t
        # All current now: this prints the table.
        evaluate_run(
            plan.run_dir, backend=plan.launch.eval_backend, show_progress=False, console=console
        )
    elif jobs == 1:
        from ictrepro.stages.train import train  # torch: see above

        t = time.perf_counter()
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
        times["train_s"] = time.perf_counter() - t
        t = time.perf_counter()
        header("eval")
        evaluate_run(
            plan.run_dir,
            benchmarks=list(plan.benchmarks),
            show_progress=show_progress,
            console=console,
        )
        times["eval_s"] = time.perf_counter() - t
    else:
        t = time.perf_counter()
        header(
            f"train {len(plan.train_runs)} runs and eval {len(plan.train_runs) + 1} models, "
            f"{jobs} at a time"
        )
        _train_and_evaluate_in_workers(plan, jobs, method_module, console, show_progress)
        done += len(plan.train_runs)
        # Training and evaluation overlap here, so one figure covers both.
        times["train_eval_s"] = time.perf_counter() - t
        # All current: the table.
        evaluate_run(
            plan.run_dir, benchmarks=list(plan.benchmarks), show_progress=False, console=console
        )
    done += 1

    if report:
        t = time.perf_counter()
        header("report")
        _report(plan.run_dir, console)
        times["report_s"] = time.perf_counter() - t
    times["total_s"] = time.perf_counter() - start
    done += 1
    _write_record(plan, jobs, times, analysis_plan)
    console.rule(f"[bold green]reproduce: done in {times['total_s']:.0f} s -> {plan.run_dir}")
    return times


def _train_and_evaluate_in_workers(
    plan: Plan,
    jobs: int,
    method_module: Path | None,
    console: Console,
    show_progress: bool,
) -> None:
    """Every training run and every model's evaluation as tasks of ``jobs`` long-lived
    worker processes of one thread each.

    A model is evaluated as soon as its training finished, so the workers never wait for
    the slowest run of a round; the workers import torch, transformers and the verifier
    once, not once per task. Tasks are queued longest first (training, then evaluations),
    which keeps the two workers' loads even. Each task writes its output to ``RUN/logs/``.
    """
    rundir = RunDir(plan.run_dir)
    module = None if method_module is None else str(method_module)
    n_tasks = 2 * len(plan.train_runs) + 1
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no forked threads
    with (
        ProcessPoolExecutor(
            jobs, mp_context=context, initializer=_init_worker, initargs=(module,)
        ) as pool,
        progress_bar("train + eval", total=n_tasks, enabled=show_progress) as advance,
    ):
        pending: dict[Future[float], tuple[str, ModelId, Path]] = {}

        def submit(kind: str, model: ModelId, fn: Any, *args: Any) -> None:
            log = rundir.log(kind, model)
            pending[pool.submit(fn, *args, log)] = (kind, model, log)

        for method, seed in plan.train_runs:
            args = (plan.preset, method, seed, plan.run_dir, module)
            submit("train", ModelId(method, seed), _train_task, *args)
        submit("eval", BASE, _eval_task, plan.run_dir, BASE, plan.benchmarks)
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                kind, model, log = pending.pop(future)
                try:
                    seconds = future.result()
                except Exception as e:
                    for other in pending:
                        other.cancel()
                    # A user-fixable error in a worker stays one (a message, exit 2).
                    wrapper = type(e) if isinstance(e, IctreproError) else RuntimeError
                    raise wrapper(
                        f"{kind} {model} failed: {e}; see {log}; re-run reproduce to resume "
                        "(finished runs and scores are kept)"
                    ) from e
                console.print(f"{kind} {model}: [green]done[/] ({seconds:.0f} s)")
                advance()
                if kind == "train":
                    submit("eval", model, _eval_task, plan.run_dir, model, plan.benchmarks)


def _launch(command: list[str], log_path: Path, console: Console) -> None:
    """Run ``command`` (an ``accelerate launch`` or ``ictrepro eval`` process) with its
    output in ``log_path``; a failure names the log and how to resume."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    console.print(f"$ {shlex.join(command)}  > {log_path}", highlight=False)
    start = time.perf_counter()
    with log_path.open("w", encoding="utf-8") as log:
        code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    if code != 0:
        raise RuntimeError(
            f"{command[command.index('ictrepro.cli') + 1]} exited with code {code}; see "
            f"{log_path}; re-run reproduce to resume (finished runs and scores are kept)"
        )
    console.print(f"[green]done[/] ({time.perf_counter() - start:.0f} s)")


def _init_worker(method_module: str | None) -> None:
    """A worker process: one thread (two one-thread processes beat one process of two
    threads on two cores), and the user's rule file registered."""
    import torch  # only a worker loads it: see the note under DEFAULT_JOBS

    torch.set_num_threads(1)
    if method_module is not None:
        from ictrepro.algos.selection import load_method_module  # torch

        load_method_module(method_module)


@contextlib.contextmanager
def _output_to(log_path: Path) -> Iterator[Console]:
    """Send everything the task prints, Python or C, to ``log_path``; yield its console."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w", encoding="utf-8") as log:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield Console(file=log, width=120)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in zip((1, 2), saved, strict=True):
                os.dup2(copy, fd)
                os.close(copy)


def _train_task(
    preset: str, method: str, seed: int, run_dir: Path, method_module: str | None, log: Path
) -> float:
    """Worker task: train (resuming) one run of the plan; returns its wall time."""
    from ictrepro.stages.train import train  # torch: see the note under DEFAULT_JOBS

    start = time.perf_counter()
    with _output_to(log) as console:
        train(
            train_preset(preset, method=method, seed=seed),
            run_dir,
            resume=True,
            show_progress=False,
            console=console,
            method_module=None if method_module is None else Path(method_module),
        )
    return time.perf_counter() - start


def _eval_task(run_dir: Path, model: ModelId, benchmarks: Sequence[str], log: Path) -> float:
    """Worker task: evaluate one model on the preset's benchmarks (grading in process);
    wall time."""
    from ictrepro.stages.eval import evaluate_run  # transformers: as above

    start = time.perf_counter()
    with _output_to(log) as console:
        evaluate_run(
            run_dir,
            benchmarks=list(benchmarks),
            models=[model],
            workers=0,
            show_progress=False,
            console=console,
        )
    return time.perf_counter() - start


def record_plan(preset: str, run_dir: Path, *, write: bool = True) -> dict[str, Any] | None:
    """The analysis plan a preset's run is bound to (``Preset.plan``): its path, sha256 and
    the commit that last changed it, written to ``RUN/plan.json`` the first time (unless
    ``write`` is false: then only checked). A run resumed under a changed plan is refused:
    its confirmatory verdicts would no longer be the ones fixed before it began."""
    path = get_preset(preset).plan
    if path is None:
        return None
    root = CHECKOUT
    file = root / path
    if not file.is_file():  # an installed package without the repository's docs
        return {"path": path, "sha256": None, "commit": None, "found": False}
    sha = sha256_file(file)
    git = subprocess.run(
        ["git", "-C", str(root), "log", "-1", "--format=%H", "--", path],
        capture_output=True,
        text=True,
        check=False,
    )
    dirty = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "--", path],
        capture_output=True,
        text=True,
        check=False,
    )
    in_git = git.returncode == 0 and dirty.returncode == 0
    record = {
        "path": path,
        "sha256": sha,
        "commit": git.stdout.strip() or None,
        "uncommitted_changes": bool(dirty.stdout.strip()) if in_git else None,
    }
    target = Path(run_dir) / "plan.json"
    if target.is_file():
        before = json.loads(target.read_text(encoding="utf-8"))
        if before.get("sha256") != sha:
            raise ConfigError(
                f"{target} records plan {path} with sha256 {before.get('sha256')}, but the file "
                f"now has {sha}: the plan changed after this run started. Start a new run "
                "directory, or restore the plan"
            )
        return before
    # Outside a git checkout (an unpacked archive) the sha256 alone identifies the plan.
    if in_git and (record["uncommitted_changes"] or record["commit"] is None):
        raise ConfigError(
            f"plan {path} has uncommitted changes: commit it before the confirmatory run, so "
            "that the run can name the commit that fixed it"
        )
    record["recorded_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    if write:
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        atomic_write_json(target, record)
    return record


def _write_record(
    plan: Plan, jobs: int, times: dict[str, Any], analysis_plan: dict[str, Any] | None = None
) -> None:
    """``RUN/reproduce.json``: what the last completed reproduction ran, with how many
    worker processes, the wall time of each stage, and the analysis plan it was bound to."""
    record = {
        "preset": plan.preset,
        "methods": list(plan.methods),
        "seeds": list(plan.seeds),
        "jobs": jobs,
        "times_s": {k: round(v, 1) for k, v in times.items()},
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if analysis_plan is not None:
        record["plan"] = analysis_plan
    atomic_write_json(RunDir(plan.run_dir).reproduce_record, record)


def _report(run_dir: Path, console: Console) -> None:
    # matplotlib, torch: see the note under DEFAULT_JOBS
    from ictrepro.report import build_report

    build_report(run_dir, console=console)
