"""``ictrepro eval``, ``ictrepro sample`` and ``ictrepro score``: sample, verify, pass@k.

``eval`` scores every model of a run directory, the base model and each finished training
run, on each benchmark, and writes (the formats: :mod:`ictrepro.rundir`)::

    RUN/eval/<model>/<benchmark>.samples.jsonl   per problem: id, responses, verdicts
    RUN/eval/<model>/<benchmark>.score.json      pass@k, per-problem counts, settings, hashes

``<model>`` is ``base`` or ``<method>-seed<seed>``. A score record holds the model's weights
hash, the problems' hash and the settings (its identity) and the samples file's hash; a
re-run skips every (model, benchmark) whose record is current
(:func:`ictrepro.rundir.decide`), so an interrupted evaluation resumes where it stopped.

Benchmarks are the tiny suites of the run (``RUN/data/test/<suite>.jsonl``) or the paper's
benchmarks by name (``ictrepro.data.benchmarks``: the hub, or ``--data-dir``).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console
from rich.table import Table
from transformers.utils import logging as hf_logging

from ictrepro.config import EvalSpec, VLLMSpec
from ictrepro.data.benchmarks import BENCHMARKS, load_benchmark
from ictrepro.data.prompts import gold_of, render_prompt, stop_strings
from ictrepro.data.records import Problem
from ictrepro.data.suites import ALL_EVAL_SUITES, EVAL_SUITES, is_tiny_suite, load_test_split
from ictrepro.errors import ConfigError, DataError, RunDirError
from ictrepro.evaluate.lm_eval_bridge import run_lm_eval
from ictrepro.evaluate.lm_eval_tasks import task_name
from ictrepro.evaluate.score import BenchmarkScore, grade_responses, score_problems
from ictrepro.io import hash_outputs, read_jsonl_numbered, sha256_file, sha256_json
from ictrepro.presets import TINY_EVAL, get_preset, preset_names
from ictrepro.progress import progress_bar
from ictrepro.rollout.params import SamplingParams
from ictrepro.rundir import (
    BASE,
    ModelId,
    ProblemCount,
    ProblemSamples,
    RunDir,
    SamplesFile,
    ScoreRecord,
    decide,
    load_record,
    read_score,
)
from ictrepro.verify import GradeRequest, Verdict, Verifier

HARNESSES = ("ours", "lm-eval")

# `ictrepro score` grades responses made elsewhere through this module without torch, and
# `ictrepro sample`/`score` answer a bad option at once: what loads torch (the prepared run's
# reader, the samplers, transformers' Auto classes) is imported inside the functions using it.


@dataclass(frozen=True)
class EvalTask:
    """One benchmark's problems and decoding settings (n samples, pass@k for each k)."""

    name: str
    problems: list[Problem]
    sampling: SamplingParams
    ks: tuple[int, ...]

    def settings(self) -> dict[str, Any]:
        return {"sampling": dataclasses.asdict(self.sampling), "ks": list(self.ks)}


def benchmark_names() -> list[str]:
    """Every name ``load_task`` accepts: the tiny suites and the paper's benchmarks."""
    return [*ALL_EVAL_SUITES, *(n for n, spec in BENCHMARKS.items() if spec.is_evaluation)]


def default_benchmarks(run_dir: Path) -> list[str]:
    """What ``ictrepro eval --run RUN`` evaluates without ``--benchmarks``: the benchmarks
    RUN was prepared with: a pretrained-model preset's benchmarks, a tiny world's suites
    (``data.eval_suites``), else the seven tiny suites."""
    from ictrepro.stages.prepare_pretrained import prepared_benchmarks  # torch: see above

    prepared = prepared_benchmarks(Path(run_dir))
    if prepared is not None:
        return list(prepared)
    config = (load_record(Path(run_dir), "prepare") or {}).get("config") or {}
    return list((config.get("data") or {}).get("eval_suites") or EVAL_SUITES)


def tiny_eval_spec(run_dir: Path) -> EvalSpec:
    """How the tiny suites of ``run_dir`` are evaluated: its preset's evaluation (the fork
    world samples more responses, with its own token budget), else ``TINY_EVAL``."""
    config = (load_record(Path(run_dir), "prepare") or {}).get("config") or {}
    name = config.get("preset")
    return get_preset(name).eval if name in preset_names() else TINY_EVAL


def load_task(
    name: str, *, run_dir: Path | None = None, data_dir: Path | None = None, n: int | None = None
) -> EvalTask:
    """The problems and settings of benchmark ``name``; ``n`` overrides the samples drawn."""
    from ictrepro.stages.prepare_pretrained import prepared_benchmarks, read_prepared  # torch

    prepared = prepared_benchmarks(Path(run_dir)) if run_dir is not None else None
    if is_tiny_suite(name):
        if run_dir is None:
            raise ConfigError(f"{name} is a tiny suite: it needs --run RUN_DIR (a prepared run)")
        problems = load_test_split(Path(run_dir), name)
        spec = tiny_eval_spec(Path(run_dir))
        sampling, ks = spec.sampling, spec.ks
    elif prepared is not None and name in prepared:
        # A benchmark prepared into the run: its (sub)set and decoding as prepared, whatever
        # data_dir says (that is for benchmarks the run was not prepared with).
        problems = read_prepared(prepared[name].path)
        sampling, ks = prepared[name].sampling, prepared[name].ks
    else:
        if name not in BENCHMARKS or not BENCHMARKS[name].is_evaluation:
            kind = (
                "a training set, not an evaluation benchmark" if name in BENCHMARKS else "unknown"
            )
            raise ConfigError(
                f"benchmark {name!r} is {kind}; valid: {', '.join(benchmark_names())}"
            )
        spec = BENCHMARKS[name]
        problems = load_benchmark(name, data_dir=data_dir)
        sampling = SamplingParams(spec.n, spec.temperature, spec.top_p, spec.max_new_tokens)
        ks = tuple(spec.ks)
    if not problems:
        raise DataError(f"benchmark {name} has no problems")
    if n is not None:
        sampling = dataclasses.replace(sampling, n=n)
    if sampling.n < max(ks):
        raise ConfigError(
            f"{name}: pass@{max(ks)} needs at least {max(ks)} samples per problem, but n = "
            f"{sampling.n}; raise --n"
        )
    return EvalTask(name, problems, sampling, ks)


# ---------------------------------------------------------------------------- eval


def run_models(run_dir: Path) -> dict[ModelId, Path]:
    """``{BASE: RUN/base_model, ModelId(method, seed): .../final_model}`` of finished runs."""
    rundir = RunDir(run_dir)
    models = {BASE: rundir.base_model} if rundir.base_model.is_dir() else {}
    for model, folder in rundir.training_runs().items():
        record = load_record(folder, "train")
        if record is not None and record["status"] == "done":
            models[model] = rundir.model_dir(model)
    return models


def evaluate_run(
    run_dir: Path,
    *,
    benchmarks: Sequence[str] | None = None,
    models: Sequence[str | ModelId] | None = None,
    data_dir: Path | None = None,
    n: int | None = None,
    backend: str = "hf",
    harness: str = "ours",
    seed: int = 0,
    workers: int = 2,
    batch_size: int = 128,
    force: bool = False,
    show_progress: bool = True,
    console: Console | None = None,
) -> dict[ModelId, dict[str, ScoreRecord]]:
    """Evaluate the models of ``run_dir``; returns ``{model: {benchmark: score record}}``.

    ``models``: names (``base``, ``<method>-seed<s>``) or ids; default every finished model.

    ``harness="lm-eval"`` draws the samples with lm-eval and the tasks of ``tasks/``
    (HF backend, :class:`LmEvalSampler`) instead of the project's sampler
    (:class:`OurSampler`); grading and files are the same, and the score file also keeps
    lm-eval's own pass@k (``lm_eval_pass_at``).
    """
    if harness not in HARNESSES:
        raise ConfigError(f"unknown harness {harness!r}; valid: {', '.join(HARNESSES)}")
    from ictrepro.stages.prepare_pretrained import prepared_benchmarks  # torch: see above

    hf_logging.disable_progress_bar()
    console = console or Console(quiet=not show_progress)
    run_dir = Path(run_dir)
    rundir = RunDir(run_dir)
    available = run_models(run_dir)
    if not available:
        raise RunDirError(f"{run_dir} has no base_model/ and no finished training run")
    chosen = [m if isinstance(m, ModelId) else ModelId.parse(m) for m in models or available]
    unknown = [m.name for m in chosen if m not in available]
    if unknown:
        raise ConfigError(
            f"no finished model {unknown} in {run_dir}; available: "
            f"{', '.join(m.name for m in available)}"
        )
    names = list(benchmarks) if benchmarks else default_benchmarks(run_dir)
    tasks = [load_task(b, run_dir=run_dir, data_dir=data_dir, n=n) for b in names]
    prepared = prepared_benchmarks(run_dir) or {}
    if data_dir is not None and prepared.keys() & set(names):
        console.print(
            f"eval: {', '.join(b for b in names if b in prepared)}: the problems and decoding "
            f"prepared in {rundir.data} (--data-dir {data_dir} is for other benchmarks)"
        )
    draw: Harness = (
        OurSampler(backend, batch_size, seed)
        if harness == "ours"
        else LmEvalSampler(run_dir, data_dir, set(prepared), seed)
    )
    results: dict[ModelId, dict[str, ScoreRecord]] = defaultdict(dict)
    with Verifier(workers=workers) as verifier:
        for model in chosen:
            model_dir = available[model]
            weights = hash_outputs(model_dir, ["."])
            todo = []
            for task in tasks:
                identity = {
                    "model_sha256": sha256_json(weights),
                    "problems_sha256": sha256_json([p.to_json() for p in task.problems]),
                    "settings": task.settings(),
                    "seed": seed,
                    "backend": draw.backend,
                }
                path = rundir.score_path(model, task.name)
                if decide(path, identity, force=force, shared=True) == "current":
                    results[model][task.name] = read_score(path)
                else:
                    todo.append((task, identity))
            if not todo:
                console.print(f"eval: {model} is up to date")
                continue
            total = sum(len(t.problems) for t, _ in todo)
            with (
                draw.open(model_dir) as sample,
                progress_bar(f"eval {model}", total=total, enabled=show_progress) as advance,
            ):
                for task, identity in todo:
                    responses, finished, extra = sample(task, advance)
                    results[model][task.name] = _write_task_result(
                        task, identity, responses, finished, verifier, rundir, model, extra
                    )
    console.print(score_table(results, title=f"pass@k ({run_dir})"))
    return dict(results)


#: The evaluation's vLLM engine has the GPU to itself (no trainer beside it).
EVAL_VLLM_MEMORY = 0.85


#: What a harness's sampling of one task returns: responses per problem, their finished
#: flags (None: not known), and extra fields of the score file (lm-eval's own pass@k).
Drawn = tuple[list[list[str]], list[list[bool]] | None, dict[int, float] | None]


class Harness(Protocol):
    """How an evaluation draws its responses: ``open(model_dir)`` gives, for the time one
    model is evaluated, a function from a task (and a progress callback) to ``Drawn``;
    ``backend`` names it in the score records' identity."""

    backend: str

    def open(self, model_dir: Path) -> contextlib.AbstractContextManager[Any]: ...


@dataclass(frozen=True)
class OurSampler:
    """The project's sampler (HF generate or one vLLM engine), made per model and closed
    before the next model's."""

    backend: str
    batch_size: int
    seed: int

    @contextlib.contextmanager
    def open(self, model_dir: Path) -> Iterator[Any]:
        from transformers import AutoTokenizer  # torch: see the note under HARNESSES

        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        sampler = _make_eval_sampler(self.backend, model_dir, tokenizer, self.batch_size)
        with contextlib.closing(sampler):
            yield lambda task, advance: (
                *_sample_ours(task, sampler, tokenizer, self.seed, advance),
                None,
            )


@dataclass(frozen=True)
class LmEvalSampler:
    """lm-eval with the tasks of ``tasks/`` (HF backend); benchmarks prepared into the run
    (``prepared``) are read from there."""

    run_dir: Path
    data_dir: Path | None
    prepared: set[str]
    seed: int
    backend: str = "lm-eval"

    @contextlib.contextmanager
    def open(self, model_dir: Path) -> Iterator[Any]:
        def sample(task: EvalTask, advance: Any) -> Drawn:
            data = RunDir(self.run_dir).data / "test" if task.name in self.prepared else None
            responses, pass_at = _sample_lm_eval(
                task, model_dir, self.run_dir, data or self.data_dir, self.seed, advance
            )
            return responses, None, pass_at

        yield sample


def _make_eval_sampler(backend: str, model_dir: Path, tokenizer: Any, batch_size: int) -> Any:
    """The sampler of one model's evaluation, closed before the next model's is made: an
    HF model (on the GPU when there is one), or one vLLM engine, which alone holds the
    weights (no HF copy is loaded beside it)."""
    from ictrepro.rollout.sampler import make_sampler  # torch: see the note under HARNESSES

    policy = None
    if backend == "hf":
        import torch
        from transformers import AutoModelForCausalLM

        policy = AutoModelForCausalLM.from_pretrained(model_dir)
        accelerator = torch.accelerator.current_accelerator()
        if accelerator is not None:
            policy = policy.to(accelerator)
    return make_sampler(
        backend,
        policy,
        tokenizer,
        batch_size=batch_size,
        model_path=str(model_dir),
        vllm_settings=VLLMSpec(gpu_memory_utilization=EVAL_VLLM_MEMORY),
    )


def _sample_ours(
    task: EvalTask, sampler: Any, tokenizer: Any, seed: int, advance: Any
) -> tuple[list[list[str]], list[list[bool]]]:
    """Responses and their finished flags from the project's sampler."""
    prompts = [render_prompt(p, tokenizer) for p in task.problems]
    stop = stop_strings(tokenizer)
    completions = []
    chunk = 64  # problems per progress update (sampling batches within are the sampler's)
    for start in range(0, len(prompts), chunk):
        completions += sampler.sample(
            prompts[start : start + chunk], task.sampling, seed=seed, index_offset=start, stop=stop
        )
        advance(min(chunk, len(prompts) - start))
    return [[c.text for c in g] for g in completions], [
        [c.finished for c in g] for g in completions
    ]


def _sample_lm_eval(
    task: EvalTask, model_dir: Path, run_dir: Path, data_dir: Path | None, seed: int, advance: Any
) -> tuple[list[list[str]], dict[int, float]]:
    """Responses drawn by lm-eval with the task of ``tasks/``, in the task's problem order,
    and lm-eval's own pass@k (kept in the score file beside ours)."""
    import torch  # see the note under HARNESSES

    name = task_name(task.name)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # lm-eval's HF model asks for cuda
    result = run_lm_eval(
        model_dir,
        [name],
        run_dir=run_dir,
        data_dir=data_dir,
        seed=seed,
        repeats=task.sampling.n,
        # The task's decoding as this evaluation has it (a prepared run's may differ from
        # the YAML's defaults).
        gen_kwargs={
            "max_gen_toks": task.sampling.max_new_tokens,
            "temperature": task.sampling.temperature,
            "top_p": task.sampling.top_p,
        },
        device=device,
    )[name]
    by_id = {s.id: list(s.responses) for s in result.problems}
    missing = [p.id for p in task.problems if p.id not in by_id]
    if missing:
        raise RuntimeError(
            f"lm-eval returned no samples for {len(missing)} problems of {task.name}"
        )
    advance(len(task.problems))
    return [by_id[p.id] for p in task.problems], dict(result.pass_at)


def _write_task_result(
    task: EvalTask,
    identity: dict[str, Any],
    responses: list[list[str]],
    finished: list[list[bool]] | None,
    verifier: Any,
    rundir: RunDir,
    model: ModelId,
    lm_eval_pass_at: dict[int, float] | None = None,
) -> ScoreRecord:
    """Grade the responses with the project's verifier; write the samples file, then the
    score record (last: it marks the pair done)."""
    verdicts = grade_responses(task.problems, responses, verifier)
    ids = [p.id for p in task.problems]
    score = score_problems(verdicts, ids, task.ks)
    samples = SamplesFile(
        tuple(
            ProblemSamples(
                pid,
                tuple(rs),
                tuple(v.value for v in vs),
                None if finished is None else tuple(finished[i]),
            )
            for i, (pid, rs, vs) in enumerate(zip(ids, responses, verdicts, strict=True))
        )
    )
    samples_path = rundir.samples_path(model, task.name)
    samples.write(samples_path)
    record = ScoreRecord(
        benchmark=task.name,
        model=model,
        pass_at=score.pass_at,
        problems=tuple(
            ProblemCount(p.id, len(p.responses), p.n_correct)
            for p in samples.problems
            if not p.ungradable
        ),
        ungradable=tuple(p.id for p in samples.problems if p.ungradable),
        verdicts=score.verdicts,
        identity=identity,
        samples_sha256=sha256_file(samples_path),
        lm_eval_pass_at=lm_eval_pass_at,
    )
    record.write(rundir.score_path(model, task.name))
    return record


def score_table(results: dict[ModelId, dict[str, ScoreRecord]], *, title: str) -> Table:
    """One row per model, pass@1 / pass@k per benchmark (percent; "tiny-" left out of the
    column names so seven suites fit a terminal)."""
    benches = sorted({b for per in results.values() for b in per})
    table = Table(title=title)
    table.add_column("model", style="bold")
    for b in benches:
        table.add_column(b.removeprefix("tiny-"), justify="right")
    for model, per in results.items():
        cells = []
        for b in benches:
            rec = per.get(b)
            if rec is None:
                cells.append("missing")
                continue
            cells.append(" / ".join(f"{100 * v:.1f}" for v in rec.pass_at.values()))
        table.add_row(model.name, *cells)
    return table


# --------------------------------------------------------------------------- score


def score_responses_file(
    task: EvalTask, responses_path: Path, verifier: Any
) -> tuple[BenchmarkScore, list[dict[str, Any]], list[str]]:
    """Grade a JSONL file of ``{"id": ..., "response": ...}`` lines against ``task``.

    Several lines may share an id (several samples). Returns the score over the problems
    that have responses, one verdict record per line, and the ids without any response.
    """
    numbered = read_jsonl_numbered(responses_path)
    if not numbered:
        raise DataError(f"{responses_path} has no responses")
    rows = [row for _, row in numbered]
    by_id = {p.id: p for p in task.problems}
    for lineno, row in numbered:
        where = f"{responses_path}:{lineno}"
        for name in ("id", "response"):
            if name not in row:
                raise DataError(f"{where}: missing field {name!r}")
        if not isinstance(row["response"], str):
            raise DataError(f"{where}: field 'response' must be a string")
        if str(row["id"]) not in by_id:
            raise DataError(
                f"{where}: id {row['id']!r} is not a problem of {task.name} "
                f"(ids look like {task.problems[0].id!r})"
            )
    requests = [GradeRequest(row["response"], *gold_of(by_id[str(row["id"])])) for row in rows]
    verdicts = verifier.grade_many(requests)
    grouped: dict[str, list[Verdict]] = defaultdict(list)
    for row, v in zip(rows, verdicts, strict=True):
        grouped[str(row["id"])].append(v)
    ids = [p.id for p in task.problems if p.id in grouped]
    score = score_problems([grouped[i] for i in ids], ids, task.ks)
    lines = [
        {"line": lineno, "id": str(row["id"]), "verdict": v.value, "correct": v.is_correct}
        for (lineno, row), v in zip(numbered, verdicts, strict=True)
    ]
    missing = [p.id for p in task.problems if p.id not in grouped]
    return score, lines, missing
