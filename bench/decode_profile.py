"""The project's sampler against ``generate`` on a tiny world's model (not a test).

    python bench/decode_profile.py RUN [--split test|rl_train] [--prompts 32] [--n 16]
        [--max-new-tokens 96] [--repeats 2] [--model DIR]

RUN is a prepared tiny-world run directory (``runs/tiny``); ``--model`` samples another
model (e.g. ``RUN/train/grpo-seed0/final_model``; default: RUN's base model). On one
thread, as a reproduction's worker runs, alternating the two in one process: the wall time of
``hf_generate`` (the project's decoding loop: prompts run once, ended responses leave the
batch) and of ``hf_generate(use_generate=True)`` (Hugging Face ``generate``), calls of
128 sequences, on the first ``--prompts`` problems of each test suite (``--split test``,
an evaluation's calls) or of the RL prompts (``--split rl_train``, use ``--n 8
--max-new-tokens 64`` for a training step's); whether the two drew the same tokens; the
mean and longest response, which decide the saving; then the operators that take the
loop's CPU time (torch profiler). Prints only; docs/performance.md quotes it.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--split", choices=("test", "rl_train"), default="test")
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--model", type=Path, help="default: RUN/base_model")
    args = parser.parse_args()
    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(args.run / "base_model")
    model = AutoModelForCausalLM.from_pretrained(args.model or args.run / "base_model").eval()
    files = (
        sorted((args.run / "data" / "test").glob("*.jsonl"))
        if args.split == "test"
        else [args.run / "data" / "rl_train.jsonl"]
    )
    params = SamplingParams(
        n=args.n, temperature=1.0, top_p=1.0, max_new_tokens=args.max_new_tokens
    )
    style = RLSpec().prompt_style
    prompt_sets = {
        f.stem: [render_prompt(p, tokenizer, style=style) for p in load_problems(f)] for f in files
    }
    prompt_sets = {name: prompts[: args.prompts] for name, prompts in prompt_sets.items()}
    kwargs = {"batch_size": 128}
    hf_generate(model, tokenizer, prompt_sets[files[0].stem][:1], params, seed=0)  # warm-up
    seconds = {"loop": 0.0, "generate": 0.0}
    print(
        f"{args.split}: {args.prompts} prompts x {args.n} samples per set, <= "
        f"{args.max_new_tokens} tokens, calls of 128 sequences, one thread"
    )
    for name, prompts in prompt_sets.items():
        same, lengths = True, []
        for repeat in range(args.repeats):
            drawn = {}
            for way in ("loop", "generate"):
                start = time.perf_counter()
                drawn[way] = hf_generate(
                    model, tokenizer, prompts, params, seed=repeat,
                    use_generate=way == "generate", **kwargs,
                )  # fmt: skip
                seconds[way] += time.perf_counter() - start
            same &= drawn["loop"] == drawn["generate"]
            lengths += [len(c.token_ids) for g in drawn["loop"] for c in g]
        print(
            f"  {name}: same tokens {same}; response mean {sum(lengths) / len(lengths):.1f}, "
            f"longest {max(lengths)} tokens"
        )
    print(
        f"loop {seconds['loop']:.2f} s, generate {seconds['generate']:.2f} s: "
        f"{seconds['loop'] / seconds['generate']:.2f} of generate's time"
    )
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        hf_generate(model, tokenizer, prompt_sets[files[0].stem], params, seed=0, **kwargs)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))


if __name__ == "__main__":
    main()
