"""Statistics of the policy at response tokens, computed in chunks of positions.

Everything here is a pure tensor function without gradient (the statistics come from
the rollout policy and feed a hard token selection, docs/method.md "Token masks").

Conventions
-----------
- ``logits_BTV[b, t]`` is the next-token distribution that produced ``tokens_BT[b, t]``:
  the caller has already shifted logits by one position.
- ``response_mask_BT`` (bool) marks response tokens. Statistics are 0 elsewhere.
- Rows of one group (same entry in ``group_ids_B``) are responses to the same prompt and
  are aligned: column ``t`` is the same response position for every member (true when the
  tensors hold response tokens only, or the identical prompt followed by the response).
- Temperature ``tau`` divides the logits: ``p = softmax(logits / tau)``.
- All accumulation is float32 whatever the input dtype (bf16 and fp16 inputs work).

Memory
------
No function materialises ``softmax`` over the whole ``[B, T, V]``. Work proceeds in chunks
of ``chunk_size`` positions: at most ``chunk_size x V`` floats per intermediate without
JS, ``group_size x chunk_size x V`` with JS. ``token_stats_from_hidden`` starts from hidden
states and the LM-head weight and never builds the full logits either.

Speed
-----
The per-chunk kernel is a handful of elementwise passes. In eager PyTorch each pass is a
separate sweep over memory; ``kernel="compiled"`` fuses them with ``torch.compile``
(``bench/token_stats.py`` measures both). ``"auto"`` compiles for large vocabularies,
where the sweeps dominate, and stays eager for small ones, where compile time would.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor

Kernel = Literal["auto", "eager", "compiled"]

#: Floats per chunk intermediate when ``chunk_size`` is not given (16 MiB of float32).
DEFAULT_CHUNK_ELEMENTS = 1 << 22
#: Rows x V floats per chunk of the differentiable log-prob (128 MiB of float32): larger
#: than the statistics' chunks, because each chunk re-reads the whole LM head three times.
UPDATE_CHUNK_ELEMENTS = 1 << 25
#: ``kernel="auto"`` compiles the chunk kernel from this vocabulary size on.
AUTO_COMPILE_MIN_VOCAB = 16_384
LN2 = math.log(2.0)


@dataclass(frozen=True)
class TokenStats:
    """Per-token statistics, each ``[B, T]`` float32, 0 outside the response mask.

    - ``logprob``: log pi(o_t) of the sampled token at temperature tau.
    - ``entropy``: Shannon entropy -sum_v p log p (nats).
    - ``renyi2``: second-order Rényi entropy -log sum_v p^2 (the log of 1/purity).
    - ``js``: Jensen–Shannon divergence (nats, in [0, ln 2]) between this response's
      distribution and the mean distribution of the group's responses active at the same
      position; ``None`` when no ``group_ids`` were given.
    """

    logprob: Tensor
    entropy: Tensor
    renyi2: Tensor
    js: Tensor | None


# --------------------------------------------------------------------------- kernel


def _chunk_kernel(
    logits_GCV: Tensor, tokens_GC: Tensor, active_GC: Tensor, inv_temperature: Tensor, with_js: bool
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Statistics of one chunk: ``G`` rows (one group, or 1) by ``C`` positions.

    Args:
        logits_GCV: raw logits, any float dtype.
        tokens_GC: sampled token ids (int64).
        active_GC: bool, True where the position is a response token of that row.
        inv_temperature: 1 / tau, a 0-d float32 tensor (a Python float would make
            ``torch.compile`` specialise, and recompile, on every temperature).
        with_js: also compute the group JS (else the last output is zeros).

    Returns:
        ``(logprob, entropy, renyi2, js)``, each ``[G, C]`` float32. Values at inactive
        positions are meaningless (the caller zeroes them).
    """
    active_GC1 = active_GC.unsqueeze(-1)
    # Inactive rows may hold padding garbage (even NaN): replace it so that it can neither
    # reach the group mean nor trip the finiteness check.
    x = torch.where(active_GC1, logits_GCV.float() * inv_temperature, 0.0)
    z = x - x.amax(dim=-1, keepdim=True)
    e = z.exp()
    sum_e = e.sum(dim=-1, keepdim=True)
    p = e / sum_e
    logprob = (z.gather(-1, tokens_GC.unsqueeze(-1)) - sum_e.log()).squeeze(-1)
    # entr(p) = -p log p, and 0 at p = 0, so -inf logits (masked vocabulary) are fine.
    entropy = torch.special.entr(p).sum(dim=-1)
    renyi2 = -(p * p).sum(dim=-1).log()
    if not with_js:
        return logprob, entropy, renyi2, torch.zeros_like(entropy)
    # P_t = mean of p over the responses active at t: weights 1/count on active rows.
    weights_GC = active_GC.float() / active_GC.sum(dim=0).clamp_min(1)
    mean_CV = (p * weights_GC.unsqueeze(-1)).sum(dim=0)
    entropy_mean_C = torch.special.entr(mean_CV).sum(dim=-1)
    # JS(p || P) = H((p + P) / 2) - (H(p) + H(P)) / 2: one logarithm per logit.
    entropy_mix = torch.special.entr(0.5 * (p + mean_CV)).sum(dim=-1)
    js = entropy_mix - 0.5 * (entropy + entropy_mean_C)
    return logprob, entropy, renyi2, js


_compiled_kernel: Callable | None = None


def _compiled_or_eager(*args: Any) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The kernel fused by ``torch.compile``; on a platform where compiling fails (no C++
    compiler, unsupported backend) it warns once and stays eager. ``torch.compile`` is
    lazy, so failures surface at the first call, which is why this wraps the call."""
    global _compiled_kernel
    if _compiled_kernel is None:
        _compiled_kernel = torch.compile(_chunk_kernel, dynamic=True)
    try:
        return _compiled_kernel(*args)
    except Exception as err:
        if _compiled_kernel is _chunk_kernel:
            raise
        warnings.warn(
            f"torch.compile failed ({type(err).__name__}: {err}); using the eager kernel",
            stacklevel=2,
        )
        _compiled_kernel = _chunk_kernel
        return _chunk_kernel(*args)  # a genuine input error raises again here


def _kernel_for(kernel: Kernel, vocab_size: int) -> Callable:
    """The chunk kernel to use: eager, or fused by ``torch.compile``."""
    if kernel not in ("auto", "eager", "compiled"):
        raise ValueError(f"kernel must be 'auto', 'eager' or 'compiled', got {kernel!r}")
    if kernel == "eager" or (kernel == "auto" and vocab_size < AUTO_COMPILE_MIN_VOCAB):
        return _chunk_kernel
    return _compiled_or_eager


# ------------------------------------------------------------------------- validation


def _check_common(
    name: str,
    batch_shape: tuple[int, ...],
    tokens_BT: Tensor,
    response_mask_BT: Tensor,
    group_ids_B: Tensor | None,
    temperature: float,
    chunk_size: int | None,
) -> None:
    B, T = batch_shape
    if B == 0 or T == 0:
        raise ValueError(
            f"{name} is empty (shape {tuple(batch_shape)}); need at least one response token"
        )
    if tuple(tokens_BT.shape) != (B, T):
        raise ValueError(
            f"tokens_BT must have shape [B, T] = {[B, T]}, got {list(tokens_BT.shape)}"
        )
    if tokens_BT.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"tokens_BT must be int64 or int32 token ids, got {tokens_BT.dtype}")
    if tuple(response_mask_BT.shape) != (B, T):
        raise ValueError(
            f"response_mask_BT must have shape [B, T] = {[B, T]}, got {list(response_mask_BT.shape)}"
        )
    if response_mask_BT.dtype != torch.bool:
        raise TypeError(
            f"response_mask_BT must be torch.bool, got {response_mask_BT.dtype} (use mask.bool())"
        )
    if not bool(response_mask_BT.any()):
        raise ValueError("response_mask_BT selects no tokens: every response is empty")
    if group_ids_B is not None:
        if tuple(group_ids_B.shape) != (B,):
            raise ValueError(
                f"group_ids_B must have shape [B] = [{B}], got {list(group_ids_B.shape)}"
            )
        if group_ids_B.dtype.is_floating_point or group_ids_B.dtype == torch.bool:
            raise TypeError(f"group_ids_B must hold integer ids, got {group_ids_B.dtype}")
    if not (
        isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature > 0
    ):
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"chunk_size must be a positive int or None, got {chunk_size!r}")


def _check_token_range(tokens_BT: Tensor, response_mask_BT: Tensor, vocab_size: int) -> None:
    live = tokens_BT[response_mask_BT]
    if live.numel() and (int(live.min()) < 0 or int(live.max()) >= vocab_size):
        raise ValueError(
            f"tokens_BT has ids outside [0, {vocab_size}) at response positions "
            f"(min {int(live.min())}, max {int(live.max())}): vocabulary mismatch between "
            "tokens and logits / LM head"
        )


def _check_float(name: str, tensor: Tensor, ndim: int) -> None:
    if tensor.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {list(tensor.shape)}")
    if not tensor.dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating tensor, got {tensor.dtype}")


# ------------------------------------------------------------------------ chunk loop


Rows = Tensor | slice
ChunkLogits = Callable[[Rows, slice], Tensor]
"""(rows, position slice) -> logits [G, C, V] of those rows and positions."""


def _as_slice(rows: Tensor) -> Rows:
    """Consecutive row ids as a slice, so that indexing gives a view instead of a copy."""
    first, last = int(rows[0]), int(rows[-1])
    if last - first + 1 == len(rows) and bool(
        (rows == torch.arange(first, last + 1, device=rows.device)).all()
    ):
        return slice(first, last + 1)
    return rows


class _FusedLogits:
    """Chunk logits ``hidden[rows, cols] @ lm_head.T`` written into one reused buffer."""

    def __init__(self, hidden_BTD: Tensor, lm_head_VD: Tensor):
        self.hidden_BTD, self.head_DV = hidden_BTD, lm_head_VD.T
        self.buffer = torch.empty(0, dtype=hidden_BTD.dtype, device=hidden_BTD.device)

    def __call__(self, rows: Rows, cols: slice) -> Tensor:
        h_GCD = self.hidden_BTD[rows, cols]
        G, C, D = h_GCD.shape
        V = self.head_DV.shape[1]
        if self.buffer.numel() < G * C * V:
            self.buffer = torch.empty(G * C * V, dtype=self.buffer.dtype, device=self.buffer.device)
        # One 2-D matmul: a batched one would broadcast (and may copy) the head per row.
        out_NV = self.buffer[: G * C * V].view(G * C, V)
        return torch.mm(h_GCD.reshape(G * C, D), self.head_DV, out=out_NV).view(G, C, V)


def _chunks(
    response_mask_BT: Tensor, group_ids_B: Tensor | None, vocab_size: int, chunk_size: int | None
) -> Iterator[tuple[Rows, slice]]:
    """Yield (row ids, position slice) blocks that cover every response token once.

    With groups, a block is one group's rows by ``chunk_size`` positions (the group mean
    needs all of them together). Without, a block is as many consecutive rows as fit the
    element budget with their whole response span (one row when even that is too much), so
    a small vocabulary does not cost one tiny kernel call per row.
    """
    B = response_mask_BT.shape[0]
    if group_ids_B is None:
        active_B = response_mask_BT.any(dim=1)
        cols = torch.nonzero(response_mask_BT.any(dim=0)).flatten()
        if not bool(active_B.any()):
            return
        span = int(cols.max()) - int(cols.min()) + 1
        per_block = (
            1 if chunk_size is not None else max(1, DEFAULT_CHUNK_ELEMENTS // (span * vocab_size))
        )
        row_sets = [
            torch.arange(b, min(b + per_block, B), device=response_mask_BT.device)
            for b in range(0, B, per_block)
        ]
    else:
        row_sets = [torch.nonzero(group_ids_B == g).flatten() for g in torch.unique(group_ids_B)]
    for rows in row_sets:
        active_T = response_mask_BT[rows].any(dim=0)
        if not bool(active_T.any()):
            continue
        last = int(torch.nonzero(active_T).max()) + 1
        first = int(torch.nonzero(active_T).min())
        step = chunk_size or max(1, DEFAULT_CHUNK_ELEMENTS // (len(rows) * vocab_size))
        rows = _as_slice(rows)
        for t0 in range(first, last, step):
            yield rows, slice(t0, min(t0 + step, last))


def _run(
    name: str,
    batch_shape: tuple[int, int],
    get_logits: ChunkLogits,
    tokens_BT: Tensor,
    response_mask_BT: Tensor,
    group_ids_B: Tensor | None,
    vocab_size: int,
    temperature: float,
    chunk_size: int | None,
    kernel: Kernel,
) -> TokenStats:
    """Validate the shared arguments (``name`` and ``batch_shape`` [B, T] of the input that
    fixes the batch), then compute every statistic chunk by chunk."""
    _check_common(
        name, batch_shape, tokens_BT, response_mask_BT, group_ids_B, temperature, chunk_size
    )
    _check_token_range(tokens_BT, response_mask_BT, vocab_size)
    B, T = batch_shape
    device = response_mask_BT.device
    out = torch.zeros(4, B, T, dtype=torch.float32, device=device)
    single = torch.zeros(B, T, dtype=torch.bool, device=device)  # JS is 0 by definition here
    run_kernel = _kernel_for(kernel, vocab_size)
    inv_temperature = torch.tensor(1.0 / temperature, dtype=torch.float32, device=device)
    with_js = group_ids_B is not None
    tokens_BT = tokens_BT.long().clamp(0, vocab_size - 1)  # padding ids may be out of range
    for rows, cols in _chunks(response_mask_BT, group_ids_B, vocab_size, chunk_size):
        active_GC = response_mask_BT[rows, cols]
        if not bool(active_GC.any()):
            continue
        stats = run_kernel(
            get_logits(rows, cols), tokens_BT[rows, cols], active_GC, inv_temperature, with_js
        )
        for i, stat in enumerate(stats):
            out[i, rows, cols] = torch.where(active_GC, stat, 0.0)
        single[rows, cols] = active_GC & (active_GC.sum(dim=0, keepdim=True) == 1)

    logprob, entropy, renyi2, js = out
    # Per-row statistics first: a bad row also spoils its group's JS, but the row is the culprit.
    bad = response_mask_BT & ~torch.isfinite(out[:3]).all(dim=0)
    if not bool(bad.any()):
        bad = response_mask_BT & ~torch.isfinite(js)
    if bool(bad.any()):
        b, t = (int(i) for i in torch.nonzero(bad)[0])
        raise ValueError(
            f"non-finite statistics at response position (b={b}, t={t}): the logits there "
            "contain NaN or +inf, or the sampled token has probability 0 (logit -inf)"
        )
    if not with_js:
        return TokenStats(logprob, entropy, renyi2, None)
    # Rounding can push the entropy identity slightly outside the true range.
    js = torch.where(single, 0.0, js.clamp(0.0, LN2))
    return TokenStats(logprob, entropy, renyi2, js)


# ------------------------------------------------------------------------ public API


@torch.no_grad()
def token_stats(
    logits_BTV: Tensor,
    tokens_BT: Tensor,
    response_mask_BT: Tensor,
    group_ids_B: Tensor | None = None,
    *,
    temperature: float = 1.0,
    chunk_size: int | None = None,
    kernel: Kernel = "auto",
) -> TokenStats:
    """Log-prob of the sampled token, entropy, Rényi-2 and (with groups) group JS.

    Args:
        logits_BTV: logits ``[B, T, V]``, any float dtype; row ``[b, t]`` produced ``tokens_BT[b, t]``.
        tokens_BT: sampled token ids ``[B, T]`` (int64/int32; padding ids are ignored).
        response_mask_BT: bool ``[B, T]``, True on response tokens.
        group_ids_B: int ``[B]``: rows with equal ids answer the same prompt. Enables ``js``.
        temperature: tau > 0; statistics are of ``softmax(logits / tau)``.
        chunk_size: positions per chunk (default: as many as fit ``DEFAULT_CHUNK_ELEMENTS``).
        kernel: ``"eager"``, ``"compiled"`` (``torch.compile``) or ``"auto"``.

    Returns:
        ``TokenStats`` of ``[B, T]`` float32 tensors, 0 outside the mask.
    """
    _check_float("logits_BTV", logits_BTV, 3)
    B, T, V = logits_BTV.shape
    return _run(
        "logits_BTV",
        (B, T),
        lambda rows, cols: logits_BTV[rows, cols],
        tokens_BT,
        response_mask_BT,
        group_ids_B,
        V,
        temperature,
        chunk_size,
        kernel,
    )


@torch.no_grad()
def token_stats_from_hidden(
    hidden_BTD: Tensor,
    lm_head_VD: Tensor,
    tokens_BT: Tensor,
    response_mask_BT: Tensor,
    group_ids_B: Tensor | None = None,
    *,
    temperature: float = 1.0,
    chunk_size: int | None = None,
    kernel: Kernel = "auto",
) -> TokenStats:
    """``token_stats`` from hidden states, projecting through the LM head chunk by chunk.

    Equals ``token_stats(hidden_BTD @ lm_head_VD.T, ...)`` without ever holding the full
    ``[B, T, V]`` logits. The projection runs in the inputs' dtype, as the model's own LM
    head does; everything after it in float32.

    Args:
        hidden_BTD: final hidden states ``[B, T, D]`` (after the final norm).
        lm_head_VD: LM-head weight ``[V, D]`` (no bias, as in Qwen2).
        Other arguments as in ``token_stats``.
    """
    _check_float("hidden_BTD", hidden_BTD, 3)
    _check_float("lm_head_VD", lm_head_VD, 2)
    B, T, D = hidden_BTD.shape
    V, D_head = lm_head_VD.shape
    if D_head != D:
        raise ValueError(
            f"hidden size mismatch: hidden_BTD has D={D} but lm_head_VD is [V, D] = {[V, D_head]}"
        )
    if hidden_BTD.dtype != lm_head_VD.dtype:
        raise TypeError(f"hidden_BTD is {hidden_BTD.dtype} but lm_head_VD is {lm_head_VD.dtype}")
    return _run(
        "hidden_BTD",
        (B, T),
        _FusedLogits(hidden_BTD, lm_head_VD),
        tokens_BT,
        response_mask_BT,
        group_ids_B,
        V,
        temperature,
        chunk_size,
        kernel,
    )


def group_js(
    logits_BTV: Tensor,
    response_mask_BT: Tensor,
    group_ids_B: Tensor,
    *,
    temperature: float = 1.0,
    chunk_size: int | None = None,
    kernel: Kernel = "auto",
) -> Tensor:
    """Group Jensen–Shannon divergence ``u`` of ICT (docs/method.md), ``[B, T]`` float32.

    ``u[i, t] = JS(p_i,t || P_t)`` with ``P_t`` the mean of ``p_j,t`` over the rows ``j`` of
    the same group whose response is active at ``t``. In [0, ln 2]; 0 outside the mask and
    wherever only one response of the group is active.
    """
    # token_stats also returns the sampled token's log-prob, and rejects a token of
    # probability 0; the group JS needs no token, so each position's most likely one stands in.
    tokens_BT = logits_BTV.argmax(dim=-1)
    stats = token_stats(
        logits_BTV,
        tokens_BT,
        response_mask_BT,
        group_ids_B,
        temperature=temperature,
        chunk_size=chunk_size,
        kernel=kernel,
    )
    assert stats.js is not None
    return stats.js


def sampled_logprobs(logits_BTV: Tensor, tokens_BT: Tensor, *, temperature: float = 1.0) -> Tensor:
    """Differentiable log pi(o_t) ``[B, T]`` float32 for the policy update (full softmax).

    The update needs gradients, so this is the plain formula; it materialises one float32
    ``[B, T, V]`` log-softmax, which is fine at the CPU scale.
    """
    logp_BTV = torch.log_softmax(logits_BTV.float() / temperature, dim=-1)
    return logp_BTV.gather(-1, tokens_BT.long().unsqueeze(-1)).squeeze(-1)


def head_dtype(tensor: Tensor) -> torch.dtype:
    """The dtype an LM-head matmul on ``tensor``'s device runs in: autocast's (bf16 under
    ``mixed_precision="bf16"``) while autocast is on there, as the model's own ``nn.Linear``
    head runs; else ``tensor``'s own dtype.

    Every pass that turns hidden states into logits (the statistics of the rollout policy,
    the reference, and the update, chunked or not) projects in this dtype, so an unchanged
    policy gets exactly the same logits in the statistics and in the update (docs/training.md,
    "Mixed precision").
    """
    device_type = tensor.device.type
    if torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return tensor.dtype


@functools.cache
def _hidden_logprob(device_type: str) -> type[torch.autograd.Function]:
    """The autograd function of ``sampled_logprobs_from_hidden`` for ``device_type``.

    ``custom_fwd``/``custom_bwd`` make the backward pass (which autograd may run on another
    thread, where no autocast is active) see the forward's autocast state; they take the
    device type when the class is made, hence one class per device type.
    """

    class _HiddenLogprob(torch.autograd.Function):
        """log softmax(h W^T / tau)[token] per row, chunk by chunk, recomputed in backward.

        Saves only the inputs and one log-normaliser per row, so neither pass holds more
        than ``chunk x V`` logits, whatever ``N x V`` is. The head's matmul runs in
        ``head_dtype`` (bf16 under bf16 autocast, like the model's own head), everything
        after it in float32, or float64 for float64 inputs (which the gradient check uses).
        """

        @staticmethod
        @torch.amp.custom_fwd(device_type=device_type)
        def forward(ctx: Any, h_ND: Tensor, w_VD: Tensor, tokens_N: Tensor, tau: float, chunk: int):
            N = h_ND.shape[0]
            acc = torch.promote_types(h_ND.dtype, torch.float32)
            low = head_dtype(h_ND)
            w_low = w_VD.to(low)  # one cast of the head per call, not per chunk
            logp_N = torch.empty(N, dtype=acc, device=h_ND.device)
            lse_N = torch.empty(N, dtype=acc, device=h_ND.device)
            for n0 in range(0, N, chunk):
                rows = slice(n0, min(n0 + chunk, N))
                z_CV = (h_ND[rows].to(low) @ w_low.T).to(acc) / tau
                lse_N[rows] = torch.logsumexp(z_CV, dim=-1)
                logp_N[rows] = z_CV.gather(1, tokens_N[rows, None]).squeeze(1) - lse_N[rows]
            ctx.save_for_backward(h_ND, w_VD, tokens_N, lse_N)
            ctx.tau, ctx.chunk, ctx.low = tau, chunk, low
            return logp_N

        @staticmethod
        @torch.amp.custom_bwd(device_type=device_type)
        def backward(ctx: Any, grad_N: Tensor):
            h_ND, w_VD, tokens_N, lse_N = ctx.saved_tensors
            tau, chunk, low = ctx.tau, ctx.chunk, ctx.low
            N, acc = h_ND.shape[0], lse_N.dtype
            w_low = w_VD.to(low)
            grad_N = grad_N.to(acc)
            grad_h = torch.empty_like(h_ND) if ctx.needs_input_grad[0] else None
            grad_w = torch.zeros(w_VD.shape, dtype=acc, device=w_VD.device)
            for n0 in range(0, N, chunk):
                rows = slice(n0, min(n0 + chunk, N))
                h_CD = h_ND[rows].to(low)  # the operand the forward's logits came from
                z_CV = (h_CD @ w_low.T).to(acc) / tau
                # d logp / d z = onehot(token) - softmax(z), times the incoming grad, over tau.
                dz_CV = torch.exp(z_CV - lse_N[rows, None]).mul_(-grad_N[rows, None])
                dz_CV.scatter_add_(1, tokens_N[rows, None], grad_N[rows, None]).div_(tau)
                if grad_h is not None:
                    grad_h[rows] = dz_CV.to(low) @ w_low
                if ctx.needs_input_grad[1]:
                    # In place, accumulated in float32 (in-place ops are not autocast): a
                    # [V, D] product per chunk would double the head's gradient memory.
                    grad_w.addmm_(dz_CV.T, h_CD.to(acc))
            grad_w = grad_w.to(w_VD.dtype) if ctx.needs_input_grad[1] else None
            return grad_h, grad_w, None, None, None

    return _HiddenLogprob


def sampled_logprobs_from_hidden(
    hidden_BTD: Tensor,
    lm_head_VD: Tensor,
    tokens_BT: Tensor,
    response_mask_BT: Tensor,
    *,
    temperature: float = 1.0,
    chunk_size: int | None = None,
) -> Tensor:
    """Differentiable log pi(o_t) ``[B, T]`` from hidden states, memory-bounded.

    Equals ``sampled_logprobs(hidden_BTD @ lm_head_VD.T, tokens_BT, temperature=...)`` at
    response positions (0 elsewhere), with gradients for ``hidden_BTD`` and
    ``lm_head_VD``, but computes only the response positions, in chunks of ``chunk_size``
    rows, and recomputes each chunk's logits in the backward pass: no ``[B, T, V]``
    tensor exists in either pass (the policy update at V = 151,936 needs this).

    Args:
        hidden_BTD: final hidden states ``[B, T, D]`` (after the final norm), row ``[b, t]``
            predicting ``tokens_BT[b, t]``.
        lm_head_VD: LM-head weight ``[V, D]`` (no bias).
        tokens_BT: sampled ids ``[B, T]``; response_mask_BT: bool ``[B, T]``.
        chunk_size: rows per chunk (default: ``UPDATE_CHUNK_ELEMENTS // V``).

    Returns float32 (float64 for float64 inputs).
    """
    _check_float("hidden_BTD", hidden_BTD, 3)
    _check_float("lm_head_VD", lm_head_VD, 2)
    B, T, D = hidden_BTD.shape
    V = lm_head_VD.shape[0]
    if lm_head_VD.shape[1] != D:
        raise ValueError(
            f"hidden size mismatch: hidden_BTD has D={D} but lm_head_VD is {list(lm_head_VD.shape)}"
        )
    _check_common("hidden_BTD", (B, T), tokens_BT, response_mask_BT, None, temperature, chunk_size)
    _check_token_range(tokens_BT, response_mask_BT, V)
    chunk = chunk_size or max(1, UPDATE_CHUNK_ELEMENTS // V)
    logp_N = _hidden_logprob(hidden_BTD.device.type).apply(
        hidden_BTD[response_mask_BT],
        lm_head_VD,
        tokens_BT[response_mask_BT].long(),
        float(temperature),
        chunk,
    )
    out_BT = torch.zeros(B, T, dtype=logp_N.dtype, device=hidden_BTD.device)
    return out_BT.masked_scatter(response_mask_BT, logp_N)
