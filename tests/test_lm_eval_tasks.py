"""The lm-eval tasks in `tasks/` and the bridge `ictrepro.evaluate.lm_eval_bridge`: the YAML
files load and declare the documented settings, lm-eval grades every sample with the
project's verifier, and its pass@k equals the project's own scorer on the same samples."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from transformers import AutoTokenizer

from ictrepro.data.prompts import render_prompt
from ictrepro.data.records import Problem
from ictrepro.data.suites import EVAL_SUITES
from ictrepro.errors import ConfigError
from ictrepro.evaluate.lm_eval_bridge import (
    FILTER,
    TASKS_DIR,
    doc_to_problem,
    problem_to_doc,
    read_logged_samples,
    response_records,
    run_lm_eval,
)
from ictrepro.evaluate.passk import pass_at_k
from ictrepro.evaluate.score import grade_responses, score_verdicts
from ictrepro.io import read_jsonl
from ictrepro.presets import TINY_EVAL, prepare_preset
from ictrepro.stages.prepare import prepare
from ictrepro.verify import Verifier

TINY = {"ictrepro_" + s.replace("-", "_"): s for s in EVAL_SUITES}
PAPER = {
    "ictrepro_math500": ("math500", 4),
    "ictrepro_gsm8k": ("gsm8k", 4),
    "ictrepro_mmlu_stem": ("mmlu_stem", 4),
    "ictrepro_gpqa_diamond": ("gpqa_diamond", 4),
    "ictrepro_aime23": ("aime23", 16),
    "ictrepro_aime24": ("aime24", 16),
    "ictrepro_aime25": ("aime25", 16),
}
GROUPS = {"ictrepro_tiny": list(TINY), "ictrepro_paper": list(PAPER)}


def load_task_utils():
    """`tasks/utils.py`, imported by its path as lm-eval does."""
    spec = importlib.util.spec_from_file_location(
        "ictrepro_lm_eval_task_utils", TASKS_DIR / "utils.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


task_utils = load_task_utils()


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("lm_eval") / "run"
    prepare(prepare_preset("tiny-smoke", seed=1), run_dir, show_progress=False)
    return run_dir


class ScriptedLM:
    """An lm-eval LM that answers from the gold: sample j of problem i (in request order) is
    correct when ``(i + j) % 3 == 0``, so pass@k is neither 0 nor 1. It applies the chat
    template of a real tokenizer, as HFLM does."""

    def __new__(cls, tokenizer):
        from lm_eval.api.model import LM

        class _LM(LM):
            def __init__(self) -> None:
                super().__init__()
                self.tokenizer = tokenizer
                self.seen: dict[tuple[str, int], int] = {}

            @property
            def tokenizer_name(self) -> str:
                return "scripted"

            def apply_chat_template(self, chat_history, add_generation_prompt=True):
                return self.tokenizer.apply_chat_template(
                    chat_history, tokenize=False, add_generation_prompt=add_generation_prompt
                )

            def generate_until(self, requests, disable_tqdm: bool = False):
                out = []
                for req in requests:
                    key = (req.task_name, req.doc_id)
                    j = self.seen.get(key, 0)
                    self.seen[key] = j + 1
                    gold = req.doc["answer"]
                    right = (req.doc_id + j) % 3 == 0
                    out.append(f"so \\boxed{{{gold}}}" if right else "so \\boxed{-12345}")
                return out

            def loglikelihood(self, requests):
                raise NotImplementedError

            def loglikelihood_rolling(self, requests):
                raise NotImplementedError

        return _LM()


def own_score(result, ks=(1, 4)):
    with Verifier(workers=0) as verifier:
        verdicts = grade_responses(result.problem_list(), result.responses(), verifier)
    return score_verdicts(verdicts, ks)


# ------------------------------------------------------------------------------ YAML files


def test_every_yaml_parses_and_lm_eval_indexes_every_task_and_group():
    from lm_eval.tasks import TaskManager
    from lm_eval.tasks._yaml_loader import load_yaml

    files = sorted(TASKS_DIR.glob("*.yaml"))
    names = set()
    for path in files:
        cfg = load_yaml(path, resolve_func=True)  # resolves every !function utils.*
        names.add(
            cfg.get("task") if "task" in cfg and isinstance(cfg["task"], str) else cfg["group"]
        )
    assert names == set(TINY) | set(PAPER) | set(GROUPS)
    manager = TaskManager(include_path=str(TASKS_DIR), include_defaults=False)
    assert set(manager.all_subtasks) == set(TINY) | set(PAPER)
    assert set(manager.all_groups) == set(GROUPS)
    for group, members in GROUPS.items():
        assert (
            yaml.load((TASKS_DIR / f"{group}.yaml").read_text(), Loader=yaml.BaseLoader)["task"]
            == members
        )


@pytest.mark.parametrize("task", sorted(set(TINY) | set(PAPER)))
def test_task_declares_sampling_filter_and_metrics(task):
    from lm_eval.tasks._yaml_loader import load_yaml

    cfg = load_yaml(TASKS_DIR / f"{task}.yaml", resolve_func=True)
    tiny = TINY_EVAL.sampling
    n, max_tokens = (tiny.n, tiny.max_new_tokens) if task in TINY else (PAPER[task][1], 1024)
    assert cfg["task"] == task
    assert cfg["output_type"] == "generate_until" and cfg["num_fewshot"] == 0
    assert cfg["repeats"] == n
    assert cfg["generation_kwargs"] == {
        "do_sample": True,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": 0,
        "max_gen_toks": max_tokens,
        "until": ["<|im_end|>", "<|endoftext|>"],
    }
    [keep] = cfg["filter_list"]
    assert keep["name"] == FILTER
    assert keep["filter"] == [
        {"function": "custom", "filter_fn": task_utils_fn(cfg, "keep_all_samples")}
    ]
    # The paper's tasks at 16 samples also report pass@16; the tiny ones the preset's ks.
    pass16 = task in PAPER and n == 16
    ks = list(TINY_EVAL.ks) if task in TINY else [1, 4, 16] if pass16 else [1, 4]
    assert [m["metric"] for m in cfg["metric_list"]] == [f"pass@{k}" for k in ks]
    assert cfg["process_results"].__name__ == (
        "process_results_pass16" if pass16 else "process_results"
    )
    assert cfg["doc_to_text"].__name__ == "doc_to_text"
    if task in TINY:
        assert cfg["custom_dataset"].__name__ == "load_tiny"
        assert cfg["dataset_kwargs"] == {"ictrepro_suite": TINY[task]}
    else:
        assert cfg["custom_dataset"].__name__ == "load_paper"
        assert cfg["dataset_kwargs"] == {"ictrepro_benchmark": PAPER[task][0]}


def task_utils_fn(cfg, name):
    """The function object lm-eval resolved for ``utils.<name>`` in ``cfg``'s module."""
    return getattr(sys.modules[cfg["process_results"].__module__], name)


def test_settings_agree_with_the_benchmark_registry_and_the_tiny_calibration():
    from lm_eval.tasks._yaml_loader import load_yaml

    from ictrepro.data.benchmarks import BENCHMARKS, PAPER_BENCHMARKS

    assert sorted(name for name, _ in PAPER.values()) == sorted(PAPER_BENCHMARKS)
    tiny = prepare_preset("tiny").calibration.sampling
    for task in [*TINY, *PAPER]:
        cfg = load_yaml(TASKS_DIR / f"{task}.yaml", resolve_func=False)
        gen = cfg["generation_kwargs"]
        ks = [int(m["metric"].removeprefix("pass@")) for m in cfg["metric_list"]]
        if task in TINY:
            want = (tiny.n, [1, 4], tiny.temperature, tiny.top_p, tiny.max_new_tokens)
        else:
            spec = BENCHMARKS[PAPER[task][0]]
            want = (spec.n, list(spec.ks), spec.temperature, spec.top_p, spec.max_new_tokens)
        got = (cfg["repeats"], ks, gen["temperature"], gen["top_p"], gen["max_gen_toks"])
        assert got == want, task


# ---------------------------------------------------------------------- scoring functions


def test_process_results_on_hand_made_samples():
    doc = problem_to_doc(Problem(id="p", problem="6*7?", answer="42"))
    right, wrong = "It is \\boxed{42}.", "It is \\boxed{41}."
    metrics = task_utils.process_results(doc, [[right, wrong, right, "no answer"]])
    assert metrics == {"pass@1": 0.5, "pass@4": 1.0}
    assert task_utils.process_results(doc, [[wrong] * 4]) == {"pass@1": 0.0, "pass@4": 0.0}
    # value equality: \frac{84}{2} is 42
    assert task_utils.process_results(doc, [["\\boxed{\\frac{84}{2}}"] + [wrong] * 3])[
        "pass@1"
    ] == pytest.approx(0.25)
    choice = problem_to_doc(
        Problem(id="c", problem="Pick", answer="B", choices=("1", "2", "3", "4"))
    )
    metrics = task_utils.process_results(choice, [["\\boxed{B}", "\\boxed{A}"] * 8])
    assert metrics["pass@1"] == pytest.approx(0.5)
    assert metrics["pass@4"] == pytest.approx(pass_at_k(16, 8, 4))
    aime = task_utils.process_results_pass16(doc, [[right] * 2 + [wrong] * 14])
    assert aime == {"pass@1": 0.125, "pass@4": pass_at_k(16, 2, 4), "pass@16": 1.0}


def test_ungradable_gold_and_too_few_samples_are_left_out_of_the_mean():
    bad = problem_to_doc(Problem(id="c", problem="Pick", answer="Z", choices=("1", "2")))
    metrics = task_utils.process_results(bad, [["\\boxed{A}"] * 4])
    assert all(math.isnan(v) for v in metrics.values())
    assert task_utils.mean_gradable([1.0, math.nan, 0.0]) == 0.5
    assert math.isnan(task_utils.mean_gradable([math.nan]))
    doc = problem_to_doc(Problem(id="p", problem="?", answer="3"))
    # lm-eval's default take_first filter would hand over a single string per problem
    one = task_utils.process_results(doc, ["\\boxed{3}"])
    assert one["pass@1"] == 1.0 and math.isnan(one["pass@4"])


def test_documents_round_trip_and_text_is_the_user_message():
    from ictrepro.data.prompts import user_message

    problem = Problem(
        id="x", problem="Q", answer="C", choices=("a", "b", "c", "d"), meta={"k": [1, {"z": 2}]}
    )
    doc = problem_to_doc(problem)
    assert doc_to_problem(doc) == problem
    assert task_utils.doc_to_text(doc) == user_message(problem)


def test_run_directory_is_found_from_metadata_env_or_model_path(smoke_run, tmp_path, monkeypatch):
    monkeypatch.delenv(task_utils.RUN_DIR_ENV, raising=False)
    suite = "tiny-gpqa"
    assert task_utils.resolve_run_dir(suite, run_dir=str(smoke_run)) == smoke_run
    assert task_utils.resolve_run_dir(suite, pretrained=str(smoke_run / "base_model")) == (
        smoke_run.resolve()
    )
    with pytest.raises(FileNotFoundError, match=r"no run directory.*--metadata"):
        task_utils.resolve_run_dir(suite, pretrained=str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"metadata run_dir=.*has no"):
        task_utils.resolve_run_dir(suite, run_dir=str(tmp_path))
    monkeypatch.setenv(task_utils.RUN_DIR_ENV, str(smoke_run))
    assert task_utils.resolve_run_dir(suite, pretrained=str(tmp_path)) == smoke_run
    dataset = task_utils.load_tiny(suite, pretrained="unused", version=1.0)
    ids = [r["id"] for r in read_jsonl(smoke_run / "data" / "test" / f"{suite}.jsonl")]
    assert dataset["test"]["id"] == ids


# ------------------------------------------------------------------------ lm-eval end to end


def test_tiny_task_end_to_end_with_hf_model(smoke_run):
    """The real HF model of a run directory, through lm-eval's HFLM: the prompt equals
    render_prompt (text and token ids), n samples per problem, and lm-eval's pass@k equals the
    project's own scorer on the logged samples."""
    model_dir = smoke_run / "base_model"
    results = run_lm_eval(model_dir, ["ictrepro_tiny_gsm8k"], limit=4, device="cpu", seed=3)
    [(task, result)] = results.items()
    assert task == "ictrepro_tiny_gsm8k" and result.n_samples == TINY_EVAL.sampling.n
    assert result.generation_kwargs["max_gen_toks"] == 96
    problems = [
        Problem.from_json(r) for r in read_jsonl(smoke_run / "data" / "test" / "tiny-gsm8k.jsonl")
    ][:4]
    assert result.problem_list() == problems
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    for sample, problem in zip(result.problems, problems, strict=True):
        assert len(sample.responses) == TINY_EVAL.sampling.n
        assert sample.prompt == render_prompt(problem, tokenizer)
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(model_dir), device="cpu", batch_size=1)
    for sample, problem in zip(result.problems, problems, strict=True):
        ids, _ = lm.tok_batch_encode([sample.prompt])
        own = tokenizer(render_prompt(problem, tokenizer), add_special_tokens=False)["input_ids"]
        assert ids[0].tolist() == own
    score = own_score(result)
    assert result.pass_at == score.pass_at
    # each of the n repeats is its own sample; the seed makes the run reproducible
    assert any(len(set(p.responses)) > 1 for p in result.problems)
    again = run_lm_eval(model_dir, "ictrepro_tiny_gsm8k", limit=4, device="cpu", seed=3)
    assert again["ictrepro_tiny_gsm8k"].responses() == result.responses()


def test_pass_at_k_equals_the_projects_scorer_on_a_group(smoke_run, monkeypatch):
    monkeypatch.delenv(task_utils.RUN_DIR_ENV, raising=False)
    tokenizer = AutoTokenizer.from_pretrained(smoke_run / "base_model")
    results = run_lm_eval(
        None, "ictrepro_tiny", run_dir=smoke_run, limit=3, lm=ScriptedLM(tokenizer)
    )
    assert set(results) == set(TINY)
    n = TINY_EVAL.sampling.n
    for result in results.values():
        assert len(result.problems) == 3 and result.n_samples == n
        for i, sample in enumerate(result.problems):
            c = sum((i + j) % 3 == 0 for j in range(n))
            assert sample.pass_at == {1: pass_at_k(n, c, 1), 4: pass_at_k(n, c, 4)}
            assert sample.prompt == render_prompt(sample.problem, tokenizer)
        score = own_score(result)
        assert 0 < score.pass_at[1] < 1
        assert result.pass_at == score.pass_at  # exactly: same samples, same arithmetic


def test_repeats_can_be_lowered_and_pass_at_k_above_it_is_nan(smoke_run):
    tokenizer = AutoTokenizer.from_pretrained(smoke_run / "base_model")
    results = run_lm_eval(
        None,
        ["ictrepro_tiny_aime24", "ictrepro_tiny_gpqa"],
        run_dir=smoke_run,
        limit=2,
        repeats=2,
        lm=ScriptedLM(tokenizer),
    )
    for result in results.values():
        assert result.n_samples == 2
        assert [len(p.responses) for p in result.problems] == [2, 2]
        # problem 0: samples 0 right, 1 wrong; problem 1: both wrong (ScriptedLM)
        assert result.pass_at[1] == own_score(result, ks=(1,)).pass_at[1] == 0.25
        assert math.isnan(result.pass_at[4])
        assert result.to_json()["pass_at"]["4"] is None


def test_paper_task_reads_load_benchmark_from_a_data_dir(smoke_run, tmp_path, monkeypatch):
    """The AIME 2024 task takes its problems from load_benchmark("aime24", data_dir=...)
    (here a local file: no network), samples each 16 times and reports pass@1/4/16."""
    from ictrepro.data.benchmarks import load_benchmark, write_benchmark_jsonl

    monkeypatch.delenv(task_utils.DATA_DIR_ENV, raising=False)
    problems = [
        Problem(id=f"aime-2024-I-{i}", problem=f"What is {i}+1?", answer=str(i + 1))
        for i in range(3)
    ]
    write_benchmark_jsonl(problems, tmp_path / "aime24" / "test.jsonl")
    tokenizer = AutoTokenizer.from_pretrained(smoke_run / "base_model")
    results = run_lm_eval(
        None, "ictrepro_aime24", data_dir=tmp_path, limit=2, lm=ScriptedLM(tokenizer)
    )
    result = results["ictrepro_aime24"]
    assert result.problem_list() == load_benchmark("aime24", data_dir=tmp_path)[:2]
    assert result.n_samples == 16 and all(len(p.responses) == 16 for p in result.problems)
    assert result.generation_kwargs["max_gen_toks"] == 1024
    assert sorted(result.pass_at) == [1, 4, 16]
    assert result.pass_at == own_score(result, ks=(1, 4, 16)).pass_at
    # the same through $ICTREPRO_DATA_DIR
    monkeypatch.setenv(task_utils.DATA_DIR_ENV, str(tmp_path))
    again = run_lm_eval(None, "ictrepro_aime24", limit=1, lm=ScriptedLM(tokenizer))
    assert again["ictrepro_aime24"].problems[0].id == "aime-2024-I-0"


def test_paper_group_runs_every_benchmark_from_local_files(smoke_run, tmp_path):
    from ictrepro.data.benchmarks import write_benchmark_jsonl

    for name, _ in PAPER.values():
        if name in ("mmlu_stem", "gpqa_diamond"):
            problems = [
                Problem(
                    id=f"{name}-{i}", problem="Which?", answer="C", choices=("w", "x", "y", "z")
                )
                for i in range(2)
            ]
        else:
            problems = [Problem(id=f"{name}-{i}", problem="1+1?", answer="2") for i in range(2)]
        write_benchmark_jsonl(problems, tmp_path / name / "test.jsonl")
    tokenizer = AutoTokenizer.from_pretrained(smoke_run / "base_model")
    results = run_lm_eval(
        None, "ictrepro_paper", data_dir=tmp_path, limit=2, lm=ScriptedLM(tokenizer)
    )
    assert set(results) == set(PAPER)
    for task, result in results.items():
        assert result.n_samples == PAPER[task][1]
        assert result.pass_at == own_score(result, ks=sorted(result.pass_at)).pass_at


SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks"


@pytest.mark.parametrize("name", [name for name, _ in PAPER.values()])
def test_real_benchmark_documents_round_trip(name):
    """The shared real files (when present): every problem survives the lm-eval document
    schema unchanged, and the task text is its user message."""
    from ictrepro.data.benchmarks import load_benchmark, local_paths
    from ictrepro.data.prompts import user_message

    if not any(path.is_file() for path in local_paths(name, SHARED)):
        pytest.skip(f"no shared file of {name} in {SHARED}")
    problems = load_benchmark(name, data_dir=SHARED)
    docs = task_utils.load_paper(name, data_dir=str(SHARED), pretrained="x", version=1.0)["test"]
    assert [doc_to_problem(doc) for doc in docs] == problems
    assert task_utils.doc_to_text(docs[0]) == user_message(problems[0])


def test_bridge_refuses_unknown_tasks_and_a_missing_tasks_dir(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown lm-eval task.*valid: ictrepro_aime23"):
        run_lm_eval("m", "gsm8k")
    with pytest.raises(FileNotFoundError, match="pass tasks_dir"):
        run_lm_eval("m", "ictrepro_tiny", tasks_dir=tmp_path)


@pytest.mark.slow
def test_lm_eval_command_line(smoke_run, tmp_path):
    """The documented command line, as a user runs it (indexes lm-eval's own tasks: ~25 s)."""
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "lm_eval",
        "--include_path", str(TASKS_DIR),
        "--tasks", "ictrepro_tiny_math500",
        "--model", "hf",
        "--model_args", f"pretrained={smoke_run / 'base_model'}",
        "--apply_chat_template",
        "--device", "cpu", "--batch_size", "16", "--limit", "2",
        "--output_path", str(out), "--log_samples",
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "pass@1" in done.stdout and "all_samples" in done.stdout
    [samples] = out.rglob("samples_ictrepro_tiny_math500_*.jsonl")
    problems = read_logged_samples(samples)
    assert [len(p.responses) for p in problems] == [TINY_EVAL.sampling.n] * 2
    tokenizer = AutoTokenizer.from_pretrained(smoke_run / "base_model")
    assert all(p.prompt == render_prompt(p.problem, tokenizer) for p in problems)
    [results] = out.rglob("results_*.json")
    reported = json.loads(results.read_text())["results"]["ictrepro_tiny_math500"]
    with Verifier(workers=0) as verifier:
        verdicts = grade_responses(
            [p.problem for p in problems], [list(p.responses) for p in problems], verifier
        )
    assert reported[f"pass@1,{FILTER}"] == score_verdicts(verdicts, [1]).pass_at[1]
    assert len(response_records(problems)) == 2 * TINY_EVAL.sampling.n


def test_tasks_are_the_checkouts_top_level_folder():
    """From a checkout, the tasks are its top-level tasks/ (``lm_eval --include_path tasks/``);
    installed, the package ``ictrepro.tasks`` (tests/test_install.py)."""
    import ictrepro

    assert Path(ictrepro.__file__).resolve().parents[1] / "tasks" == TASKS_DIR
    assert (TASKS_DIR / "utils.py").is_file() and len(list(TASKS_DIR.glob("*.yaml"))) == 16


def test_committed_task_files_are_the_generated_ones():
    """tasks/*.yaml are written from the settings' one home; after changing a setting,
    `python -m ictrepro.evaluate.lm_eval_tasks` rewrites them."""
    from ictrepro.evaluate import lm_eval_tasks

    assert lm_eval_tasks.stale_files(TASKS_DIR) == []
    assert lm_eval_tasks.main(["--check", str(TASKS_DIR)]) == 0


def test_a_changed_setting_makes_its_task_files_stale(tmp_path, monkeypatch):
    import dataclasses

    from ictrepro.evaluate import lm_eval_tasks

    assert lm_eval_tasks.write_task_files(tmp_path) == sorted(lm_eval_tasks.task_files())
    assert lm_eval_tasks.stale_files(tmp_path) == []
    more = dataclasses.replace(lm_eval_tasks.TINY_EVAL.sampling, max_new_tokens=128)
    monkeypatch.setattr(
        lm_eval_tasks, "TINY_EVAL", dataclasses.replace(lm_eval_tasks.TINY_EVAL, sampling=more)
    )
    stale = lm_eval_tasks.stale_files(tmp_path)
    assert stale == sorted(f"{task}.yaml" for task in TINY)
    assert "max_gen_toks: 128" in lm_eval_tasks.task_files()[stale[0]]
    (tmp_path / "ictrepro_extra.yaml").write_text("task: x\n")
    assert "ictrepro_extra.yaml" in lm_eval_tasks.stale_files(tmp_path)
    assert lm_eval_tasks.main(["--check", str(tmp_path)]) == 1
