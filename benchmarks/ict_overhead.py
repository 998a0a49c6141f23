"""ICT's extra cost per training step, measured side by side with GRPO on the same batch.

    python benchmarks/ict_overhead.py --run RUN_DIR [--preset tiny] [--repeats 5]

RUN_DIR is a prepared run (`ictrepro prepare --preset tiny --out RUN_DIR`). Two trainers
start from the same base model: GRPO without the JS statistics (`rl.log_js=false`, what a
plain GRPO run needs) and ICT past its warm-up. Before every timed step both are reset to
the base weights, so each `step(0)` samples and updates on the identical batch. Repeats
alternate between the two. ICT's extra cost is the difference of the medians of the
statistics phase (policy pass with JS and the mask vs. without); the ratio divides it by
the median wall time of a whole GRPO step. Nothing is written into RUN_DIR.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import tempfile
from pathlib import Path

from accelerate import Accelerator

from ictrepro.config import train_preset
from ictrepro.stages.train import load_problems, resolve_inputs
from ictrepro.train.grpo import GRPOTrainer
from ictrepro.verify import Verifier


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    configs = {
        "grpo": train_preset(args.preset, method="grpo", overrides={"rl.log_js": False}),
        "ict": train_preset(args.preset, method="ict", overrides={"method_args.warmup_steps": 0}),
    }
    model_path, data_path, _ = resolve_inputs(configs["grpo"], args.run)
    problems = load_problems(data_path)
    accelerator = Accelerator(cpu=True, step_scheduler_with_optimizer=False)
    times: dict[str, dict[str, list[float]]] = {m: {} for m in configs}
    with Verifier(workers=0) as verifier, tempfile.TemporaryDirectory() as tmp:
        trainers = {
            m: GRPOTrainer(
                c, model_path, problems, Path(tmp) / m, accelerator, verifier, show_progress=False
            )
            for m, c in configs.items()
        }
        initial = {m: copy.deepcopy(t.model.state_dict()) for m, t in trainers.items()}
        for repeat in range(args.repeats + 1):  # the first round warms up and is dropped
            for method, trainer in trainers.items():
                trainer.model.load_state_dict(initial[method])
                metrics = trainer.step(0)
                if repeat:
                    for key in ("time_stats_s", "time_step_s"):
                        times[method].setdefault(key, []).append(metrics[key])
                    times[method].setdefault("selected_fraction", []).append(
                        metrics["selected_fraction"]
                    )
    med = {m: {k: statistics.median(v) for k, v in t.items()} for m, t in times.items()}
    extra = med["ict"]["time_stats_s"] - med["grpo"]["time_stats_s"]
    print(f"preset {args.preset}, {args.repeats} repeats, {os.cpu_count()} CPUs\n")
    print("| method | step s (median) | statistics + mask s (median) | selected |")
    print("|---|---|---|---|")
    for m in configs:
        print(
            f"| {m} | {med[m]['time_step_s']:.3f} | {med[m]['time_stats_s']:.3f} | "
            f"{med[m]['selected_fraction']:.3f} |"
        )
    print(
        f"\nICT extra statistics: {extra:.3f} s = {100 * extra / med['grpo']['time_step_s']:.1f}% "
        "of a GRPO step (target <= 5%)"
    )


if __name__ == "__main__":
    main()
