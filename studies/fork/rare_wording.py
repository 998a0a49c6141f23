"""What varying the answer leads' wording (``tiny-fork-rare``) did to the fork world's warm
start: its final loss and the base model's calibration P@1, beside ``tiny-fork``'s.

    python studies/fork/rare_wording.py runs/tiny-fork-rare runs/tiny-fork

Reads two prepared runs (``ictrepro prepare --preset tiny-fork-rare`` and ``--preset
tiny-fork``): the warm start's loss (mean of its last 200 steps, ``sft_log.jsonl``), the
calibration P@1 per subset (``calibration.json``), how many warm-start solutions carry a
varied lead, and whether the two tokenizers are the same file (they should be: the
tokenizer learns the solutions as generated). Prints only; docs/worlds/fork.md
("Rare wording") and docs/history.md quote it.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from ictrepro.data.suites import ANSWER_LEAD


def summary(run: Path) -> list[str]:
    log = [json.loads(line) for line in (run / "sft_log.jsonl").read_text().splitlines()]
    suites = json.loads((run / "calibration.json").read_text())["suites"]
    sft = [json.loads(line) for line in (run / "data" / "sft.jsonl").read_text().splitlines()]
    varied = sum(ANSWER_LEAD not in r["solution"] for r in sft)
    return [
        f"{statistics.mean(r['loss'] for r in log[-200:]):.4f}",
        *(f"{100 * suites[s]['pass_at']['1']:.1f}%" for s in sorted(suites)),
        f"{varied} of {len(sft)}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs=2)
    args = parser.parse_args()
    suites = sorted(json.loads((args.runs[0] / "calibration.json").read_text())["suites"])
    print("| run | warm start's final loss | " + " | ".join(f"P@1 {s}" for s in suites)
          + " | solutions with a varied lead |")  # fmt: skip
    print("|---" * (len(suites) + 3) + "|")
    for run in args.runs:
        print(f"| {run} | " + " | ".join(summary(run)) + " |")
    first, second = (run / "base_model" / "tokenizer.json" for run in args.runs)
    print(f"tokenizer.json byte-identical: {first.read_bytes() == second.read_bytes()}")


if __name__ == "__main__":
    main()
