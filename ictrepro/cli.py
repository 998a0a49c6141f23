"""The ``ictrepro`` command line: thin wrappers that parse, call a stage, and print."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from ictrepro.algos.selection import available_selections

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
    "prepare": "Build the data, tokenizer and base model of a preset into a run directory.",
    "train": "RL-train one method and seed (GRPO loop; only the token mask differs).",
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
def methods(
    as_json: bool = typer.Option(
        False, "--json", help="Print machine-readable JSON instead of a table."
    ),
) -> None:
    """List the registered token-selection rules with their default hyperparameters."""
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
