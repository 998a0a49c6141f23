"""Do two machines compute the same bits? A 30-second probe of the pinned numerics.

Trains a model of the tiny preset's size (Qwen2, hidden 128, 4 layers) for 30 steps on
random tokens, samples 64 x 96 tokens from it, and prints the sha256 of the weights and of
the samples, with the CPU seconds each part took and the numerics in effect. Run it on
two machines (or under two settings) and compare the hashes: equal hashes mean the
kernels, the BLAS branch and the thread count give the same bits there, which is what
`ictrepro check --rerun`'s bit-identical mode relies on.

    python bench/numerics_probe.py                       # the command line's pinned settings
    ICTREPRO_UNPINNED=1 python bench/numerics_probe.py   # the machine's own dispatch

Not a test: it only prints.
"""

from __future__ import annotations

import hashlib
import json
import time

from ictrepro.determinism import pin_environment

pin_environment()  # as the `ictrepro` command does, before torch runs anything

import torch  # noqa: E402
from transformers import Qwen2Config, Qwen2ForCausalLM  # noqa: E402

from ictrepro.determinism import numerics_provenance  # noqa: E402


def main() -> None:
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=566,
        hidden_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=384,
        max_position_embeddings=512,
        tie_word_embeddings=True,
    )
    model = Qwen2ForCausalLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.Generator().manual_seed(1)
    start = time.process_time()
    for _ in range(30):
        ids = torch.randint(0, config.vocab_size, (16, 128), generator=tokens)
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    train_cpu = time.process_time() - start
    start = time.process_time()
    with torch.no_grad():
        torch.manual_seed(2)
        prompts = torch.randint(0, config.vocab_size, (64, 32), generator=tokens)
        samples = model.generate(
            prompts, max_new_tokens=96, min_new_tokens=96, do_sample=True, pad_token_id=0
        )
    sample_cpu = time.process_time() - start
    weights = b"".join(p.detach().numpy().tobytes() for p in model.parameters())
    numerics = numerics_provenance()
    print(
        json.dumps(
            {
                "weights_sha256": hashlib.sha256(weights).hexdigest(),
                "samples_sha256": hashlib.sha256(samples.numpy().tobytes()).hexdigest(),
                "train_cpu_s": round(train_cpu, 1),
                "sample_cpu_s": round(sample_cpu, 1),
                "pinned": numerics["pinned"],
                "cpu": numerics["cpu"],
                "torch_capability": numerics["torch_capability"],
                "blas": numerics["blas"],
                "threads": numerics["threads"],
                "env": numerics["env"],
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
