"""``ictrepro compare``: train and evaluate one (new) method, report it against stored baselines.

    ictrepro compare --method lowprob --method-module my_rule.py --preset tiny

Runs prepare (skipped when current, or when a prepared pinned world is copied in from
``world``, by default ``runs/<preset>``), training of the method for each seed, and
evaluation of the base model and the new runs, in ``runs/compare-<method>`` by default.
The base model's evaluation is copied in with the world where ``world`` has one; the eval
stage redoes it unless it is up to date (the same model files, problems, sampling settings
and seed), so a copy never stands in for another model's numbers. The baselines
are not retrained: their per-problem counts come from ``results/<preset>/scores.jsonl``
(the pinned reproduction) and are written into the run's ``eval/`` as score records marked
``pinned`` (there are no samples behind them).

They are valid only in the same world: the same prepare config, the same evaluation
problems, and the same base model (weights, tokenizer, configs without the
``transformers_version`` they record) and training data by hash (``provenance.json``'s
``world``; a library version that differs is printed as information). A machine whose numerics differ from the pinning machine's (see
``ictrepro/determinism.py``) can build another base model from the same config; the new
rule would then grow from another starting point than the baselines. ``compare`` prepares
first and checks the world before training anything: where it differs it stops and says
why, or, with ``rerun_baselines``, trains the baselines again on this world (as long as a
reproduction of the preset) so that every number of the report comes from it.
``RUN/compare.json`` records which world each model's numbers come from, and the command
prints it.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from ictrepro.data.prompts import gold_of
from ictrepro.data.records import Problem
from ictrepro.determinism import DECISIVE, differences, numerics_provenance
from ictrepro.io import atomic_write_json, sha256_json
from ictrepro.presets import prepare_preset
from ictrepro.report import build_report
from ictrepro.report.comparisons import CONTROLS
from ictrepro.results.pinned import (
    RESULTS_DIR,
    ResultsError,
    load_provenance,
    pinned_world,
    read_pinned_scores,
    world_differences,
    world_identity,
)
from ictrepro.rundir import BASE, ModelId, ProblemCount, RunDir, ScoreRecord, load_record
from ictrepro.stages.eval import load_task
from ictrepro.stages.prepare import prepare
from ictrepro.stages.reproduce import make_plan, reproduce
from ictrepro.verify import Verdict, grade


def materialise_pinned(
    run_dir: Path, preset: str, *, results_dir: Path = RESULTS_DIR, skip_methods: set[str]
) -> list[ModelId]:
    """Write the pinned models' per-problem counts into ``RUN/eval`` as score records;
    returns their models."""
    provenance = load_provenance(preset, results_dir)
    prepared = load_record(run_dir, "prepare") or {}
    if provenance.get("prepare_config_sha256") != prepared.get("config_sha256"):
        raise ResultsError(
            f"{run_dir} was prepared with another config (hash "
            f"{str(prepared.get('config_sha256'))[:12]}) than the pinned results of {preset} "
            f"({str(provenance.get('prepare_config_sha256'))[:12]}): their problems differ. "
            "Compare in a run prepared by this version's preset, or re-pin the results"
        )
    rundir = RunDir(run_dir)
    gradable: dict[str, list[str]] = {}
    written = set()
    for record in read_pinned_scores(preset, results_dir):
        model = ModelId.parse(record["model"])
        if model.method in skip_methods or model.is_base:
            continue  # the new method, and the base model evaluated in this run
        benchmark = record["benchmark"]
        if benchmark not in gradable:
            problems = load_task(benchmark, run_dir=run_dir).problems
            _check_same_problems(record, problems, preset)
            gradable[benchmark] = _gradable_ids(problems)
        ids = gradable[benchmark]
        if len(ids) != len(record["n_correct"]):
            raise ResultsError(
                f"{results_dir}/{preset}/scores.jsonl: {model} on {benchmark} has "
                f"{len(record['n_correct'])} counts, but {benchmark} has {len(ids)} gradable "
                "problems in this run; re-pin the results"
            )
        ScoreRecord(
            benchmark=benchmark,
            model=model,
            pass_at={int(k): v for k, v in record["pass_at"].items()},
            problems=tuple(
                ProblemCount(pid, record["n_samples"], c)
                for pid, c in zip(ids, record["n_correct"], strict=True)
            ),
            identity=record.get("identity"),
            pinned=True,
        ).write(rundir.score_path(model, benchmark))
        written.add(model)
    return sorted(written)


def _check_same_problems(record: dict[str, Any], problems: list[Problem], preset: str) -> None:
    """Refuse counts made on other problems (pinned records keep their problems' hash)."""
    pinned = (record.get("identity") or {}).get("problems_sha256")
    here = sha256_json([p.to_json() for p in problems])
    if pinned is not None and pinned != here:
        raise ResultsError(
            f"the pinned results of {preset} on {record['benchmark']} were made on other "
            f"problems (hash {pinned[:12]}) than this run's ({here[:12]}); re-pin the results"
        )


def _gradable_ids(problems: list[Problem]) -> list[str]:
    """Ids of the problems whose gold answer the verifier can parse, in order: the problems
    a pinned ``n_correct`` list counts (ungradable ones are left out of it). The verdict
    on an empty response is ``UNGRADABLE`` exactly when the gold is unparsable."""
    golds = [gold_of(p) for p in problems]
    return [
        p.id
        for p, (gold, kind) in zip(problems, golds, strict=True)
        if grade("", gold, kind=kind) != Verdict.UNGRADABLE
    ]


def world_mismatch(
    run_dir: Path, preset: str, results_dir: Path = RESULTS_DIR
) -> tuple[list[str], list[str]]:
    """How ``run_dir``'s prepared world differs from the pinned results':
    ``(mismatches, information)`` (:func:`~ictrepro.results.pinned.world_differences`;
    no mismatch: the same world)."""
    provenance = load_provenance(preset, results_dir)
    version = ((provenance.get("numerics") or {}).get("versions") or {}).get("transformers")
    return world_differences(run_dir, pinned_world(preset, results_dir), version)


def reuse_world(source: Path, run_dir: Path, preset: str, results_dir: Path = RESULTS_DIR) -> bool:
    """Copy the prepared world of ``source`` (e.g. a reproduction's run directory) into the
    empty ``run_dir`` when it is the pinned results' world, so that ``compare`` need not
    prepare it again; False (nothing copied) when it is not, or ``run_dir`` is not empty.

    The base model's evaluation (``eval/base``) comes along where ``source`` has one: the
    eval stage checks it against the model and settings before using it (module docstring).
    """
    source, run_dir = Path(source), Path(run_dir)
    record = load_record(source, "prepare")
    if record is None or record.get("status") != "done":
        return False
    if run_dir.exists() and any(run_dir.iterdir()):
        return False
    if world_mismatch(source, preset, results_dir)[0]:
        return False
    run_dir.mkdir(parents=True, exist_ok=True)
    for name in (
        RunDir(source).record("prepare").name,
        *sorted({rel.split("/")[0] for rel in record["outputs"]}),
    ):
        src = source / name
        if src.is_dir():
            shutil.copytree(src, run_dir / name)
        elif src.is_file():
            shutil.copy2(src, run_dir / name)
    base_eval = RunDir(source).eval_dir(BASE)
    if base_eval.is_dir():
        shutil.copytree(base_eval, RunDir(run_dir).eval_dir(BASE))
    return True


def _other_world_message(
    preset: str, run_dir: Path, mismatch: list[str], provenance: dict[str, Any]
) -> str:
    fields = ("cpu", *DECISIVE)
    numerics = differences(provenance.get("numerics") or {}, numerics_provenance(), fields)
    seconds = provenance.get("times_s") or {}
    cost = (
        f" (the pinned reproduction took {seconds['total_s'] / 60:.0f} min on its machine)"
        if "total_s" in seconds
        else ""
    )
    return (
        f"{run_dir} holds another world than the pinned baselines of {preset} "
        f"({'; '.join(mismatch)}), so the new rule would grow from another starting point "
        "than they did and its gains would mix two worlds. "
        + (
            f"This machine's numerics differ from the pinning machine's: {'; '.join(numerics)}. "
            if numerics
            else ""
        )
        + "Either re-run the baselines on this world with `ictrepro compare ... "
        f"--rerun-baselines` (it trains every baseline method and seed here{cost}), or "
        "compare on a machine whose numerics match the pinned provenance.json"
    )


def compare(
    method: str,
    preset: str,
    run_dir: Path,
    *,
    seeds: tuple[int, ...] | None = None,
    method_module: Path | None = None,
    jobs: int | None = None,
    results_dir: Path = RESULTS_DIR,
    rerun_baselines: bool = False,
    world: Path | None = None,
    warm_start: bool | None = None,
    show_progress: bool = True,
    console: Console | None = None,
) -> Any:
    """Train and evaluate ``method``; report it against the baselines (``focus``): the
    pinned ones when this run's world is theirs, else re-run here (``rerun_baselines``)
    or refused (module docstring). ``world``: a run directory whose prepared world is
    copied into an empty ``run_dir`` when it is the pinned one (default: ``runs/<preset>``,
    where ``ictrepro reproduce`` writes), so the world is not prepared twice. ``seeds``:
    default those of the pinned baselines, so every comparison is paired over all of them.
    The base model is the world's shipped one where it ships (``results_dir/worlds/``);
    ``warm_start`` True trains it here instead, which on a machine of other numerics
    builds another world than the baselines'."""
    console = console or Console(quiet=not show_progress)
    results_dir = Path(results_dir)
    provenance = load_provenance(preset, results_dir)
    if jobs is None:  # as many workers as the baselines had (the results do not depend on it)
        jobs = provenance["training_jobs"]
    if seeds is None:
        seeds = tuple(provenance["seeds"])
    # The world first: a rule trained on another base model than the baselines' is wasted.
    source = Path(world) if world is not None else Path("runs") / preset
    if source.resolve() != Path(run_dir).resolve() and reuse_world(
        source, run_dir, preset, results_dir
    ):
        console.print(f"compare: the pinned world prepared in {source} is reused")
    prepare(
        prepare_preset(preset),
        run_dir,
        show_progress=show_progress,
        console=console,
        warm_start=warm_start,
        results_dir=results_dir,
    )
    mismatch, information = world_mismatch(run_dir, preset, results_dir)
    for line in information:
        console.print(f"compare: note: {line}")
    if mismatch and not rerun_baselines:
        raise ResultsError(_other_world_message(preset, run_dir, mismatch, provenance))
    pinned_methods = [m for m in provenance.get("methods", []) if m not in ("base", method)]
    # The controls are trained (re-run worlds) and compared with, but are not baselines:
    # the best baseline is never the positive control.
    baselines = tuple(m for m in pinned_methods if m not in CONTROLS)
    methods = (method, *pinned_methods) if mismatch else (method,)
    plan = make_plan(preset, run_dir, methods=methods, seeds=seeds)
    start = time.perf_counter()
    reproduce(
        plan,
        jobs=jobs,
        show_progress=show_progress,
        console=console,
        method_module=method_module,
        report=False,
    )
    here = world_identity(run_dir)["base_model_sha256"]
    if mismatch:
        origin = {m: f"this run's world (base model {str(here)[:12]})" for m in methods}
        console.print(
            f"compare: {', '.join(pinned_methods)} re-run on this world in "
            f"{time.perf_counter() - start:.0f} s (with {method})"
        )
    else:
        pinned = materialise_pinned(run_dir, preset, results_dir=results_dir, skip_methods={method})
        origin = {
            m.method: f"{results_dir / preset} (pinned; base model {str(here)[:12]})"
            for m in pinned
        }
        origin[method] = f"this run (base model {str(here)[:12]}, the pinned world)"
    origin["base"] = f"this run (base model {str(here)[:12]})"
    atomic_write_json(
        RunDir(run_dir).compare_record,
        {
            "method": method,
            "preset": preset,
            "world": world_identity(run_dir),
            "numbers_from": origin,
        },
    )
    for name, where in origin.items():
        console.print(f"compare: {name}: numbers from {where}")
    return build_report(run_dir, focus=method, baselines=baselines, console=console)
