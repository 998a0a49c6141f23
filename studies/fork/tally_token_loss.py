"""What a tally-world warm start has learnt: the mean loss at each kind of response token,
and the probability of turning up after each verb (the fork's dependence on the verb).

    python studies/fork/tally_token_loss.py MODEL_DIR [--problems 128]

MODEL_DIR: a model and tokenizer saved by ``studies/fork/fork_world.py --preset tiny-fork-tally``
or ``RUN/base_model`` of a ``tiny-fork-tally`` prepare. Each warm-start solution is scored
as the warm start writes it (teacher forcing, 128 RL prompts of seed 7). A verb the warm
start learnt to tie to the fork shows ``p(up | verb)`` near its ``TALLY_VERB_UP`` value;
an untied fork shows about 0.5 after every verb. Not a test: it only prints.
docs/worlds/fork.md ("The tally world") quotes it.
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from ictrepro.data.prompts import render_prompt
from ictrepro.data.suites import TALLY_VERB_UP, generate_suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--problems", type=int, default=128)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(args.model).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    (up,) = tokenizer(" up", add_special_tokens=False)["input_ids"]
    problems = generate_suite("tiny-fork-tally-mix", seed=7, n_train=args.problems, n_test=0)
    losses, p_up = collections.defaultdict(list), collections.defaultdict(list)
    for p in problems["train"]:
        prompt = render_prompt(p, tokenizer)
        start = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
        ids = tokenizer(prompt + p.solution, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), dim=-1)
        response = [tokenizer.decode([i]) for i in ids[start:]]
        for i, token in enumerate(response):
            nll = -float(logp[start + i - 1, ids[start + i]])
            if i == 0:
                kind = "verb"
            elif i == 1:
                kind = "fork"
                p_up[response[0]].append(float(logp[start, up].exp()))
            elif token == "." and i == len(response) - 1:
                kind = "stop (the full stop after the last count)"
            elif token == ",":
                kind = "go on (a comma in the count)"
            else:
                kind = "other"
            losses[kind].append(nll)
    print("| response token | n | mean loss (nats) |")
    print("|---|---|---|")
    for kind, values in losses.items():
        print(f"| {kind} | {len(values)} | {sum(values) / len(values):.3f} |")
    print("\n| verb | warm-start data: p(up) | model: p(up) | n |")
    print("|---|---|---|---|")
    for verb, lean in TALLY_VERB_UP.items():
        values = p_up[verb]
        mean = f"{sum(values) / len(values):.3f}" if values else "–"
        print(f"| {verb} | {lean:.2f} | {mean} | {len(values)} |")


if __name__ == "__main__":
    main()
