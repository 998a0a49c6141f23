"""What a fork-world warm start has learnt, token by token: the mean response loss at the
fork, at each digit of the walk and at the stated answer, and one greedy response.

    python studies/fork/fork_token_loss.py MODEL_DIR [--problems 64]

MODEL_DIR: a model and tokenizer saved by ``studies/fork/fork_world.py`` or ``RUN/base_model``
of a ``tiny-fork`` prepare. ln 10 = 2.303 is a uniform guess over the digits. Not a test:
it only prints. docs/history.md ("The dial's warm start") quotes it.
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from ictrepro.data.prompts import render_prompt
from ictrepro.data.suites import FORK_MARKERS, generate_suite

FORK_WORDS = {m.split()[-1].rstrip(":") for m in FORK_MARKERS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--problems", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(args.model).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    problems = generate_suite("tiny-fork-mix", seed=7, n_train=args.problems, n_test=0)["train"]
    losses = collections.defaultdict(list)
    for p in problems:
        prompt = render_prompt(p, tokenizer)
        start = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
        ids = tokenizer(prompt + p.solution, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logprobs = torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), -1)
        pieces = [tokenizer.decode([i]) for i in ids]
        walked = 0
        in_walk = False
        for j in range(start, len(ids)):
            piece, loss = pieces[j], -float(logprobs[j - 1, ids[j]])
            if piece.strip() in FORK_WORDS:
                kind = "fork"
            elif piece == ":":
                kind, in_walk = "other", True
            elif piece.isdigit() and pieces[j - 1] == "{":
                kind = "answer"
            elif piece.isdigit() and in_walk:
                kind, walked = f"walk digit {walked + 1}", walked + 1
            else:
                kind = "other"
            if piece == "." and in_walk:
                in_walk = False
            losses[kind].append(loss)
    print("| token | count | mean loss (nats) |\n|---|---|---|")
    for kind in sorted(losses, key=lambda k: (len(k), k)):
        values = losses[kind]
        print(f"| {kind} | {len(values)} | {sum(values) / len(values):.3f} |")
    prompt = render_prompt(problems[0], tokenizer)
    inputs = tokenizer([prompt], return_tensors="pt", add_special_tokens=False)
    out = model.generate(**inputs, max_new_tokens=30, do_sample=False)
    print(
        f"\n{problems[0].problem}\ngreedy: {tokenizer.decode(out[0][inputs['input_ids'].shape[1] :])}"
    )


if __name__ == "__main__":
    main()
