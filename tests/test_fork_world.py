"""The fork world: its subsets and token budget, where a response forks, and the fork_*
metrics against a naive loop."""

from __future__ import annotations

import pytest
import torch

from ictrepro.algos.token_stats import TokenStats
from ictrepro.data.suites import (
    FORK_MARKERS,
    FORK_MAX_NEW_TOKENS,
    FORK_PAIRS,
    FORK_PREAMBLES,
    FORK_REACH,
    FORK_SUBSETS,
    fork_strategy,
    generate_suite,
)
from ictrepro.models.tokenizer import train_tokenizer
from ictrepro.stages.prepare import tokenizer_corpus
from ictrepro.train.forks import OFFSET_BUCKETS, fork_metrics, fork_position


@pytest.fixture(scope="module")
def tokenizer():
    """The tiny tokenizer as prepare trains it on the fork world's text."""
    problems = []
    for subset in FORK_SUBSETS:
        for prefix in ("tiny-fork", "tiny-fork0"):
            problems += generate_suite(f"{prefix}-{subset}", seed=0, n_train=200, n_test=0)["train"]
    return train_tokenizer(tokenizer_corpus(problems), vocab_size=1024)


def _position(problem_text: str, answer: str) -> int:
    pairs = problem_text.removeprefix("Pairs: ").split(". What is ")
    keys = [p.split("=")[0] for p in pairs[0].split(", ")]
    return keys.index(pairs[1].rstrip("?")) + 1


@pytest.mark.parametrize("prefix", ["tiny-fork", "tiny-fork0"])
def test_each_subset_holds_the_key_positions_its_name_says(prefix):
    for subset, positions in FORK_SUBSETS.items():
        problems = generate_suite(f"{prefix}-{subset}", seed=3, n_train=0, n_test=200)["test"]
        for p in problems:
            position = _position(p.problem, p.answer)
            assert position in positions
            assert p.problem.count("=") == FORK_PAIRS
            strategy = fork_strategy(p.solution)
            assert strategy in (0, 1)
            assert p.solution.count("=") == (
                position if strategy == 0 else FORK_PAIRS - position + 1
            )
            opening = p.solution.split(" From the")[0]
            assert opening in FORK_PREAMBLES
            if prefix == "tiny-fork0":
                assert opening == FORK_PREAMBLES[2]


def test_the_budget_separates_the_subsets_whatever_the_preamble(tokenizer):
    """A scan of FORK_REACH pairs fits the budget after any preamble; one more pair never
    does: forward-only problems are out of the backward scan's reach, and the reverse."""
    for preamble in FORK_PREAMBLES:
        for n in range(1, FORK_PAIRS + 1):
            pairs = ", ".join(f"{k}={n % 10}" for k in "abcdefghkm"[:n])
            for marker in FORK_MARKERS:
                text = f"{preamble} {marker} {pairs}. The answer is \\boxed{{7}}."
                length = len(tokenizer(text, add_special_tokens=False)["input_ids"])
                assert (length <= FORK_MAX_NEW_TOKENS) == (n <= FORK_REACH), (text, length)
    # What each strategy reaches: the forward scan positions 1..REACH, the backward one
    # positions PAIRS-REACH+1..PAIRS; the subsets are exactly their differences.
    forward, backward = (
        set(range(1, FORK_REACH + 1)),
        set(range(FORK_PAIRS - FORK_REACH + 1, FORK_PAIRS + 1)),
    )
    assert set(FORK_SUBSETS["forward"]) == forward - backward
    assert set(FORK_SUBSETS["both"]) == forward & backward
    assert set(FORK_SUBSETS["backward"]) == backward - forward


def test_the_fork_is_the_token_that_names_the_strategy(tokenizer):
    for preamble in FORK_PREAMBLES:
        for strategy, marker in enumerate(FORK_MARKERS):
            text = f"{preamble} {marker} a=1, b=2. The answer is \\boxed{{2}}."
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            index, found = fork_position(ids, text, tokenizer)
            assert found == strategy
            assert tokenizer.decode([ids[index]]).strip() == ("first", "last")[strategy]
            assert tokenizer.decode(ids[:index]).endswith("From the")
    assert fork_position([1, 2], "The answer is \\boxed{2}.", tokenizer) is None
    # Cut before the fork: the text names no strategy.
    ids = tokenizer("So. From the", add_special_tokens=False)["input_ids"]
    assert fork_position(ids, "So. From the", tokenizer) is None


def _naive(forks, entropy, js, mask, response):
    """The fork_* means by loops over rows and positions, in float64."""
    B, T = mask.shape
    found = [(b, f) for b, f in enumerate(forks) if f is not None and f[0] < T]
    out = {"fork_found_fraction": len(found) / B}
    if not found:
        return out
    out["fork_minority_fraction"] = sum(f[1] for _, f in found) / len(found)
    out["fork_selected_fraction"] = sum(bool(mask[b, f[0]]) for b, f in found) / len(found)
    counts = {k: [0, 0] for k in OFFSET_BUCKETS}
    ent = {"fork": [], "non": []}
    jss = {"fork": [], "non": []}
    for b, (t0, _) in found:
        for t in range(T):
            if not response[b, t]:
                continue
            bucket = next(k for k, (lo, hi) in OFFSET_BUCKETS.items() if lo <= t - t0 <= hi)
            counts[bucket][1] += 1
            counts[bucket][0] += int(mask[b, t])
            where = "fork" if t == t0 else "non"
            ent[where].append(float(entropy[b, t]))
            jss[where].append(float(js[b, t]))
    n_sel = sum(c[0] for c in counts.values())
    n_tok = sum(c[1] for c in counts.values())
    for k, (sel, tok) in counts.items():
        out[f"fork_selected_{k}"] = sel / n_sel if n_sel else None
        out[f"fork_tokens_{k}"] = tok / n_tok
    out["fork_entropy_mean"] = sum(ent["fork"]) / len(ent["fork"])
    out["nonfork_entropy_mean"] = sum(ent["non"]) / len(ent["non"]) if ent["non"] else None
    out["fork_js_mean"] = sum(jss["fork"]) / len(jss["fork"])
    out["nonfork_js_mean"] = sum(jss["non"]) / len(jss["non"]) if jss["non"] else None
    return out


@pytest.mark.parametrize(("B", "T", "seed"), [(4, 7, 0), (16, 41, 1), (9, 3, 2)])
def test_fork_metrics_match_a_naive_loop(B, T, seed):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    response = torch.arange(T)[None, :] < lengths[:, None]
    mask = response & (torch.rand(B, T, generator=g) < 0.3)
    entropy = torch.rand(B, T, generator=g) * response
    js = torch.rand(B, T, generator=g) * 0.69 * response
    forks = []
    for b in range(B):
        r = torch.rand(1, generator=g).item()
        t = int(torch.randint(0, int(lengths[b]), (1,), generator=g))
        forks.append(None if r < 0.25 else (t, int(r < 0.6)))
    forks[0] = (T + 2, 0)  # a fork past the packed width is not counted
    stats = TokenStats(torch.zeros(B, T), entropy, torch.zeros(B, T), js)
    got = fork_metrics(forks, stats, mask, response).reduce()
    want = _naive(forks, entropy.double(), js.double(), mask, response)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key


def test_fork_metrics_without_forks_or_js_keep_every_key_null():
    from ictrepro.train.forks import FORK_METRICS

    mask = torch.ones(2, 3, dtype=torch.bool)
    stats = TokenStats(torch.zeros(2, 3), torch.ones(2, 3), torch.zeros(2, 3), None)
    got = fork_metrics([None, None], stats, mask, mask).reduce()
    assert set(got) == set(FORK_METRICS)
    assert got["fork_found_fraction"] == 0.0
    assert all(v is None for k, v in got.items() if k != "fork_found_fraction")
    got = fork_metrics([(1, 1), None], stats, mask, mask).reduce()
    assert got["fork_js_mean"] is None and got["fork_entropy_mean"] == 1.0
    assert got["fork_minority_fraction"] == 1.0 and got["fork_selected_fraction"] == 1.0


def test_keys_and_values_occur_once_in_each_problem():
    for p in generate_suite("tiny-fork-mix", seed=4, n_train=100, n_test=0)["train"]:
        pairs = p.problem.removeprefix("Pairs: ").split(". What is ")[0].split(", ")
        keys = [x.split("=")[0] for x in pairs]
        values = [x.split("=")[1] for x in pairs]
        assert len(set(keys)) == len(set(values)) == FORK_PAIRS
