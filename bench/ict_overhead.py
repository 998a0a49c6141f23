"""ICT's extra cost per training step, measured side by side with GRPO on the same batch.

    python bench/ict_overhead.py --run RUN_DIR [--preset tiny] [--repeats 20]

RUN_DIR is a prepared run (`ictrepro prepare --preset tiny --out RUN_DIR`). Two trainers
start from the same base model: GRPO without the JS statistics (`rl.log_js=false`, what a
plain GRPO run computes) and ICT past its warm-up. One batch of step 0 is sampled and
scored once; then the phase where the methods differ, rollout statistics plus the mask,
is timed for each method in alternation, ``--repeats`` times. Whole GRPO steps (from the
same base weights, so on the same batch) give the denominator. Medians throughout.
Nothing is written into RUN_DIR.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import tempfile
import time
from pathlib import Path

from accelerate import Accelerator

from ictrepro.algos.losses import group_advantages
from ictrepro.presets import train_preset
from ictrepro.stages.train import load_problems, resolve_inputs
from ictrepro.train.grpo import GRPOTrainer
from ictrepro.verify import Verifier


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--steps", type=int, default=3, help="whole GRPO steps timed")
    args = parser.parse_args()
    configs = {
        "grpo": train_preset(args.preset, method="grpo", overrides={"rl.log_js": False}),
        "ict": train_preset(args.preset, method="ict", overrides={"method_args.warmup_steps": 0}),
    }
    model_path, data_path, _ = resolve_inputs(configs["grpo"], args.run)
    problems = load_problems(data_path)
    accelerator = Accelerator(cpu=True, step_scheduler_with_optimizer=False)
    phase: dict[str, list[float]] = {m: [] for m in configs}
    selected: dict[str, float] = {}
    with Verifier(workers=0) as verifier, tempfile.TemporaryDirectory() as tmp:
        trainers = {
            m: GRPOTrainer(
                c, model_path, problems, Path(tmp) / m, accelerator, verifier, show_progress=False
            )
            for m, c in configs.items()
        }
        grpo = trainers["grpo"]
        problems, completions = grpo.sample(0)
        batch = grpo.pack(problems, completions, grpo.reward(problems, completions)[0])
        advantages = group_advantages(batch.rewards, batch.group_ids)
        for repeat in range(args.repeats + 1):  # round 0 warms up and is dropped
            for method, trainer in trainers.items():
                start = time.perf_counter()
                stats, _ = trainer.statistics(batch)
                mask = trainer.select(batch, advantages, stats, step=0)
                if repeat:
                    phase[method].append(time.perf_counter() - start)
                selected[method] = float(mask.sum() / batch.response_mask.sum())
        initial = copy.deepcopy(grpo.model.state_dict())
        step_times = []
        for _ in range(args.steps):
            grpo.model.load_state_dict(initial)
            step_times.append(grpo.step(0)["time_step_s"])
    med = {m: statistics.median(v) for m, v in phase.items()}
    step = statistics.median(step_times)
    extra = med["ict"] - med["grpo"]
    print(
        f"preset {args.preset}: {batch.response_ids.shape[0]} responses, "
        f"{int(batch.response_mask.sum())} response tokens; {args.repeats} repeats; "
        f"{os.cpu_count()} CPUs\n"
    )
    print("| method | statistics + mask s (median) | selected fraction |")
    print("|---|---|---|")
    for m in configs:
        print(f"| {m} | {med[m]:.4f} | {selected[m]:.3f} |")
    print(f"\nGRPO step (median of {args.steps}): {step:.3f} s")
    print(
        f"ICT's extra statistics: {extra * 1000:.1f} ms = {100 * extra / step:.2f}% of a GRPO "
        "step (target <= 5%)"
    )


if __name__ == "__main__":
    main()
