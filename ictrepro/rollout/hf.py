"""Sampling with Hugging Face ``generate``: batched, KV-cached, left-padded.

Used on CPU (the tiny scale) and as the fallback on GPUs. Randomness comes from a private
generator state seeded per call, so the same (model, prompts, params, seed) gives the same
samples on a fixed platform without touching the caller's RNG stream.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.distributed.fsdp import FSDPModule
from transformers import PreTrainedModel, PreTrainedTokenizerBase

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
) -> list[list[Completion]]:
    """``params.n`` completions for each prompt: ``result[i][j]`` is sample j of prompt i.

    ``stop``: strings that end a response like EOS does (e.g. ``"\nQuestion:"`` for a
    base model's plain prompt frame); the text is cut before the first one, which counts
    as finished.

    ``batch_size`` counts sequences (prompts x n) per ``generate`` call. Each call is
    seeded from ``seed`` and the index of its first prompt plus ``index_offset``: a process
    that samples the second half of a batch passes the half's offset, and draws exactly
    what one process sampling the whole batch in calls of the same size would.
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
            out = model.generate(
                **enc,
                do_sample=not greedy,
                temperature=params.temperature if not greedy else None,
                top_p=params.top_p if not greedy else None,
                top_k=0 if not greedy else None,
                max_new_tokens=params.max_new_tokens,
                num_return_sequences=params.n,
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


def _is_sharded(model: torch.nn.Module) -> bool:
    """Whether ``model`` is FSDP2-sharded (its forward is a collective)."""

    return isinstance(model, FSDPModule)
