"""The two time targets of the tiny world, measured side by side in one run.

    python bench/time_targets.py WORK_DIR [--preset tiny-fork] [--jobs 2] [--world RUN]

1. ``ictrepro reproduce --preset P --out WORK_DIR/repro`` from an empty directory
   (target: 600 s on 2 cores);
2. ``ictrepro compare`` of a new rule (the 10% least probable tokens of each response,
   written to WORK_DIR/lowprob.py) against the stored baselines, on the world step 1
   prepared (``--world WORK_DIR/repro``; target: 180 s).

``--world RUN``: skip step 1 and time ``compare`` on the world a previous reproduction
prepared in RUN (its ``reproduce.json`` stage times are printed beside it).

Each runs as a fresh process; their wall times and the stage times recorded in
``reproduce.json`` are printed beside the targets. ``compare`` needs pinned results of the
preset in ``results/`` (``--results``); without them only step 1 is measured. Not a test.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from ictrepro.rundir import load_reproduce_record

RULE = '''
from ictrepro.algos.selection import SelectionInputs, register_selection, top_fraction_mask


@register_selection("lowprob", needs=("logprob",))
def lowprob(inputs: SelectionInputs, *, rho: float = 0.1):
    """The rho least probable tokens of each response."""
    return top_fraction_mask(-inputs.logprob, inputs.response_mask, rho, "sequence")
'''

TARGETS = {"reproduce": 600.0, "compare": 180.0}


def timed(command: list[str]) -> float:
    print("$", " ".join(command), flush=True)
    start = time.perf_counter()
    subprocess.run(command, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path)
    parser.add_argument("--preset", default="tiny-fork")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--world", type=Path, help="A reproduction's RUN: time compare only.")
    args = parser.parse_args()
    cli = [sys.executable, "-m", "ictrepro.cli"]
    seconds = {}
    repro = args.world or args.work / "repro"
    if args.world is None:
        if repro.exists():
            sys.exit(f"{repro} exists; give an empty WORK_DIR")
        seconds["reproduce"] = timed(
            [*cli, "reproduce", "--preset", args.preset, "--out", str(repro), "--jobs",
             str(args.jobs), "--quiet"]
        )  # fmt: skip
    # A world that was only prepared (no reproduction) has no stage times to show.
    stages = (load_reproduce_record(repro) or {}).get("times_s", {})
    if (args.results / args.preset / "scores.jsonl").is_file():
        args.work.mkdir(parents=True, exist_ok=True)
        rule = args.work / "lowprob.py"
        rule.write_text(RULE)
        seconds["compare"] = timed(
            [*cli, "compare", "--method", "lowprob", "--method-module", str(rule),
             "--preset", args.preset, "--out", str(args.work / "compare"), "--world", str(repro),
             "--quiet"]
        )  # fmt: skip
    print()
    print("| command | wall s | target s | within |")
    print("|---|---|---|---|")
    for name, s in seconds.items():
        print(
            f"| {name} | {s:.0f} | {TARGETS[name]:.0f} | {'yes' if s <= TARGETS[name] else 'no'} |"
        )
    print(f"reproduce stages (reproduce.json): {stages}")


if __name__ == "__main__":
    main()
