"""The GRPO loop on the `tiny-smoke` world: updates, masks, determinism, resume, bad input."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from rich.console import Console
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer
from typer.testing import CliRunner

from ictrepro.algos.losses import grpo_loss
from ictrepro.algos.token_stats import TokenStats
from ictrepro.cli import app
from ictrepro.config import RLSpec, apply_overrides, load_overrides, parse_assignments
from ictrepro.errors import ConfigError, TrainingDiverged, UserModuleError
from ictrepro.presets import prepare_preset, train_preset
from ictrepro.rollout.base import Completion
from ictrepro.rundir import RunDirConflict, load_record
from ictrepro.stages.prepare import prepare
from ictrepro.stages.train import train, train_dir
from ictrepro.train import grpo as grpo_module
from ictrepro.train.batch import (
    PromptSchedule,
    build_batch,
    concat_stats,
    group_chunks,
    micro_batch_weights,
)
from ictrepro.train.checkpoint import list_checkpoints
from ictrepro.train.grpo import policy_logprobs, rollout_statistics
from ictrepro.train.metrics import MetricSums, selection_metrics
from ictrepro.verify import Verdict

METHODS = ("grpo", "entropy", "stapo", "ict", "random")
TIME_KEYS = (
    "time_sample_s",
    "time_reward_s",
    "time_stats_s",
    "time_update_s",
    "time_probe_s",
    "time_step_s",
)


class ScriptedVerifier:
    """Grades by position: ``verdict(i)`` for the i-th response of every call."""

    def __init__(self, verdict=lambda i: Verdict.CORRECT if i % 2 == 0 else Verdict.WRONG):
        self.verdict, self.calls = verdict, 0

    def grade_many(self, requests):
        self.calls += 1
        return [self.verdict(i) for i in range(len(requests))]

    def close(self):
        pass


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("train") / "base"
    prepare(prepare_preset("tiny-smoke", seed=0), run_dir, show_progress=False)
    return run_dir


@pytest.fixture
def run_dir(prepared, tmp_path):
    """A private copy of the prepared run (training writes into it)."""
    target = tmp_path / "run"
    shutil.copytree(prepared, target)
    return target


def smoke(method="grpo", seed=0, **overrides):
    return train_preset("tiny-smoke", method=method, seed=seed, overrides=overrides or None)


def without_times(metrics):
    return [{k: v for k, v in m.items() if k not in TIME_KEYS} for m in metrics]


def weights(model_dir):
    return load_file(str(model_dir / "model.safetensors"))


# ------------------------------------------------------------------ the loop


@pytest.mark.parametrize("method", METHODS)
def test_each_method_trains_and_changes_parameters(run_dir, method):
    result = train(smoke(method), run_dir, show_progress=False, verifier=ScriptedVerifier())
    out = train_dir(run_dir, method, 0)
    assert result.out_dir == out and not result.skipped
    assert [m["step"] for m in result.metrics] == [1, 2, 3]
    before, after = weights(run_dir / "base_model"), weights(out / "final_model")
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    for m in result.metrics:
        assert m["update_skipped"] is False
        assert m["reward_mean"] == pytest.approx(0.5)  # every other response is correct
        assert 0 < m["selected_fraction"] <= 1
        assert math.isfinite(m["grad_norm"]) and m["grad_norm"] > 0
        assert m["entropy_mean"] >= 0 and m["renyi2_mean"] <= m["entropy_mean"] + 1e-6
    record = load_record(out, "train")
    assert record["status"] == "done" and record["config"]["method"] == method
    assert (out / "metrics.jsonl").read_text().count("\n") == 3
    # The final model reloads with plain transformers.
    AutoModelForCausalLM.from_pretrained(out / "final_model")
    AutoTokenizer.from_pretrained(out / "final_model")


def test_ict_mask_is_dense_during_warmup_then_sparse(run_dir):
    result = train(
        smoke("ict", **{"method_args.warmup_steps": 1, "method_args.rho": 0.25}),
        run_dir,
        show_progress=False,
        verifier=ScriptedVerifier(),
    )
    fractions = [m["selected_fraction"] for m in result.metrics]
    assert fractions[0] == 1.0
    assert all(0.25 <= f < 0.6 for f in fractions[1:])  # ceil(0.25 |o|) of short responses


def test_same_seed_gives_the_same_metrics(run_dir, tmp_path):
    first = train(smoke("ict"), run_dir, show_progress=False, verifier=ScriptedVerifier())
    second = train(
        smoke("ict"), run_dir, force=True, show_progress=False, verifier=ScriptedVerifier()
    )
    assert without_times(first.metrics) == without_times(second.metrics)
    other_seed = train(
        smoke("ict", seed=1), run_dir, show_progress=False, verifier=ScriptedVerifier()
    )
    assert without_times(other_seed.metrics) != without_times(first.metrics)


def interrupt_at_third_step(config, run_dir, monkeypatch, verifier):
    """Start ``config``'s run over and interrupt it in its third step (after step 2's
    checkpoint), as a Ctrl-C would; the real training step is restored afterwards."""
    original_step = grpo_module.GRPOTrainer.step

    def crash_at_third_step(self, step):
        if step == 2:
            raise KeyboardInterrupt("simulated interruption")
        return original_step(self, step)

    with monkeypatch.context() as patch:
        patch.setattr(grpo_module.GRPOTrainer, "step", crash_at_third_step)
        with pytest.raises(KeyboardInterrupt):
            train(config, run_dir, force=True, show_progress=False, verifier=verifier)


def test_interrupted_run_resumes_to_the_same_result(run_dir, monkeypatch):
    reference = train(smoke("ict"), run_dir, show_progress=False, verifier=ScriptedVerifier())
    reference_weights = weights(reference.out_dir / "final_model")

    interrupt_at_third_step(smoke("ict"), run_dir, monkeypatch, ScriptedVerifier())
    out = reference.out_dir
    assert load_record(out, "train")["status"] == "running"
    assert [p.name for p in list_checkpoints(out / "checkpoints")] == ["step-000002"]
    state = json.loads((out / "checkpoints" / "step-000002" / "trainer_state.json").read_text())
    assert state["completed_steps"] == 2 and state["data_position"] == 4  # 2 prompts a step

    with pytest.raises(RunDirConflict, match="--resume"):
        train(smoke("ict"), run_dir, show_progress=False, verifier=ScriptedVerifier())
    resumed = train(
        smoke("ict"), run_dir, resume=True, show_progress=False, verifier=ScriptedVerifier()
    )
    assert [m["step"] for m in resumed.metrics] == [1, 2, 3]
    assert without_times(resumed.metrics) == without_times(reference.metrics)
    resumed_weights = weights(out / "final_model")
    assert all(torch.equal(reference_weights[k], resumed_weights[k]) for k in reference_weights)


class TextVerifier(ScriptedVerifier):
    """Grades by the response's text (even length: correct), so a reward depends on what
    was sampled, as the real verifier's does."""

    def grade_many(self, requests):
        self.calls += 1
        return [Verdict.CORRECT if len(r.response) % 2 == 0 else Verdict.WRONG for r in requests]


PROBE = {"rl.probe_problems": 8, "rl.probe_samples": 2, "rl.probe_every": 2}


def test_probe_reward_is_logged_on_its_steps_and_identical_after_resume(run_dir, monkeypatch):
    reference = train(smoke("grpo", **PROBE), run_dir, show_progress=False, verifier=TextVerifier())
    m = reference.metrics
    # Before step 1, after step 2 (probe_every) and after the last step (3).
    assert [x["probe_reward_initial"] is not None for x in m] == [True, False, False]
    assert [x["probe_reward"] is not None for x in m] == [False, True, True]
    assert all(0.0 <= x["probe_reward"] <= 1.0 for x in m if x["probe_reward"] is not None)

    interrupt_at_third_step(smoke("grpo", **PROBE), run_dir, monkeypatch, TextVerifier())
    resumed = train(
        smoke("grpo", **PROBE), run_dir, resume=True, show_progress=False, verifier=TextVerifier()
    )
    assert without_times(resumed.metrics) == without_times(m)


def test_probe_set_is_held_out_of_training():
    problems = [f"p{i}" for i in range(10)]
    train_set, probe = grpo_module.split_probe(problems, 3)
    assert train_set == problems[:7] and probe == problems[7:]
    assert grpo_module.split_probe(problems, 0) == (problems, [])
    with pytest.raises(ConfigError, match=r"rl\.probe_problems"):
        grpo_module.split_probe(problems, 10)


def test_finished_run_is_skipped_and_other_configs_are_refused(run_dir):
    train(smoke("grpo"), run_dir, show_progress=False, verifier=ScriptedVerifier())
    again = train(smoke("grpo"), run_dir, show_progress=False, verifier=ScriptedVerifier())
    assert again.skipped and len(again.metrics) == 3
    with pytest.raises(RunDirConflict) as err:
        train(
            smoke("grpo", **{"rl.lr": 5e-4}),
            run_dir,
            resume=True,
            show_progress=False,
            verifier=ScriptedVerifier(),
        )
    assert "rl.lr: 0.001 (recorded) != 0.0005 (now)" in str(err.value)


def test_no_signal_step_skips_the_update(run_dir):
    result = train(
        smoke("grpo"),
        run_dir,
        show_progress=False,
        verifier=ScriptedVerifier(lambda i: Verdict.WRONG),
    )
    for m in result.metrics:
        assert m["update_skipped"] is True
        assert m["reward_mean"] == 0.0 and m["groups_without_signal_fraction"] == 1.0
        assert m["grad_norm"] is None and m["kl"] is None
        assert math.isfinite(m["entropy_mean"])
    before, after = weights(run_dir / "base_model"), weights(result.out_dir / "final_model")
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_grading_timeouts_give_zero_reward_and_are_counted(run_dir):
    verdicts = [Verdict.CORRECT, Verdict.TIMEOUT, Verdict.WRONG, Verdict.UNGRADABLE]
    result = train(
        smoke("grpo"),
        run_dir,
        show_progress=False,
        verifier=ScriptedVerifier(lambda i: verdicts[i % 4]),
    )
    for m in result.metrics:
        assert m["reward_timeouts"] == 2 and m["reward_ungradable"] == 2  # 8 responses a step
        assert m["reward_mean"] == pytest.approx(0.25)


def test_non_finite_loss_stops_and_keeps_the_last_checkpoint(run_dir, monkeypatch):
    original = grpo_module.grpo_loss
    calls = {"n": 0}

    def poisoned(*args, **kwargs):
        loss, info = original(*args, **kwargs)
        calls["n"] += 1
        return (loss * math.nan if calls["n"] >= 2 else loss), info

    monkeypatch.setattr(grpo_module, "grpo_loss", poisoned)
    with pytest.raises(TrainingDiverged, match=r"step 2.*not finite.*last good checkpoint"):
        train(smoke("grpo"), run_dir, show_progress=False, verifier=ScriptedVerifier())
    out = train_dir(run_dir, "grpo", 0)
    assert [p.name for p in list_checkpoints(out / "checkpoints")] == ["step-000001"]
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [1]


def test_resume_and_rerun_accept_changed_infra_fields_and_name_them(run_dir, monkeypatch):
    reference = train(smoke("ict"), run_dir, show_progress=False, verifier=ScriptedVerifier())
    reference_weights = weights(reference.out_dir / "final_model")
    interrupt_at_third_step(smoke("ict"), run_dir, monkeypatch, ScriptedVerifier())

    infra = {"infra.keep_checkpoints": 3, "infra.verifier_workers": 2}
    console = Console(record=True, width=300)
    resumed = train(
        smoke("ict", **infra), run_dir, resume=True, console=console, verifier=ScriptedVerifier()
    )
    said = console.export_text()
    assert "infra.keep_checkpoints: 1 (recorded) != 3 (now)" in said
    assert "infra.verifier_workers: 0 (recorded) != 2 (now)" in said
    assert without_times(resumed.metrics) == without_times(reference.metrics)
    resumed_weights = weights(resumed.out_dir / "final_model")
    assert all(torch.equal(reference_weights[k], resumed_weights[k]) for k in reference_weights)
    # The new value is used: the step-3 checkpoint joined the kept step-2 one.
    kept = [p.name for p in list_checkpoints(resumed.out_dir / "checkpoints")]
    assert kept == ["step-000002", "step-000003"]
    record = load_record(resumed.out_dir, "train")
    assert record["config"]["infra"]["keep_checkpoints"] == 3
    assert len(record["info"]["infra_changed"]) == 2

    console = Console(record=True, width=300)
    again = train(
        smoke("ict", **{"infra.checkpoint_every": 2}),
        run_dir,
        console=console,
        verifier=ScriptedVerifier(),
    )
    assert again.skipped
    assert "infra.checkpoint_every: 1 (recorded) != 2 (now)" in console.export_text()


def test_only_result_changing_fields_are_hashed():
    base = smoke("grpo")
    assert smoke("grpo", **{"infra.keep_checkpoints": 5}).sha256() == base.sha256()
    assert smoke("grpo", **{"infra.checkpoint_every": 2}).sha256() == base.sha256()
    assert smoke("grpo", **{"infra.verifier_workers": 4}).sha256() == base.sha256()
    for changed in ("rl.sample_batch_size", "rl.micro_batch_size"):
        assert smoke("grpo", **{changed: 2}).sha256() != base.sha256(), changed
    assert "infra" not in base.identity_json() and "infra" in base.to_json()


def test_an_infra_field_under_its_old_rl_name_says_the_new_one():
    with pytest.raises(ConfigError, match=r"rl.keep_checkpoints is now infra.keep_checkpoints"):
        smoke("grpo", **{"rl.keep_checkpoints": 3})


RAISING_RULE = """
from ictrepro.algos.selection import register_selection


@register_selection("raises_{tag}")
def raises(inputs):
    return inputs.response_mask[None]  # a 3-D mask: the rule's bug
"""


def test_an_error_of_the_users_rule_names_its_module(run_dir, tmp_path, restore_registry):
    from ictrepro.algos.selection import load_method_module

    path = tmp_path / "my_rule.py"
    path.write_text(RAISING_RULE.replace("{tag}", "a"))
    load_method_module(path)
    config = train_preset("tiny-smoke", method="raises_a")
    with pytest.raises(UserModuleError, match=r"raises_a.*my_rule.py.*step 1") as err:
        train(config, run_dir, show_progress=False, verifier=ScriptedVerifier(), method_module=path)
    assert err.value.__cause__ is not None  # the rule's own traceback is kept


def test_a_bug_outside_the_users_rule_is_not_blamed_on_it(
    run_dir, tmp_path, monkeypatch, restore_registry
):
    from ictrepro.algos.selection import load_method_module

    path = tmp_path / "fine_rule.py"
    path.write_text(
        "from ictrepro.algos.selection import register_selection\n\n\n"
        '@register_selection("fine_b")\n'
        "def fine(inputs):\n"
        "    return inputs.response_mask.clone()\n"
    )
    load_method_module(path)

    def buggy_loss(*args, **kwargs):
        raise TypeError("a bug in the loss")

    monkeypatch.setattr(grpo_module, "grpo_loss", buggy_loss)
    with pytest.raises(TypeError, match="a bug in the loss"):
        train(
            train_preset("tiny-smoke", method="fine_b"),
            run_dir,
            show_progress=False,
            verifier=ScriptedVerifier(),
            method_module=path,
        )


# ---------------------------------------------------------- pieces of a step


def test_zero_gradient_outside_a_hand_set_mask(prepared):
    model = AutoModelForCausalLM.from_pretrained(prepared / "base_model")
    tok = AutoTokenizer.from_pretrained(prepared / "base_model")
    prompts = [tok("short prompt")["input_ids"], tok("a somewhat longer prompt here")["input_ids"]]
    g = torch.Generator().manual_seed(0)
    completions = [
        [Completion("", tuple(torch.randint(5, 100, (n,), generator=g).tolist()), True) for n in ns]
        for ns in ((5, 3), (4, 6))
    ]
    batch = build_batch(
        prompts, completions, [1.0, 0.0, 0.0, 1.0], tok.pad_token_id, torch.device("cpu")
    )
    assert batch.response_mask.sum(dim=1).tolist() == [5, 3, 4, 6]
    mask = torch.zeros_like(batch.response_mask)
    mask[0, 1] = mask[1, 2] = mask[3, 0] = mask[3, 5] = True
    old = rollout_statistics(model, batch, temperature=1.0, with_js=False).logprob
    logprob = policy_logprobs(model, batch, temperature=1.0)
    logprob.retain_grad()
    advantages = torch.tensor([1.0, -1.0, -0.5, 0.5])
    loss, _ = grpo_loss(
        logprob, old - 0.1, advantages, mask, batch.response_mask, ref_logprob_BT=old, kl_coef=0.1
    )
    loss.backward()
    assert torch.all(logprob.grad[~mask] == 0)
    assert torch.all(logprob.grad[mask] != 0)
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_recomputed_logprobs_match_generate(prepared):
    """Left padding and position ids in the training forward equal those of generate()."""
    model = AutoModelForCausalLM.from_pretrained(prepared / "base_model").eval()
    tok = AutoTokenizer.from_pretrained(prepared / "base_model")
    texts = ["x", "a much longer prompt than the first"]
    enc = tok(
        texts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False
    )
    torch.manual_seed(0)
    out = model.generate(
        **enc,
        do_sample=True,
        top_k=0,
        max_new_tokens=6,
        num_return_sequences=2,
        output_logits=True,
        return_dict_in_generate=True,
        pad_token_id=tok.pad_token_id,
        eos_token_id=None,
    )
    new = out.sequences[:, enc["input_ids"].shape[1] :]
    gen_logprob = torch.stack(
        [
            torch.log_softmax(step.float(), -1).gather(-1, new[:, i : i + 1]).squeeze(-1)
            for i, step in enumerate(out.logits)
        ],
        dim=1,
    )
    prompt_ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    completions = [
        [Completion("", tuple(new[2 * i + j].tolist()), False) for j in range(2)] for i in range(2)
    ]
    batch = build_batch(prompt_ids, completions, [0.0] * 4, tok.pad_token_id, torch.device("cpu"))
    stats = rollout_statistics(model, batch, temperature=1.0, with_js=True)
    torch.testing.assert_close(stats.logprob, gen_logprob, atol=1e-4, rtol=1e-4)
    with torch.no_grad():
        torch.testing.assert_close(
            policy_logprobs(model, batch, temperature=1.0), gen_logprob, atol=1e-4, rtol=1e-4
        )


def test_chunked_logprobs_equal_the_logits_path_with_their_gradients(prepared):
    """rl.chunked_logprobs: the same log-probs and parameter gradients as the full logits."""
    model = AutoModelForCausalLM.from_pretrained(prepared / "base_model")
    tok = AutoTokenizer.from_pretrained(prepared / "base_model")
    prompt_ids = [tok(t, add_special_tokens=False)["input_ids"] for t in ("x", "a longer prompt")]
    gen = torch.Generator().manual_seed(0)
    completions = [
        [
            Completion("", tuple(torch.randint(3, 60, (n,), generator=gen).tolist()), False)
            for n in (5, 2)
        ]
        for _ in range(2)
    ]
    batch = build_batch(prompt_ids, completions, [0.0] * 4, tok.pad_token_id, torch.device("cpu"))
    weights_BR = torch.randn(batch.response_ids.shape, generator=gen)

    def logprobs_and_grads(chunked):
        model.zero_grad()
        logprob = policy_logprobs(model, batch, temperature=0.7, chunked=chunked)
        (torch.where(batch.response_mask, logprob, 0.0) * weights_BR).sum().backward()
        return logprob, {n: p.grad.clone() for n, p in model.named_parameters()}

    full, full_grads = logprobs_and_grads(False)
    chunked, chunked_grads = logprobs_and_grads(True)
    mask = batch.response_mask
    torch.testing.assert_close(chunked[mask], full[mask], atol=1e-5, rtol=1e-5)
    for name, grad in full_grads.items():
        torch.testing.assert_close(chunked_grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)


#: Under bf16 autocast, how far an unchanged policy's update log-probs may be from the
#: statistics pass's: both apply the same bf16 logits, so what is left is float32 rounding
#: of the log-softmax (measured: at most a few 1e-7). A float32 head in one pass and a bf16
#: one in the other is off by about 2^-8 of a logit (over 1e-3 here).
BF16_RATIO_BOUND = 1e-5


@pytest.mark.parametrize("chunked", [False, True])
def test_unchanged_policy_has_ratio_one_and_no_kl_under_bf16_autocast(prepared, chunked):
    model = AutoModelForCausalLM.from_pretrained(prepared / "base_model")
    reference = AutoModelForCausalLM.from_pretrained(prepared / "base_model").eval()
    tok = AutoTokenizer.from_pretrained(prepared / "base_model")
    gen = torch.Generator().manual_seed(3)
    prompts = [tok(t)["input_ids"] for t in ("one", "two words", "three short words")]
    completions = [
        [
            Completion("", tuple(torch.randint(5, 300, (n,), generator=gen).tolist()), True)
            for n in ns
        ]
        for ns in ((7, 3), (9, 1), (4, 8))
    ]
    batch = build_batch(prompts, completions, [1.0, 0.0] * 3, tok.pad_token_id, torch.device("cpu"))
    mask = batch.response_mask
    with torch.autocast("cpu", dtype=torch.bfloat16):
        old = rollout_statistics(model.eval(), batch, temperature=0.7, with_js=True).logprob
        ref = rollout_statistics(reference, batch, temperature=0.7, with_js=False).logprob
        new = policy_logprobs(model.train(), batch, temperature=0.7, chunked=chunked)
        _, info = grpo_loss(
            new, old, torch.tensor([1.0, -1.0] * 3), mask, mask, ref_logprob_BT=ref, kl_coef=0.1
        )
    ratio = torch.exp(new - old)[mask]
    assert (ratio - 1).abs().max() <= BF16_RATIO_BOUND
    assert info["clip_fraction"] == 0.0
    assert 0.0 <= info["kl"] <= BF16_RATIO_BOUND**2
    # What the statistics pass gave before (a float32 head) is outside the bound.
    fp32_old = rollout_statistics(model.eval(), batch, temperature=0.7, with_js=False).logprob
    assert (new.detach() - fp32_old)[mask].abs().max() > 100 * BF16_RATIO_BOUND


@pytest.mark.parametrize("chunked", [False, True])
def test_bf16_training_starts_with_no_kl(run_dir, chunked):
    """A whole step under ``mixed_precision="bf16"`` (in a subprocess: accelerate's state
    is per process): the first update sees an unchanged policy, so its KL and clipped
    objective are 0 up to float32 rounding."""
    helper = Path(__file__).parent / "helpers" / "train_scripted.py"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ACCELERATE_MIXED_PRECISION": "bf16"}
    args = ["rl.steps=1", f"rl.chunked_logprobs={str(chunked).lower()}"]
    subprocess.run([sys.executable, str(helper), str(run_dir), "grpo", *args], check=True, env=env)
    out = train_dir(run_dir, "grpo", 0)
    assert load_record(out, "train")["info"]["mixed_precision"] == "bf16"
    first = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert first["kl"] <= BF16_RATIO_BOUND**2 and abs(first["loss"]) <= BF16_RATIO_BOUND
    assert first["clip_fraction"] == 0.0


def test_gradient_checkpointing_leaves_results_unchanged(run_dir):
    plain = train(smoke("grpo"), run_dir, show_progress=False, verifier=ScriptedVerifier())
    plain_weights = weights(plain.out_dir / "final_model")
    checkpointed = train(
        smoke("grpo", **{"infra.gradient_checkpointing": True}),
        run_dir,
        force=True,
        show_progress=False,
        verifier=ScriptedVerifier(),
    )
    assert without_times(checkpointed.metrics) == without_times(plain.metrics)
    after = weights(checkpointed.out_dir / "final_model")
    assert all(torch.equal(plain_weights[k], after[k]) for k in plain_weights)


def test_chunked_and_unfused_statistics_equal_the_fused_whole_batch(prepared):
    model = AutoModelForCausalLM.from_pretrained(prepared / "base_model").eval()
    tok = AutoTokenizer.from_pretrained(prepared / "base_model")
    g = torch.Generator().manual_seed(1)
    prompts = [tok(t)["input_ids"] for t in ("one", "two words", "three short words")]
    completions = [
        [Completion("", tuple(torch.randint(5, 200, (n,), generator=g).tolist()), True) for n in ns]
        for ns in ((3, 5), (6, 1), (4, 4))
    ]
    batch = build_batch(prompts, completions, [0.0] * 6, tok.pad_token_id, torch.device("cpu"))
    chunks = group_chunks(batch, 3)
    assert chunks == [slice(0, 2), slice(2, 4), slice(4, 6)]
    assert group_chunks(batch, 4) == [slice(0, 4), slice(4, 6)]
    assert group_chunks(batch, 1) == chunks  # never splits a group
    whole = rollout_statistics(model, batch, temperature=0.7, with_js=True)
    parts = concat_stats(
        [rollout_statistics(model, batch.rows(c), temperature=0.7, with_js=True) for c in chunks],
        width=batch.response_ids.shape[1],
    )
    assert batch.rows(slice(0, 2)).response_ids.shape[1] == 5  # trimmed to its longest response
    assert batch.rows(slice(2, 4)).input_ids.shape[1] < batch.input_ids.shape[1]
    unfused = rollout_statistics(model, batch, temperature=0.7, with_js=True, fused=False)
    for other in (parts, unfused):
        for name in ("logprob", "entropy", "renyi2", "js"):
            torch.testing.assert_close(
                getattr(other, name), getattr(whole, name), atol=2e-5, rtol=1e-5
            )


def test_build_batch_layout():
    completions = [
        [Completion("", (7, 8), True), Completion("", (9,), False)],
        [Completion("", (), False), Completion("", (4, 5, 6), True)],
    ]
    batch = build_batch([[1, 2, 3], [1]], completions, [1, 0, 0, 1], 0, torch.device("cpu"))
    assert batch.prompt_width == 3
    assert batch.input_ids.tolist() == [
        [1, 2, 3, 7, 8, 0],
        [1, 2, 3, 9, 0, 0],
        [0, 0, 1, 0, 0, 0],
        [0, 0, 1, 4, 5, 6],
    ]
    assert batch.position_ids[3].tolist() == [0, 0, 0, 1, 2, 3]
    assert batch.group_ids.tolist() == [0, 0, 1, 1]
    assert batch.response_mask.tolist() == [
        [True, True, False],
        [True, False, False],
        [False, False, False],
        [True, True, True],
    ]


def test_prompt_schedule_is_a_function_of_the_step():
    schedule = PromptSchedule(10, 4, seed=3)
    steps = [schedule.indices(s) for s in range(5)]  # 20 positions = two epochs
    first_epoch = steps[0] + steps[1] + steps[2][:2]
    assert sorted(first_epoch) == list(range(10))
    assert PromptSchedule(10, 4, seed=3).indices(3) == steps[3]  # no replay needed
    assert PromptSchedule(10, 4, seed=4).indices(0) != steps[0]


def test_selection_metrics_by_hand():
    resp = torch.tensor([[True, True, True, False], [True, True, False, False]])
    mask = torch.tensor([[True, False, False, False], [False, True, False, False]])
    logprob = torch.log(torch.tensor([[0.5, 0.9, 0.2, 1.0], [0.1, 0.4, 1.0, 1.0]]))
    entropy = torch.tensor([[1.0, 0.1, 0.5, 0.0], [2.0, 0.3, 0.0, 0.0]])
    renyi2 = torch.tensor([[0.5, 0.05, 0.2, 0.0], [1.5, 0.2, 0.0, 0.0]])
    js = torch.tensor([[0.3, 0.1, 0.0, 0.0], [0.2, 0.4, 0.0, 0.0]])
    m = selection_metrics(TokenStats(logprob, entropy, renyi2, js), mask, resp).reduce()
    assert m["selected_fraction"] == pytest.approx(2 / 5)
    assert m["entropy_mean"] == pytest.approx((1.0 + 0.1 + 0.5 + 2.0 + 0.3) / 5)
    assert m["js_selected_mean"] == pytest.approx((0.3 + 0.4) / 2)
    assert m["js_unselected_mean"] == pytest.approx((0.1 + 0.0 + 0.2) / 3)
    assert m["prob_selected_mean"] == pytest.approx((0.5 + 0.4) / 2)
    # High entropy = top ceil(0.2 * 5) = 1 token of the batch: (1, 0) with H = 2.0, unselected.
    assert m["selected_high_entropy_fraction"] == 0.0
    # purity beta = exp(-H2): selected (0,0): 0.5 > e^-0.5 = 0.61? no; (1,1): 0.4 > e^-0.2? no.
    assert m["selected_prob_above_purity_fraction"] == 0.0
    # all tokens: (0,1) 0.9 > e^-0.05 = 0.95? no; (0,2) 0.2 > 0.82? no; (1,0) 0.1 > 0.22? no.
    assert m["prob_above_purity_fraction"] == 0.0


def test_micro_batch_weights_add_up_to_the_mini_batch_aggregate():
    mask = torch.tensor([[1, 1, 0], [0, 0, 0], [1, 0, 0], [1, 1, 1], [0, 1, 0]], dtype=torch.bool)
    rows = slice(1, 5)  # 4 rows holding 5 selected tokens
    token = micro_batch_weights(mask, rows, 3, "token-mean")
    assert token == [(slice(1, 4), 4 / 5), (slice(4, 5), 1 / 5)]
    rows_mean = micro_batch_weights(mask, rows, 3, "seq-mean-token-mean")
    assert rows_mean == [(slice(1, 4), 3 / 4), (slice(4, 5), 1 / 4)]
    assert micro_batch_weights(mask, slice(0, 2), 2, "token-mean") == [(slice(0, 2), 1.0)]
    # No selected token: weight 0, not a division by zero.
    assert micro_batch_weights(mask, slice(1, 2), 1, "token-mean") == [(slice(1, 2), 0.0)]


def test_metric_sums_empty_and_merged():
    a, b = MetricSums(), MetricSums()
    a.add("x", 1.0, 1)
    b.add("x", 2.0, 1)
    b.count("n", 4)
    merged = MetricSums.merged(a, b, MetricSums.empty(("loss",)))
    assert merged.reduce() == {"x": 1.5, "loss": None, "n": 4.0}
    assert a.reduce() == {"x": 1.0}  # the parts are left as they were


def test_metric_sums_means_and_totals():
    sums = MetricSums()
    sums.add("a", 3.0, 2)
    sums.add("a", 1.0, 2)
    sums.add("empty", 0.0, 0)
    sums.count("n", 2)
    sums.count("n", 3)
    assert sums.reduce() == {"a": 1.0, "empty": None, "n": 5.0}


# ------------------------------------------------------------------ configs


def test_overrides_from_the_command_line_and_files(tmp_path):
    assert parse_assignments(["rl.lr=1e-5", "rl.log_js=false", "method_args.scope=batch"]) == {
        "rl.lr": 1e-5,
        "rl.log_js": False,
        "method_args.scope": "batch",
    }
    yaml_file = tmp_path / "o.yaml"
    yaml_file.write_text("rl:\n  lr: 3.0e-5\n  steps: 7\nmethod_args:\n  rho: 0.3\n")
    toml_file = tmp_path / "o.toml"
    toml_file.write_text("[rl]\nlr = 3e-5\nsteps = 7\n[method_args]\nrho = 0.3\n")
    expected = {"rl.lr": 3e-5, "rl.steps": 7, "method_args.rho": 0.3}
    assert load_overrides(yaml_file) == expected == load_overrides(toml_file)
    config = train_preset("tiny", method="ict", overrides=expected)
    assert config.rl.lr == 3e-5 and config.rl.steps == 7 and config.method_args["rho"] == 0.3
    assert config.method_args["warmup_steps"] == 3  # the tiny preset's scaled warm-up
    assert apply_overrides(config, {"rl.steps": 9}).rl.steps == 9
    assert apply_overrides(config, {"rl.lr": 1}).rl.lr == 1.0  # ints widen to float


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"rl.lrr": 1}, "unknown config field 'rl.lrr'; valid here: .*lr"),
        ({"rl.steps": "ten"}, "rl.steps: expected int, got 'ten'"),
        ({"rl.steps": 0}, "rl.steps must be >= 1"),
        ({"rl": 1}, "rl is a group of fields"),
        ({"method_args.nope": 1}, "no hyperparameter.*nope.*valid: highest, rho"),
        ({"rl.group_size": 1}, "group_size must be >= 2"),
        ({"rl.prompts_per_step": 6, "rl.mini_batches": 4}, "divisible"),
        ({"rl.kl_max": 0}, "rl.kl_max must be > 0 or null"),
        ({"rl.dual_clip": 1.0}, "rl.dual_clip must be > 1 or null"),
    ],
)
def test_bad_overrides_name_the_field(overrides, message):
    with pytest.raises(ConfigError, match=message):
        train_preset("tiny", method="ict", overrides=overrides)


def test_paper_presets_carry_the_inferred_defaults():
    config = train_preset("paper-1.5b", method="ict")
    assert config.model == ""  # RUN/base_model, which prepare writes from Qwen/Qwen2.5-1.5B
    assert (config.rl.lr, config.rl.group_size, config.rl.max_new_tokens) == (1e-6, 5, 1024)
    assert (config.rl.kl_coef, config.rl.clip_low, config.rl.temperature) == (0.001, 0.2, 1.0)
    assert config.method_args == {
        "rho": 0.1,
        "scope": "sequence",
        "warmup_steps": 10,
        "highest": True,
    }
    assert RLSpec().agg_mode == "seq-mean-token-mean"


# ---------------------------------------------------------------------- CLI


def test_cli_unknown_method_lists_the_valid_ones(run_dir):
    result = CliRunner().invoke(app, ["train", "--method", "nope", "--run", str(run_dir)])
    assert result.exit_code == 2
    assert (
        "unknown token-selection method 'nope'; valid: entropy, grpo, grpo-lr4, ict, ict-nochoice, random, stapo"
        in " ".join(result.output.split())
    )


def test_cli_unprepared_run_dir_says_what_to_do(tmp_path):
    result = CliRunner().invoke(
        app, ["train", "--method", "grpo", "--preset", "tiny-smoke", "--run", str(tmp_path / "x")]
    )
    assert result.exit_code == 2
    assert "ictrepro prepare --preset tiny-smoke" in " ".join(result.output.split())


def test_cli_bad_set_is_a_clear_error(run_dir):
    result = CliRunner().invoke(
        app, ["train", "--method", "grpo", "--run", str(run_dir), "--set", "rl.lr"]
    )
    assert result.exit_code == 2 and "expected FIELD=VALUE" in " ".join(result.output.split())


def test_kill_9_then_resume_equals_an_uninterrupted_run(run_dir, tmp_path):
    """A real SIGKILL mid-run (not a Python exception), then --resume from the checkpoint."""
    helper = Path(__file__).parent / "helpers" / "train_scripted.py"
    args = ["rl.steps=15"]
    other = tmp_path / "uninterrupted"
    shutil.copytree(run_dir, other)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    subprocess.run([sys.executable, str(helper), str(other), "grpo", *args], check=True, env=env)

    proc = subprocess.Popen([sys.executable, str(helper), str(run_dir), "grpo", *args], env=env)
    checkpoints = train_dir(run_dir, "grpo", 0) / "checkpoints"
    deadline = time.monotonic() + 120
    while not (checkpoints / "step-000003").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    out = train_dir(run_dir, "grpo", 0)
    assert load_record(out, "train")["status"] == "running", "the run finished before the kill"
    subprocess.run(
        [sys.executable, str(helper), str(run_dir), "grpo", "--resume", *args], check=True, env=env
    )
    expected = (other / "train" / "grpo-seed0" / "metrics.jsonl").read_text().splitlines()
    got = (out / "metrics.jsonl").read_text().splitlines()
    assert without_times([json.loads(x) for x in got]) == without_times(
        [json.loads(x) for x in expected]
    )
    a, b = weights(other / "train" / "grpo-seed0" / "final_model"), weights(out / "final_model")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_tensorboard_tracker_logs_every_metric_of_every_step(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    result = train(
        smoke("ict", **{"infra.report_to": "tensorboard"}),
        run_dir,
        show_progress=False,
        verifier=ScriptedVerifier(),
    )
    folders = {p.parent for p in (result.out_dir / "tracking").rglob("events.out.tfevents.*")}
    # One folder holds the step scalars; the hparams (the run's config) sit in another.
    readers = [EventAccumulator(str(folder)).Reload() for folder in sorted(folders)]
    (scalars,) = [
        r for r in readers if r.Tags()["scalars"] and "reward_mean" in r.Tags()["scalars"]
    ]
    logged = set(scalars.Tags()["scalars"])
    for metrics in result.metrics:
        expected = {
            k: v
            for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        assert set(expected) <= logged
        for key, value in expected.items():
            (event,) = [e for e in scalars.Scalars(key) if e.step == metrics["step"]]
            assert event.value == pytest.approx(value, rel=1e-6, abs=1e-9)


def test_the_reference_model_is_prepared_like_the_policy(run_dir, monkeypatch):
    """Without FSDP the reference goes through ``prepare_model`` in evaluation mode (moved
    to the device, frozen); under FSDP2 it is sharded like the policy
    (tests/test_train_fsdp.py)."""
    from accelerate import Accelerator

    prepared = []
    original = Accelerator.prepare_model

    def record(self, model, device_placement=None, evaluation_mode=False):
        prepared.append((model, evaluation_mode))
        return original(self, model, device_placement, evaluation_mode)

    monkeypatch.setattr(Accelerator, "prepare_model", record)
    result = train(
        smoke("grpo", **{"rl.steps": 1}), run_dir, show_progress=False, verifier=ScriptedVerifier()
    )
    assert not result.skipped
    reference = [m for m, evaluation in prepared if evaluation]
    assert len(reference) == 1 and not any(p.requires_grad for p in reference[0].parameters())
    assert any(not evaluation for _, evaluation in prepared)  # the policy, for training


def test_a_non_finite_step_is_decided_on_every_process_together():
    """One process's non-finite loss stops every process, not only its own (the others
    would wait in the next collective forever)."""
    from types import SimpleNamespace

    from ictrepro.train.grpo import any_process

    def accelerator(others: list[float]):
        def reduce(t, op):
            assert op == "sum"
            return t + sum(others)

        return SimpleNamespace(num_processes=1 + len(others), device="cpu", reduce=reduce)

    assert any_process(accelerator([]), True) and not any_process(accelerator([]), False)
    assert any_process(accelerator([1.0]), False)  # another process saw it
    assert any_process(accelerator([0.0]), True)
    assert not any_process(accelerator([0.0, 0.0]), False)


def test_a_rule_that_needs_the_choice_is_refused_where_no_world_marks_one(run_dir):
    """The mechanism control reads each response's choice token; the tiny-smoke world's
    suites mark none, so training it there stops before any step, saying why."""
    result = CliRunner().invoke(
        app, ["train", "--method", "ict-nochoice", "--preset", "tiny-smoke", "--run", str(run_dir)]
    )
    assert result.exit_code == 2, result.output
    assert "needs the choice token of each response" in " ".join(result.output.split())


def test_the_world_of_the_problems_marks_the_fork():
    """``world_of``: a fork-world prompt set marks each response's fork as its choice; any
    other marks nothing and logs nothing of its own."""
    from types import SimpleNamespace

    from ictrepro.data.records import Problem
    from ictrepro.data.suites import generate_suite
    from ictrepro.models.tokenizer import train_tokenizer
    from ictrepro.stages.prepare import tokenizer_corpus
    from ictrepro.train.worlds import ForkWorld, World, world_of

    lock = generate_suite("tiny-lock-mix", seed=0, n_train=40, n_test=0)["train"]
    tokenizer = train_tokenizer(tokenizer_corpus(lock), vocab_size=600)
    plain = [Problem("p", "What is 1 + 1?", "2", meta={"family": "gsm8k"})]
    assert type(world_of(plain, tokenizer)) is World and not world_of(plain, tokenizer).marks_choice
    world = world_of(lock[:2], tokenizer)
    assert isinstance(world, ForkWorld) and world.marks_choice
    texts = [p.solution for p in lock[:2]]
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    completions = [[SimpleNamespace(token_ids=i, text=t)] for i, t in zip(ids, texts, strict=True)]
    T = max(map(len, ids))
    response = torch.tensor([[t < len(i) for t in range(T)] for i in ids])
    seen = world.step(lock[:2], completions, response)
    # The fork (the direction's word) is each response's second token.
    assert seen.choice.tolist() == [[t == 1 for t in range(T)]] * 2
    assert World().step(plain, [[]], response[:1]).choice is None
