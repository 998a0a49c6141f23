"""Helpers of the ``ictrepro_*`` lm-eval tasks, referenced from the YAML files next to this
one as ``!function utils.<name>`` (lm-eval loads this file by its path).

The tasks read exactly the problems the project's own evaluation reads, build exactly the
user message of :func:`ictrepro.data.prompts.user_message` (lm-eval's
``--apply_chat_template`` then wraps it as :func:`~ictrepro.data.prompts.render_prompt`
does), and grade with :func:`ictrepro.verify.grade`. See ``docs/lm-eval.md``.

Where the data comes from:

- tiny suites (``ictrepro_tiny_*``): ``RUN/data/test/<suite>.jsonl`` of a run directory made by
  ``ictrepro prepare``. The run directory is, in this order: ``run_dir`` in lm-eval's task
  metadata (``--metadata '{"run_dir": "RUN"}'`` or ``TaskManager(metadata=...)``), the
  environment variable ``ICTREPRO_RUN_DIR``, or the nearest ancestor of the model's
  ``pretrained`` directory holding that file (so ``pretrained=RUN/base_model`` needs nothing
  else);
- paper benchmarks (``ictrepro_<benchmark>``): ``ictrepro.data.benchmarks.load_benchmark(name,
  data_dir=...)``, imported only when such a task is built; ``data_dir`` comes from the task
  metadata or the environment variable ``ICTREPRO_DATA_DIR`` (``data_dir/<name>/test.jsonl``,
  no network); without one the loader downloads from the Hugging Face hub.

Each problem is sampled ``repeats`` times; the ``all_samples`` filter (:func:`keep_all_samples`)
keeps every sample, and :func:`process_results` grades all of them and returns the unbiased
pass@1 and pass@4 of the problem (:func:`process_results_pass16` adds pass@16: AIME tasks). A problem whose gold answer is unparsable (``Verdict.UNGRADABLE``) gets
NaN, and :func:`mean_gradable` leaves it out of the mean, exactly as
:func:`ictrepro.evaluate.score.score_verdicts` does.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ictrepro.data.benchmarks import load_benchmark
from ictrepro.data.prompts import answer_kind, user_message
from ictrepro.data.records import Problem
from ictrepro.data.suites import load_test_split
from ictrepro.evaluate.lm_eval_bridge import doc_to_problem, problem_to_doc
from ictrepro.evaluate.passk import pass_at_k
from ictrepro.rundir import RunDir
from ictrepro.verify import Verdict, grade

RUN_DIR_ENV = "ICTREPRO_RUN_DIR"
DATA_DIR_ENV = "ICTREPRO_DATA_DIR"
#: Time limit of one math grading; generous, since lm-eval grades one sample at a time.
GRADE_TIMEOUT_S = 5.0
#: The k of the ``pass@k`` metrics of the tasks (``ictrepro.data.benchmarks`` uses the same).
KS = (1, 4)
#: ... and of the AIME tasks, which draw 16 samples per problem.
KS_SMALL_SETS = (1, 4, 16)
#: How many directory levels above ``pretrained`` are searched for a run directory.
_RUN_DIR_SEARCH_DEPTH = 4


# ------------------------------------------------------------------------------ documents


def problems_dataset(problems: Sequence[Problem]) -> Any:
    """``DatasetDict({"test": ...})`` of the documents, the shape lm-eval's
    ``custom_dataset`` must return (tasks name ``test_split: test``)."""
    import datasets  # here: slow to import, and lm-eval (which has it) may be absent

    if not problems:
        raise ValueError("no problems to evaluate")
    return datasets.DatasetDict(
        {"test": datasets.Dataset.from_list([problem_to_doc(p) for p in problems])}
    )


def doc_to_text(doc: dict[str, Any]) -> str:
    """Exactly :func:`ictrepro.data.prompts.user_message` of the document's problem."""
    return user_message(doc_to_problem(doc))


# ----------------------------------------------------------------------------- datasets


def _suite_file(run_dir: Path, suite: str) -> Path:
    return RunDir(run_dir).test_suite(suite)


def resolve_run_dir(
    suite: str, *, run_dir: str | os.PathLike[str] | None = None, pretrained: Any = None
) -> Path:
    """The run directory holding ``data/test/<suite>.jsonl`` (order: module docstring)."""
    explicit = run_dir if run_dir not in (None, "") else os.environ.get(RUN_DIR_ENV) or None
    if explicit is not None:
        where = "metadata run_dir" if run_dir not in (None, "") else f"${RUN_DIR_ENV}"
        path = Path(explicit).expanduser()
        if not _suite_file(path, suite).is_file():
            raise FileNotFoundError(
                f"{where}={str(explicit)!r} has no {_suite_file(Path('RUN'), suite)}; "
                "pass the directory made by `ictrepro prepare`"
            )
        return path
    if isinstance(pretrained, (str, os.PathLike)) and Path(pretrained).expanduser().is_dir():
        start = Path(pretrained).expanduser().resolve()
        for candidate in [start, *start.parents][: _RUN_DIR_SEARCH_DEPTH + 1]:
            if _suite_file(candidate, suite).is_file():
                return candidate
    raise FileNotFoundError(
        f"no run directory for {suite}: pass it as lm-eval metadata "
        f'(--metadata \'{{"run_dir": "RUN"}}\'), set ${RUN_DIR_ENV}, or evaluate a model '
        "stored inside the run directory (pretrained=RUN/base_model)"
    )


def load_tiny(
    ictrepro_suite: str, run_dir: str | None = None, pretrained: Any = None, **_: Any
) -> Any:
    """``custom_dataset`` of the tiny tasks: the suite's test split of a run directory.

    lm-eval calls it with the task's ``dataset_kwargs`` (``ictrepro_suite``) and its whole
    metadata (``run_dir`` if given, the model arguments such as ``pretrained``, ``version``,
    ...); what is not used here is ignored.
    """
    found = resolve_run_dir(ictrepro_suite, run_dir=run_dir, pretrained=pretrained)
    return problems_dataset(load_test_split(found, ictrepro_suite))


def load_paper(ictrepro_benchmark: str, data_dir: str | None = None, **_: Any) -> Any:
    """``custom_dataset`` of the paper benchmarks: the very problems that
    ``ictrepro.data.benchmarks.load_benchmark(name, data_dir=...)`` returns, so that lm-eval
    and the project's own evaluation score identical problems.
    """
    if data_dir in (None, ""):
        data_dir = os.environ.get(DATA_DIR_ENV) or None
    problems = list(
        load_benchmark(ictrepro_benchmark, data_dir=Path(data_dir) if data_dir else None)
    )
    return problems_dataset(problems)


# -------------------------------------------------------------------------------- scoring


def keep_all_samples(resps: Iterable[list[str]], docs: Sequence[dict[str, Any]]) -> list:
    """Filter function: keep every one of the ``repeats`` samples of each document (lm-eval's
    default filter, ``take_first``, would keep only one)."""
    return [list(r) for r in resps]


def pass_at_ks(verdicts: Sequence[Verdict], ks: Sequence[int] = KS) -> dict[str, float]:
    """``{"pass@k": value}`` of one problem from its verdicts: the unbiased estimator;
    NaN when the gold is ungradable or when fewer than k samples were drawn."""
    n = len(verdicts)
    if Verdict.UNGRADABLE in verdicts:
        return {f"pass@{k}": math.nan for k in ks}
    c = sum(v.is_correct for v in verdicts)
    return {f"pass@{k}": pass_at_k(n, c, k) if n >= k else math.nan for k in ks}


def responses_of(results: Sequence[Any]) -> list[str]:
    """The sample texts of one document as lm-eval hands them to ``process_results``:
    ``[[s1, ..., sn]]`` with the ``all_samples`` filter, ``[s1]`` with ``take_first``."""
    if len(results) == 1 and isinstance(results[0], (list, tuple)):
        return [str(r) for r in results[0]]
    return [str(r) for r in results]


def grade_doc(doc: dict[str, Any], responses: Sequence[str]) -> list[Verdict]:
    """Verdicts of ``responses`` to the document's problem, graded in this process (main
    thread: the math time limit uses ``SIGALRM``)."""
    problem = doc_to_problem(doc)
    kind = answer_kind(problem)
    return [grade(r, problem.answer, kind=kind, timeout_s=GRADE_TIMEOUT_S) for r in responses]


def process_results(doc: dict[str, Any], results: Sequence[Any]) -> dict[str, float]:
    """pass@1 and pass@4 of one problem over all its samples (see :func:`pass_at_ks`)."""
    return pass_at_ks(grade_doc(doc, responses_of(results)), KS)


def process_results_pass16(doc: dict[str, Any], results: Sequence[Any]) -> dict[str, float]:
    """pass@1, pass@4 and pass@16 (the AIME tasks, 16 samples per problem)."""
    return pass_at_ks(grade_doc(doc, responses_of(results)), KS_SMALL_SETS)


def mean_gradable(values: Sequence[float]) -> float:
    """Aggregation: the mean over problems, leaving out NaN (ungradable gold, or k > n);
    NaN if nothing is left."""
    kept = [float(v) for v in values if not math.isnan(float(v))]
    # numpy's mean, as score_verdicts takes it: the same floats give the same bits
    return float(np.mean(kept)) if kept else math.nan
