"""Sampling on the live model: batched, KV-cached, left-padded, ``generate``'s samples.

Used on CPU (the tiny scale) and as the fallback on GPUs. Randomness comes from a private
generator state seeded per call, so the same (model, prompts, params, seed) gives the same
samples on a fixed platform without touching the caller's RNG stream.

``_sample_rows`` is Hugging Face ``generate``'s multinomial sampling written out, with two
savings that leave every sample as it was (docs/performance.md, "The sampler"):

- each prompt runs through the model once for its n samples and its KV cache is copied n
  times, where ``generate`` would run n copies of it (a third to a half of a tiny-world
  sequence);
- a response that has ended leaves the batch: ``generate`` keeps running it, padded, until
  the batch's longest response ends (most of the decoding when lengths vary).

The draws stay ``generate``'s because the multinomial draw still covers every row of the
batch (it consumes the same random numbers whatever the finished rows hold), and a row's
logits do not depend on which other rows share its forward: that holds for the CPU
kernels the pinned results were made with for batches of at least ``MIN_ROWS`` rows
(products of 1 to 3 rows came out in other bits there), so the batch never shrinks below
it. tests/test_sampler.py checks the samples against ``generate``'s own (``use_generate``)
and the row independence on the machine it runs on.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.distributed.fsdp import FSDPModule
from transformers import (
    DynamicCache,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    StopStringCriteria,
    TemperatureLogitsWarper,
    TopPLogitsWarper,
)

from ictrepro.errors import ConfigError
from ictrepro.rollout.base import Completion
from ictrepro.rollout.params import SamplingParams

#: The fewest rows a decoding forward runs (or all of them, where the batch has fewer):
#: finished rows stay in as fillers below it (see the module's docstring).
MIN_ROWS = 8


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
    use_generate: bool = False,
) -> list[list[Completion]]:
    """``params.n`` completions for each prompt: ``result[i][j]`` is sample j of prompt i.

    ``stop``: strings that end a response like EOS does (e.g. ``"\nQuestion:"`` for a
    base model's plain prompt frame); the text is cut before the first one, which counts
    as finished.

    ``batch_size`` counts sequences (prompts x n) per call. Each call is seeded from
    ``seed`` and the index of its first prompt plus ``index_offset``: a process that samples
    the second half of a batch passes the half's offset, and draws exactly what one process
    sampling the whole batch in calls of the same size would.

    ``use_generate``: sample with ``generate`` itself (the reference the tests compare
    with). A sharded model always does, so that every process runs the same forwards.
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
            if use_generate or synced:
                # Each prompt's n copies adjacent, as num_return_sequences lays them out
                # (which refuses n > 1 when greedy).
                out = model.generate(
                    **{k: v.repeat_interleave(params.n, 0) for k, v in enc.items()},
                    do_sample=not greedy,
                    temperature=params.temperature if not greedy else None,
                    top_p=params.top_p if not greedy else None,
                    top_k=0 if not greedy else None,
                    max_new_tokens=params.max_new_tokens,
                    eos_token_id=eos_id,
                    pad_token_id=tokenizer.pad_token_id,
                    **({"stop_strings": list(stop), "tokenizer": tokenizer} if stop else {}),
                    **synced,
                )
                new_tokens = out[:, enc["input_ids"].shape[1] :].tolist()
            else:
                new_tokens = _sample_rows(model, tokenizer, enc, params, stop).tolist()
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


def _sample_rows(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    enc: Any,
    params: SamplingParams,
    stop: Sequence[str],
) -> Tensor:
    """The new tokens of ``params.n`` samples of each prompt of ``enc``, as ``generate``
    (``num_return_sequences=n``) draws them: ``[P * n, T]``, each prompt's samples adjacent,
    pad after a response's end, T the longest response (at most ``max_new_tokens``).

    ``enc``: the tokenizer's left-padded ``input_ids`` and ``attention_mask``, [P, L].
    """
    n, pad, eos = params.n, tokenizer.pad_token_id, tokenizer.eos_token_id
    ids = enc["input_ids"].repeat_interleave(n, 0)
    mask = enc["attention_mask"].repeat_interleave(n, 0)
    N = ids.shape[0]
    positions = _positions(mask)
    cache_arg = _cache_argument(model)
    cache = _prefilled_cache(model, enc, n, cache_arg)
    warpers = _warpers(params)
    stop_criteria = StopStringCriteria(tokenizer, list(stop)) if stop else None
    out = ids.new_full((N, params.max_new_tokens), pad)
    unfinished = torch.ones(N, dtype=torch.bool, device=ids.device)
    rows = torch.arange(N, device=ids.device)  # the rows the cache holds
    inputs = ids[:, -1:] if cache.get_seq_length() else ids
    input_positions = positions[:, -inputs.shape[1] :]
    width = 0  # new tokens so far
    while width < params.max_new_tokens:
        logits = (
            model(
                input_ids=inputs,
                attention_mask=mask[rows],
                position_ids=input_positions,
                use_cache=True,
                logits_to_keep=1,
                **{cache_arg: cache},
            )
            .logits[:, -1]
            .float()
        )
        scores = warpers(None, logits)
        if params.temperature == 0:
            drawn = scores.argmax(-1)
        else:
            # Over every row, as generate draws: the finished rows' draws are discarded.
            probs = scores.new_ones(N, scores.shape[-1])
            probs[rows] = torch.softmax(scores, -1)
            drawn = torch.multinomial(probs, 1).squeeze(1)[rows]
        live = unfinished[rows]
        tokens = torch.where(live, drawn, pad)
        out[rows, width] = tokens
        width += 1
        ended = tokens == eos
        if stop_criteria is not None:
            seqs = torch.cat([ids[rows], out[rows, :width]], 1)
            ended |= stop_criteria(seqs, None)
        unfinished[rows] = live & ~ended
        if not unfinished.any():
            break
        mask = torch.cat([mask, mask.new_ones(N, 1)], 1)
        keep = _rows_to_keep(rows, unfinished)
        if keep is not None:
            cache.batch_select_indices(keep)
            rows, tokens = rows[keep], tokens[keep]
        inputs = tokens[:, None]
        input_positions = positions[rows, -1:] + width
    return out[:, :width]


def _rows_to_keep(rows: Tensor, unfinished: Tensor) -> Tensor | None:
    """Which of ``rows`` (indices into the batch) the next forward runs, as indices into
    ``rows``; None to keep them all. Rows leave once a quarter of them has ended (each
    removal copies the cache), never below ``MIN_ROWS``: finished rows fill up to it."""
    live = unfinished[rows]
    n_live = int(live.sum())
    target = max(n_live, min(MIN_ROWS, len(rows)))
    if 4 * (len(rows) - target) < len(rows):
        return None
    order = torch.argsort(~live, stable=True)  # live rows first, each kind in order
    return order[:target].sort().values


def _prefilled_cache(model: PreTrainedModel, enc: Any, n: int, cache_arg: str) -> DynamicCache:
    """A KV cache of each prompt of ``enc`` but its last token, run once and copied for
    its ``n`` samples (each prompt's copies adjacent); empty where prompts are one token.
    ``cache_arg``: the name under which the model takes it (``_cache_argument``)."""
    cache = DynamicCache(config=model.config)
    ids, mask = enc["input_ids"], enc["attention_mask"]
    if ids.shape[1] < 2:
        return cache
    prefix_mask = mask[:, :-1]
    model(
        input_ids=ids[:, :-1],
        attention_mask=prefix_mask,
        position_ids=_positions(prefix_mask),
        use_cache=True,
        logits_to_keep=1,  # the logits are not needed, only the cache
        **{cache_arg: cache},
    )
    cache.batch_repeat_interleave(n)
    return cache


def _positions(mask: Tensor) -> Tensor:
    """Position ids ``[B, L]`` of a left-padded ``mask`` ``[B, L]``: they skip the padding,
    as ``generate`` counts them (0 on the padding itself)."""
    return (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)


def _warpers(params: SamplingParams) -> Callable[[Tensor | None, Tensor], Tensor]:
    """``generate``'s logits warpers for ``params``, in its order (none where greedy)."""
    warpers = []
    if params.temperature not in (0, 1):
        warpers.append(TemperatureLogitsWarper(params.temperature))
    if params.temperature != 0 and params.top_p < 1:
        warpers.append(TopPLogitsWarper(params.top_p))

    def apply(input_ids: Tensor | None, scores: Tensor) -> Tensor:
        for warp in warpers:
            scores = warp(input_ids, scores)
        return scores

    return apply


def _cache_argument(model: PreTrainedModel) -> str:
    """The name under which ``model`` takes a KV cache: ``cache`` from transformers 5.25
    (which deprecates ``past_key_values``), ``past_key_values`` before."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _is_sharded(model: torch.nn.Module) -> bool:
    """Whether ``model`` is FSDP2-sharded (its forward is a collective)."""

    return isinstance(model, FSDPModule)
