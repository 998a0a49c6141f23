"""Dataclass configs and the named presets they come in.

A preset is a complete, hashable description of a run: the hash of its JSON form is how a
stage knows whether the files in a run directory were made by the same config.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

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
