"""``word-arithmetic``: one-step word problems that a 135M pretrained model half solves.

The task of the ``smollm2-135m-learn`` preset (docs/paper-scale.md, "Learning on a real
model"). SmolLM2-135M-Instruct answers 4 of 176 real GSM8K prompts, and about 5% of the
tiny world's two-step problems even with a worked example, so binary-reward RL has nothing
to learn from there. Its pass@1 on these one-step problems (add or take away small
numbers) with one worked example in the prompt lies inside the 15-60% band where a group
of samples usually holds both a right and a wrong answer: the calibration is measured and
recorded in docs/paper-scale.md.

Each problem carries the worked example in ``meta["example"]`` (a question and its
solution); :func:`ictrepro.data.prompts.render_prompt` puts it before the question as an
earlier turn of the conversation, so the training, probe and evaluation prompts all show
it and the prepared data files record it. The example's name (Mia) is not among the
generated names, so it is never one of the problems.
"""

from __future__ import annotations

import random

from ictrepro.data.records import Problem
from ictrepro.data.suites import ANSWER_LEAD, ITEMS, NAMES

TASK = "word-arithmetic"
#: The one worked example shown before every question: the form a response should take.
EXAMPLE = {
    "problem": "Mia has 6 pens and gets 3 more. How many pens does Mia have now?",
    "solution": f"6 + 3 = 9. {ANSWER_LEAD} \\boxed{{9}}.",
}


def _item(rng: random.Random, add: bool) -> tuple[str, str, str]:
    """(problem, solution, answer) of one problem: an addition or a subtraction."""
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    if add:
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        answer, step = a + b, f"{a} + {b} = {a + b}."
        problem = (
            f"{name} has {a} {item}s and gets {b} more. How many {item}s does {name} have now?"
        )
    else:
        a = rng.randint(5, 18)
        b = rng.randint(1, a - 1)
        answer, step = a - b, f"{a} - {b} = {a - b}."
        problem = f"{name} has {a} {item}s and gives away {b}. How many {item}s are left?"
    return problem, f"{step} {ANSWER_LEAD} \\boxed{{{answer}}}.", str(answer)


def _draw(split: str, seed: int, count: int, exclude: set[str]) -> list[Problem]:
    # A string seed: `random` hashes it with SHA-512, the same stream on every platform.
    rng = random.Random(f"{TASK}/{split}/{seed}")
    seen, out = set(exclude), []
    while len(out) < count:
        # Additions and subtractions alternate, so every split holds both halves alike.
        problem, solution, answer = _item(rng, add=len(out) % 2 == 0)
        if problem in seen:
            continue
        seen.add(problem)
        out.append(
            Problem(
                id=f"{TASK}-{split}-{len(out):05d}",
                problem=problem,
                answer=answer,
                solution=solution,
                meta={"suite": TASK, "split": split, "example": dict(EXAMPLE)},
            )
        )
    return out


def generate_task(*, seed: int, n_train: int, n_test: int) -> dict[str, list[Problem]]:
    """``{"train": [...], "test": [...]}`` of ``word-arithmetic``, disjoint by text (the
    test split is drawn first and its texts are excluded from the training split)."""
    if n_train < 0 or n_test < 0:
        raise ValueError(f"n_train and n_test must be >= 0, got {n_train} and {n_test}")
    # About 10 x 8 x (64 + 90) distinct texts exist: far more than any preset draws.
    if n_train + n_test > 5000:
        raise ValueError(f"at most 5,000 problems in all, got {n_train + n_test}")
    test = _draw("test", seed, n_test, exclude={EXAMPLE["problem"]})
    train = _draw("train", seed, n_train, exclude={EXAMPLE["problem"], *(p.problem for p in test)})
    return {"train": train, "test": test}


#: The generated tasks a pretrained-model preset can train and evaluate on.
TASKS = {TASK: generate_task}
