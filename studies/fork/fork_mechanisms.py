"""What each rule did at the fork in one reproduced fork-world run (``metrics.jsonl``).

    python studies/fork/fork_mechanisms.py runs/tiny-fork-rare [--methods grpo,entropy,...]

Per method, mean over seeds: the share of fork tokens its mask selected and group JS at the
fork and elsewhere (after the sparse rules' warm-up), and the share of responses turning
down (the minority strategy) in the first and last ten steps. ``studies/fork/fork_control.py``
prints the same beside the control's. Then, per method across its seeds: the lowest and
highest seed's share of fork tokens selected, the share of its selected tokens (of forked
responses) more than 3 tokens after the fork, and the training reward over the first and
last ten steps (mean, and the lowest and highest seed's last ten). Prints only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fork_control import fork_cells  # studies/fork/ is the script's own folder

from ictrepro.report.load import load_run

WARMUP = 3  # the sparse rules' dense warm-up steps in the fork presets


def _mean(rows: list[dict], key: str) -> float:
    values = [r[key] for r in rows if r.get(key) is not None]
    return sum(values) / len(values) if values else float("nan")


def seed_cells(run_dir: Path, method: str) -> str:
    """The second table's cells for ``method``, from each seed's ``metrics.jsonl``."""
    seeds = []
    for path in sorted((run_dir / "train").glob(f"{method}-seed*/metrics.jsonl")):
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        late = rows[WARMUP:]
        seeds.append(
            (
                _mean(late, "fork_selected_fraction"),
                _mean(late, "fork_selected_later"),
                _mean(rows[:10], "reward_mean"),
                _mean(rows[-10:], "reward_mean"),
            )
        )
    selected, later, first, last = (
        [100 * s[i] for s in seeds] for i in range(4)
    )  # percent, per seed

    def avg(values: list[float]) -> float:
        return sum(values) / len(values)

    return (
        f"{min(selected):.0f}-{max(selected):.0f}% | {avg(later):.0f}% "
        f"| {avg(first):.1f}% → {avg(last):.1f}% ({min(last):.0f}-{max(last):.0f}%)"
    )


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
    trained = [m for m in methods if m in run.trained]
    for method in trained:
        print(f"| {method} | {fork_cells(run, method)} |")
    print("\n| method | fork tokens selected, lowest-highest seed | selected > 3 after the fork | training reward, first → last 10 steps (seeds) |")  # fmt: skip
    print("|---|---|---|---|")
    for method in trained:
        print(f"| {method} | {seed_cells(args.run, method)} |")


if __name__ == "__main__":
    main()
