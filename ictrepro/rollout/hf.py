"""Sampling with Hugging Face ``generate``: batched, KV-cached, left-padded.

Used on CPU (the tiny scale) and as the fallback on GPUs. Randomness comes from a private
generator state seeded per call, so the same (model, prompts, params, seed) gives the same
samples on a fixed platform without touching the caller's RNG stream.

The n samples of a prompt share its prefix: each prompt is run through the model once and
its KV cache copied n times, instead of ``generate`` running n copies of it (the prompt is
a third to a half of a tiny-world sequence; docs/performance.md, "The sampler"). The
samples are the same tokens as ``generate``'s own expansion (checked by
tests/test_sampler.py) wherever a matrix product's row does not depend on how many rows
the batch has, which holds for the CPU kernels the pinned results were made with.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import torch
from torch.distributed.fsdp import FSDPModule
from transformers import DynamicCache, PreTrainedModel, PreTrainedTokenizerBase

from ictrepro.errors import ConfigError
from ictrepro.rollout.base import Completion
from ictrepro.rollout.params import SamplingParams


@torch.no_grad()
def hf_generate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    params: SamplingParams,
    *,
    seed: int,
    batch_size: int = 64,
    index_offset: int = 0,
    stop: Sequence[str] = (),
    share_prompts: bool = True,
) -> list[list[Completion]]:
    """``params.n`` completions for each prompt: ``result[i][j]`` is sample j of prompt i.

    ``stop``: strings that end a response like EOS does (e.g. ``"\nQuestion:"`` for a
    base model's plain prompt frame); the text is cut before the first one, which counts
    as finished.

    ``batch_size`` counts sequences (prompts x n) per ``generate`` call. Each call is
    seeded from ``seed`` and the index of its first prompt plus ``index_offset``: a process
    that samples the second half of a batch passes the half's offset, and draws exactly
    what one process sampling the whole batch in calls of the same size would.

    ``share_prompts``: run each prompt through the model once for its ``n`` samples (see
    the module's docstring); False leaves the expansion to ``generate``. A sharded model
    always lets ``generate`` do it, so that every process runs the same forwards.
    """
    eos_id = tokenizer.eos_token_id
    if eos_id is None or tokenizer.pad_token_id is None:
        raise ConfigError(
            "the tokenizer needs both an EOS and a pad token for batched sampling; set "
            "eos_token and pad_token in the model's tokenizer_config.json"
        )
    prompts_per_call = max(1, batch_size // params.n)
    greedy = params.temperature == 0
    # An FSDP2-sharded model gathers its weights in every forward, a collective: every
    # process must run as many forwards as the slowest, which generate's synced_gpus does.
    # transformers turns it on itself where it sees torch's FSDP mark on the model; said
    # here so that sampling does not rest on that detection.
    synced = {"synced_gpus": True} if _is_sharded(model) else {}
    was_training = model.training
    model.eval()
    results: list[list[Completion]] = []
    with torch.random.fork_rng(devices=[]):
        for start in range(0, len(prompts), prompts_per_call):
            chunk = prompts[start : start + prompts_per_call]
            # Seed per chunk so a chunk's samples do not depend on earlier chunks' lengths.
            torch.manual_seed(seed * 1_000_003 + index_offset + start)
            enc = tokenizer(
                chunk,
                return_tensors="pt",
                padding=True,
                padding_side="left",
                add_special_tokens=False,
            ).to(model.device)
            if share_prompts and params.n > 1 and not synced and enc["input_ids"].shape[1] > 1:
                inputs = _prefill_once(model, enc, params.n)
                copies = 1
            else:
                inputs, copies = dict(enc), params.n
            out = model.generate(
                **inputs,
                do_sample=not greedy,
                temperature=params.temperature if not greedy else None,
                top_p=params.top_p if not greedy else None,
                top_k=0 if not greedy else None,
                max_new_tokens=params.max_new_tokens,
                num_return_sequences=copies,
                eos_token_id=eos_id,
                pad_token_id=tokenizer.pad_token_id,
                **({"stop_strings": list(stop), "tokenizer": tokenizer} if stop else {}),
                **synced,
            )
            new_tokens = out[:, enc["input_ids"].shape[1] :].tolist()
            for i in range(len(chunk)):
                group = []
                for ids in new_tokens[i * params.n : (i + 1) * params.n]:
                    finished = eos_id in ids
                    ids = ids[: ids.index(eos_id) + 1] if finished else ids
                    text = tokenizer.decode(ids, skip_special_tokens=True)
                    cut = min((i for i in (text.find(x) for x in stop) if i >= 0), default=-1)
                    if cut >= 0:
                        # generate() pads a sequence that a stop string ended.
                        while ids and ids[-1] == tokenizer.pad_token_id:
                            ids = ids[:-1]
                        text, finished = text[:cut], True
                    group.append(Completion(text, tuple(ids), finished))
                results.append(group)
    model.train(was_training)
    return results


def _prefill_once(model: PreTrainedModel, enc: Any, n: int) -> dict[str, Any]:
    """``generate``'s inputs for ``n`` samples of each prompt of ``enc``, whose prompts but
    their last token are already in a KV cache run once per prompt and copied ``n`` times.

    ``enc``: the tokenizer's left-padded ``input_ids`` and ``attention_mask``, [P, L]. The
    result's are [P * n, L] (each prompt's copies adjacent, as ``num_return_sequences``
    orders them) with the cache of their first L - 1 tokens; ``generate`` runs the last.
    Positions skip the left padding, as ``generate`` counts them.
    """
    ids, mask = enc["input_ids"], enc["attention_mask"]
    prefix_mask = mask[:, :-1]
    positions = prefix_mask.long().cumsum(-1) - 1
    positions.masked_fill_(prefix_mask == 0, 1)
    cache, cache_arg = DynamicCache(config=model.config), _cache_argument(model)
    model(
        input_ids=ids[:, :-1],
        attention_mask=prefix_mask,
        position_ids=positions,
        use_cache=True,
        logits_to_keep=1,  # the logits are not needed, only the cache
        **{cache_arg: cache},
    )
    cache.batch_repeat_interleave(n)
    return {
        "input_ids": ids.repeat_interleave(n, 0),
        "attention_mask": mask.repeat_interleave(n, 0),
        cache_arg: cache,
    }


def _cache_argument(model: PreTrainedModel) -> str:
    """The name under which ``model`` takes a KV cache: ``cache`` from transformers 5.25
    (which deprecates ``past_key_values``), ``past_key_values`` before."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _is_sharded(model: torch.nn.Module) -> bool:
    """Whether ``model`` is FSDP2-sharded (its forward is a collective)."""

    return isinstance(model, FSDPModule)
