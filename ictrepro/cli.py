"""The ``ictrepro`` command line: thin wrappers that parse options, call a stage, and print.

One error boundary (:class:`_Commands`): an :class:`~ictrepro.errors.IctreproError` raised
anywhere below a command becomes one ``error:`` line on stderr and exit code 2; any other
exception is a bug and propagates with its traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from ictrepro.config import load_overrides, parse_assignments
from ictrepro.determinism import pin_environment
from ictrepro.errors import ConfigError, IctreproError
from ictrepro.presets import prepare_preset, train_preset
from ictrepro.results.pinned import RESULTS_DIR, check_results, pin_run
from ictrepro.results.worlds import ship_world
from ictrepro.stages.check import rerun_check
from ictrepro.stages.reproduce import DEFAULT_JOBS, make_plan
from ictrepro.stages.reproduce import reproduce as run_reproduce

# LAZY: the commands import the stages that load torch, transformers or matplotlib (seconds)
# inside their bodies, so that `ictrepro --help` and a bad option answer at once.

console = Console()
err_console = Console(stderr=True)


class _Commands(TyperGroup):
    """The app's command group; its ``invoke`` runs every command, so it is the boundary
    (and where the environment is pinned)."""

    def invoke(self, ctx: click.Context) -> Any:
        # Before a command imports torch: the numbers then agree across x86-64 machines (see
        # ictrepro/determinism.py); spawned workers inherit the environment. Not at import,
        # so that importing the module changes nothing.
        pin_environment()
        try:
            return super().invoke(ctx)
        except IctreproError as e:
            # Text, not markup: messages hold brackets ("[B, T]", "['grpo-seed9']").
            err_console.print(Text.assemble(("error:", "bold red"), " ", str(e)), soft_wrap=True)
            raise typer.Exit(code=2) from None


app = typer.Typer(
    cls=_Commands,
    help="Reproduce ICT against GRPO, 20-Entropy and STAPO (RL from verifiable rewards).\n\n"
    "Stages: prepare -> train -> sample -> eval -> report -> check; `reproduce` runs them all.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

#: Every stage command, in pipeline order (tests check that each has --help).
STAGES = ("prepare", "train", "sample", "eval", "score", "report", "check", "reproduce", "compare")


MODEL_HELP = (
    "Pretrained presets: the base model, a hub id, a local Hugging Face directory or a "
    ".gguf file (default: the preset's)."
)
DATA_DIR_HELP = (
    "Pretrained presets: read the training sets and benchmarks from DIR/<name>/{train,test}"
    ".jsonl instead of the hub (docs/benchmarks.md)."
)
TRAIN_SETS_HELP = (
    "Pretrained presets: RL training sets, comma-separated (default: the preset's; the paper: "
    "gsm8k_train,math_train). Leaving one out is recorded and reported."
)
SKIP_HELP = (
    "Pretrained presets: benchmarks to leave out, comma-separated (e.g. gpqa_diamond, which "
    "is gated); recorded and reported."
)


WARM_START_HELP = (
    "Train a CPU world's base model from scratch (minutes) instead of using the one shipped "
    "in results/worlds/<world>/ with the pinned results; says whether it came out the same."
)


@app.command()
def prepare(
    preset: str = typer.Option(
        "tiny-lock-quick",
        help="Named preset: tiny-lock-quick (the default instrument), tiny-lock-replication, "
        'tiny, tiny-smoke, smollm2-135m, paper-0.5b, ... (README, "Presets").',
    ),
    out: Path = typer.Option(
        None, "--out", help="Run directory to write (default: runs/<preset>-seed<seed>)."
    ),
    seed: int = typer.Option(0, help="Seed of data generation, initialisation and SFT."),
    model: str = typer.Option(None, "--model", help=MODEL_HELP),
    data_dir: Path = typer.Option(None, "--data-dir", help=DATA_DIR_HELP),
    train_sets: str = typer.Option(None, "--train-sets", help=TRAIN_SETS_HELP),
    skip_benchmarks: str = typer.Option(None, "--skip-benchmarks", help=SKIP_HELP),
    force: bool = typer.Option(
        False,
        "--force",
        help="Redo everything, even if the outputs are current or were made by another config.",
    ),
    warm_start: bool = typer.Option(False, "--warm-start", help=WARM_START_HELP),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bars or tables."),
) -> None:
    """Build a preset's data and base model into a run directory: the tiny world's own
    (tokenizer, warm-started model, synthetic suites), or a pretrained model with the real
    training sets and benchmarks (paper-0.5b/1.5b/7b, smollm2-135m)."""
    from ictrepro.stages.prepare import prepare as run_prepare  # torch: see LAZY

    config = prepare_preset(
        preset,
        seed=seed,
        model=model,
        data_dir=data_dir,
        train_sets=_csv(train_sets),
        skip_benchmarks=_csv(skip_benchmarks),
    )
    run_dir = out or Path("runs") / f"{preset}-seed{seed}"
    run_prepare(
        config,
        run_dir,
        force=force,
        show_progress=not quiet,
        console=Console(quiet=quiet),
        warm_start=warm_start or None,
    )


@app.command()
def train(
    method: str = typer.Option(..., help="Token-selection rule (see `ictrepro methods`)."),
    preset: str = typer.Option("tiny", help="Named preset: tiny, tiny-smoke, paper-0.5b, ..."),
    seed: int = typer.Option(0, help="Seed of sampling, data order and stochastic rules."),
    run: Path = typer.Option(
        None, "--run", help="Prepared run directory (default: runs/<preset>-seed<seed>)."
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
    report_to: str = typer.Option(
        None,
        "--report-to",
        help="Also log metrics to tensorboard or wandb (Accelerate trackers); none by default.",
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress display."),
) -> None:
    """RL-train one method and seed (GRPO loop; only the token mask differs).

    Writes RUN/train/<method>-seed<seed>/: train.json, metrics.jsonl, checkpoints/,
    final_model/. Runs under `accelerate launch` unchanged.
    """
    # torch: see LAZY
    from ictrepro.algos.selection import load_method_module
    from ictrepro.stages.train import train as run_train

    if method_module is not None:
        load_method_module(method_module)
    overrides = load_overrides(config_file) if config_file else {}
    overrides.update(parse_assignments(set_))
    if report_to is not None:
        overrides["infra.report_to"] = report_to
    config = train_preset(preset, method=method, seed=seed, overrides=overrides)
    run_train(
        config,
        run or Path("runs") / f"{preset}-seed{seed}",
        resume=resume,
        force=force,
        show_progress=not quiet,
        console=Console(quiet=quiet),
        method_module=method_module,
    )


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
    per-problem counts in the score records of `ictrepro eval` (RUN/eval/*/*.score.json).
    """
    from ictrepro.report import build_report  # torch, matplotlib: see LAZY

    build_report(
        run,
        out_dir=out,
        focus=focus,
        baselines=tuple(_csv(baselines) or ()),
        console=Console(quiet=quiet),
    )


@app.command()
def check(
    results: Path = typer.Option(None, "--results", help="Results folder (default: results/)."),
    pin: Path = typer.Option(
        None, "--pin", help="First copy this run's results in as results/<preset>/ (re-pin)."
    ),
    preset: str = typer.Option(
        None,
        help="Preset of --rerun (default: tiny-lock-quick, or the run --pin pins); --pin checks the run "
        "was reproduced as (or prepared for) it.",
    ),
    jobs: int = typer.Option(
        None, help="Worker processes the pinned run used (default: its reproduce.json)."
    ),
    rerun: bool = typer.Option(
        False, "--rerun", help="Also re-run a quick subset of the preset and compare with it."
    ),
    work_dir: Path = typer.Option(
        None, "--work-dir", help="Where --rerun runs (default: runs/check-<preset>)."
    ),
    warm_start: bool = typer.Option(
        False,
        "--warm-start",
        help="With --rerun: " + WARM_START_HELP[0].lower() + WARM_START_HELP[1:],
    ),
) -> None:
    """Verify results/: the sha256 manifest and the schema of every result file.

    A modified, truncated, missing or unlisted file fails, named. `--pin RUN` re-pins a
    run's results (after an intended change) and rewrites the manifest.
    """
    root = results or RESULTS_DIR
    if pin is not None:
        out = pin_run(pin, preset, results_dir=root, jobs=jobs)
        console.print(f"check: pinned {pin} as {out} and rewrote the manifest")
        shipped = ship_world(pin, root)
        if shipped is not None:
            console.print(f"check: its world's base model ships in {shipped}")
        preset = preset or out.name
    preset = preset or "tiny-lock-quick"
    problems = check_results(root)
    for problem in problems:
        err_console.print(f"[red]FAIL[/] {problem}", soft_wrap=True)  # paths stay whole
    if problems:
        raise typer.Exit(code=1)
    console.print(f"[green]check: {root} is intact[/] (manifest and schemas)")
    if rerun:
        target = work_dir or Path("runs") / f"check-{preset}"
        outcome = rerun_check(
            preset, target, results_dir=root, show_progress=True, warm_start=warm_start or None
        )
        for line in outcome.lines():
            console.print(Text(line), soft_wrap=True)
        for problem in outcome.problems:
            err_console.print(Text.assemble(("FAIL ", "red"), problem), soft_wrap=True)
        if not outcome.passed:
            err_console.print(f"check --rerun: FAILED ({outcome.mode})")
            raise typer.Exit(code=1)
        console.print(f"[green]check --rerun: passed ({outcome.mode})[/]")


@app.command()
def compare(
    method: str = typer.Option(
        ..., help="The rule to compare (registered, or by --method-module)."
    ),
    method_module: Path = typer.Option(
        None, "--method-module", help="Python file that registers the rule."
    ),
    preset: str = typer.Option(
        "tiny-lock-quick", help="Preset whose pinned baselines to compare against."
    ),
    seeds: str = typer.Option(
        None, help="Comma-separated training seeds (default: those of the pinned baselines)."
    ),
    out: Path = typer.Option(None, "--out", help="Run directory (default: runs/compare-<method>)."),
    jobs: int = typer.Option(
        None,
        help="Worker processes (one thread each; the results do not depend on it); default: "
        "as many as made the pinned baselines.",
    ),
    rerun_baselines: bool = typer.Option(
        False,
        "--rerun-baselines",
        help="Where this machine builds another world than the pinned one (base model or data "
        "hash), train the baselines here too instead of stopping.",
    ),
    world: Path = typer.Option(
        None,
        "--world",
        help="A prepared run directory whose world (if it is the pinned one) is copied into "
        "--out, with its base model's evaluation where up to date, instead of preparing and "
        "evaluating again (default: runs/<preset>, where reproduce writes).",
    ),
    warm_start: bool = typer.Option(False, "--warm-start", help=WARM_START_HELP),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bars or tables."),
) -> None:
    """Train and evaluate a new selection rule against the stored baselines.

    Only the new method is trained; the baselines' results come from results/<preset>/.
    The report (RUN/report/) shows the new method's gains over each of them.
    """
    # torch: see LAZY
    from ictrepro.algos.selection import load_method_module
    from ictrepro.stages.compare import compare as run_compare

    if method_module is not None:
        load_method_module(method_module)
    run_compare(
        method,
        preset,
        out or Path("runs") / f"compare-{method}",
        seeds=tuple(_int_list(seeds, "--seeds", "0,1,2")) if seeds is not None else None,
        method_module=method_module,
        jobs=jobs,
        rerun_baselines=rerun_baselines,
        world=world,
        warm_start=warm_start or None,
        show_progress=not quiet,
        console=Console(quiet=quiet),
    )


@app.command()
def reproduce(
    preset: str = typer.Option(
        "tiny-lock-quick",
        help="Named preset: tiny-lock-quick (the default instrument), tiny-lock-replication, "
        'tiny, tiny-smoke, smollm2-135m, paper-0.5b, ... (README, "Presets").',
    ),
    out: Path = typer.Option(None, "--out", help="Run directory (default: runs/<preset>)."),
    methods: str = typer.Option(
        None,
        help="Comma-separated token-selection rules (default: the preset's; grpo, entropy, "
        "stapo, ict, random, and for tiny-fork* also the positive control grpo-lr4).",
    ),
    seeds: str = typer.Option(
        None, help="Comma-separated training seeds (default: the preset's; paper-*: 0,1,2,3,4)."
    ),
    model: str = typer.Option(None, "--model", help=MODEL_HELP),
    data_dir: Path = typer.Option(None, "--data-dir", help=DATA_DIR_HELP),
    train_sets: str = typer.Option(None, "--train-sets", help=TRAIN_SETS_HELP),
    skip_benchmarks: str = typer.Option(None, "--skip-benchmarks", help=SKIP_HELP),
    jobs: int = typer.Option(
        DEFAULT_JOBS,
        help="Worker processes (one thread each) that train and evaluate; the results do not "
        "depend on it, so use one per core.",
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the plan (and how runs are launched here) and stop."
    ),
    gpus: int = typer.Option(
        None,
        "--gpus",
        help="With --dry-run: plan for a machine with this many GPUs instead of this one.",
    ),
    gpu_memory: float = typer.Option(
        None, "--gpu-memory", help="With --gpus: each GPU's memory in GB (default 80)."
    ),
    force_cpu: bool = typer.Option(
        False,
        "--force-cpu",
        help="Run a paper-* preset on a machine without a GPU anyway (float32, in-process).",
    ),
    warm_start: bool = typer.Option(False, "--warm-start", help=WARM_START_HELP),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bars or tables."),
) -> None:
    """Run every stage of a preset end to end, resuming where it stopped.

    prepare -> train (every method x seed) -> eval (base + trained) -> report. Finished
    stages and runs are skipped when their inputs are unchanged.
    """

    seed_list = None if seeds is None else _int_list(seeds, "--seeds", "0,1,2")
    options = {
        "model": model,
        "data_dir": data_dir,
        "train_sets": _csv(train_sets),
        "skip_benchmarks": _csv(skip_benchmarks),
    }
    machine = None
    if gpus is not None or gpu_memory is not None:
        from ictrepro.stages.launch import Machine

        if not dry_run or gpus is None or gpus < 1:
            raise ConfigError(
                "--gpus N (N >= 1) and --gpu-memory GB describe another machine to plan for; "
                "they need --dry-run, and --gpu-memory needs --gpus"
            )
        machine = Machine("cuda", gpus, gpu_memory or 80.0, "as given on the command line")
    plan = make_plan(
        preset,
        out or Path("runs") / preset,
        methods=None if methods is None else _csv(methods),
        seeds=seed_list,
        prepare_options=options,
        force_cpu=force_cpu,
        machine=machine,
    )
    if dry_run:
        for line in plan.describe():
            console.print(line, highlight=False)
        return
    run_reproduce(
        plan,
        jobs=jobs,
        show_progress=not quiet,
        console=Console(quiet=quiet),
        warm_start=warm_start or None,
    )


def _csv(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def _int_list(value: str, option: str, example: str) -> list[int]:
    """``"0,1,2"`` -> ``[0, 1, 2]``; anything else is a ConfigError naming ``option``."""
    items = _csv(value) or [""]
    if not all(s.lstrip("-").isdigit() for s in items):
        raise ConfigError(
            f"{option} must be comma-separated integers, e.g. {example}; got {value!r}"
        )
    return [int(s) for s in items]


@app.command("eval")
def eval_(
    run: Path = typer.Option(..., "--run", help="Run directory (prepared; trained models too)."),
    benchmarks: str = typer.Option(
        None,
        help="Comma-separated benchmarks (default: those the run was prepared with, or the "
        "seven tiny suites).",
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
    from ictrepro.stages.eval import evaluate_run  # transformers: see LAZY

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
    from ictrepro.stages.sample import sample as run_sample  # transformers: see LAZY

    done = run_sample(
        model, benchmark, out, run_dir=run, data_dir=data_dir, n=n, backend=backend, seed=seed
    )
    console.print(f"sample: {done.n_problems} problems x {done.n} -> {done.out}")


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
    from ictrepro.stages.score import score as run_score  # transformers: see LAZY

    ks = _int_list(k, "--k", "1,4")
    if min(ks) < 1:
        raise ConfigError(f"--k must list integers >= 1, got {k!r}")
    scored = run_score(
        benchmark, responses, ks=ks, run_dir=run, data_dir=data_dir, out=out, workers=workers
    )
    result = scored.score
    table = Table(title=f"{benchmark}: {result.n_problems} problems scored")
    for kk in ks:
        table.add_column(f"pass@{kk}", justify="right")
    table.add_row(*(f"{100 * v:.2f}%" for v in result.pass_at.values()))
    console.print(table)
    if result.n_ungradable:
        console.print(f"{result.n_ungradable} problems with an ungradable gold answer (not scored)")
    if scored.missing:
        console.print(f"[yellow]{len(scored.missing)} problems have no response (not scored)[/]")
    console.print(f"verdicts: {dict(result.verdicts)} -> {scored.verdicts_path}")


@app.command()
def methods(
    as_json: bool = typer.Option(
        False, "--json", help="Print machine-readable JSON instead of a table."
    ),
) -> None:
    """List the registered token-selection rules with their default hyperparameters."""
    from ictrepro.algos.selection import available_selections  # torch: see LAZY

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
