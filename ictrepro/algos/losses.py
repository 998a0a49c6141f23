"""The shared GRPO objective (docs/method.md): advantages, clipped PG term, k3 KL, aggregation.

Every method is this objective with a different token mask ``M``. Per token,

    psi = min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A) - beta KL_k3,

and the loss is ``-aggregate(psi, M)``. Tokens with ``M = 0`` carry exactly no gradient.

Aggregation modes (one mode must be used for all methods of a comparison):

- ``seq-mean-token-mean`` (ICT's J, the default): each response's mean over its selected
  tokens, ``sum_t M psi / max(1, sum_t M)``, then the mean over all responses.
- ``token-mean``: the mean over all selected tokens of the batch (DAPO; 20-Entropy's code).
- ``seq-mean-token-sum``: each response's sum over its selected tokens, then the mean
  over responses (no length normalisation, as in Dr. GRPO up to a constant).

Beware the trap docs/method.md names: masking psi but still dividing by the number of
*response* tokens scales each response's gradient by its mask ratio. No mode does that.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

AggMode = Literal["seq-mean-token-mean", "token-mean", "seq-mean-token-sum"]
AGG_MODES: tuple[str, ...] = ("seq-mean-token-mean", "token-mean", "seq-mean-token-sum")
#: The log-ratio inside k3 is clamped to +-this, so exp() cannot overflow float32 (as verl).
KL_LOG_RATIO_MAX = 20.0
#: verl's bound on the k3 value itself (``low_var_kl``): one token far from the reference
#: cannot dominate the loss. ``kl_max=None`` leaves k3 unbounded.
KL_K3_MAX = 10.0


def _check_bt(name: str, tensor: Tensor, shape: tuple[int, ...]) -> None:
    if tuple(tensor.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {list(shape)}, got {list(tensor.shape)}")


def _check_mask(name: str, mask: Tensor, shape: tuple[int, ...]) -> None:
    _check_bt(name, mask, shape)
    if mask.dtype != torch.bool:
        raise TypeError(f"{name} must be torch.bool, got {mask.dtype} (use mask.bool())")


def group_advantages(
    rewards_B: Tensor, group_ids_B: Tensor, *, normalize_std: bool = True, eps: float = 1e-6
) -> Tensor:
    """GRPO advantages ``A_i = (r_i - mean_g r) / (std_g r + eps)``, ``[B]`` float32.

    Args:
        rewards_B: float ``[B]``.
        group_ids_B: int ``[B]``; responses with equal ids answer the same prompt.
        normalize_std: divide by the group's (unbiased, as verl) standard deviation; if
            False, only the group mean is subtracted (Dr. GRPO).
        eps: added to the standard deviation.

    A group whose rewards are all equal (including a group of one) has advantage exactly 0.
    """
    if rewards_B.ndim != 1:
        raise ValueError(f"rewards_B must have shape [B], got {list(rewards_B.shape)}")
    _check_bt("group_ids_B", group_ids_B, tuple(rewards_B.shape))
    if not bool(torch.isfinite(rewards_B).all()):
        raise ValueError("rewards_B contains NaN or inf")
    r = rewards_B.double()
    _, inverse = torch.unique(group_ids_B.to(r.device), return_inverse=True)
    n_groups = int(inverse.max()) + 1
    per_group = {"dtype": torch.float64, "device": r.device}
    count = torch.zeros(n_groups, **per_group).index_add_(0, inverse, torch.ones_like(r))
    mean = torch.zeros(n_groups, **per_group).index_add_(0, inverse, r) / count
    centred = r - mean[inverse]
    lo = torch.full((n_groups,), torch.inf, **per_group).scatter_reduce(0, inverse, r, "amin")
    hi = torch.full((n_groups,), -torch.inf, **per_group).scatter_reduce(0, inverse, r, "amax")
    constant = (hi == lo)[inverse]
    if normalize_std:
        sq = torch.zeros(n_groups, **per_group).index_add_(0, inverse, centred**2)
        std = (sq / (count - 1).clamp_min(1)).sqrt()
        centred = centred / (std[inverse] + eps)
    return torch.where(constant, 0.0, centred).float()


def clipped_policy_objective(
    logprob_BT: Tensor,
    old_logprob_BT: Tensor,
    advantages_B: Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = None,
) -> tuple[Tensor, Tensor]:
    """PPO's clipped surrogate per token (to be maximised).

    Args:
        logprob_BT: log pi_theta of the sampled tokens, ``[B, T]`` (with gradient).
        old_logprob_BT: log pi_old, ``[B, T]`` (treated as a constant).
        advantages_B: ``[B]``, broadcast to every token of the response.
        clip_low, clip_high: the ratio is clipped to ``[1 - clip_low, 1 + clip_high]``.
        dual_clip: ``c > 1`` bounds the objective of negative-advantage tokens from below
            by ``c A`` (dual-clip PPO, Ye et al. 2020; verl's ``clip_ratio_c``), so a token
            whose ratio has grown large cannot push an unbounded loss; None disables it.

    Returns:
        ``(objective_BT, clipped_BT)``: the surrogate and a bool mask of the tokens where a
        clip is active (gradient zero there).
    """
    if clip_low < 0 or clip_high < 0:
        raise ValueError(f"clip_low and clip_high must be >= 0, got {clip_low}, {clip_high}")
    if dual_clip is not None and not dual_clip > 1:
        raise ValueError(f"dual_clip must be > 1 or None, got {dual_clip}")
    _check_bt("old_logprob_BT", old_logprob_BT, tuple(logprob_BT.shape))
    _check_bt("advantages_B", advantages_B, tuple(logprob_BT.shape[:1]))
    ratio = torch.exp(logprob_BT - old_logprob_BT.detach())
    adv = advantages_B.detach().unsqueeze(1)
    unclipped = ratio * adv
    clipped = ratio.clamp(1.0 - clip_low, 1.0 + clip_high) * adv
    objective = torch.minimum(unclipped, clipped)
    active = clipped < unclipped
    if dual_clip is not None:
        floor = dual_clip * adv
        below = (adv < 0) & (objective < floor)
        objective = torch.where(below, floor, objective)
        active = active | below
    return objective, active


def kl_k3(
    logprob_BT: Tensor, ref_logprob_BT: Tensor, *, kl_max: float | None = KL_K3_MAX
) -> Tensor:
    """Schulman's k3 estimator of KL(pi_theta || pi_ref) per token, ``[B, T]``, always >= 0.

    ``k3 = exp(d) - d - 1`` with ``d = log pi_ref - log pi_theta`` clamped to
    ``[-KL_LOG_RATIO_MAX, KL_LOG_RATIO_MAX]`` against overflow, and the result to
    ``<= kl_max`` (None: unbounded). Unbiased for the KL under samples from pi_theta where
    neither clamp is active; a clamped token carries no KL gradient.
    """
    _check_bt("ref_logprob_BT", ref_logprob_BT, tuple(logprob_BT.shape))
    if kl_max is not None and not kl_max > 0:
        raise ValueError(f"kl_max must be > 0 or None, got {kl_max}")
    d = (ref_logprob_BT.detach() - logprob_BT).clamp(-KL_LOG_RATIO_MAX, KL_LOG_RATIO_MAX)
    k3 = (torch.expm1(d) - d).clamp_min(0.0)
    return k3 if kl_max is None else k3.clamp_max(kl_max)


def aggregate(values_BT: Tensor, mask_BT: Tensor, mode: AggMode = "seq-mean-token-mean") -> Tensor:
    """Reduce per-token values to a scalar over the tokens of ``mask_BT`` (see module doc).

    Unselected tokens enter through ``torch.where``, so they get exactly zero gradient even
    where their value is not finite.
    """
    if mode not in AGG_MODES:
        raise ValueError(f"unknown aggregation mode {mode!r}; valid: {', '.join(AGG_MODES)}")
    _check_mask("mask_BT", mask_BT, tuple(values_BT.shape))
    masked = torch.where(mask_BT, values_BT, 0.0)
    if mode == "token-mean":
        return masked.sum() / mask_BT.sum().clamp_min(1)
    per_seq = masked.sum(dim=1)
    if mode == "seq-mean-token-mean":
        per_seq = per_seq / mask_BT.sum(dim=1).clamp_min(1)
    return per_seq.mean()


def grpo_loss(
    logprob_BT: Tensor,
    old_logprob_BT: Tensor,
    advantages_B: Tensor,
    token_mask_BT: Tensor,
    response_mask_BT: Tensor,
    *,
    ref_logprob_BT: Tensor | None = None,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    kl_coef: float = 0.001,
    kl_max: float | None = KL_K3_MAX,
    dual_clip: float | None = None,
    agg_mode: AggMode = "seq-mean-token-mean",
) -> tuple[Tensor, dict[str, float]]:
    """The loss ``-aggregate(psi, M)`` of docs/method.md and its metrics.

    Args:
        logprob_BT: log pi_theta of the sampled tokens, ``[B, T]`` float (with gradient).
        old_logprob_BT: log pi_old ``[B, T]``; ``ref_logprob_BT``: log pi_ref ``[B, T]``
            (required when ``kl_coef > 0``).
        advantages_B: ``[B]``.
        token_mask_BT: bool ``[B, T]``, the selection M (a subset of the response mask).
        response_mask_BT: bool ``[B, T]``, all response tokens (for metrics).
        kl_max: bound on each token's k3 (``kl_k3``); dual_clip: see
            ``clipped_policy_objective``.

    Returns:
        ``(loss, metrics)``; metrics are floats: ``pg_objective``, ``kl`` (mean k3 over
        selected tokens), ``clip_fraction`` (over selected tokens), ``selected_fraction``
        (selected / response tokens), ``ratio_mean``.
    """
    shape = tuple(logprob_BT.shape)
    if len(shape) != 2:
        raise ValueError(f"logprob_BT must have shape [B, T], got {list(shape)}")
    _check_bt("old_logprob_BT", old_logprob_BT, shape)
    _check_bt("advantages_B", advantages_B, shape[:1])
    _check_mask("token_mask_BT", token_mask_BT, shape)
    _check_mask("response_mask_BT", response_mask_BT, shape)
    if bool((token_mask_BT & ~response_mask_BT).any()):
        raise ValueError("token_mask_BT selects tokens outside response_mask_BT")
    if agg_mode not in AGG_MODES:
        raise ValueError(f"unknown aggregation mode {agg_mode!r}; valid: {', '.join(AGG_MODES)}")
    if kl_coef < 0:
        raise ValueError(f"kl_coef must be >= 0, got {kl_coef}")
    if kl_coef > 0 and ref_logprob_BT is None:
        raise ValueError("kl_coef > 0 needs ref_logprob_BT (or set kl_coef=0)")
    # Unselected tokens are replaced by constants before any exp(), so that no inf/NaN on
    # them can leak into the gradient through 0 * inf.
    logprob = torch.where(token_mask_BT, logprob_BT, old_logprob_BT.detach())
    objective, clipped = clipped_policy_objective(
        logprob,
        old_logprob_BT,
        advantages_B,
        clip_low=clip_low,
        clip_high=clip_high,
        dual_clip=dual_clip,
    )
    psi = objective
    kl = None
    if ref_logprob_BT is not None:
        ref = torch.where(token_mask_BT, ref_logprob_BT, logprob.detach())
        kl = kl_k3(logprob, ref, kl_max=kl_max)
        if kl_coef > 0:
            psi = psi - kl_coef * kl
    loss = -aggregate(psi, token_mask_BT, agg_mode)

    with torch.no_grad():
        n_selected = token_mask_BT.sum().clamp_min(1)
        metrics = {
            "pg_objective": float(aggregate(objective, token_mask_BT, agg_mode)),
            "kl": float(torch.where(token_mask_BT, kl, 0.0).sum() / n_selected)
            if kl is not None
            else 0.0,
            "clip_fraction": float((clipped & token_mask_BT).sum() / n_selected),
            "selected_fraction": float(token_mask_BT.sum() / response_mask_BT.sum().clamp_min(1)),
            "ratio_mean": float(
                torch.where(token_mask_BT, (logprob - old_logprob_BT).exp(), 0.0).sum() / n_selected
            ),
        }
    return loss, metrics
