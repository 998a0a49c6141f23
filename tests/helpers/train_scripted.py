"""Train tiny-smoke with a scripted verifier (every other response correct), so that every
step has a learning signal. Run by tests in a subprocess: under `accelerate launch`, and
killed with SIGKILL then resumed.

Usage: train_scripted.py RUN_DIR METHOD [--resume] [--dump-masks] [--dump-sharding] [FIELD=VALUE ...]

``--dump-masks`` writes ``selected-rank<r>.jsonl`` into the run's folder: per step, the
selected token positions ``[row, t]`` with rows numbered over all processes (a process's
rows follow those of the processes before it, as its prompts do), so the masks of a
1-process and a 2-process run can be compared position by position.

``--dump-sharding`` writes ``sharding-rank<r>.json`` into the run's folder after the last
step: whether the policy and the reference are FSDP2 modules, the class names of their
parameters, and how many parameter elements this process holds of how many in all.
"""

import json
import sys
from pathlib import Path

from ictrepro.config import parse_assignments
from ictrepro.presets import train_preset
from ictrepro.stages.train import train, train_dir
from ictrepro.train.grpo import GRPOTrainer
from ictrepro.verify import Verdict


class AlternatingVerifier:
    def grade_many(self, requests):
        return [Verdict.CORRECT if i % 2 == 0 else Verdict.WRONG for i in range(len(requests))]

    def close(self):
        pass


def record_selections(out: Path) -> None:
    """Wrap ``GRPOTrainer.select`` to append each step's selected positions to ``out``."""
    select = GRPOTrainer.select

    def recording(self, batch, advantages, stats, step, choice=None):
        mask = select(self, batch, advantages, stats, step, choice)
        first_row = self.accelerator.process_index * mask.shape[0]
        positions = [[first_row + b, t] for b, t in mask.nonzero().tolist()]
        path = out / f"selected-rank{self.accelerator.process_index}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(json.dumps({"step": step + 1, "selected": positions}) + "\n")
        return mask

    GRPOTrainer.select = recording


def read_selections(out: Path) -> dict[int, set[tuple[int, int]]]:
    """What ``--dump-masks`` wrote into ``out``: per step, the selected ``(row, t)`` of
    every process (rows numbered over processes)."""
    steps: dict[int, set[tuple[int, int]]] = {}
    for path in sorted(out.glob("selected-rank*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            steps.setdefault(record["step"], set()).update(map(tuple, record["selected"]))
    return steps


def record_sharding(out: Path) -> None:
    """Wrap ``GRPOTrainer.train`` to dump how the policy and reference are held."""
    import torch
    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.tensor import DTensor

    run = GRPOTrainer.train

    def held(model):
        params = list({id(p): p for p in model.parameters()}.values())
        local = [p.to_local() if isinstance(p, DTensor) else p for p in params]
        return {
            "fsdp": isinstance(model, FSDPModule),
            "param_types": sorted({type(p).__name__ for p in params}),
            "local_numel": sum(t.numel() for t in local),
            "numel": sum(p.numel() for p in params),
            "meta": any(t.device == torch.device("meta") for t in local),
        }

    def recording(self, start_step=0):
        history = run(self, start_step)
        path = out / f"sharding-rank{self.accelerator.process_index}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        info = {"policy": held(self.model), "reference": held(self.reference)}
        names = [name for name, _ in self.model.named_modules()]
        info["policy"]["hf_gradient_checkpointing"] = self.model.is_gradient_checkpointing
        info["policy"]["fsdp_checkpoint_wrapped"] = any("checkpoint_wrapped" in n for n in names)
        path.write_text(json.dumps(info))
        return history

    GRPOTrainer.train = recording


def main() -> None:
    run_dir, method, *assignments = sys.argv[1:]
    flags = {a for a in assignments if a.startswith("--")}
    assignments = [a for a in assignments if a not in flags]
    resume = "--resume" in flags
    if "--dump-masks" in flags:
        record_selections(train_dir(Path(run_dir), method, 0))
    if "--dump-sharding" in flags:
        record_sharding(train_dir(Path(run_dir), method, 0))
    config = train_preset(
        "tiny-smoke", method=method, seed=0, overrides=parse_assignments(assignments)
    )
    train(config, Path(run_dir), resume=resume, show_progress=False, verifier=AlternatingVerifier())


if __name__ == "__main__":
    main()
