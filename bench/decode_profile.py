"""Where a training step's sampling time goes on a tiny world's model (not a test).

    python bench/decode_profile.py RUN [--prompts 8] [--n 8] [--max-new-tokens 27] [--repeats 10]

RUN is a prepared tiny-world run directory (``runs/tiny-fork``). On one thread, as a
reproduction's worker runs: the wall time of one ``hf_generate`` call of the RL step's shape
(``--prompts`` training prompts x ``--n`` samples, temperature 1), as the project samples
(each prompt run once for its samples) and with ``generate``'s own expansion of
the prompts (``share_prompts=False``), beside the same number of the model's own forwards
with its KV cache and the same sampling, written out by hand (so the difference from the
second is ``generate``'s own work); then the operators that take a decode step's CPU time
(torch profiler, ten steps). Prints only; docs/performance.md quotes it.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import AutoModelForCausalLM, AutoTokenizer

from ictrepro.config import RLSpec
from ictrepro.data.prompts import render_prompt
from ictrepro.rollout.hf import hf_generate
from ictrepro.rollout.params import SamplingParams
from ictrepro.stages.train import load_problems


def by_hand(model, ids, mask, new_tokens: int):
    """Prefill, then ``new_tokens - 1`` decode steps, each sampling from the softmax."""
    out = model(input_ids=ids, attention_mask=mask, use_cache=True, logits_to_keep=1)
    token = torch.multinomial(torch.softmax(out.logits[:, -1], -1), 1)
    for _ in range(new_tokens - 1):
        mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], 1)
        positions = mask.sum(-1, keepdim=True) - 1
        out = model(
            input_ids=token,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=out.past_key_values,
            use_cache=True,
        )
        token = torch.multinomial(torch.softmax(out.logits[:, -1], -1), 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=27)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(args.run / "base_model")
    model = AutoModelForCausalLM.from_pretrained(args.run / "base_model").eval()
    problems = load_problems(args.run / "data" / "rl_train.jsonl")[: args.prompts]
    prompts = [render_prompt(p, tokenizer, style=RLSpec().prompt_style) for p in problems]
    params = SamplingParams(
        n=args.n, temperature=1.0, top_p=1.0, max_new_tokens=args.max_new_tokens
    )
    batch = args.prompts * args.n
    generate_s = {}
    for share in (True, False):
        kwargs = {"batch_size": batch, "share_prompts": share}
        hf_generate(model, tokenizer, prompts, params, seed=0, **kwargs)  # warm-up
        start = time.perf_counter()
        for i in range(args.repeats):
            hf_generate(model, tokenizer, prompts, params, seed=i, **kwargs)
        generate_s[share] = (time.perf_counter() - start) / args.repeats

    enc = tokenizer(
        prompts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False
    )
    ids = enc["input_ids"].repeat_interleave(args.n, 0)
    mask = enc["attention_mask"].repeat_interleave(args.n, 0)
    with torch.no_grad():
        by_hand(model, ids, mask, args.max_new_tokens)  # warm-up
        start = time.perf_counter()
        for _ in range(args.repeats):
            by_hand(model, ids, mask, args.max_new_tokens)
        hand_s = (time.perf_counter() - start) / args.repeats
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            by_hand(model, ids, mask, 11)  # prefill and ten decode steps
    print(
        f"{batch} sequences, up to {args.max_new_tokens} new tokens, one thread: "
        f"hf_generate {1000 * generate_s[True]:.1f} ms a call (prompts run once), "
        f"{1000 * generate_s[False]:.1f} ms with generate's expansion; the forwards by hand "
        f"{1000 * hand_s:.1f} ms ({hand_s / generate_s[False]:.0%} of the latter)"
    )
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=8))


if __name__ == "__main__":
    main()
