"""One vLLM engine per process under ``accelerate launch`` (the trainer's multi-process
sampling), for tests/test_vllm.py.

Usage: vllm_ranks.py MODEL_DIR OUT_DIR

Each process builds its engine with ``make_engine`` (``external_launcher`` when launched
with several processes), samples its half of ``PROMPTS`` (``index_offset`` = its first
prompt, as the trainer's ``sample`` does), pushes perturbed weights and samples again.
It writes ``rank<r>.json``: its completions before and after the push, and what its
engine reports: the executor backend, and the worker's rank and local rank.
"""

import json
import sys
from pathlib import Path

import torch
from accelerate import Accelerator
from transformers import AutoModelForCausalLM

from ictrepro.config import VLLMSpec
from ictrepro.rollout.params import SamplingParams
from ictrepro.rollout.vllm import VLLMSampler, make_engine

PROMPTS = ["Question: 2 + 3 = ?\nAnswer:", "Question: 7 - 4 = ?\nAnswer:", "x", "Question:"]
PARAMS = SamplingParams(n=3, temperature=1.0, max_new_tokens=12)


def perturbed(model_dir: str) -> torch.nn.Module:
    """The model with every weight scaled, so that its samples differ from the original's."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.5)
    return model


def worker_place(worker) -> list:
    """Run in the engine's worker: where it sits in the launch."""
    return [worker.rank, worker.local_rank, str(worker.device)]


def main() -> None:
    model_dir, out_dir = sys.argv[1], Path(sys.argv[2])
    acc = Accelerator(cpu=True)
    engine = make_engine(model_dir, VLLMSpec(), dtype="float32", max_model_len=256)
    sampler = VLLMSampler(engine)
    share = len(PROMPTS) // acc.num_processes
    offset = acc.process_index * share
    mine = PROMPTS[offset : offset + share]
    before = sampler.sample(mine, PARAMS, seed=5, index_offset=offset)
    sampler.update_weights(perturbed(model_dir))
    after = sampler.sample(mine, PARAMS, seed=5, index_offset=offset)
    config = engine.llm_engine.vllm_config.parallel_config
    record = {
        "backend": config.distributed_executor_backend,
        "world_size": config.world_size,
        "worker": engine.collective_rpc(worker_place)[0],
        "before": [[c.token_ids for c in group] for group in before],
        "after": [[c.token_ids for c in group] for group in after],
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"rank{acc.process_index}.json").write_text(json.dumps(record))
    acc.wait_for_everyone()


if __name__ == "__main__":
    main()
