"""The confirmatory analysis: Holm's adjustment, p-values, dropping a rule that never
acted, and the verdicts (ictrepro/report/planned.py)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import stats

from ictrepro.evaluate.paired import PairedDifference, detectable_difference
from ictrepro.report.aggregate import Cell
from ictrepro.report.comparisons import MaskActivity
from ictrepro.report.planned import AnalysisPlan, PlannedTest, holm, p_value, planned_analysis


def _diff(mean: float, se: float, df: float = 20.0) -> PairedDifference:
    half = 1.96 * se
    return PairedDifference(mean, mean - half, mean + half, se, df, 0.95, 3, True)


def test_holm_by_hand():
    # sorted: 0.005 x4 = 0.02, 0.01 x3 = 0.03, 0.03 x2 = 0.06, 0.04 x1 -> max(0.06, 0.04)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5]) == [0.5]
    assert holm([0.6, 0.7]) == [1.0, 1.0]


def test_holm_against_its_definition_on_random_inputs():
    rng = random.Random(0)
    for m in (1, 2, 3, 4, 7):
        for _ in range(50):
            p = [rng.random() ** 3 for _ in range(m)]
            adjusted = holm(p)
            order = sorted(range(m), key=lambda i: p[i])
            for rank, i in enumerate(order):
                naive = max(min(1.0, (m - r) * p[order[r]]) for r in range(rank + 1))
                assert adjusted[i] == pytest.approx(naive, abs=1e-15)
            assert all(a >= x for a, x in zip(adjusted, p, strict=True))


def test_p_value_is_the_two_sided_t_tail():
    d = _diff(0.02, 0.01, df=10)
    assert p_value(d) == pytest.approx(2 * (1 - stats.t.cdf(2.0, 10)), rel=1e-10)
    assert p_value(_diff(-0.02, 0.01, df=10)) == p_value(d)
    assert p_value(_diff(0.02, 0.01, df=math.inf)) == pytest.approx(
        2 * (1 - stats.norm.cdf(2.0)), rel=1e-10
    )
    assert p_value(_diff(0.0, 0.0)) == 1.0 and p_value(_diff(0.01, 0.0)) == 0.0


def test_verdicts():
    assert PlannedTest("ict", "grpo", "primary", _diff(0.03, 0.01), 0.004, 0.012).verdict == (
        "above 0"
    )
    assert PlannedTest("ict", "grpo", "primary", _diff(-0.03, 0.01), 0.004, 0.012).verdict == (
        "below 0"
    )
    assert PlannedTest("ict", "grpo", "primary", _diff(0.03, 0.01), 0.004, 0.06).verdict == (
        "not resolved"
    )
    assert PlannedTest("ict", "x", "secondary", None, dropped="why").verdict == "not a comparison"


def _cells(effects: dict[str, float], seeds=(0, 1, 2), problems=40):
    """Cells of methods whose per-problem P@4 is a shared problem effect plus ``effect``
    plus noise, on two suites."""
    rng = np.random.default_rng(0)
    ids = tuple(f"p{j}" for j in range(problems))
    base = {b: rng.uniform(0.2, 0.8, problems) for b in ("tiny-lock-up", "tiny-lock-down")}
    cells, seed_map = {}, {}
    for m, effect in effects.items():
        cells[m] = {}
        for b, level in base.items():
            p4 = np.clip(
                level[None, :] + effect + rng.normal(0, 0.05, (len(seeds), problems)), 0, 1
            )
            matrices = {"p1": p4 * 0.5, "p4": p4, "total": p4}
            cells[m][b] = Cell("ok", tuple(seeds), problems, {}, matrices, ids)
        seed_map[m] = tuple(seeds)
    return cells, seed_map


def test_a_rule_that_never_acted_leaves_the_family_and_holm_runs_over_the_rest(tmp_path):
    effects = {"ict": 0.1, "grpo": 0.0, "entropy": 0.1, "stapo": 0.0, "random": 0.0,
               "ict-nochoice": 0.05, "grpo-lr4": 0.0}  # fmt: skip
    cells, seeds = _cells(effects)
    activity = [MaskActivity("stapo", 10, 100, 0.001), MaskActivity("ict", 97, 100, 0.9)]
    plan = AnalysisPlan("docs/plans/none.md")
    analysis = planned_analysis(plan, cells, seeds, activity, tmp_path)
    by = {(t.a, t.b): t for t in analysis.tests}
    assert by["ict", "stapo"].dropped and by["ict", "stapo"].verdict == "not a comparison"
    live = [t for t in analysis.tests if t.role in ("primary", "secondary") and not t.dropped]
    assert len(live) == 3
    assert [t.p_holm for t in live] == pytest.approx(holm([t.p for t in live]))
    assert by["ict", "grpo"].verdict == "above 0"
    assert by["ict", "entropy"].verdict == "not resolved"
    assert (
        by["ict", "ict-nochoice"].role == "mechanism" and by["ict", "ict-nochoice"].p_holm is None
    )
    assert analysis.plan_sha256 is None  # no plan file under tmp_path


def test_a_rule_the_run_left_out_leaves_the_family_with_its_reason(tmp_path):
    effects = {"ict": 0.1, "grpo": 0.0, "entropy": 0.1, "random": 0.0,
               "ict-nochoice": 0.05, "grpo-lr4": 0.0}  # fmt: skip
    cells, seeds = _cells(effects)
    analysis = planned_analysis(AnalysisPlan("docs/plans/none.md"), cells, seeds, [], tmp_path)
    by = {(t.a, t.b): t for t in analysis.tests}
    assert "not run" in by["ict", "stapo"].dropped
    assert by["ict", "stapo"].verdict == "not a comparison" and by["ict", "stapo"].p is None
    live = [t for t in analysis.tests if t.role in ("primary", "secondary") and not t.dropped]
    assert [(t.a, t.b) for t in live] == [("ict", "grpo"), ("ict", "entropy"), ("ict", "random")]
    assert [t.p_holm for t in live] == pytest.approx(holm([t.p for t in live]))
    # Holm's first level is 5% over the three left: the detectable figure uses it.
    primary = by["ict", "grpo"]
    expected = detectable_difference(primary.diff.se, primary.diff.df, confidence=1 - 0.05 / 3)
    assert primary.detectable_holm == pytest.approx(expected)


def test_a_run_is_bound_to_its_plan_and_refuses_a_changed_one(tmp_path, monkeypatch):
    import dataclasses
    import hashlib
    import json
    from pathlib import Path

    from ictrepro import presets
    from ictrepro.errors import ConfigError
    from ictrepro.stages import reproduce

    plan_path = "pyproject.toml"  # any committed file stands for a plan here
    root = Path(reproduce.__file__).resolve().parents[2]
    if not (root / plan_path).is_file():
        pytest.skip("the plan is not beside this installation")
    bound = dataclasses.replace(presets.get_preset("tiny-smoke"), plan=plan_path)
    monkeypatch.setattr(reproduce, "get_preset", lambda name: bound)
    record = reproduce.record_plan("tiny-smoke", tmp_path)
    sha = hashlib.sha256((root / plan_path).read_bytes()).hexdigest()
    assert record["sha256"] == sha and record["path"] == plan_path
    assert json.loads((tmp_path / "plan.json").read_text())["sha256"] == sha
    assert reproduce.record_plan("tiny-smoke", tmp_path) == record  # resumed: the same plan
    changed = {**record, "sha256": "0" * 64}
    (tmp_path / "plan.json").write_text(json.dumps(changed))
    with pytest.raises(ConfigError, match="the plan changed after this run started"):
        reproduce.record_plan("tiny-smoke", tmp_path)
    # A preset without a plan binds nothing.
    monkeypatch.setattr(reproduce, "get_preset", presets.get_preset)
    assert reproduce.record_plan("tiny-smoke", tmp_path / "other") is None


def test_a_planned_reproduction_prepares_into_an_empty_folder_and_then_binds_its_plan(
    tmp_path, monkeypatch
):
    """Prepare refuses a folder it did not make, so the plan is checked before prepare and
    written only after it."""
    import dataclasses
    from pathlib import Path

    from ictrepro import presets
    from ictrepro.stages import prepare as prepare_stage
    from ictrepro.stages import reproduce

    root = Path(reproduce.__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        pytest.skip("the plan is not beside this installation")
    bound = dataclasses.replace(presets.get_preset("tiny-smoke"), plan="pyproject.toml")
    monkeypatch.setattr(reproduce, "get_preset", lambda name: bound)
    run_dir = tmp_path / "run"
    seen = []

    class Prepared(Exception):
        pass

    def fake_prepare(config, out, **kwargs):
        seen.append(sorted(p.name for p in Path(out).iterdir()) if Path(out).exists() else [])
        Path(out).mkdir(parents=True, exist_ok=True)

    def stop(*args, **kwargs):
        raise Prepared

    monkeypatch.setattr(prepare_stage, "prepare", fake_prepare)
    monkeypatch.setattr(reproduce, "_train_and_evaluate_in_workers", stop)
    plan = reproduce.make_plan("tiny-smoke", run_dir, methods=["grpo"], seeds=[0])
    with pytest.raises(Prepared):
        reproduce.reproduce(plan, jobs=2, show_progress=False)
    assert seen == [[]]  # prepare found nothing of the plan's in its folder
    assert (run_dir / "plan.json").is_file()
