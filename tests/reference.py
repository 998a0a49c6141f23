"""Naive float64 references: full softmax, explicit loops. Slow and obviously right."""

from __future__ import annotations

import torch
from torch import Tensor


def stats_reference(
    logits_BTV: Tensor,
    tokens_BT: Tensor,
    mask_BT: Tensor,
    group_ids_B: Tensor | None,
    temperature: float,
) -> dict[str, Tensor]:
    """logprob, entropy, renyi2, js as float64 [B, T], 0 outside the mask."""
    p = torch.softmax(logits_BTV.double() / temperature, dim=-1)
    logp = torch.log_softmax(logits_BTV.double() / temperature, dim=-1)
    out = {
        "logprob": logp.gather(
            -1, tokens_BT.long().clamp(0, p.shape[-1] - 1).unsqueeze(-1)
        ).squeeze(-1),
        "entropy": -(torch.where(p > 0, p * logp, 0.0)).sum(-1),
        "renyi2": -(p * p).sum(-1).log(),
    }
    out = {k: torch.where(mask_BT, v, 0.0) for k, v in out.items()}
    if group_ids_B is None:
        return out
    B, T = mask_BT.shape
    js = torch.zeros(B, T, dtype=torch.float64)
    for g in torch.unique(group_ids_B):
        rows = [int(r) for r in torch.nonzero(group_ids_B == g).flatten()]
        for t in range(T):
            active = [r for r in rows if mask_BT[r, t]]
            if not active:
                continue
            mean = p[active, t].mean(0)
            for r in active:
                js[r, t] = js_divergence(p[r, t], mean)
    out["js"] = js
    return out


def js_divergence(p: Tensor, q: Tensor) -> Tensor:
    """JS(p || q) = 1/2 KL(p || m) + 1/2 KL(q || m), m = (p + q) / 2, natural log."""
    m = (p + q) / 2

    def kl(a: Tensor, b: Tensor) -> Tensor:
        return torch.where(a > 0, a * (a / b).log(), 0.0).sum()

    return 0.5 * kl(p, m) + 0.5 * kl(q, m)
