"""How often a fork-world policy samples a token STAPO could silence (probability under tau_p).

    python studies/fork/rare_tokens.py MODEL_DIR [MODEL_DIR ...] [--preset tiny-fork] [--problems 48] [--samples 16]

STAPO silences the tokens of rewarded responses whose probability is under ``tau_p``
(0.002) and whose entropy is low; with none in a batch, its mask is GRPO's. This samples
``--samples`` responses to each of ``--problems`` RL prompts of ``--preset``'s world from
each model (temperature 1, the preset's budget, as RL does), grades them with the world's
verifier, and counts the sampled tokens under ``tau_p``: in all responses and in the
correct ones. Prints only.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from fork_js_alignment import sample_responses  # studies/fork/ is the script's own folder
from transformers import AutoModelForCausalLM, AutoTokenizer

from ictrepro.data.prompts import gold_of, render_prompt
from ictrepro.data.suites import generate_suite
from ictrepro.presets import get_preset
from ictrepro.verify import grade


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", type=Path, nargs="+")
    parser.add_argument("--preset", default="tiny-fork", help="A fork-world preset.")
    parser.add_argument("--problems", type=int, default=48)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--tau-p", type=float, default=0.002)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    preset = get_preset(args.preset)
    budget = preset.train.rl.max_new_tokens
    rl_suite = preset.prepare.data.rl_suite
    problems = generate_suite(rl_suite, seed=7, n_train=args.problems, n_test=0)["train"]
    print(f"| model | sampled tokens | under tau_p = {args.tau_p} | of them in correct responses "
          "| correct responses |")  # fmt: skip
    print("|---|---|---|---|---|")
    for path in args.models:
        torch.manual_seed(args.seed)
        model = AutoModelForCausalLM.from_pretrained(path).eval()
        tokenizer = AutoTokenizer.from_pretrained(path)
        tokens = rare = rare_correct = correct = responses = 0
        for problem in problems:
            gold, kind = gold_of(problem)
            prompt = render_prompt(problem, tokenizer)
            for r in sample_responses(model, tokenizer, prompt, args.samples, budget):
                ids = torch.tensor(r["ids"])
                prob = torch.softmax(r["logits"], dim=-1).gather(-1, ids[:, None]).squeeze(-1)
                under = int((prob < args.tau_p).sum())
                ok = grade(tokenizer.decode(r["ids"], skip_special_tokens=True), gold, kind=kind)
                tokens, rare, responses = tokens + len(ids), rare + under, responses + 1
                if ok.is_correct:
                    correct, rare_correct = correct + 1, rare_correct + under
        print(f"| {path} | {tokens} | {rare} ({100 * rare / tokens:.3f}%) | {rare_correct} "
              f"| {correct} of {responses} |")  # fmt: skip


if __name__ == "__main__":
    main()
