"""Per-step training metrics: sums over ranks, the token-selection statistics, the JSONL log.

Every mean is kept as a (sum, count) pair until the end of the step, then summed over
processes, so a 2-process run reports the same numbers as one process on the same samples.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ictrepro.algos.selection import top_fraction_mask
from ictrepro.algos.token_stats import TokenStats
from ictrepro.io import atomic_write_jsonl

#: "High-entropy" tokens, for the overlap metric: the top 20% by entropy of the batch
#: (the 20-Entropy paper's threshold).
HIGH_ENTROPY_RHO = 0.2


class MetricSums:
    """Named means (a sum and a count each) and totals, reduced over processes together."""

    def __init__(self) -> None:
        self._means: dict[str, list[float]] = {}
        self._totals: dict[str, float] = {}

    @classmethod
    def empty(cls, names: tuple[str, ...]) -> MetricSums:
        """Means ``names`` with no samples: reported as null, so every line has the keys."""
        sums = cls()
        for name in names:
            sums.add(name, 0.0, 0)
        return sums

    @classmethod
    def merged(cls, *parts: MetricSums) -> MetricSums:
        """One set of sums holding every part's (a name in several parts adds up)."""
        out = cls()
        for part in parts:
            for name, (value_sum, count) in part._means.items():
                out.add(name, value_sum, count)
            for name, n in part._totals.items():
                out.count(name, n)
        return out

    def renamed(self, old: str, new: str) -> MetricSums:
        """A copy with the mean ``old`` (if present) named ``new``."""
        out = MetricSums.merged(self)
        if old in out._means:
            out._means[new] = out._means.pop(old)
        return out

    def add(self, name: str, value_sum: float | Tensor, count: float | Tensor) -> None:
        """Add to the mean ``name``; reported as sum / count (null when count is 0)."""
        entry = self._means.setdefault(name, [0.0, 0.0])
        entry[0] += float(value_sum)
        entry[1] += float(count)

    def count(self, name: str, n: float | Tensor) -> None:
        """Add to the total ``name``; reported as the sum over processes."""
        self._totals[name] = self._totals.get(name, 0.0) + float(n)

    def reduce(self, accelerator: Any | None = None) -> dict[str, Any]:
        """Means and totals over all processes (every process must hold the same names)."""
        names = sorted(self._means)
        totals = sorted(self._totals)
        flat = [v for n in names for v in self._means[n]] + [self._totals[n] for n in totals]
        values = torch.tensor(flat, dtype=torch.float64, device="cpu")  # moved to reduce
        if accelerator is not None and accelerator.num_processes > 1:
            values = accelerator.reduce(values.to(accelerator.device), "sum").cpu()
        out: dict[str, Any] = {}
        for i, name in enumerate(names):
            s, c = float(values[2 * i]), float(values[2 * i + 1])
            out[name] = s / c if c > 0 else None
        for j, name in enumerate(totals):
            out[name] = float(values[2 * len(names) + j])
        return out


def selection_metrics(stats: TokenStats, mask_BT: Tensor, response_mask_BT: Tensor) -> MetricSums:
    """The statistics of docs/method.md ("What is logged per step"), as sums to reduce over processes.

    Args:
        stats: the rollout policy's statistics, ``[B, T]`` each.
        mask_BT: the selection, bool ``[B, T]``; ``response_mask_BT``: bool ``[B, T]``.

    Means: ``selected_fraction``; ``entropy_mean``, ``renyi2_mean`` (all response tokens);
    ``entropy_selected_mean``; ``prob_selected_mean`` / ``prob_unselected_mean`` (pi of the
    sampled token); ``selected_high_entropy_fraction`` (selected tokens that are in the top
    20% by entropy of the batch); ``prob_above_purity_fraction`` and its selected-token
    version (pi(a) > beta = sum_v p_v^2, the side where raising the token concentrates the
    distribution); with JS: ``js_mean``, ``js_selected_mean``, ``js_unselected_mean``.
    """
    resp, sel = response_mask_BT, mask_BT
    unsel = resp & ~sel
    n_tokens, n_sel, n_unsel = resp.sum(), sel.sum(), unsel.sum()
    prob = stats.logprob.double().exp()
    purity = (-stats.renyi2.double()).exp()
    above = prob > purity
    high_entropy = top_fraction_mask(stats.entropy, resp, HIGH_ENTROPY_RHO, "batch")
    sums = MetricSums()
    sums.add("selected_fraction", n_sel, n_tokens)
    sums.add("entropy_mean", stats.entropy[resp].double().sum(), n_tokens)
    sums.add("renyi2_mean", stats.renyi2[resp].double().sum(), n_tokens)
    sums.add("entropy_selected_mean", stats.entropy[sel].double().sum(), n_sel)
    sums.add("prob_selected_mean", prob[sel].sum(), n_sel)
    sums.add("prob_unselected_mean", prob[unsel].sum(), n_unsel)
    sums.add("selected_high_entropy_fraction", (sel & high_entropy).sum(), n_sel)
    sums.add("prob_above_purity_fraction", (resp & above).sum(), n_tokens)
    sums.add("selected_prob_above_purity_fraction", (sel & above).sum(), n_sel)
    if stats.js is not None:
        js = stats.js.double()
        sums.add("js_mean", js[resp].sum(), n_tokens)
        sums.add("js_selected_mean", js[sel].sum(), n_sel)
        sums.add("js_unselected_mean", js[unsel].sum(), n_unsel)
    return sums


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class MetricsLog:
    """``metrics.jsonl``: one JSON object per completed step, appended and fsynced."""

    def __init__(self, path: Path, *, enabled: bool = True) -> None:
        self.path, self.enabled = Path(path), enabled

    def read(self) -> list[dict[str, Any]]:
        """The complete records (a line cut short by a kill ends the list)."""
        if not self.path.exists():
            return []
        records = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                break
        return records

    def truncate(self, completed_steps: int) -> None:
        """Keep the records of steps ``<= completed_steps`` (those a checkpoint covers)."""
        if not self.enabled:
            return
        kept = [r for r in self.read() if r.get("step", 0) <= completed_steps]
        if kept or self.path.exists():
            atomic_write_jsonl(self.path, kept)

    def append(self, metrics: dict[str, Any]) -> None:
        if not self.enabled:
            return
        line = json.dumps({k: _json_safe(v) for k, v in metrics.items()}, sort_keys=False)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
