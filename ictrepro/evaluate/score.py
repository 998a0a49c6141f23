"""Grade sampled responses and turn verdicts into pass@k: shared by `prepare`'s calibration
table and the evaluation stage."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ictrepro.data.prompts import gold_of
from ictrepro.data.records import Problem
from ictrepro.errors import DataError
from ictrepro.evaluate.passk import pass_at_k
from ictrepro.verify import GradeRequest, Verdict, Verifier, count_verdicts


def grade_responses(
    problems: Sequence[Problem], responses: Sequence[Sequence[str]], verifier: Verifier
) -> list[list[Verdict]]:
    """Verdicts ``[i][j]`` of response j to problem i, graded in one batch."""
    if len(problems) != len(responses):
        raise ValueError(f"{len(problems)} problems but {len(responses)} groups of responses")
    requests = [
        GradeRequest(r, *gold_of(p))
        for p, group in zip(problems, responses, strict=True)
        for r in group
    ]
    flat = verifier.grade_many(requests)
    out, pos = [], 0
    for group in responses:
        out.append(flat[pos : pos + len(group)])
        pos += len(group)
    return out


@dataclass(frozen=True)
class SuiteScore:
    """pass@k of one benchmark: the mean over problems of the unbiased estimator."""

    n_problems: int
    n_samples: int
    pass_at: dict[int, float]
    verdicts: dict[str, int]


@dataclass(frozen=True)
class BenchmarkScore:
    """pass@k of one model on one benchmark, with the per-problem values behind it."""

    pass_at: dict[int, float]
    per_problem: dict[int, list[float]]
    n_problems: int
    n_ungradable: int
    verdicts: dict[str, int]


def score_problems(
    verdicts: Sequence[Sequence[Verdict]], ids: Sequence[str], ks: Sequence[int]
) -> BenchmarkScore:
    """Unbiased pass@k per problem (each with its own n >= k) and their mean.

    Problems whose gold answer is ungradable are left out and counted, never scored as 0.
    """
    per_problem: dict[int, list[float]] = {k: [] for k in ks}
    ungradable = 0
    for pid, vs in zip(ids, verdicts, strict=True):
        if Verdict.UNGRADABLE in vs:
            ungradable += 1
            continue
        for k in ks:
            if len(vs) < k:
                raise DataError(
                    f"problem {pid!r} has {len(vs)} samples; pass@{k} needs at least {k}"
                )
            per_problem[k].append(pass_at_k(len(vs), sum(v.is_correct for v in vs), k))
    n = len(per_problem[ks[0]])
    # numpy's mean, as mean_pass_at_k takes it (and tasks/utils.py): the same bits everywhere.
    pass_at = {k: (float(np.mean(v)) if n else float("nan")) for k, v in per_problem.items()}
    counts = count_verdicts(v for vs in verdicts for v in vs)
    return BenchmarkScore(pass_at, per_problem, n, ungradable, counts)


def score_verdicts(verdicts: Sequence[Sequence[Verdict]], ks: Sequence[int]) -> SuiteScore:
    """pass@k for each k from per-problem verdicts (all problems need the same n >= max k).

    Ungradable problems (gold answer unparsable) are left out of pass@k and counted in
    ``verdicts`` instead, so a data problem never shows up as a model error.
    """
    if not verdicts:
        raise ValueError("no problems to score")
    n = len(verdicts[0])
    if any(len(v) != n for v in verdicts):
        raise DataError("every problem needs the same number of samples")
    if n < max(ks):
        raise DataError(f"pass@{max(ks)} needs at least {max(ks)} samples per problem, got {n}")
    score = score_problems(verdicts, [str(i) for i in range(len(verdicts))], ks)
    return SuiteScore(score.n_problems, n, score.pass_at, score.verdicts)
