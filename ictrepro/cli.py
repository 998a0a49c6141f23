"""The ``ictrepro`` command line: thin wrappers that parse, call a stage, and print."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(
    help="Reproduce ICT against GRPO, 20-Entropy and STAPO (RL from verifiable rewards).\n\n"
    "Stages: prepare -> train -> sample -> eval -> report -> check; `reproduce` runs them all.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)

#: Stages that later work fills in, with what each will do (shown in --help).
PLANNED_STAGES = {
    "sample": "Draw n samples per problem from a model (HF generate on CPU, vLLM on GPU).",
    "eval": "Sample, verify and score every model of a run (pass@k per benchmark).",
    "report": "Tables beside the paper's numbers, and training-curve plots.",
    "check": "Verify the hash manifest of results/ (and optionally re-run and compare).",
    "reproduce": "Run every stage of a preset end to end, resuming where it stopped.",
    "compare": "Train and evaluate a new selection rule against the stored baselines.",
}


def _not_implemented(name: str) -> None:
    def command() -> None:
        err_console.print(
            f"[bold red]ictrepro {name}[/] is not implemented yet in this version "
            f"({__import__('ictrepro').__version__}). Implemented now: `ictrepro methods`."
        )
        raise typer.Exit(code=2)

    command.__doc__ = f"{PLANNED_STAGES[name]} [not implemented yet]"
    app.command(name, context_settings={"ignore_unknown_options": True, "allow_extra_args": True})(
        command
    )


for _name in PLANNED_STAGES:
    _not_implemented(_name)


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
    quiet: bool = typer.Option(False, "--quiet", help="No progress display."),
) -> None:
    """RL-train one method and seed (GRPO loop; only the token mask differs).

    Writes RUN/train/<method>-seed<seed>/: train.json, metrics.jsonl, checkpoints/,
    final_model/. Runs under `accelerate launch` unchanged.
    """
    from ictrepro.config import load_overrides, parse_assignments, train_preset
    from ictrepro.runs import RunDirConflict
    from ictrepro.stages.train import train as run_train
    from ictrepro.train.grpo import TrainingDiverged

    try:
        overrides = load_overrides(config_file) if config_file else {}
        overrides.update(parse_assignments(set_))
        config = train_preset(preset, method=method, seed=seed, overrides=overrides)
    except (KeyError, ValueError, TypeError, OSError) as e:
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
        )
    except (RunDirConflict, TrainingDiverged, FileNotFoundError) as e:
        _fail(str(e))


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
