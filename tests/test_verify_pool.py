"""The worker pool: same verdicts as in-process, in order; hung and dying workers are replaced."""

from __future__ import annotations

import os
import random
import threading
import time

import pytest

from ictrepro.verify import GradeRequest, Verdict, Verifier, count_verdicts, grade
from ictrepro.verify.pool import FLUSH_INTERVAL_S, MAX_CHUNK

# Generous enough that an ordinary grading never times out on a loaded 2-core CI machine
# (0.3 s did once, in a full run); the pathological input below still hits it.
TIMEOUT_S = 1.0  # outer deadline per request: 2 * 1.0 + 1 = 3 s

# How a hang is injected: through Verifier's ``grade_fn`` argument, with the module-level
# function below (spawned workers import it by name). Why this design:
# - a real pathological input (e.g. ``\boxed{9^{9^{9}}}``) is interrupted by the in-worker
#   SIGALRM timer, so it tests the inner limit (see test_pathological_input_is_a_timeout),
#   not the outer deadline; an input stuck in one long C call would depend on sympy's
#   internals and burn CPU and memory until killed;
# - a module-level hook in production code would need its own channel into spawned workers
#   and is a test-only branch there; a reserved request kind would be worse.
# ``grade_fn`` is plain dependency injection: production code runs ``grade``, unchanged.
HANG, CRASH, BUG, SLOW = "<hang>", "<crash>", "<bug>", "<slow>"


def grade_or_misbehave(response: str, gold: str, *, kind: str, timeout_s: float) -> Verdict:
    if response == HANG:
        # Stands for a grading stuck in a long C call: no timer is armed, so only the
        # pool's outer deadline can end it.
        time.sleep(3600)
    if response == CRASH:
        os._exit(3)  # as if killed for memory
    if response == BUG:
        raise ZeroDivisionError("a bug in grading")
    if response.startswith(SLOW):
        # Slow enough that a worker sends the results of one chunk in several messages.
        time.sleep(2 * FLUSH_INTERVAL_S / 3)
        response = response.removeprefix(SLOW)
    return grade(response, gold, kind=kind, timeout_s=timeout_s)


def mixed_requests(n: int, seed: int = 0) -> list[GradeRequest]:
    """Shuffled mix of math and choice requests covering every verdict but TIMEOUT."""
    rng = random.Random(seed)
    templates = [
        ("\\boxed{{{a}}}", "{a}", "math"),
        ("\\boxed{{{b}}}", "{a}", "math"),
        ("The answer is \\frac{{{a}}}{{2}}.", "\\frac{{{a2}}}{{4}}", "math"),
        ("#### {a}", "{a}", "math"),
        ("I am not sure.", "{a}", "math"),
        ("\\boxed{{{a}}}", "???", "math"),
        ("\\boxed{{({l})}}", "{l}", "choice"),
        ("The answer is {l}.", "{m}", "choice"),
        ("\\boxed{{{l}}}", "E", "choice"),
    ]
    requests = []
    for _ in range(n):
        response, gold, kind = rng.choice(templates)
        a = rng.randint(-50, 50)
        values = {"a": a, "b": a + rng.randint(1, 9), "a2": 2 * a, "l": rng.choice("ABCD")}
        values["m"] = rng.choice("ABCD")
        requests.append(GradeRequest(response.format(**values), gold.format(**values), kind))
    return requests


def in_process(requests: list[GradeRequest]) -> list[Verdict]:
    return [grade(r.response, r.gold, kind=r.kind, timeout_s=TIMEOUT_S) for r in requests]


@pytest.fixture(scope="module")
def requests() -> list[GradeRequest]:
    return mixed_requests(160)


@pytest.fixture(scope="module")
def expected(requests) -> list[Verdict]:
    return in_process(requests)


@pytest.fixture(scope="module")
def misbehaving():
    with Verifier(workers=2, timeout_s=TIMEOUT_S, grade_fn=grade_or_misbehave) as verifier:
        yield verifier


def test_mix_covers_the_verdicts(expected):
    counts = count_verdicts(expected)
    assert all(counts[v.value] > 10 for v in Verdict if v is not Verdict.TIMEOUT), counts


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_pool_matches_in_process_in_order(workers, requests, expected):
    with Verifier(workers=workers, timeout_s=TIMEOUT_S) as verifier:
        assert verifier.grade_many(requests) == expected
        # A second call reuses the same workers, and order follows the new list.
        assert verifier.grade_many(requests[::-1]) == expected[::-1]
        assert verifier.grade_many([]) == []


def test_results_sent_in_batches_keep_order_and_verdicts(misbehaving):
    """Full chunks of fast gradings (one message per chunk), and chunks of slow ones whose
    results come back in several messages: the order and verdicts are those in-process."""
    fast = mixed_requests(8 * MAX_CHUNK, seed=6)  # chunks of MAX_CHUNK for two workers
    assert misbehaving.grade_many(fast) == in_process(fast)
    slow = [GradeRequest(SLOW + r.response, r.gold, r.kind) for r in mixed_requests(24, seed=7)]
    assert misbehaving.grade_many(slow) == in_process(mixed_requests(24, seed=7))
    # One message per result, as before batching: the same.
    with Verifier(workers=2, timeout_s=TIMEOUT_S, flush_interval_s=0) as one_by_one:
        assert one_by_one.grade_many(fast) == in_process(fast)


def test_pathological_input_is_a_timeout_inside_the_worker(misbehaving):
    requests = [GradeRequest("\\boxed{9^{9^{9}}}", "5", "math"), *mixed_requests(20, seed=1)]
    verdicts = misbehaving.grade_many(requests)
    assert verdicts == [Verdict.TIMEOUT, *in_process(requests[1:])]


def test_dying_worker_is_replaced(misbehaving):
    requests = mixed_requests(30, seed=3)
    requests[0] = GradeRequest(CRASH, "1", "math")
    verdicts = misbehaving.grade_many(requests)
    assert verdicts[0] is Verdict.TIMEOUT
    assert verdicts[1:] == in_process(requests[1:])


def test_hung_worker_is_killed_and_the_others_finish(misbehaving):
    requests = mixed_requests(40, seed=2)
    requests[5] = GradeRequest(HANG, "1", "math")
    started = time.monotonic()
    verdicts = misbehaving.grade_many(requests)
    elapsed = time.monotonic() - started
    assert verdicts[5] is Verdict.TIMEOUT
    assert verdicts[:5] + verdicts[6:] == in_process(requests[:5] + requests[6:])
    assert elapsed < 2 * TIMEOUT_S + 1.0 + 5.0  # the outer deadline, plus a generous margin
    # The replacement worker serves the next call.
    assert misbehaving.grade_many(requests[:5]) == verdicts[:5]


@pytest.mark.parametrize("misbehaviour", [HANG, CRASH])
def test_a_hang_in_the_middle_of_a_chunk_loses_only_that_request(misbehaving, misbehaviour):
    """64 requests go out in chunks of 8; request 20 is the fifth of its chunk, after four
    graded but not yet sent when the worker is killed (or dies): those four are graded again,
    and only request 20 is TIMEOUT."""
    requests = mixed_requests(64, seed=8)
    requests[20] = GradeRequest(misbehaviour, "1", "math")
    verdicts = misbehaving.grade_many(requests)
    assert verdicts[20] is Verdict.TIMEOUT
    assert verdicts[:20] + verdicts[21:] == in_process(requests[:20] + requests[21:])


def test_a_bug_in_grading_is_raised_not_hidden(misbehaving):
    requests = [*mixed_requests(10, seed=4), GradeRequest(BUG, "1", "math")]
    with pytest.raises(RuntimeError, match=r"(?s)request 10:.*ZeroDivisionError: a bug in grading"):
        misbehaving.grade_many(requests)
    assert misbehaving.grade_many(requests[:10]) == in_process(requests[:10])


def test_workers_from_another_thread_but_in_process_only_from_the_main_one():
    requests = mixed_requests(10, seed=5)
    outcome: dict[int, object] = {}
    processes = []

    def run(workers: int) -> None:
        try:
            with Verifier(workers=workers, timeout_s=TIMEOUT_S) as verifier:
                processes.extend(worker.process for worker in verifier._pool)
                outcome[workers] = verifier.grade_many(requests)
        except RuntimeError as exc:
            outcome[workers] = str(exc)

    for workers in (0, 1):
        thread = threading.Thread(target=run, args=(workers,))
        thread.start()
        thread.join()
    assert "main thread" in str(outcome[0])
    assert outcome[1] == in_process(requests)
    # Leaving the ``with`` block stopped the worker.
    assert len(processes) == 1 and not processes[0].is_alive()


def test_close_is_idempotent_and_final():
    verifier = Verifier(workers=0)
    verifier.close()
    verifier.close()
    with pytest.raises(RuntimeError, match="this Verifier is closed; create a new one"):
        verifier.grade_many([])


def test_count_verdicts():
    counts = count_verdicts([Verdict.CORRECT, Verdict.WRONG, Verdict.CORRECT, Verdict.TIMEOUT])
    assert counts == {"correct": 2, "wrong": 1, "no_answer": 0, "ungradable": 0, "timeout": 1}
    assert list(count_verdicts([])) == [v.value for v in Verdict]


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: Verifier(workers=-1), ValueError, "workers must be an int >= 0"),
        (lambda: Verifier(workers=0, timeout_s=0), ValueError, "timeout_s must be a finite"),
        (lambda: Verifier(workers=0, flush_interval_s=2), ValueError, "would make healthy"),
        (
            lambda: Verifier(workers=1, grade_fn=lambda *a, **k: Verdict.WRONG),
            TypeError,
            "pass a module-level function",
        ),
        (lambda: GradeRequest("x", "1", "maths"), ValueError, "valid kinds: math, choice"),
        (lambda: GradeRequest("x", 1, "math"), TypeError, "GradeRequest.gold must be a str"),
        (
            lambda: Verifier(workers=0).grade_many([("x", "1", "math")]),
            TypeError,
            r"requests\[0\] must be a GradeRequest",
        ),
    ],
)
def test_bad_arguments_are_named(make, error, match):
    with pytest.raises(error, match=match):
        make()
