"""The vLLM sampler backend (GPU): `vllm.LLM.generate` with per-request seeds.

**Untested on the project's machines** (no GPU, and vLLM is never installed in CI): what is
tested, with a fake engine (`tests/test_sampler.py`), is the conversion of requests and
responses and the weight push. Written against vLLM 0.8-0.11 (the `gpu` extra pins
``vllm>=0.8,<0.12``):

- requests: one ``SamplingParams(n, temperature, top_p, max_tokens, seed)`` per prompt, the
  seed derived from (call seed, prompt index + ``index_offset``), so a process sampling
  part of a batch draws what one process sampling the whole batch would;
- responses: ``RequestOutput.outputs[j]`` -> ``Completion(text, token_ids, finished)`` with
  ``finished = finish_reason == "stop"``;
- training pushes the policy's weights after every update with
  ``LLM.apply_model(lambda model: model.load_weights(...))``, which needs the engine in the
  training process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) and tensor parallel size 1.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from ictrepro.errors import ConfigError
from ictrepro.rollout.base import Completion
from ictrepro.rollout.params import SamplingParams

INSTALL_HINT = (
    "the vllm backend needs vLLM, which is not installed; on a GPU machine install the "
    "`gpu` extra: pip install -e '.[gpu]' (or use --backend hf)"
)


def request_seed(seed: int, index: int) -> int:
    """The seed of prompt ``index`` of a call seeded ``seed`` (31 bits, as vLLM accepts)."""
    digest = hashlib.sha256(f"{seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def to_request_kwargs(
    params: SamplingParams, seed: int, stop: Sequence[str] = ()
) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for one prompt (vLLM cuts the text
    before a stop string, as the HF backend does)."""
    return {
        "n": params.n,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_tokens": params.max_new_tokens,
        "seed": seed,
        "stop": list(stop),
    }


def from_request_output(output: Any, n: int) -> list[Completion]:
    """``vllm.RequestOutput`` -> its ``n`` completions, in order."""
    completions = [
        Completion(o.text, tuple(o.token_ids), o.finish_reason == "stop") for o in output.outputs
    ]
    if len(completions) != n:
        raise RuntimeError(
            f"vLLM returned {len(completions)} completions for a prompt, expected {n}"
        )
    return completions


class VLLMSampler:
    """Samples through a ``vllm.LLM`` engine (created here unless one is passed in).

    Args:
        model_path: HF model directory or hub id, for a new engine.
        engine: an existing engine (tests pass a fake one).
        params_factory: builds one request's parameters from ``to_request_kwargs``;
            ``vllm.SamplingParams`` unless given.
        engine_kwargs: passed to ``vllm.LLM`` (e.g. ``gpu_memory_utilization``, ``dtype``).
    """

    def __init__(
        self,
        model_path: str | None = None,
        *,
        engine: Any = None,
        params_factory: Callable[..., Any] | None = None,
        **engine_kwargs: Any,
    ) -> None:
        if engine is None or params_factory is None:
            try:
                import vllm
            except ImportError as e:
                raise ConfigError(INSTALL_HINT) from e
            engine = engine or vllm.LLM(model=model_path, **engine_kwargs)
            params_factory = params_factory or vllm.SamplingParams
        self.engine, self.params_factory = engine, params_factory

    def sample(
        self,
        prompts: list[str],
        params: SamplingParams,
        *,
        seed: int,
        index_offset: int = 0,
        stop: Sequence[str] = (),
    ) -> list[list[Completion]]:
        requests = [
            self.params_factory(
                **to_request_kwargs(params, request_seed(seed, index_offset + i), stop)
            )
            for i in range(len(prompts))
        ]
        outputs = self.engine.generate(prompts, sampling_params=requests, use_tqdm=False)
        if len(outputs) != len(prompts):
            raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(prompts)} prompts")
        return [from_request_output(o, params.n) for o in outputs]

    def update_weights(self, model: Any) -> None:
        """Copy the policy's current weights into the engine's model."""
        weights = [(name, p.detach()) for name, p in model.state_dict().items()]
        self.engine.apply_model(lambda engine_model: engine_model.load_weights(weights))
