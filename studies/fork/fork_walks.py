"""Whether the fork world's correct answers come from valid walks.

    python studies/fork/fork_walks.py RUN [--models base,grpo-seed0,...]

The fork world's verifier reads only the boxed answer, and the answer (the target digit)
is stated in the prompt; only the token budget makes a walk necessary. This counts, per
model and subset, the correct responses whose walk is not the valid one for the direction
they name (``fork_walk``): an answer reached by a shortcut, not by turning the dial.
Reads RUN/data/test/<suite>.jsonl and RUN/eval/<model>/<suite>.samples.jsonl; prints only.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from ictrepro.data.suites import fork_problem_parts, fork_strategy, fork_walk

_WALK = re.compile(r"Turn (?:up|down): ([\d,]*)\.")


def valid_walk(problem: str, response: str) -> bool:
    """Whether ``response`` writes the walk its named direction takes for ``problem``."""
    strategy, match = fork_strategy(response), _WALK.search(response)
    if strategy is None or match is None:
        return False
    start, target, step = fork_problem_parts(problem)
    return match[1] == ",".join(map(str, fork_walk(start, target, step, strategy)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--models", default="", help="Comma-separated (default: all).")
    args = parser.parse_args()
    models = (
        args.models.split(",")
        if args.models
        else sorted(p.name for p in (args.run / "eval").iterdir())
    )
    print("| model | suite | correct | of which an invalid walk |")
    print("|---|---|---|---|")
    for model in models:
        for path in sorted((args.run / "eval" / model).glob("*.samples.jsonl")):
            suite = path.name.removesuffix(".samples.jsonl")
            problems = {}
            for line in (args.run / "data" / "test" / f"{suite}.jsonl").open():
                row = json.loads(line)
                problems[row["id"]] = row["problem"]
            correct = invalid = 0
            for line in path.open():
                row = json.loads(line)
                for response, verdict in zip(row["responses"], row["verdicts"], strict=True):
                    if verdict == "correct":
                        correct += 1
                        invalid += not valid_walk(problems[row["id"]], response)
            share = f"{100 * invalid / correct:.1f}%" if correct else "–"
            print(f"| {model} | {suite} | {correct} | {invalid} ({share}) |")


if __name__ == "__main__":
    main()
