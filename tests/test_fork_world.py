"""The fork world: its subsets and token budget, where a response forks, and the fork_*
metrics against a naive loop."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ictrepro.algos.token_stats import TokenStats
from ictrepro.data.prompts import gold_of, render_prompt
from ictrepro.data.records import Problem
from ictrepro.data.suites import (
    ANSWER_LEAD,
    FORK_CONTROL_MAX_NEW_TOKENS,
    FORK_CONTROL_PREAMBLE,
    FORK_DIAL,
    FORK_MARKERS,
    FORK_MAX_NEW_TOKENS,
    FORK_PREAMBLES,
    FORK_REACH,
    FORK_STEPS,
    FORK_SUBSETS,
    WORDING_VARIANTS,
    fork_choice,
    fork_problem_parts,
    fork_strategy,
    fork_walk,
    generate_suite,
)
from ictrepro.models.tokenizer import train_tokenizer
from ictrepro.stages.prepare import tokenizer_corpus
from ictrepro.train.forks import OFFSET_BUCKETS, fork_metrics, fork_position
from ictrepro.verify.grade import Verdict, grade


@pytest.fixture(scope="module")
def tokenizer():
    """The tiny tokenizer as prepare trains it on the fork world's text."""
    problems = []
    for subset in FORK_SUBSETS:
        problems += generate_suite(f"tiny-fork-{subset}", seed=0, n_train=200, n_test=0)["train"]
    return train_tokenizer(tokenizer_corpus(problems), vocab_size=1024)


def test_each_subset_holds_the_distances_its_name_says():
    for subset, distances in FORK_SUBSETS.items():
        problems = generate_suite(f"tiny-fork-{subset}", seed=3, n_train=200, n_test=60)
        problems = problems["train"] + problems["test"]
        for p in problems:
            start, target, step = fork_problem_parts(p.problem)
            assert p.answer == str(target)
            assert step in FORK_STEPS
            assert len(fork_walk(start, target, step, 0)) in distances
            strategy = fork_strategy(p.solution)
            assert strategy in (0, 1)
            walk = [int(d) for d in p.solution.split(":")[1].split(".")[0].split(",")]
            assert walk == fork_walk(start, target, step, strategy)
            up = len(fork_walk(start, target, step, 0))
            assert len(walk) == (up if strategy == 0 else FORK_DIAL - up)
            opening = p.solution.split(" Turn ")[0]
            assert opening in FORK_PREAMBLES


def test_a_walk_by_hand():
    assert fork_walk(3, 8, 1, 0) == [4, 5, 6, 7, 8]
    assert fork_walk(3, 8, 1, 1) == [2, 1, 0, 9, 8]
    assert fork_walk(3, 8, 3, 0) == [6, 9, 2, 5, 8]
    assert fork_walk(3, 8, 3, 1) == [0, 7, 4, 1, 8]
    assert fork_walk(9, 0, 1, 0) == [0]
    assert fork_walk(1, 0, 7, 1) == [4, 7, 0]
    assert len(fork_walk(0, 9, 1, 1)) == 1 and len(fork_walk(0, 9, 1, 0)) == 9
    assert fork_problem_parts("The dial shows 3. Turn it to 8 in steps of 7.") == (3, 8, 7)
    with pytest.raises(ValueError, match="not a fork-world problem"):
        fork_problem_parts("Pairs: a1 b2. What is a?")


def test_an_answer_counts_only_after_a_valid_walk_in_the_direction_it_names():
    """The target is in the prompt, so the reward must see the walk: the hand-written
    shortcuts RL found (a walk in the wrong direction, one that jumps) are wrong."""
    problem = Problem("p", "The dial shows 4. Turn it to 0 in steps of 1.", "0",
                      meta={"family": "fork-both"})  # fmt: skip
    gold, kind = gold_of(problem)
    assert kind == "worked" and gold == "0\nTurn up: 5,6,7,8,9,0.\nTurn down: 3,2,1,0."
    cases = {
        "I see. Turn up: 5,6,7,8,9,0. The answer is \\boxed{0}.": Verdict.CORRECT,
        "So. Turn down: 3,2,1,0. The answer is \\boxed{0}.": Verdict.CORRECT,
        "So. Turn down: 3,2,1,0. The answer is \\boxed{9}.": Verdict.WRONG,
        "Okay. Turn down: 5,6,7,8,9,0. The answer is \\boxed{0}.": Verdict.WRONG,
        "So. Turn up: 5,2,1,0. The answer is \\boxed{0}.": Verdict.WRONG,
        "So. Turn up: 5,6,7,8,9,0,1. The answer is \\boxed{0}.": Verdict.WRONG,
        "Okay. Turn up: 5,6,7,8,9,0. The": Verdict.NO_ANSWER,
    }
    for response, verdict in cases.items():
        assert grade(response, gold, kind=kind) == verdict, response
    assert grade("\\boxed{0}", "0", kind="worked") == Verdict.UNGRADABLE  # no line of work
    # Every generated solution is correct under its own gold; other problems keep theirs.
    for subset in FORK_SUBSETS:
        for p in generate_suite(f"tiny-fork-{subset}", seed=1, n_train=50, n_test=0)["train"]:
            assert grade(p.solution, *gold_of(p)[:1], kind="worked") == Verdict.CORRECT
    other = generate_suite("tiny-gsm8k", seed=0, n_train=0, n_test=3)["test"][0]
    assert gold_of(other) == (other.answer, "math")


def test_the_budget_separates_the_subsets_whatever_the_preamble(tokenizer):
    """A walk of FORK_REACH digits fits the budget after any preamble; one more digit never
    does: up-only problems are out of the down walk's reach, and the reverse."""
    for preamble in FORK_PREAMBLES:
        for n in range(1, FORK_DIAL):
            walk = ",".join(str(d % FORK_DIAL) for d in range(4, 4 + n))
            for marker in FORK_MARKERS:
                text = f"{preamble} {marker} {walk}. The answer is \\boxed{{7}}."
                length = len(tokenizer(text, add_special_tokens=False)["input_ids"])
                assert (length <= FORK_MAX_NEW_TOKENS) == (n <= FORK_REACH), (text, length)
    # What each strategy reaches: turning up distances 1..REACH, turning down distances
    # DIAL-REACH..DIAL-1; the subsets are exactly their differences.
    up = set(range(1, FORK_REACH + 1))
    down = set(range(FORK_DIAL - FORK_REACH, FORK_DIAL))
    assert set(FORK_SUBSETS["forward"]) == up - down
    assert set(FORK_SUBSETS["both"]) == up & down
    assert set(FORK_SUBSETS["backward"]) == down - up


def test_the_control_prefix_leaves_the_budget_of_its_preamble_in_tiny_fork(tokenizer):
    """The control writes FORK_CONTROL_PREAMBLE into the prompt: the prompt's tokens are
    the unprefixed prompt's and the preamble's (nothing merges across the boundary), and
    the response, which starts after it, tokenizes as in the whole solution, so the
    control's budget admits exactly the walks the whole budget admits after that
    preamble."""
    problem = Problem("p", "The dial shows 4. Turn it to 0 in steps of 1.", "0",
                      meta={"family": "fork-both"})  # fmt: skip
    meta = {**problem.meta, "response_prefix": FORK_CONTROL_PREAMBLE}
    prefixed = dataclasses.replace(problem, meta=meta)
    ids = tokenizer(render_prompt(problem, tokenizer), add_special_tokens=False)["input_ids"]
    both = tokenizer(render_prompt(prefixed, tokenizer), add_special_tokens=False)["input_ids"]
    opening = tokenizer(FORK_CONTROL_PREAMBLE, add_special_tokens=False)["input_ids"]
    assert both == ids + opening
    assert len(opening) == FORK_MAX_NEW_TOKENS - FORK_CONTROL_MAX_NEW_TOKENS
    for n in range(1, FORK_DIAL):
        walk = ",".join(str(d % FORK_DIAL) for d in range(4, 4 + n))
        response = f" {FORK_MARKERS[1]} {walk}. The answer is \\boxed{{7}}."
        whole = tokenizer(FORK_CONTROL_PREAMBLE + response, add_special_tokens=False)
        rest = tokenizer(response, add_special_tokens=False)["input_ids"]
        assert whole["input_ids"] == opening + rest
        assert (len(rest) <= FORK_CONTROL_MAX_NEW_TOKENS) == (n <= FORK_REACH)
        index, strategy = fork_position(rest, response, tokenizer)
        # The word after "Turn": the same context in every response of a group.
        assert (index, strategy) == (1, 1)


def test_the_fork_is_the_token_that_names_the_strategy(tokenizer):
    for preamble in FORK_PREAMBLES:
        for strategy, marker in enumerate(FORK_MARKERS):
            text = f"{preamble} {marker} 1,2. The answer is \\boxed{{2}}."
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            index, found = fork_position(ids, text, tokenizer)
            assert found == strategy
            assert tokenizer.decode([ids[index]]).strip() == ("up", "down")[strategy]
            assert tokenizer.decode(ids[:index]).endswith("Turn")
    assert fork_position([1, 2], "The answer is \\boxed{2}.", tokenizer) is None
    # Cut before the fork: the text names no strategy.
    ids = tokenizer("So. Turn", add_special_tokens=False)["input_ids"]
    assert fork_position(ids, "So. Turn", tokenizer) is None


def test_fork_choice_finds_the_first_marker_of_either_world_by_hand():
    assert fork_choice("So. Turn up: 4,5. The answer is \\boxed{5}.") == (9, 0)
    assert fork_choice("I see. Turn down: 3. Turn up: 5.") == (12, 1)
    assert fork_choice("Roll down: \\boxed{3} in 1,2.") == (5, 1)
    assert fork_choice("Spin up: \\boxed{3} in 1.") == (5, 0)
    assert fork_choice("Turn up 4,5.") is None  # no colon: not a marker
    assert fork_choice("Jump up: 4.") is None  # not a verb of either world
    assert fork_choice("") is None


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


def test_a_varied_answer_lead_keeps_its_length_in_tokens_and_its_grade(tokenizer):
    """Every wording variant is one token after a space, so a varied lead never moves a
    response across the budget; the verifier ignores it, so a right answer stays right."""
    problem = generate_suite("tiny-fork-both", seed=0, n_train=1, n_test=0)["train"][0]
    gold, kind = gold_of(problem)
    start, target, step = fork_problem_parts(problem.problem)
    walk = ",".join(map(str, fork_walk(start, target, step, 0)))
    plain = f"So. {FORK_MARKERS[0]} {walk}. {ANSWER_LEAD} \\boxed{{{target}}}."
    count = len(tokenizer(plain, add_special_tokens=False)["input_ids"])
    assert grade(plain, gold, kind=kind) == Verdict.CORRECT
    for variant in WORDING_VARIANTS:
        assert len(tokenizer.tokenize(f" {variant}")) == 1, variant
        for i in range(len(ANSWER_LEAD.split())):
            words = ANSWER_LEAD.split()
            words[i] = variant
            varied = plain.replace(ANSWER_LEAD, " ".join(words))
            assert len(tokenizer(varied, add_special_tokens=False)["input_ids"]) == count
            assert grade(varied, gold, kind=kind) == Verdict.CORRECT, varied
            assert fork_strategy(varied) == 0
