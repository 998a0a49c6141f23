"""What decides a CPU run's numbers, and pinning it so that other x86-64 machines agree.

A float32 result depends on the order of its additions, and the order depends on the code
path: torch's own kernels are compiled for several instruction sets and chosen at run time
(``torch.backends.cpu.get_cpu_capability()``: AVX-512 on one machine, AVX2 on another); MKL
picks its matrix-multiply kernels by CPU model and vendor; oneDNN by instruction set; and
parallel reductions split their sums by the thread count. Two machines of different CPU
types therefore drift apart from the first matrix product on, and a sampled or trained
model amplifies the drift into different answers.

:data:`PINNED_ENV` fixes these choices for the project's processes: torch's kernels at
AVX2 (which every x86-64 CPU of the last decade has), MKL's conditional numerical
reproducibility branch ``AVX2``, oneDNN at AVX2, and one thread everywhere except where a
config names another count (``sft.threads``). ``torch.use_deterministic_algorithms`` is not
needed: it replaces kernels whose result depends on thread timing, and at a fixed thread
count no CPU kernel's does (provenance records the flag all the same).

MKL's ``AVX2`` branch pins the kernels on Intel CPUs; on AMD CPUs MKL keeps its own
dispatch, so an Intel and an AMD machine may differ in the last bits of every matrix
product. MKL's ``COMPATIBLE`` branch would be the same on both, but it cost 2.1x the CPU
time of training at the tiny model's size (measured, docs/regression.md, "The numerics
probe"), so the project does not use it: where the bits differ, ``check --rerun`` judges
statistically. ``ICTREPRO_UNPINNED=1`` leaves the environment alone: the numbers are then
the machine's own.

:func:`pin_environment` is called by the command line before torch runs anything, and
spawned workers inherit the environment.

:func:`numerics_provenance` records what actually took effect (the capability torch chose,
the library versions, threads, the CPU), so that two runs can say whether they should agree
bit for bit (:func:`differences`).
"""

from __future__ import annotations

import os
import platform
import re
import tempfile
from collections.abc import MutableMapping
from importlib import metadata
from pathlib import Path
from typing import Any

#: The environment of every process of the project (module docstring says why each).
PINNED_ENV: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_CBWR": "AVX2",
    "MKL_DYNAMIC": "FALSE",
    "MKL_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
}
#: torch.compile's (Inductor's) cache of compiled kernels (:func:`_pinned_cache_dir`).
CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
#: Set to 1 to run with the machine's own dispatch and thread counts.
OPT_OUT = "ICTREPRO_UNPINNED"
#: Packages whose versions change numbers (models, sampling, grading).
PACKAGES = ("torch", "transformers", "accelerate", "math-verify", "tokenizers", "numpy")
#: The provenance fields that must be equal for two runs to be expected bit-identical.
DECISIVE = ("torch_capability", "blas", "onednn", "threads", "env", "versions", "pinned")


def pin_environment(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Put :data:`PINNED_ENV` into ``environ`` (default ``os.environ``) unless the user
    opted out, and give compiled kernels a cache of their own (:func:`_pinned_cache_dir`);
    returns what was set. Must run before torch's first operation (the capability and
    MKL's branch are read once, at first use)."""
    environ = os.environ if environ is None else environ
    if environ.get(OPT_OUT) == "1":
        return {}
    environ.update(PINNED_ENV)
    cache = _pinned_cache_dir(environ)
    environ[CACHE_ENV] = cache
    return {**PINNED_ENV, CACHE_ENV: cache}


def _pinned_cache_dir(environ: MutableMapping[str, str]) -> str:
    """A folder for the pinned processes' compiled kernels, inside the user's
    ``TORCHINDUCTOR_CACHE_DIR`` of ``environ`` (default Inductor's own under the temp folder).

    Inductor's cache keys do not include ``ATEN_CPU_CAPABILITY``. On an AVX-512 machine,
    the kernel ``test_compiled_kernel_matches_reference`` compiles, cached by an unpinned
    process and loaded by one with ``ATEN_CPU_CAPABILITY=avx2``, corrupted memory ("double
    free or corruption", torch 2.13.0; a fresh cache passed). A pinned process therefore
    never shares a cache with an unpinned one (the library, the tests)."""
    leaf = f"ictrepro-aten-{PINNED_ENV['ATEN_CPU_CAPABILITY']}"
    base = environ.get(CACHE_ENV)
    if base is None:
        user = re.sub(r"[^A-Za-z0-9_-]", "_", environ.get("USER") or "user")
        base = os.path.join(tempfile.gettempdir(), f"torchinductor_{user}")
    return base if Path(base).name == leaf else os.path.join(base, leaf)


def cpu_model() -> dict[str, str]:
    """``{"vendor", "model", "flags", ...}`` of this CPU (``/proc/cpuinfo``: also family, model
    number and stepping; ``platform`` elsewhere); ``flags`` keeps only the vector
    extensions that choose code paths."""
    info = {"vendor": "", "model": platform.processor() or platform.machine(), "flags": ""}
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
        fields = {
            "vendor": "vendor_id",
            "model": "model name",
            "flags": "flags",
            # Virtual machines often show a generic name ("AMD EPYC"): the numbers tell
            # the generations apart.
            "family": "cpu family",
            "model_number": "model",
            "stepping": "stepping",
        }
        for key, field in fields.items():
            match = re.search(rf"^{field}\s*:\s*(.*)$", text, re.MULTILINE)
            if match:
                info[key] = match.group(1).strip()
    wanted = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile")
    info["flags"] = " ".join(f for f in info["flags"].split() if f in wanted)
    return info


def _library_versions(config: str) -> dict[str, str]:
    """MKL, oneDNN and OpenMP versions from ``torch.__config__.show()``."""
    found = {}
    for key, pattern in (
        ("blas", r"Math Kernel Library Version ([\d.]+-\w+ Build \d+)"),
        ("onednn", r"MKL-DNN (v[\d.]+)"),
        ("openmp", r"OpenMP (\d+)"),
    ):
        match = re.search(pattern, config)
        found[key] = match.group(1).strip() if match else "none"
    if found["blas"] != "none":
        found["blas"] = f"MKL {found['blas']}"
    else:
        match = re.search(r"BLAS_INFO=(\w+)", config)
        found["blas"] = match.group(1) if match else "none"
    return found


def package_versions() -> dict[str, str]:
    """Installed versions of :data:`PACKAGES` (``"missing"`` when not installed)."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "missing"
    return versions


def numerics_provenance() -> dict[str, Any]:
    """Everything that decides this process's numbers, as they took effect (JSON-ready)."""
    import torch  # here: pin_environment must run before torch is first imported

    libraries = _library_versions(torch.__config__.show())
    env_keys = sorted({*PINNED_ENV, OPT_OUT})
    return {
        "pinned": os.environ.get(OPT_OUT) != "1"
        and all(os.environ.get(k) == v for k, v in PINNED_ENV.items()),
        "cpu": cpu_model(),
        "torch_capability": torch.backends.cpu.get_cpu_capability(),
        "blas": libraries["blas"],
        "onednn": libraries["onednn"],
        "openmp": libraries["openmp"],
        "threads": torch.get_num_threads(),
        # Inter-op threads run independent operators side by side, never split one sum.
        "interop_threads": torch.get_num_interop_threads(),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "env": {k: os.environ.get(k) for k in env_keys},
        "versions": {"python": platform.python_version(), **package_versions()},
        "platform": platform.platform(),
    }


def differences(
    a: dict[str, Any], b: dict[str, Any], fields: tuple[str, ...] = DECISIVE
) -> list[str]:
    """The ``fields`` of two provenance records that differ, as ``"field: a != b"`` lines
    (a field missing on one side, as in records written before it existed, differs)."""
    lines = []
    for field in fields:
        if a.get(field, "(not recorded)") != b.get(field, "(not recorded)"):
            lines.append(
                f"{field}: {a.get(field, '(not recorded)')} != {b.get(field, '(not recorded)')}"
            )
    return lines
