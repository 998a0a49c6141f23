"""Token-selection rules: the only thing that differs between the compared methods.

A rule maps the rollout statistics of a batch to a boolean mask ``[B, T]`` that is a
subset of the response mask; tokens outside it carry no gradient (docs/method.md). Rules live
in a registry looked up by name, so a new method is one decorated function::

    @register_selection("lowprob", needs=("logprob",))
    def lowprob(inputs: SelectionInputs, *, rho: float = 0.1) -> torch.Tensor:
        return top_fraction_mask(-inputs.logprob, inputs.response_mask, rho)

Every hyperparameter is a keyword-only argument whose default is the paper's value;
``rule.defaults`` reads them back for configs, the CLI and reports, and ``label`` (default:
the name) is how reports name the method.

Ties in every ranking are broken deterministically: among equal scores the earlier token
wins (lower position in a sequence; in batch scope, row-major order).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor

from ictrepro.errors import ConfigError, UserModuleError

Scope = Literal["sequence", "batch"]
STAT_NAMES = ("logprob", "entropy", "js")
#: What a rule may name in ``needs``: the statistics, and ``choice``, the token where a
#: world's response makes its decisive choice (only worlds that mark one supply it).
INPUT_NAMES = (*STAT_NAMES, "choice")


@dataclass(frozen=True)
class SelectionInputs:
    """What a rule may look at; ``B`` responses by ``T`` positions.

    Attributes:
        response_mask: bool ``[B, T]``, True on response tokens.
        advantages: float ``[B]``, the group-relative advantage of each response.
        logprob: float ``[B, T]``, log pi_old of the sampled token (None if not computed).
        entropy: float ``[B, T]``, Shannon entropy of pi_old (None if not computed).
        js: float ``[B, T]``, group JS divergence u (None if not computed).
        choice: bool ``[B, T]``, True at each response's choice token, where the world
            marks one (the fork worlds' direction word; None elsewhere).
        step: the optimisation step (0-based), for warm-up schedules.
        generator: RNG for stochastic rules (the random control); None uses torch's global RNG.
    """

    response_mask: Tensor
    advantages: Tensor
    logprob: Tensor | None = None
    entropy: Tensor | None = None
    js: Tensor | None = None
    choice: Tensor | None = None
    step: int = 0
    generator: torch.Generator | None = None

    def require(self, name: str, rule: str) -> Tensor:
        value = getattr(self, name)
        if value is None:
            raise ValueError(f"selection rule {rule!r} needs {name!r}, which was not computed")
        if tuple(value.shape) != tuple(self.response_mask.shape):
            raise ValueError(
                f"{name} must have the response mask's shape {list(self.response_mask.shape)}, "
                f"got {list(value.shape)}"
            )
        return value


@dataclass(frozen=True)
class SelectionRule:
    """A registered rule: ``fn(inputs, **hparams) -> mask [B, T] bool``."""

    name: str
    fn: Callable[..., Tensor]
    needs: frozenset[str]
    description: str
    defaults: dict[str, Any] = field(default_factory=dict)
    label: str = ""  # how reports and tables name the method; register_selection sets it
    #: The factor on the preset's learning rate this method trains with: 1 for every rule
    #: but the positive control, whose planted difference is a smaller step, not a mask.
    lr_scale: float = 1.0

    def __call__(self, inputs: SelectionInputs, **hparams: Any) -> Tensor:
        unknown = sorted(set(hparams) - set(self.defaults))
        if unknown:
            raise TypeError(
                f"selection rule {self.name!r} has no hyperparameter(s) {unknown}; "
                f"valid: {sorted(self.defaults) or 'none'}"
            )
        _check_inputs(inputs)
        mask = self.fn(inputs, **hparams)
        _check_output(self.name, mask, inputs.response_mask)
        return mask


_REGISTRY: dict[str, SelectionRule] = {}


def register_selection(
    name: str,
    *,
    needs: Iterable[str] = (),
    description: str | None = None,
    label: str | None = None,
    overwrite: bool = False,
    lr_scale: float = 1.0,
) -> Callable[[Callable[..., Tensor]], Callable[..., Tensor]]:
    """Decorator: register ``fn(inputs, *, hparam=default, ...)`` as rule ``name``.

    ``needs`` names the statistics the rule reads (subset of ``STAT_NAMES``), so the
    trainer computes only those (group JS is the costly one). ``label`` is the method's
    name in reports (the paper's, e.g. "20-Entropy"); a rule without one is shown by ``name``.
    ``lr_scale`` multiplies the learning rate the method trains with (the positive control).
    """
    needs = frozenset(needs)
    if not lr_scale > 0:
        raise ValueError(f"lr_scale must be > 0, got {lr_scale!r}")
    if not needs <= set(INPUT_NAMES):
        raise ValueError(f"needs must be a subset of {INPUT_NAMES}, got {sorted(needs)}")

    def decorator(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
        if name in _REGISTRY and not overwrite:
            raise ValueError(f"a selection rule named {name!r} is already registered")
        params = list(inspect.signature(fn).parameters.values())
        if not params or params[0].kind not in (
            params[0].POSITIONAL_ONLY,
            params[0].POSITIONAL_OR_KEYWORD,
        ):
            raise TypeError(f"rule {name!r}: the first parameter must take the SelectionInputs")
        defaults = {}
        for p in params[1:]:
            if p.kind != p.KEYWORD_ONLY or p.default is p.empty:
                raise TypeError(
                    f"rule {name!r}: hyperparameter {p.name!r} must be keyword-only with a default"
                )
            defaults[p.name] = p.default
        doc = description or (inspect.getdoc(fn) or "").split("\n\n")[0].replace("\n", " ")
        _REGISTRY[name] = SelectionRule(name, fn, needs, doc, defaults, label or name, lr_scale)
        return fn

    return decorator


class MethodModuleError(UserModuleError):
    """A user's method module failed to import, registered nothing, or its rule misbehaved."""


_LOADED_MODULES: dict[tuple[str, str], list[str]] = {}


def load_method_module(path: str | Path) -> list[str]:
    """Import a user's Python file that registers rules with ``@register_selection``.

    Returns the names it registered. Loading the same file (same content) again is a no-op,
    so a process may load it more than once. Errors name the file.
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise MethodModuleError(f"method module {path} does not exist")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if (str(path), digest) in _LOADED_MODULES:
        return _LOADED_MODULES[(str(path), digest)]
    before = set(_REGISTRY)
    spec = importlib.util.spec_from_file_location(f"ictrepro_user_{path.stem}_{digest[:8]}", path)
    if spec is None or spec.loader is None:
        raise MethodModuleError(f"method module {path} cannot be imported (not a .py file?)")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise MethodModuleError(
            f"method module {path} failed to import: {type(e).__name__}: {e}"
        ) from e
    names = sorted(set(_REGISTRY) - before)
    if not names:
        raise MethodModuleError(
            f"method module {path} registered no selection rule; decorate a function with "
            '@register_selection("name") from ictrepro.algos.selection'
        )
    _LOADED_MODULES[(str(path), digest)] = names
    return names


def get_selection(name: str) -> SelectionRule:
    """The rule registered as ``name``; an unknown name raises a ConfigError listing the valid ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(
            f"unknown token-selection method {name!r}; valid: {', '.join(sorted(_REGISTRY))}"
        ) from None


def available_selections() -> dict[str, SelectionRule]:
    """All registered rules by name (a copy)."""
    return dict(_REGISTRY)


def select_tokens(name: str, inputs: SelectionInputs, **hparams: Any) -> Tensor:
    """Run rule ``name``: the mask ``[B, T]`` bool, a subset of ``inputs.response_mask``."""
    return get_selection(name)(inputs, **hparams)


# ---------------------------------------------------------------------------- helpers


def _check_inputs(inputs: SelectionInputs) -> None:
    mask = inputs.response_mask
    if mask.dtype != torch.bool or mask.ndim != 2:
        raise TypeError(
            f"response_mask must be a bool [B, T] tensor, got {mask.dtype} {list(mask.shape)}"
        )
    if tuple(inputs.advantages.shape) != (mask.shape[0],):
        raise ValueError(
            f"advantages must have shape [B] = [{mask.shape[0]}], got {list(inputs.advantages.shape)}"
        )


def _check_output(name: str, mask: Any, response_mask: Tensor) -> None:
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        kind = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
        raise TypeError(f"selection rule {name!r} must return a torch.bool tensor, got {kind}")
    if mask.shape != response_mask.shape:
        raise ValueError(
            f"selection rule {name!r} returned shape {list(mask.shape)}, expected "
            f"{list(response_mask.shape)} (the response mask's)"
        )
    if bool((mask & ~response_mask).any()):
        raise ValueError(f"selection rule {name!r} selected tokens outside the response mask")


def _check_fraction(name: str, value: float) -> Fraction:
    if not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ValueError(f"{name} must be in (0, 1], got {value!r}")
    # An exact fraction, so that ceil(0.1 * 30) is 3 and not 4 (0.1 * 30 = 3.0000000000000004).
    return Fraction(value).limit_denominator(1_000_000)


def ceil_fraction(count: Tensor, rho: float) -> Tensor:
    """``ceil(rho * count)`` computed exactly (rho read as a fraction, denominator <= 1e6)."""
    frac = _check_fraction("rho", rho)
    return (count * frac.numerator + frac.denominator - 1) // frac.denominator


def top_fraction_mask(
    scores_BT: Tensor, response_mask_BT: Tensor, rho: float, scope: Scope = "sequence"
) -> Tensor:
    """Keep the ``ceil(rho * n)`` highest-scoring response tokens.

    Args:
        scores_BT: float ``[B, T]`` (values outside the response mask are ignored).
        response_mask_BT: bool ``[B, T]``.
        rho: fraction in (0, 1].
        scope: ``"sequence"``: k_i = ceil(rho * |o_i|) within each response;
            ``"batch"``: k = ceil(rho * N) over all N response tokens of the batch.

    Returns:
        bool ``[B, T]``. Ties go to the earlier token (row-major in batch scope).
    """
    _check_scope(scope)
    if scores_BT.shape != response_mask_BT.shape:
        raise ValueError(
            f"scores {list(scores_BT.shape)} must match response mask {list(response_mask_BT.shape)}"
        )
    if bool(torch.isnan(scores_BT[response_mask_BT]).any()):
        raise ValueError("scores contain NaN at response tokens")
    keys = torch.where(response_mask_BT, scores_BT.double(), -torch.inf)
    if scope == "batch":
        keys = keys.reshape(1, -1)
    k = ceil_fraction(response_mask_BT.reshape(keys.shape).sum(dim=1, keepdim=True), rho)
    # A stable descending sort keeps equal keys in index order: ties go to earlier tokens.
    order = torch.sort(keys, dim=1, descending=True, stable=True).indices
    rank = torch.empty_like(order).scatter_(
        1, order, torch.arange(keys.shape[1], device=keys.device).expand_as(order)
    )
    return (rank < k).reshape(response_mask_BT.shape) & response_mask_BT


def _check_scope(scope: str) -> None:
    if scope not in ("sequence", "batch"):
        raise ValueError(f"scope must be 'sequence' or 'batch', got {scope!r}")


def _check_warmup(warmup_steps: int) -> None:
    if not isinstance(warmup_steps, int) or warmup_steps < 0:
        raise ValueError(f"warmup_steps must be an int >= 0, got {warmup_steps!r}")


# ------------------------------------------------------------------------------ rules


@register_selection("grpo", label="GRPO")
def grpo(inputs: SelectionInputs) -> Tensor:
    """Dense GRPO: every response token."""
    return inputs.response_mask.clone()


@register_selection("grpo-lr4", label="GRPO lr/4 (positive control)", lr_scale=0.25)
def grpo_quarter_lr(inputs: SelectionInputs) -> Tensor:
    """Positive control: dense GRPO at a quarter of the learning rate, a planted difference
    (it learns less in the same steps) that a working instrument must resolve."""
    return inputs.response_mask.clone()


@register_selection("entropy", needs=("entropy",), label="20-Entropy")
def high_entropy(inputs: SelectionInputs, *, rho: float = 0.2, scope: Scope = "batch") -> Tensor:
    """20-Entropy (Wang et al. 2025): the top rho of response tokens by entropy, k = ceil(rho N) over the batch."""
    return top_fraction_mask(inputs.require("entropy", "entropy"), inputs.response_mask, rho, scope)


@register_selection("stapo", needs=("logprob", "entropy"), label="STAPO")
def stapo(inputs: SelectionInputs, *, tau_p: float = 0.002, quantile: float = 0.75) -> Tensor:
    """STAPO (Liu et al. 2026): silence A>0, pi<tau_p, H<tau_h tokens; tau_h = quantile of H over low-pi positive tokens.

    tau_h is the ``quantile`` (linear interpolation) of the entropy over the tokens with
    A > 0 and pi < tau_p in the batch; with no such token nothing is silenced.
    """
    if not 0 < tau_p < 1:
        raise ValueError(f"tau_p must be in (0, 1), got {tau_p!r}")
    if not 0 <= quantile <= 1:
        raise ValueError(f"quantile must be in [0, 1], got {quantile!r}")
    mask = inputs.response_mask
    prob = inputs.require("logprob", "stapo").double().exp()
    entropy = inputs.require("entropy", "stapo").double()
    low_prob_positive = mask & (inputs.advantages > 0).unsqueeze(1) & (prob < tau_p)
    if not bool(low_prob_positive.any()):
        return mask.clone()
    tau_h = torch.quantile(entropy[low_prob_positive], quantile)
    return mask & ~(low_prob_positive & (entropy < tau_h))


@register_selection("ict", needs=("js",), label="ICT")
def ict(
    inputs: SelectionInputs,
    *,
    rho: float = 0.1,
    scope: Scope = "sequence",
    warmup_steps: int = 10,
    highest: bool = True,
) -> Tensor:
    """ICT: the top rho of each response's tokens by group JS divergence u; dense for the first warmup_steps steps.

    ``highest=False`` keeps the lowest-u tokens instead (the paper's "frequent tokens" ablation).
    """
    _check_scope(scope)
    _check_warmup(warmup_steps)
    _check_fraction("rho", rho)  # fail on a bad rho during warm-up too, not 10 steps in
    if inputs.step < warmup_steps:
        return inputs.response_mask.clone()
    js = inputs.require("js", "ict")
    return top_fraction_mask(js if highest else -js, inputs.response_mask, rho, scope)


@register_selection("ict-nochoice", needs=("js", "choice"), label="ICT without the choice")
def ict_without_choice(
    inputs: SelectionInputs, *, rho: float = 0.1, scope: Scope = "sequence", warmup_steps: int = 10
) -> Tensor:
    """Mechanism control: ICT's mask with each choice token ranked last, so the next-ranked token takes its place.

    It differs from ICT only where ICT selects the choice: ICT itself, on the same group JS
    with each choice token set below every other (JS lies in [0, ln 2]; padding is -inf),
    so the choice token is kept only when every token is selected.
    """
    js = inputs.require("js", "ict-nochoice")
    choice = inputs.require("choice", "ict-nochoice")
    ranked_last = dataclasses.replace(inputs, js=js.masked_fill(choice, -1.0))
    return ict(ranked_last, rho=rho, scope=scope, warmup_steps=warmup_steps)


@register_selection("random", label="Random-10%")
def random_control(
    inputs: SelectionInputs, *, rho: float = 0.1, scope: Scope = "sequence", warmup_steps: int = 10
) -> Tensor:
    """Random control: a uniformly random mask of ICT's size (same rho, scope and warm-up)."""
    _check_scope(scope)
    _check_warmup(warmup_steps)
    _check_fraction("rho", rho)  # fail on a bad rho during warm-up too, not 10 steps in
    if inputs.step < warmup_steps:
        return inputs.response_mask.clone()
    mask = inputs.response_mask
    # Drawn on the generator's device (a CPU generator cannot feed a CUDA draw), then moved:
    # the same seed gives the same mask on every device.
    draw_device = inputs.generator.device if inputs.generator is not None else mask.device
    scores = torch.rand(
        mask.shape, generator=inputs.generator, dtype=torch.float64, device=draw_device
    )
    return top_fraction_mask(scores.to(mask.device), mask, rho, scope)
