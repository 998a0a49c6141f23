"""Grade sampled responses and turn verdicts into pass@k: shared by `prepare`'s calibration
table and the evaluation stage."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ictrepro.data.prompts import answer_kind
from ictrepro.data.records import Problem
from ictrepro.evaluate.passk import mean_pass_at_k
from ictrepro.verify import GradeRequest, Verdict, Verifier, count_verdicts


def grade_responses(
    problems: Sequence[Problem], responses: Sequence[Sequence[str]], verifier: Verifier
) -> list[list[Verdict]]:
    """Verdicts ``[i][j]`` of response j to problem i, graded in one batch."""
    if len(problems) != len(responses):
        raise ValueError(f"{len(problems)} problems but {len(responses)} groups of responses")
    requests = [
        GradeRequest(response=r, gold=p.answer, kind=answer_kind(p))
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


def score_verdicts(verdicts: Sequence[Sequence[Verdict]], ks: Sequence[int]) -> SuiteScore:
    """pass@k for each k from per-problem verdicts (all problems need the same n >= max k).

    Ungradable problems (gold answer unparsable) are left out of pass@k and counted in
    ``verdicts`` instead, so a data problem never shows up as a model error.
    """
    if not verdicts:
        raise ValueError("no problems to score")
    n = len(verdicts[0])
    if any(len(v) != n for v in verdicts):
        raise ValueError("every problem needs the same number of samples")
    if n < max(ks):
        raise ValueError(f"pass@{max(ks)} needs at least {max(ks)} samples per problem, got {n}")
    gradable = [v for v in verdicts if Verdict.UNGRADABLE not in v]
    n_correct = [sum(x.is_correct for x in v) for v in gradable]
    pass_at = {
        k: mean_pass_at_k([n] * len(gradable), n_correct, k) if gradable else float("nan")
        for k in ks
    }
    counts = count_verdicts(x for v in verdicts for x in v)
    return SuiteScore(len(gradable), n, pass_at, counts)
