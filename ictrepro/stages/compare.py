"""``ictrepro compare``: train and evaluate one (new) method, report it against stored baselines.

    ictrepro compare --method lowprob --method-module my_rule.py --preset tiny

Runs prepare (skipped when current), training of the method for each seed, and evaluation
of the base model and the new runs, in ``runs/compare-<method>`` by default. The baselines
are not retrained: their per-problem results come from ``results/<preset>/scores.jsonl``
(the pinned reproduction) and are written into the run's ``eval/`` as the samples files
the report reads, marked ``"pinned": true`` with placeholder responses. They are valid
only for the same evaluation problems, so the run's prepare config must be the one the
pinned results were made from; otherwise ``compare`` refuses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from ictrepro.io import atomic_write_json, atomic_write_jsonl
from ictrepro.results.pinned import RESULTS_DIR, ResultsError, load_provenance
from ictrepro.runs import load_record
from ictrepro.stages.reproduce import make_plan, reproduce

PINNED_RESPONSE = "(pinned result: responses are not stored in results/)"


def materialise_pinned(
    run_dir: Path, preset: str, *, results_dir: Path = RESULTS_DIR, skip_methods: set[str]
) -> list[str]:
    """Write the pinned models' per-problem counts into ``RUN/eval``; returns their names."""
    provenance = load_provenance(preset, results_dir)
    prepared = load_record(run_dir, "prepare") or {}
    if provenance.get("prepare_config_sha256") != prepared.get("config_sha256"):
        raise ResultsError(
            f"{run_dir} was prepared with another config (hash "
            f"{str(prepared.get('config_sha256'))[:12]}) than the pinned results of {preset} "
            f"({str(provenance.get('prepare_config_sha256'))[:12]}): their problems differ. "
            "Compare in a run prepared by this version's preset, or re-pin the results"
        )
    written = set()
    scores_path = Path(results_dir) / preset / "scores.jsonl"
    for line in scores_path.read_text(encoding="utf-8").splitlines():
        record: dict[str, Any] = json.loads(line)
        if record["method"] in skip_methods or record["method"] == "base":
            continue  # the new method, and the base model evaluated in this run
        out = run_dir / "eval" / record["model"]
        n = record["n_samples"]
        atomic_write_jsonl(
            out / f"{record['benchmark']}.samples.jsonl",
            (
                {
                    "id": f"pinned-{i}",
                    "responses": [PINNED_RESPONSE] * n,
                    "verdicts": ["correct"] * c + ["wrong"] * (n - c),
                    "n_correct": c,
                    "pinned": True,
                }
                for i, c in enumerate(record["n_correct"])
            ),
        )
        score = {k: v for k, v in record.items() if k not in ("n_correct",)}
        atomic_write_json(out / f"{record['benchmark']}.score.json", {**score, "pinned": True})
        written.add(record["model"])
    return sorted(written)


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
    baselines = tuple(dict.fromkeys(m.rsplit("-seed", 1)[0] for m in pinned))
    console.print(f"compare: baselines from {results_dir / preset}: {', '.join(pinned)}")
    return build_report(run_dir, focus=method, baselines=baselines, console=console)
