#!/usr/bin/env bash
# The first check on a GPU machine (run from the repository root, e.g. through the
# `device` tool): install the gpu extra (vLLM 0.32, CUDA), run the device tests on the GPU,
# then three tiny-smoke training steps with the vLLM sampler in bf16. Prints what it finds;
# writes logs to ${OUT:-gpu-check}/.
set -uo pipefail
out=${OUT:-gpu-check}
mkdir -p "$out"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt"
python -m venv /tmp/gpu-venv && . /tmp/gpu-venv/bin/activate
python -m pip install --quiet torch==2.13.0 2>&1 | tail -2
python -m pip install --quiet -e '.[dev,gpu]' 2>&1 | tail -2
python -c "import torch, vllm; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'vllm', vllm.__version__)" | tee "$out/versions.txt"
python -m pytest -q tests/test_device.py tests/test_losses.py tests/test_token_stats.py \
    tests/test_selection.py 2>&1 | tail -15 | tee "$out/device-tests.txt"
run=/tmp/gpu-run
python -m ictrepro.cli prepare --preset tiny-smoke --out "$run" --quiet
/usr/bin/time -v python -m ictrepro.cli train --method ict --preset tiny-smoke --run "$run" \
    --set rl.sampler=vllm --set rl.vllm_dtype=bfloat16 --set infra.vllm.gpu_memory_utilization=0.2 \
    --quiet > "$out/train.txt" 2>&1
echo "train exit code $?" | tee -a "$out/train.txt"
tail -20 "$out/train.txt"
cp "$run/train/ict-seed0/metrics.jsonl" "$out/" 2>/dev/null && cat "$out/metrics.jsonl" | head -3
