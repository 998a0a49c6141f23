"""Memory per GPU of the paper presets' training runs: the arithmetic of ``ictrepro.memory``.

Prints, for each (preset, GPUs) case, every item the trainer holds per GPU and the peaks
of the sampling and update phases, from the presets' own settings (``rl`` and ``infra``:
micro-batch, response length, chunked log-probs, gradient checkpointing, vLLM's share and
sleep mode). An estimate, not a measurement; docs/paper-scale.md ("Memory per GPU")
quotes its output.

Usage::

    python bench/memory.py                   # the docs' cases, as Markdown
    python bench/memory.py --prompt-tokens 512
"""

from __future__ import annotations

import argparse
import dataclasses

from ictrepro.memory import GB, SHAPES, estimate
from ictrepro.presets import get_preset, train_preset

#: (preset, strategy, GPUs, GB per GPU): the cases docs/paper-scale.md discusses.
CASES = (
    ("paper-0.5b", "single", 1, 80.0),
    ("paper-0.5b", "single", 1, 141.0),
    ("paper-1.5b", "single", 1, 80.0),
    ("paper-7b", "fsdp2", 8, 80.0),
    ("paper-7b", "ddp", 8, 80.0),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt-tokens", type=int, default=256)
    args = parser.parse_args()
    for preset, strategy, gpus, gpu_gb in CASES:
        config = train_preset(preset, method="grpo")
        shape = SHAPES[get_preset(preset).prepare.model]
        rl = config.rl
        print(
            f"\n### {preset} ({shape.name}, {shape.params / 1e9:.2f} B parameters), "
            f"{strategy} on {gpus} x {gpu_gb:.0f} GB\n"
        )
        print(
            f"micro-batch {rl.micro_batch_size} rows of <= {args.prompt_tokens} prompt + "
            f"{rl.max_new_tokens} response tokens; chunked log-probs {rl.chunked_logprobs}; "
            f"gradient checkpointing {config.infra.gradient_checkpointing}; vLLM share "
            f"{config.infra.vllm.gpu_memory_utilization}\n"
        )
        results = {}
        for sleep in (True, False):
            infra = dataclasses.replace(
                config.infra,
                vllm=dataclasses.replace(config.infra.vllm, enable_sleep_mode=sleep),
            )
            results[sleep] = estimate(
                shape,
                rl,
                infra,
                strategy=strategy,
                processes=gpus,
                gpu_gb=gpu_gb,
                prompt_tokens=args.prompt_tokens,
            )
        est = results[True]
        print("| item | GB per GPU | held while |")
        print("|---|---:|---|")
        for name, size in est.items.items():
            if not size:
                continue
            phases = [p for p, items in (("sampling", est.sampling_items),) if name in items]
            if name in est.update_items or name in results[False].update_items:
                phases.append("update" if name in est.update_items else "update unless asleep")
            print(f"| {name} | {size / GB:.2f} | {', '.join(phases)} |")
        for sleep, e in results.items():
            verdict = "fits" if e.fits else "does not fit"
            print(
                f"| **peak, vLLM {'asleep' if sleep else 'awake'} in the update** | "
                f"**{e.peak_gb:.1f}** | sampling {e.sampling_gb:.1f}, update "
                f"{e.update_gb:.1f}: {verdict} in {gpu_gb:.0f} GB |"
            )


if __name__ == "__main__":
    main()
