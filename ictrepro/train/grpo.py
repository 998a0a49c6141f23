"""The GRPO loop of docs/method.md, in which the token mask is the only thing that differs.

One training step, on every rank (process):

1. **Prompts**: this rank's share of the step's prompts (whole groups stay on one rank,
   because the group JS needs every response of a group).
2. **Sample** ``G`` responses per prompt through the sampler interface.
3. **Reward** each response with the verifier: 1 if correct, else 0 (a grading timeout or
   an ungradable gold answer also gives 0, and both are counted in the metrics).
4. **Advantages** per group (``algos.losses.group_advantages``).
5. **Statistics** of the rollout (old) policy without gradient, in one fused pass from the
   hidden states: log-probs, entropy, Rényi-2, group JS (``algos.token_stats``), and the
   reference policy's log-probs for the KL term.
6. **Mask** from the method's selection rule (``algos.selection``).
7. **Update**: ``ppo_epochs x mini_batches`` optimiser steps of the clipped objective
   (``algos.losses.grpo_loss``), with gradient accumulation over micro-batches, gradient
   clipping, and a warm-up LR schedule.

A step where no group has a reward difference has no learning signal: the update (KL term
included) is skipped and logged as such. Randomness is derived from (seed, step), and the
data order from (seed, epoch), so a run resumed from a checkpoint continues exactly as an
uninterrupted run would (``accelerate``'s saved RNG states cover anything else).
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import gather_object
from torch import Tensor
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.utils import logging as hf_logging

from ictrepro.algos.losses import group_advantages, grpo_loss
from ictrepro.algos.selection import SelectionInputs, get_selection
from ictrepro.algos.token_stats import (
    TokenStats,
    head_dtype,
    sampled_logprobs,
    sampled_logprobs_from_hidden,
    token_stats,
    token_stats_from_hidden,
)
from ictrepro.config import TrainConfig
from ictrepro.data.prompts import gold_of, render_prompt, stop_strings
from ictrepro.data.records import Problem
from ictrepro.errors import ConfigError, SamplerWeightsError, TrainingDiverged, UserModuleError
from ictrepro.progress import progress_bar
from ictrepro.rollout.base import Completion, Sampler
from ictrepro.rollout.params import SamplingParams
from ictrepro.rollout.sampler import make_sampler
from ictrepro.rundir import TrainDir
from ictrepro.train import checkpoint
from ictrepro.train.batch import (
    PromptSchedule,
    RolloutBatch,
    StepTensors,
    batch_metrics,
    build_batch,
    concat_stats,
    derive_seed,
    group_chunks,
    lr_lambda,
    micro_batch_weights,
    split_probe,
)
from ictrepro.train.distributed import (
    head_forward,
    is_fsdp,
    param_checksum,
    prepare_reference,
    reshard,
)
from ictrepro.train.metrics import MetricsLog, MetricSums, selection_metrics
from ictrepro.train.worlds import world_of
from ictrepro.verify import GradeRequest, Verdict

#: Tokens a prompt may take in the vLLM engine's context (``infra.vllm.max_model_len=0``).
PROMPT_BUDGET = 1024


@torch.no_grad()
def rollout_statistics(
    model: PreTrainedModel,
    batch: RolloutBatch,
    *,
    temperature: float,
    with_js: bool,
    fused: bool = True,
) -> TokenStats:
    """Statistics of ``model`` at the response tokens (no gradient).

    ``fused=True`` runs the decoder and applies the LM head chunk by chunk inside
    ``token_stats_from_hidden``, so the full ``[B, R, V]`` logits never exist (it matters
    at V = 151,936). ``fused=False`` calls the model itself for the logits (the plain
    reference the tests compare with). An FSDP2-sharded model goes through
    ``sharded_statistics`` instead, fused inside the model's own call.
    """
    P, R = batch.prompt_width, batch.response_ids.shape[1]
    group_ids = batch.group_ids if with_js else None
    if not fused:
        return token_stats(
            response_logits(model, batch),
            batch.response_ids,
            batch.response_mask,
            group_ids,
            temperature=temperature,
        )
    head = bias_free_head(model, "the fused statistics")
    hidden = model.get_decoder()(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids,
    ).last_hidden_state
    # The hidden state at column c predicts the token at column c + 1. The head projects in
    # the dtype the update's does (bf16 under bf16 autocast): an out= matmul bypasses
    # autocast, and float32 logits here against bf16 ones there would make the PPO ratio of
    # an unchanged policy differ from 1.
    dtype = head_dtype(head.weight)
    hidden_BRD = hidden[:, P - 1 : P - 1 + R].to(dtype)
    return token_stats_from_hidden(
        hidden_BRD,
        head.weight.to(dtype),
        batch.response_ids,
        batch.response_mask,
        group_ids,
        temperature=temperature,
    )


@torch.no_grad()
def sharded_statistics(
    model: torch.nn.Module, batch: RolloutBatch, *, temperature: float, with_js: bool
) -> TokenStats:
    """``rollout_statistics`` of an FSDP2-sharded model, fused like the unsharded path.

    The statistics are computed from the final hidden states chunk by chunk
    (``token_stats_from_hidden``) as the LM head's forward inside the model's own call
    (``head_forward``), where the head's weight is gathered; no ``[B, R, V]`` logits exist.
    """
    R = batch.response_ids.shape[1]
    out: list[TokenStats] = []

    def stats(weight: Tensor, hidden: Tensor) -> Tensor:
        # The last R + 1 columns; the hidden state at column c predicts token c + 1.
        out.append(
            token_stats_from_hidden(
                hidden[:, :R].to(weight.dtype),
                weight,
                batch.response_ids,
                batch.response_mask,
                batch.group_ids if with_js else None,
                temperature=temperature,
            )
        )
        return hidden.new_empty(0)  # the model's "logits": nothing

    with head_forward(model, stats):
        _forward_last(model, batch)
    return out[0]


def response_logits(model: torch.nn.Module, batch: RolloutBatch) -> Tensor:
    """Logits ``[B, R, V]`` that predict the response tokens, from the model's own forward.

    Calls the (possibly DDP/FSDP-wrapped) model itself, so gradient synchronisation and
    parameter gathering work, and asks for the logits of the last ``R + 1`` columns only.
    """
    return _forward_last(model, batch).logits[:, : batch.response_ids.shape[1]]


def _forward_last(model: torch.nn.Module, batch: RolloutBatch) -> Any:
    """The model's own call on ``batch``, its head applied to the last ``R + 1`` columns
    only (the hidden state at column c predicts the token at column c + 1)."""
    return model(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids,
        logits_to_keep=batch.response_ids.shape[1] + 1,
        use_cache=False,
    )


def bias_free_head(model: torch.nn.Module, what: str) -> torch.nn.Module:
    """The model's LM head, which ``what`` (a path that applies it to hidden states itself)
    needs without a bias, as Qwen2 and Llama have it; a ``ConfigError`` otherwise."""
    head = _unwrapped(model).get_output_embeddings()
    if getattr(head, "bias", None) is not None:
        raise ConfigError(f"{what} assumes an LM head without bias (Qwen2, Llama)")
    return head


def policy_logprobs(
    model: torch.nn.Module, batch: RolloutBatch, *, temperature: float, chunked: bool = False
) -> Tensor:
    """Differentiable log pi_theta of the response tokens, ``[B, R]`` float32.

    ``chunked=False`` takes them from the model's logits (a float32 ``[B, R, V]``
    log-softmax lives until backward). ``chunked=True`` has the model's LM head apply
    itself in chunks that backward recomputes (``sampled_logprobs_from_hidden``), never
    building the logits. Both call the (possibly DDP/FSDP-wrapped) model itself, so
    gradient synchronisation and parameter gathering work.
    """
    if not chunked:
        return sampled_logprobs(
            response_logits(model, batch), batch.response_ids, temperature=temperature
        )
    R = batch.response_ids.shape[1]
    bias_free_head(model, "rl.chunked_logprobs")

    def logprobs(weight: Tensor, hidden: Tensor) -> Tensor:
        # The last R + 1 columns' final hidden states (after the final norm); the one at
        # column c predicts the token at column c + 1.
        return sampled_logprobs_from_hidden(
            hidden[:, :R].to(weight.dtype),
            weight,
            batch.response_ids,
            batch.response_mask,
            temperature=temperature,
        )

    # The model's own call, with its head computing the log-probs: under FSDP2 that is
    # where the head's weight is whole and its gradient synced (``head_forward``).
    with head_forward(model, logprobs):
        return _forward_last(model, batch).logits


def _unwrapped(model: torch.nn.Module) -> torch.nn.Module:
    """The model inside a DDP wrapper (whose parameters are the model's own)."""
    return getattr(model, "module", model)


#: The probe set's mean reward, after this step (on probe steps) and before step 1 (first
#: line only); null elsewhere.
PROBE_METRICS = ("probe_reward", "probe_reward_initial")


#: The update's metrics; present (null) on a step without an update too, so every line of
#: ``metrics.jsonl`` has the same keys.
UPDATE_METRICS = ("loss", "grad_norm", "kl", "clip_fraction")


def any_process(accelerator: Any, flag: bool) -> bool:
    """Whether ``flag`` holds on any process of ``accelerator`` (a sum over processes; the
    flag itself on one process)."""
    if accelerator.num_processes == 1:
        return flag
    device = accelerator.device
    total = accelerator.reduce(torch.tensor([float(flag)], device=device), "sum")
    return bool(total.item() > 0)


class GRPOTrainer:
    """Runs the steps of one (method, seed) run in ``out_dir``.

    Args:
        config: the run's config (method, its hyperparameters, the loop's ``rl`` spec).
        model_path: HF model directory (or hub id) of the initial policy and the reference.
        problems: the RL training problems.
        out_dir: where ``metrics.jsonl``, ``checkpoints/`` and ``final_model/`` go.
        accelerator: the ``Accelerator`` of this process.
        verifier: grades responses (``grade_many``); the caller owns and closes it.
        show_progress: draw the rich progress display (main process only).
        method_module: the user's file that registered the method, if any: an error raised
            by its rule is reported as that file's (``UserModuleError``).
    """

    def __init__(
        self,
        config: TrainConfig,
        model_path: str | Path,
        problems: list[Problem],
        out_dir: Path,
        accelerator: Accelerator,
        verifier: Any,
        *,
        show_progress: bool = True,
        method_module: Path | None = None,
    ) -> None:
        hf_logging.disable_progress_bar()  # per-file loading bars would break the display

        self.config, self.rl, self.infra = config, config.rl, config.infra
        self.rule = get_selection(config.method)
        self.method_module = method_module
        self.problems, self.probe_set = split_probe(problems, config.rl.probe_problems)
        self.out_dir = Path(out_dir)
        self.accelerator, self.verifier = accelerator, verifier
        self.show_progress = show_progress and accelerator.is_main_process
        world = accelerator.num_processes
        if self.rl.prompts_per_step % world:
            raise ConfigError(
                f"rl.prompts_per_step ({self.rl.prompts_per_step}) must be divisible by the "
                f"number of processes ({world}): each process takes whole groups"
            )
        if (self.rl.prompts_per_step // world) % self.rl.mini_batches:
            raise ConfigError(
                f"each process's {self.rl.prompts_per_step // world} prompts must split "
                f"evenly into rl.mini_batches ({self.rl.mini_batches})"
            )
        if is_fsdp(accelerator) and len(self.probe_set) % world:
            # Every forward of a sharded model is a collective: all processes must sample
            # as many probe prompts (the same number of generate calls).
            raise ConfigError(
                f"under FSDP rl.probe_problems ({len(self.probe_set)}) must be divisible by "
                f"the number of processes ({world})"
            )
        self.tokenizer: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(model_path)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        policy = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
        # FSDP's own activation checkpointing (fsdp_activation_checkpointing in the launch
        # config) already recomputes each decoder layer; HF's on top would recompute twice.
        fsdp_ac = is_fsdp(accelerator) and accelerator.state.fsdp_plugin.activation_checkpointing
        if self.infra.gradient_checkpointing and not fsdp_ac:
            # Older transformers 5 releases (vLLM's pin) have only the former name.
            enable = getattr(policy, "activation_checkpointing_enable", None)
            (enable or policy.gradient_checkpointing_enable)({"use_reentrant": False})
        self.reference = None
        if self.rl.kl_coef > 0:
            reference = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
            # Sharded like the policy under FSDP2 (with cpu-RAM-efficient loading, rank 0's
            # weights reach the other ranks here); on one device or DDP only moved.
            self.reference = prepare_reference(accelerator, reference)
        optimizer = torch.optim.AdamW(
            policy.parameters(), lr=self.rl.lr, weight_decay=self.rl.weight_decay
        )
        self.lr_factor = lr_lambda(self.rl.lr_warmup_steps, self.rl.steps, self.rl.lr_schedule)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, self.lr_factor)
        self.model, self.optimizer, self.scheduler = accelerator.prepare(
            policy, optimizer, scheduler
        )
        self.sampler: Sampler = make_sampler(
            self.rl.sampler,
            accelerator.unwrap_model(self.model),
            self.tokenizer,
            batch_size=self.rl.sample_batch_size,
            model_path=str(model_path),
            vllm_settings=self.infra.vllm,
            vllm_dtype=self.rl.vllm_dtype,
            max_model_len=min(
                PROMPT_BUDGET + self.rl.max_new_tokens, policy.config.max_position_embeddings
            ),
            pushes_weights=True,
        )
        self.schedule = PromptSchedule(len(self.problems), self.rl.prompts_per_step, config.seed)
        self.with_js = "js" in self.rule.needs or self.rl.log_js
        # The world's choice tokens for the rules, and its own metrics (train/worlds.py).
        self.world = world_of(problems, self.tokenizer)
        if "choice" in self.rule.needs and not self.world.marks_choice:
            raise ConfigError(
                f"method {config.method!r} needs the choice token of each response, which "
                "only the fork worlds mark (tiny-fork*, tiny-lock*); this run's prompts have none"
            )
        self.temperature = self.rl.temperature_for_stats
        self.checkpoint_dir = checkpoint.checkpoint_dir(self.out_dir)
        self.log = MetricsLog(TrainDir(self.out_dir).metrics, enabled=accelerator.is_main_process)
        # The same append-and-truncate log, one line per probe (not per step).
        self.probe_log = MetricsLog(
            TrainDir(self.out_dir).probe, enabled=accelerator.is_main_process
        )

    # ------------------------------------------------------------------ the loop

    def train(self, start_step: int = 0) -> list[dict[str, Any]]:
        """Run steps ``start_step .. rl.steps - 1``; returns the metrics of those steps."""
        self.log.truncate(start_step)
        self.probe_log.truncate(start_step)
        # A no-op unless the Accelerator was made with trackers (infra.report_to).
        self.accelerator.init_trackers(
            f"{self.config.method}-seed{self.config.seed}", config=_flat(self.config.to_json())
        )
        history = []
        with progress_bar(
            self._describe(None), total=self.rl.steps, enabled=self.show_progress
        ) as advance:
            advance(start_step)
            for step in range(start_step, self.rl.steps):
                metrics = self.step(step)
                self.log.append(metrics)
                self.accelerator.log(_numeric(metrics), step=step + 1)
                check_logprob_gap(metrics, self.rl.sampler)
                history.append(metrics)
                completed = step + 1
                if completed % self.infra.checkpoint_every == 0 or completed == self.rl.steps:
                    self.save_checkpoint(completed)
                advance(1, self._describe(metrics))
        # Not accelerator.end_training(): that also ends the process group, which saving
        # the final model still needs.
        for tracker in self.accelerator.trackers:
            tracker.finish()
        return history

    def step(self, step: int) -> dict[str, Any]:
        """One training step (0-based ``step``); returns its metrics (global over ranks)."""
        acc = self.accelerator
        # The policy before any update, once per run (step 0 is never resumed into).
        probe_initial = self.probe(0) if step == 0 and self.probe_set else MetricSums()
        t0 = time.perf_counter()
        problems, completions = self.sample(step)
        t1 = time.perf_counter()
        rewards, reward_sums = self.reward(problems, completions)
        batch = self.pack(problems, completions, rewards)
        advantages = group_advantages(
            batch.rewards, batch.group_ids, normalize_std=self.rl.adv_normalize_std
        )
        t2 = time.perf_counter()
        stats, ref_logprob = self.statistics(batch)
        # The engine reports log-probs at the sampling temperature after top-p: comparable
        # with the trainer's where those are its statistics' temperature and no top-p.
        comparable = self.temperature == self.rl.temperature and self.rl.top_p == 1.0
        gap = logprob_gap(completions, batch, stats.logprob) if comparable else MetricSums()
        seen = self.world.step(problems, completions, batch.response_mask)
        mask = self.select(batch, advantages, stats, step, seen.choice)
        world_sums = seen.metrics(stats, mask, batch.response_mask)
        t3 = time.perf_counter()

        # Skipped on every process alike: a step has a signal if any process's groups do.
        signal = acc.reduce(advantages.ne(0).any().float().reshape(1), "sum")
        skipped = float(signal.item()) == 0.0
        if skipped:
            update_sums = MetricSums.empty(UPDATE_METRICS)
        else:
            tensors = StepTensors(batch, advantages, stats.logprob, ref_logprob, mask)
            update_sums = self.update(tensors, step)
        with warnings.catch_warnings():
            # The LR follows the step count, also over steps without an update.
            warnings.filterwarnings("ignore", message=".*lr_scheduler.step.*optimizer.step")
            self.scheduler.step()
        t4 = time.perf_counter()
        completed = step + 1
        due = completed % self.rl.probe_every == 0 or completed == self.rl.steps
        probe = self.probe(completed) if due and self.probe_set else MetricSums()
        t5 = time.perf_counter()

        sums = MetricSums.merged(
            MetricSums.empty(PROBE_METRICS),
            probe_initial.renamed("probe_reward", "probe_reward_initial"),
            probe,
            reward_sums,
            selection_metrics(stats, mask, batch.response_mask),
            world_sums,
            update_sums,
            batch_metrics(batch),
            gap,
        )
        metrics = {"step": step + 1, **sums.reduce(acc)}
        if is_fsdp(acc):
            metrics["param_checksum"] = self._param_checksum()
        elif acc.num_processes > 1:
            metrics["param_checksum_spread"] = self._param_checksum_spread()
        metrics.update(
            lr=self.rl.lr * self.lr_factor(step),
            update_skipped=skipped,
            time_sample_s=t1 - t0,
            time_reward_s=t2 - t1,
            time_stats_s=t3 - t2,
            time_update_s=t4 - t3,
            time_probe_s=t5 - t4,
            time_step_s=t4 - t0,
        )
        return metrics

    def sample(self, step: int) -> tuple[list[Problem], list[list[Completion]]]:
        """This process's prompts of ``step`` and their ``G`` completions each."""
        rl = self.rl
        share = rl.prompts_per_step // self.accelerator.num_processes
        offset = self.accelerator.process_index * share
        problems = [self.problems[i] for i in self.schedule.indices(step)[offset : offset + share]]
        prompts = [render_prompt(p, self.tokenizer, style=rl.prompt_style) for p in problems]
        seed = derive_seed(self.config.seed, "sample", step)
        stop = stop_strings(self.tokenizer, style=rl.prompt_style)
        completions = self.sampler.sample(
            prompts, rl.sampling, seed=seed, index_offset=offset, stop=stop
        )
        return problems, completions

    def probe(self, after_step: int) -> MetricSums:
        """``probe_reward``: the mean reward of the current policy on the probe set.

        Always the same problems and the same sampling seed (from the run's seed), so two
        evaluations differ only by the policy. Each process samples a contiguous share.
        Each problem's rewards go to ``probe.jsonl`` (``after_step``: 0 before the first
        step), so the change from the first probe to the last can be paired per problem.
        """
        rl, acc = self.rl, self.accelerator
        share = math.ceil(len(self.probe_set) / acc.num_processes)
        offset = acc.process_index * share
        problems = self.probe_set[offset : offset + share]
        sums = MetricSums()
        if not problems:
            sums.add("probe_reward", 0.0, 0)
            return sums
        prompts = [render_prompt(p, self.tokenizer, style=rl.prompt_style) for p in problems]
        params = SamplingParams(rl.probe_samples, rl.temperature, rl.top_p, rl.max_new_tokens)
        completions = self.sampler.sample(
            prompts,
            params,
            seed=derive_seed(self.config.seed, "probe"),
            index_offset=offset,
            stop=stop_strings(self.tokenizer, style=rl.prompt_style),
        )
        rewards, _ = self.reward(problems, completions)
        sums.add("probe_reward", sum(rewards), len(rewards))
        n = params.n
        mine = [(p.id, rewards[i * n : (i + 1) * n]) for i, p in enumerate(problems)]
        # Every process's share, in problem order (each share is contiguous).
        every = gather_object(mine) if acc.num_processes > 1 else mine
        self.probe_log.append({"step": after_step, "rewards": dict(every)})
        return sums

    def reward(
        self, problems: list[Problem], completions: list[list[Completion]]
    ) -> tuple[list[float], MetricSums]:
        """1.0 for each correct response, else 0.0 (flattened, groups in order), and the
        reward metrics: mean reward, finished responses, grading timeouts and ungradables."""
        requests = [
            GradeRequest(c.text, *gold_of(p))
            for p, group in zip(problems, completions, strict=True)
            for c in group
        ]
        verdicts = self.verifier.grade_many(requests)
        rewards = [1.0 if v.is_correct else 0.0 for v in verdicts]
        n = len(verdicts)
        sums = MetricSums()
        sums.add("reward_mean", sum(rewards), n)
        sums.count("reward_timeouts", sum(v == Verdict.TIMEOUT for v in verdicts))
        sums.count("reward_ungradable", sum(v == Verdict.UNGRADABLE for v in verdicts))
        sums.add("response_finished", sum(c.finished for group in completions for c in group), n)
        return rewards, sums

    def pack(
        self, problems: list[Problem], completions: list[list[Completion]], rewards: list[float]
    ) -> RolloutBatch:
        """The prompts (tokenized again) and completions as one batch on this device."""
        prompts = [render_prompt(p, self.tokenizer, style=self.rl.prompt_style) for p in problems]
        prompt_ids = self.tokenizer(prompts, add_special_tokens=False)["input_ids"]
        pad = self.tokenizer.pad_token_id
        return build_batch(prompt_ids, completions, rewards, pad, self.accelerator.device)

    def statistics(self, batch: RolloutBatch) -> tuple[TokenStats, Tensor | None]:
        """Rollout-policy statistics and reference log-probs, in chunks of whole groups
        (``rl.micro_batch_size`` rows, rounded up to a group) so memory stays bounded."""
        acc = self.accelerator
        sharded = is_fsdp(acc)
        # Sharded models: the model's own call, where FSDP gathers the weights.
        policy = self.model if sharded else acc.unwrap_model(self.model)
        compute = sharded_statistics if sharded else rollout_statistics
        max_rows = self.rl.micro_batch_size or batch.response_ids.shape[0]
        parts, ref_parts = [], []
        self.model.eval()
        with acc.autocast():
            for rows in group_chunks(batch, max_rows):
                chunk = batch.rows(rows)
                kwargs = {"temperature": self.temperature}
                parts.append(compute(policy, chunk, with_js=self.with_js, **kwargs))
                if self.reference is not None:
                    ref = compute(self.reference, chunk, with_js=False, **kwargs)
                    ref_parts.append(ref.logprob)
        if sharded:
            for model in (self.model, self.reference):
                if model is not None:
                    reshard(model)
        R = batch.response_ids.shape[1]
        ref_logprob = (
            torch.cat([F.pad(t, (0, R - t.shape[1])) for t in ref_parts]) if ref_parts else None
        )
        return concat_stats(parts, R), ref_logprob

    def select(
        self,
        batch: RolloutBatch,
        advantages: Tensor,
        stats: TokenStats,
        step: int,
        choice: Tensor | None = None,
    ) -> Tensor:
        """The method's token mask, bool ``[B, R]``; ``choice``: the world's choice tokens."""
        seed = derive_seed(self.config.seed, "select", step, self.accelerator.process_index)
        inputs = SelectionInputs(
            response_mask=batch.response_mask,
            advantages=advantages,
            logprob=stats.logprob,
            entropy=stats.entropy,
            js=stats.js,
            choice=choice,
            step=step,
            generator=torch.Generator().manual_seed(seed),
        )
        if self.method_module is None:
            return self.rule(inputs, **self.config.method_args)
        try:
            return self.rule(inputs, **self.config.method_args)
        except Exception as e:
            # Only the user's rule runs in here, so the error is theirs to fix.
            raise UserModuleError(
                f"method {self.config.method!r} from {self.method_module} failed at step "
                f"{step + 1}: {type(e).__name__}: {e}"
            ) from e

    def update(self, tensors: StepTensors, step: int) -> MetricSums:
        """``ppo_epochs x mini_batches`` optimiser steps of the clipped objective, each
        accumulating the gradients of its micro-batches; then the sampler gets the weights.

        Returns the means of ``loss`` and ``grad_norm`` (per optimiser step), ``kl`` and
        ``clip_fraction`` (per selected token).
        """
        rl = self.rl
        B = tensors.batch.response_ids.shape[0]
        per_mini = B // rl.mini_batches
        sums = MetricSums()
        self.model.train()
        for _ in range(rl.ppo_epochs):
            for mini in range(0, B, per_mini):
                rows = slice(mini, mini + per_mini)
                micro_batches = micro_batch_weights(
                    tensors.mask, rows, rl.micro_batch_size or per_mini, rl.agg_mode
                )
                loss = 0.0
                for i, (micro, weight) in enumerate(micro_batches):
                    last = i == len(micro_batches) - 1
                    micro_loss, info = self._backward(tensors, micro, weight, sync=last)
                    loss += micro_loss * weight
                    n_selected = int(tensors.mask[micro].sum())
                    sums.add("kl", info["kl"] * n_selected, n_selected)
                    sums.add("clip_fraction", info["clip_fraction"] * n_selected, n_selected)
                sums.add("loss", loss, 1)
                sums.add("grad_norm", self._optimizer_step(loss, step), 1)
        self.sampler.update_weights(self.accelerator.unwrap_model(self.model))
        return sums

    def _backward(
        self, tensors: StepTensors, rows: slice, weight: float, *, sync: bool
    ) -> tuple[float, dict[str, float]]:
        """Add ``weight`` x the loss of ``rows`` to the gradients; returns the loss and its
        info. ``sync=False`` skips DDP's gradient all-reduce (not the last micro-batch).

        Under FSDP2 every micro-batch reduce-scatters: skipping it would keep a whole
        unsharded gradient per process across the micro-batches (+2 bytes a parameter in
        bf16, ~15 GB at 7B), where synced gradients stay sharded.
        """
        acc = self.accelerator
        skip = not sync and not is_fsdp(acc)
        no_sync = acc.no_sync(self.model) if skip else contextlib.nullcontext()
        with no_sync, acc.autocast():
            chunk = tensors.batch.rows(rows)
            logprob = policy_logprobs(
                self.model, chunk, temperature=self.temperature, chunked=self.rl.chunked_logprobs
            )
            cols = (rows, slice(0, logprob.shape[1]))  # the chunk's trimmed width
            ref = tensors.ref_logprob
            loss, info = grpo_loss(
                logprob,
                tensors.old_logprob[cols],
                tensors.advantages[rows],
                tensors.mask[cols],
                chunk.response_mask,
                ref_logprob_BT=None if ref is None else ref[cols],
                clip_low=self.rl.clip_low,
                clip_high=self.rl.clip_high,
                kl_coef=self.rl.kl_coef,
                kl_max=self.rl.kl_max,
                dual_clip=self.rl.dual_clip,
                agg_mode=self.rl.agg_mode,  # type: ignore[arg-type]
            )
            acc.backward(loss * weight)
        return float(loss.detach()), info

    def _optimizer_step(self, loss: float, step: int) -> float:
        """Clip the accumulated gradients and step; returns the gradient norm before
        clipping. A non-finite loss or norm stops the run (``TrainingDiverged``)."""
        grad_norm = float(
            self.accelerator.clip_grad_norm_(self.model.parameters(), self.rl.grad_clip)
        )
        # The loss is this process's own: decided on every process together, or the others
        # would step on into the next collective and wait for this one forever.
        if any_process(self.accelerator, not (math.isfinite(grad_norm) and math.isfinite(loss))):
            self.optimizer.zero_grad(set_to_none=True)
            raise TrainingDiverged(_diverged_message(step, loss, grad_norm, self.checkpoint_dir))
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return grad_norm

    # -------------------------------------------------------------- around the loop

    def _describe(self, m: dict[str, Any] | None) -> str:
        name = f"train {self.config.method} seed {self.config.seed}"
        if m is None:
            return name
        return (
            f"{name} · reward {m['reward_mean']:.2f} · H {m['entropy_mean']:.2f}"
            f" · selected {100 * m['selected_fraction']:.1f}%"
        )

    @torch.no_grad()
    def _param_checksum_spread(self) -> float:
        """Max - min over processes of a parameter checksum: 0 while DDP keeps the replicas
        in sync (every rank applies the same averaged gradient)."""
        checksum = param_checksum(self.accelerator.unwrap_model(self.model))
        gathered = self.accelerator.gather(checksum.to(self.accelerator.device)).cpu()
        return float(gathered.max() - gathered.min())

    @torch.no_grad()
    def _param_checksum(self) -> float:
        """FSDP: the whole model's parameter checksum, the sum of every process's shards'
        (there are no replicas to compare); equals the checksum of the saved weights."""
        local = param_checksum(self.model).to(self.accelerator.device)
        return float(self.accelerator.reduce(local, "sum").cpu())

    def save_checkpoint(self, completed_steps: int) -> Path:
        """Everything needed to continue after ``completed_steps`` (``train.checkpoint``)."""
        state = {
            # The data order is a function of the step; recorded for readers.
            "data_position": completed_steps * self.rl.prompts_per_step,
            "config_sha256": self.config.sha256(),
        }
        return checkpoint.save_checkpoint(
            self.accelerator,
            self.checkpoint_dir,
            completed_steps,
            state,
            keep=self.infra.keep_checkpoints,
        )

    def load_checkpoint(self, path: Path) -> int:
        """Restore a checkpoint; returns the number of steps it had completed."""
        completed = checkpoint.load_checkpoint(self.accelerator, path)
        self.sampler.update_weights(self.accelerator.unwrap_model(self.model))
        return completed

    def save_final_model(self, path: Path) -> None:
        checkpoint.save_final_model(self.accelerator, self.model, self.tokenizer, path)


def _numeric(metrics: dict[str, Any]) -> dict[str, float]:
    """The metrics a tracker can plot: numbers (a skipped update's nulls are left out)."""
    return {
        k: float(v)
        for k, v in metrics.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def _flat(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"rl": {"lr": 1e-6}}`` -> ``{"rl.lr": 1e-6}``; non-scalars as text (trackers' hparams)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            scalar = isinstance(value, (int, float, str, bool))
            out[f"{prefix}{key}"] = value if scalar else str(value)
    return out


#: Largest ``vllm_logprob_gap`` (nats per response token) that passes. The engine samples
#: in bf16 and the trainer computes its old log-probs under bf16 autocast over float32
#: weights, so a landed push leaves a gap of bf16 rounding (a logit's 2^-8 relative,
#: hundredths of a nat); an engine holding other weights (a push that went nowhere, a
#: wrong model, weights lost in sleep) samples tokens the trainer finds unlikely, nats
#: apart. 0.5 lies between. It cannot see a push missed after one step at lr 1e-6, whose
#: log-probs move less than the rounding: ``bench/gpu_check.sh`` trains at a larger lr.
VLLM_GAP_LIMIT = 0.5


def logprob_gap(
    completions: list[list[Completion]], batch: RolloutBatch, old_logprob_BR: Tensor
) -> MetricSums:
    """``vllm_logprob_gap``: the mean over response tokens of |the sampler's own log-prob
    - the trainer's old log-prob| (``old_logprob_BR``: ``[B, R]``); nothing when the
    sampler reports no log-probs (the HF backend samples from the trainer's model)."""
    flat = [c for group in completions for c in group]
    sums = MetricSums()
    if not flat or any(c.logprobs is None for c in flat):
        return sums
    host = torch.zeros(batch.response_ids.shape, dtype=torch.float32, device="cpu")
    for b, c in enumerate(flat):
        if c.logprobs:
            host[b, : len(c.logprobs)] = torch.tensor(c.logprobs, dtype=torch.float32, device="cpu")
    engine = host.to(old_logprob_BR.device)
    mask = batch.response_mask
    gap = torch.where(mask, (engine - old_logprob_BR.float()).abs(), 0.0)
    sums.add("vllm_logprob_gap", gap.sum(), mask.sum())
    return sums


def check_logprob_gap(metrics: dict[str, Any], sampler: str) -> None:
    """Stop with ``SamplerWeightsError`` when the step's ``vllm_logprob_gap`` says the
    engine does not sample from the trainer's weights."""
    gap = metrics.get("vllm_logprob_gap")
    if gap is None or gap <= VLLM_GAP_LIMIT:
        return
    raise SamplerWeightsError(
        f"step {metrics['step']}: the {sampler} engine's log-probs of its own samples differ "
        f"from the trainer's by {gap:.3g} nats a token (more than {VLLM_GAP_LIMIT}): it is "
        "not sampling from the trainer's weights. The weight push did not land (check the "
        "engine's log for reload errors), the engine was built from another model than "
        "the trainer's, or its weights were lost while it slept (infra.vllm.enable_sleep_mode)"
    )


def _diverged_message(step: int, loss: float, grad_norm: float, checkpoints: Path) -> str:
    return (
        f"step {step + 1}: the loss ({loss}) or the gradient norm ({grad_norm}) is not "
        f"finite; nothing of this step was saved, and the last good checkpoint is kept in "
        f"{checkpoints}. Resuming would repeat this step; lower rl.lr or rl.grad_clip and "
        "start over with --force (a run cannot resume under a changed rl config)"
    )
