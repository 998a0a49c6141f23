"""Run by tests/test_train_ddp.py under `accelerate launch`: train tiny-smoke with a
scripted verifier (every other response correct) so that every step has a learning signal.

Usage: ddp_train.py RUN_DIR METHOD [FIELD=VALUE ...]
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
    config = train_preset(
        "tiny-smoke", method=method, seed=0, overrides=parse_assignments(assignments)
    )
    train(config, Path(run_dir), show_progress=False, verifier=AlternatingVerifier())


if __name__ == "__main__":
    main()
