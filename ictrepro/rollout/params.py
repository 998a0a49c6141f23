"""Decoding settings shared by every sampler backend, the backends' names and the vLLM
engine's settings: what the configs name.

Torch-free, so configs can hold them without importing a model library. The seed is not a
decoding setting: samplers take it per call.
"""

from __future__ import annotations

from dataclasses import dataclass

from ictrepro.errors import ConfigError

#: The backends ``ictrepro.rollout.sampler.make_sampler`` builds (``rl.sampler``).
SAMPLERS = ("hf", "vllm")


@dataclass(frozen=True)
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ConfigError(f"n must be >= 1, got {self.n}")
        if self.temperature < 0:
            raise ConfigError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")


@dataclass(frozen=True)
class VLLMSpec:
    """Settings of the colocated vLLM engine (``rl.sampler=vllm``); none changes results.

    The defaults leave room beside the policy, its optimiser state and the reference model
    on one GPU; a dedicated sampling GPU can take 0.9.
    """

    #: Share of the GPU's memory vLLM takes (weights and KV cache).
    gpu_memory_utilization: float = 0.3
    #: Longest prompt + response; 0 = the prompt budget plus ``rl.max_new_tokens``.
    max_model_len: int = 0
    #: Release the engine's memory while the policy updates (vLLM's sleep mode, GPU only).
    enable_sleep_mode: bool = False
    tensor_parallel_size: int = 1

    def __post_init__(self) -> None:
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError(
                f"infra.vllm.gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}"
            )
        if self.max_model_len < 0 or self.tensor_parallel_size < 1:
            raise ConfigError("infra.vllm.max_model_len must be >= 0, tensor_parallel_size >= 1")
