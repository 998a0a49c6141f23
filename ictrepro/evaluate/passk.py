"""The unbiased pass@k estimator (Chen et al. 2021, "Evaluating Large Language Models
Trained on Code"): with n samples of which c are correct,

    pass@k = 1 - C(n - c, k) / C(n, k),

the probability that at least one of k samples drawn without replacement from the n is
correct. Computed as ``1 - prod_{i = n-c+1}^{n} (1 - k / i)``, which never forms the huge
binomials. Taking "the first k of n" instead is a different, higher-variance estimate.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np


def _check(n: int, c: int, k: int) -> None:
    for name, value in (("n", n), ("c", c), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {value!r}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if n < k:
        raise ValueError(f"pass@{k} needs at least k={k} samples per problem, got n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"correct count c must be in [0, n={n}], got {c}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem with ``n`` samples, ``c`` of them correct."""
    _check(n, c, k)
    if n - c < k:  # every draw of k contains a correct sample
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)))


def mean_pass_at_k(num_samples: Sequence[int], num_correct: Sequence[int], k: int) -> float:
    """Mean of ``pass_at_k`` over problems (``num_samples[i]``, ``num_correct[i]`` each)."""
    if len(num_samples) != len(num_correct):
        raise ValueError(
            f"num_samples ({len(num_samples)}) and num_correct ({len(num_correct)}) differ in length"
        )
    if not num_samples:
        raise ValueError("no problems to score")
    return float(
        np.mean(
            [pass_at_k(int(n), int(c), k) for n, c in zip(num_samples, num_correct, strict=True)]
        )
    )


class Counts(Protocol):
    """A problem's sample and correct counts (e.g. a score record's ``ProblemCount``)."""

    @property
    def n_samples(self) -> int: ...

    @property
    def n_correct(self) -> int: ...


def mean_pass_at(problems: Sequence[Counts], ks: Iterable[int]) -> dict[int, float]:
    """pass@k for each k: the mean over problems of the unbiased estimator (NaN without
    problems). numpy's mean, as :func:`ictrepro.evaluate.score.score_problems` takes it,
    so the same counts give the same bits."""
    return {
        k: float(np.mean([pass_at_k(p.n_samples, p.n_correct, k) for p in problems]))
        if problems
        else float("nan")
        for k in ks
    }
