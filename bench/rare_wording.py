"""A fork world whose warm start varies the wording of its answer leads
(``data.wording_noise``), so that correct responses can hold rare tokens for STAPO to
silence: what it costs the base model, and how often STAPO's mask then acts.

    python bench/rare_wording.py OUT --plain RUN [--noise 0.01] [--steps 100]

Prepares ``tiny-fork`` with the noise into OUT (its tokenizer and initial weights are those
of ``tiny-fork``: the tokenizer learns the solutions as generated), prints the warm start's
final loss (mean of its last 200 steps) and the base model's calibration P@1 per subset
beside those of the plain world prepared in RUN, then trains STAPO (seed 0, ``--steps``
steps, the preset's settings) on OUT and prints the steps at which its mask silenced
tokens. About 9 minutes on 2 cores. Prints only; docs/tiny-world.md quotes it.
``python bench/rare_tokens.py OUT/base_model`` counts the rare tokens of its responses.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
from pathlib import Path

from ictrepro.presets import prepare_preset
from ictrepro.stages.prepare import prepare


def warm_start_summary(run: Path) -> str:
    """The warm start's final loss and the base model's calibration P@1 per subset."""
    log = [json.loads(line) for line in (run / "sft_log.jsonl").read_text().splitlines()]
    suites = json.loads((run / "calibration.json").read_text())["suites"]
    p1 = ", ".join(f"{s} {100 * v['pass_at']['1']:.1f}%" for s, v in sorted(suites.items()))
    return f"final SFT loss {statistics.mean(r['loss'] for r in log[-200:]):.4f}; P@1 {p1}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--plain", type=Path, required=True, help="A prepared tiny-fork run.")
    parser.add_argument("--noise", type=float, default=0.01)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    config = prepare_preset("tiny-fork")
    data = dataclasses.replace(config.data, wording_noise=args.noise)
    prepare(dataclasses.replace(config, data=data), args.out, show_progress=False)
    print(f"plain world ({args.plain}): {warm_start_summary(args.plain)}")
    print(f"wording noise {args.noise} ({args.out}): {warm_start_summary(args.out)}")
    subprocess.run(
        [sys.executable, "-m", "ictrepro.cli", "train", "--method", "stapo", "--preset",
         "tiny-fork", "--run", str(args.out), "--seed", "0", "--set", f"rl.steps={args.steps}",
         "--quiet"],
        check=True,
    )  # fmt: skip
    metrics = args.out / "train" / "stapo-seed0" / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    acted = [(r["step"], r["selected_fraction"]) for r in rows if r["selected_fraction"] < 1]
    print(f"STAPO silenced tokens at {len(acted)} of {len(rows)} steps:")
    for step, fraction in acted:
        print(f"  step {step}: {100 * (1 - fraction):.3f}% of the response tokens")


if __name__ == "__main__":
    main()
