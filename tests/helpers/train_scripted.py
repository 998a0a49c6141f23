"""Train tiny-smoke with a scripted verifier (every other response correct), so that every
step has a learning signal. Run by tests in a subprocess: under `accelerate launch`, and
killed with SIGKILL then resumed.

Usage: train_scripted.py RUN_DIR METHOD [--resume] [FIELD=VALUE ...]
"""

import sys
from pathlib import Path

from ictrepro.config import parse_assignments, train_preset
from ictrepro.stages.train import train
from ictrepro.verify import Verdict


class AlternatingVerifier:
    def grade_many(self, requests):
        return [Verdict.CORRECT if i % 2 == 0 else Verdict.WRONG for i in range(len(requests))]

    def close(self):
        pass


def main() -> None:
    run_dir, method, *assignments = sys.argv[1:]
    resume = "--resume" in assignments
    assignments = [a for a in assignments if a != "--resume"]
    config = train_preset(
        "tiny-smoke", method=method, seed=0, overrides=parse_assignments(assignments)
    )
    train(config, Path(run_dir), resume=resume, show_progress=False, verifier=AlternatingVerifier())


if __name__ == "__main__":
    main()
