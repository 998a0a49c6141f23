"""Peak memory of the policy update's log-probs: full logits against the chunked path.

One forward and backward of the differentiable log-prob of the sampled tokens, the part
of the GRPO update whose memory grows with ``micro x R x V``:

- ``full``: ``sampled_logprobs(hidden @ head.T)``, the logits path (a float32
  ``[micro, R, V]`` log-softmax, kept for backward, plus the logits and their gradient);
- ``chunked``: ``sampled_logprobs_from_hidden``, which recomputes each chunk's logits in
  backward and never holds more than one chunk of them.

Each measurement runs in a fresh subprocess (see ``rss.py``): "peak extra" is the peak
resident memory during the call minus the memory before it; the inputs (hidden states,
LM head and their gradient buffers) are allocated before, so the figure is the update's
own working memory.

Usage::

    python benchmarks/update_memory.py           # V = 1,024 / 49,152 / 151,936 at R = 256, 512
    python benchmarks/update_memory.py --quick   # R = 256 only
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import torch
from rich.console import Console
from rich.table import Table
from rss import release_freed_memory_eagerly, reset_peak_rss, status_mib

MICRO = 4
HIDDEN = 896  # Qwen2.5-0.5B
VOCABS = {"tiny world": 1024, "SmolLM2": 49_152, "Qwen2.5": 151_936}


def worker(impl: str, R: int, V: int) -> dict:
    from ictrepro.algos.token_stats import sampled_logprobs, sampled_logprobs_from_hidden

    torch.manual_seed(0)
    hidden = torch.empty(MICRO, R, HIDDEN).normal_().requires_grad_()
    head = torch.empty(V, HIDDEN).normal_(std=HIDDEN**-0.5).requires_grad_()
    tokens = torch.randint(0, V, (MICRO, R))
    mask = torch.ones(MICRO, R, dtype=torch.bool)
    hidden.grad, head.grad = torch.zeros_like(hidden), torch.zeros_like(head)

    def step() -> None:
        if impl == "full":
            logp = sampled_logprobs(hidden @ head.T, tokens)
        else:
            logp = sampled_logprobs_from_hidden(hidden, head, tokens, mask)
        logp.sum().backward()

    step()  # warm-up
    release_freed_memory_eagerly()
    reset_peak_rss()
    base = status_mib("VmRSS")
    start = time.perf_counter()
    step()
    elapsed = time.perf_counter() - start
    return {
        "impl": impl,
        "R": R,
        "V": V,
        "time_s": elapsed,
        "peak_extra_mib": status_mib("VmHWM") - base,
    }


def run_worker(impl: str, R: int, V: int) -> dict:
    cmd = [sys.executable, __file__, "--worker", impl, str(R), str(V)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="R = 256 only")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        impl, R, V = args.worker
        print(json.dumps(worker(impl, int(R), int(V))))
        return
    console = Console(width=140)
    console.print(f"torch {torch.__version__}, micro-batch {MICRO}, hidden {HIDDEN}")
    table = Table(title="Update log-probs, forward + backward: peak extra memory and time")
    for col in ("vocabulary", "V", "R", "full (MiB)", "chunked (MiB)", "full (s)", "chunked (s)"):
        table.add_column(col, justify="left" if col == "vocabulary" else "right")
    for name, V in VOCABS.items():
        for R in (256,) if args.quick else (256, 512):
            full, chunked = run_worker("full", R, V), run_worker("chunked", R, V)
            console.print(f"  {name} R={R}: {full} {chunked}", highlight=False)
            table.add_row(
                name,
                f"{V:,}",
                str(R),
                f"{full['peak_extra_mib']:.0f}",
                f"{chunked['peak_extra_mib']:.0f}",
                f"{full['time_s']:.2f}",
                f"{chunked['time_s']:.2f}",
            )
    console.print(table)


if __name__ == "__main__":
    main()
