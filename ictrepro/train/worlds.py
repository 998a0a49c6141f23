"""What a world supplies the training loop, so that its step reads the same for every world.

Each step the loop hands the world its prompts, the sampled completions and the response
mask (:meth:`World.step`); what comes back (:class:`StepView`) gives the rules the tokens
where each response makes its decisive choice (``SelectionInputs.choice``; None where the
world marks none) and, once the mask is known, the world's own metrics for
``metrics.jsonl``. The fork and lock worlds mark their fork (``ictrepro/train/forks.py``);
every other world marks nothing and logs nothing of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from ictrepro.algos.token_stats import TokenStats
from ictrepro.data.records import Problem
from ictrepro.train.forks import choice_mask, fork_metrics, fork_positions
from ictrepro.train.metrics import MetricSums


@dataclass(frozen=True)
class StepView:
    """One step as the world sees it: ``choice`` bool ``[B, T]`` (or None) and, given the
    rule's mask, the world's metrics."""

    choice: Tensor | None = None
    forks: Sequence[tuple[int, int] | None] | None = None

    def metrics(self, stats: TokenStats, mask_BT: Tensor, response_mask_BT: Tensor) -> MetricSums:
        if self.forks is None:
            return MetricSums()
        return fork_metrics(self.forks, stats, mask_BT, response_mask_BT)


class World:
    """A world that marks no choice and logs nothing of its own (the seven tiny suites,
    the pretrained presets)."""

    marks_choice = False

    def step(
        self,
        problems: Sequence[Problem],
        completions: Sequence[Sequence[Any]],
        response_mask_BT: Tensor,
    ) -> StepView:
        return StepView()


class ForkWorld(World):
    """The fork and lock worlds: each response's fork token (``fork_positions``) is its
    choice, and the ``fork_*`` metrics say where each rule's mask acts around it."""

    marks_choice = True

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def step(
        self,
        problems: Sequence[Problem],
        completions: Sequence[Sequence[Any]],
        response_mask_BT: Tensor,
    ) -> StepView:
        rows = [
            (c.token_ids, c.text, problem.meta.get("response_prefix", ""))
            for problem, group in zip(problems, completions, strict=True)
            for c in group
        ]
        forks = fork_positions(rows, self.tokenizer)
        return StepView(choice_mask(forks, response_mask_BT), forks)


def world_of(problems: Sequence[Problem], tokenizer: Any) -> World:
    """The world the RL ``problems`` come from: a fork world's (suite family ``fork*``),
    else the plain one."""
    if any(p.meta.get("family", "").startswith("fork") for p in problems):
        return ForkWorld(tokenizer)
    return World()
