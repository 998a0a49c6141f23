"""What each rule did at the fork in one fork-world reproduction, from its ``metrics.jsonl``.

    python bench/fork_mechanism.py RUN [--methods grpo,entropy,ict,random,grpo-lr4] [--warmup 3]

Per method, over its seeds: the share of fork tokens its mask selected after the sparse
rules' dense warm-up (mean, and the lowest and highest seed), the share of its selected
tokens of forked responses that lie more than 3 tokens after the fork, the share of
responses turning down (the minority direction) over the first and last ten steps, and
the training reward over the first and last ten steps (mean, and the last ten's lowest and
highest seed). Not a test: it only prints. docs/tiny-world.md quotes it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def mean_of(rows: list[dict], key: str) -> float:
    values = [r[key] for r in rows if r.get(key) is not None]
    if not values:
        raise SystemExit(f"no {key!r} in these metrics rows: not a fork-world run?")
    return sum(values) / len(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--methods", default="grpo,entropy,ict,random,grpo-lr4")
    parser.add_argument("--warmup", type=int, default=3, help="the sparse rules' dense steps")
    args = parser.parse_args()
    print(
        "| method | fork tokens selected (seeds) | selected > 3 after the fork "
        "| turned down, first → last 10 steps | training reward, first → last 10 steps (seeds) |"
    )
    print("|---|---|---|---|---|")
    for method in args.methods.split(","):
        runs = sorted((args.run / "train").glob(f"{method}-seed*/metrics.jsonl"))
        if not runs:
            raise SystemExit(f"{args.run}/train has no {method}-seed*/metrics.jsonl")
        seeds = []
        for path in runs:
            rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
            late = rows[args.warmup :]
            seeds.append(
                {
                    "selected": mean_of(late, "fork_selected_fraction"),
                    "later": mean_of(late, "fork_selected_later"),
                    "down": (mean_of(rows[:10], "fork_minority_fraction"),
                             mean_of(rows[-10:], "fork_minority_fraction")),
                    "reward": (mean_of(rows[:10], "reward_mean"),
                               mean_of(rows[-10:], "reward_mean")),
                }
            )  # fmt: skip

        def avg(values: list[float]) -> float:
            return 100 * sum(values) / len(values)

        selected = [s["selected"] for s in seeds]
        last = [s["reward"][1] for s in seeds]
        print(
            f"| {method} | {avg(selected):.1f}% ({100 * min(selected):.0f}-"
            f"{100 * max(selected):.0f}%) | {avg([s['later'] for s in seeds]):.0f}% "
            f"| {avg([s['down'][0] for s in seeds]):.0f}% → {avg([s['down'][1] for s in seeds]):.0f}% "
            f"| {avg([s['reward'][0] for s in seeds]):.1f}% → {avg(last):.1f}% "
            f"({100 * min(last):.0f}-{100 * max(last):.0f}%) |"
        )


if __name__ == "__main__":
    main()
