"""Whether ICT's group JS sees the fork: the fork's JS against how many of the group share its position.

    python studies/fork/fork_js_alignment.py MODEL_DIR [--preset tiny-fork] [--problems 48] [--samples 24]

Group JS ``u`` (``ictrepro.algos.token_stats``) compares a response's next-token
distribution with the group's mean *at the same position*. In the fork world the fork
token ("up"/"down" after "Turn") is an even choice; it differs from the group's mean only
where the other responses are somewhere else at that position. This samples ``--samples``
responses per training prompt from MODEL_DIR (temperature 1, the preset's budget), then
builds groups of 8 around each response that reaches a fork: the response itself, ``k``
others whose fork lies at the same position, and ``7 - k`` whose fork lies elsewhere
(``k`` = 0 .. 7, as far as the samples allow). For each ``k`` it prints the mean JS at the
fork, the mean JS at the response's other tokens, and the share of forks that ICT's mask
(the top 10% of the response's tokens by ``u``, ``top_fraction_mask``) selects, beside the
lowest ``u`` that mask keeps: what ICT would do with groups of that alignment. Last, the
groups as RL draws them (each prompt's samples split into groups of 8, whatever their
alignment): the share of forked responses whose fork ICT's mask selects, beside the 10% a
random mask of its size would. Uses the project's own JS and mask code; prints only.
"""

from __future__ import annotations

import argparse
import collections
import random
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from ictrepro.algos.selection import top_fraction_mask
from ictrepro.algos.token_stats import token_stats
from ictrepro.data.prompts import render_prompt
from ictrepro.data.suites import generate_suite
from ictrepro.presets import get_preset
from ictrepro.stages.prepare import with_response_prefix
from ictrepro.train.forks import fork_position

GROUP = 8


def sample_responses(
    model, tokenizer, prompt: str, n: int, budget: int, prefix: str = ""
) -> list[dict]:
    """``n`` sampled responses of ``prompt`` with their per-position logits ``[T, V]``."""
    inputs = tokenizer([prompt], return_tensors="pt", add_special_tokens=False)
    start = inputs["input_ids"].shape[1]
    with torch.no_grad():
        out = model.generate(
            **inputs,
            do_sample=True,
            temperature=1.0,
            top_p=1.0,
            max_new_tokens=budget,
            num_return_sequences=n,
            pad_token_id=tokenizer.pad_token_id,
        )
        logits = model(out).logits[:, start - 1 : -1].double()
    responses = []
    for row, row_logits in zip(out[:, start:], logits, strict=True):
        ids = row.tolist()
        length = (
            ids.index(tokenizer.eos_token_id) + 1 if tokenizer.eos_token_id in ids else len(ids)
        )
        ids = ids[:length]
        fork = fork_position(ids, tokenizer.decode(ids), tokenizer, prefix)
        responses.append({"ids": ids, "logits": row_logits[:length], "fork": fork})
    return responses


def group_js(members: list[dict]) -> torch.Tensor:
    """``u`` ``[G, T]`` of one group, by the project's ``token_stats``."""
    T = max(len(m["ids"]) for m in members)
    V = members[0]["logits"].shape[-1]
    logits = torch.zeros(len(members), T, V, dtype=torch.float64)
    tokens = torch.zeros(len(members), T, dtype=torch.long)
    mask = torch.zeros(len(members), T, dtype=torch.bool)
    for i, m in enumerate(members):
        n = len(m["ids"])
        logits[i, :n], tokens[i, :n], mask[i, :n] = m["logits"], torch.tensor(m["ids"]), True
    stats = token_stats(logits, tokens, mask, torch.zeros(len(members), dtype=torch.long))
    return stats.js, mask


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--preset", default="tiny-fork", help="A fork-world preset.")
    parser.add_argument("--problems", type=int, default=48)
    parser.add_argument("--samples", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    model = AutoModelForCausalLM.from_pretrained(args.model).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    preset = get_preset(args.preset)
    budget = preset.train.rl.max_new_tokens
    rl_suite = preset.prepare.data.rl_suite
    problems = generate_suite(rl_suite, seed=7, n_train=args.problems, n_test=0)["train"]
    prefix = preset.prepare.data.response_prefix  # a control's: its prompts end with it
    problems = with_response_prefix(problems, prefix) if prefix else problems
    rows = collections.defaultdict(
        lambda: {"n": 0, "fork": 0.0, "other": 0.0, "threshold": 0.0, "gap": 0.0, "selected": 0}
    )
    positions = collections.Counter()
    natural = {"forks": 0, "selected": 0, "fork_js": 0.0, "other_js": 0.0, "others": 0}
    for problem in problems:
        responses = sample_responses(
            model, tokenizer, render_prompt(problem, tokenizer), args.samples, budget, prefix
        )
        for at in range(0, len(responses) - GROUP + 1, GROUP):
            members = responses[at : at + GROUP]
            js, mask = group_js(members)
            selected = top_fraction_mask(js, mask, 0.1, "sequence")
            for i, m in enumerate(members):
                if m["fork"] is None:
                    continue
                where = m["fork"][0]
                u = js[i, : len(m["ids"])]
                natural["forks"] += 1
                natural["selected"] += bool(selected[i, where])
                natural["fork_js"] += float(u[where])
                natural["other_js"] += float(u.sum() - u[where])
                natural["others"] += len(u) - 1
        forked = [r for r in responses if r["fork"] is not None]
        for focus in forked:
            where = focus["fork"][0]
            positions[where] += 1
            same = [r for r in forked if r is not focus and r["fork"][0] == where]
            other = [r for r in forked if r["fork"][0] != where]
            for k in range(GROUP):
                if k > len(same) or GROUP - 1 - k > len(other):
                    continue
                members = [focus, *rng.sample(same, k), *rng.sample(other, GROUP - 1 - k)]
                js, mask = group_js(members)
                selected = top_fraction_mask(js, mask, 0.1, "sequence")[0]
                u = js[0, : len(focus["ids"])]
                row = rows[k]
                row["n"] += 1
                row["fork"] += float(u[where])
                row["other"] += float((u.sum() - u[where]) / max(1, len(u) - 1))
                lowest = float(u[selected[: len(u)]].min())
                row["threshold"] += lowest
                row["gap"] += lowest - float(u[where])
                row["selected"] += bool(selected[where])
    print(f"fork positions (response token index): {dict(sorted(positions.items()))}")
    print(
        "| others at the fork's position (of 7) | groups | JS at the fork (nats) "
        "| JS at other tokens (nats) | lowest JS ICT selects (nats) | that minus the fork's "
        "| forks ICT selects |"
    )
    print("|---|---|---|---|---|---|---|")
    for k in sorted(rows):
        r = rows[k]
        n = r["n"]
        print(f"| {k} | {n} | {r['fork'] / n:.4f} | {r['other'] / n:.4f} "
              f"| {r['threshold'] / n:.4f} | {r['gap'] / n:.1e} | {100 * r['selected'] / n:.1f}% |")  # fmt: skip
    n = max(1, natural["forks"])
    print(
        f"\nGroups of {GROUP} as sampled ({natural['forks']} forked responses): "
        f"ICT selects {100 * natural['selected'] / n:.1f}% of forks; "
        f"JS at the fork {natural['fork_js'] / n:.4f} nats, "
        f"at other tokens {natural['other_js'] / max(1, natural['others']):.4f} nats"
    )


if __name__ == "__main__":
    main()
