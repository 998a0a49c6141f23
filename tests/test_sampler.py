"""The sampler interface: the HF backend, and the vLLM backend's conversions with a fake engine.

The fake engine mimics `vllm.LLM.generate` / `collective_rpc` / `reset_prefix_cache` and
`RequestOutput` / `CompletionOutput` as the code uses them; `tests/test_vllm.py` (run by
`nox -s vllm`) checks the same code against the real engine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
import torch

from ictrepro.errors import ConfigError
from ictrepro.rollout.base import Completion
from ictrepro.rollout.params import SamplingParams
from ictrepro.rollout.sampler import make_sampler
from ictrepro.rollout.vllm import INSTALL_HINT, VLLMSampler, launcher_kwargs, request_seed


@dataclass
class FakeParams:
    n: int
    temperature: float
    top_p: float
    max_tokens: int
    seed: int
    stop: list
    logprobs: int | None = None


@dataclass
class FakeEngine:
    """Returns, for request i, completions whose text names the prompt, seed and sample."""

    calls: list = field(default_factory=list)
    loaded: list = field(default_factory=list)
    events: list = field(default_factory=list)

    def generate(self, prompts, sampling_params, use_tqdm=True):
        self.calls.append((list(prompts), list(sampling_params)))
        outputs = []
        for prompt, params in zip(prompts, sampling_params, strict=True):
            assert "sleep" not in self.state, "generate on a sleeping engine"
            self.events.append("generate")
            samples = [
                SimpleNamespace(
                    text=f"{prompt}|{params.seed}|{j}",
                    token_ids=[params.seed % 97, j],
                    finish_reason="stop" if j % 2 == 0 else "length",
                    # As vLLM's: per position, {token id: Logprob} holding the sampled one.
                    logprobs=None
                    if params.logprobs is None
                    else [
                        {params.seed % 97: SimpleNamespace(logprob=-0.25), 7: None},
                        {j: SimpleNamespace(logprob=-1.0 - j)},
                    ],
                )
                for j in range(params.n)
            ]
            outputs.append(SimpleNamespace(prompt=prompt, outputs=samples))
        return outputs

    def collective_rpc(self, method, kwargs):
        assert method == "reload_weights" and kwargs["is_checkpoint_format"] is True
        self.loaded.append(list(kwargs["weights_iterator"]))
        self.events.append("reload")

    def reset_prefix_cache(self):
        self.events.append("reset_prefix_cache")

    state: set = field(default_factory=set)

    def sleep(self, level):
        self.events.append(f"sleep{level}")
        self.state = {"sleep"}

    def wake_up(self, tags):
        self.events.append("wake " + ",".join(tags))
        self.state = self.state - {"sleep"} if "kv_cache" in tags else self.state

    def shutdown(self):
        self.events.append("shutdown")


def test_vllm_requests_and_responses_are_converted():
    engine = FakeEngine()
    sampler = VLLMSampler(engine, params_factory=FakeParams)
    params = SamplingParams(n=3, temperature=0.7, top_p=0.9, max_new_tokens=50)
    out = sampler.sample(["p0", "p1"], params, seed=11)
    ((prompts, requests),) = engine.calls
    assert prompts == ["p0", "p1"]
    assert [(r.n, r.temperature, r.top_p, r.max_tokens) for r in requests] == [
        (3, 0.7, 0.9, 50)
    ] * 2
    assert [r.seed for r in requests] == [request_seed(11, 0), request_seed(11, 1)]
    assert len(set(r.seed for r in requests)) == 2
    assert [[c.text for c in group] for group in out] == [
        [f"p{i}|{request_seed(11, i)}|{j}" for j in range(3)] for i in range(2)
    ]
    assert out[0][0] == Completion(f"p0|{requests[0].seed}|0", (requests[0].seed % 97, 0), True)
    assert [c.finished for c in out[1]] == [True, False, True]


def test_vllm_seeds_follow_the_global_prompt_index():
    """A process sampling the second half passes its offset and gets the same requests."""
    whole, half = FakeEngine(), FakeEngine()
    params = SamplingParams(n=2)
    full = VLLMSampler(whole, params_factory=FakeParams).sample(
        ["a", "b", "c", "d"], params, seed=5
    )
    part = VLLMSampler(half, params_factory=FakeParams).sample(
        ["c", "d"], params, seed=5, index_offset=2
    )
    assert part == full[2:]


def test_vllm_weight_push_sends_every_parameter():
    engine = FakeEngine()
    model = torch.nn.Linear(3, 2)
    VLLMSampler(engine, params_factory=FakeParams).update_weights(model)
    (weights,) = engine.loaded
    assert [name for name, _ in weights] == ["weight", "bias"]
    assert torch.equal(weights[0][1], model.weight.detach())
    # The prefix cache holds keys and values of the old weights: dropped after the push.
    assert engine.events == ["reload", "reset_prefix_cache"]


def test_vllm_weight_push_gathers_sharded_tensors():
    """An FSDP2 shard (a DTensor) is pushed as its full tensor."""

    class Shard(torch.Tensor):
        def full_tensor(self):
            return torch.arange(4.0)

    model = torch.nn.Linear(2, 2)
    shard = torch.zeros(2).as_subclass(Shard)
    state = {"weight": shard, "bias": model.bias}
    model.state_dict = lambda: state  # type: ignore[method-assign]
    engine = FakeEngine()
    VLLMSampler(engine, params_factory=FakeParams).update_weights(model)
    (weights,) = engine.loaded
    assert torch.equal(weights[0][1], torch.arange(4.0))


def test_vllm_engine_joins_a_multi_process_launch(monkeypatch):
    """One process: vLLM's default executor. Several: ``external_launcher`` (each engine on
    its process's rank and device; tests/test_vllm.py runs it), tensor parallelism refused."""
    import torch.distributed as dist

    from ictrepro.config import VLLMSpec

    assert launcher_kwargs(VLLMSpec()) == {}  # no process group
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda: 1)
    assert launcher_kwargs(VLLMSpec()) == {}
    monkeypatch.setattr(dist, "get_world_size", lambda: 2)
    assert launcher_kwargs(VLLMSpec()) == {"distributed_executor_backend": "external_launcher"}
    with pytest.raises(ConfigError, match="tensor_parallel_size=2 under 2 processes"):
        launcher_kwargs(VLLMSpec(tensor_parallel_size=2))


def test_vllm_wrong_number_of_outputs_is_an_error():
    class Short(FakeEngine):
        def generate(self, prompts, sampling_params, use_tqdm=True):
            return super().generate(prompts, sampling_params)[:1]

    with pytest.raises(RuntimeError, match="1 outputs for 2 prompts"):
        VLLMSampler(Short(), params_factory=FakeParams).sample(["a", "b"], SamplingParams(), seed=0)


def test_missing_vllm_says_to_install_the_gpu_extra():
    pytest.importorskip("torch")
    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vllm is installed here")
    with pytest.raises(ConfigError, match=r"pip install -e '\.\[gpu\]'"):
        make_sampler("vllm", None, None, batch_size=1, model_path="some/model")
    assert "gpu" in INSTALL_HINT


def test_unknown_backend_lists_the_valid_ones():
    with pytest.raises(ValueError, match="unknown sampler 'jax'; valid: hf, vllm"):
        make_sampler("jax", None, None, batch_size=1)  # type: ignore[arg-type]


def test_hf_stop_strings_end_and_cut_the_response(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ictrepro.presets import prepare_preset
    from ictrepro.rollout.hf import hf_generate
    from ictrepro.stages.prepare import prepare

    run_dir = tmp_path_factory.mktemp("stop") / "run"
    prepare(prepare_preset("tiny-smoke", seed=0), run_dir, show_progress=False)
    model = AutoModelForCausalLM.from_pretrained(run_dir / "base_model")
    tok = AutoTokenizer.from_pretrained(run_dir / "base_model")
    params = SamplingParams(n=4, temperature=1.0, max_new_tokens=24)
    free = hf_generate(model, tok, ["a", "bb"], params, seed=3)
    # Stop at a character that the free samples contain, so some responses are cut.
    stop = next(ch for g in free for c in g for ch in c.text if ch.strip())
    cut = hf_generate(model, tok, ["a", "bb"], params, seed=3, stop=[stop])
    for free_group, cut_group in zip(free, cut, strict=True):
        for f, c in zip(free_group, cut_group, strict=True):
            assert stop not in c.text
            if stop in f.text:  # same seed: identical up to the stop string
                assert c.text == f.text[: f.text.index(stop)] and c.finished
            else:
                assert c.text == f.text
            assert not c.token_ids or c.token_ids[-1] != tok.pad_token_id  # padding stripped


def test_vllm_reports_the_sampled_tokens_own_logprobs():
    engine = FakeEngine()
    out = VLLMSampler(engine, params_factory=FakeParams).sample(["p"], SamplingParams(n=2), seed=1)
    ((_, (request,)),) = engine.calls
    assert request.logprobs == 0  # the sampled token only
    assert [c.logprobs for c in out[0]] == [(-0.25, -1.0), (-0.25, -2.0)]
    # Log-probs are not part of a completion's identity.
    assert out[0][0] == Completion(out[0][0].text, out[0][0].token_ids, True)


def test_vllm_sleeps_after_sampling_and_wakes_weights_then_kv_cache_around_the_push():
    """TRL's colocate order: sample, sleep (level 1: weights kept in host memory), wake the
    weights, push, wake the KV cache, drop the prefix cache, sample again."""
    engine = FakeEngine()
    sampler = VLLMSampler(engine, params_factory=FakeParams, sleep=True)
    sampler.sample(["p"], SamplingParams(n=1), seed=0)
    assert sampler.asleep
    sampler.update_weights(torch.nn.Linear(2, 2))
    sampler.sample(["p"], SamplingParams(n=1), seed=1)
    # A step without an update (no signal): the next sampling wakes it all by itself.
    sampler.sample(["p"], SamplingParams(n=1), seed=2)
    assert engine.events == [
        "generate",
        "sleep1",
        "wake weights",
        "reload",
        "wake kv_cache",
        "reset_prefix_cache",
        "generate",
        "sleep1",
        "wake weights",
        "wake kv_cache",
        "generate",
        "sleep1",
    ]
    # Without sleep mode nothing sleeps (vLLM's CPU build has no sleep mode).
    awake = FakeEngine()
    plain = VLLMSampler(awake, params_factory=FakeParams)
    plain.sample(["p"], SamplingParams(n=1), seed=0)
    plain.update_weights(torch.nn.Linear(2, 2))
    assert awake.events == ["generate", "reload", "reset_prefix_cache"]


def test_vllm_close_shuts_the_engine_down_once():
    engine = FakeEngine()
    sampler = VLLMSampler(engine, params_factory=FakeParams)
    sampler.close()
    sampler.close()
    assert engine.events == ["shutdown"] and sampler.engine is None


def test_logprob_gap_and_the_hard_failure():
    from ictrepro.errors import SamplerWeightsError
    from ictrepro.train.batch import build_batch
    from ictrepro.train.grpo import VLLM_GAP_LIMIT, check_logprob_gap, logprob_gap

    completions = [
        [Completion("", (5, 6, 7), True, (-1.0, -2.0, -0.5)), Completion("", (8,), True, (-3.0,))]
    ]
    batch = build_batch([[1, 2]], completions, [1.0, 0.0], 0, torch.device("cpu"))
    old = torch.tensor([[-1.25, -2.0, -0.5], [-2.0, 0.0, 0.0]])
    (metrics,) = [logprob_gap(completions, batch, old).reduce()]
    # |(-1) - (-1.25)| + 0 + 0 + |(-3) - (-2)| over 4 response tokens (padding ignored).
    assert metrics["vllm_logprob_gap"] == pytest.approx(1.25 / 4)
    hf = [[Completion("", (5, 6, 7), True), Completion("", (8,), True)]]
    assert logprob_gap(hf, batch, old).reduce() == {}  # the HF backend: no such metric
    check_logprob_gap({"step": 3, "vllm_logprob_gap": VLLM_GAP_LIMIT}, "vllm")
    check_logprob_gap({"step": 3}, "hf")
    with pytest.raises(SamplerWeightsError, match=r"step 3: .* 0.6 nats .*push did not land"):
        check_logprob_gap({"step": 3, "vllm_logprob_gap": 0.6}, "vllm")
    with pytest.raises(SamplerWeightsError):
        check_logprob_gap({"step": 3, "vllm_logprob_gap": float("nan")}, "vllm")


@pytest.mark.parametrize(
    ("temperature", "top_p", "n", "n_stops"),
    [(1.0, 1.0, 4, 0), (1.0, 1.0, 4, 3), (0.7, 0.9, 4, 3), (1.0, 1.0, 1, 3), (0.0, 1.0, 2, 3)],
)
def test_hf_sampling_gives_generates_own_samples(
    smoke_world, monkeypatch, temperature, top_p, n, n_stops
):
    """The project's decoding loop (each prompt run once, ended responses leaving the batch)
    draws the same tokens as ``generate`` itself: prompts of several lengths (left
    padding), several calls, responses of many lengths, greedy, n = 1."""
    from collections import Counter

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ictrepro.rollout import hf
    from ictrepro.rollout.hf import MIN_ROWS, hf_generate

    model = AutoModelForCausalLM.from_pretrained(smoke_world / "base_model")
    tok = AutoTokenizer.from_pretrained(smoke_world / "base_model")
    prompts = ["a", "bb ccc", "12 + 7 =", "d", "3 * 4 = 12. 5 * 6 =", "x", "1 + 1 ="] * 2
    params = SamplingParams(n=n, temperature=temperature, top_p=top_p, max_new_tokens=24)
    lengths = {len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts}
    assert len(lengths) > 2  # the calls pad
    # The untrained model seldom draws EOS: stop strings of the characters it writes most
    # end its responses at many lengths.
    free = hf_generate(model, tok, prompts, SamplingParams(n=4, max_new_tokens=24), seed=0)
    chars = Counter(ch for g in free for c in g for ch in c.text if ch.strip())
    stop = [ch for ch, _ in chars.most_common(n_stops)]
    kwargs = {"seed": 5, "batch_size": 6 * n, "stop": stop}  # three calls

    kept = []  # the decoding batch's sizes after each removal of ended rows
    choose = hf._rows_to_keep

    def spy(rows, unfinished):
        keep = choose(rows, unfinished)
        if keep is not None:
            kept.append(len(keep))
        return keep

    monkeypatch.setattr(hf, "_rows_to_keep", spy)
    ours = hf_generate(model, tok, prompts, params, **kwargs)
    theirs = hf_generate(model, tok, prompts, params, use_generate=True, **kwargs)
    assert ours == theirs
    assert [len(g) for g in ours] == [n] * len(prompts)
    sizes = [len(c.token_ids) for g in ours for c in g]
    if temperature:
        assert len({c.token_ids for g in ours for c in g}) > len(set(prompts))  # it sampled
    if stop and temperature:
        assert len(set(sizes)) > 5  # responses ended at many lengths
        if 6 * n > MIN_ROWS:  # and left the batch, never below the fewest rows it keeps
            assert kept and min(kept) >= MIN_ROWS


def test_a_rows_product_does_not_depend_on_the_rows_beside_it():
    """What lets ended responses leave the sampling batch without changing the samples
    (``ictrepro/rollout/hf.py``): from ``MIN_ROWS`` rows up, a row of the tiny model's
    matrix products comes out in the same bits whatever rows share the product."""
    from ictrepro.rollout.hf import MIN_ROWS

    torch.manual_seed(0)
    for n_in, n_out in [(128, 128), (128, 64), (128, 384), (384, 128), (128, 350)]:
        weight, x = torch.randn(n_out, n_in), torch.randn(128, n_in)
        full = torch.nn.functional.linear(x, weight)
        for rows in range(MIN_ROWS, 129, 7):
            pick = torch.randperm(128)[:rows].sort().values
            assert torch.equal(torch.nn.functional.linear(x[pick], weight), full[pick])


def test_the_cache_is_emptied_before_every_wake(monkeypatch):
    """The update's peak, kept by torch's caching allocator, is handed back before the
    engine wakes (its sleep-mode allocator cannot reuse it): before the weights wake,
    at the push and at a sampling that follows a step without one."""
    engine = FakeEngine()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: engine.events.append("empty_cache"))
    sampler = VLLMSampler(engine, params_factory=FakeParams, sleep=True)
    sampler.sample(["p"], SamplingParams(n=1), seed=0)
    sampler.update_weights(torch.nn.Linear(2, 2))
    sampler.sample(["p"], SamplingParams(n=1), seed=1)
    sampler.sample(["p"], SamplingParams(n=1), seed=2)
    wakes = [i for i, e in enumerate(engine.events) if e == "wake weights"]
    assert len(wakes) == 2 and all(engine.events[i - 1] == "empty_cache" for i in wakes)
    assert engine.events.count("empty_cache") == 2


def test_the_trainers_engine_is_forced_into_its_process(monkeypatch):
    from ictrepro.config import VLLMSpec
    from ictrepro.errors import ConfigError
    from ictrepro.rollout.vllm import in_process_engine

    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    in_process_engine(VLLMSpec(), pushes_weights=False)  # evaluation: the user's choice
    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "1"
    in_process_engine(VLLMSpec(), pushes_weights=True)  # the trainer pushes: forced
    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    with pytest.raises(ConfigError, match="tensor_parallel_size=2"):
        in_process_engine(VLLMSpec(tensor_parallel_size=2), pushes_weights=True)
    in_process_engine(VLLMSpec(tensor_parallel_size=2), pushes_weights=False)  # eval may
