"""What the fork world's warm start teaches: per subset, accuracy and the strategy chosen.

    python studies/fork/fork_world.py OUT_DIR [--preset tiny-fork] [--steps 600]
                                      [--threads 2] [--checkpoints 200,400]

Builds the preset's data and tokenizer (seed 0), runs its warm start for ``--steps`` steps,
saves the model to OUT_DIR, and at each checkpoint step prints, for each evaluation suite
(subset) and for 128 RL prompts, with 4 samples at temperature 1 within the preset's token
budget: the share answered correctly (the world's worked gold: a valid walk and the
answer), the share that turned down (the minority direction), and the accuracy of each
direction. Not a test: it only prints. docs/history.md ("The dial's warm start" and
"Getting a warm start that learns the tie") quotes it.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import torch

from ictrepro.data.prompts import gold_of, render_prompt
from ictrepro.data.suites import fork_strategy
from ictrepro.models.build import build_model
from ictrepro.models.tokenizer import train_tokenizer
from ictrepro.presets import get_preset, prepare_preset
from ictrepro.rollout.hf import hf_generate
from ictrepro.stages.prepare import build_data, tokenizer_corpus, tokenizer_problems
from ictrepro.train.sft import run_sft
from ictrepro.verify.grade import Verdict, grade


def strategies(model, tokenizer, problems, sampling) -> str:
    """A table row: correct, down share, up correct, down correct, no marker."""
    prompts = [render_prompt(p, tokenizer) for p in problems]
    groups = hf_generate(model, tokenizer, prompts, sampling, seed=0, batch_size=256)
    golds = [gold_of(p) for p in problems]
    rows = [
        (fork_strategy(c.text), grade(c.text, gold, kind=kind) == Verdict.CORRECT)
        for (gold, kind), group in zip(golds, groups, strict=True)
        for c in group
    ]

    def pct(values: list[bool]) -> str:
        return f"{100 * sum(values) / len(values):.1f}%" if values else "–"

    return " | ".join(
        [
            pct([ok for _, ok in rows]),
            pct([s == 1 for s, _ in rows]),
            pct([ok for s, ok in rows if s == 0]),
            pct([ok for s, ok in rows if s == 1]),
            pct([s is None for s, _ in rows]),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--preset", default="tiny-fork")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--n-sft", type=int, default=None, help="SFT problems per suite.")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--checkpoints", default="", help="Comma-separated steps to measure at.")
    parser.add_argument("--problems", type=int, default=128, help="Problems per set measured.")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    config = prepare_preset(args.preset)
    sft = dataclasses.replace(
        config.sft, steps=args.steps or config.sft.steps, lr=args.lr or config.sft.lr
    )
    data_spec = dataclasses.replace(config.data, n_sft=args.n_sft or config.data.n_sft)
    config = dataclasses.replace(config, sft=sft, data=data_spec)
    sampling = dataclasses.replace(get_preset(args.preset).eval.sampling, n=4)
    data = build_data(config)
    tokenizer = train_tokenizer(
        tokenizer_corpus(tokenizer_problems(config, data)), vocab_size=config.model.vocab_size
    )
    model = build_model(config.model, tokenizer, seed=config.seed)
    sets = {f"RL prompts ({args.problems})": data["rl_train"][: args.problems]}
    sets.update(
        {
            k.removeprefix("test/"): v[: args.problems]
            for k, v in data.items()
            if k.startswith("test/")
        }
    )
    marks = sorted({int(s) for s in args.checkpoints.split(",") if s} | {sft.steps})
    done, start = 0, time.perf_counter()
    print("| SFT steps | set | correct | turned down | up correct | down correct | no marker |")
    print("|---|---|---|---|---|---|---|")
    for mark in marks:
        # Continued in segments: the schedule restarts per segment, so only the last
        # checkpoint is the preset's warm start exactly.
        segment = dataclasses.replace(sft, steps=mark - done)
        log = run_sft(
            model, tokenizer, data["sft"], segment, seed=config.seed + done, show_progress=False
        )
        done = mark
        for name, problems in sets.items():
            print(
                f"| {mark} | {name} | {strategies(model, tokenizer, problems, sampling)} |",
                flush=True,
            )
        print(
            f"<!-- {mark} steps, {time.perf_counter() - start:.0f} s, loss {log[-1]['loss']:.3f} -->",
            flush=True,
        )
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)


if __name__ == "__main__":
    main()
