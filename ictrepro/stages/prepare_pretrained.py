"""``ictrepro prepare`` of a pretrained base model and the real data (paper presets, smollm2-135m).

Writes, in this order, each atomically::

    RUN/prepare.json                 status "running" first; "done" + output hashes last
    RUN/data/rl_train.jsonl          the RL training sets (GSM8K train + MATH train), in order
    RUN/data/test/<benchmark>.jsonl  each evaluation benchmark (or its fixed subset)
    RUN/data/eval.json               each benchmark's decoding (n, pass@k, ...) for `ictrepro eval`
    RUN/base_model/                  the base model and tokenizer in Hugging Face format

Data come from the hub or from ``--data-dir`` (``ictrepro.data.benchmarks``); the model from a
hub id, a local directory or a GGUF file (``ictrepro.models.load``). The run directory then
holds everything the later stages read, with the same records, hashes and refusals as the
tiny world's ``prepare``: ``train`` and ``eval`` need neither the hub nor ``--data-dir``.
"""

from __future__ import annotations

import dataclasses
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from ictrepro.config import PretrainedPrepareConfig
from ictrepro.data.benchmarks import BENCHMARKS, PAPER_BENCHMARKS, TRAINING_SETS, load_benchmark
from ictrepro.data.prompts import render_prompt
from ictrepro.data.records import Problem
from ictrepro.data.word_arithmetic import TASKS
from ictrepro.errors import DataError
from ictrepro.io import (
    atomic_directory,
    atomic_write_json,
    atomic_write_jsonl,
    hash_outputs,
    read_jsonl,
    sha256_file,
)
from ictrepro.models.build import count_parameters
from ictrepro.models.load import load_pretrained, resolve_source
from ictrepro.rollout.params import SamplingParams
from ictrepro.rundir import (
    EVAL_SETTINGS,
    RunDir,
    StageRecord,
    data_file,
    decide,
    load_record,
    write_record,
)

STAGE = "prepare"


@dataclass(frozen=True)
class PreparedBenchmark:
    """A benchmark as prepared into a run directory: its file and decoding."""

    name: str
    path: Path
    sampling: SamplingParams
    ks: tuple[int, ...]


def deviations(config: PretrainedPrepareConfig) -> list[str]:
    """How this run's data differ from the paper's set-up, in words (recorded and reported)."""
    notes = []
    if config.task is not None:
        notes.append(
            f"RL training data and the first evaluation: the generated task {config.task} "
            f"({config.task_train} training and {config.task_test} test problems; "
            "docs/paper-scale.md), not the paper's data"
        )
    left_out = [s for s in TRAINING_SETS if s not in config.train_sets]
    if left_out and config.train_sets:  # with none, the task's note above says it
        notes.append(
            f"RL training data: {' + '.join(config.train_sets)} only "
            f"(the paper: {' + '.join(TRAINING_SETS)}; left out: {', '.join(left_out)})"
        )
    skipped = [b for b in PAPER_BENCHMARKS if b not in evaluated(config)]
    if skipped:
        notes.append(f"not evaluated on the paper's benchmark(s) {', '.join(skipped)}")
    for name, n in config.eval_limits:
        if name in evaluated(config):
            notes.append(f"{name}: a fixed subset of {n} problems (of {BENCHMARKS[name].size})")
    return notes


def evaluated(config: PretrainedPrepareConfig) -> tuple[str, ...]:
    return tuple(b for b in config.benchmarks if b not in config.skip_benchmarks)


def fixed_subset(problems: list[Problem], name: str, n: int) -> list[Problem]:
    """``n`` problems drawn once by a generator seeded with ``name``, in source order: the
    same subset on every machine and for every run seed."""
    if n >= len(problems):
        return problems
    keep = sorted(random.Random(f"subset:{name}").sample(range(len(problems)), n))
    return [problems[i] for i in keep]


def _data_dir(config: PretrainedPrepareConfig) -> Path | None:
    return None if config.data_dir is None else Path(config.data_dir)


def generated_task(config: PretrainedPrepareConfig) -> dict[str, list[Problem]]:
    """The generated task's splits (``{"train": [...], "test": [...]}``; empty without one)."""
    if config.task is None:
        return {}
    return TASKS[config.task](seed=0, n_train=config.task_train, n_test=config.task_test)


def load_training_data(config: PretrainedPrepareConfig) -> dict[str, list[Problem]]:
    """``{training set: problems}`` (a generated task's training split last); a missing set is
    a ``DataError`` that names it, where it was looked for, and the two ways on: supply it,
    or leave it out with ``--train-sets``."""
    out = {}
    for name in config.train_sets:
        try:
            out[name] = load_benchmark(name, data_dir=_data_dir(config))
        except DataError as e:
            others = [s for s in config.train_sets if s != name]
            leave_out = (
                f" To train without it, pass --train-sets {','.join(others)} (the run records "
                "and the report say so)."
                if others
                else ""
            )
            raise DataError(f"RL training set {name!r} is missing: {e}{leave_out}") from e
    if config.task is not None:
        out[config.task] = generated_task(config)["train"]
    return out


def load_eval_data(config: PretrainedPrepareConfig) -> dict[str, list[Problem]]:
    """``{benchmark: problems}`` of every evaluated benchmark (subsets applied); a missing
    one is a ``DataError`` naming it, how to get it (GPQA is gated) and ``--skip-benchmarks``."""
    limits = dict(config.eval_limits)
    # The generated task's test split first: the report's first table is the task it trains on.
    out = {config.task: generated_task(config)["test"]} if config.task is not None else {}
    for name in evaluated(config):
        try:
            problems = load_benchmark(name, data_dir=_data_dir(config))
        except DataError as e:
            spec = BENCHMARKS[name]
            access = (
                f" {spec.hub_id} is gated: request access on "
                f"https://huggingface.co/datasets/{spec.hub_id}, log in with "
                "`huggingface-cli login`, and run without --data-dir (or write it to "
                f"DIR/{name}/test.jsonl on a machine with access: docs/benchmarks.md)."
                if spec.gated
                else ""
            )
            raise DataError(
                f"evaluation benchmark {name!r} is missing: {e}{access} To run without it, pass "
                f"--skip-benchmarks {name} (the report marks it as not evaluated)."
            ) from e
        out[name] = fixed_subset(problems, name, limits[name]) if name in limits else problems
    return out


def benchmark_settings(config: PretrainedPrepareConfig, name: str) -> dict[str, Any]:
    """The decoding of benchmark ``name``'s evaluation: the config's, else the benchmark's."""
    if name == config.task and config.task_sampling is not None:
        sampling, ks = config.task_sampling, config.eval_ks or (1,)
        return {"sampling": dataclasses.asdict(sampling), "ks": list(ks)}
    spec = BENCHMARKS[name]
    if config.eval_sampling is not None:
        sampling, ks = config.eval_sampling, config.eval_ks or (1,)
    else:
        sampling = SamplingParams(spec.n, spec.temperature, spec.top_p, spec.max_new_tokens)
        ks = spec.ks or (1,)
    return {"sampling": dataclasses.asdict(sampling), "ks": list(ks)}


def remove_test_problems(
    train: dict[str, list[Problem]], tests: dict[str, list[Problem]]
) -> tuple[list[Problem], int]:
    """The training problems in order, without any whose text is a test problem's; and how
    many were removed (GSM8K and MATH train are disjoint from their tests, so 0 is expected)."""
    test_texts = {p.problem.strip() for problems in tests.values() for p in problems}
    kept = [
        p for problems in train.values() for p in problems if p.problem.strip() not in test_texts
    ]
    return kept, sum(len(v) for v in train.values()) - len(kept)


def prepare_pretrained(
    config: PretrainedPrepareConfig,
    run_dir: Path,
    *,
    force: bool = False,
    show_progress: bool = True,
    console: Console | None = None,
) -> tuple[bool, dict[str, Any]]:
    """Build (or confirm up to date) ``run_dir`` for ``config``: ``(skipped, record)``."""
    console = console or Console(quiet=not show_progress)
    run_dir = Path(run_dir)
    config.check()
    source = resolve_source(config.model)  # a bad --model fails before anything is written
    config_sha = config.sha256()
    state = decide(RunDir(run_dir).record(STAGE), config.to_json(), force=force)
    if state == "current":
        console.print(f"[green]prepare: {run_dir} is up to date[/] (config {config_sha[:12]})")
        return True, load_record(run_dir, STAGE) or {}

    timings: dict[str, float] = {}
    start = time.perf_counter()
    # Data first: a missing part is found in seconds, before minutes of model loading.
    train = load_training_data(config)
    tests = load_eval_data(config)
    rl_train, removed = remove_test_problems(train, tests)
    timings["data_s"] = time.perf_counter() - start

    run_dir.mkdir(parents=True, exist_ok=True)
    write_record(run_dir, StageRecord(STAGE, "running", config.to_json(), config.to_json(), {}, {}))
    rundir = RunDir(run_dir)
    with atomic_directory(rundir.data) as tmp:
        atomic_write_jsonl(data_file(tmp, "rl_train"), (p.to_json() for p in rl_train))
        for name, problems in tests.items():
            atomic_write_jsonl(data_file(tmp, f"test/{name}"), (p.to_json() for p in problems))
        # A list: the benchmarks' order is the preset's (JSON objects are written sorted).
        settings = [{"name": name, **benchmark_settings(config, name)} for name in tests]
        atomic_write_json(tmp / EVAL_SETTINGS, settings)

    t = time.perf_counter()
    console.print(f"prepare: loading {source.describe()} ({config.dtype})")
    model, tokenizer = load_pretrained(source, dtype=config.dtype, show_progress=show_progress)
    timings["model_load_s"] = time.perf_counter() - t
    t = time.perf_counter()
    with atomic_directory(rundir.base_model) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    timings["model_save_s"] = time.perf_counter() - t

    source_hash = (
        sha256_file(source.location)
        if source.kind == "gguf"
        else hash_outputs(source.location, ["."])
        if source.kind == "dir"
        else getattr(model.config, "_commit_hash", None)
    )
    notes = deviations(config)
    info = {
        "source": {"kind": source.kind, "location": source.location, "sha256": source_hash},
        "architecture": type(model).__name__,
        "parameters": count_parameters(model),
        "vocab_size": len(tokenizer),
        "chat_template": bool(getattr(tokenizer, "chat_template", None)),
        "example_prompt": render_prompt(rl_train[0], tokenizer),
        "rl_train": {name: len(problems) for name, problems in train.items()},
        "rl_train_removed_as_test": removed,
        "benchmarks": {name: len(problems) for name, problems in tests.items()},
        "deviations": notes,
        "timings": {**timings, "total_s": time.perf_counter() - start},
    }
    record = StageRecord(
        STAGE,
        "done",
        config.to_json(),
        config.to_json(),
        hash_outputs(run_dir, rundir.relative(rundir.data, rundir.base_model)),
        info,
    )
    write_record(run_dir, record)
    console.print(
        f"prepare: {info['architecture']} {info['parameters'] / 1e6:.1f}M parameters, "
        f"vocabulary {info['vocab_size']:,}; {len(rl_train):,} RL prompts "
        f"({', '.join(f'{k} {v:,}' for k, v in info['rl_train'].items())}); benchmarks: "
        + ", ".join(f"{k} {v}" for k, v in info["benchmarks"].items())
    )
    for note in notes:
        console.print(f"[yellow]prepare: deviation from the paper: {note}[/]")
    console.print(f"prepare: done in {info['timings']['total_s']:.0f} s -> {run_dir}")
    return False, record.to_json()


def prepared_benchmarks(run_dir: Path) -> dict[str, PreparedBenchmark] | None:
    """The benchmarks a pretrained-model run directory was prepared with (None: it was not;
    e.g. a tiny run, whose suites ``ictrepro eval`` knows itself)."""
    rundir = RunDir(run_dir)
    path = rundir.eval_settings
    if not path.is_file():
        return None
    settings = json.loads(path.read_text(encoding="utf-8"))
    return {
        s["name"]: PreparedBenchmark(
            s["name"],
            rundir.test_suite(s["name"]),
            SamplingParams(**s["sampling"]),
            tuple(s["ks"]),
        )
        for s in settings
    }


def read_prepared(path: Path) -> list[Problem]:
    """The problems of a prepared benchmark file."""
    return [Problem.from_json(r, where=f"{path}:{i + 1}") for i, r in enumerate(read_jsonl(path))]
