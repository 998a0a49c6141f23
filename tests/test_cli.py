"""The CLI: every stage listed with its help, the `methods` table and JSON."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ictrepro.algos.selection import available_selections
from ictrepro.cli import STAGES, app

runner = CliRunner()


def test_help_lists_every_stage():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in [*STAGES, "methods"]:
        assert name in result.output


def test_methods_json_matches_registry():
    result = runner.invoke(app, ["methods", "--json"])
    assert result.exit_code == 0
    payload = json.loads(result.output)
    rules = available_selections()
    assert set(payload) == set(rules)
    assert payload["ict"]["defaults"] == {
        "rho": 0.1,
        "scope": "sequence",
        "warmup_steps": 10,
        "highest": True,
    }
    assert payload["stapo"]["needs"] == ["entropy", "logprob"]


def test_methods_table_names_every_rule():
    result = runner.invoke(app, ["methods"])
    assert result.exit_code == 0
    for name in available_selections():
        assert name in result.output


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_has_help(stage):
    result = runner.invoke(app, [stage, "--help"])
    assert result.exit_code == 0
    assert "Usage" in result.output and "not implemented" not in result.output
