"""The sampler backends by name: ``make_sampler("hf" | "vllm", ...)`` and the HF one.

The interface they implement (``Sampler``) and what they return (``Completion``) live in
``ictrepro.rollout.base``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ictrepro.errors import ConfigError
from ictrepro.rollout.base import Completion, Sampler
from ictrepro.rollout.hf import hf_generate
from ictrepro.rollout.params import SAMPLERS, SamplingParams, VLLMSpec
from ictrepro.rollout.vllm import VLLMSampler, make_engine


class HFSampler:
    """Sampling on the live model (``hf_generate``; CPU, and the GPU fallback).

    ``use_generate``: sample with Hugging Face ``generate`` itself, the reference the
    project's decoding loop draws the same tokens as (``hf_generate``).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        batch_size: int = 64,
        use_generate: bool = False,
    ) -> None:
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.use_generate = use_generate

    def sample(
        self,
        prompts: list[str],
        params: SamplingParams,
        *,
        seed: int,
        index_offset: int = 0,
        stop: Sequence[str] = (),
    ) -> list[list[Completion]]:
        return hf_generate(
            self.model,
            self.tokenizer,
            prompts,
            params,
            seed=seed,
            batch_size=self.batch_size,
            index_offset=index_offset,
            stop=stop,
            use_generate=self.use_generate,
        )

    def update_weights(self, model: PreTrainedModel) -> None:
        # Sampling reads the parameters in place; only a different object needs a swap.
        self.model = model

    def close(self) -> None:
        pass  # the model is the caller's


def make_sampler(
    name: str,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    *,
    batch_size: int,
    model_path: str | None = None,
    vllm_settings: Any = None,
    vllm_dtype: str = "auto",
    max_model_len: int = 2048,
    pushes_weights: bool = False,
) -> Sampler:
    """The sampler backend ``name`` (``"hf"`` or ``"vllm"``); unknown names list the valid
    ones. The vLLM engine loads ``model_path`` with ``vllm_settings`` (``VLLMSpec``; vLLM
    itself is imported then: an error says to install the ``gpu`` extra when it is missing);
    ``pushes_weights``: the trainer's sampler, which receives the policy's weights."""
    if name == "hf":
        return HFSampler(model, tokenizer, batch_size=batch_size)
    if name == "vllm":
        settings = vllm_settings or VLLMSpec()
        engine = make_engine(
            model_path or model.name_or_path,
            settings,
            dtype=vllm_dtype,
            max_model_len=max_model_len,
            pushes_weights=pushes_weights,
        )
        return VLLMSampler(engine, sleep=settings.enable_sleep_mode)
    raise ConfigError(f"unknown sampler {name!r}; valid: {', '.join(SAMPLERS)}")
