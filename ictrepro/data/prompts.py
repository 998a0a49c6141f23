"""Prompt templates shared by the tiny and the paper scale.

A problem becomes a user message: the question, the lettered options for multiple choice,
and an instruction saying where the final answer goes (``\\boxed{}``, which the verifier
reads). The message is wrapped with the tokenizer's chat template when it has one (Qwen2.5
instruct models and the project's own tiny tokenizer), or in a plain ``Question/Answer``
frame for base models without one.

A problem may carry a worked example (``meta["example"]``: ``problem`` and ``solution``;
the ``word-arithmetic`` task's one-shot). It comes first: as an earlier user turn and the
assistant's answer in a chat, or as an earlier ``Question/Answer`` pair in the base frame.
"""

from __future__ import annotations

from typing import Literal

from transformers import PreTrainedTokenizerBase

from ictrepro.data.records import Problem
from ictrepro.data.suites import fork_gold
from ictrepro.errors import ConfigError, DataError

MATH_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
CHOICE_INSTRUCTION = (
    "Please reason step by step, and put the letter of the correct option within \\boxed{}."
)
LETTERS = "ABCD"

PromptStyle = Literal["auto", "chat", "base"]


def answer_kind(problem: Problem) -> str:
    """``"choice"`` for multiple choice (graded by letter), ``"worked"`` for a problem whose
    answer counts only with its work (the fork world's), else ``"math"`` (math-verify)."""
    return gold_of(problem)[1]


def gold_of(problem: Problem) -> tuple[str, str]:
    """``(gold, kind)``: what :func:`ictrepro.verify.grade.grade` grades a response to
    ``problem`` against (the answer, or for ``worked`` the answer and its lines of work)."""
    if problem.choices is not None:
        return problem.answer, "choice"
    worked = fork_gold(problem)
    return (problem.answer, "math") if worked is None else (worked, "worked")


def user_message(problem: Problem) -> str:
    """The question, the options (``A. ...``) if any, and the answer-format instruction."""
    if problem.choices is None:
        return f"{problem.problem}\n{MATH_INSTRUCTION}"
    if len(problem.choices) > len(LETTERS):
        raise DataError(f"problem {problem.id!r}: at most {len(LETTERS)} choices are supported")
    options = "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(problem.choices))
    return f"{problem.problem}\n{options}\n{CHOICE_INSTRUCTION}"


def render_prompt(
    problem: Problem, tokenizer: PreTrainedTokenizerBase, *, style: PromptStyle = "auto"
) -> str:
    """The text a model is asked to continue for ``problem``.

    ``style="auto"`` uses the chat template when the tokenizer has one, else the base frame.
    A problem's ``meta.response_prefix`` comes last, as the start of the response.
    """
    if style not in ("auto", "chat", "base"):
        raise ConfigError(f"unknown prompt style {style!r}; valid: auto, chat, base")
    message = user_message(problem)
    example = worked_example(problem)
    prefix = response_prefix(problem)
    if uses_chat(tokenizer, style):
        if not getattr(tokenizer, "chat_template", None):
            raise ConfigError(
                "prompt style 'chat' needs a tokenizer with a chat template; use 'auto' or 'base'"
            )
        turns = [{"role": "user", "content": message}]
        if example is not None:
            question, solution = example
            turns[:0] = [
                {"role": "user", "content": question},
                {"role": "assistant", "content": solution},
            ]
        opened = tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
        return opened + prefix
    shot = "" if example is None else f"Question: {example[0]}\nAnswer: {example[1]}\n"
    return f"{shot}Question: {message}\nAnswer: {prefix}"


def response_prefix(problem: Problem) -> str:
    """The text ``problem``'s responses open with, written into its prompt (``""`` if none):
    every response of a group then continues the same context."""
    prefix = problem.meta.get("response_prefix", "")
    if not isinstance(prefix, str):
        raise DataError(
            f"problem {problem.id!r}: meta.response_prefix must be a string, got {prefix!r}"
        )
    return prefix


def worked_example(problem: Problem) -> tuple[str, str] | None:
    """(the example's user message, its solution) when ``problem`` carries one, else None.
    The example's question gets the same instruction as the problem's own."""
    example = problem.meta.get("example")
    if example is None:
        return None
    if not isinstance(example, dict) or not {"problem", "solution"} <= set(example):
        raise DataError(
            f"problem {problem.id!r}: meta.example must hold 'problem' and 'solution', "
            f"got {example!r}"
        )
    shot = Problem(id=f"{problem.id}/example", problem=example["problem"], answer="")
    return user_message(shot), example["solution"]


def uses_chat(tokenizer: PreTrainedTokenizerBase, style: PromptStyle = "auto") -> bool:
    return style == "chat" or (style == "auto" and bool(getattr(tokenizer, "chat_template", None)))


def stop_strings(
    tokenizer: PreTrainedTokenizerBase, *, style: PromptStyle = "auto"
) -> tuple[str, ...]:
    """Strings that end a response besides EOS: a base model answering in the plain
    ``Question/Answer`` frame tends to go on with the next question."""
    return () if uses_chat(tokenizer, style) else ("\nQuestion:",)


def response_suffix(tokenizer: PreTrainedTokenizerBase) -> str:
    """What ends a model's response in training text: the EOS token (``<|im_end|>``)."""
    if tokenizer.eos_token is None:
        raise ConfigError("the tokenizer has no EOS token; set one so responses can end")
    return tokenizer.eos_token
