"""Build the small Qwen2-architecture model of the CPU scale from a preset's ``ModelSpec``."""

from __future__ import annotations

import torch
from transformers import GenerationConfig, PreTrainedTokenizerBase, Qwen2Config, Qwen2ForCausalLM

from ictrepro.config import ModelSpec
from ictrepro.errors import ConfigError


def qwen2_config(spec: ModelSpec, tokenizer: PreTrainedTokenizerBase) -> Qwen2Config:
    """The ``Qwen2Config`` of ``spec``, with the tokenizer's vocabulary and special ids."""
    if spec.hidden_size % spec.num_attention_heads:
        raise ConfigError(
            f"model.hidden_size ({spec.hidden_size}) must be divisible by "
            f"model.num_attention_heads ({spec.num_attention_heads})"
        )
    if spec.num_attention_heads % spec.num_key_value_heads:
        raise ConfigError(
            f"model.num_attention_heads ({spec.num_attention_heads}) must be divisible by "
            f"model.num_key_value_heads ({spec.num_key_value_heads})"
        )
    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=spec.max_position_embeddings,
        rope_theta=spec.rope_theta,
        tie_word_embeddings=spec.tie_word_embeddings,
        rms_norm_eps=1e-6,
        initializer_range=0.02,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        use_cache=True,
    )


def build_model(
    spec: ModelSpec, tokenizer: PreTrainedTokenizerBase, *, seed: int
) -> Qwen2ForCausalLM:
    """A freshly initialised ``Qwen2ForCausalLM`` (float32), deterministic given ``seed``."""
    config = qwen2_config(spec, tokenizer)
    # Initialise under a private generator state so the caller's RNG stream is untouched.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
    )
    return model


def count_parameters(model: torch.nn.Module) -> int:
    """Distinct parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
