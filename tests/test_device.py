"""Every tensor the algorithm creates is created on its inputs' device.

See ``tests/device_check.py``: inside ``RequireExplicitDevice`` a factory call from
ictrepro without ``device=`` fails, so a tensor that would silently land on the CPU beside
CUDA inputs fails here on a CPU-only machine. The data-independent functions also run on
the ``meta`` device, where mixing in a CPU tensor is an error by itself.
"""

from __future__ import annotations

import pytest
import torch
from device_check import PACKAGE_DIR, DeviceNotNamed, RequireExplicitDevice

from ictrepro.algos.losses import (
    aggregate,
    clipped_policy_objective,
    group_advantages,
    grpo_loss,
    kl_k3,
)
from ictrepro.algos.selection import SelectionInputs, available_selections
from ictrepro.algos.token_stats import (
    group_js,
    sampled_logprobs,
    sampled_logprobs_from_hidden,
    token_stats,
    token_stats_from_hidden,
)

B, T, V, D = 6, 7, 11, 5


@pytest.fixture
def batch():
    gen = torch.Generator().manual_seed(0)
    mask = torch.rand(B, T, generator=gen) > 0.2
    mask[:, 0] = True
    return {
        "logits": torch.randn(B, T, V, generator=gen),
        "hidden": torch.randn(B, T, D, generator=gen),
        "head": torch.randn(V, D, generator=gen),
        "tokens": torch.randint(0, V, (B, T), generator=gen),
        "mask": mask,
        "groups": torch.tensor([0, 0, 0, 1, 1, 1]),
        "rewards": torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0, 1.0]),
        "lp": -torch.rand(B, T, generator=gen),
        "old": -torch.rand(B, T, generator=gen),
    }


def test_the_check_catches_a_device_less_factory_call():
    code = compile("import torch\ntorch.zeros(3)\n", f"{PACKAGE_DIR}/not_a_module.py", "exec")
    with RequireExplicitDevice(), pytest.raises(DeviceNotNamed, match="zeros"):
        exec(code, {})
    with RequireExplicitDevice():  # the same call from outside the package is not checked
        torch.zeros(3)


def test_losses_name_their_devices(batch):
    with RequireExplicitDevice():
        adv = group_advantages(batch["rewards"], batch["groups"])
        obj, _ = clipped_policy_objective(batch["lp"], batch["old"], adv, dual_clip=3.0)
        kl_k3(batch["lp"], batch["old"])
        aggregate(obj, batch["mask"])
        grpo_loss(
            batch["lp"],
            batch["old"],
            adv,
            batch["mask"],
            batch["mask"],
            ref_logprob_BT=batch["old"],
        )


def test_token_statistics_name_their_devices(batch):
    with RequireExplicitDevice():
        token_stats(batch["logits"], batch["tokens"], batch["mask"], batch["groups"])
        token_stats(batch["logits"], batch["tokens"], batch["mask"], chunk_size=2)
        token_stats_from_hidden(
            batch["hidden"], batch["head"], batch["tokens"], batch["mask"], batch["groups"]
        )
        group_js(batch["logits"], batch["mask"], batch["groups"])
        sampled_logprobs(batch["logits"], batch["tokens"])
        hidden = batch["hidden"].clone().requires_grad_()
        sampled_logprobs_from_hidden(
            hidden, batch["head"], batch["tokens"], batch["mask"]
        ).sum().backward()


@pytest.mark.parametrize("rule", sorted(available_selections()))
def test_every_selection_rule_names_its_devices(batch, rule):
    stats = token_stats(batch["logits"], batch["tokens"], batch["mask"], batch["groups"])
    inputs = SelectionInputs(
        response_mask=batch["mask"],
        advantages=group_advantages(batch["rewards"], batch["groups"]),
        logprob=stats.logprob,
        entropy=stats.entropy,
        js=stats.js,
        # A choice token per response (the second), as the fork worlds mark it.
        choice=batch["mask"] & (torch.arange(batch["mask"].shape[1]) == 1)[None, :],
        step=100,  # past every warm-up
        generator=torch.Generator().manual_seed(0),
    )
    with RequireExplicitDevice():
        available_selections()[rule](inputs)


def test_data_independent_functions_run_on_meta(batch):
    meta = {k: v.to("meta") for k, v in batch.items()}
    adv = torch.zeros(B, device="meta")
    obj, clipped = clipped_policy_objective(meta["lp"], meta["old"], adv, dual_clip=3.0)
    assert obj.device.type == "meta" and clipped.device.type == "meta"
    assert kl_k3(meta["lp"], meta["old"]).device.type == "meta"
    assert aggregate(obj, meta["mask"]).device.type == "meta"
    assert sampled_logprobs(meta["logits"], meta["tokens"]).device.type == "meta"


@pytest.mark.parametrize("method", ["ict", "random", "stapo"])
def test_a_training_run_names_its_devices(tmp_path, method):
    """Sampling, rewards, packing, statistics, selection and the update of a tiny-smoke run
    (past ICT's warm-up, with chunked log-probs) create no tensor without a device."""
    from ictrepro.presets import prepare_preset, train_preset
    from ictrepro.stages.prepare import prepare
    from ictrepro.stages.train import train
    from ictrepro.verify import Verdict

    class EveryOtherCorrect:
        def grade_many(self, requests):
            return [Verdict.CORRECT if i % 2 else Verdict.WRONG for i in range(len(requests))]

        def close(self):
            pass

    run_dir = tmp_path / "run"
    prepare(prepare_preset("tiny-smoke"), run_dir, show_progress=False)
    config = train_preset(
        "tiny-smoke", method=method, overrides={"rl.steps": 2, "rl.chunked_logprobs": True}
    )
    with RequireExplicitDevice():
        result = train(config, run_dir, show_progress=False, verifier=EveryOtherCorrect())
    assert [m["update_skipped"] for m in result.metrics] == [False, False]


ACCELERATORS = [d for d in ("cuda", "xpu", "mps") if getattr(torch, d).is_available()]


@pytest.mark.skipif(not ACCELERATORS, reason="no accelerator on this machine")
@pytest.mark.parametrize("device", ACCELERATORS)
def test_the_algorithm_runs_on_an_accelerator_and_equals_the_cpu(batch, device):
    """Where a GPU is present: the same numbers from inputs on it as on the CPU."""
    moved = {k: v.to(device) for k, v in batch.items()}
    for inputs in (batch, moved):
        adv = group_advantages(inputs["rewards"], inputs["groups"])
        stats = token_stats(inputs["logits"], inputs["tokens"], inputs["mask"], inputs["groups"])
        selection = SelectionInputs(
            response_mask=inputs["mask"],
            advantages=adv,
            logprob=stats.logprob,
            entropy=stats.entropy,
            js=stats.js,
            step=100,
            generator=torch.Generator().manual_seed(0),
        )
        masks = {name: rule(selection) for name, rule in available_selections().items()}
        loss, _ = grpo_loss(
            inputs["lp"],
            inputs["old"],
            adv,
            masks["ict"],
            inputs["mask"],
            ref_logprob_BT=inputs["old"],
        )
        inputs["result"] = (adv, stats.js, masks, loss)
    cpu, acc = batch["result"], moved["result"]
    torch.testing.assert_close(acc[0].cpu(), cpu[0])
    torch.testing.assert_close(acc[1].cpu(), cpu[1], atol=1e-5, rtol=1e-4)
    assert all(torch.equal(acc[2][name].cpu(), cpu[2][name]) for name in ("grpo", "random"))
    torch.testing.assert_close(acc[3].cpu(), cpu[3], atol=1e-5, rtol=1e-4)
