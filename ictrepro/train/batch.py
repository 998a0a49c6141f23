"""The pure pieces of a GRPO step: the prompt schedule, the packed rollout batch, row
chunks that keep groups whole, micro-batch weights, the learning-rate schedule, and the
batch's own metrics. No model, optimiser or process group: ``train/grpo.py`` builds the
loop from them, and the tests check them alone."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ictrepro.algos.token_stats import TokenStats
from ictrepro.data.records import Problem
from ictrepro.errors import ConfigError
from ictrepro.rollout.base import Completion
from ictrepro.train.metrics import MetricSums


def derive_seed(*parts: object) -> int:
    """A 40-bit seed from ``parts`` (e.g. ``(seed, "sample", step)``), stable across runs."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:5], "little")


class PromptSchedule:
    """Which prompts each step uses: epochs of a seeded permutation of the training set.

    Step ``s`` takes the global positions ``[s * P, (s + 1) * P)`` of the concatenated
    epochs, so the data position is a function of the step alone (nothing to replay on
    resume).
    """

    def __init__(self, n_problems: int, prompts_per_step: int, seed: int) -> None:
        if n_problems < 1:
            raise ValueError("the RL training set is empty")
        self.n, self.per_step, self.seed = n_problems, prompts_per_step, seed
        # Host-side: the permutation only yields Python indices.
        self._epoch, self._perm = -1, torch.empty(0, dtype=torch.long, device="cpu")

    def _permutation(self, epoch: int) -> Tensor:
        if epoch != self._epoch:
            g = torch.Generator().manual_seed(derive_seed(self.seed, "data", epoch))
            self._epoch, self._perm = epoch, torch.randperm(self.n, generator=g, device="cpu")
        return self._perm

    def indices(self, step: int) -> list[int]:
        out = []
        for position in range(step * self.per_step, (step + 1) * self.per_step):
            epoch, offset = divmod(position, self.n)
            out.append(int(self._permutation(epoch)[offset]))
        return out


@dataclass(frozen=True)
class RolloutBatch:
    """One rank's sampled responses as tensors; ``B = prompts x G`` rows, groups contiguous.

    The sequence is ``[prompt, left-padded to P | response, right-padded to R]``, so every
    response starts at column ``P`` and position ``t`` of a group's responses is aligned.

    Attributes:
        input_ids, attention_mask, position_ids: ``[B, P + R]`` (long).
        response_ids: ``[B, R]`` long; ``response_mask``: ``[B, R]`` bool (EOS included).
        group_ids: ``[B]`` long; ``rewards``: ``[B]`` float32.
    """

    input_ids: Tensor
    attention_mask: Tensor
    position_ids: Tensor
    response_ids: Tensor
    response_mask: Tensor
    group_ids: Tensor
    rewards: Tensor

    @property
    def prompt_width(self) -> int:
        return self.input_ids.shape[1] - self.response_ids.shape[1]

    def rows(self, index: slice) -> RolloutBatch:
        """The rows ``index``, without the columns that are padding in all of them.

        The batch is padded to its longest prompt and longest response; a chunk of rows
        usually needs fewer columns, and the model's cost grows with every column kept.
        Responses still start at the (new) ``prompt_width``; positions ids are unchanged.
        """
        sub = RolloutBatch(*(getattr(self, f)[index] for f in self.__dataclass_fields__))
        first = int(torch.nonzero(sub.attention_mask.any(dim=0)).min())
        width = max(1, int(sub.response_mask.sum(dim=1).max()))
        P = self.prompt_width
        return RolloutBatch(
            sub.input_ids[:, first : P + width],
            sub.attention_mask[:, first : P + width],
            sub.position_ids[:, first : P + width],
            sub.response_ids[:, :width],
            sub.response_mask[:, :width],
            sub.group_ids,
            sub.rewards,
        )


def build_batch(
    prompt_ids: list[list[int]],
    completions: list[list[Completion]],
    rewards: list[float],
    pad_id: int,
    device: torch.device,
) -> RolloutBatch:
    """Pack prompts and their completions (``completions[i]``: the group of prompt i)."""
    rows = [(p, c) for p, group in zip(prompt_ids, completions, strict=True) for c in group]
    P = max(len(p) for p, _ in rows)
    R = max(1, max(len(c.token_ids) for _, c in rows))
    B = len(rows)
    # Filled row by row on the host, then moved to ``device`` in one transfer per tensor.
    host = torch.device("cpu")
    input_ids = torch.full((B, P + R), pad_id, dtype=torch.long, device=host)
    attention = torch.zeros((B, P + R), dtype=torch.long, device=host)
    response_mask = torch.zeros((B, R), dtype=torch.bool, device=host)
    for b, (prompt, completion) in enumerate(rows):
        n = len(completion.token_ids)
        input_ids[b, P - len(prompt) : P] = torch.tensor(prompt, device=host)
        attention[b, P - len(prompt) : P + n] = 1
        if n:
            input_ids[b, P : P + n] = torch.tensor(completion.token_ids, device=host)
        response_mask[b, :n] = True
    # Positions count real tokens only, as generate() does for left-padded prompts.
    position_ids = (attention.cumsum(dim=1) - 1).clamp_min(0)
    group_sizes = [len(group) for group in completions]
    group_ids = torch.repeat_interleave(
        torch.arange(len(group_sizes), device=host), torch.tensor(group_sizes, device=host)
    )
    batch = RolloutBatch(
        input_ids,
        attention,
        position_ids,
        input_ids[:, P:].clone(),
        response_mask,
        group_ids,
        torch.tensor(rewards, dtype=torch.float32, device=host),
    )
    return RolloutBatch(*(getattr(batch, f).to(device) for f in batch.__dataclass_fields__))


def group_chunks(batch: RolloutBatch, max_rows: int) -> list[slice]:
    """Row slices of at most ``max_rows`` rows (at least one group) that never split a group."""
    sizes = torch.bincount(batch.group_ids).tolist()
    chunks, start, rows = [], 0, 0
    for size in sizes:
        if rows and rows + size > max_rows:
            chunks.append(slice(start, start + rows))
            start, rows = start + rows, 0
        rows += size
    chunks.append(slice(start, start + rows))
    return chunks


def concat_stats(parts: list[TokenStats], width: int) -> TokenStats:
    """Stack per-chunk statistics, zero-padding each to ``width`` response columns."""

    def cat(name: str) -> Tensor:
        tensors = [getattr(p, name) for p in parts]
        return torch.cat([F.pad(t, (0, width - t.shape[1])) for t in tensors])

    return TokenStats(
        cat("logprob"), cat("entropy"), cat("renyi2"), None if parts[0].js is None else cat("js")
    )


def lr_lambda(warmup_steps: int, total_steps: int, schedule: str) -> Callable[[int], float]:
    """Multiplier of the base LR after ``step`` scheduler steps: linear warm-up, then constant or cosine."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / (warmup_steps + 1)
        if schedule == "constant":
            return 1.0
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return factor


@dataclass(frozen=True)
class StepTensors:
    """What the update of one step trains on: the batch and the rollout's results for it.

    Attributes:
        batch: the step's ``B`` sequences (this process's share).
        advantages: ``[B]`` float32, one per response.
        old_logprob: ``[B, R]`` float32, log-probs of the rollout policy.
        ref_logprob: ``[B, R]`` float32 of the reference policy, or None (no KL term).
        mask: ``[B, R]`` bool, the method's selected tokens.
    """

    batch: RolloutBatch
    advantages: Tensor
    old_logprob: Tensor
    ref_logprob: Tensor | None
    mask: Tensor


def split_probe(problems: list[Problem], n_probe: int) -> tuple[list[Problem], list[Problem]]:
    """(training problems, probe set): the last ``n_probe`` problems are held out."""
    if n_probe == 0:
        return problems, []
    if n_probe >= len(problems):
        raise ConfigError(
            f"rl.probe_problems ({n_probe}) must be smaller than the {len(problems)} RL "
            "training problems (the probe set is held out of them)"
        )
    return problems[:-n_probe], problems[-n_probe:]


def micro_batch_weights(
    mask_BR: Tensor, rows: slice, per_micro: int, agg_mode: str
) -> list[tuple[slice, float]]:
    """The micro-batches of mini-batch ``rows`` (at most ``per_micro`` rows each) and the
    weights that make their losses add up to the mini-batch's aggregate loss.

    ``token-mean`` averages over the mini-batch's selected tokens, so a micro-batch weighs
    its share of them; the sequence-mean modes average over rows, so it weighs its rows.
    """
    size = rows.stop - rows.start
    selected = int(mask_BR[rows].sum())
    out = []
    for start in range(rows.start, rows.stop, per_micro):
        micro = slice(start, min(start + per_micro, rows.stop))
        if agg_mode == "token-mean":
            weight = int(mask_BR[micro].sum()) / max(1, selected)
        else:
            weight = (micro.stop - micro.start) / size
        out.append((micro, weight))
    return out


def batch_metrics(batch: RolloutBatch) -> MetricSums:
    """``groups_without_signal_fraction`` (all rewards equal) and ``response_length_mean``."""
    ids, r = batch.group_ids, batch.rewards
    n_groups = int(ids.max()) + 1
    host = torch.device("cpu")  # a handful of numbers, read back at once
    lo = torch.full((n_groups,), math.inf, device=host).scatter_reduce(
        0, ids.cpu(), r.cpu(), "amin"
    )
    hi = torch.full((n_groups,), -math.inf, device=host).scatter_reduce(
        0, ids.cpu(), r.cpu(), "amax"
    )
    sums = MetricSums()
    sums.add("groups_without_signal_fraction", int((lo == hi).sum()), n_groups)
    sums.add("response_length_mean", batch.response_mask.sum(), batch.response_mask.shape[0])
    return sums
