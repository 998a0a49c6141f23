"""The per-GPU memory arithmetic of `ictrepro.memory` (bench/memory.py, the launch plan)."""

from __future__ import annotations

import dataclasses

import pytest

from ictrepro.config import InfraSpec, RLSpec, VLLMSpec
from ictrepro.memory import GB, SHAPES, ModelShape, estimate


@pytest.mark.parametrize(
    ("name", "billions"),
    [
        ("Qwen/Qwen2.5-0.5B", 0.494),
        ("Qwen/Qwen2.5-1.5B", 1.544),
        ("Qwen/Qwen2.5-7B", 7.616),
        ("HuggingFaceTB/SmolLM2-135M", 0.1345),
    ],
)
def test_parameter_counts_are_the_published_ones(name, billions):
    assert SHAPES[name].params / 1e9 == pytest.approx(billions, rel=2e-3)


def test_a_model_counted_by_hand():
    shape = ModelShape(
        "toy",
        hidden=4,
        intermediate=8,
        layers=2,
        heads=2,
        kv_heads=1,
        vocab=10,
        tied_embeddings=False,
    )
    # Per layer: q 4x4 + k, v 4x2 each + o 4x4, biases 4 + 2 + 2, MLP 3 x 4 x 8, 2 norms of 4.
    layer = 16 + 8 + 8 + 16 + 8 + 96 + 8
    assert shape.params == 2 * layer + 10 * 4 + 10 * 4 + 4


def test_items_by_strategy_and_sleep():
    shape = SHAPES["Qwen/Qwen2.5-0.5B"]
    P = shape.params
    rl = RLSpec(
        prompts_per_step=64,
        group_size=4,
        mini_batches=2,
        micro_batch_size=8,
        kl_coef=0.001,
        chunked_logprobs=True,
        max_new_tokens=100,
    )
    awake = InfraSpec(gradient_checkpointing=True)
    one = estimate(shape, rl, awake, strategy="single", processes=1, gpu_gb=80)
    assert one.items["policy weights (fp32)"] == 4 * P
    assert one.items["AdamW moments (fp32)"] == 8 * P
    assert one.items["reference model (fp32)"] == 4 * P
    assert one.items["DDP gradient buckets (fp32)"] == 0
    vllm = (
        one.items["vLLM: weights (bf16, TP=1)"]
        + one.items["vLLM: KV cache and engine (rest of its share)"]
    )
    assert vllm == pytest.approx(0.3 * 80 * GB)
    sharded = estimate(shape, rl, awake, strategy="fsdp2", processes=8, gpu_gb=80)
    assert sharded.items["policy weights (fp32)"] == 4 * P / 8
    # 64 x 4 / 8 ranks / 2 mini-batches = 16 rows in micro-batches of 8: accumulates.
    assert sharded.items["FSDP2 unsharded no-sync gradients (bf16)"] == 2 * P
    ddp = estimate(shape, rl, awake, strategy="ddp", processes=8, gpu_gb=80)
    assert ddp.items["DDP gradient buckets (fp32)"] == 4 * P
    # A sleeping engine holds nothing during the update: exactly its share less.
    asleep = dataclasses.replace(awake, vllm=VLLMSpec(enable_sleep_mode=True))
    slept = estimate(shape, rl, asleep, strategy="single", processes=1, gpu_gb=80)
    assert one.update_gb - slept.update_gb == pytest.approx(vllm / GB)
    assert slept.sampling_gb == one.sampling_gb
    no_kl = estimate(
        shape,
        dataclasses.replace(rl, kl_coef=0.0),
        awake,
        strategy="single",
        processes=1,
        gpu_gb=80,
    )
    assert no_kl.items["reference model (fp32)"] == 0
    with pytest.raises(ValueError, match="strategy must be one of"):
        estimate(shape, rl, awake, strategy="zero3", processes=1, gpu_gb=80)
