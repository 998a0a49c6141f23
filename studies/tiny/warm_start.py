"""What a warm start teaches: accuracy of the tiny model after SFT of a given length.

    python studies/tiny/warm_start.py OUT_DIR [--steps 2000] [--batch 32] [--lr 3e-3]
                                      [--direct-fraction 0.0] [--threads 1]

Builds the tiny preset's data and tokenizer (seed 0), runs the first warm-start phase
(worked solutions, or with ``--direct-fraction`` that share answered bare from the
start), saves the model to OUT_DIR, and prints the response loss along the way and, for
128 RL prompts and each tiny suite's test split, the accuracy of greedy decoding and of
4 samples at temperature 1 (with the share of bare answers, ``The answer is ...``, and the
accuracy of each way of answering). Not a test: it only prints. docs/worlds/tiny.md ("Why
2,000 steps, and why a second phase") quotes it.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import torch

from ictrepro.data.prompts import answer_kind, render_prompt
from ictrepro.data.suites import is_bare
from ictrepro.models.build import build_model
from ictrepro.models.tokenizer import train_tokenizer
from ictrepro.presets import prepare_preset
from ictrepro.rollout.hf import hf_generate
from ictrepro.rollout.params import SamplingParams
from ictrepro.stages.prepare import (
    build_data,
    tokenizer_corpus,
    tokenizer_problems,
    with_direct_answers,
)
from ictrepro.train.sft import run_sft
from ictrepro.verify.grade import Verdict, grade


def accuracy(model, tokenizer, problems, temperature: float) -> dict[str, str]:
    """Percent correct, percent bare, and percent correct of the bare and worked answers."""
    n = 1 if temperature == 0 else 4
    params = SamplingParams(n=n, temperature=temperature, max_new_tokens=96)
    prompts = [render_prompt(p, tokenizer) for p in problems]
    groups = hf_generate(model, tokenizer, prompts, params, seed=0, batch_size=256)
    rows = [
        (is_bare(c.text), grade(c.text, p.answer, kind=answer_kind(p)))
        for p, group in zip(problems, groups, strict=True)
        for c in group
    ]

    def pct(values: list[bool]) -> str:
        return f"{100 * sum(values) / len(values):.1f}%" if values else "–"

    return {
        "correct": pct([v == Verdict.CORRECT for _, v in rows]),
        "bare": pct([bare for bare, _ in rows]),
        "bare correct": pct([v == Verdict.CORRECT for bare, v in rows if bare]),
        "worked correct": pct([v == Verdict.CORRECT for bare, v in rows if not bare]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--direct-fraction", type=float, default=0.0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    config = prepare_preset("tiny")
    sft = dataclasses.replace(config.sft, steps=args.steps, lr=args.lr, batch_size=args.batch)
    config = dataclasses.replace(config, sft=sft)
    data = build_data(config)
    solutions = with_direct_answers(data["sft"], args.direct_fraction, seed=config.seed)
    tokenizer = train_tokenizer(
        tokenizer_corpus(tokenizer_problems(config, data)), vocab_size=config.model.vocab_size
    )
    model = build_model(config.model, tokenizer, seed=config.seed)
    start = time.perf_counter()
    log = run_sft(model, tokenizer, solutions, config.sft, seed=config.seed, show_progress=False)
    every = max(1, args.steps // 10)
    losses = ", ".join(f"{r['step']}: {r['loss']:.3f}" for r in log[::every] + log[-1:])
    print(f"SFT {time.perf_counter() - start:.0f} s; response loss by step: {losses}")
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)

    sets = {"RL prompts (128)": data["rl_train"][:128]}
    sets.update({k.removeprefix("test/"): v for k, v in data.items() if k.startswith("test/")})
    print("| set | greedy correct | T=1 correct | T=1 bare | bare correct | worked correct |")
    print("|---|---|---|---|---|---|")
    for name, problems in sets.items():
        greedy, sampled = (accuracy(model, tokenizer, problems, t) for t in (0.0, 1.0))
        print(
            f"| {name} | {greedy['correct']} | {sampled['correct']} | {sampled['bare']} "
            f"| {sampled['bare correct']} | {sampled['worked correct']} |"
        )


if __name__ == "__main__":
    main()
