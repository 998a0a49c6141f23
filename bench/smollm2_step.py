"""Time and peak memory of one RL step of the ``smollm2-135m`` preset (not a test).

    python bench/smollm2_step.py RUN [--method ict] [--steps 1] [--real-rewards]

RUN is a prepared ``smollm2-135m`` run directory (``ictrepro prepare --preset
smollm2-135m --data-dir ../shared/benchmarks --out RUN``). The base model rarely solves a
GSM8K problem in 192 tokens, so with real rewards most steps have no learning signal and
skip the update; by default every other response is graded correct instead, so that the
step's update (the part real rewards would add) is timed too. Prints the split of each step
(sample / reward / statistics+mask / update) and the process's peak resident memory, with
the resident memory before training (model loading) for comparison.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import tempfile
import time
from pathlib import Path


class EveryOtherCorrect:
    """Verdicts CORRECT, WRONG, CORRECT, ...: every group has a learning signal."""

    def grade_many(self, requests):
        from ictrepro.verify import Verdict

        return [Verdict.CORRECT if i % 2 == 0 else Verdict.WRONG for i in range(len(requests))]

    def close(self):
        pass


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--method", default="ict")
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--real-rewards", action="store_true")
    args = parser.parse_args()

    import torch

    from ictrepro.presets import train_preset
    from ictrepro.stages.train import train

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        shutil.copytree(args.run, run, ignore=shutil.ignore_patterns("train", "eval"))
        overrides = {"rl.steps": args.steps, "method_args.warmup_steps": 0}
        if args.method not in ("ict", "random"):
            overrides.pop("method_args.warmup_steps")
        config = train_preset("smollm2-135m", method=args.method, overrides=overrides)
        before = rss_mb()
        start = time.perf_counter()
        verifier = None if args.real_rewards else EveryOtherCorrect()
        result = train(config, run, show_progress=False, verifier=verifier)
        wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    keys = ("time_sample_s", "time_reward_s", "time_stats_s", "time_update_s", "time_step_s")
    for m in result.metrics:
        split = {k: round(m[k], 1) for k in keys}
        extra = {
            k: m.get(k) for k in ("response_length_mean", "selected_fraction", "update_skipped")
        }
        print(json.dumps({"step": m["step"], **split, **extra}))
    print(
        json.dumps(
            {
                "wall_s": round(wall, 1),
                "rss_before_train_mb": round(before),
                "peak_rss_mb": round(peak),
                "torch_threads": torch.get_num_threads(),
                "rewards": "real" if args.real_rewards else "every other correct",
            }
        )
    )


if __name__ == "__main__":
    main()
