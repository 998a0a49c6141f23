"""The named presets: each is one whole experiment, from the prepared world to the evaluation.

A :class:`Preset` holds the configs of every stage: ``prepare`` (None where that stage is
not built yet: the paper scale downloads Qwen2.5 and its data on a GPU machine), the
training defaults shared by every method, and the evaluation (benchmarks and decoding).
``ictrepro reproduce --dry-run`` describes any preset; ``get_preset`` is the one lookup.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ictrepro.config import (
    CalibrationSpec,
    DataSpec,
    EvalSpec,
    InfraSpec,
    ModelSpec,
    PrepareConfig,
    RLSpec,
    SFTSpec,
    TrainConfig,
    apply_overrides,
)
from ictrepro.data.suites import EVAL_SUITES
from ictrepro.errors import ConfigError
from ictrepro.rollout.params import SamplingParams

#: How the tiny suites are evaluated, for every tiny preset: the one place these settings
#: are written (the ``tasks/ictrepro_tiny_*.yaml`` files are checked against it).
TINY_EVAL = EvalSpec(
    benchmarks=EVAL_SUITES,
    sampling=SamplingParams(n=4, temperature=1.0, top_p=1.0, max_new_tokens=96),
    ks=(1, 4),
)


@dataclass(frozen=True)
class TrainPreset:
    """A preset's training defaults; ``train_preset`` makes a method's ``TrainConfig``."""

    rl: RLSpec
    infra: InfraSpec = field(default_factory=InfraSpec)
    #: Per-method selection hyperparameters that differ from the rule's paper default.
    method_args: dict[str, dict[str, Any]] = field(default_factory=dict)
    model: str = ""
    train_data: str = ""


@dataclass(frozen=True)
class Preset:
    name: str
    #: None: the prepare stage of this scale is not built (``reproduce`` says so).
    prepare: PrepareConfig | None
    train: TrainPreset
    eval: EvalSpec


def _tiny() -> Preset:
    #: The tiny run is 20 steps, so ICT's dense warm-up (paper: 10 of some hundreds of
    #: steps) is scaled down to 3 steps, and the random control follows it.
    warmup = {"ict": {"warmup_steps": 3}, "random": {"warmup_steps": 3}}
    return Preset(
        "tiny",
        PrepareConfig(preset="tiny", calibration=CalibrationSpec(sampling=TINY_EVAL.sampling)),
        # The probe: 64 held-out RL prompts x 4 samples, before step 1 and every 5 steps.
        TrainPreset(rl=RLSpec(probe_problems=64), method_args=warmup),
        TINY_EVAL,
    )


def _tiny_smoke() -> Preset:
    """Seconds-scale version of ``tiny`` for tests: same code path, tiny sizes."""
    prepare = PrepareConfig(
        preset="tiny-smoke",
        data=DataSpec(n_test=8, n_sft=40, n_rl_train=40, sft_extra=()),
        model=ModelSpec(
            vocab_size=384,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
        ),
        sft=SFTSpec(steps=4, batch_size=16, warmup_steps=1),
        calibration=CalibrationSpec(n_problems=4, sampling=SamplingParams(n=2, max_new_tokens=24)),
    )
    rl = RLSpec(
        steps=3,
        prompts_per_step=2,
        group_size=4,
        max_new_tokens=16,
        sample_batch_size=8,
        lr=1e-3,
        lr_warmup_steps=0,
    )
    warmup = {"ict": {"warmup_steps": 1}, "random": {"warmup_steps": 1}}
    train = TrainPreset(rl=rl, infra=InfraSpec(checkpoint_every=1), method_args=warmup)
    return Preset("tiny-smoke", prepare, train, TINY_EVAL)


def _paper(name: str, model: str) -> Preset:
    """verl's GSM8K+MATH GRPO example as docs/method.md's inferred defaults.

    Batch 1,024 prompts and PPO mini-batch 256 as in that example; 15 epochs of the
    14,973 GSM8K+MATH training problems at 1,024 prompts a step is 219 steps.
    """
    from ictrepro.data.benchmarks import PAPER_BENCHMARKS

    rl = RLSpec(
        steps=219,
        prompts_per_step=1024,
        group_size=5,
        max_new_tokens=1024,
        mini_batches=4,
        micro_batch_size=16,
        lr=1e-6,
        lr_warmup_steps=0,
        kl_coef=0.001,
        sample_batch_size=1024,
        chunked_logprobs=True,  # at V = 151,936 the full logits path does not fit
    )
    infra = InfraSpec(checkpoint_every=20, verifier_workers=8, gradient_checkpointing=True)
    train = TrainPreset(rl=rl, infra=infra, model=model)
    return Preset(name, None, train, EvalSpec(benchmarks=tuple(PAPER_BENCHMARKS)))


#: Built on lookup: validating an RLSpec imports torch, which `ictrepro --help` does not need.
_PRESETS: dict[str, Callable[[], Preset]] = {
    "tiny": _tiny,
    "tiny-smoke": _tiny_smoke,
    "paper-0.5b": lambda: _paper("paper-0.5b", "Qwen/Qwen2.5-0.5B"),
    "paper-1.5b": lambda: _paper("paper-1.5b", "Qwen/Qwen2.5-1.5B"),
    "paper-7b": lambda: _paper("paper-7b", "Qwen/Qwen2.5-7B"),
}


def preset_names() -> tuple[str, ...]:
    return tuple(_PRESETS)


def get_preset(name: str) -> Preset:
    """The preset ``name``; an unknown name is a ``ConfigError`` listing the valid ones."""
    if name not in _PRESETS:
        raise ConfigError(f"unknown preset {name!r}; valid: {', '.join(_PRESETS)}")
    return _PRESETS[name]()


def _check_seed(seed: Any) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"seed must be an integer, got {seed!r}")


def prepare_preset(name: str, *, seed: int = 0) -> PrepareConfig:
    """The prepare config of preset ``name`` with ``seed``."""
    preset = get_preset(name)
    _check_seed(seed)
    if preset.prepare is None:
        buildable = [n for n in _PRESETS if get_preset(n).prepare is not None]
        raise ConfigError(
            f"preset {name!r} has no prepare stage yet (the paper scale is not built); "
            f"presets that prepare: {', '.join(buildable)}"
        )
    return dataclasses.replace(preset.prepare, seed=seed)


def train_preset(
    name: str, *, method: str, seed: int = 0, overrides: dict[str, Any] | None = None
) -> TrainConfig:
    """The training config of preset ``name`` for ``method`` and ``seed``.

    ``overrides`` maps dotted field names to values (``{"rl.lr": 1e-5,
    "infra.keep_checkpoints": 3, "method_args.rho": 0.2}``), from the command line or a
    YAML/TOML file. Unknown presets, fields and hyperparameters are ``ConfigError``s that
    list the valid ones (an unknown method is the selection registry's ``KeyError``).
    """
    from ictrepro.algos.selection import get_selection

    preset = get_preset(name).train
    _check_seed(seed)
    rule = get_selection(method)
    config = TrainConfig(
        preset=name,
        method=method,
        seed=seed,
        method_args={**rule.defaults, **preset.method_args.get(method, {})},
        rl=preset.rl,
        infra=preset.infra,
        model=preset.model,
        train_data=preset.train_data,
    )
    if overrides:
        config = apply_overrides(config, overrides)
    unknown = sorted(set(config.method_args) - set(rule.defaults))
    if unknown:
        raise ConfigError(
            f"method {method!r} has no hyperparameter(s) {unknown}; "
            f"valid: {', '.join(sorted(rule.defaults)) or 'none'}"
        )
    return config
