"""How ``ictrepro reproduce`` runs a paper preset on the machine it finds: the launch plan.

The paper trained with bf16 mixed precision, vLLM sampling and every GPU of a node. Each
training run of a ``paper-*`` preset is therefore its own ``accelerate launch`` across
the machine's GPUs (one process per GPU; DDP when a whole copy of the training state
fits one GPU, else FSDP2), with ``--mixed_precision bf16`` and ``rl.sampler=vllm``; the
evaluation is one ``ictrepro eval --backend vllm`` process that builds one engine per
model and shuts it down before the next. Separate processes also give every run the
whole GPU memory back when it ends.

A machine without an accelerator refuses a paper preset (weeks of float32 CPU time),
unless the user forces the CPU: then the runs are those of the tiny presets (in-process,
float32, HF ``generate``). ``--dry-run`` prints the plan (``LaunchPlan.describe``).
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ictrepro.errors import IctreproError
from ictrepro.memory import SHAPES, MemoryEstimate, estimate
from ictrepro.presets import get_preset, preset_names, train_preset


class NoAcceleratorError(IctreproError, RuntimeError):
    """A paper-scale preset on a machine without a GPU, and the CPU not forced."""


@dataclass(frozen=True)
class Machine:
    """The accelerators a launch can use: ``kind`` ``"cuda"`` (or another torch
    accelerator) with ``count`` devices of ``memory_gb`` each, or ``"cpu"`` and 0."""

    kind: str
    count: int
    memory_gb: float = 0.0
    name: str = ""

    @classmethod
    def detect(cls) -> Machine:
        # torch inside: the command line imports this module to answer at once (`--help`).
        import torch

        accelerator = torch.accelerator.current_accelerator()
        if accelerator is None or torch.accelerator.device_count() == 0:
            return cls("cpu", 0)
        kind = accelerator.type
        count = torch.accelerator.device_count()
        if kind == "cuda":
            props = torch.cuda.get_device_properties(0)
            return cls(kind, count, props.total_memory / 1e9, props.name)
        return cls(kind, count)


def is_paper_scale(preset: str) -> bool:
    """Whether ``preset`` is one the paper ran on GPUs (``paper-*``)."""
    return preset.startswith("paper-")


@dataclass(frozen=True)
class LaunchPlan:
    """How each training run and the evaluation of a reproduction are started."""

    preset: str
    machine: Machine
    #: ``in-process`` (the tiny presets, and a forced CPU), ``single``, ``ddp`` or ``fsdp2``.
    strategy: str
    processes: int
    mixed_precision: str
    sampler: str
    eval_backend: str
    #: ``--set`` overrides of every training run (the sampler).
    overrides: dict[str, Any] = field(default_factory=dict)
    memory: MemoryEstimate | None = None

    @property
    def launched(self) -> bool:
        """Whether runs are separate ``accelerate launch`` processes."""
        return self.strategy != "in-process"

    def accelerate_args(self) -> list[str]:
        """``accelerate launch`` options: processes, precision and the sharding."""
        args = ["--num_processes", str(self.processes), "--mixed_precision", self.mixed_precision]
        args += ["--num_machines", "1", "--dynamo_backend", "no"]
        if self.strategy == "ddp":
            args.append("--multi_gpu")
        elif self.strategy == "fsdp2":
            # As configs/accelerate/fsdp-8gpu.yaml, for this machine's GPU count.
            args += [
                "--use_fsdp",
                "--fsdp_version",
                "2",
                "--fsdp_auto_wrap_policy",
                "TRANSFORMER_BASED_WRAP",
                "--fsdp_reshard_after_forward",
                "true",
                "--fsdp_state_dict_type",
                "SHARDED_STATE_DICT",
                "--fsdp_cpu_ram_efficient_loading",
                "true",
                # No --fsdp_activation_checkpointing: the preset's own
                # infra.gradient_checkpointing already recomputes, and both would twice.
            ]
        return args

    def train_command(
        self, method: str, seed: int, run_dir: Path, method_module: Path | None = None
    ) -> list[str]:
        """The command line of one training run (resuming an interrupted one)."""
        sets = [f"{k}={v}" for k, v in self.overrides.items()]
        module = [] if method_module is None else ["--method-module", str(method_module)]
        return [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            *self.accelerate_args(),
            "-m",
            "ictrepro.cli",
            "train",
            "--method",
            method,
            "--preset",
            self.preset,
            "--seed",
            str(seed),
            "--run",
            str(run_dir),
            "--resume",
            "--quiet",
            *module,
            *(x for s in sets for x in ("--set", s)),
        ]

    def eval_command(self, run_dir: Path) -> list[str]:
        """The evaluation of every model, one vLLM engine at a time."""
        return [
            sys.executable,
            "-m",
            "ictrepro.cli",
            "eval",
            "--run",
            str(run_dir),
            "--backend",
            self.eval_backend,
        ]

    def describe(self, run_dir: Path, example: tuple[str, int] = ("grpo", 0)) -> list[str]:
        """The plan in words: machine, processes, precision, sampler, memory per GPU, and
        the commands (one training run's as the example)."""
        m = self.machine
        where = f"{m.count} x {m.kind}" + (f" ({m.name}, {m.memory_gb:.0f} GB)" if m.name else "")
        if not self.launched:
            return [
                f"launch: in-process on {'the CPU' if m.kind == 'cpu' else where}, "
                f"precision {self.mixed_precision}, sampler {self.sampler}, "
                f"eval backend {self.eval_backend}"
            ]
        lines = [
            f"launch: each training run is `accelerate launch` on {where}: "
            f"{self.processes} process(es), {self.strategy}, mixed precision "
            f"{self.mixed_precision}, sampler {self.sampler}; eval backend "
            f"{self.eval_backend}, one engine at a time",
            "  train: " + shlex.join(self.train_command(*example, run_dir)),
            "  eval:  " + shlex.join(self.eval_command(run_dir)),
        ]
        if self.memory is None:
            lines.append("  memory per GPU: no estimate (model shape unknown)")
        else:
            lines.append(
                f"  memory per GPU (estimate, ictrepro.memory; {self.memory.model}, "
                f"{self.strategy} over {self.processes}):"
            )
            lines += ["    " + line for line in self.memory.lines()]
        return lines


def cpu_presets() -> list[str]:
    """The presets sized for a CPU: every preset but the paper-scale ones."""
    return [name for name in preset_names() if not is_paper_scale(name)]


def plan_launch(
    preset: str,
    model: str | None = None,
    *,
    machine: Machine | None = None,
    force_cpu: bool = False,
) -> LaunchPlan:
    """The launch plan of ``preset`` (whose base model is ``model``) on ``machine``
    (detected unless given). Raises ``NoAcceleratorError`` for a paper preset on a
    machine without a GPU unless ``force_cpu``."""
    machine = machine or Machine.detect()
    if not is_paper_scale(preset) or force_cpu:
        gpu = machine.kind != "cpu" and not force_cpu
        kind = machine if gpu else Machine("cpu", 0)
        return LaunchPlan(preset, kind, "in-process", 1, "no", "hf", "hf")
    if machine.kind == "cpu":
        raise NoAcceleratorError(
            f"preset {preset!r} is paper scale (bf16 on GPUs, vLLM sampling) and torch sees "
            "no GPU on this machine. Run it on a GPU machine, or pass --force-cpu to run it "
            "here in float32 with HF generate in one process (each run samples "
            f"{_responses(preset):,} responses). The CPU-sized presets: {', '.join(cpu_presets())}."
        )
    config = train_preset(preset, method="grpo")
    spec = get_preset(preset)
    model = model or getattr(spec.prepare, "model", None)
    shape = SHAPES.get(model or "")
    count = machine.count
    strategy, memory = ("single" if count == 1 else "ddp"), None
    if shape is not None and machine.memory_gb:

        def memory_of(strategy: str) -> MemoryEstimate:
            return estimate(
                shape,
                config.rl,
                config.infra,
                strategy=strategy,
                processes=count,
                gpu_gb=machine.memory_gb,
            )

        memory = memory_of(strategy)
        if not memory.fits and count > 1:
            strategy, memory = "fsdp2", memory_of("fsdp2")
    overrides = {"rl.sampler": "vllm"}
    return LaunchPlan(preset, machine, strategy, count, "bf16", "vllm", "vllm", overrides, memory)


def _responses(preset: str) -> int:
    """Responses one training run of ``preset`` samples."""
    rl = train_preset(preset, method="grpo").rl
    return rl.steps * rl.prompts_per_step * rl.group_size
