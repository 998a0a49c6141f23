"""What every sampler backend returns and the interface training and evaluation call.

Backend-neutral and free of model libraries at import time, so the HF and vLLM backends,
the training loop and the tests share these types without importing each other.

A backend turns prompt texts into ``n`` completions each. Training also tells it when the
policy's weights changed (``update_weights``): the HF backend samples from the live model,
so there is nothing to do; an inference engine (vLLM) must receive the new weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ictrepro.rollout.params import SamplingParams

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@dataclass(frozen=True)
class Completion:
    """One sampled response: its text (special tokens removed), its token ids (up to and
    including EOS if it stopped) and whether it stopped by itself (EOS) or hit the limit.

    ``logprobs``: the sampler's own log-prob of each token (vLLM reports them; the HF
    backend samples from the trainer's model and reports none). Not part of equality: two
    samplings of the same tokens are the same completion.
    """

    text: str
    token_ids: tuple[int, ...]
    finished: bool
    logprobs: tuple[float, ...] | None = field(default=None, compare=False)


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

    def close(self) -> None:
        """Release what the backend holds (an engine's GPU memory); no ``sample`` after."""
        ...
