"""HF ``generate`` on an FSDP2-sharded model in two processes whose responses differ in
length (process r samples at most 4 + 8 r tokens), for tests/test_train_fsdp.py.

Usage: fsdp_generate.py MODEL_DIR OUT_DIR   (under accelerate launch, cpu-fsdp-2proc.yaml)

Every forward of a sharded model gathers weights, a collective; without generate's
``synced_gpus`` the process that finishes first would leave the other waiting for ever.
Each process writes ``rank<r>.json``: its completions from the sharded model and from an
unsharded copy of the same weights (same prompts and seed), and how many forwards each ran.
"""

import json
import sys
from pathlib import Path

import torch
from accelerate import Accelerator
from transformers import AutoModelForCausalLM, AutoTokenizer

from ictrepro.rollout.hf import hf_generate
from ictrepro.rollout.params import SamplingParams
from ictrepro.train.distributed import enable_cpu_fsdp, prepare_reference

PROMPTS = ["Question: 2 + 3 = ?\nAnswer:", "x"]


def main() -> None:
    model_dir, out_dir = sys.argv[1], Path(sys.argv[2])
    acc = Accelerator(cpu=True)
    assert enable_cpu_fsdp(acc)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    whole = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    loaded = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    sharded = prepare_reference(acc, loaded)  # FSDP2-sharded, like the policy
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=4 + 8 * acc.process_index)
    results, forwards = {}, {}
    for name, model in (("sharded", sharded), ("whole", whole)):
        calls = []
        hook = model.register_forward_pre_hook(lambda *_, calls=calls: calls.append(1))
        groups = hf_generate(model, tokenizer, PROMPTS, params, seed=7)
        hook.remove()
        results[name] = [[list(c.token_ids) for c in group] for group in groups]
        forwards[name] = len(calls)
    results["forwards"] = forwards
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"rank{acc.process_index}.json").write_text(json.dumps(results))
    acc.wait_for_everyone()


if __name__ == "__main__":
    main()
