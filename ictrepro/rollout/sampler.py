"""The sampler interface that training and evaluation draw responses through.

A backend turns prompt texts into ``n`` completions each. Training also tells it when the
policy's weights changed (``update_weights``): the HF backend samples from the live model,
so there is nothing to do; an inference engine (vLLM) must receive the new weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ictrepro.rollout.hf import Completion, hf_generate
from ictrepro.rollout.params import SamplingParams

#: The backends ``make_sampler`` builds (``rl.sampler``).
SAMPLERS = ("hf", "vllm")


class Sampler(Protocol):
    def sample(
        self,
        prompts: list[str],
        params: SamplingParams,
        *,
        seed: int,
        index_offset: int = 0,
        stop: Sequence[str] = (),
    ) -> list[list[Completion]]:
        """``result[i][j]``: completion j of prompt i, each ending at EOS or a ``stop`` string
        (cut off). Seeds: see ``hf_generate`` (per call chunk) and ``VLLMSampler`` (per
        request); both depend on the prompt's index plus ``index_offset``, not on the rank."""
        ...

    def update_weights(self, model: PreTrainedModel) -> None:
        """Make the next ``sample`` use ``model``'s current weights."""
        ...


class HFSampler:
    """Hugging Face ``generate`` on the live model (CPU, and the GPU fallback)."""

    def __init__(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, *, batch_size: int = 64
    ) -> None:
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size

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
        )

    def update_weights(self, model: PreTrainedModel) -> None:
        # generate() reads the parameters in place; only a different object needs a swap.
        self.model = model


def make_sampler(
    name: str,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    *,
    batch_size: int,
    model_path: str | None = None,
) -> Sampler:
    """The sampler backend ``name`` (``"hf"`` or ``"vllm"``); unknown names list the valid
    ones. The vLLM engine loads ``model_path`` (lazy import: an error says to install the
    ``gpu`` extra when vLLM is missing)."""
    if name == "hf":
        return HFSampler(model, tokenizer, batch_size=batch_size)
    if name == "vllm":
        from ictrepro.rollout.vllm import VLLMSampler

        return VLLMSampler(model_path or model.name_or_path)
    raise ValueError(f"unknown sampler {name!r}; valid: {', '.join(SAMPLERS)}")
