"""The preset registry: one lookup, every stage's config, the tiny suites' decoding in one place."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml

from ictrepro.data.suites import EVAL_SUITES
from ictrepro.errors import ConfigError
from ictrepro.evaluate.lm_eval_bridge import TASKS_DIR
from ictrepro.presets import (
    SMOKE_EVAL,
    TINY_EVAL,
    get_preset,
    prepare_preset,
    preset_names,
    train_preset,
)

ROOT = Path(__file__).parent.parent


def test_unknown_preset_lists_the_valid_names():
    with pytest.raises(
        ConfigError, match="unknown preset 'huge'; valid: tiny, tiny-smoke, tiny-fork"
    ):
        get_preset("huge")
    with pytest.raises(ConfigError, match="seed must be an integer"):
        prepare_preset("tiny", seed=1.5)


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_holds_each_stages_config(name):
    preset = get_preset(name)
    assert preset.name == name
    assert train_preset(name, method="ict").preset == name
    # The prepare config names the world: the preset's own, or for a preset that trains
    # in another's world at another step size, that preset's.
    world = "tiny-lock" if name.startswith("tiny-lock") else name.removesuffix("-lr10")
    assert preset.prepare.preset == world
    if name.startswith("paper-"):  # the paper's benchmarks with their own decoding
        assert preset.eval.sampling is None and preset.seeds == (0, 1, 2, 3, 4)
    elif name == "smollm2-135m":
        assert preset.eval.benchmarks == preset.prepare.benchmarks
        assert preset.eval.sampling == preset.prepare.eval_sampling
    elif name == "smollm2-135m-learn":  # its generated task first, then the real subsets
        assert preset.eval.benchmarks == (preset.prepare.task, *preset.prepare.benchmarks)
        assert preset.eval.sampling == preset.prepare.task_sampling
    elif name.startswith("tiny-fork"):  # its own suites, 16 samples, its token budget
        assert preset.eval.benchmarks == preset.prepare.data.eval_suites
        assert preset.eval.sampling.n == 16 and preset.seeds == (0, 1, 2, 3, 4)
        assert (
            preset.eval.sampling.max_new_tokens
            == train_preset(name, method="ict").rl.max_new_tokens
        )
        assert "grpo-lr4" in preset.methods
    elif name.startswith("tiny-lock"):  # its test or validation suites, 16 samples, budget
        assert set(preset.eval.benchmarks) <= set(preset.prepare.data.eval_suites)
        assert preset.eval.sampling.n == 16
        assert (
            preset.eval.sampling.max_new_tokens
            == train_preset(name, method="ict").rl.max_new_tokens
        )
    elif name == "tiny":  # the seven suites at 16 samples, five seeds, the positive control
        assert preset.eval == TINY_EVAL and TINY_EVAL.sampling.n == 16
        assert preset.seeds == (0, 1, 2, 3, 4) and "grpo-lr4" in preset.methods
    else:  # tiny-smoke: the same suites and decoding, fewer samples
        assert preset.eval == SMOKE_EVAL
        assert SMOKE_EVAL.sampling == dataclasses.replace(TINY_EVAL.sampling, n=4)


@pytest.mark.parametrize("name", ["tiny", "tiny-fork", "tiny-fork0", "tiny-fork-rare", "tiny-lock"])
def test_pinned_prepare_configs_are_the_presets(name):
    """Moving the presets must not change what `prepare` builds: the pinned results record
    the hash of the prepare config they were made with (`compare` refuses another)."""
    provenance = json.loads((ROOT / "results" / name / "provenance.json").read_text())
    assert prepare_preset(name).sha256() == provenance["prepare_config_sha256"]


def test_tiny_calibration_samples_as_its_suites_are_evaluated():
    assert prepare_preset("tiny").calibration.sampling == TINY_EVAL.sampling


class _TaskLoader(yaml.SafeLoader):
    """Reads lm-eval task files: ``!function utils.x`` becomes the text ``utils.x``."""


_TaskLoader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def test_every_tiny_task_file_states_the_tiny_decoding():
    paths = sorted(TASKS_DIR.glob("ictrepro_tiny_*.yaml"))
    suites = {p.stem.removeprefix("ictrepro_").replace("_", "-") for p in paths}
    assert suites == set(EVAL_SUITES) == set(TINY_EVAL.benchmarks)
    sampling = TINY_EVAL.sampling
    for path in paths:
        task = yaml.load(path.read_text(), Loader=_TaskLoader)
        gen = task["generation_kwargs"]
        ks = tuple(int(m["metric"].removeprefix("pass@")) for m in task["metric_list"])
        got = (task["repeats"], gen["temperature"], gen["top_p"], gen["max_gen_toks"], ks)
        want = (sampling.n, sampling.temperature, sampling.top_p, sampling.max_new_tokens)
        assert got == (*want, TINY_EVAL.ks), path.name
        # The header comment that describes the file says the same.
        header = path.read_text().splitlines()[0]
        stated = re.search(r"\(n=(\d+), T=([\d.]+), (\d+) tokens\)", header)
        assert stated is not None, path.name
        assert (int(stated[1]), float(stated[2]), int(stated[3])) == (
            sampling.n,
            sampling.temperature,
            sampling.max_new_tokens,
        ), path.name
