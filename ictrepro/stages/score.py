"""``ictrepro score``: grade responses produced anywhere else with the project's verifier.

Reads a JSONL file of ``{"id", "response"}`` lines (ids repeat for several samples), grades
each against the benchmark's gold answer, and writes one verdict line per input line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ictrepro.evaluate.score import BenchmarkScore
from ictrepro.io import atomic_write_jsonl
from ictrepro.stages.eval import load_task, score_responses_file
from ictrepro.verify import Verifier


@dataclass(frozen=True)
class ScoredFile:
    """pass@k over the problems with responses, the ids without any, the verdicts' file."""

    score: BenchmarkScore
    missing: list[str]
    verdicts_path: Path


def verdicts_path_for(responses: Path) -> Path:
    """``answers.jsonl`` -> ``answers.verdicts.jsonl`` (the default output)."""
    return responses.with_name(responses.name.removesuffix(".jsonl") + ".verdicts.jsonl")


def score(
    benchmark: str,
    responses: Path,
    *,
    ks: Sequence[int],
    run_dir: Path | None = None,
    data_dir: Path | None = None,
    out: Path | None = None,
    workers: int = 2,
) -> ScoredFile:
    """Grade ``responses`` against ``benchmark`` and write the verdicts to ``out``
    (default: :func:`verdicts_path_for`). ``ks``: the pass@k to report, each >= 1."""
    task = dataclasses.replace(
        load_task(benchmark, run_dir=run_dir, data_dir=data_dir), ks=tuple(ks)
    )
    with Verifier(workers=workers) as verifier:
        result, lines, missing = score_responses_file(task, responses, verifier)
    path = out or verdicts_path_for(responses)
    atomic_write_jsonl(path, lines)
    return ScoredFile(result, missing, path)
