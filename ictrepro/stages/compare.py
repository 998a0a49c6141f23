"""``ictrepro compare``: train and evaluate one (new) method, report it against stored baselines.

    ictrepro compare --method lowprob --method-module my_rule.py --preset tiny

Runs prepare (skipped when current), training of the method for each seed, and evaluation
of the base model and the new runs, in ``runs/compare-<method>`` by default. The baselines
are not retrained: their per-problem counts come from ``results/<preset>/scores.jsonl``
(the pinned reproduction) and are written into the run's ``eval/`` as score records marked
``pinned`` (there are no samples behind them). They are valid only for the same
evaluation problems, so the run's prepare config, and each benchmark's problems, must be
the ones the pinned results were made from; otherwise ``compare`` refuses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from ictrepro.data.prompts import answer_kind
from ictrepro.data.records import Problem
from ictrepro.io import sha256_json
from ictrepro.results.pinned import (
    RESULTS_DIR,
    ResultsError,
    load_provenance,
    read_pinned_scores,
)
from ictrepro.rundir import ModelId, ProblemCount, RunDir, ScoreRecord
from ictrepro.runs import load_record
from ictrepro.stages.eval import load_task
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
    return [
        p.id for p in problems if grade("", p.answer, kind=answer_kind(p)) != Verdict.UNGRADABLE
    ]


def compare(
    method: str,
    preset: str,
    run_dir: Path,
    *,
    seeds: tuple[int, ...] = (0, 1, 2),
    method_module: Path | None = None,
    jobs: int | None = None,
    results_dir: Path = RESULTS_DIR,
    show_progress: bool = True,
    console: Console | None = None,
) -> Any:
    """Train and evaluate ``method``; report it against the pinned baselines (``focus``)."""
    from ictrepro.report import build_report

    console = console or Console(quiet=not show_progress)
    if jobs is None:  # the baselines' worker count, so the new rule runs as they did
        jobs = load_provenance(preset, results_dir)["training_jobs"]
    plan = make_plan(preset, run_dir, methods=(method,), seeds=seeds)
    reproduce(
        plan,
        jobs=jobs,
        show_progress=show_progress,
        console=console,
        method_module=method_module,
        report=False,
    )
    pinned = materialise_pinned(run_dir, preset, results_dir=results_dir, skip_methods={method})
    baselines = tuple(dict.fromkeys(m.method for m in pinned))
    names = ", ".join(m.name for m in pinned)
    console.print(f"compare: baselines from {Path(results_dir) / preset}: {names}")
    return build_report(run_dir, focus=method, baselines=baselines, console=console)
