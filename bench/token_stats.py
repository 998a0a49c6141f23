"""Time and peak memory of ICT's token statistics, side by side in one run.

Compares, on the same inputs (log-prob of the sampled token, entropy, Rényi-2 and group JS
for one prompt group of G responses):

- ``log_softmax``: one plain ``torch.log_softmax`` over the logits (the yardstick);
- ``naive``: the full-softmax float32 implementation that materialises ``[G, T, V]``;
- ``chunked-eager`` / ``chunked-compiled``: ``token_stats`` with each kernel;
- ``naive-from-hidden`` / ``fused-compiled``: the same from hidden states and the LM head
  (the projection is included in both).

Each measurement runs in a fresh subprocess: a warm-up call (compilation, lazy imports),
timed calls (median), then one call for memory. Before that last call the allocator is
told to return freed blocks to the OS at once (``mallopt``), so resident memory tracks
live tensors, and the peak is reset (``/proc/self/clear_refs``): "peak extra" is the peak
during that call minus the resident memory before it.

Usage::

    python bench/token_stats.py            # V=151,936 at T=128 and 256; V=32,768 at T=256
    python bench/token_stats.py --quick    # T=64 and 128
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import torch
from rich.console import Console
from rich.table import Table
from rss import release_freed_memory_eagerly, reset_peak_rss, status_mib

HIDDEN = 896  # Qwen2.5-0.5B hidden size


def naive_stats(logits_GTV, tokens_GT, temperature=1.0):
    """Everything materialised: log_softmax, p, mean, mixture and its log, all [G, T, V]."""
    logp = torch.log_softmax(logits_GTV.float() / temperature, dim=-1)
    p = logp.exp()
    logprob = logp.gather(-1, tokens_GT.unsqueeze(-1)).squeeze(-1)
    entropy = -(p * logp).sum(-1)
    renyi2 = -(p * p).sum(-1).log()
    mean = p.mean(0, keepdim=True)
    log_mix = (0.5 * (p + mean)).log()
    js = 0.5 * (p * (logp - log_mix)).sum(-1) + 0.5 * (mean * (mean.log() - log_mix)).sum(-1)
    return logprob, entropy, renyi2, js


def worker(impl: str, G: int, T: int, V: int, repeats: int) -> dict:
    from ictrepro.algos.token_stats import token_stats, token_stats_from_hidden

    torch.manual_seed(0)
    tokens = torch.randint(0, V, (G, T))
    mask = torch.ones(G, T, dtype=torch.bool)
    gids = torch.zeros(G, dtype=torch.long)
    if impl in ("naive-from-hidden", "fused-compiled"):
        hidden = torch.empty(G, T, HIDDEN).normal_()
        head = torch.empty(V, HIDDEN).normal_(std=HIDDEN**-0.5)
    else:
        logits = torch.empty(G, T, V).normal_(std=3.0)
    fns = {
        "log_softmax": lambda: torch.log_softmax(logits, dim=-1),
        "naive": lambda: naive_stats(logits, tokens),
        "chunked-eager": lambda: token_stats(logits, tokens, mask, gids, kernel="eager"),
        "chunked-compiled": lambda: token_stats(logits, tokens, mask, gids, kernel="compiled"),
        "naive-from-hidden": lambda: naive_stats(hidden @ head.T, tokens),
        "fused-compiled": lambda: token_stats_from_hidden(
            hidden, head, tokens, mask, gids, kernel="compiled"
        ),
    }
    fn = fns[impl]
    start = time.perf_counter()
    fn()  # warm-up: compilation and lazy imports, outside the measurement
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    release_freed_memory_eagerly()
    reset_peak_rss()
    base = status_mib("VmRSS")
    fn()
    return {
        "impl": impl,
        "G": G,
        "T": T,
        "V": V,
        "first_s": first,
        "time_s": statistics.median(times),
        "peak_extra_mib": max(0.0, status_mib("VmHWM") - base),
    }


def run_worker(impl: str, G: int, T: int, V: int, repeats: int) -> dict:
    cmd = [sys.executable, __file__, "--worker", impl, str(G), str(T), str(V), str(repeats)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="T = 64 and 128 instead of 256 and 512"
    )
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--impls", default=None, help="comma-separated subset of implementations")
    parser.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        impl, G, T, V, repeats = args.worker
        print(json.dumps(worker(impl, int(G), int(T), int(V), int(repeats))))
        return

    console = Console()
    G = 8
    shapes = (
        [(151_936, 64), (151_936, 128), (32_768, 128)]
        if args.quick
        else [(151_936, 128), (151_936, 256), (32_768, 256)]
    )
    console.print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; G={G}, hidden={HIDDEN}"
    )
    impls = [
        "log_softmax",
        "naive",
        "chunked-eager",
        "chunked-compiled",
        "naive-from-hidden",
        "fused-compiled",
    ]
    if args.impls:
        wanted = args.impls.split(",")
        impls = [
            i for i in impls if i in wanted or i in ("log_softmax", "naive", "naive-from-hidden")
        ]
    rows = []
    for V, T in shapes:
        for impl in impls:
            console.print(f"  running {impl:18s} V={V} T={T}", highlight=False)
            rows.append(run_worker(impl, G, T, V, args.repeats))
            console.print(f"    {rows[-1]}", highlight=False)

    table = Table(
        title="ICT token statistics (log-prob, entropy, Rényi-2, group JS): time and peak extra memory"
    )
    for col in (
        "V",
        "T",
        "implementation",
        "time (s)",
        "x log_softmax",
        "x naive",
        "first call (s)",
        "peak extra (MiB)",
    ):
        table.add_column(col, justify="right" if col not in ("implementation",) else "left")
    by_key = {(r["impl"], r["V"], r["T"]): r for r in rows}
    for r in rows:
        key = (r["V"], r["T"])
        yardstick = by_key[("log_softmax", *key)]["time_s"]
        naive = (
            "naive-from-hidden" if r["impl"] in ("naive-from-hidden", "fused-compiled") else "naive"
        )
        vs_naive = (
            r["time_s"] / by_key[(naive, *key)]["time_s"]
            if (naive, *key) in by_key
            else float("nan")
        )
        table.add_row(
            str(r["V"]),
            str(r["T"]),
            r["impl"],
            f"{r['time_s']:.3f}",
            f"{r['time_s'] / yardstick:.2f}",
            f"{vs_naive:.2f}",
            f"{r['first_s']:.2f}",
            f"{r['peak_extra_mib']:.0f}",
        )
    console = Console(width=160)
    console.print(table)
    console.print(
        "x naive: fused rows are compared with naive-from-hidden (both include the LM-head projection)."
    )


if __name__ == "__main__":
    main()
