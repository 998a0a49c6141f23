"""Where a response of the fork world chooses its strategy, and what each rule does there.

The fork world (``ictrepro/data/suites.py``, docs/worlds/fork.md) has one decisive token per
response: the word after "Turn" (in the tally world, after one of a few verbs): "up", the
majority strategy, or "down", the minority one.
:func:`fork_positions` finds it in each sampled response and :func:`fork_metrics` logs,
per training step, the ``fork_*`` keys of ``metrics.jsonl``:

- ``fork_found_fraction``: responses that reach a fork (chose either direction);
- ``fork_minority_fraction``: of those, the share that turned down (the
  policy's probability of the minority strategy at the fork, as sampled);
- ``fork_selected_fraction``: the share of fork tokens the rule's mask selected;
- ``fork_selected_{before,at,near,later}``: where the selected tokens of forked responses
  lie relative to the fork (offset < 0, 0, 1-3, > 3), and ``fork_tokens_*`` the same for
  every response token of those responses (what a uniform mask would give);
- ``fork_entropy_mean`` / ``nonfork_entropy_mean`` and ``fork_js_mean`` / ``nonfork_js_mean``:
  entropy and group JS of the rollout policy at fork tokens and at the other response tokens
  of the same responses (JS only where it was computed, ``rl.log_js`` or an ICT-like rule).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor
from transformers import PreTrainedTokenizerBase

from ictrepro.algos.token_stats import TokenStats
from ictrepro.data.suites import fork_choice
from ictrepro.train.metrics import MetricSums

#: Offsets from the fork: name -> (lowest, highest) inclusive.
OFFSET_BUCKETS = {
    "before": (-(10**9), -1),
    "at": (0, 0),
    "near": (1, 3),
    "later": (4, 10**9),
}
FORK_METRICS = (
    "fork_found_fraction",
    "fork_minority_fraction",
    "fork_selected_fraction",
    *(f"fork_selected_{b}" for b in OFFSET_BUCKETS),
    *(f"fork_tokens_{b}" for b in OFFSET_BUCKETS),
    "fork_entropy_mean",
    "nonfork_entropy_mean",
    "fork_js_mean",
    "nonfork_js_mean",
)


def fork_position(
    token_ids: Sequence[int], text: str, tokenizer: PreTrainedTokenizerBase, prefix: str = ""
) -> tuple[int, int] | None:
    """``(index of the fork token in token_ids, strategy)``; None when ``text`` names no
    strategy or the tokens do not spell its beginning (a response cut before the fork).

    ``prefix``: what the prompt wrote of the response before ``text`` (a control's
    ``meta.response_prefix``), read with it: the tally control's prefix is the verb of the
    marker whose fork opens the response."""
    choice = fork_choice(prefix + text)
    if choice is None or choice[0] < len(prefix):
        return None
    char, strategy = choice[0] - len(prefix), choice[1]
    end = 0
    for i, token in enumerate(token_ids):
        end += len(tokenizer.decode([token]))
        if end > char:
            return i, strategy
    return None


def fork_positions(
    completions: Sequence[tuple[Sequence[int], str, str]], tokenizer: PreTrainedTokenizerBase
) -> list[tuple[int, int] | None]:
    """:func:`fork_position` of each ``(token_ids, text, prefix)``, in batch row order."""
    return [fork_position(ids, text, tokenizer, prefix) for ids, text, prefix in completions]


def choice_mask(forks: Sequence[tuple[int, int] | None], response_mask_BT: Tensor) -> Tensor:
    """bool ``[B, T]``, True at each row's fork token (``forks``: per row ``(index,
    strategy)`` or None), on the response mask's device; a fork past ``T`` is dropped."""
    _B, T = response_mask_BT.shape
    mask = torch.zeros_like(response_mask_BT)
    found = [(b, f[0]) for b, f in enumerate(forks) if f is not None and f[0] < T]
    if found:
        rows, cols = zip(*found, strict=True)
        device = response_mask_BT.device
        mask[torch.tensor(rows, device=device), torch.tensor(cols, device=device)] = True
    return mask & response_mask_BT


def fork_metrics(
    forks: Sequence[tuple[int, int] | None],
    stats: TokenStats,
    mask_BT: Tensor,
    response_mask_BT: Tensor,
) -> MetricSums:
    """The ``fork_*`` metrics of one step (module docstring) as sums to reduce over
    processes; every key is present (null without forks) so every line has them.

    Args:
        forks: per batch row, ``(fork index, strategy)`` or None.
        stats: the rollout policy's statistics, ``[B, T]`` each (``js`` may be None).
        mask_BT, response_mask_BT: the rule's selection and the response tokens, bool
            ``[B, T]``.
    """
    sums = MetricSums.empty(FORK_METRICS)
    B, T = mask_BT.shape
    device = mask_BT.device
    found = [(b, f[0], f[1]) for b, f in enumerate(forks) if f is not None and f[0] < T]
    sums.add("fork_found_fraction", len(found), B)
    if not found:
        return sums
    rows = torch.tensor([b for b, _, _ in found], device=device)
    cols = torch.tensor([t for _, t, _ in found], device=device)
    sums.add("fork_minority_fraction", sum(s for _, _, s in found), len(found))
    at = torch.zeros_like(mask_BT)
    at[rows, cols] = True
    forked = torch.zeros(B, dtype=torch.bool, device=device)
    forked[rows] = True
    tokens = response_mask_BT & forked[:, None]
    selected = mask_BT & tokens
    sums.add("fork_selected_fraction", (mask_BT & at).sum(), len(found))
    fork_t = torch.zeros(B, dtype=torch.long, device=device)
    fork_t[rows] = cols
    offset = torch.arange(T, device=device)[None, :] - fork_t[:, None]
    for name, (low, high) in OFFSET_BUCKETS.items():
        inside = (offset >= low) & (offset <= high)
        sums.add(f"fork_selected_{name}", (selected & inside).sum(), selected.sum())
        sums.add(f"fork_tokens_{name}", (tokens & inside).sum(), tokens.sum())
    elsewhere = tokens & ~at
    fields = [("entropy", stats.entropy), ("js", stats.js)]
    for name, values in fields:
        if values is None:
            continue
        v = values.double()
        sums.add(f"fork_{name}_mean", v[at].sum(), at.sum())
        sums.add(f"nonfork_{name}_mean", v[elsewhere].sum(), elsewhere.sum())
    return sums
