"""The locally trained tokenizer: exact round trips, special tokens, chat template."""

from __future__ import annotations

import pytest

from ictrepro.data.prompts import render_prompt, user_message
from ictrepro.models.tokenizer import train_tokenizer
from ictrepro.presets import prepare_preset
from ictrepro.stages.prepare import build_data, tokenizer_corpus


@pytest.fixture(scope="module")
def world():
    data = build_data(prepare_preset("tiny"))
    problems = [p for v in data.values() for p in v]
    tokenizer = train_tokenizer(tokenizer_corpus(data["sft"] + data["rl_train"]), vocab_size=1024)
    return problems, tokenizer


def test_round_trips_every_problem_solution_and_answer(world):
    problems, tok = world
    for p in problems:
        for text in (p.problem, p.solution, p.answer, user_message(p), render_prompt(p, tok)):
            ids = tok(text, add_special_tokens=False)["input_ids"]
            assert tok.decode(ids) == text


def test_round_trips_text_never_seen_in_training(world):
    _, tok = world
    text = "Ünïcødé ∑ 1,000,000 — 東京 \\dfrac{a}{b}\n\t end"
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text


def test_digits_are_single_tokens(world):
    _, tok = world
    assert tok.tokenize("12345") == ["1", "2", "3", "4", "5"]


def test_special_tokens_and_template(world):
    _, tok = world
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert tok.eos_token_id != tok.pad_token_id
    assert 300 < len(tok) <= 1024  # the corpus may run out of merges before the cap
    text = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.convert_tokens_to_ids("<|im_start|>") in ids and tok.eos_token_id in ids


def test_training_is_deterministic_and_rejects_a_tiny_vocabulary():
    texts = ["Ana has 3 apples.", "The answer is \\boxed{3}."] * 20
    a, b = train_tokenizer(texts, vocab_size=300), train_tokenizer(texts, vocab_size=300)
    assert a.get_vocab() == b.get_vocab()
    with pytest.raises(ValueError, match="vocab_size must be at least 259"):
        train_tokenizer(texts, vocab_size=100)
