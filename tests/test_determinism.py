"""Pinned numerics: the environment the command line sets, what provenance records, and
that the settings reach the command line's process and the workers it spawns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ictrepro import determinism
from ictrepro.determinism import (
    DECISIVE,
    OPT_OUT,
    PINNED_ENV,
    differences,
    numerics_provenance,
    pin_environment,
)

ROOT = Path(__file__).resolve().parents[1]


def test_pin_environment_sets_every_setting_unless_opted_out():
    env = {"OMP_NUM_THREADS": "8", "HOME": "/x", "TORCHINDUCTOR_CACHE_DIR": "/c"}
    cache = {"TORCHINDUCTOR_CACHE_DIR": "/c/ictrepro-aten-avx2"}
    assert pin_environment(env) == {**PINNED_ENV, **cache}
    assert env == {**PINNED_ENV, "HOME": "/x", **cache}
    assert pin_environment(env) == {**PINNED_ENV, **cache}  # a spawned worker pins again
    unset: dict[str, str] = {}
    pin_environment(unset)
    default = Path(unset["TORCHINDUCTOR_CACHE_DIR"])
    assert default.name == "ictrepro-aten-avx2" and default.parent.name.startswith("torchinductor_")
    opted = {OPT_OUT: "1", "OMP_NUM_THREADS": "8"}
    assert pin_environment(opted) == {}
    assert opted == {OPT_OUT: "1", "OMP_NUM_THREADS": "8"}


def test_library_versions_are_read_from_torch_config():
    config = textwrap.dedent(
        """\
        - Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605 for Intel(R) 64
        - Intel(R) MKL-DNN v3.12.0 (Git Hash 80afa71)
        - OpenMP 201511 (a.k.a. OpenMP 4.5)
        """
    )
    assert determinism._library_versions(config) == {
        "blas": "MKL 2024.2-Product Build 20240605",
        "onednn": "v3.12.0",
        "openmp": "201511",
    }
    assert determinism._library_versions("BLAS_INFO=open, x")["blas"] == "open"
    assert determinism._library_versions("")["onednn"] == "none"


def test_numerics_provenance_names_what_decides_the_numbers():
    record = numerics_provenance()
    json.dumps(record)  # JSON-ready
    for field in (*DECISIVE, "cpu", "openmp", "interop_threads", "platform"):
        assert field in record, field
    assert set(record["versions"]) >= {"torch", "transformers", "accelerate", "math-verify"}
    assert record["env"].keys() == {*PINNED_ENV, OPT_OUT}
    if Path("/proc/cpuinfo").is_file():
        assert record["cpu"]["vendor"] and record["cpu"]["model"]


def test_differences_name_each_field():
    a = {"threads": 1, "versions": {"torch": "2.13.0"}, "cpu": {"model": "A"}}
    b = {"threads": 2, "versions": {"torch": "2.13.0"}, "cpu": {"model": "B"}}
    assert differences(a, b, ("threads", "versions")) == ["threads: 1 != 2"]
    assert differences(a, {}, ("threads",)) == ["threads: 1 != (not recorded)"]
    assert differences(a, b, ("cpu",)) == ["cpu: {'model': 'A'} != {'model': 'B'}"]


PROBE = """
import json, multiprocessing, sys
from ictrepro.cli import app

def probe(_=None):
    import torch
    return [torch.backends.cpu.get_cpu_capability(), torch.get_num_threads()]

if __name__ == "__main__":
    app(["methods"], standalone_mode=False)  # a command pins the environment first
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        worker = pool.apply(probe)
    print(json.dumps({"cli": probe(), "worker": worker}))
"""


@pytest.mark.skipif(
    "avx2" not in determinism.cpu_model()["flags"].split(), reason="this CPU has no AVX2"
)
def test_the_command_line_and_its_workers_run_pinned(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k not in (*PINNED_ENV, OPT_OUT)}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout.splitlines()[-1]) == {"cli": ["AVX2", 1], "worker": ["AVX2", 1]}
