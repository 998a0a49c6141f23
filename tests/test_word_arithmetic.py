"""The ``word-arithmetic`` task of ``smollm2-135m-learn``: its generator, its one-shot prompt
in both frames, and how ``prepare`` of a pretrained preset takes it in (fast: no model)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from ictrepro.data.prompts import MATH_INSTRUCTION, render_prompt, worked_example
from ictrepro.data.records import Problem
from ictrepro.data.word_arithmetic import EXAMPLE, TASK, generate_task
from ictrepro.errors import ConfigError, DataError
from ictrepro.presets import get_preset, prepare_preset
from ictrepro.stages.prepare_pretrained import (
    benchmark_settings,
    deviations,
    load_eval_data,
    load_training_data,
)


class ChatTokenizer:
    """The one method ``render_prompt`` calls, in ChatML (what SmolLM2's template writes,
    without its default system message)."""

    chat_template = "chatml"

    def apply_chat_template(self, turns, *, tokenize, add_generation_prompt):
        text = "".join(f"<|im_start|>{t['role']}\n{t['content']}<|im_end|>\n" for t in turns)
        return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


class PlainTokenizer:
    chat_template = None


def test_splits_are_deterministic_disjoint_and_correct():
    a = generate_task(seed=0, n_train=200, n_test=40)
    assert a == generate_task(seed=0, n_train=200, n_test=40)
    assert a != generate_task(seed=1, n_train=200, n_test=40)
    train, test = {p.problem for p in a["train"]}, {p.problem for p in a["test"]}
    assert len(train) == 200 and len(test) == 40 and not train & test
    assert EXAMPLE["problem"] not in train | test
    for split in ("train", "test"):
        for i, p in enumerate(a[split]):
            assert p.id == f"{TASK}-{split}-{i:05d}"
            assert p.meta["example"] == EXAMPLE
            # Additions and subtractions alternate; the worked solution's sum is the answer.
            x, op, y, z = re.match(r"(\d+) ([+-]) (\d+) = (\d+)\.", p.solution).groups()
            assert op == ("+" if i % 2 == 0 else "-")
            assert int(z) == (int(x) + int(y) if op == "+" else int(x) - int(y)) == int(p.answer)
            assert p.solution.endswith(f"\\boxed{{{p.answer}}}.")
            assert f" {x} " in p.problem and f" {y}" in p.problem


def test_the_example_is_an_earlier_turn_of_the_chat():
    problem = generate_task(seed=0, n_train=0, n_test=2)["test"][0]
    prompt = render_prompt(problem, ChatTokenizer())
    assert prompt == (
        f"<|im_start|>user\n{EXAMPLE['problem']}\n{MATH_INSTRUCTION}<|im_end|>\n"
        f"<|im_start|>assistant\n{EXAMPLE['solution']}<|im_end|>\n"
        f"<|im_start|>user\n{problem.problem}\n{MATH_INSTRUCTION}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_the_example_in_the_base_frame_and_problems_without_one():
    problem = generate_task(seed=0, n_train=0, n_test=2)["test"][1]
    assert render_prompt(problem, PlainTokenizer()) == (
        f"Question: {EXAMPLE['problem']}\n{MATH_INSTRUCTION}\nAnswer: {EXAMPLE['solution']}\n"
        f"Question: {problem.problem}\n{MATH_INSTRUCTION}\nAnswer: "
    )
    bare = dataclasses.replace(problem, meta={})
    assert worked_example(bare) is None
    assert (
        render_prompt(bare, PlainTokenizer())
        == f"Question: {bare.problem}\n{MATH_INSTRUCTION}\nAnswer: "
    )


def test_a_response_prefix_comes_last_in_both_frames():
    problem = generate_task(seed=0, n_train=0, n_test=1)["test"][0]
    prefixed = dataclasses.replace(problem, meta={**problem.meta, "response_prefix": "I see."})
    for frame in (ChatTokenizer(), PlainTokenizer()):
        assert render_prompt(prefixed, frame) == render_prompt(problem, frame) + "I see."
    bad = Problem(id="p-2", problem="1 + 1?", answer="2", meta={"response_prefix": 3})
    with pytest.raises(DataError, match=r"p-2.*meta\.response_prefix must be a string"):
        render_prompt(bad, PlainTokenizer())


def test_a_malformed_example_is_named():
    problem = Problem(id="p-1", problem="1 + 1?", answer="2", meta={"example": {"problem": "x"}})
    with pytest.raises(DataError, match=r"p-1.*meta\.example"):
        render_prompt(problem, PlainTokenizer())


def test_prepare_takes_the_task_in(tmp_path):
    config = dataclasses.replace(
        prepare_preset("smollm2-135m-learn", data_dir=tmp_path), task_train=10, task_test=4
    )
    train = load_training_data(config)
    assert list(train) == [TASK] and len(train[TASK]) == 10
    # The task is evaluated first; the real subsets need files (not here), so leave them out.
    tests = load_eval_data(
        dataclasses.replace(config, benchmarks=("gsm8k",), skip_benchmarks=("gsm8k",))
    )
    assert list(tests) == [TASK] and len(tests[TASK]) == 4
    settings = benchmark_settings(config, TASK)
    assert settings["sampling"] == dataclasses.asdict(config.task_sampling)
    assert settings["ks"] == list(config.eval_ks)
    assert any(TASK in note for note in deviations(config))


def test_the_preset_and_its_checks():
    preset = get_preset("smollm2-135m-learn")
    assert preset.eval.benchmarks[0] == TASK and preset.methods == ("grpo", "ict")
    # The training decoding is the evaluation's, so the probe measures what eval reports.
    assert preset.train.rl.temperature == preset.prepare.task_sampling.temperature
    assert preset.train.rl.max_new_tokens == preset.prepare.task_sampling.max_new_tokens
    with pytest.raises(ConfigError, match="unknown task"):
        dataclasses.replace(preset.prepare, task="nope").check()
    with pytest.raises(ConfigError, match="task_test >= 2"):
        dataclasses.replace(preset.prepare, task_test=1).check()
    # Without a task the record is what it was before tasks existed (the run's identity).
    assert "task" not in get_preset("smollm2-135m").prepare.to_json()
