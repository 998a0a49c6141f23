"""The verifier on SmolLM2-135M-Instruct's real responses to the real benchmarks.

``tests/data/smollm2_graded.jsonl`` holds responses sampled from the ``smollm2-135m`` base
model (``ictrepro eval`` of a prepared run, seed 0), each with the verdict the verifier gave
and a hand check (``hand``: what the response holds and why the verdict is right). They are
kept as regression rows: the verdicts must not change unless the hand check changes too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ictrepro.verify import Verdict
from ictrepro.verify.grade import grade

ROWS = [
    json.loads(line)
    for line in (Path(__file__).parent / "data" / "smollm2_graded.jsonl").read_text().splitlines()
]


@pytest.mark.parametrize("row", ROWS, ids=[f"{r['id']}-{r['verdict']}" for r in ROWS])
def test_real_responses_keep_their_hand_checked_verdict(row):
    assert row["hand"]  # every row was read by hand
    assert grade(row["response"], row["gold"], kind=row["kind"]) is Verdict(row["verdict"])


def test_the_rows_cover_each_verdict_seen():
    assert {r["verdict"] for r in ROWS} >= {"wrong", "no_answer"}
