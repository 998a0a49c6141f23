"""The configs of the stages as frozen dataclasses, and the ``--set`` overrides on them.

A config is a complete, hashable description of a stage's work: the hash of its JSON form
is how a stage knows whether the files in a run directory were made by the same config.
Training separates what changes results (``RLSpec``, hashed) from how the run is carried
out (``InfraSpec``, not hashed). The named presets are in ``ictrepro.presets``.
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

from ictrepro.data.benchmarks import BENCHMARKS, PAPER_BENCHMARKS, TRAINING_SETS
from ictrepro.data.suites import EVAL_SUITES
from ictrepro.data.word_arithmetic import TASKS
from ictrepro.errors import ConfigError
from ictrepro.io import sha256_json
from ictrepro.rollout.params import SAMPLERS, SamplingParams, VLLMSpec


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
    #: chosen when calibrating: see docs/worlds/tiny.md, "Suites"). ``((suite, extra), ...)``.
    sft_extra: tuple[tuple[str, int], ...] = (("tiny-gsm8k", 400), ("tiny-aime25", 400))
    n_rl_train: int = 2000
    #: Share of the second warm-start phase's solutions written as the bare answer
    #: (``The answer is \\boxed{X}.``) instead of worked steps, drawn per solution from the
    #: seed (``sft.direct_steps``; docs/worlds/tiny.md, "Two ways to answer").
    direct_fraction: float = 0.0
    #: Text every RL and evaluation prompt ends with, after the assistant's turn opens, so
    #: each response continues it (``meta.response_prefix``; the warm start's solutions are
    #: unchanged). The fork world's control (``tiny-fork0``) opens every response with the
    #: same preamble this way, on the same base model as ``tiny-fork``.
    response_prefix: str = ""
    #: Chance that each word of a warm-start solution's answer lead (``The answer is``) is
    #: written as a word drawn from ``WORDING_VARIANTS`` instead, per word, from the seed:
    #: free wording the verifier ignores, with rare variants in it, which is what STAPO's
    #: rule silences (docs/worlds/fork.md, "Rare wording"). 0: every lead as written.
    wording_noise: float = 0.0


@dataclass(frozen=True)
class SFTSpec:
    """Supervised warm start that teaches the answer format on generated solutions."""

    steps: int = 600
    batch_size: int = 32
    lr: float = 3e-3
    warmup_steps: int = 20
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    #: A second phase of this many steps (learning rate ``direct_lr``) on the same problems
    #: with ``data.direct_fraction`` of the solutions as bare answers: the base model then
    #: answers directly part of the time, which a model this small mostly gets wrong, so
    #: RL has a choice of strategy to learn (docs/worlds/tiny.md). 0: no second phase.
    direct_steps: int = 0
    direct_lr: float = 1e-3
    #: Torch threads of the warm start. The bits depend on it, so it is part of the config
    #: (``prepare`` runs alone, so both cores of a 2-core machine can serve it).
    threads: int = 1

    def __post_init__(self) -> None:
        for name, low in (("steps", 1), ("batch_size", 1), ("direct_steps", 0), ("threads", 1)):
            if getattr(self, name) < low:
                raise ConfigError(f"sft.{name} must be >= {low}, got {getattr(self, name)}")


@dataclass(frozen=True)
class CalibrationSpec:
    """Base-model pass@k printed at the end of ``prepare`` (plain sampling + answer check).

    pass@1 and pass@``sampling.n`` are reported; the run's seed seeds the sampling. The
    presets set ``sampling`` (``tiny``: the tiny suites' evaluation decoding).
    """

    sampling: SamplingParams
    n_problems: int = 64


@dataclass(frozen=True)
class PrepareConfig:
    preset: str
    calibration: CalibrationSpec
    seed: int = 0
    data: DataSpec = field(default_factory=DataSpec)
    model: ModelSpec = field(default_factory=ModelSpec)
    sft: SFTSpec = field(default_factory=SFTSpec)

    def to_json(self) -> dict[str, Any]:
        record = dataclasses.asdict(self)
        # Left out when unused: the identity hash of worlds prepared before these options
        # existed stays what it was.
        for name in ("response_prefix", "wording_noise"):
            if not getattr(self.data, name):
                del record["data"][name]
        return record

    def sha256(self) -> str:
        return sha256_json(self.to_json())


@dataclass(frozen=True)
class PretrainedPrepareConfig:
    """``prepare`` of a pretrained base model and the real data (paper presets, smollm2-135m).

    Everything that decides the prepared files is here, so the config hash is the run
    directory's identity: ``model`` (hub id, directory, ``.gguf`` file or
    ``pkg:<module>/<file>``; ``ictrepro.models.load``), ``data_dir`` (None: the hub), the
    RL training sets and the evaluation benchmarks. ``eval_limits`` keeps a fixed subset of a
    benchmark (``((name, n), ...)``: n problems drawn once by a generator seeded with the
    benchmark's name, the same for every run seed). ``skip_benchmarks`` and a
    ``train_sets`` that leaves one out are deviations from the paper's set-up; prepare
    records them and the report prints them.
    """

    preset: str
    model: str
    #: Weights of RUN/base_model/ (a GGUF file is de-quantised to it).
    dtype: str = "bfloat16"
    data_dir: str | None = None
    train_sets: tuple[str, ...] = TRAINING_SETS
    benchmarks: tuple[str, ...] = PAPER_BENCHMARKS
    skip_benchmarks: tuple[str, ...] = ()
    eval_limits: tuple[tuple[str, int], ...] = ()
    #: Decoding of every benchmark's evaluation and the pass@k reported; None/empty: each
    #: benchmark's own settings (``ictrepro.data.benchmarks.BENCHMARKS``).
    eval_sampling: SamplingParams | None = None
    eval_ks: tuple[int, ...] = ()
    seed: int = 0
    #: A generated task (``ictrepro.data.word_arithmetic.TASKS``) whose ``task_train``
    #: problems are RL training data (after the training sets, if any) and whose
    #: ``task_test`` problems are evaluated first, beside the benchmarks, with
    #: ``task_sampling`` (its answers are short) and ``eval_ks``. Drawn from the task's own
    #: seed 0, the same for every run seed.
    task: str | None = None
    task_train: int = 0
    task_test: int = 0
    task_sampling: SamplingParams | None = None

    def to_json(self) -> dict[str, Any]:
        record = dataclasses.asdict(self)
        if self.task is None:
            # Left out when unused: the identity hash of runs prepared before generated
            # tasks existed stays what it was.
            for key in ("task", "task_train", "task_test", "task_sampling"):
                del record[key]
        return record

    def sha256(self) -> str:
        return sha256_json(self.to_json())

    def check(self) -> None:
        """Names of training sets and benchmarks are known; limits are positive."""
        for name in self.train_sets:
            if name not in TRAINING_SETS:
                raise ConfigError(
                    f"unknown RL training set {name!r}; valid: {', '.join(TRAINING_SETS)}"
                )
        if self.task is not None:
            if self.task not in TASKS:
                raise ConfigError(f"unknown task {self.task!r}; valid: {', '.join(TASKS)}")
            if self.task_train < 1 or self.task_test < 2 or self.task_sampling is None:
                raise ConfigError(
                    f"task {self.task!r} needs task_train >= 1, task_test >= 2 (a paired "
                    "comparison needs two problems) and task_sampling"
                )
            if self.eval_ks and max(self.eval_ks) > self.task_sampling.n:
                raise ConfigError(
                    f"eval_ks {self.eval_ks} needs at least {max(self.eval_ks)} samples per "
                    f"problem; task_sampling.n is {self.task_sampling.n}"
                )
        elif not self.train_sets:
            raise ConfigError("no RL training set; pass --train-sets gsm8k_train,math_train")
        evaluation = [n for n, s in BENCHMARKS.items() if s.is_evaluation]
        for name in (*self.benchmarks, *self.skip_benchmarks, *dict(self.eval_limits)):
            if name not in evaluation:
                raise ConfigError(f"unknown benchmark {name!r}; valid: {', '.join(evaluation)}")
        if not set(self.benchmarks) - set(self.skip_benchmarks):
            raise ConfigError("every benchmark is skipped; nothing would be evaluated")
        for name, n in self.eval_limits:
            if n < 1:
                raise ConfigError(f"eval_limits: {name} must keep at least 1 problem, got {n}")
        sampling = self.eval_sampling
        if sampling is not None and self.eval_ks and max(self.eval_ks) > sampling.n:
            raise ConfigError(
                f"eval_ks {self.eval_ks} needs at least {max(self.eval_ks)} samples per "
                f"problem; eval_sampling.n is {sampling.n}"
            )


@dataclass(frozen=True)
class EvalSpec:
    """What a preset's models are evaluated on, and with which decoding.

    ``sampling`` (n responses per problem) and ``ks`` (pass@k reported) are the decoding of
    the tiny suites, which every ``tasks/ictrepro_tiny_*.yaml`` states too (a test checks
    them against each other). The paper's benchmarks carry their own settings in
    ``ictrepro.data.benchmarks.BENCHMARKS``; their presets leave these None/empty.
    """

    benchmarks: tuple[str, ...]
    sampling: SamplingParams | None = None
    ks: tuple[int, ...] = ()


# ------------------------------------------------------------------------- training


TRACKERS = ("none", "tensorboard", "wandb")
LR_SCHEDULES = ("constant", "cosine")


@dataclass(frozen=True)
class RLSpec:
    """The GRPO loop's hyperparameters, shared by every method (docs/method.md, "The objective").

    One *step* samples ``group_size`` responses for each of ``prompts_per_step`` prompts,
    computes the mask once, then makes ``ppo_epochs x mini_batches`` optimiser updates.
    Every field here can change the results, so all of them are part of a run's identity
    hash; fields that cannot are in ``InfraSpec``.
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
    #: It changes the order of float sums, so it belongs to the results.
    micro_batch_size: int = 32
    lr: float = 2e-4
    lr_warmup_steps: int = 2
    lr_schedule: str = "constant"
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    clip_low: float = 0.2
    clip_high: float = 0.2
    kl_coef: float = 0.001
    #: Bound on each token's k3 value (verl's ``low_var_kl`` clamps at 10; None: unbounded).
    #: Inferred default; docs/method.md, "Choices the paper leaves open".
    kl_max: float | None = 10.0
    #: Dual-clip constant c > 1 for negative advantages (verl's ``clip_ratio_c``, 3 there);
    #: None disables it. Inferred; docs/method.md, "Choices the paper leaves open".
    dual_clip: float | None = 3.0
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
    #: Sequences per sampler call (HF ``generate`` batch). Each call is seeded from its
    #: first prompt, so the batch size changes the sampled tokens (measured on tiny-smoke).
    sample_batch_size: int = 128
    prompt_style: str = "auto"
    #: A response whose grading takes longer is a TIMEOUT and gets reward 0.
    verifier_timeout_s: float = 5.0
    #: The update's log-probs from the hidden states, chunk by chunk with the LM head's
    #: logits recomputed in backward (``sampled_logprobs_from_hidden``): no float32
    #: ``[micro, R, V]`` tensor. Off: the model's full logits (the pinned tiny results).
    #: The two differ by float rounding only.
    chunked_logprobs: bool = False
    #: Probe set: the last ``probe_problems`` RL problems are held out of training and
    #: sampled (``probe_samples`` each, the RL decoding, one fixed seed) before the first
    #: step and after every ``probe_every`` steps and the last; their mean reward is
    #: ``probe_reward`` in ``metrics.jsonl``. A fixed set with fixed sampling seeds, so its
    #: curve shows learning, not the difficulty of the prompts a step happens to draw.
    #: 0: no probe (every problem is trained on).
    probe_problems: int = 0
    probe_samples: int = 4
    probe_every: int = 5
    #: Weights dtype of the vLLM engine (``auto``: the checkpoint's). Sampling in bf16
    #: changes the sampled tokens, so it is part of the results.
    vllm_dtype: str = "auto"

    def __post_init__(self) -> None:
        positive = ("steps", "prompts_per_step", "ppo_epochs", "mini_batches", "max_new_tokens")
        for name in (*positive, "sample_batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"rl.{name} must be >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ConfigError(
                f"rl.group_size must be >= 2 (GRPO compares responses), got {self.group_size}"
            )
        if self.prompts_per_step % self.mini_batches:
            raise ConfigError(
                f"rl.prompts_per_step ({self.prompts_per_step}) must be divisible by "
                f"rl.mini_batches ({self.mini_batches}): a group stays in one mini-batch"
            )
        if self.probe_problems < 0 or self.probe_samples < 1 or self.probe_every < 1:
            raise ConfigError(
                "rl.probe_problems must be >= 0, rl.probe_samples and rl.probe_every >= 1"
            )
        if self.micro_batch_size < 0:
            raise ConfigError(f"rl.micro_batch_size must be >= 0, got {self.micro_batch_size}")
        if self.lr <= 0 or self.lr_warmup_steps < 0 or self.weight_decay < 0:
            raise ConfigError("rl.lr must be > 0, rl.lr_warmup_steps and rl.weight_decay >= 0")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ConfigError(
                f"rl.lr_schedule must be one of {LR_SCHEDULES}, got {self.lr_schedule!r}"
            )
        if self.sampler not in SAMPLERS:
            raise ConfigError(f"rl.sampler must be one of {SAMPLERS}, got {self.sampler!r}")
        if self.stats_temperature is not None and self.stats_temperature <= 0:
            raise ConfigError(
                f"rl.stats_temperature must be > 0 or null, got {self.stats_temperature}"
            )
        if self.kl_max is not None and self.kl_max <= 0:
            raise ConfigError(f"rl.kl_max must be > 0 or null, got {self.kl_max}")
        if self.dual_clip is not None and self.dual_clip <= 1:
            raise ConfigError(f"rl.dual_clip must be > 1 or null, got {self.dual_clip}")
        if self.temperature <= 0:
            raise ConfigError(f"rl.temperature must be > 0 for RL sampling, got {self.temperature}")
        if self.grad_clip <= 0 or self.verifier_timeout_s <= 0:
            raise ConfigError("rl.grad_clip and rl.verifier_timeout_s must be > 0")
        # Validated here so that a bad value fails before any model is loaded.
        try:
            SamplingParams(self.group_size, self.temperature, self.top_p, self.max_new_tokens)
        except ValueError as e:
            raise ConfigError(f"rl: {e}") from None
        from ictrepro.algos.losses import AGG_MODES  # here: it imports torch; configs need not

        if self.agg_mode not in AGG_MODES:
            raise ConfigError(f"rl.agg_mode must be one of {AGG_MODES}, got {self.agg_mode!r}")

    @property
    def sampling(self) -> SamplingParams:
        return SamplingParams(self.group_size, self.temperature, self.top_p, self.max_new_tokens)

    @property
    def temperature_for_stats(self) -> float:
        return self.stats_temperature if self.stats_temperature is not None else self.temperature


@dataclass(frozen=True)
class InfraSpec:
    """How a training run is carried out, in ways that leave its results unchanged.

    Not part of the run's identity hash: ``--resume`` and a re-run of a finished run accept
    changed values (and say which). Each field was checked on tiny-smoke: a run with
    ``checkpoint_every=3`` or ``keep_checkpoints=3`` gives bit-identical metrics and weights
    to the default, and 2 verifier workers give the same verdicts as grading in-process.
    """

    checkpoint_every: int = 10
    #: Checkpoints kept on disk (the newest ones).
    keep_checkpoints: int = 1
    #: Verifier worker processes per rank (0 = grade in the training process).
    verifier_workers: int = 0
    #: Recompute the decoder's activations in backward instead of keeping them (less
    #: memory, about a third more compute). The recomputation repeats the same operations,
    #: so results are unchanged (tested on tiny-smoke).
    gradient_checkpointing: bool = False
    #: Also log every step's metrics through Accelerate's trackers (``metrics.jsonl`` is
    #: always written): ``none``, ``tensorboard`` (event files in ``RUN/train/<model>/
    #: tracking/``) or ``wandb``.
    report_to: str = "none"
    vllm: VLLMSpec = field(default_factory=VLLMSpec)

    def __post_init__(self) -> None:
        for name in ("checkpoint_every", "keep_checkpoints"):
            if getattr(self, name) < 1:
                raise ConfigError(f"infra.{name} must be >= 1, got {getattr(self, name)}")
        if self.verifier_workers < 0:
            raise ConfigError(f"infra.verifier_workers must be >= 0, got {self.verifier_workers}")
        if self.report_to not in TRACKERS:
            raise ConfigError(
                f"infra.report_to must be one of {', '.join(TRACKERS)}, got {self.report_to!r}"
            )


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
    infra: InfraSpec = field(default_factory=InfraSpec)
    model: str = ""
    train_data: str = ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def identity_json(self) -> dict[str, Any]:
        """Every field that can change the results: the config without ``infra``."""
        return {k: v for k, v in self.to_json().items() if k != "infra"}

    def sha256(self) -> str:
        return sha256_json(self.identity_json())


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
            raise ConfigError(f"--set {item!r}: expected FIELD=VALUE, e.g. --set rl.lr=1e-5")
        out[key.strip()] = parse_value(value.strip())
    return out


def load_overrides(path: Path) -> dict[str, Any]:
    """Dotted overrides from a YAML (``.yaml``/``.yml``) or TOML (``.toml``) file.

    Nested tables are flattened: ``rl: {lr: 1e-5}`` is ``{"rl.lr": 1e-5}``.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path}: not valid TOML ({e})") from None
    elif path.suffix in (".yaml", ".yml"):
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not valid YAML ({e})") from None
    else:
        raise ConfigError(f"{path}: config files must end in .yaml, .yml or .toml")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of fields")
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


#: Fields that left ``rl`` for ``infra``: an override of the old name says the new one.
MOVED_FIELDS = {f"rl.{f.name}": f"infra.{f.name}" for f in dataclasses.fields(InfraSpec)}


def apply_overrides(config: Any, overrides: dict[str, Any]) -> Any:
    """A copy of dataclass ``config`` with dotted fields replaced (types checked)."""
    for dotted, value in overrides.items():
        if dotted in MOVED_FIELDS:
            raise ConfigError(
                f"{dotted} is now {MOVED_FIELDS[dotted]} (it does not change results, so it "
                f"is not part of the run's identity); use --set {MOVED_FIELDS[dotted]}={value}"
            )
        config = _replace_path(config, dotted.split("."), value, dotted)
    return config


def _replace_path(obj: Any, path: list[str], value: Any, dotted: str) -> Any:
    head, rest = path[0], path[1:]
    if isinstance(obj, dict):  # method_args: keys are checked against the rule later
        if rest:
            raise ConfigError(f"{dotted}: {head!r} takes a value, not sub-fields")
        return {**obj, head: value}
    fields = {f.name: f for f in dataclasses.fields(obj)}
    if head not in fields:
        raise ConfigError(
            f"unknown config field {dotted!r}; valid here: {', '.join(sorted(fields))}"
        )
    current = getattr(obj, head)
    if dataclasses.is_dataclass(current) or isinstance(current, dict):
        if not rest:
            raise ConfigError(
                f"{dotted} is a group of fields; set one of them, e.g. {dotted}.<name>"
            )
        new = _replace_path(current, rest, value, dotted)
    else:
        if rest:
            raise ConfigError(f"{dotted}: {head!r} has no sub-fields")
        new = _coerce(value, typing.get_type_hints(type(obj))[head], dotted)
    try:
        return dataclasses.replace(obj, **{head: new})
    except ConfigError as e:
        raise ConfigError(f"{dotted}={value!r}: {e}") from None


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
    raise ConfigError(f"{dotted}: expected {names}, got {value!r}")
