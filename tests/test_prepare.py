"""`ictrepro prepare` on the shrunken `tiny-smoke` preset: outputs, reload, idempotence, refusals."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from typer.testing import CliRunner

from ictrepro.cli import app
from ictrepro.data.prompts import answer_kind, render_prompt
from ictrepro.data.records import Problem
from ictrepro.data.suites import ANSWER_LEAD, WORDING_VARIANTS, generate_suite
from ictrepro.errors import ConfigError
from ictrepro.io import hash_outputs, read_jsonl
from ictrepro.presets import prepare_preset
from ictrepro.rundir import RunDirConflict, load_record
from ictrepro.stages import prepare as prepare_module
from ictrepro.stages.prepare import build_data, prepare, tokenizer_problems
from ictrepro.verify.grade import Verdict, grade


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("run") / "smoke"
    result = prepare(prepare_preset("tiny-smoke", seed=1), run_dir, show_progress=False)
    return run_dir, result


def test_writes_every_output_with_its_hash(smoke_run):
    run_dir, result = smoke_run
    assert not result.skipped
    record = load_record(run_dir, "prepare")
    assert record["status"] == "done"
    assert record["config"]["preset"] == "tiny-smoke" and record["config"]["seed"] == 1
    outputs = ("data", "base_model", "sft_log.jsonl", "calibration.json")
    assert record["outputs"] == hash_outputs(run_dir, outputs)
    for rel in (
        "data/sft.jsonl",
        "data/rl_train.jsonl",
        "data/test/tiny-aime25.jsonl",
        "base_model/config.json",
        "base_model/tokenizer.json",
        "calibration.json",
    ):
        assert rel in record["outputs"], rel
    config = prepare_preset("tiny-smoke", seed=1)
    for suite in config.data.eval_suites:
        problems = read_jsonl(run_dir / "data" / "test" / f"{suite}.jsonl")
        assert len(problems) == config.data.n_test
        Problem.from_json(problems[0])
    calibration = json.loads((run_dir / "calibration.json").read_text())
    assert set(calibration["suites"]) == set(config.data.eval_suites)
    for score in calibration["suites"].values():
        assert 0 <= score["pass_at"]["1"] <= score["pass_at"]["2"] <= 1
        assert sum(score["verdicts"].values()) == score["n_problems"] * score["n_samples"]


def test_training_data_never_holds_a_test_problem(smoke_run):
    run_dir, _ = smoke_run
    tests = {
        r["problem"] for f in (run_dir / "data" / "test").glob("*.jsonl") for r in read_jsonl(f)
    }
    for name in ("sft", "rl_train"):
        assert not tests & {r["problem"] for r in read_jsonl(run_dir / "data" / f"{name}.jsonl")}


def test_disjointness_holds_at_the_full_preset_size():
    data = build_data(prepare_preset("tiny"))
    tests = {p.problem for k, v in data.items() if k.startswith("test/") for p in v}
    assert len(tests) == sum(len(v) for k, v in data.items() if k.startswith("test/"))
    assert not tests & {p.problem for p in data["sft"] + data["rl_train"]}


def test_saved_model_reloads_from_the_directory_alone_and_generates(smoke_run):
    run_dir, _ = smoke_run
    model = AutoModelForCausalLM.from_pretrained(run_dir / "base_model")
    tokenizer = AutoTokenizer.from_pretrained(run_dir / "base_model")
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    problem = Problem.from_json(read_jsonl(run_dir / "data" / "test" / "tiny-gsm8k.jsonl")[0])
    prompt = render_prompt(problem, tokenizer)
    assert prompt.startswith("<|im_start|>user\n") and prompt.endswith("<|im_start|>assistant\n")
    enc = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    out = model.generate(**enc, max_new_tokens=5, do_sample=False)
    assert out.shape == (1, enc["input_ids"].shape[1] + 5) or tokenizer.eos_token_id in out[0]


def test_rerun_with_same_config_does_nothing(smoke_run):
    run_dir, _ = smoke_run
    mtimes = {p: p.stat().st_mtime_ns for p in run_dir.rglob("*") if p.is_file()}
    result = prepare(prepare_preset("tiny-smoke", seed=1), run_dir, show_progress=False)
    assert result.skipped
    assert mtimes == {p: p.stat().st_mtime_ns for p in run_dir.rglob("*") if p.is_file()}


def test_other_config_in_the_same_directory_is_refused(smoke_run):
    run_dir, _ = smoke_run
    with pytest.raises(RunDirConflict, match=r"different config.*--force"):
        prepare(prepare_preset("tiny-smoke", seed=2), run_dir, show_progress=False)


def test_foreign_directory_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(RunDirConflict, match="not made by `ictrepro prepare`"):
        prepare(prepare_preset("tiny-smoke"), tmp_path, show_progress=False)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_interrupted_prepare_is_redone_and_a_changed_output_is_detected(tmp_path, monkeypatch):
    config = prepare_preset("tiny-smoke", seed=3)
    real_sft = prepare_module.run_sft

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(prepare_module, "run_sft", interrupted)
    with pytest.raises(KeyboardInterrupt):
        prepare(config, tmp_path, show_progress=False)
    assert load_record(tmp_path, "prepare")["status"] == "running"
    assert not (tmp_path / "base_model").exists()  # nothing half-written to trust

    monkeypatch.setattr(prepare_module, "run_sft", real_sft)
    assert not prepare(config, tmp_path, show_progress=False).skipped
    assert prepare(config, tmp_path, show_progress=False).skipped

    with (tmp_path / "data" / "sft.jsonl").open("a") as f:
        f.write("\n")
    assert not prepare(config, tmp_path, show_progress=False).skipped  # hash changed: redo


def test_prepare_is_deterministic(tmp_path):
    config = prepare_preset("tiny-smoke", seed=4)
    a = prepare(config, tmp_path / "a", show_progress=False).record
    b = prepare(config, tmp_path / "b", show_progress=False).record
    assert a["outputs"] == b["outputs"]


def test_force_redoes_everything(smoke_run, tmp_path):
    config = prepare_preset("tiny-smoke", seed=5)
    prepare(config, tmp_path, show_progress=False)
    other = prepare_preset("tiny-smoke", seed=6)
    result = prepare(other, tmp_path, force=True, show_progress=False)
    assert not result.skipped and load_record(tmp_path, "prepare")["config"]["seed"] == 6


runner = CliRunner()


def test_cli_prepare_and_rerun(tmp_path):
    args = ["prepare", "--preset", "tiny-smoke", "--out", str(tmp_path / "r"), "--quiet"]
    assert runner.invoke(app, args).exit_code == 0
    again = runner.invoke(app, [*args[:-1]])
    assert again.exit_code == 0 and "up to date" in " ".join(again.output.split())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--preset", "nope"], "unknown preset 'nope'; valid: tiny, tiny-smoke"),
        (["--seed", "1.5"], "as an integer"),
    ],
)
def test_cli_bad_input(tmp_path, args, message):
    result = runner.invoke(app, ["prepare", "--out", str(tmp_path), *args])
    assert result.exit_code == 2
    assert message in " ".join(result.output.replace("│", " ").split())


def test_model_outputs_do_not_depend_on_padding(smoke_run):
    """Left padding in batched sampling leaves the next-token logits unchanged (RoPE is
    relative and padding is masked), so batched and one-by-one sampling agree."""
    run_dir, _ = smoke_run
    model = AutoModelForCausalLM.from_pretrained(run_dir / "base_model")
    tokenizer = AutoTokenizer.from_pretrained(run_dir / "base_model")
    prompts = ["<|im_start|>user\n1 + 1<|im_end|>\n", "<|im_start|>user\nHow many books?"]
    enc = tokenizer(
        prompts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False
    )
    with torch.no_grad():
        batched = model(**enc).logits[:, -1]
        single = torch.cat(
            [
                model(**tokenizer([p], return_tensors="pt", add_special_tokens=False)).logits[:, -1]
                for p in prompts
            ]
        )
    torch.testing.assert_close(batched, single, atol=1e-5, rtol=1e-5)


def test_lm_eval_hf_backend_loads_and_generates(smoke_run):
    """The saved directory is a plain HF checkpoint that lm-eval's `hf` model can serve."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    run_dir, _ = smoke_run
    lm = HFLM(pretrained=str(run_dir / "base_model"), device="cpu", batch_size=2)
    prompt = "<|im_start|>user\nHow many books?<|im_end|>\n<|im_start|>assistant\n"
    gen = Instance(
        request_type="generate_until",
        doc={},
        arguments=(prompt, {"until": ["<|im_end|>"], "max_gen_toks": 8, "do_sample": False}),
        idx=0,
    )
    [text] = lm.generate_until([gen])
    assert isinstance(text, str)
    loglik = Instance(request_type="loglikelihood", doc={}, arguments=(prompt, "1"), idx=0)
    [(logprob, _)] = lm.loglikelihood([loglik])
    assert logprob < 0


def test_sft_extra_must_name_an_eval_suite():
    import dataclasses

    config = prepare_preset("tiny-smoke")
    bad = dataclasses.replace(config, data=dataclasses.replace(config.data, sft_extra=(("x", 1),)))
    with pytest.raises(ValueError, match=r"data.sft_extra names \['x'\].*valid: tiny-gsm8k"):
        build_data(bad)


def test_direct_answers_replace_the_chosen_share_of_solutions():
    from ictrepro.stages.prepare import with_direct_answers

    problems = generate_suite("tiny-gsm8k", seed=0, n_train=400, n_test=0)["train"]
    problems += generate_suite("tiny-gpqa", seed=0, n_train=400, n_test=0)["train"]
    mixed = with_direct_answers(problems, 0.5, seed=0)
    assert [p.problem for p in mixed] == [p.problem for p in problems]
    direct = [p for p in mixed if p.meta["style"] == "direct"]
    worked = [p for p in mixed if p.meta["style"] == "worked"]
    assert 340 <= len(direct) <= 460  # binomial(800, 0.5): 5.6 standard deviations
    for p in direct:  # the bare answer, still graded correct (letters for multiple choice)
        assert p.solution == f"The answer is \\boxed{{{p.answer}}}."
        assert grade(p.solution, p.answer, kind=answer_kind(p)) == Verdict.CORRECT
    original = {p.id: p.solution for p in problems}
    assert all(p.solution == original[p.id] for p in worked)
    assert with_direct_answers(problems, 0.5, seed=0) == mixed
    assert with_direct_answers(problems, 0.5, seed=1) != mixed
    assert with_direct_answers(problems, 0.0, seed=0) == problems
    assert all(p.meta["style"] == "direct" for p in with_direct_answers(problems, 1.0, seed=0))
    with pytest.raises(ConfigError, match=r"data.direct_fraction must be in \[0, 1\], got 1.5"):
        with_direct_answers(problems, 1.5, seed=0)


def test_warm_start_has_a_worked_phase_then_a_direct_phase(smoke_run):
    run_dir, _ = smoke_run
    config = prepare_preset("tiny-smoke")
    log = list(read_jsonl(run_dir / "sft_log.jsonl"))
    phases = [row["phase"] for row in log]
    assert phases == ["worked"] * config.sft.steps + ["direct"] * config.sft.direct_steps
    assert [row["step"] for row in log] == list(range(len(log)))
    worked = {r["id"]: r for r in read_jsonl(run_dir / "data" / "sft.jsonl")}
    second = list(read_jsonl(run_dir / "data" / "sft_direct.jsonl"))
    assert [r["id"] for r in second] == list(worked)  # the same problems, in the same order
    styles = {r["meta"]["style"] for r in second}
    assert styles == {"worked", "direct"}
    for r in second:
        expected = (
            worked[r["id"]]["solution"]
            if r["meta"]["style"] == "worked"
            else f"The answer is \\boxed{{{r['answer']}}}."
        )
        assert r["solution"] == expected


@pytest.mark.parametrize(
    "field, value", [("steps", 0), ("batch_size", 0), ("direct_steps", -1), ("threads", 0)]
)
def test_sft_spec_rejects_impossible_counts(field, value):
    from ictrepro.config import SFTSpec

    with pytest.raises(ConfigError, match=rf"sft.{field} must be >= \d, got {value}"):
        SFTSpec(**{field: value})


def test_a_response_prefix_ends_the_rl_and_test_prompts_and_leaves_the_warm_start_alone():
    """``tiny-fork0`` is ``tiny-fork`` with its preamble written into every RL and test
    prompt: the same problems and the same warm-start solutions, and, when no prefix is
    set, the world's identity hash of before prefixes existed (the pinned worlds')."""
    world, control = prepare_preset("tiny-fork"), prepare_preset("tiny-fork0")
    assert "response_prefix" not in world.to_json()["data"]
    assert control.to_json()["data"]["response_prefix"] == "I see."
    plain, prefixed = build_data(world), build_data(control)
    assert set(plain) == set(prefixed)
    assert prefixed["sft"] == plain["sft"]
    for name in plain:
        assert [p.problem for p in prefixed[name]] == [p.problem for p in plain[name]]
        if name != "sft":
            assert all(p.meta["response_prefix"] == "I see." for p in prefixed[name])


def test_wording_noise_varies_only_the_answer_leads_of_the_warm_start():
    """Each lead word is a variant with about the chance asked for, from a random stream of
    its own: the same problems, RL prompts and tests, every other character of each solution
    unchanged, as many words in each lead, the tokenizer's texts those without variants; and
    no noise, no key in the world's identity."""
    world, noisy = prepare_preset("tiny-fork"), prepare_preset("tiny-fork-rare")
    assert noisy.data == dataclasses.replace(world.data, wording_noise=noisy.data.wording_noise)
    assert noisy.to_json()["data"]["wording_noise"] == noisy.data.wording_noise > 0
    assert "wording_noise" not in world.to_json()["data"]
    plain, varied = build_data(world), build_data(noisy)
    assert set(plain) == set(varied)
    for name in plain:
        if name != "sft":
            assert varied[name] == plain[name]
    assert [p.problem for p in varied["sft"]] == [p.problem for p in plain["sft"]]
    # The tokenizer learns the solutions as generated: the same token ids, so the same
    # initial weights, as the world without variants.
    assert tokenizer_problems(noisy, varied) == plain["sft"] + plain["rl_train"]
    lead = ANSWER_LEAD.split()
    changed = words = 0
    for before, after in zip(plain["sft"], varied["sft"], strict=True):
        head, _, tail = before.solution.rpartition(ANSWER_LEAD)
        assert after.solution.startswith(head) and after.solution.endswith(tail)
        written = after.solution[len(head) : len(after.solution) - len(tail)].split(" ")
        assert len(written) == len(lead)
        for was, now in zip(lead, written, strict=True):
            assert now == was or now in WORDING_VARIANTS
            changed, words = changed + (now != was), words + 1
    rate, noise = changed / words, noisy.data.wording_noise
    assert abs(rate - noise) < 4 * math.sqrt(noise * (1 - noise) / words), (rate, words)


@pytest.mark.parametrize("noise", [-0.1, 1.5])
def test_wording_noise_outside_zero_to_one_is_an_error(noise):
    config = prepare_preset("tiny-fork")
    bad = dataclasses.replace(config, data=dataclasses.replace(config.data, wording_noise=noise))
    with pytest.raises(ConfigError, match=rf"data.wording_noise must be in \[0, 1\], got {noise}"):
        build_data(bad)
