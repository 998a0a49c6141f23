"""Run the ``ictrepro_*`` lm-eval tasks (``tasks/``, the package ``ictrepro.tasks``) from Python.

:func:`run_lm_eval` calls ``lm_eval.simple_evaluate`` with the chat template applied and
every sample logged, and returns, per task, lm-eval's pass@k and, per problem, the
:class:`~ictrepro.data.records.Problem`, the prompt lm-eval sent and the n responses, so that
the project's own scorer can re-grade the very same samples::

    results = run_lm_eval("RUN/base_model", ["ictrepro_tiny"], run_dir="RUN")
    for task, result in results.items():
        verdicts = grade_responses(result.problem_list(), result.responses(), verifier)
        assert score_verdicts(verdicts, [1, 4]).pass_at[1] == result.pass_at[1]

This module also owns the document schema of the tasks (:func:`problem_to_doc`,
:func:`doc_to_problem`), which ``tasks/utils.py`` imports. ``lm_eval`` itself is imported only
inside :func:`run_lm_eval`. See ``docs/lm-eval.md``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ictrepro.data.records import Problem
from ictrepro.errors import ConfigError
from ictrepro.io import read_jsonl

#: The filter every ictrepro task declares; it keeps all ``repeats`` samples of a problem.
FILTER = "all_samples"


# ------------------------------------------------------------------------------ documents


def problem_to_doc(problem: Problem) -> dict[str, Any]:
    """One lm-eval document: flat fields, ``meta`` as JSON text (its keys vary by source)."""
    return {
        "id": problem.id,
        "problem": problem.problem,
        "answer": problem.answer,
        "choices": list(problem.choices) if problem.choices is not None else None,
        "solution": problem.solution,
        "meta_json": json.dumps(problem.meta, sort_keys=True, default=str),
    }


def doc_to_problem(doc: dict[str, Any]) -> Problem:
    """The :class:`Problem` a document was made from (inverse of :func:`problem_to_doc`)."""
    choices = doc.get("choices")
    meta = doc.get("meta_json")
    return Problem(
        id=doc["id"],
        problem=doc["problem"],
        answer=doc["answer"],
        choices=tuple(choices) if choices is not None else None,
        solution=doc.get("solution") or "",
        meta=json.loads(meta) if meta else {},
    )


# -------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class LoggedProblem:
    """One problem as lm-eval ran it: its prompt, its n responses and lm-eval's pass@k."""

    doc_id: int
    problem: Problem
    prompt: str
    """The text sent to the model (chat template applied)."""
    responses: tuple[str, ...]
    pass_at: dict[int, float]
    """Per-problem pass@k as ``tasks/utils.py`` computed it (NaN: ungradable gold or k > n)."""

    @property
    def id(self) -> str:
        return self.problem.id


@dataclass(frozen=True)
class TaskResult:
    """One lm-eval task: pass@k over its problems and every problem's samples."""

    task: str
    n_samples: int
    """Samples per problem (``repeats``)."""
    pass_at: dict[int, float]
    """Mean over problems with a gradable gold, as lm-eval aggregated it."""
    problems: tuple[LoggedProblem, ...]
    generation_kwargs: dict[str, Any] = field(default_factory=dict)

    def problem_list(self) -> list[Problem]:
        return [p.problem for p in self.problems]

    def responses(self) -> list[list[str]]:
        """``[i][j]``: response j to problem i, the shape ``score.grade_responses`` takes."""
        return [list(p.responses) for p in self.problems]

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (NaN written as ``None``)."""

        def num(x: float) -> float | None:
            return None if math.isnan(x) else x

        return {
            "task": self.task,
            "n_samples": self.n_samples,
            "pass_at": {str(k): num(v) for k, v in self.pass_at.items()},
            "generation_kwargs": self.generation_kwargs,
            "problems": [
                {
                    "id": p.id,
                    "doc_id": p.doc_id,
                    "responses": list(p.responses),
                    "pass_at": {str(k): num(v) for k, v in p.pass_at.items()},
                }
                for p in self.problems
            ],
        }


# ------------------------------------------------------------------------------- running


def _find_tasks() -> Path:
    """The checkout's top-level ``tasks/`` when ictrepro runs from a checkout (its sources,
    even if another copy is installed), else the installed package ``ictrepro.tasks``."""
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file() and (checkout / "tasks" / "utils.py").is_file():
        return checkout / "tasks"
    return Path(str(resources.files("ictrepro.tasks")))


#: The task YAMLs and their ``utils.py`` (shipped as the package ``ictrepro.tasks``, so
#: every install has them): ``lm_eval --include_path`` takes this folder.
TASKS_DIR = _find_tasks()


def _tasks_dir(tasks_dir: str | Path | None) -> Path:
    path = Path(tasks_dir) if tasks_dir is not None else TASKS_DIR
    if not (path / "utils.py").is_file():
        raise FileNotFoundError(
            f"{path} holds no ictrepro lm-eval tasks (no utils.py); pass "
            "tasks_dir=<the folder of the ictrepro_*.yaml files>"
        )
    return path


def _metric_ks(row: dict[str, Any]) -> list[int]:
    return sorted(
        int(key.split(",")[0].removeprefix("pass@"))
        for key in row
        if key.startswith("pass@") and key.endswith(f",{FILTER}") and "_stderr" not in key
    )


def _prompt(arguments: Any) -> str:
    """The context of a logged request: ``[(ctx, gen_kwargs)]`` in memory, or lm-eval's
    file form ``{"gen_args_0": {"arg_0": ctx, ...}}``."""
    if isinstance(arguments, dict):
        return arguments["gen_args_0"]["arg_0"]
    return arguments[0][0]


def _problem_samples(sample: dict[str, Any]) -> LoggedProblem:
    [responses] = sample["filtered_resps"]  # one request per problem, holding its n samples
    ks = sorted(int(key.removeprefix("pass@")) for key in sample if key.startswith("pass@"))
    return LoggedProblem(
        doc_id=int(sample["doc_id"]),
        problem=doc_to_problem(sample["doc"]),
        prompt=_prompt(sample["arguments"]),
        responses=tuple(responses),
        pass_at={k: float(sample[f"pass@{k}"]) for k in ks},
    )


def _task_result(task: str, row: dict[str, Any], samples: list[dict], config: dict) -> TaskResult:
    ks = _metric_ks(row)
    kept = sorted((s for s in samples if s.get("filter") == FILTER), key=lambda s: s["doc_id"])
    return TaskResult(
        task=task,
        n_samples=int(config.get("repeats") or 1),
        pass_at={k: float(row[f"pass@{k},{FILTER}"]) for k in ks},
        problems=tuple(_problem_samples(s) for s in kept),
        generation_kwargs=dict(config.get("generation_kwargs") or {}),
    )


def read_logged_samples(path: str | Path) -> tuple[LoggedProblem, ...]:
    """The problems and responses of one task from the ``samples_<task>_<date>.jsonl`` file
    that ``lm_eval ... --log_samples --output_path OUT`` writes, in problem order."""
    rows = [r for r in read_jsonl(Path(path)) if r.get("filter") == FILTER]
    if not rows:
        raise ValueError(f"{path}: no samples of filter {FILTER!r} (not an ictrepro task?)")
    return tuple(_problem_samples(r) for r in sorted(rows, key=lambda r: r["doc_id"]))


def response_records(problems: Sequence[LoggedProblem]) -> list[dict[str, str]]:
    """One ``{"id", "response"}`` per sample: the lines ``ictrepro score --responses`` reads."""
    return [{"id": p.id, "response": r} for p in problems for r in p.responses]


def run_lm_eval(
    model_dir: str | Path | None,
    tasks: str | Sequence[str],
    *,
    run_dir: str | Path | None = None,
    data_dir: str | Path | None = None,
    limit: int | float | None = None,
    batch_size: int | str = 16,
    seed: int = 0,
    repeats: int | None = None,
    gen_kwargs: dict[str, Any] | None = None,
    device: str | None = None,
    model: str = "hf",
    model_args: dict[str, Any] | None = None,
    lm: Any = None,
    tasks_dir: str | Path | None = None,
    bootstrap_iters: int = 0,
) -> dict[str, TaskResult]:
    """Evaluate a model on ictrepro lm-eval tasks or groups; ``{task: TaskResult}`` per leaf task.

    Args:
        model_dir: the HF model directory (``pretrained``); may be ``None`` when ``lm`` is given.
        tasks: task or group names (``ictrepro_tiny``, ``ictrepro_tiny_gsm8k``, ...).
        run_dir: run directory of the tiny tasks' data; by default the nearest ancestor of
            ``model_dir`` holding it (or ``$ICTREPRO_RUN_DIR``).
        data_dir: ``data_dir`` of ``ictrepro.data.benchmarks.load_benchmark`` (paper tasks).
        limit: evaluate only the first ``limit`` problems of each task (a fraction if < 1).
        batch_size: generation batch size (rows: each problem counts ``repeats`` times), or
            ``"auto"``.
        seed: lm-eval's python, numpy, torch and few-shot seeds.
        repeats: samples per problem instead of the task's own (pass@k with k above it is NaN).
        gen_kwargs: generation settings overriding the task's (e.g. ``{"max_gen_toks": 32}``).
        device: e.g. ``"cpu"`` or ``"cuda:0"``; lm-eval's default otherwise.
        model, model_args: lm-eval model type and extra arguments (``pretrained`` is
            ``model_dir``), e.g. ``model="vllm", model_args={"gpu_memory_utilization": 0.8}``.
        lm: an ``lm_eval.api.model.LM`` instance to use instead of building one.
        tasks_dir: a folder of task YAMLs to use instead of the package's (:data:`TASKS_DIR`).
        bootstrap_iters: passed to lm-eval (the pass@k aggregation has no stderr either way).
    """
    # here: lm-eval is an optional extra, and slow to import
    import lm_eval
    from lm_eval.tasks import TaskManager

    names = [tasks] if isinstance(tasks, str) else list(tasks)
    if not names:
        raise ValueError("no tasks to evaluate")
    if model_dir is None and lm is None:
        raise ValueError("pass model_dir, or an lm-eval LM instance as lm")
    metadata: dict[str, Any] = {}
    if model_dir is not None:
        metadata["pretrained"] = str(model_dir)
    if run_dir is not None:
        metadata["run_dir"] = str(run_dir)
    if data_dir is not None:
        metadata["data_dir"] = str(data_dir)
    manager = TaskManager(
        include_path=str(_tasks_dir(tasks_dir)), include_defaults=False, metadata=metadata
    )
    unknown = [n for n in names if n not in manager.all_tasks]
    if unknown:
        raise ConfigError(
            f"unknown lm-eval task(s) {unknown}; valid: {', '.join(manager.all_tasks)}"
        )

    task_specs: list[Any] = names
    if repeats is not None:
        if repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {repeats}")
        loaded = manager.load(names)
        for task_obj in loaded["tasks"].values():
            task_obj.set_config(key="repeats", value=repeats)
        children = {c for kids in loaded["group_map"].values() for c in kids}
        task_specs = [g for name, g in loaded["groups"].items() if name not in children] + [
            t for name, t in loaded["tasks"].items() if name not in children
        ]

    if lm is None:
        model_obj: Any = model
        args = {"pretrained": str(model_dir), **(model_args or {})}
    else:
        model_obj, args = lm, None
    out = lm_eval.simple_evaluate(
        model=model_obj,
        model_args=args,
        tasks=task_specs,
        task_manager=manager,
        apply_chat_template=True,
        log_samples=True,
        limit=limit,
        batch_size=batch_size,
        device=device,
        gen_kwargs=gen_kwargs,
        bootstrap_iters=bootstrap_iters,
        random_seed=seed,
        numpy_random_seed=seed,
        torch_random_seed=seed,
        fewshot_random_seed=seed,
    )
    if out is None:  # a non-zero rank of a distributed run
        return {}
    return {
        task: _task_result(task, out["results"][task], samples, out["configs"][task])
        for task, samples in out["samples"].items()
    }
