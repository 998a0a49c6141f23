"""What each rule did at the fork in one reproduced fork-world run (``metrics.jsonl``).

    python bench/fork_mechanisms.py runs/tiny-fork-rare [--methods grpo,entropy,...]

Per method, mean over seeds: the share of fork tokens its mask selected and group JS at the
fork and elsewhere (after the sparse rules' warm-up), and the share of responses turning
down (the minority strategy) in the first and last ten steps. ``bench/fork_control.py``
prints the same beside the control's. Prints only.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fork_control import fork_cells  # bench/ is the script's own folder

from ictrepro.report.load import load_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument(
        "--methods",
        default="grpo,entropy,stapo,ict,random,grpo-lr4",
        help="Methods to show, those the run trained (default: every method of the fork presets).",
    )
    args = parser.parse_args()
    methods = args.methods.split(",")
    run = load_run(args.run, methods)
    print("| method | fork tokens selected | JS at fork / elsewhere (nats) | turned down, first -> last 10 steps |")  # fmt: skip
    print("|---|---|---|---|")
    for method in (m for m in methods if m in run.trained):
        print(f"| {method} | {fork_cells(run, method)} |")


if __name__ == "__main__":
    main()
