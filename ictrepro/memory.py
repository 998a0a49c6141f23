"""Memory per GPU of a training run: arithmetic from the model's shape and the run's settings.

An estimate, not a measurement (no GPU has run the paper presets): every term is a count
of tensors the trainer keeps, times their bytes, so each can be checked against the code
that allocates it. ``bench/memory.py`` prints the tables of docs/paper-scale.md from this.

The two phases of a step peak differently:

- **sampling**: the policy's weights and AdamW moments (gradients are freed after every
  optimiser step), the reference, and vLLM's share of the GPU;
- **update**: the same plus gradients, activations of one micro-batch, the LM head's
  chunks, and vLLM's share unless it sleeps (``infra.vllm.enable_sleep_mode``: the
  trainer puts it to sleep after sampling, which moves its weights to host memory and
  drops its KV cache).

Not counted: the CUDA context and kernels' workspaces (a few hundred MB per process),
the allocator's fragmentation, and the statistics pass, whose no-grad forward of one
micro-batch is smaller than the update's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

GB = 1e9


@dataclass(frozen=True)
class ModelShape:
    """A Qwen2/Llama-style decoder's sizes (from the model's ``config.json``)."""

    name: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    vocab: int
    tied_embeddings: bool
    qkv_bias: bool = True

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def params(self) -> int:
        """Parameter count (embeddings, layers, final norm, untied head)."""
        D, hd = self.hidden, self.head_dim
        q, kv = self.heads * hd, self.kv_heads * hd
        attention = D * (q + 2 * kv) + q * D + (q + 2 * kv if self.qkv_bias else 0)
        layer = attention + 3 * D * self.intermediate + 2 * D
        head = 0 if self.tied_embeddings else self.vocab * D
        return self.layers * layer + self.vocab * D + head + D


#: The shapes of the models the presets train (their ``config.json`` on the hub).
SHAPES = {
    s.name: s
    for s in (
        ModelShape("Qwen/Qwen2.5-0.5B", 896, 4864, 24, 14, 2, 151_936, True),
        ModelShape("Qwen/Qwen2.5-1.5B", 1536, 8960, 28, 12, 2, 151_936, True),
        ModelShape("Qwen/Qwen2.5-7B", 3584, 18944, 28, 28, 4, 152_064, False),
        ModelShape("HuggingFaceTB/SmolLM2-135M", 576, 1536, 30, 9, 3, 49_152, True, False),
    )
}

STRATEGIES = ("single", "ddp", "fsdp2")


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per GPU by item, and the two phases' peaks (GB = 1e9 bytes)."""

    model: str
    strategy: str
    processes: int
    gpu_gb: float
    items: dict[str, float]
    sampling_items: tuple[str, ...]
    update_items: tuple[str, ...]

    @property
    def sampling_gb(self) -> float:
        return sum(self.items[k] for k in self.sampling_items) / GB

    @property
    def update_gb(self) -> float:
        return sum(self.items[k] for k in self.update_items) / GB

    @property
    def peak_gb(self) -> float:
        return max(self.sampling_gb, self.update_gb)

    @property
    def fits(self) -> bool:
        return self.peak_gb <= self.gpu_gb

    def lines(self) -> list[str]:
        """One line per item, then the phases' peaks against the GPU's memory."""
        out = [f"{name:<44} {size / GB:7.2f} GB" for name, size in self.items.items() if size]
        verdict = "fits" if self.fits else "does NOT fit"
        out.append(
            f"peak per GPU: sampling {self.sampling_gb:.1f} GB, update {self.update_gb:.1f} GB"
            f" of {self.gpu_gb:.0f} GB -> {verdict}"
        )
        return out


def estimate(
    shape: ModelShape,
    rl: Any,
    infra: Any,
    *,
    strategy: str,
    processes: int,
    gpu_gb: float,
    prompt_tokens: int = 256,
    no_sync_gradients: bool = True,
) -> MemoryEstimate:
    """Bytes per GPU of one training process of ``rl`` / ``infra`` (``RLSpec``,
    ``InfraSpec``) on ``shape`` under ``strategy`` (``single``, ``ddp`` or ``fsdp2`` over
    ``processes`` GPUs of ``gpu_gb`` GB) with bf16 autocast over float32 master weights.

    ``prompt_tokens``: the longest prompt of a micro-batch (an assumption: the paper's
    MATH prompts with the chat template are a few hundred tokens); responses are taken at
    ``rl.max_new_tokens``, since one long response pads its whole micro-batch.
    ``no_sync_gradients``: FSDP2 keeps unsharded gradients across the micro-batches of an
    optimiser step while it skips their reduce-scatter (accelerate's ``no_sync``); 2 bytes
    a parameter, the reduce dtype bf16 (issue 22's reading of torch's FSDP2).
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    P, D, V, L = shape.params, shape.hidden, shape.vocab, shape.layers
    shard = processes if strategy == "fsdp2" else 1
    micro = rl.micro_batch_size or (rl.prompts_per_step * rl.group_size // processes)
    tokens = micro * (prompt_tokens + rl.max_new_tokens)
    rows_per_rank = rl.prompts_per_step * rl.group_size // processes // rl.mini_batches
    accumulating = math.ceil(rows_per_rank / micro) > 1
    # One decoder layer's tensors saved for backward under bf16 autocast, per token: the
    # bf16 inputs of q/k/v, o, gate/up and down projections, q/k/v and attention output,
    # the float32 residual and norm inputs (about 24 D bytes), and the MLP's gate, up,
    # act(gate) and their product (8 I bytes).
    layer_bytes = 24 * D + 8 * shape.intermediate
    if infra.gradient_checkpointing:
        # One float32 hidden state per layer boundary, plus one layer recomputed at a time.
        activations = tokens * (4 * D * L + layer_bytes)
    else:
        activations = tokens * layer_bytes * L
    if rl.chunked_logprobs:
        # Imported here: token_stats loads torch, which `reproduce --dry-run` needs not.
        from ictrepro.algos.token_stats import UPDATE_CHUNK_ELEMENTS

        # Three float32 chunk tensors, the float32 head gradient accumulator and the bf16
        # head the chunks multiply.
        head = 3 * UPDATE_CHUNK_ELEMENTS * 4 + V * D * 4 + V * D * 2
    else:
        # Logits (bf16), their float32 copy and log-softmax, kept through backward.
        head = micro * rl.max_new_tokens * V * (2 + 4 + 4)
    vllm_budget = infra.vllm.gpu_memory_utilization * gpu_gb * GB
    items = {
        "policy weights (fp32)": 4 * P / shard,
        "AdamW moments (fp32)": 8 * P / shard,
        "reference model (fp32)": 4 * P / shard if rl.kl_coef > 0 else 0.0,
        f"vLLM: weights (bf16, TP={infra.vllm.tensor_parallel_size})": 2
        * P
        / infra.vllm.tensor_parallel_size,
        "vLLM: KV cache and engine (rest of its share)": vllm_budget
        - 2 * P / infra.vllm.tensor_parallel_size,
        "gradients (fp32)": 4 * P / shard,
        "DDP gradient buckets (fp32)": 4 * P if strategy == "ddp" else 0.0,
        "FSDP2 unsharded no-sync gradients (bf16)": 2 * P
        if strategy == "fsdp2" and accumulating and no_sync_gradients
        else 0.0,
        # Autocast caches the bf16 copy of every weight that requires grad for the
        # forward and backward of a micro-batch; FSDP2 gathers bf16 weights layer by layer
        # (two layers in flight with prefetching) and the unsharded embeddings.
        "bf16 weight copies": 2 * P
        if strategy != "fsdp2"
        else 2 * (2 * (P - V * D * (1 if shape.tied_embeddings else 2)) / L + V * D),
        f"activations ({micro} rows x {prompt_tokens + rl.max_new_tokens} tokens)": activations,
        "LM head in the update": head,
    }
    base = ("policy weights (fp32)", "AdamW moments (fp32)", "reference model (fp32)")
    vllm = tuple(k for k in items if k.startswith("vLLM"))
    update = tuple(k for k in items if k not in vllm)
    if not infra.vllm.enable_sleep_mode:
        update += vllm
    return MemoryEstimate(
        shape.name,
        strategy,
        processes,
        gpu_gb,
        items,
        sampling_items=base + vllm,
        update_items=update,
    )
