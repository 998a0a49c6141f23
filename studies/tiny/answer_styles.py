"""How often each evaluated model answers bare, and how often each way of answering is right.

    python studies/tiny/answer_styles.py --run RUN [--models base,grpo-seed0,...]

Reads ``RUN/eval/<model>/*.samples.jsonl`` (every tiny suite the model was evaluated on)
and splits the responses into *bare* (starting ``The answer is``, as the warm start's
second phase teaches: docs/worlds/tiny.md, "Two ways to answer") and *worked* (anything
else), with the share of each that the verifier graded correct. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ictrepro.data.suites import is_bare


def styles(model_dir: Path) -> dict[str, list[int]]:
    """``{"bare": [responses, correct], "worked": [responses, correct]}`` of one model."""
    counts = {"bare": [0, 0], "worked": [0, 0]}
    for path in sorted(model_dir.glob("*.samples.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            for text, verdict in zip(record["responses"], record["verdicts"], strict=True):
                style = counts["bare" if is_bare(text) else "worked"]
                style[0] += 1
                style[1] += verdict == "correct"
    return counts


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "–"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--models", default="", help="comma-separated (default: all)")
    args = parser.parse_args()
    eval_dir = args.run / "eval"
    names = args.models.split(",") if args.models else sorted(p.name for p in eval_dir.iterdir())
    print("| model | responses | bare | bare correct | worked correct | all correct |")
    print("|---|---|---|---|---|---|")
    for name in names:
        c = styles(eval_dir / name)
        (nb, cb), (nw, cw) = c["bare"], c["worked"]
        n = nb + nw
        if not n:
            raise SystemExit(f"{eval_dir / name} holds no samples; evaluate the model first")
        print(
            f"| {name} | {n} | {pct(nb, n)} | {pct(cb, nb)} | {pct(cw, nw)} | {pct(cb + cw, n)} |"
        )


if __name__ == "__main__":
    main()
