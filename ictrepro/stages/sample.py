"""``ictrepro sample``: draw n responses per problem of a benchmark from any model.

Writes a JSONL file with one ``{"id", "sample", "response"}`` line per response, the input
that ``ictrepro score --responses`` grades. Unlike ``eval`` it takes a single model
directory (or hub id) and keeps no record in a run directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from ictrepro.data.prompts import render_prompt, stop_strings
from ictrepro.errors import ConfigError
from ictrepro.io import atomic_write_jsonl
from ictrepro.stages.eval import load_task


@dataclass(frozen=True)
class SampleSummary:
    """What ``sample`` wrote: ``n_problems`` x ``n`` response lines to ``out``."""

    n_problems: int
    n: int
    out: Path


def sample(
    model: str | Path,
    benchmark: str,
    out: Path,
    *,
    run_dir: Path | None = None,
    data_dir: Path | None = None,
    n: int | None = None,
    backend: str = "hf",
    seed: int = 0,
    batch_size: int = 128,
    console: Console | None = None,
) -> SampleSummary:
    """Sample ``benchmark`` with ``model`` and write the responses to ``out`` atomically.

    ``run_dir`` locates a tiny suite's problems; ``data_dir`` a paper benchmark's local
    files; ``n`` overrides the benchmark's samples per problem. One sampler call covers
    every prompt, so the draws depend only on (model, prompts, settings, seed).
    """
    # here: transformers takes seconds, which `ictrepro sample --help` should not wait for
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from ictrepro.rollout.sampler import make_sampler

    hf_logging.disable_progress_bar()
    console = console or Console()
    task = load_task(benchmark, run_dir=run_dir, data_dir=data_dir, n=n)
    try:
        tokenizer = AutoTokenizer.from_pretrained(model)
        policy = AutoModelForCausalLM.from_pretrained(model) if backend == "hf" else None
    except OSError as e:
        # transformers reports a missing or incomplete model directory as an OSError.
        raise ConfigError(
            f"--model {model}: cannot load a model from it ({e}); pass a model directory "
            "such as RUN/base_model or RUN/train/<method>-seed<s>/final_model"
        ) from e
    sampler = make_sampler(backend, policy, tokenizer, batch_size=batch_size, model_path=str(model))
    prompts = [render_prompt(p, tokenizer) for p in task.problems]
    with console.status(f"sample: {len(prompts)} problems x {task.sampling.n} from {model}"):
        completions = sampler.sample(
            prompts, task.sampling, seed=seed, stop=stop_strings(tokenizer)
        )
    atomic_write_jsonl(
        out,
        (
            {"id": p.id, "sample": j, "response": c.text}
            for p, group in zip(task.problems, completions, strict=True)
            for j, c in enumerate(group)
        ),
    )
    return SampleSummary(len(prompts), task.sampling.n, Path(out))
