"""The CLI: every stage listed with its help, the `methods` table and JSON, and its one
error boundary (a user-fixable error is one line and exit code 2; a bug keeps its traceback)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from ictrepro.algos.selection import available_selections
from ictrepro.cli import STAGES, app
from ictrepro.errors import ConfigError

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


# ------------------------------------------------------------------ the error boundary


def test_a_user_fixable_error_is_one_line_and_exit_code_2(tmp_path):
    missing = tmp_path / "rule.py"
    result = runner.invoke(app, ["train", "--method", "x", "--method-module", str(missing)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"error: method module {missing} does not exist"]
    assert "Traceback" not in result.output


def test_a_bad_option_value_is_a_config_error(tmp_path):
    result = runner.invoke(
        app, ["reproduce", "--seeds", "0,x", "--out", str(tmp_path), "--dry-run"]
    )
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: --seeds must be comma-separated integers, e.g. 0,1,2; got '0,x'"
    ]


def test_brackets_in_a_message_are_printed_not_read_as_markup(monkeypatch):
    import ictrepro.cli as cli

    def refuse(*args, **kwargs):
        raise ConfigError("scores [b, t] must match ['grpo-seed9']")

    monkeypatch.setattr(cli, "make_plan", refuse)
    result = runner.invoke(app, ["reproduce", "--dry-run"])
    assert result.exit_code == 2
    assert result.output.strip() == "error: scores [b, t] must match ['grpo-seed9']"


def test_a_bug_propagates_with_its_traceback(monkeypatch):
    import ictrepro.cli as cli

    def bug(*args, **kwargs):
        return 1 / 0

    monkeypatch.setattr(cli, "make_plan", bug)
    result = runner.invoke(app, ["reproduce", "--dry-run"])
    assert result.exit_code == 1 and isinstance(result.exception, ZeroDivisionError)
    with pytest.raises(ZeroDivisionError):
        runner.invoke(app, ["reproduce", "--dry-run"], catch_exceptions=False)


def test_a_bug_in_the_installed_command_prints_its_traceback(tmp_path):
    """The console script itself (not the test runner): a non-2 exit and the traceback."""
    script = (
        "import sys, ictrepro.stages.reproduce as r\n"
        "def bug(*a, **k): return 1 / 0\n"
        "r.make_plan = bug\n"
        "from ictrepro.cli import app\n"
        "sys.argv = ['ictrepro', 'reproduce', '--dry-run']\n"
        "app()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert done.returncode not in (0, 2)
    assert "Traceback" in done.stderr and "ZeroDivisionError" in done.stderr
    assert "error:" not in done.stderr


def test_importing_the_cli_changes_no_environment_variable():
    """The environment is pinned when a command runs (``_Commands.invoke``), not at import."""
    code = (
        "import os, json; before = dict(os.environ); import ictrepro.cli; "
        "print(json.dumps(sorted(set(os.environ.items()) ^ set(before.items()))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_train_looks_for_the_run_of_its_seed_by_default(tmp_path, monkeypatch):
    """Like prepare's --out, train's --run defaults to runs/<preset>-seed<seed>."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(
        app, ["train", "--method", "grpo", "--preset", "tiny-smoke", "--seed", "3"]
    )
    assert result.exit_code == 2
    assert "runs/tiny-smoke-seed3" in result.output


def test_preset_help_names_the_presets_not_a_source_file():
    for command in ("prepare", "train", "reproduce"):
        result = runner.invoke(app, [command, "--help"])
        assert "config.py" not in result.output and "tiny-smoke" in result.output
