"""Wall time of `ictrepro train` per (method, seed), and what each run's curves did.

    python bench/train_time.py --run RUN_DIR [--preset tiny] [--methods grpo,ict]
                                    [--seeds 0] [--set FIELD=VALUE ...]

RUN_DIR is a prepared run (`ictrepro prepare --preset tiny --out RUN_DIR`). Each run is the
real command in a fresh process (imports count), with `--force`, one after another, so
the machine does nothing else meanwhile. Prints one Markdown row per run: wall time, the
trainer's own step time, and first-vs-last-5-step means of reward, Shannon entropy,
Rényi-2 entropy and KL, with the selected fraction and JS of selected vs unselected
tokens after warm-up, and the probe-set reward at its first and last evaluation with the
seconds the probes took (outside the steps' time).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

METHODS = "grpo,entropy,stapo,ict,random"


def mean(rows: list[dict], key: str) -> float:
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.fmean(values) if values else float("nan")


def js(rows: list[dict], key: str) -> str:
    """The mean JS of ``key`` over ``rows``; "–" where no token was in that set (GRPO's
    unselected tokens)."""
    value = mean(rows, key)
    return "–" if math.isnan(value) else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--methods", default=METHODS)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--set", dest="sets", action="append", default=[])
    args = parser.parse_args()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    print(f"preset {args.preset}, {os.cpu_count()} CPUs, overrides {args.sets or 'none'}\n")
    print(
        "| method | seed | wall s | steps s | reward first5 → last5 | H first5 → last5 | "
        "H2 first5 → last5 | KL last5 | selected | JS sel / unsel | probe first → last | probe s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    total = 0.0
    for seed in args.seeds.split(","):
        for method in args.methods.split(","):
            cmd = [
                sys.executable,
                "-m",
                "ictrepro.cli",
                "train",
                "--method",
                method,
                "--preset",
                args.preset,
                "--seed",
                seed,
                "--run",
                str(args.run),
                "--force",
                "--quiet",
            ]
            for item in args.sets:
                cmd += ["--set", item]
            start = time.perf_counter()
            subprocess.run(cmd, check=True, env=env, stderr=subprocess.DEVNULL)
            wall = time.perf_counter() - start
            total += wall
            out = args.run / "train" / f"{method}-seed{seed}" / "metrics.jsonl"
            rows = [json.loads(line) for line in out.read_text().splitlines()]
            first, last = rows[:5], rows[-5:]
            sparse = [r for r in rows if r["selected_fraction"] < 1] or rows[-5:]
            probes = [rows[0].get("probe_reward_initial")] + [r.get("probe_reward") for r in rows]
            probes = [p for p in probes if p is not None]
            probe = f"{probes[0]:.3f} → {probes[-1]:.3f}" if probes else "–"
            probe_s = sum(r.get("time_probe_s") or 0.0 for r in rows)
            print(
                f"| {method} | {seed} | {wall:.1f} | {sum(r['time_step_s'] for r in rows):.1f} | "
                f"{mean(first, 'reward_mean'):.3f} → {mean(last, 'reward_mean'):.3f} | "
                f"{mean(first, 'entropy_mean'):.3f} → {mean(last, 'entropy_mean'):.3f} | "
                f"{mean(first, 'renyi2_mean'):.3f} → {mean(last, 'renyi2_mean'):.3f} | "
                f"{mean(last, 'kl'):.4f} | {mean(sparse, 'selected_fraction'):.3f} | "
                f"{js(sparse, 'js_selected_mean')} / {js(sparse, 'js_unselected_mean')} | "
                f"{probe} | {probe_s:.1f} |",
                flush=True,
            )
    print(f"\ntotal wall time: {total:.0f} s")


if __name__ == "__main__":
    main()
