"""Supervised warm start: teach a freshly built model the answer format on worked solutions.

Each example is ``render_prompt(problem) + solution + EOS``; the loss is the mean token
cross-entropy over the response (solution and EOS) only, so the model learns to answer,
not to write questions. The loop runs through Accelerate so the same code runs on GPUs.
Given the seed it is deterministic on a fixed platform and thread count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from accelerate import Accelerator
from transformers import PreTrainedModel, PreTrainedTokenizerBase, get_cosine_schedule_with_warmup

from ictrepro.config import SFTSpec
from ictrepro.data.prompts import render_prompt, response_suffix
from ictrepro.data.records import Problem
from ictrepro.progress import progress_bar

IGNORE_INDEX = -100
#: Batches per length-sorted window (see ``length_bucketed_batches``).
BUCKET_BATCHES = 16


@dataclass(frozen=True)
class SFTExample:
    input_ids: list[int]
    prompt_len: int


def build_examples(
    problems: list[Problem], tokenizer: PreTrainedTokenizerBase, *, max_len: int
) -> list[SFTExample]:
    """Tokenise prompt and response separately (so the boundary is exact) and join them."""
    eos = response_suffix(tokenizer)
    examples = []
    for p in problems:
        if not p.solution:
            raise ValueError(f"problem {p.id!r} has no solution text to train on")
        prompt = tokenizer(render_prompt(p, tokenizer), add_special_tokens=False)["input_ids"]
        response = tokenizer(p.solution + eos, add_special_tokens=False)["input_ids"]
        ids = prompt + response
        if len(ids) > max_len:
            raise ValueError(
                f"problem {p.id!r} is {len(ids)} tokens, more than the model's "
                f"max_position_embeddings ({max_len}); raise it in the preset's model spec"
            )
        examples.append(SFTExample(ids, len(prompt)))
    return examples


def collate(examples: list[SFTExample], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids``/``attention_mask``/``labels`` [B, T]; labels -100 off-response."""
    width = max(len(e.input_ids) for e in examples)
    input_ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), IGNORE_INDEX, dtype=torch.long)
    attention = torch.zeros((len(examples), width), dtype=torch.long)
    for i, e in enumerate(examples):
        n = len(e.input_ids)
        input_ids[i, :n] = torch.tensor(e.input_ids)
        labels[i, e.prompt_len : n] = input_ids[i, e.prompt_len : n]
        attention[i, :n] = 1
    return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}


def length_bucketed_batches(
    lengths: list[int], batch_size: int, steps: int, generator: torch.Generator
) -> list[list[int]]:
    """``steps`` batches of example indices: epochs of a seeded permutation, where each
    window of ``BUCKET_BATCHES`` batches is sorted by length before it is cut, so a batch
    holds examples of similar length (less padding), and the window's batches are shuffled.
    """
    batches: list[list[int]] = []
    while len(batches) < steps:
        order = torch.randperm(len(lengths), generator=generator).tolist()
        window = BUCKET_BATCHES * batch_size
        for start in range(0, len(order), window):
            chunk = sorted(order[start : start + window], key=lambda i: lengths[i])
            cut = [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
            perm = torch.randperm(len(cut), generator=generator).tolist()
            batches += [cut[i] for i in perm]
    return batches[:steps]


def run_sft(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    problems: list[Problem],
    spec: SFTSpec,
    *,
    seed: int,
    show_progress: bool = True,
) -> list[dict[str, float]]:
    """Train ``model`` in place for ``spec.steps`` steps; returns one metrics dict per step."""
    if not problems:
        raise ValueError("SFT needs at least one problem")
    examples = build_examples(problems, tokenizer, max_len=model.config.max_position_embeddings)
    accelerator = Accelerator()
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=spec.lr, weight_decay=spec.weight_decay, betas=(0.9, 0.95)
    )
    scheduler = get_cosine_schedule_with_warmup(optimizer, spec.warmup_steps, spec.steps)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    model.train()

    schedule = length_bucketed_batches(
        [len(e.input_ids) for e in examples], spec.batch_size, spec.steps, generator
    )
    log = []
    with progress_bar("SFT warm start", total=spec.steps, enabled=show_progress) as advance:
        for step, batch_idx in enumerate(schedule):
            batch = collate([examples[i] for i in batch_idx], tokenizer.pad_token_id)
            batch = {k: v.to(accelerator.device) for k, v in batch.items()}
            loss = model(**batch).loss
            accelerator.backward(loss)
            grad_norm = accelerator.clip_grad_norm_(model.parameters(), spec.grad_clip)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            value = loss.item()
            if not math.isfinite(value):
                raise FloatingPointError(f"SFT loss became {value} at step {step}; lower sft.lr")
            log.append(
                {
                    "step": step,
                    "loss": value,
                    "grad_norm": float(grad_norm),
                    "lr": scheduler.get_last_lr()[0],
                }
            )
            advance(description=f"SFT warm start  loss {value:.3f}")
    model.eval()
    return log
