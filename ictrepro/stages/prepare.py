"""``ictrepro prepare``: build the CPU-scale world of a preset into a run directory.

Writes, in this order, each atomically::

    RUN/prepare.json            status "running" first; "done" + output hashes last
    RUN/data/test/<suite>.jsonl evaluation problems of each of the seven tiny suites
    RUN/data/sft.jsonl          worked solutions for the warm start (train splits)
    RUN/data/sft_direct.jsonl   the same problems, some answered bare (second phase; if any)
    RUN/data/rl_train.jsonl     RL prompts (GSM8K + MATH-like mixture), no test problem
    RUN/base_model/             tokenizer + warm-started Qwen2ForCausalLM (HF format)
    RUN/sft_log.jsonl           loss per SFT step
    RUN/calibration.json        base-model pass@1 / pass@k per suite

Every training problem is checked to be absent from every test split (by problem text).

A pretrained base model with the real data (the paper presets, ``smollm2-135m``) is
prepared by :mod:`ictrepro.stages.prepare_pretrained`; :func:`prepare` takes either config.
"""

from __future__ import annotations

import dataclasses
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as hf_logging

from ictrepro.config import PrepareConfig, PretrainedPrepareConfig
from ictrepro.data.prompts import render_prompt, user_message
from ictrepro.data.records import Problem
from ictrepro.data.suites import bare_solution, generate_suite, with_varied_lead
from ictrepro.errors import ConfigError, DataError
from ictrepro.evaluate.score import SuiteScore, grade_responses, score_verdicts
from ictrepro.io import (
    atomic_directory,
    atomic_write_json,
    atomic_write_jsonl,
    hash_outputs,
    read_jsonl,
)
from ictrepro.models.build import build_model, count_parameters
from ictrepro.models.tokenizer import train_tokenizer
from ictrepro.progress import progress_bar
from ictrepro.results.pinned import RESULTS_DIR
from ictrepro.results.worlds import copy_shipped, shipped_world, weights_match, world_dir
from ictrepro.rollout.hf import hf_generate
from ictrepro.rundir import RunDir, StageRecord, data_file, decide, load_record, write_record
from ictrepro.stages.prepare_pretrained import prepare_pretrained
from ictrepro.train.sft import run_sft
from ictrepro.verify import Verifier

STAGE = "prepare"


@dataclass(frozen=True)
class PrepareResult:
    run_dir: Path
    skipped: bool
    record: dict[str, Any]


def build_data(config: PrepareConfig) -> dict[str, list[Problem]]:
    """``{"test/<suite>": [...], "sft": [...], "rl_train": [...]}``, train disjoint from tests,
    and ``"sft_direct"`` (the second warm-start phase's solutions) when it has steps."""
    spec = config.data
    tests = {
        s: generate_suite(s, seed=config.seed, n_train=0, n_test=spec.n_test)["test"]
        for s in spec.eval_suites
    }
    test_texts = {p.problem for problems in tests.values() for p in problems}
    extra = dict(spec.sft_extra)
    unknown = set(extra) - set(spec.eval_suites)
    if unknown:
        raise ConfigError(
            f"data.sft_extra names {sorted(unknown)}, which are not eval suites; "
            f"valid: {', '.join(spec.eval_suites)}"
        )
    sft = [
        p
        for s in spec.eval_suites
        for p in generate_suite(
            s, seed=config.seed, n_train=spec.n_sft + extra.get(s, 0), n_test=0, exclude=test_texts
        )["train"]
    ]
    rl = generate_suite(
        spec.rl_suite, seed=config.seed, n_train=spec.n_rl_train, n_test=0, exclude=test_texts
    )["train"]
    leaked = {p.problem for p in sft + rl} & test_texts
    if leaked:  # generate_suite excludes them; this guards the guarantee itself
        raise AssertionError(f"{len(leaked)} test problems leaked into training data")
    if spec.response_prefix:
        tests = {s: with_response_prefix(v, spec.response_prefix) for s, v in tests.items()}
        rl = with_response_prefix(rl, spec.response_prefix)
    sft = with_wording_noise(sft, spec.wording_noise, seed=config.seed)
    data = {**{f"test/{s}": v for s, v in tests.items()}, "sft": sft, "rl_train": rl}
    if config.sft.direct_steps:
        data["sft_direct"] = with_direct_answers(sft, spec.direct_fraction, seed=config.seed)
    return data


def with_response_prefix(problems: list[Problem], prefix: str) -> list[Problem]:
    """``problems`` whose prompts end with ``prefix`` (``meta.response_prefix``, which
    ``render_prompt`` writes after the assistant's turn opens)."""
    return [dataclasses.replace(p, meta={**p.meta, "response_prefix": prefix}) for p in problems]


def with_wording_noise(problems: list[Problem], noise: float, *, seed: int) -> list[Problem]:
    """``problems`` whose solutions' answer leads vary (``with_varied_lead``), from their own
    random stream of ``seed``, so the rest of the data does not depend on ``noise``."""
    if not 0.0 <= noise <= 1.0:
        raise ConfigError(f"data.wording_noise must be in [0, 1], got {noise}")
    if noise == 0:
        return problems
    rng = random.Random(f"sft-wording/{seed}")
    return [
        dataclasses.replace(p, solution=with_varied_lead(p.solution, rng, noise)) for p in problems
    ]


def with_direct_answers(problems: list[Problem], fraction: float, *, seed: int) -> list[Problem]:
    """``problems`` with about ``fraction`` of their solutions replaced by the bare final
    answer, chosen per problem from ``seed``; ``meta["style"]`` says which ("worked" or
    "direct")."""
    if not 0.0 <= fraction <= 1.0:
        raise ConfigError(f"data.direct_fraction must be in [0, 1], got {fraction}")
    if fraction == 0:
        return problems
    rng = random.Random(f"sft-style/{seed}")
    out = []
    for p in problems:
        direct = rng.random() < fraction
        solution = bare_solution(p.answer) if direct else p.solution
        meta = {**p.meta, "style": "direct" if direct else "worked"}
        out.append(dataclasses.replace(p, solution=solution, meta=meta))
    return out


def warm_start_model(
    model: torch.nn.Module,
    tokenizer: Any,
    data: dict[str, list[Problem]],
    config: PrepareConfig,
    *,
    show_progress: bool,
) -> list[dict[str, Any]]:
    """SFT on the worked solutions, then (``sft.direct_steps``) on ``data["sft_direct"]``;
    one log row per step, ``phase`` "worked" or "direct". Runs on ``sft.threads`` threads."""
    spec = config.sft
    threads = torch.get_num_threads()
    torch.set_num_threads(spec.threads)
    try:
        log = run_sft(
            model, tokenizer, data["sft"], spec, seed=config.seed, show_progress=show_progress
        )
        rows = [{**row, "phase": "worked"} for row in log]
        if spec.direct_steps:
            second = dataclasses.replace(spec, steps=spec.direct_steps, lr=spec.direct_lr)
            log = run_sft(
                model,
                tokenizer,
                data["sft_direct"],
                second,
                seed=config.seed + 1,  # another batch order than the first phase's
                show_progress=show_progress,
            )
            rows += [{**row, "step": spec.steps + row["step"], "phase": "direct"} for row in log]
    finally:
        torch.set_num_threads(threads)
    return rows


def tokenizer_problems(config: PrepareConfig, data: dict[str, list[Problem]]) -> list[Problem]:
    """The problems whose texts the tokenizer learns: the warm start's and the RL prompts',
    with the solutions as generated, before ``data.wording_noise`` varies their leads (the
    variants are words the tokenizer has anyway), so the token ids, and with them the
    initial weights, are those of the same world without the variants."""
    if config.data.wording_noise:
        plain = dataclasses.replace(config.data, wording_noise=0.0)
        data = build_data(dataclasses.replace(config, data=plain))
    return data["sft"] + data["rl_train"]


def tokenizer_corpus(problems: list[Problem]) -> list[str]:
    """Texts the tokenizer learns from: role names, user messages and solutions, as the
    chat template lays them out (special tokens are added by the tokenizer itself)."""
    return [f"user\n{user_message(p)}\nassistant\n{p.solution}" for p in problems]


def calibrate(
    model: torch.nn.Module,
    tokenizer: Any,
    tests: dict[str, list[Problem]],
    config: PrepareConfig,
    *,
    show_progress: bool,
) -> dict[str, SuiteScore]:
    """Base-model pass@1 and pass@n on the first problems of each test suite."""
    spec = config.calibration
    ks = sorted({1, spec.sampling.n})
    scores = {}
    # Grading in-process: a few thousand short responses take seconds, less than starting
    # worker processes; the verifier's signal-based time limit still applies (main thread).
    with (
        Verifier(workers=0) as verifier,
        progress_bar("calibration", total=len(tests), enabled=show_progress) as advance,
    ):
        for suite, problems in tests.items():
            problems = problems[: spec.n_problems]
            prompts = [render_prompt(p, tokenizer) for p in problems]
            completions = hf_generate(
                model, tokenizer, prompts, spec.sampling, seed=config.seed, batch_size=256
            )
            texts = [[c.text for c in group] for group in completions]
            scores[suite] = score_verdicts(grade_responses(problems, texts, verifier), ks)
            advance()
    return scores


def calibration_table(scores: dict[str, SuiteScore], title: str) -> Table:
    ks = sorted(next(iter(scores.values())).pass_at)
    table = Table(title=title)
    table.add_column("suite", style="bold")
    table.add_column("problems", justify="right")
    for k in ks:
        table.add_column(f"pass@{k}", justify="right")
    table.add_column("no answer", justify="right")
    for suite, score in scores.items():
        cells = [f"{100 * score.pass_at[k]:.1f}%" for k in ks]
        total = sum(score.verdicts.values())
        no_answer = f"{100 * score.verdicts['no_answer'] / total:.0f}%"
        table.add_row(suite, str(score.n_problems), *cells, no_answer)
    return table


def prepare(
    config: PrepareConfig | PretrainedPrepareConfig,
    run_dir: Path,
    *,
    force: bool = False,
    show_progress: bool = True,
    console: Console | None = None,
    warm_start: bool | None = None,
    results_dir: Path = RESULTS_DIR,
) -> PrepareResult:
    """Build (or confirm up to date) the run directory of ``config``; see module docstring.

    The base model of a CPU world: the shipped one (``results_dir/worlds/<world>/``,
    :mod:`ictrepro.results.worlds`, hash-checked) when there is one, else the warm start.
    ``warm_start`` True trains it even so (and says whether it came out as the shipped
    one); False refuses to train it (a world whose pinned baselines need that model)."""
    if isinstance(config, PretrainedPrepareConfig):
        skipped, record = prepare_pretrained(
            config, run_dir, force=force, show_progress=show_progress, console=console
        )
        return PrepareResult(Path(run_dir), skipped, record)
    console = console or Console(quiet=not show_progress)
    run_dir = Path(run_dir)
    config_sha = config.sha256()
    state = decide(RunDir(run_dir).record(STAGE), config.to_json(), force=force)
    if state == "current":
        console.print(f"[green]prepare: {run_dir} is up to date[/] (config {config_sha[:12]})")
        return PrepareResult(run_dir, True, load_record(run_dir, STAGE) or {})
    try:
        shipped = shipped_world(config.preset, config_sha, results_dir)
    except DataError:
        if not warm_start:
            raise
        shipped = None  # another config's (or a changed) world: nothing to compare with
    if shipped is None and warm_start is False:
        raise ConfigError(
            f"world {config.preset!r} has no shipped base model in "
            f"{world_dir(config.preset, results_dir)}: run in a checkout of ictrepro (or name "
            "its results/ folder), or train the base model with --warm-start"
        )

    timings: dict[str, float] = {}
    start = time.perf_counter()
    run_dir.mkdir(parents=True, exist_ok=True)
    write_record(run_dir, StageRecord(STAGE, "running", config.to_json(), config.to_json(), {}, {}))

    t = time.perf_counter()
    data = build_data(config)
    # One directory swap for all data files, so no stale file of an earlier config survives.
    with atomic_directory(RunDir(run_dir).data) as tmp:
        for name, problems in data.items():
            atomic_write_jsonl(data_file(tmp, name), (p.to_json() for p in problems))
    timings["data_s"] = time.perf_counter() - t

    t = time.perf_counter()
    from_shipped = shipped is not None and not warm_start
    if from_shipped:
        copy_shipped(shipped, run_dir)
        hf_logging.disable_progress_bar()  # a loading bar per file would break the display
        model = AutoModelForCausalLM.from_pretrained(RunDir(run_dir).base_model)
        tokenizer = AutoTokenizer.from_pretrained(RunDir(run_dir).base_model)
        sft_log = read_jsonl(RunDir(run_dir).sft_log)
    else:
        tokenizer = train_tokenizer(
            tokenizer_corpus(tokenizer_problems(config, data)), vocab_size=config.model.vocab_size
        )
        model = build_model(config.model, tokenizer, seed=config.seed)
    timings["tokenizer_s"] = time.perf_counter() - t  # built, or loaded from the shipped world
    console.print(
        f"prepare: {len(data['sft'])} SFT solutions, {len(data['rl_train'])} RL prompts, "
        f"vocabulary {len(tokenizer)}, model {count_parameters(model) / 1e6:.2f}M parameters"
    )
    t = time.perf_counter()
    if from_shipped:
        console.print(f"prepare: the base model is the shipped one ({shipped}; hash-checked)")
    else:
        sft_log = warm_start_model(model, tokenizer, data, config, show_progress=show_progress)
        with atomic_directory(RunDir(run_dir).base_model) as tmp:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        atomic_write_jsonl(RunDir(run_dir).sft_log, sft_log)
        if shipped is not None:
            same = weights_match(shipped, RunDir(run_dir).base_model)
            console.print(
                f"prepare: the warm start built {'the' if same else 'ANOTHER'} base model "
                f"{'as' if same else 'than'} the shipped one ({shipped})"
            )
    timings["sft_s"] = time.perf_counter() - t

    t = time.perf_counter()
    tests = {name.removeprefix("test/"): v for name, v in data.items() if name.startswith("test/")}
    scores = calibrate(model, tokenizer, tests, config, show_progress=show_progress)
    timings["calibration_s"] = time.perf_counter() - t
    calibration = {
        "note": "plain sampling from the base model + the project's verifier",
        "sampling": dataclasses.asdict(config.calibration),
        "suites": {
            s: {
                "n_problems": v.n_problems,
                "n_samples": v.n_samples,
                "pass_at": {str(k): p for k, p in v.pass_at.items()},
                "verdicts": v.verdicts,
            }
            for s, v in scores.items()
        },
    }
    atomic_write_json(RunDir(run_dir).calibration, calibration)
    timings["total_s"] = time.perf_counter() - start

    info = {
        "base_model_from": str(shipped) if from_shipped else "warm start",
        "timings": timings,
        "parameters": count_parameters(model),
        "vocab_size": len(tokenizer),
        "final_sft_loss": sft_log[-1]["loss"],
        "torch_threads": torch.get_num_threads(),
    }
    rundir = RunDir(run_dir)
    outputs = hash_outputs(
        run_dir, rundir.relative(rundir.data, rundir.base_model, rundir.sft_log, rundir.calibration)
    )
    record = StageRecord(STAGE, "done", config.to_json(), config.to_json(), outputs, info)
    write_record(run_dir, record)
    console.print(calibration_table(scores, f"Base model ({config.preset}, seed {config.seed})"))
    console.print(f"prepare: done in {timings['total_s']:.0f} s -> {run_dir}")
    return PrepareResult(run_dir, False, record.to_json())
