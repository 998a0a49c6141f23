"""ICT and the random mask at a tenth of the learning rate, as rules for ``--method-module``.

    ictrepro compare --method ict-lr10 --method-module studies/fork/sparse_lr10_rules.py \
        --preset tiny-fork --world runs/tiny-fork --out runs/compare-ict-lr10
    (and --method random-lr10)

With the loss averaged over the selected tokens, a 10% mask gives each selected token about
ten times GRPO's step; at lr/10 each selected token's step is about GRPO's. Both keep the
fork world's 3 dense warm-up steps. docs/history.md quotes what they measured.
"""

from ictrepro.algos.selection import get_selection, register_selection


@register_selection("ict-lr10", needs=("js",), label="ICT lr/10", lr_scale=0.1)
def ict_lr10(inputs, *, warmup_steps: int = 3):
    """ICT (the fork world's 3 warm-up steps) at a tenth of the learning rate."""
    return get_selection("ict")(inputs, warmup_steps=warmup_steps)


@register_selection("random-lr10", label="Random-10% lr/10", lr_scale=0.1)
def random_lr10(inputs, *, warmup_steps: int = 3):
    """The random 10% mask (3 warm-up steps) at a tenth of the learning rate."""
    return get_selection("random")(inputs, warmup_steps=warmup_steps)
