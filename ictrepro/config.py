"""Dataclass configs and the named presets they come in.

A preset is a complete, hashable description of a run: the hash of its JSON form is how a
stage knows whether the files in a run directory were made by the same config.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ictrepro.io import sha256_json
from ictrepro.rollout.params import SamplingParams

EVAL_SUITES = (
    "tiny-gsm8k",
    "tiny-math500",
    "tiny-mmlu-stem",
    "tiny-gpqa",
    "tiny-aime23",
    "tiny-aime24",
    "tiny-aime25",
)


@dataclass(frozen=True)
class ModelSpec:
    """Shape of the locally built Qwen2-architecture model (``Qwen2Config`` fields)."""

    #: Upper bound: BPE stops early when the corpus has no more pairs to merge.
    vocab_size: int = 1024
    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 512
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = True


@dataclass(frozen=True)
class DataSpec:
    """Which synthetic suites to generate and how many problems of each."""

    eval_suites: tuple[str, ...] = EVAL_SUITES
    #: RL prompts (GSM8K + MATH-like mixture, in the spirit of the paper's training data).
    rl_suite: str = "tiny-train"
    n_test: int = 64
    #: Worked solutions per eval suite for the SFT warm start (its "pretraining").
    n_sft: int = 800
    #: Extra SFT solutions for suites the base model finds hardest (a mixture weight,
    #: chosen when calibrating: see docs/tiny-world.md). ``((suite, extra), ...)``.
    sft_extra: tuple[tuple[str, int], ...] = (("tiny-gsm8k", 400), ("tiny-aime25", 400))
    n_rl_train: int = 2000


@dataclass(frozen=True)
class SFTSpec:
    """Supervised warm start that teaches the answer format on generated solutions."""

    steps: int = 600
    batch_size: int = 32
    lr: float = 3e-3
    warmup_steps: int = 20
    weight_decay: float = 0.0
    grad_clip: float = 1.0


@dataclass(frozen=True)
class CalibrationSpec:
    """Base-model pass@k printed at the end of ``prepare`` (plain sampling + answer check).

    pass@1 and pass@``sampling.n`` are reported; the run's seed seeds the sampling.
    """

    n_problems: int = 64
    sampling: SamplingParams = field(
        default_factory=lambda: SamplingParams(n=4, temperature=1.0, top_p=1.0, max_new_tokens=96)
    )


@dataclass(frozen=True)
class PrepareConfig:
    preset: str
    seed: int = 0
    data: DataSpec = field(default_factory=DataSpec)
    model: ModelSpec = field(default_factory=ModelSpec)
    sft: SFTSpec = field(default_factory=SFTSpec)
    calibration: CalibrationSpec = field(default_factory=CalibrationSpec)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def sha256(self) -> str:
        return sha256_json(self.to_json())


def _tiny() -> PrepareConfig:
    return PrepareConfig(preset="tiny")


def _tiny_smoke() -> PrepareConfig:
    """Seconds-scale version of ``tiny`` for tests: same code path, tiny sizes."""
    return PrepareConfig(
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


PREPARE_PRESETS = {"tiny": _tiny, "tiny-smoke": _tiny_smoke}


def prepare_preset(name: str, *, seed: int = 0) -> PrepareConfig:
    """The prepare config of preset ``name`` with ``seed``; unknown names list the valid ones."""
    if name not in PREPARE_PRESETS:
        raise KeyError(f"unknown preset {name!r}; valid: {', '.join(PREPARE_PRESETS)}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an integer, got {seed!r}")
    return dataclasses.replace(PREPARE_PRESETS[name](), seed=seed)


# ------------------------------------------------------------------------- training


SAMPLERS = ("hf", "vllm")
LR_SCHEDULES = ("constant", "cosine")


@dataclass(frozen=True)
class RLSpec:
    """The GRPO loop's hyperparameters, shared by every method (docs/method.md, "The objective").

    One *step* samples ``group_size`` responses for each of ``prompts_per_step`` prompts,
    computes the mask once, then makes ``ppo_epochs x mini_batches`` optimiser updates.
    """

    steps: int = 20
    prompts_per_step: int = 8
    group_size: int = 8
    #: The tiny world's gold solutions are at most 44 tokens (its RL prompts' longest).
    max_new_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    ppo_epochs: int = 1
    #: Optimiser updates per epoch; the step's groups are split evenly between them.
    mini_batches: int = 1
    #: Sequences per forward/backward pass (gradient accumulation); 0 = whole mini-batch.
    micro_batch_size: int = 32
    lr: float = 2e-4
    lr_warmup_steps: int = 2
    lr_schedule: str = "constant"
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    clip_low: float = 0.2
    clip_high: float = 0.2
    kl_coef: float = 0.001
    agg_mode: str = "seq-mean-token-mean"
    #: Divide advantages by the group's reward std (GRPO); False: centre only (Dr. GRPO).
    adv_normalize_std: bool = True
    #: Temperature of the statistics and log-probs; None = the sampling temperature
    #: (inferred; docs/method.md, "Choices the paper leaves open").
    stats_temperature: float | None = None
    #: Compute the group JS for every method, not only for rules that need it, so the
    #: selected-vs-unselected JS curves exist for all methods (costs a little time).
    log_js: bool = True
    sampler: str = "hf"
    #: Sequences per sampler call (HF ``generate`` batch).
    sample_batch_size: int = 128
    prompt_style: str = "auto"
    checkpoint_every: int = 10
    #: Checkpoints kept on disk (the newest ones).
    keep_checkpoints: int = 1
    #: Verifier worker processes per rank (0 = grade in the training process).
    verifier_workers: int = 0
    verifier_timeout_s: float = 5.0

    def __post_init__(self) -> None:
        positive = ("steps", "prompts_per_step", "ppo_epochs", "mini_batches", "max_new_tokens")
        for name in (*positive, "sample_batch_size", "checkpoint_every", "keep_checkpoints"):
            if getattr(self, name) < 1:
                raise ValueError(f"rl.{name} must be >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ValueError(
                f"rl.group_size must be >= 2 (GRPO compares responses), got {self.group_size}"
            )
        if self.prompts_per_step % self.mini_batches:
            raise ValueError(
                f"rl.prompts_per_step ({self.prompts_per_step}) must be divisible by "
                f"rl.mini_batches ({self.mini_batches}): a group stays in one mini-batch"
            )
        if self.micro_batch_size < 0:
            raise ValueError(f"rl.micro_batch_size must be >= 0, got {self.micro_batch_size}")
        if self.lr <= 0 or self.lr_warmup_steps < 0 or self.weight_decay < 0:
            raise ValueError("rl.lr must be > 0, rl.lr_warmup_steps and rl.weight_decay >= 0")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(
                f"rl.lr_schedule must be one of {LR_SCHEDULES}, got {self.lr_schedule!r}"
            )
        if self.sampler not in SAMPLERS:
            raise ValueError(f"rl.sampler must be one of {SAMPLERS}, got {self.sampler!r}")
        if self.stats_temperature is not None and self.stats_temperature <= 0:
            raise ValueError(
                f"rl.stats_temperature must be > 0 or null, got {self.stats_temperature}"
            )
        if self.temperature <= 0:
            raise ValueError(f"rl.temperature must be > 0 for RL sampling, got {self.temperature}")
        if self.grad_clip <= 0 or self.verifier_timeout_s <= 0 or self.verifier_workers < 0:
            raise ValueError("rl.grad_clip and rl.verifier_timeout_s must be > 0, workers >= 0")
        # Validated here so that a bad value fails before any model is loaded.
        SamplingParams(self.group_size, self.temperature, self.top_p, self.max_new_tokens)
        from ictrepro.algos.losses import AGG_MODES

        if self.agg_mode not in AGG_MODES:
            raise ValueError(f"rl.agg_mode must be one of {AGG_MODES}, got {self.agg_mode!r}")

    @property
    def sampling(self) -> SamplingParams:
        return SamplingParams(self.group_size, self.temperature, self.top_p, self.max_new_tokens)

    @property
    def temperature_for_stats(self) -> float:
        return self.stats_temperature if self.stats_temperature is not None else self.temperature


@dataclass(frozen=True)
class TrainConfig:
    """One training run: a method, a seed, the loop's hyperparameters and its inputs.

    ``method_args`` holds every hyperparameter of the selection rule, defaults included,
    so the record shows the whole method. ``model`` and ``train_data`` default (empty
    string) to the run directory's ``base_model/`` and ``data/rl_train.jsonl``.
    """

    preset: str
    method: str
    seed: int = 0
    method_args: dict[str, Any] = field(default_factory=dict)
    rl: RLSpec = field(default_factory=RLSpec)
    model: str = ""
    train_data: str = ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def sha256(self) -> str:
        return sha256_json(self.to_json())


@dataclass(frozen=True)
class TrainPreset:
    rl: RLSpec
    #: Per-method selection hyperparameters that differ from the rule's paper default.
    method_args: dict[str, dict[str, Any]] = field(default_factory=dict)
    model: str = ""
    train_data: str = ""


#: The tiny run is 20 steps, so ICT's dense warm-up (paper: 10 of some hundreds of
#: steps) is scaled down to 3 steps, and the random control follows it.
_TINY_WARMUP = {"ict": {"warmup_steps": 3}, "random": {"warmup_steps": 3}}


def _paper(model: str) -> TrainPreset:
    """verl's GSM8K+MATH GRPO example as the inferred defaults (docs/method.md, "Training loop").

    Batch 1,024 prompts and PPO mini-batch 256 as in that example; 15 epochs of the
    14,973 GSM8K+MATH training problems at 1,024 prompts a step is 219 steps.
    """
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
        checkpoint_every=20,
        verifier_workers=8,
    )
    return TrainPreset(rl=rl, model=model)


TRAIN_PRESETS: dict[str, Any] = {
    "tiny": lambda: TrainPreset(rl=RLSpec(), method_args=_TINY_WARMUP),
    "tiny-smoke": lambda: TrainPreset(
        rl=RLSpec(
            steps=3,
            prompts_per_step=2,
            group_size=4,
            max_new_tokens=16,
            sample_batch_size=8,
            checkpoint_every=1,
            lr=1e-3,
            lr_warmup_steps=0,
        ),
        method_args={"ict": {"warmup_steps": 1}, "random": {"warmup_steps": 1}},
    ),
    "paper-0.5b": lambda: _paper("Qwen/Qwen2.5-0.5B"),
    "paper-1.5b": lambda: _paper("Qwen/Qwen2.5-1.5B"),
    "paper-7b": lambda: _paper("Qwen/Qwen2.5-7B"),
}


def train_preset(
    name: str, *, method: str, seed: int = 0, overrides: dict[str, Any] | None = None
) -> TrainConfig:
    """The training config of preset ``name`` for ``method`` and ``seed``.

    ``overrides`` maps dotted field names to values (``{"rl.lr": 1e-5,
    "method_args.rho": 0.2}``), from the command line or a YAML/TOML file. Unknown
    presets, methods, fields and hyperparameters are errors that list the valid ones.
    """
    from ictrepro.algos.selection import get_selection

    if name not in TRAIN_PRESETS:
        raise KeyError(f"unknown preset {name!r}; valid: {', '.join(TRAIN_PRESETS)}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an integer, got {seed!r}")
    rule = get_selection(method)
    preset = TRAIN_PRESETS[name]()
    method_args = {**rule.defaults, **preset.method_args.get(method, {})}
    config = TrainConfig(
        preset=name,
        method=method,
        seed=seed,
        method_args=method_args,
        rl=preset.rl,
        model=preset.model,
        train_data=preset.train_data,
    )
    if overrides:
        config = apply_overrides(config, overrides)
    unknown = sorted(set(config.method_args) - set(rule.defaults))
    if unknown:
        raise KeyError(
            f"method {method!r} has no hyperparameter(s) {unknown}; "
            f"valid: {', '.join(sorted(rule.defaults)) or 'none'}"
        )
    return config


# ------------------------------------------------------------------------ overrides


def parse_value(text: str) -> Any:
    """A command-line value: JSON if it parses (numbers, true/false, null, lists), else text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_assignments(items: list[str]) -> dict[str, Any]:
    """``["rl.lr=1e-5", ...]`` -> ``{"rl.lr": 1e-05}``; a malformed item is named."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set {item!r}: expected FIELD=VALUE, e.g. --set rl.lr=1e-5")
        out[key.strip()] = parse_value(value.strip())
    return out


def load_overrides(path: Path) -> dict[str, Any]:
    """Dotted overrides from a YAML (``.yaml``/``.yml``) or TOML (``.toml``) file.

    Nested tables are flattened: ``rl: {lr: 1e-5}`` is ``{"rl.lr": 1e-5}``.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"{path}: not valid TOML ({e})") from None
    elif path.suffix in (".yaml", ".yml"):
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as e:
            raise ValueError(f"{path}: not valid YAML ({e})") from None
    else:
        raise ValueError(f"{path}: config files must end in .yaml, .yml or .toml")
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the top level must be a mapping of fields")
    return _flatten(data)


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        # method_args is itself a mapping field: keep its keys as one level.
        if isinstance(value, dict) and f"{prefix}{key}" != "method_args":
            out.update(_flatten(value, f"{prefix}{key}."))
        elif isinstance(value, dict):
            out.update({f"method_args.{k}": v for k, v in value.items()})
        else:
            out[f"{prefix}{key}"] = value
    return out


def apply_overrides(config: Any, overrides: dict[str, Any]) -> Any:
    """A copy of dataclass ``config`` with dotted fields replaced (types checked)."""
    for dotted, value in overrides.items():
        config = _replace_path(config, dotted.split("."), value, dotted)
    return config


def _replace_path(obj: Any, path: list[str], value: Any, dotted: str) -> Any:
    head, rest = path[0], path[1:]
    if isinstance(obj, dict):  # method_args: keys are checked against the rule later
        if rest:
            raise KeyError(f"{dotted}: {head!r} takes a value, not sub-fields")
        return {**obj, head: value}
    fields = {f.name: f for f in dataclasses.fields(obj)}
    if head not in fields:
        raise KeyError(f"unknown config field {dotted!r}; valid here: {', '.join(sorted(fields))}")
    current = getattr(obj, head)
    if dataclasses.is_dataclass(current) or isinstance(current, dict):
        if not rest:
            raise KeyError(f"{dotted} is a group of fields; set one of them, e.g. {dotted}.<name>")
        new = _replace_path(current, rest, value, dotted)
    else:
        if rest:
            raise KeyError(f"{dotted}: {head!r} has no sub-fields")
        new = _coerce(value, typing.get_type_hints(type(obj))[head], dotted)
    try:
        return dataclasses.replace(obj, **{head: new})
    except (TypeError, ValueError) as e:
        raise ValueError(f"{dotted}={value!r}: {e}") from None


def _coerce(value: Any, hint: Any, dotted: str) -> Any:
    """Check ``value`` against a simple type hint (bool, int, float, str, optional)."""
    options = (
        typing.get_args(hint)
        if typing.get_origin(hint) in (typing.Union, types.UnionType)
        else (hint,)
    )
    if value is None and type(None) in options:
        return None
    for kind in (bool, int, float, str):
        if kind not in options:
            continue
        if kind is bool and isinstance(value, bool):
            return value
        if kind is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if kind is str and isinstance(value, str):
            return value
    names = ", ".join(getattr(o, "__name__", str(o)) for o in options)
    raise ValueError(f"{dotted}: expected {names}, got {value!r}")
