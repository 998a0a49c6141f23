"""The project's problems as sources of the verifier's test corpus
(:mod:`ictrepro.verify.corpus`): each problem's gold answer, with its worked solution as a
recorded response.
"""

from __future__ import annotations

from pathlib import Path

from ictrepro.data.benchmarks import BENCHMARKS, load_benchmark, local_paths
from ictrepro.data.prompts import gold_of
from ictrepro.data.suites import SUITES, generate_suite
from ictrepro.verify.corpus import Source


def benchmark_sources(data_dir: Path) -> list[Source]:
    """Every benchmark of ``data_dir`` (``<name>/test.jsonl`` or ``train.jsonl``, as
    :func:`~ictrepro.data.benchmarks.load_benchmark` reads them), with their worked solutions
    (MATH ``solution``, GSM8K ``orig_answer``) as recorded responses."""
    sources = []
    for name in sorted(BENCHMARKS):
        if not any(path.is_file() for path in local_paths(name, data_dir)):
            continue
        problems = load_benchmark(name, data_dir=data_dir)
        worked = [
            (p.solution or p.meta.get("orig_answer") or "", i) for i, p in enumerate(problems)
        ]
        sources.append(
            Source(
                name,
                [gold_of(p) for p in problems],
                [(text, i) for text, i in worked if isinstance(text, str) and text],
            )
        )
    return sources


def tiny_suite_sources(n_test: int = 64, seed: int = 0) -> list[Source]:
    """The generated tiny suites (their test splits), with their worked solutions."""
    sources = []
    for name in SUITES:
        problems = generate_suite(name, seed=seed, n_train=0, n_test=n_test)["test"]
        golds = [gold_of(p) for p in problems]
        worked = [(p.solution, i) for i, p in enumerate(problems) if p.solution]
        sources.append(Source(name, golds, worked))
    return sources
