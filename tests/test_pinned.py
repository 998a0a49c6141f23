"""Pinned results and `ictrepro check`: the repository's results/, and tampering detected.

The re-run test pins a reproduction evaluated through the scripted policy
(``conftest.script_policy``), so its pinned counts are known and not all zero.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import flat, script_policy
from typer.testing import CliRunner

from ictrepro.cli import app
from ictrepro.evaluate.passk import mean_pass_at_k
from ictrepro.results.findings import (
    CONFIRMATORY_WORLDS,
    WORLDS,
    confirmatory_table,
    findings_table,
)
from ictrepro.results.pinned import (
    ResultsError,
    check_results,
    collect_scores,
    load_provenance,
    read_pinned_scores,
    write_manifest,
)

#: The checkout's results/ (the tests run in it, but name it to not depend on that).
RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"


@pytest.fixture
def results(tmp_path):
    target = tmp_path / "results"
    shutil.copytree(RESULTS_DIR, target)
    return target


def test_the_repository_results_check_out(monkeypatch):
    assert check_results(RESULTS_DIR) == []
    monkeypatch.chdir(RESULTS_DIR.parent)
    result = CliRunner().invoke(app, ["check"])
    assert result.exit_code == 0 and "is intact" in flat(result.output)


def test_check_reads_results_of_the_current_directory(results, monkeypatch):
    """Not the package's checkout: a tampered copy in the working directory fails."""
    (results / "tiny" / "provenance.json").write_text("{}")
    monkeypatch.chdir(results.parent)
    result = CliRunner().invoke(app, ["check"])
    assert result.exit_code == 1 and "provenance.json: modified" in flat(result.output)
    monkeypatch.chdir(results.parent.parent)
    result = CliRunner().invoke(app, ["check"])
    assert result.exit_code == 1 and "results: no such folder" in flat(result.output)


@pytest.mark.parametrize(
    ("preset", "records"),
    [
        ("tiny-lock", 36 * 2),  # base + 7 arms x 5 seeds, 2 test suites
        ("tiny-lock-replication", 127 * 2),  # base + 6 arms x 21 seeds
        ("tiny-lock-quick", 13 * 2),  # base + grpo, ict x 6 seeds
        ("tiny", 31 * 7),  # base + 6 methods (the positive control too) x 5 seeds, 7 suites
        ("tiny-fork", 31 * 3),  # base + 6 methods (the positive control too) x 5 seeds, 3 subsets
        ("tiny-fork0", 31 * 3),
        ("tiny-fork-rare", 31 * 3),
        ("tiny-fork-tally", 31 * 3),
        ("tiny-fork-tally0", 21 * 3),  # base + grpo, ict, random, grpo-lr4 x 5 seeds
        ("tiny-fork-tally-lr10", 31 * 3),
        ("tiny-fork-tally0-lr10", 21 * 3),
    ],
)
def test_pinned_scores_agree_with_their_counts(preset, records):
    rows = read_pinned_scores(preset, RESULTS_DIR)
    assert len(rows) == records
    for row in rows:
        n = row["n_samples"]
        for k, value in row["pass_at"].items():
            expected = mean_pass_at_k([n] * len(row["n_correct"]), row["n_correct"], int(k))
            assert value == pytest.approx(expected, abs=1e-12), (row["model"], row["benchmark"])


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda r: (r / "tiny" / "provenance.json").write_text("{}"), "provenance.json: modified"),
        (
            lambda r: (r / "tiny" / "report.md").unlink(),
            "report.md: listed in the manifest but missing",
        ),
        (lambda r: (r / "MANIFEST.sha256").unlink(), "MANIFEST.sha256: missing"),
        (
            lambda r: (r / "MANIFEST.sha256").write_text(
                "not a digest  tiny/x\n" + (r / "MANIFEST.sha256").read_text()
            ),
            "MANIFEST.sha256:1: not '<sha256>",
        ),
        (lambda r: (r / "tiny" / "extra.json").write_text("{}"), "extra.json: not in the manifest"),
    ],
)
def test_tampering_is_named(results, damage, message):
    damage(results)
    problems = check_results(results)
    assert any(message in p for p in problems), problems
    result = CliRunner().invoke(app, ["check", "--results", str(results)])
    assert result.exit_code == 1 and message in flat(result.output)


def test_truncated_and_malformed_scores_are_named_even_with_a_fresh_manifest(results):
    scores = results / "tiny" / "scores.jsonl"
    text = scores.read_text()
    scores.write_text(text[: len(text) // 2])  # cut mid-line
    write_manifest(results)  # so only the schema check can catch it
    problems = check_results(results)
    assert any("scores.jsonl: truncated" in p for p in problems)
    assert any("not valid JSON" in p for p in problems)
    first = json.loads(text.splitlines()[0])
    del first["pass_at"]
    first["n_correct"] = [99]
    scores.write_text(json.dumps(first) + "\n")
    write_manifest(results)
    problems = check_results(results)
    assert any("scores.jsonl:1: missing field 'pass_at'" in p for p in problems)


def _rewrite_first_score(results, edit) -> None:
    """Edit the first record of tiny/scores.jsonl and rewrite the manifest, so only the
    schema and the recomputation can catch the edit."""
    scores = results / "tiny" / "scores.jsonl"
    rows = [json.loads(x) for x in scores.read_text().splitlines()]
    edit(rows[0])
    scores.write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_manifest(results)


def test_an_edited_pass_at_is_caught_from_the_counts(results):
    first = read_pinned_scores("tiny", results)[0]
    assert 0 < first["pass_at"]["1"] < 1
    _rewrite_first_score(results, lambda r: r["pass_at"].update({"1": r["pass_at"]["1"] + 0.01}))
    problems = check_results(results)
    assert problems == [
        f"{results / 'tiny' / 'scores.jsonl'}:1: pass_at[1] = {first['pass_at']['1'] + 0.01!r}, "
        f"but the counts give {mean_pass_at_k([first['n_samples']] * len(first['n_correct']), first['n_correct'], 1)!r}"
    ]
    with pytest.raises(ResultsError, match=r"scores.jsonl:1: pass_at\[1\]"):
        read_pinned_scores("tiny", results)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda r: r["n_correct"].__setitem__(0, r["n_samples"] + 1),
            "field 'n_correct' must hold integers in [0, n_samples]",
        ),
        (
            lambda r: r["n_correct"].__setitem__(0, -1),
            "field 'n_correct' must hold integers in [0, n_samples]",
        ),
        (
            lambda r: r["pass_at"].update({"4": 1.5}),
            "field 'pass_at' must map k to a value in [0, 1]",
        ),
        (
            lambda r: r["pass_at"].update({"x": 0.5}),
            "field 'pass_at' must map k to a value in [0, 1]",
        ),
        (  # k above the samples per problem (16)
            lambda r: r["pass_at"].update({"32": 0.5}),
            "pass_at[32] has no counts to be computed from",
        ),
        (lambda r: r.update(seed="0"), "field 'seed' has the wrong type"),
    ],
)
def test_out_of_range_fields_are_named(results, edit, message):
    _rewrite_first_score(results, edit)
    problems = check_results(results)
    assert len(problems) == 1 and f"scores.jsonl:1: {message}" in problems[0], problems


def test_missing_and_malformed_provenance(results):
    (results / "tiny" / "provenance.json").write_text("{oops")
    with pytest.raises(ResultsError, match=r"provenance.json: not valid JSON"):
        load_provenance("tiny", results)
    with pytest.raises(ResultsError, match=r"no pinned results of preset 'nope'"):
        load_provenance("nope", results)
    (results / "tiny" / "provenance.json").unlink()
    write_manifest(results)
    assert check_results(results) == [f"{results / 'tiny' / 'provenance.json'}: missing"]


def test_pin_copies_a_run_and_rewrites_the_manifest(smoke_world, tmp_path, scripted_policy):
    from conftest import copy_world

    from ictrepro.results.pinned import pin_run
    from ictrepro.stages.eval import evaluate_run

    run_dir = copy_world(smoke_world, tmp_path / "run")
    evaluate_run(run_dir, benchmarks=["tiny-gsm8k"], workers=0, show_progress=False)
    results = tmp_path / "results"
    with pytest.raises(ResultsError, match=r"no reproduce\.json .* with --jobs"):
        pin_run(run_dir, "tiny-smoke", results_dir=results)
    # A run is pinned only as its own preset, never over another preset's results.
    with pytest.raises(ResultsError, match=r"prepared for preset 'tiny-smoke', not 'tiny'"):
        pin_run(run_dir, "tiny", results_dir=results, jobs=1)
    assert not (results / "tiny").exists()
    out = pin_run(run_dir, results_dir=results, jobs=1)
    assert out == results / "tiny-smoke"
    assert check_results(results) == []
    [pinned] = read_pinned_scores("tiny-smoke", results)
    assert pinned["model"] == "base" and pinned["n_samples"] == 4
    assert pinned["n_correct"] == scripted_policy(run_dir, "tiny-gsm8k", trained=False)
    assert pinned["pass_at"]["1"] == mean_pass_at_k([4] * 8, pinned["n_correct"], 1) > 0
    assert collect_scores(run_dir) == [pinned]
    assert (out / "scores.jsonl").is_file() and (results / "MANIFEST.sha256").is_file()


def test_a_run_is_pinned_as_the_preset_it_was_reproduced_as(smoke_world, tmp_path):
    """A preset that trains in another's prepared world (``tiny-fork-tally-lr10``) is
    named by its reproduction's record, not by ``prepare.json``."""
    from conftest import copy_world

    from ictrepro.results.pinned import pin_run
    from ictrepro.stages.eval import evaluate_run

    run_dir = copy_world(smoke_world, tmp_path / "run")
    evaluate_run(run_dir, benchmarks=["tiny-gsm8k"], workers=0, show_progress=False)
    record = {"preset": "tiny-smoke-lr10", "methods": [], "seeds": [], "jobs": 1}
    (run_dir / "reproduce.json").write_text(json.dumps(record), encoding="utf-8")
    results = tmp_path / "results"
    with pytest.raises(ResultsError, match=r"reproduced as preset 'tiny-smoke-lr10', not"):
        pin_run(run_dir, "tiny-smoke", results_dir=results)
    assert not (results / "tiny-smoke").exists()
    out = pin_run(run_dir, results_dir=results)
    assert out == results / "tiny-smoke-lr10"
    provenance = json.loads((out / "provenance.json").read_text(encoding="utf-8"))
    assert provenance["preset"] == "tiny-smoke-lr10" and provenance["training_jobs"] == 1
    assert check_results(results) == []


def _set_first_count(results, preset, value) -> dict:
    """Set the first problem's count of the first pinned record (pass@k recomputed, manifest
    rewritten), as an unintended change of the code would; returns the record."""
    scores = results / preset / "scores.jsonl"
    rows = [json.loads(x) for x in scores.read_text().splitlines()]
    rows[0]["n_correct"][0] = value(rows[0]["n_correct"][0])
    rows[0]["pass_at"] = {
        k: mean_pass_at_k([4] * len(rows[0]["n_correct"]), rows[0]["n_correct"], int(k))
        for k in rows[0]["pass_at"]
    }
    scores.write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_manifest(results)
    return rows[0]


def _edit_provenance(results, preset, edit) -> None:
    path = results / preset / "provenance.json"
    provenance = json.loads(path.read_text())
    edit(provenance)
    path.write_text(json.dumps(provenance))
    write_manifest(results)


@pytest.fixture(scope="module")
def rerun_pair(tmp_path_factory):
    """A pinned tiny-smoke reproduction (grpo, ict; seed 0; scripted policy) and a re-run of
    it through `rerun_check` (the second reproduction of the same subset)."""
    from ictrepro.results.pinned import pin_run
    from ictrepro.stages.check import rerun_check
    from ictrepro.stages.reproduce import make_plan, reproduce

    root = tmp_path_factory.mktemp("rerun")
    results, first, again = root / "results", root / "first", root / "again"
    with pytest.MonkeyPatch.context() as mp:
        expected = script_policy(mp)
        reproduce(
            make_plan("tiny-smoke", first, methods=("grpo", "ict"), seeds=(0,)),
            show_progress=False,
        )
        pin_run(first, "tiny-smoke", results_dir=results)  # the jobs from reproduce.json
        outcome = rerun_check("tiny-smoke", again, results_dir=results)
    return first, again, results, expected, outcome


def test_pin_records_numerics_and_world(rerun_pair):
    from ictrepro.determinism import DECISIVE, numerics_provenance
    from ictrepro.results.pinned import world_identity

    first, _, results, _, _ = rerun_pair
    provenance = load_provenance("tiny-smoke", results)
    assert provenance["training_jobs"] == 1
    assert provenance["world"] == world_identity(first)
    assert provenance["world"]["base_model_sha256"] is not None
    here = numerics_provenance()
    for field in (*DECISIVE, "cpu", "platform", "interop_threads", "deterministic_algorithms"):
        assert provenance["numerics"][field] == here[field], field
    assert provenance["numerics"]["versions"]["math-verify"] != "missing"
    # The base model's hash is the one its evaluations record as their model's identity.
    base = [r for r in read_pinned_scores("tiny-smoke", results) if r["model"] == "base"]
    assert {r["identity"]["model_sha256"] for r in base} == {
        provenance["world"]["base_model_sha256"]
    }


def test_rerun_on_the_same_machine_is_bit_identical(rerun_pair):
    first, _, results, expected, outcome = rerun_pair
    assert check_results(results) == []
    pinned = {(r["model"], r["benchmark"]): r for r in read_pinned_scores("tiny-smoke", results)}
    assert pinned["grpo-seed0", "tiny-gsm8k"]["n_correct"] == expected(first, "tiny-gsm8k", True)
    assert (outcome.mode, outcome.passed, outcome.problems) == ("bit-identical", True, [])
    assert (
        outcome.identical_pairs
        == outcome.total_pairs
        == 3 * len({r["benchmark"] for r in pinned.values()})
    )
    assert outcome.stages == {
        "prepare": "identical",
        "train grpo-seed0": "identical",
        "train ict-seed0": "identical",
    }
    text = "\n".join(outcome.lines())
    assert "mode: bit-identical" in text and "torch_capability" in text and "cpu" in text


def test_a_changed_count_on_the_same_machine_fails_bit_identity(rerun_pair, tmp_path):
    from ictrepro.determinism import numerics_provenance
    from ictrepro.results.rerun import judge_rerun

    _, again, pinned_results, _, _ = rerun_pair
    results = tmp_path / "results"
    shutil.copytree(pinned_results, results)
    row = _set_first_count(results, "tiny-smoke", lambda c: 0 if c == 1 else 1)
    outcome = judge_rerun("tiny-smoke", again, numerics_provenance(), results_dir=results)
    assert (outcome.mode, outcome.passed) == ("bit-identical", False)
    assert outcome.problems == [
        f"{(row['model'], row['benchmark'])}: 1 problems' correct counts differ from the pinned "
        "run, on the same CPU with the same numerics: the build changed the numbers"
    ]


def test_another_cpu_is_judged_statistically(rerun_pair, tmp_path):
    """Pinned on another CPU type: a small difference passes, a regression fails, and each
    pair says its difference, interval, adjusted p-value and verdict."""
    from ictrepro.determinism import numerics_provenance
    from ictrepro.results.rerun import judge_rerun

    _, again, pinned_results, _, _ = rerun_pair
    results = tmp_path / "results"
    shutil.copytree(pinned_results, results)
    here = numerics_provenance()
    # Another kernel set than this process's (which depends on the CPU and on whether a
    # command pinned the environment earlier in this process).
    other = "AVX512" if here.get("torch_capability") != "AVX512" else "DEFAULT"
    _edit_provenance(
        results,
        "tiny-smoke",
        lambda p: p["numerics"].update(
            cpu={"vendor": "GenuineIntel", "model": "Xeon", "flags": "avx2 avx512f"},
            torch_capability=other,
        ),
    )
    _set_first_count(results, "tiny-smoke", lambda c: 0 if c else 4)
    outcome = judge_rerun("tiny-smoke", again, here, results_dir=results)
    assert outcome.mode == "statistical" and outcome.passed, outcome.problems
    assert any(
        line.startswith(f"torch_capability: {other} != ") for line in outcome.numerics_differ
    )
    assert len(outcome.test.pairs) == outcome.total_pairs
    text = "\n".join(outcome.lines())
    assert "mode: statistical" in text and "adjusted p" in text and "!= cpu" in text
    # A regression: the re-run's trained models collapsed (no problem ever solved).
    import dataclasses

    from ictrepro.rundir import ProblemCount, RunDir, read_score

    collapsed = shutil.copytree(again, tmp_path / "collapsed")
    for model, per in RunDir(collapsed).load_scores().items():
        for benchmark, score in per.items():
            if not model.is_base:
                zero = tuple(ProblemCount(p.id, p.n_samples, 0) for p in score.problems)
                path = RunDir(collapsed).score_path(model, benchmark)
                dataclasses.replace(
                    score, problems=zero, pass_at={k: 0.0 for k in score.pass_at}
                ).write(path)
                assert read_score(path).n_correct == [0] * len(zero)
    again = collapsed
    outcome = judge_rerun("tiny-smoke", again, here, results_dir=results)
    assert outcome.mode == "statistical" and not outcome.passed
    failed = [p for p in outcome.test.pairs if not p.passed]
    assert failed and all(p.model != "base" and p.diff < 0 and p.high < 0 for p in failed)
    assert all(p.p_adjusted < 0.005 for p in failed)
    assert any("outside the interval an honest re-run stays in" in p for p in outcome.problems)


def test_results_pinned_without_numerics_are_judged_statistically(rerun_pair, tmp_path):
    from ictrepro.determinism import numerics_provenance
    from ictrepro.results.rerun import judge_rerun

    _, again, pinned_results, _, _ = rerun_pair
    results = tmp_path / "results"
    shutil.copytree(pinned_results, results)
    _edit_provenance(results, "tiny-smoke", lambda p: p.pop("numerics"))
    _set_first_count(results, "tiny-smoke", lambda c: 0 if c else 4)
    outcome = judge_rerun("tiny-smoke", again, numerics_provenance(), results_dir=results)
    assert outcome.mode == "statistical" and outcome.passed
    from ictrepro.determinism import DECISIVE

    assert len(outcome.numerics_differ) == len(DECISIVE)
    assert all(": (not recorded) != " in line for line in outcome.numerics_differ)


def test_findings_page_shows_the_pinned_reports_verdicts():
    # docs/findings.md quotes every pinned world's verdict table; regenerate it with
    # `python -m ictrepro.results.findings` after a re-pin.
    page = (RESULTS_DIR.parent / "docs" / "findings.md").read_text(encoding="utf-8")
    quoted = page.split("<!-- findings:begin -->\n")[1].split("<!-- findings:end -->")[0]
    assert quoted == findings_table(RESULTS_DIR)
    for world in CONFIRMATORY_WORLDS:
        begin, end = f"<!-- confirmatory:{world}:begin -->\n", f"<!-- confirmatory:{world}:end -->"
        planned = page.split(begin)[1].split(end)[0]
        assert planned == confirmatory_table(RESULTS_DIR, world)
    # The family (primary, three secondary), the mechanism and the positive control.
    assert planned.count("\n") == 2 + 6
    # Four claims and the positive control per world; the tally controls (at either
    # learning rate) trained no 20-Entropy or STAPO, so they have two claims, and the
    # replication trained no STAPO, so it has three.
    claims = {world: 3 if world.startswith("tiny-fork-tally0") else 5 for world in WORLDS}
    claims["tiny-lock-replication"] = 4
    for world, count in claims.items():
        assert quoted.count(f"| `{world}` |") == count, world
    assert quoted.count("\n") == 2 + sum(claims.values())


def test_findings_name_the_report_that_lacks_a_verdict_table(tmp_path):
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "report.md").write_text("# Report\n\nno verdicts\n", encoding="utf-8")
    with pytest.raises(ResultsError, match=r"tiny/report.md: no '## Verdicts per claim'"):
        findings_table(tmp_path, worlds=("tiny",))
    with pytest.raises(ResultsError, match=r"tiny-fork/report.md: missing"):
        findings_table(tmp_path, worlds=("tiny-fork",))


def test_the_quick_instrument_is_a_subset_of_the_pinned_replication():
    """Every count of tiny-lock-quick is the replication's of the same model: the quick
    run is the same world, settings and seeds, so its numbers are the pinned ones."""
    replication = {(r["model"], r["benchmark"]): r for r in read_pinned_scores(
        "tiny-lock-replication", RESULTS_DIR)}  # fmt: skip
    quick = read_pinned_scores("tiny-lock-quick", RESULTS_DIR)
    assert {r["method"] for r in quick} == {"base", "grpo", "ict"}
    for row in quick:
        assert row["n_correct"] == replication[row["model"], row["benchmark"]]["n_correct"]
