"""Test-wide settings (never reach the Hugging Face hub; deterministic torch) and the shared
fixtures: the prepared tiny-smoke world, fake verifiers, a scripted policy with known
per-problem counts, and :func:`flat`. Test files import the helpers with
``from conftest import ...`` (pytest puts ``tests/`` on the path)."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def flat(output: str) -> str:
    """Command output on one line (rich wraps long messages)."""
    return " ".join(output.split())


# ---------------------------------------------------------------------------- verifiers


class AlternatingVerifier:
    """Every other response correct: a learning signal in every training step."""

    def grade_many(self, requests):
        from ictrepro.verify import Verdict

        return [Verdict.CORRECT if i % 2 == 0 else Verdict.WRONG for i in range(len(requests))]

    def close(self):
        pass


# ------------------------------------------------------------------------- the world


@pytest.fixture(scope="session")
def smoke_world(tmp_path_factory) -> Path:
    """A `tiny-smoke` run directory after `prepare` (seed 0), made once per session. Read
    only: copy it (:func:`copy_world`) before writing into it."""
    from ictrepro.presets import prepare_preset
    from ictrepro.stages.prepare import prepare

    run_dir = tmp_path_factory.mktemp("world") / "run"
    prepare(prepare_preset("tiny-smoke", seed=0), run_dir, show_progress=False)
    return run_dir


def copy_world(world: Path, target: Path, *, only_prepared: bool = False) -> Path:
    """A private copy of a run directory (``only_prepared``: as it was after `prepare`)."""
    ignore = shutil.ignore_patterns("train", "eval", "report", "logs") if only_prepared else None
    shutil.copytree(world, target, ignore=ignore)
    return target


# ----------------------------------------------------------------- a scripted policy


@dataclass(frozen=True)
class ScriptedCompletion:
    """What the evaluation reads of a sampled response."""

    text: str
    finished: bool = True


def scripted_correct(index: int, trained: bool) -> int:
    """How many of 4 samples of problem ``index`` the scripted policy answers correctly:
    0..4 cycling, shifted by 2 for a trained model so the two models' counts differ."""
    return (index + (2 if trained else 0)) % 5


def scripted_response(problem, correct: bool) -> str:
    """A response the verifier grades ``correct`` (the gold answer boxed) or ``no_answer``."""
    return f"So the answer is \\boxed{{{problem.answer}}}." if correct else "I am not sure."


class ScriptedSampler:
    """Stands in for a model: sample j of the i-th problem of a benchmark is correct when
    ``j < scripted_correct(i, trained)``; ``trained`` when the model is a run's final model."""

    def __init__(self, problems_by_text, trained: bool):
        self.problems_by_text, self.trained = problems_by_text, trained

    def _problem(self, prompt):
        matches = [p for text, p in self.problems_by_text.items() if text in prompt]
        assert len(matches) == 1, f"no unique problem in prompt {prompt[:80]!r}"
        return matches[0]

    def sample(self, prompts, params, *, seed, index_offset=0, stop=()):
        out = []
        for prompt in prompts:
            problem, index = self._problem(prompt)
            correct = scripted_correct(index, self.trained)
            out.append(
                [
                    ScriptedCompletion(scripted_response(problem, j < correct))
                    for j in range(params.n)
                ]
            )
        return out

    def update_weights(self, model):
        pass

    def close(self):
        pass


#: The modules whose samplers the scripted policy replaces.
EVALUATORS = ("ictrepro.stages.eval", "ictrepro.stages.sample")


def script_policy(monkeypatch):
    """Make every sampler of `eval` and `sample` (:data:`EVALUATORS`) a
    :class:`ScriptedSampler` over the tiny suites of the run directory being evaluated
    (training keeps its real sampler); returns
    ``expected(run_dir, suite, trained) -> [n_correct per problem]``."""
    from ictrepro.data.suites import EVAL_SUITES, load_test_split
    from ictrepro.rollout import sampler as sampler_module
    from ictrepro.rundir import RunDir

    def problems_by_text(run_dir):
        table = {}
        for suite in EVAL_SUITES:
            if RunDir(run_dir).test_suite(suite).is_file():
                for i, p in enumerate(load_test_split(run_dir, suite)):
                    table[p.problem] = (p, i)
        return table

    real_make_sampler = sampler_module.make_sampler

    def fake_make_sampler(name, model, tokenizer, *, batch_size, model_path=None, **engine):
        if sys._getframe(1).f_globals["__name__"] not in EVALUATORS:  # training: the real one
            return real_make_sampler(
                name, model, tokenizer, batch_size=batch_size, model_path=model_path, **engine
            )
        path = Path(model_path)
        trained = path.name == "final_model"
        run_dir = path.parents[2] if trained else path.parent
        return ScriptedSampler(problems_by_text(run_dir), trained)

    monkeypatch.setattr(sampler_module, "make_sampler", fake_make_sampler)

    def expected(run_dir, suite, trained):
        return [scripted_correct(i, trained) for i in range(len(load_test_split(run_dir, suite)))]

    return expected


@pytest.fixture
def scripted_policy(monkeypatch):
    """:func:`script_policy` for one test."""
    return script_policy(monkeypatch)


@pytest.fixture
def restore_registry():
    """Put the selection registry back as it was: rules a test loads from files must not
    leak into other tests' lists of methods."""
    from ictrepro.algos import selection

    rules, loaded = dict(selection._REGISTRY), dict(selection._LOADED_MODULES)
    yield
    selection._REGISTRY.clear()
    selection._REGISTRY.update(rules)
    selection._LOADED_MODULES.clear()
    selection._LOADED_MODULES.update(loaded)
