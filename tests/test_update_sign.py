"""The sign of learning in isolation: one GRPO update on a hand-built group raises the
log-probability of the rewarded response and lowers the unrewarded one's, whatever the
method's mask (only the selected tokens get a gradient, so those are the ones measured)."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from ictrepro.algos.losses import group_advantages, grpo_loss
from ictrepro.algos.selection import SelectionInputs, get_selection
from ictrepro.rollout.base import Completion
from ictrepro.train.batch import build_batch
from ictrepro.train.grpo import policy_logprobs, rollout_statistics

METHODS = ("grpo", "entropy", "stapo", "ict", "random")


def tiny_model() -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=16,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=32,
        tie_word_embeddings=True,
    )
    return Qwen2ForCausalLM(config).float()


def hand_built_batch():
    """One prompt, two responses of 8 tokens with no token in common; the first is rewarded."""
    responses = [[2, 3, 4, 5, 2, 3, 4, 5], [9, 10, 11, 12, 9, 10, 11, 12]]
    completions = [[Completion(text="", token_ids=r, finished=True) for r in responses]]
    return build_batch([[1, 7, 8]], completions, [1.0, 0.0], 0, torch.device("cpu"))


@pytest.mark.parametrize("method", METHODS)
def test_one_update_raises_the_rewarded_response_and_lowers_the_other(method):
    model, batch = tiny_model(), hand_built_batch()
    advantages = group_advantages(batch.rewards, batch.group_ids)
    stats = rollout_statistics(model, batch, temperature=1.0, with_js=True)
    rule = get_selection(method)
    inputs = SelectionInputs(
        response_mask=batch.response_mask,
        advantages=advantages,
        logprob=stats.logprob,
        entropy=stats.entropy,
        js=stats.js,
        step=1000,  # after any warm-up: the rule's own sparse mask
        generator=torch.Generator().manual_seed(0),
    )
    mask = rule(inputs, **rule.defaults)
    # Both responses have selected tokens, so both measured changes below mean something.
    assert mask.any(dim=1).all(), mask

    def masked_logprob() -> torch.Tensor:
        with torch.no_grad():
            lp = policy_logprobs(model, batch, temperature=1.0)
        return (lp * mask).sum(dim=1)  # [2], float32

    before = masked_logprob()
    model.train()
    logprob = policy_logprobs(model, batch, temperature=1.0)
    loss, _ = grpo_loss(logprob, stats.logprob, advantages, mask, batch.response_mask, kl_coef=0.0)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.05 * p.grad  # plain SGD: the step is along the gradient, nothing else
    after = masked_logprob()
    change = after - before
    assert change[0] > 0, f"{method}: rewarded response's log-prob fell by {-change[0]:.3g}"
    assert change[1] < 0, f"{method}: unrewarded response's log-prob rose by {change[1]:.3g}"
