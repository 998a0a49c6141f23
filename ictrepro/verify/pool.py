"""Grade many responses: in-process, or in a pool of worker processes with a hang guard.

Design:

- Workers are processes, not threads: grading uses ``SIGALRM`` (as math-verify does), which
  only works in a main thread. They are started with ``spawn``: the parent usually has
  torch (and maybe CUDA) loaded, where ``fork`` is unsafe; ``spawn`` also does not depend
  on the process-wide server that ``forkserver`` shares with other code.
- Workers start once per :class:`Verifier` (imports and a warm-up grading), not per call.
- Requests go out in chunks, and results come back in batches: a worker sends what it has
  graded at the end of a chunk, or as soon as ``flush_interval_s`` has passed since its
  last message. Most gradings take well under a millisecond (the quick rules of
  :mod:`~ictrepro.verify.quick`), so one message per result cost more than the grading.
- The worker also writes the index of the request it is grading into shared memory
  (``_Worker.current``) before each one, so the parent always knows which request a worker
  is on, without a message.
- Hang guard: grading has its own time limit inside the worker, but a signal cannot
  interrupt one long C call. So the parent gives every request an outer deadline,
  ``2 * timeout_s + DEADLINE_SLACK_S`` from the worker's previous message (a healthy
  worker sends one at most ``flush_interval_s`` plus one grading after the last). A worker
  past it is killed and replaced; the request it is on becomes ``TIMEOUT`` and the rest of
  its chunk, including results graded but not yet sent, goes back to the queue, so one
  pathological response never stalls a run. A worker that dies (e.g. killed for memory)
  is handled the same way.
"""

from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing as mp
import pickle
import signal
import threading
import time
import traceback
import weakref
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol

from ictrepro.verify.extract import check_kind
from ictrepro.verify.grade import Verdict, grade

logger = logging.getLogger(__name__)

DEADLINE_SLACK_S = 1.0
"""Added to ``2 * timeout_s`` to form the outer per-request deadline in the parent."""
STARTUP_TIMEOUT_S = 120.0
"""A worker that is not ready (imports + warm-up) after this long is an error."""
MAX_CHUNK = 32
FLUSH_INTERVAL_S = 0.05
"""By default a worker sends its graded results at least this often (and at the end of each
chunk). Kept well below ``DEADLINE_SLACK_S``, so that batching never makes a healthy worker
look hung."""


@dataclass(frozen=True)
class GradeRequest:
    """One response to grade against its gold answer (``kind``: ``"math"`` or ``"choice"``)."""

    response: str
    gold: str
    kind: str

    def __post_init__(self) -> None:
        # Checked here, in the parent, so that a bad request fails where it was made.
        for name in ("response", "gold"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise TypeError(f"GradeRequest.{name} must be a str, got {type(value).__name__}")
        check_kind(self.kind)


class GradeFn(Protocol):
    def __call__(self, response: str, gold: str, *, kind: str, timeout_s: float) -> Verdict: ...


def count_verdicts(verdicts: Iterable[Verdict]) -> dict[str, int]:
    """Count of each verdict, every verdict present (0 if absent), in declaration order."""
    counts = dict.fromkeys((v.value for v in Verdict), 0)
    for verdict in verdicts:
        counts[Verdict(verdict).value] += 1
    return counts


# ------------------------------------------------------------------------------- worker


def warm_up(grade_fn: GradeFn, timeout_s: float) -> None:
    """One grading that runs math-verify (the quick rules leave ``0.5`` against
    ``\\frac{1}{2}`` to it), so that its lazy imports and regular expressions (about 0.1 s)
    are paid here, not inside the time limit of a real grading."""
    grade_fn("\\boxed{\\frac{1}{2}}", "0.5", kind="math", timeout_s=timeout_s)


def _worker_main(
    conn: Connection, current: Any, timeout_s: float, grade_fn: GradeFn, flush_interval_s: float
) -> None:
    """Loop of one worker process: receive a chunk, send its results in batches of
    ``(index, verdict)``; ``current`` (shared memory) holds the index being graded."""
    # Ctrl-C reaches the whole process group; the parent handles it and stops the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    warm_up(grade_fn, timeout_s)
    conn.send(("ready", None))
    while True:
        try:
            chunk = conn.recv()
        except EOFError:  # the parent went away
            return
        if chunk is None:
            return
        graded: list[tuple[int, str]] = []
        last_sent = time.monotonic()
        for index, response, gold, kind in chunk:
            current.value = index
            try:
                verdict = Verdict(grade_fn(response, gold, kind=kind, timeout_s=timeout_s))
            except Exception:
                # A bug, not a grading outcome: hand it to the parent, which raises it.
                if graded:
                    conn.send(("ok", graded))
                conn.send(("error", (index, traceback.format_exc())))
                break
            graded.append((index, verdict.value))
            if time.monotonic() - last_sent >= flush_interval_s:
                conn.send(("ok", graded))
                graded, last_sent = [], time.monotonic()
        else:
            if graded:
                conn.send(("ok", graded))


class _Worker:
    """Parent-side handle of one worker process."""

    def __init__(
        self, ctx: Any, timeout_s: float, grade_fn: GradeFn, flush_interval_s: float
    ) -> None:
        parent_end, child_end = ctx.Pipe(duplex=True)
        # Written by the worker only; read by the parent when the worker must be replaced.
        self.current = ctx.RawValue("q", -1)
        self.process = ctx.Process(
            target=_worker_main,
            args=(child_end, self.current, timeout_s, grade_fn, flush_interval_s),
            name="ictrepro-verifier",
            daemon=True,
        )
        self.process.start()
        child_end.close()  # so that the parent sees EOF when the worker dies
        self.conn: Connection = parent_end
        self.ready = False
        self.started_at = time.monotonic()
        self.pending: deque[int] = deque()  # indices sent and not yet answered, in order
        self.deadline = math.inf

    def assign(self, chunk: list[int], requests: Sequence[GradeRequest], budget_s: float) -> None:
        self.conn.send(
            [(i, requests[i].response, requests[i].gold, requests[i].kind) for i in chunk]
        )
        self.pending = deque(chunk)
        self.deadline = time.monotonic() + budget_s

    def ask_to_stop(self) -> None:
        with contextlib.suppress(OSError):  # already gone: nothing to ask
            self.conn.send(None)

    def kill(self) -> None:
        """Kill the process if it still runs, and release the pipe."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5.0)
        self.conn.close()


def _stop_all(workers: list[_Worker], grace_s: float = 2.0) -> None:
    """Ask every worker to exit, give them ``grace_s`` together, then kill the rest."""
    for worker in workers:
        worker.ask_to_stop()
    deadline = time.monotonic() + grace_s
    for worker in workers:
        worker.process.join(timeout=max(0.0, deadline - time.monotonic()))
    for worker in workers:
        worker.kill()
    workers.clear()


# ------------------------------------------------------------------------------- pool


class _Batch:
    """State of one ``grade_many`` call in the pool."""

    def __init__(self, requests: Sequence[GradeRequest], chunk_size: int) -> None:
        self.requests = requests
        self.results: list[Verdict | None] = [None] * len(requests)
        self.queue: deque[list[int]] = deque(
            list(range(start, min(start + chunk_size, len(requests))))
            for start in range(0, len(requests), chunk_size)
        )
        self.error: str | None = None


class Verifier:
    """Grades batches of :class:`GradeRequest`; results keep the order of the requests.

    Args:
        workers: worker processes; ``0`` grades in the calling process, which must then be
            the main thread.
        timeout_s: time limit of one grading (see :func:`~ictrepro.verify.grade.grade`).
        grade_fn: the function each request is graded with, :func:`grade` unless given. It
            must be a module-level function (workers are spawned and import it by name).
            Tests use it to inject a hang that no signal can interrupt.
        flush_interval_s: a worker sends its results at the end of each chunk, or once this
            long has passed since its last message; ``0`` sends each result on its own (the
            pool as it was before batching, kept for the benchmark's side-by-side).

    Use as ``with Verifier(workers=2) as v: verdicts = v.grade_many(requests)``, or call
    :meth:`close`. One ``grade_many`` runs at a time per verifier (a lock enforces it).
    """

    def __init__(
        self,
        workers: int = 2,
        timeout_s: float = 5.0,
        *,
        grade_fn: GradeFn = grade,
        flush_interval_s: float = FLUSH_INTERVAL_S,
    ) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
            raise ValueError(f"workers must be an int >= 0 (0 = in-process), got {workers!r}")
        if isinstance(timeout_s, bool) or not (
            isinstance(timeout_s, (int, float)) and math.isfinite(timeout_s) and timeout_s > 0
        ):
            raise ValueError(f"timeout_s must be a finite number > 0, got {timeout_s!r}")
        if isinstance(flush_interval_s, bool) or not (
            isinstance(flush_interval_s, (int, float)) and 0 <= flush_interval_s < DEADLINE_SLACK_S
        ):
            raise ValueError(
                f"flush_interval_s must be a number in [0, {DEADLINE_SLACK_S}) s (a longer one "
                f"would make healthy workers look hung), got {flush_interval_s!r}"
            )
        if workers:
            try:
                pickle.dumps(grade_fn)
            except (pickle.PicklingError, AttributeError, TypeError) as exc:
                raise TypeError(
                    f"grade_fn {grade_fn!r} cannot be sent to worker processes ({exc}); "
                    "pass a module-level function"
                ) from exc
        self.workers = workers
        self.timeout_s = float(timeout_s)
        self._grade_fn = grade_fn
        self.flush_interval_s = float(flush_interval_s)
        self._request_budget_s = 2 * self.timeout_s + DEADLINE_SLACK_S
        self._lock = threading.Lock()
        self._closed = False
        self._ctx = mp.get_context("spawn")
        self._pool: list[_Worker] = []
        # Stops the workers if the verifier is dropped without close().
        self._finalizer = weakref.finalize(self, _stop_all, self._pool)
        try:
            self._pool.extend(self._new_worker() for _ in range(workers))
            self._wait_ready()
        except BaseException:
            self.close()
            raise

    # -------------------------------------------------------------- lifecycle

    def __enter__(self) -> Verifier:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers. Safe to call more than once."""
        self._closed = True
        self._finalizer()

    def _new_worker(self) -> _Worker:
        return _Worker(self._ctx, self.timeout_s, self._grade_fn, self.flush_interval_s)

    def _wait_ready(self) -> None:
        while starting := [w for w in self._pool if not w.ready]:
            remaining = min(w.started_at for w in starting) + STARTUP_TIMEOUT_S - time.monotonic()
            self._check_startup(remaining)
            ready = wait([w.conn for w in starting], timeout=remaining)
            for worker in starting:
                if worker.conn in ready:
                    self._receive(worker, None)

    @staticmethod
    def _check_startup(remaining_s: float) -> None:
        if remaining_s <= 0:
            raise RuntimeError(f"a verifier worker was not ready after {STARTUP_TIMEOUT_S:.0f} s")

    # -------------------------------------------------------------- grading

    def grade_many(self, requests: Sequence[GradeRequest]) -> list[Verdict]:
        """Verdicts of ``requests``, in the same order."""
        if self._closed:
            raise RuntimeError("this Verifier is closed; create a new one")
        for i, request in enumerate(requests):
            if not isinstance(request, GradeRequest):
                raise TypeError(f"requests[{i}] must be a GradeRequest, got {request!r:.80}")
        with self._lock:
            if self.workers == 0:
                return self._grade_in_process(requests)
            try:
                return self._grade_in_pool(requests)
            except BaseException:
                # Interrupted (Ctrl-C, a worker that cannot start): results still in flight
                # would be read by the next call as its own, so those workers are replaced.
                for worker in [w for w in self._pool if w.pending]:
                    worker.pending.clear()
                    worker.kill()
                    self._pool[self._pool.index(worker)] = self._new_worker()
                raise

    def _grade_in_process(self, requests: Sequence[GradeRequest]) -> list[Verdict]:
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError(
                "Verifier(workers=0) grades in the calling thread, which must be the main "
                "thread (grading uses SIGALRM); use workers=1 or more from other threads"
            )
        return [
            self._grade_fn(r.response, r.gold, kind=r.kind, timeout_s=self.timeout_s)
            for r in requests
        ]

    def _grade_in_pool(self, requests: Sequence[GradeRequest]) -> list[Verdict]:
        # Several chunks per worker balance the load; a cap keeps each round trip short.
        chunk_size = max(1, min(MAX_CHUNK, len(requests) // (4 * self.workers)))
        batch = _Batch(requests, chunk_size)
        while True:
            if batch.error is None:  # after an error, only the chunks in flight finish
                self._dispatch(batch)
            busy = [w for w in self._pool if w.pending]
            if not busy and (batch.error is not None or not batch.queue):
                break
            starting = [w for w in self._pool if not w.ready]
            deadlines = [w.deadline for w in busy]
            deadlines += [w.started_at + STARTUP_TIMEOUT_S for w in starting]
            timeout = max(0.0, min(deadlines) - time.monotonic())
            ready = wait([w.conn for w in busy + starting], timeout=timeout)
            for worker in busy + starting:
                if worker.conn in ready:
                    self._receive(worker, batch)
            now = time.monotonic()
            for worker in [w for w in self._pool if w.pending and w.deadline <= now]:
                self._replace(worker, batch, f"no result within {self._request_budget_s:.3g} s")
            for worker in [w for w in self._pool if not w.ready]:
                self._check_startup(worker.started_at + STARTUP_TIMEOUT_S - now)
        if batch.error is not None:
            raise RuntimeError(f"grading failed in a worker process: {batch.error}")
        missing = [i for i, verdict in enumerate(batch.results) if verdict is None]
        assert not missing, f"requests {missing[:10]} were never graded"
        return [v for v in batch.results if v is not None]

    def _dispatch(self, batch: _Batch) -> None:
        for worker in list(self._pool):
            if not (worker.ready and not worker.pending and batch.queue):
                continue
            chunk = batch.queue.popleft()
            try:
                worker.assign(chunk, batch.requests, self._request_budget_s)
            except OSError:  # it died while idle: nothing of this batch is lost
                batch.queue.appendleft(chunk)
                worker.pending.clear()
                self._replace(worker, batch, f"worker died (exit code {worker.process.exitcode})")

    def _receive(self, worker: _Worker, batch: _Batch | None) -> None:
        """Handle every message that ``worker`` has sent (it has sent at least one)."""
        while True:
            try:
                status, payload = worker.conn.recv()
            except (EOFError, ConnectionError):
                if not worker.ready or batch is None:
                    raise RuntimeError(
                        "a verifier worker exited while starting (exit code "
                        f"{worker.process.exitcode}); call grade() in-process to see why"
                    ) from None
                self._replace(worker, batch, f"worker died (exit code {worker.process.exitcode})")
                return
            if status == "ready":
                worker.ready = True
            elif status == "ok":
                assert batch is not None
                for index, verdict in payload:
                    assert worker.pending[0] == index, "results come back in the order sent"
                    worker.pending.popleft()
                    batch.results[index] = Verdict(verdict)
                worker.deadline = time.monotonic() + self._request_budget_s
            else:  # "error": a bug in grading; the worker skips the rest of its chunk
                assert batch is not None
                index, trace = payload
                if batch.error is None:
                    batch.error = f"request {index}:\n{trace}"
                worker.pending.clear()
            if not worker.conn.poll():
                return

    def _replace(self, worker: _Worker, batch: _Batch, why: str) -> None:
        """Kill ``worker`` and start another; its current request becomes ``TIMEOUT`` and the
        rest of its chunk (graded or not: results not yet sent are lost) goes back to the
        queue."""
        if worker.pending:
            worker.kill()  # first, so that ``current`` can no longer change
            # The request it is on; the first one unanswered if it died between two.
            stuck = worker.current.value
            if stuck not in worker.pending:
                stuck = worker.pending[0]
            worker.pending.remove(stuck)
            batch.results[stuck] = Verdict.TIMEOUT
            if worker.pending:
                batch.queue.appendleft(list(worker.pending))
            logger.warning("request %d graded TIMEOUT: %s; replacing the worker", stuck, why)
        else:
            logger.warning("replacing an idle verifier worker: %s", why)
        worker.kill()
        self._pool[self._pool.index(worker)] = self._new_worker()
