"""The ``ictrepro`` command line: thin wrappers that parse, call a stage, and print."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from ictrepro.stages.reproduce import DEFAULT_JOBS

app = typer.Typer(
    help="Reproduce ICT against GRPO, 20-Entropy and STAPO (RL from verifiable rewards).\n\n"
    "Stages: prepare -> train -> sample -> eval -> report -> check; `reproduce` runs them all.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)

#: Every stage command, in pipeline order (tests check that each has --help).
STAGES = ("prepare", "train", "sample", "eval", "score", "report", "check", "reproduce", "compare")


@app.command()
def prepare(
    preset: str = typer.Option("tiny", help="Named preset (see `ictrepro/config.py`)."),
    out: Path = typer.Option(
        None, "--out", help="Run directory to write (default: runs/<preset>-seed<seed>)."
    ),
    seed: int = typer.Option(0, help="Seed of data generation, initialisation and SFT."),
    force: bool = typer.Option(
        False,
        "--force",
        help="Redo everything, even if the outputs are current or were made by another config.",
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bars or tables."),
) -> None:
    """Build the data, tokenizer and warm-started base model of a preset into a run directory."""
    # Imported here so `ictrepro --help` and `ictrepro methods` stay fast (no transformers).
    from ictrepro.config import prepare_preset
    from ictrepro.runs import RunDirConflict
    from ictrepro.stages.prepare import prepare as run_prepare

    try:
        config = prepare_preset(preset, seed=seed)
    except KeyError as e:
        _fail(str(e.args[0]))
    run_dir = out or Path("runs") / f"{preset}-seed{seed}"
    try:
        run_prepare(
            config, run_dir, force=force, show_progress=not quiet, console=Console(quiet=quiet)
        )
    except RunDirConflict as e:
        _fail(str(e))


@app.command()
def train(
    method: str = typer.Option(..., help="Token-selection rule (see `ictrepro methods`)."),
    preset: str = typer.Option("tiny", help="Named preset: tiny, tiny-smoke, paper-0.5b, ..."),
    seed: int = typer.Option(0, help="Seed of sampling, data order and stochastic rules."),
    run: Path = typer.Option(
        None, "--run", help="Prepared run directory (default: runs/<preset>-seed0)."
    ),
    set_: list[str] = typer.Option(
        [],
        "--set",
        help="Override a config field, e.g. --set rl.lr=1e-5 --set method_args.rho=0.2.",
    ),
    config_file: Path = typer.Option(
        None, "--config", help="YAML or TOML file of overrides (applied before --set)."
    ),
    resume: bool = typer.Option(
        False, "--resume", help="Continue an interrupted run from its last checkpoint."
    ),
    force: bool = typer.Option(False, "--force", help="Start this run over, deleting its folder."),
    method_module: Path = typer.Option(
        None, "--method-module", help="Python file that registers --method (your own rule)."
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress display."),
) -> None:
    """RL-train one method and seed (GRPO loop; only the token mask differs).

    Writes RUN/train/<method>-seed<seed>/: train.json, metrics.jsonl, checkpoints/,
    final_model/. Runs under `accelerate launch` unchanged.
    """
    from ictrepro.algos.selection import MethodModuleError, load_method_module
    from ictrepro.config import load_overrides, parse_assignments, train_preset
    from ictrepro.runs import RunDirConflict
    from ictrepro.stages.train import train as run_train
    from ictrepro.train.grpo import TrainingDiverged

    try:
        if method_module is not None:
            load_method_module(method_module)
        overrides = load_overrides(config_file) if config_file else {}
        overrides.update(parse_assignments(set_))
        config = train_preset(preset, method=method, seed=seed, overrides=overrides)
    except (KeyError, ValueError, TypeError, OSError, MethodModuleError) as e:
        _fail(str(e.args[0]) if isinstance(e, KeyError) else str(e))
    run_dir = run or Path("runs") / f"{preset}-seed0"
    try:
        run_train(
            config,
            run_dir,
            resume=resume,
            force=force,
            show_progress=not quiet,
            console=Console(quiet=quiet),
            method_module=method_module,
        )
    except (RunDirConflict, TrainingDiverged, FileNotFoundError, MethodModuleError) as e:
        _fail(str(e))


@app.command()
def report(
    run: Path = typer.Option(..., "--run", help="Run directory with training and eval results."),
    out: Path = typer.Option(None, "--out", help="Where to write (default: RUN/report)."),
    focus: str = typer.Option("ict", help="The method whose gains are reported."),
    baselines: str = typer.Option("grpo,entropy,stapo", help="Comma-separated baselines."),
    quiet: bool = typer.Option(False, "--quiet", help="No tables in the terminal."),
) -> None:
    """Tables beside the paper's numbers, gains over the baselines, and training-curve plots.

    Writes report.md, summary.json and plots/*.png; every number is recomputed from the
    per-problem samples of `ictrepro eval`.
    """
    from ictrepro.results.paper import PaperDataError
    from ictrepro.results.report import build_report

    try:
        build_report(
            run,
            out_dir=out,
            focus=focus,
            baselines=tuple(_csv(baselines) or ()),
            console=Console(quiet=quiet),
        )
    except (KeyError, ValueError, FileNotFoundError, PaperDataError) as e:
        _fail(str(e.args[0]) if isinstance(e, KeyError) else str(e))


@app.command()
def check(
    results: Path = typer.Option(None, "--results", help="Results folder (default: results/)."),
    pin: Path = typer.Option(
        None, "--pin", help="First copy this run's results in as results/<preset>/ (re-pin)."
    ),
    preset: str = typer.Option("tiny", help="Preset name the pinned run belongs to."),
    jobs: int = typer.Option(
        None, help="Worker processes the pinned run used (default: its reproduce.json)."
    ),
    rerun: bool = typer.Option(
        False, "--rerun", help="Also re-run a quick subset of the preset and compare with it."
    ),
    work_dir: Path = typer.Option(
        None, "--work-dir", help="Where --rerun runs (default: runs/check-<preset>)."
    ),
) -> None:
    """Verify results/: the sha256 manifest and the schema of every result file.

    A modified, truncated, missing or unlisted file fails, named. `--pin RUN` re-pins a
    run's results (after an intended change) and rewrites the manifest.
    """
    from ictrepro.results.pinned import RESULTS_DIR, ResultsError, check_results, pin_run

    root = results or RESULTS_DIR
    if pin is not None:
        try:
            out = pin_run(pin, preset, results_dir=root, jobs=jobs)
        except (ResultsError, FileNotFoundError) as e:
            _fail(str(e))
        console.print(f"check: pinned {pin} as {out} and rewrote the manifest")
    problems = check_results(root)
    for problem in problems:
        err_console.print(f"[red]FAIL[/] {problem}", soft_wrap=True)  # paths stay whole
    if problems:
        raise typer.Exit(code=1)
    console.print(f"[green]check: {root} is intact[/] (manifest and schemas)")
    if rerun:
        from ictrepro.results.pinned import rerun_check

        target = work_dir or Path("runs") / f"check-{preset}"
        try:
            mode, problems = rerun_check(preset, target, results_dir=root, show_progress=True)
        except ResultsError as e:
            _fail(str(e))
        for problem in problems:
            err_console.print(f"[red]FAIL[/] {problem}", soft_wrap=True)
        expectation = (
            "bit-identical (same platform and torch as the pinned run)"
            if mode == "identical"
            else "within the declared tolerance (another platform or torch version)"
        )
        if problems:
            err_console.print(f"check --rerun: results are not {expectation}")
            raise typer.Exit(code=1)
        console.print(f"[green]check --rerun: the re-run subset is {expectation}[/]")


@app.command()
def compare(
    method: str = typer.Option(
        ..., help="The rule to compare (registered, or by --method-module)."
    ),
    method_module: Path = typer.Option(
        None, "--method-module", help="Python file that registers the rule."
    ),
    preset: str = typer.Option("tiny", help="Preset whose pinned baselines to compare against."),
    seeds: str = typer.Option("0,1,2", help="Comma-separated training seeds."),
    out: Path = typer.Option(None, "--out", help="Run directory (default: runs/compare-<method>)."),
    jobs: int = typer.Option(
        None,
        help="Worker processes (one thread each); default: those of the pinned baselines.",
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bars or tables."),
) -> None:
    """Train and evaluate a new selection rule against the stored baselines.

    Only the new method is trained; the baselines' results come from results/<preset>/.
    The report (RUN/report/) shows the new method's gains over each of them.
    """
    from ictrepro.algos.selection import MethodModuleError, load_method_module
    from ictrepro.results.pinned import ResultsError
    from ictrepro.runs import RunDirConflict
    from ictrepro.stages.compare import compare as run_compare
    from ictrepro.train.grpo import TrainingDiverged

    try:
        if method_module is not None:
            load_method_module(method_module)
        if not all(s.lstrip("-").isdigit() for s in _csv(seeds) or [""]):
            raise ValueError(f"--seeds must be comma-separated integers, e.g. 0,1,2; got {seeds!r}")
        run_compare(
            method,
            preset,
            out or Path("runs") / f"compare-{method}",
            seeds=tuple(int(s) for s in _csv(seeds) or []),
            method_module=method_module,
            jobs=jobs,
            show_progress=not quiet,
            console=Console(quiet=quiet),
        )
    except (KeyError, ValueError, NotImplementedError, MethodModuleError, ResultsError) as e:
        _fail(str(e.args[0]) if isinstance(e, KeyError) else str(e))
    except (RunDirConflict, TrainingDiverged, RuntimeError) as e:
        _fail(str(e))


@app.command()
def reproduce(
    preset: str = typer.Option("tiny", help="Named preset: tiny, tiny-smoke, paper-0.5b, ..."),
    out: Path = typer.Option(None, "--out", help="Run directory (default: runs/<preset>)."),
    methods: str = typer.Option(
        "grpo,entropy,stapo,ict,random", help="Comma-separated token-selection rules."
    ),
    seeds: str = typer.Option("0,1,2", help="Comma-separated training seeds."),
    jobs: int = typer.Option(
        DEFAULT_JOBS,
        help="Worker processes (one thread each) that train and evaluate; the results depend "
        "on it (the pinned ones used 2).",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and stop."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bars or tables."),
) -> None:
    """Run every stage of a preset end to end, resuming where it stopped.

    prepare -> train (every method x seed) -> eval (base + trained) -> report. Finished
    stages and runs are skipped when their inputs are unchanged.
    """
    from ictrepro.stages.reproduce import make_plan
    from ictrepro.stages.reproduce import reproduce as run_reproduce

    try:
        if not all(s.lstrip("-").isdigit() for s in _csv(seeds) or [""]):
            raise ValueError(f"--seeds must be comma-separated integers, e.g. 0,1,2; got {seeds!r}")
        seed_list = [int(s) for s in _csv(seeds) or []]
        plan = make_plan(
            preset, out or Path("runs") / preset, methods=_csv(methods) or [], seeds=seed_list
        )
    except (KeyError, ValueError) as e:
        _fail(str(e.args[0]) if isinstance(e, KeyError) else str(e))
    if dry_run:
        for line in plan.describe():
            console.print(line, highlight=False)
        return
    from ictrepro.runs import RunDirConflict
    from ictrepro.train.grpo import TrainingDiverged

    try:
        run_reproduce(plan, jobs=jobs, show_progress=not quiet, console=Console(quiet=quiet))
    except (NotImplementedError, RunDirConflict, TrainingDiverged, RuntimeError, ValueError) as e:
        _fail(str(e))


def _csv(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


@app.command("eval")
def eval_(
    run: Path = typer.Option(..., "--run", help="Run directory (prepared; trained models too)."),
    benchmarks: str = typer.Option(
        None, help="Comma-separated benchmarks (default: the seven tiny suites of the run)."
    ),
    models: str = typer.Option(
        None, help="Comma-separated models: base, <method>-seed<s> (default: all finished)."
    ),
    data_dir: Path = typer.Option(
        None, "--data-dir", help="Local folder of benchmark JSONL files (instead of the hub)."
    ),
    n: int = typer.Option(None, "--n", help="Samples per problem (default: the benchmark's)."),
    backend: str = typer.Option("hf", help="Sampler: hf (CPU/GPU) or vllm (GPU)."),
    harness: str = typer.Option(
        "ours", help="ours (the project's sampler) or lm-eval (the tasks/ of lm-eval)."
    ),
    seed: int = typer.Option(0, help="Sampling seed (the same for every model)."),
    workers: int = typer.Option(2, help="Verifier worker processes (0 = in-process)."),
    force: bool = typer.Option(False, "--force", help="Redo scores that are up to date."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bars or tables."),
) -> None:
    """Sample, verify and score every model of a run (pass@k per benchmark).

    Writes RUN/eval/<model>/<benchmark>.samples.jsonl (per problem: responses, verdicts)
    and <benchmark>.score.json; up-to-date scores are skipped.
    """
    from ictrepro.stages.eval import evaluate_run

    try:
        evaluate_run(
            run,
            benchmarks=_csv(benchmarks),
            models=_csv(models),
            data_dir=data_dir,
            n=n,
            backend=backend,
            harness=harness,
            seed=seed,
            workers=workers,
            force=force,
            show_progress=not quiet,
            console=Console(quiet=quiet),
        )
    except (KeyError, ValueError, FileNotFoundError, ImportError) as e:
        _fail(str(e.args[0]) if isinstance(e, KeyError) else str(e))


@app.command()
def sample(
    model: Path = typer.Option(..., "--model", help="HF model directory (or hub id)."),
    benchmark: str = typer.Option(..., help="Benchmark or tiny suite name."),
    out: Path = typer.Option(
        ..., "--out", help="JSONL to write: one {id, sample, response} line each."
    ),
    run: Path = typer.Option(None, "--run", help="Run directory (for the tiny suites)."),
    data_dir: Path = typer.Option(
        None, "--data-dir", help="Local folder of benchmark JSONL files."
    ),
    n: int = typer.Option(None, "--n", help="Samples per problem (default: the benchmark's)."),
    backend: str = typer.Option("hf", help="Sampler: hf or vllm."),
    seed: int = typer.Option(0, help="Sampling seed."),
) -> None:
    """Draw n samples per problem from a model (HF generate on CPU, vLLM on GPU).

    The output is what `ictrepro score --responses` reads.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ictrepro.data.prompts import render_prompt, stop_strings
    from ictrepro.io import atomic_write_jsonl
    from ictrepro.rollout.sampler import make_sampler
    from ictrepro.stages.eval import load_task

    try:
        task = load_task(benchmark, run_dir=run, data_dir=data_dir, n=n)
        tokenizer = AutoTokenizer.from_pretrained(model)
        policy = AutoModelForCausalLM.from_pretrained(model) if backend == "hf" else None
        sampler = make_sampler(backend, policy, tokenizer, batch_size=128, model_path=str(model))
    except (KeyError, ValueError, FileNotFoundError, OSError, ImportError) as e:
        _fail(str(e.args[0]) if isinstance(e, KeyError) else str(e))
    prompts = [render_prompt(p, tokenizer) for p in task.problems]
    completions = sampler.sample(prompts, task.sampling, seed=seed, stop=stop_strings(tokenizer))
    atomic_write_jsonl(
        out,
        (
            {"id": p.id, "sample": j, "response": c.text}
            for p, group in zip(task.problems, completions, strict=True)
            for j, c in enumerate(group)
        ),
    )
    console.print(f"sample: {len(prompts)} problems x {task.sampling.n} -> {out}")


@app.command()
def score(
    benchmark: str = typer.Option(..., help="Benchmark or tiny suite name."),
    responses: Path = typer.Option(
        ...,
        "--responses",
        help='JSONL: {"id": ..., "response": ...} per line; repeat ids for samples.',
    ),
    run: Path = typer.Option(None, "--run", help="Run directory (for the tiny suites)."),
    data_dir: Path = typer.Option(
        None, "--data-dir", help="Local folder of benchmark JSONL files."
    ),
    k: str = typer.Option("1,4", "--k", help="Comma-separated k of pass@k."),
    out: Path = typer.Option(
        None, "--out", help="Per-line verdicts JSONL (default: RESPONSES with .verdicts.jsonl)."
    ),
    workers: int = typer.Option(2, help="Verifier worker processes (0 = in-process)."),
) -> None:
    """Grade responses produced anywhere else with the project's verifier; print pass@k."""
    import dataclasses

    from ictrepro.io import atomic_write_jsonl
    from ictrepro.stages.eval import load_task, score_responses_file
    from ictrepro.verify import Verifier

    try:
        ks = tuple(int(x) for x in _csv(k) or [])
        if not ks or min(ks) < 1:
            raise ValueError(f"--k must list integers >= 1, got {k!r}")
        task = load_task(benchmark, run_dir=run, data_dir=data_dir)
        task = dataclasses.replace(task, ks=ks)
        with Verifier(workers=workers) as verifier:
            result, lines, missing = score_responses_file(task, responses, verifier)
    except (KeyError, ValueError, FileNotFoundError, OSError) as e:
        _fail(str(e.args[0]) if isinstance(e, KeyError) else str(e))
    verdict_path = out or responses.with_name(
        responses.name.removesuffix(".jsonl") + ".verdicts.jsonl"
    )
    atomic_write_jsonl(verdict_path, lines)
    table = Table(title=f"{benchmark}: {result.n_problems} problems scored")
    for kk in ks:
        table.add_column(f"pass@{kk}", justify="right")
    table.add_row(*(f"{100 * v:.2f}" for v in result.pass_at.values()))
    console.print(table)
    if result.n_ungradable:
        console.print(f"{result.n_ungradable} problems with an ungradable gold answer (not scored)")
    if missing:
        console.print(f"[yellow]{len(missing)} problems have no response (not scored)[/]")
    console.print(f"verdicts: {dict(result.verdicts)} -> {verdict_path}")


def _fail(message: str) -> None:
    err_console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code=2)


@app.command()
def methods(
    as_json: bool = typer.Option(
        False, "--json", help="Print machine-readable JSON instead of a table."
    ),
) -> None:
    """List the registered token-selection rules with their default hyperparameters."""
    from ictrepro.algos.selection import available_selections

    rules = available_selections()
    if as_json:
        payload = {
            name: {
                "needs": sorted(rule.needs),
                "defaults": rule.defaults,
                "description": rule.description,
            }
            for name, rule in sorted(rules.items())
        }
        typer.echo(json.dumps(payload, indent=2))
        return
    table = Table(title="Token-selection rules")
    table.add_column("method", style="bold")
    table.add_column("needs")
    table.add_column("defaults")
    table.add_column("description")
    for name, rule in sorted(rules.items()):
        defaults = ", ".join(f"{k}={v!r}" for k, v in rule.defaults.items()) or "-"
        table.add_row(name, ", ".join(sorted(rule.needs)) or "-", defaults, rule.description)
    console.print(table)


if __name__ == "__main__":
    app()
