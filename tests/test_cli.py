"""The CLI skeleton: stages listed, `methods` table and JSON, clear not-implemented exits."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ictrepro.algos.selection import available_selections
from ictrepro.cli import PLANNED_STAGES, app

runner = CliRunner()


def test_help_lists_every_stage():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in [*PLANNED_STAGES, "methods"]:
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


@pytest.mark.parametrize("stage", sorted(PLANNED_STAGES))
def test_unimplemented_stage_exits_nonzero_with_message(stage):
    result = runner.invoke(app, [stage, "--preset", "tiny"])
    assert result.exit_code == 2
    assert "not implemented yet" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
