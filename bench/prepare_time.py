"""Wall time of `ictrepro prepare` for a preset, with the split recorded by the stage itself.

    python bench/prepare_time.py [--preset tiny] [--seed 0] [--repeats 1]

Runs the real command in a fresh process (so imports count) into a temporary directory,
with ``--warm-start`` (the base model is trained, not taken from results/worlds/),
then prints one Markdown row per run: total wall time and the stage's own timings of data
generation, tokenizer + model build, SFT and calibration, plus the calibration table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    print(f"threads: {os.cpu_count()} CPUs visible\n")
    print("| run | wall s | data s | tokenizer+model s | SFT s | calibration s |")
    print("|---|---|---|---|---|---|")
    for run in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "run"
            cmd = [
                sys.executable,
                "-m",
                "ictrepro.cli",
                "prepare",
                "--preset",
                args.preset,
                "--seed",
                str(args.seed),
                "--out",
                str(out),
                "--warm-start",
                "--quiet",
            ]
            start = time.perf_counter()
            subprocess.run(cmd, check=True, env=env)
            wall = time.perf_counter() - start
            record = json.loads((out / "prepare.json").read_text())
            t = record["info"]["timings"]
            print(
                f"| {run} | {wall:.0f} | {t['data_s']:.1f} | {t['tokenizer_s']:.1f} | "
                f"{t['sft_s']:.0f} | {t['calibration_s']:.0f} |"
            )
            calibration = json.loads((out / "calibration.json").read_text())
    print_calibration(calibration)


def print_calibration(calibration: dict) -> None:
    """The calibration table in suite order, with the average over suites."""
    print("\n| suite | pass@1 | pass@4 |\n|---|---|---|")
    rows = []
    for suite, score in calibration["suites"].items():
        ks = sorted(score["pass_at"], key=int)
        rows.append((suite, score["pass_at"][ks[0]], score["pass_at"][ks[-1]]))
    for suite, p1, pk in rows:
        print(f"| {suite} | {100 * p1:.1f}% | {100 * pk:.1f}% |")
    mean = [sum(r[i] for r in rows) / len(rows) for i in (1, 2)]
    print(f"| average | {100 * mean[0]:.1f}% | {100 * mean[1]:.1f}% |")


if __name__ == "__main__":
    main()
