"""Whether training moved the policy: each run's probe reward before and after, paired by
problem (``probe.jsonl``, written where ``rl.probe_problems`` > 0).

The probe samples the same held-out problems with the same sampling seed before the first
step and after later steps (``GRPOTrainer.probe``), so the change from the first probe to
the last is the policy's alone; its interval is :func:`paired_difference`'s with one seed
(problems as the only source of spread besides sampling noise).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ictrepro.evaluate.paired import PairedDifference, paired_difference
from ictrepro.io import read_jsonl
from ictrepro.rundir import RunDir, TrainDir


@dataclass(frozen=True)
class ProbeChange:
    """One training run's probe: mean reward at ``first_step`` (0: before training) and at
    ``last_step``, and last minus first paired by problem (None with fewer than 2)."""

    run: str
    method: str
    first_step: int
    last_step: int
    first: float
    last: float
    n_problems: int
    diff: PairedDifference | None


def probe_changes(run_dir: Path | str, methods: set[str] | None = None) -> list[ProbeChange]:
    """The probe change of every training run of ``run_dir`` with two probes or more."""
    out = []
    for model, folder in RunDir(Path(run_dir)).training_runs().items():
        path = TrainDir(folder).probe
        if (methods is not None and model.method not in methods) or not path.is_file():
            continue
        probes = sorted(read_jsonl(path), key=lambda r: r["step"])
        if len(probes) < 2:
            continue
        first, last = probes[0], probes[-1]
        ids = [pid for pid in first["rewards"] if pid in last["rewards"]]
        before = np.array([np.mean(first["rewards"][pid]) for pid in ids])
        after = np.array([np.mean(last["rewards"][pid]) for pid in ids])
        diff = paired_difference([after[None, :]], [before[None, :]]) if len(ids) > 1 else None
        out.append(
            ProbeChange(
                run=model.name,
                method=model.method,
                first_step=first["step"],
                last_step=last["step"],
                first=float(before.mean()) if ids else float("nan"),
                last=float(after.mean()) if ids else float("nan"),
                n_problems=len(ids),
                diff=diff,
            )
        )
    return out
