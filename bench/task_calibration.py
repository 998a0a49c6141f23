"""The exploration that chose ``smollm2-135m-learn``'s task: the base model's pass@1 on
candidate problem sets and prompts (not a test; docs/paper-scale.md, "Learning on a real
model").

    python bench/task_calibration.py MODEL_DIR VARIANT PROBLEMS MAX_NEW_TOKENS TEMPERATURE

MODEL_DIR: a prepared run's ``base_model/``. VARIANT: ``tiny`` / ``tiny1shot`` /
``tinyinline`` (the tiny world's two-step ``tiny-gsm8k`` test problems, zero-shot, with a
two-step worked example as an earlier chat turn, or inside the user message),
``gsm1shot`` (the shortest real GSM8K test problems, from ``../shared/benchmarks``,
with the two-step example), ``one1shot`` (one-step add / take-away problems drawn here with
``random.Random(1)``, the shape ``word-arithmetic`` took, with a one-step example). Four
samples per problem, one thread, seed 0; prints pass@1, problems solved at least once,
mean response length and the first responses. The preset's own calibration is
``ictrepro eval --models base`` on its prepared test split, not this script.
"""

import random
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from ictrepro.data.prompts import MATH_INSTRUCTION
from ictrepro.data.suites import ITEMS, NAMES, generate_suite
from ictrepro.io import read_jsonl
from ictrepro.rollout.hf import hf_generate
from ictrepro.rollout.params import SamplingParams
from ictrepro.verify.grade import Verdict, grade

GSM8K = (
    Path(__file__).resolve().parents[1] / ".." / "shared" / "benchmarks" / "gsm8k" / "test.jsonl"
)


def one_step(n: int) -> list[tuple[str, str]]:
    rng, items = random.Random(1), []
    for i in range(n):
        name, item = rng.choice(NAMES), rng.choice(ITEMS)
        if i % 2 == 0:
            a, b = rng.randint(2, 9), rng.randint(2, 9)
            q = f"{name} has {a} {item}s and gets {b} more. How many {item}s does {name} have now?"
            items.append((q, str(a + b)))
        else:
            a = rng.randint(5, 18)
            b = rng.randint(1, a - 1)
            q = f"{name} has {a} {item}s and gives away {b}. How many {item}s are left?"
            items.append((q, str(a - b)))
    return items


def main() -> None:
    model_dir, variant = sys.argv[1], sys.argv[2]
    n, budget, temperature = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    shot_q = "Mia has 4 pens, gets 3 more and gives away 2. How many pens are left?"
    shot_a = "4 + 3 = 7. 7 - 2 = 5. The answer is \\boxed{5}."
    if variant.startswith("one"):
        items = one_step(n)
        shot_q = "Mia has 6 pens and gets 3 more. How many pens does Mia have now?"
        shot_a = "6 + 3 = 9. The answer is \\boxed{9}."
    elif variant.startswith("tiny"):
        problems = generate_suite("tiny-gsm8k", seed=0, n_train=0, n_test=n)["test"]
        items = [(p.problem, p.answer) for p in problems]
    else:
        rows = sorted(read_jsonl(GSM8K), key=lambda r: len(r["problem"]))[:n]
        items = [(r["problem"], r["answer"]) for r in rows]

    def render(q: str) -> str:
        if variant.endswith("1shot"):
            turns = [
                {"role": "user", "content": f"{shot_q}\n{MATH_INSTRUCTION}"},
                {"role": "assistant", "content": shot_a},
                {"role": "user", "content": f"{q}\n{MATH_INSTRUCTION}"},
            ]
        elif variant.endswith("inline"):
            text = f"Example:\nQuestion: {shot_q}\nAnswer: {shot_a}\n\nQuestion: {q}\n"
            turns = [{"role": "user", "content": text + MATH_INSTRUCTION}]
        else:
            turns = [{"role": "user", "content": f"{q}\n{MATH_INSTRUCTION}"}]
        return tok.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)

    start = time.time()
    params = SamplingParams(4, temperature, 1.0, budget)
    out = hf_generate(model, tok, [render(q) for q, _ in items], params, seed=0, batch_size=64)
    seconds = time.time() - start
    per, lengths, finished = [], [], 0
    for (_, answer), group in zip(items, out, strict=True):
        per.append(sum(grade(c.text, answer, kind="math") == Verdict.CORRECT for c in group) / 4)
        lengths += [len(c.token_ids) for c in group]
        finished += sum(c.finished for c in group)
    print(
        variant, n, budget, temperature, f"pass@1={sum(per) / len(per):.3f}",
        f"solved-any={sum(x > 0 for x in per)}",
        f"meanlen={sum(lengths) / len(lengths):.1f} finished={finished}/{len(lengths)} {seconds:.0f}s",
    )  # fmt: skip
    for (q, answer), group in list(zip(items, out, strict=True))[:10]:
        print("Q:", q, "| gold", answer)
        print("   ", [c.text[:90] for c in group[:2]])


if __name__ == "__main__":
    main()
