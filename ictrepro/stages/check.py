"""``ictrepro check --rerun``: reproduce a quick subset of a preset and judge it against the
pinned results (:mod:`ictrepro.results.rerun`: bit for bit where that can be expected,
statistically otherwise).
"""

from __future__ import annotations

from pathlib import Path

from ictrepro.determinism import numerics_provenance
from ictrepro.presets import get_preset
from ictrepro.results.pinned import RESULTS_DIR, load_provenance
from ictrepro.results.rerun import RerunOutcome, judge_rerun
from ictrepro.stages.reproduce import make_plan, reproduce

#: A quick subset of a preset's reproduction that `check --rerun` repeats.
RERUN_METHODS = ("grpo", "ict")


def rerun_check(
    preset: str,
    work_dir: Path,
    *,
    results_dir: Path = RESULTS_DIR,
    methods: tuple[str, ...] = RERUN_METHODS,
    seeds: tuple[int, ...] | None = None,
    show_progress: bool = False,
    warm_start: bool | None = None,
) -> RerunOutcome:
    """Reproduce a subset of ``preset`` in ``work_dir`` and compare it with the pinned results.

    Bit-identical mode when every re-run count equals the pinned one, or when both sides'
    numerics (:mod:`ictrepro.determinism`) and CPU are the same, so that any difference is
    a change of the build. Otherwise statistical mode: the re-run passes when it is
    consistent with the pinned counts (:func:`ictrepro.results.rerun.judge_rerun`).
    ``warm_start`` True trains the base model from scratch instead of using the shipped one,
    so that the judgement covers the warm start too (the world's hashes are compared).
    """
    provenance = load_provenance(preset, results_dir)
    # The preset's first seed unless told: a pinned seed (the lock world's are not 0..4).
    seeds = seeds if seeds is not None else get_preset(preset).seeds[:1]
    plan = make_plan(preset, work_dir, methods=methods, seeds=seeds)
    reproduce(
        plan,
        jobs=provenance.get("training_jobs", 1),
        show_progress=show_progress,
        warm_start=warm_start,
    )
    return judge_rerun(preset, work_dir, numerics_provenance(), results_dir=results_dir)
