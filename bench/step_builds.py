"""Would another build of the same step be faster? fp32 eager (the pinned build) against
bf16 autocast and ``torch.compile``, on the tiny world's own model and batches.

    python bench/step_builds.py RUN [--steps 40] [--repeats 2] [--threads 1 2]
    ICTREPRO_UNPINNED=1 python bench/step_builds.py RUN     # the machine's own dispatch

RUN is a prepared tiny world (`ictrepro prepare --preset tiny --out RUN`). Two workloads,
both on the warm start's batches (32 sequences of the world's worked solutions, cut by
``length_bucketed_batches`` as the warm start cuts them; the RL step's micro-batches are
32 sequences of the same length range):

- ``train``: forward, backward, gradient clipping and an AdamW step, as a warm-start step
  and each micro-batch of an RL update run them;
- ``forward``: a forward without gradient, as the RL step's statistics pass runs it.

Each build starts from the base model's weights; the builds alternate, ``--repeats``
times, in one process, and each time is the mean over ``--steps`` batches after 10 that
are not timed (``torch.compile`` compiles in those). Prints one Markdown row per build,
workload and thread count: ms per batch and the ratio to fp32 eager of the same repeat.
First it prints the share of fp32 eager's time (torch profiler, one thread) that the
matrix products take in each workload, and the time of a bf16 product of the MLP's
shape as a ratio to fp32's.
Runs under the command line's pinned numerics (AVX2 kernels, ``ictrepro/determinism.py``),
as every reproduction does, unless ``ICTREPRO_UNPINNED=1``; the first line says which
kernels torch chose. Not a test: it only prints (docs/performance.md, "What another build
would save").
The builds change the numbers a run produces (other kernels, other rounding), so
adopting one means pinning every world again; this measures whether it would pay.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from ictrepro.determinism import pin_environment

pin_environment()  # as the `ictrepro` command does, before torch runs anything

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from ictrepro.stages.train import load_problems  # noqa: E402
from ictrepro.train.sft import build_examples, collate, length_bucketed_batches  # noqa: E402

BUILDS = ("fp32", "bf16-autocast", "compile")
WARMUP = 10


def step_function(run: Path, build: str, workload: str) -> Callable[[dict], None]:
    """A function that runs ``workload`` on one batch in ``build``."""
    model = AutoModelForCausalLM.from_pretrained(run / "base_model")
    forward = torch.compile(model, dynamic=True) if build == "compile" else model

    def autocast() -> contextlib.AbstractContextManager:
        if build == "bf16-autocast":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    if workload == "forward":
        model.eval()

        def run_forward(batch: dict) -> None:
            with torch.no_grad(), autocast():
                forward(**batch)

        return run_forward
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95))

    def run_train(batch: dict) -> None:
        with autocast():
            loss = forward(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return run_train


def matmul_share(run: Path, workload: str, batches: list[dict]) -> float:
    """The share of fp32 eager's CPU time in the matrix products (``mm``, ``addmm``,
    ``bmm``) over ``batches``, by the torch profiler."""
    step = step_function(run, "fp32", workload)
    step(batches[0])
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for batch in batches:
            step(batch)
    times = {e.key: e.self_cpu_time_total for e in prof.key_averages()}
    products = sum(times.get(op, 0) for op in ("aten::mm", "aten::addmm", "aten::bmm"))
    return products / sum(times.values())


def bf16_matmul_ratio(tokens: int, hidden: int, intermediate: int) -> float:
    """bf16 time / fp32 time of a ``[tokens, hidden] @ [hidden, intermediate]`` product
    (the MLP's), median of 20 after 5 untimed."""
    a, b = torch.randn(tokens, hidden), torch.randn(hidden, intermediate)
    seconds = {}
    for dtype in (torch.float32, torch.bfloat16):
        x, y = a.to(dtype), b.to(dtype)
        for _ in range(5):
            x @ y
        runs = []
        for _ in range(20):
            start = time.perf_counter()
            x @ y
            runs.append(time.perf_counter() - start)
        seconds[dtype] = statistics.median(runs)
    return seconds[torch.bfloat16] / seconds[torch.float32]


def time_per_batch(step: Callable[[dict], None], batches: list[dict]) -> float:
    """Seconds per batch over ``batches[WARMUP:]``, after running the first ``WARMUP``."""
    for batch in batches[:WARMUP]:
        step(batch)
    start = time.perf_counter()
    for batch in batches[WARMUP:]:
        step(batch)
    return (time.perf_counter() - start) / (len(batches) - WARMUP)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    tokenizer = AutoTokenizer.from_pretrained(args.run / "base_model")
    examples = build_examples(
        load_problems(args.run / "data" / "sft.jsonl"), tokenizer, max_len=512
    )
    order = length_bucketed_batches(
        [len(e.input_ids) for e in examples],
        32,
        WARMUP + args.steps,
        torch.Generator().manual_seed(0),
    )
    batches = [collate([examples[i] for i in rows], tokenizer.pad_token_id) for rows in order]
    tokens = sum(int(b["attention_mask"].sum()) for b in batches) / len(batches)
    width = statistics.fmean(b["input_ids"].shape[1] for b in batches)
    print(
        f"{torch.__version__}, {torch.backends.cpu.get_cpu_capability()} kernels; "
        f"{len(batches) - WARMUP} timed batches of 32 sequences "
        f"(mean width {width:.0f}, {tokens:.0f} tokens)\n"
    )
    torch.set_num_threads(1)
    for workload in ("train", "forward"):
        share = matmul_share(args.run, workload, batches[:WARMUP])
        print(f"fp32 eager {workload}: matrix products take {100 * share:.0f}% of the CPU time")
    config = AutoModelForCausalLM.from_pretrained(args.run / "base_model").config
    bf16_ratio = bf16_matmul_ratio(int(tokens), config.hidden_size, config.intermediate_size)
    print(
        f"bf16 multiplies [{int(tokens)}, {config.hidden_size}] @ "
        f"[{config.hidden_size}, {config.intermediate_size}] in {bf16_ratio:.2f} of fp32's time\n"
    )
    times: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    ratios: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for threads in args.threads:
        torch.set_num_threads(threads)
        for _ in range(args.repeats):
            for workload in ("train", "forward"):
                this_repeat = {}
                for build in BUILDS:
                    step = step_function(args.run, build, workload)
                    this_repeat[build] = time_per_batch(step, batches)
                    times[(workload, build, threads)].append(this_repeat[build])
                for build in BUILDS:
                    ratios[(workload, build, threads)].append(
                        this_repeat[build] / this_repeat["fp32"]
                    )
    print("| workload | threads | build | ms per batch (each repeat) | ratio to fp32 eager |")
    print("|---|---|---|---|---|")
    for (workload, build, threads), values in sorted(times.items()):
        ms = ", ".join(f"{1e3 * v:.0f}" for v in values)
        ratio = ", ".join(f"{r:.2f}" for r in ratios[(workload, build, threads)])
        print(f"| {workload} | {threads} | {build} | {ms} | {ratio} |")


if __name__ == "__main__":
    main()
