"""Benchmark loaders: the shared real files, the verifier on their gold answers, the hub
normalisers on raw rows, and errors on bad input. No network: the hub is faked."""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path

import pytest

from ictrepro.data import benchmarks as bm
from ictrepro.data.benchmarks import (
    BENCHMARKS,
    MMLU_STEM_SUBJECTS,
    PAPER_BENCHMARKS,
    TRAINING_SETS,
    BenchmarkUnavailableError,
    load_benchmark,
    write_benchmark_jsonl,
)
from ictrepro.data.prompts import answer_kind
from ictrepro.errors import ConfigError, DataError
from ictrepro.verify import Verdict, grade

# The shared benchmark files live next to the repository, never inside it.
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks"
COUNTS = {"math500": 500, "gsm8k": 1319, "mmlu_stem": 3018, "aime24": 30, "aime25": 30, "amc23": 40}
MIN_CORRECT = 0.99


def needs_shared() -> Path:
    if not (SHARED / "math500" / "test.jsonl").is_file():
        pytest.skip(f"shared benchmark files not found at {SHARED}")
    return SHARED


@pytest.fixture(scope="module", params=sorted(COUNTS))
def shared(request):
    name = request.param
    return name, load_benchmark(name, data_dir=needs_shared())


def as_response(answer: str) -> str:
    return f"The answer is \\boxed{{{answer}}}."


def derangement(n: int, seed: int) -> list[int]:
    """A random permutation without fixed points (Sattolo's algorithm: one n-cycle)."""
    rng = random.Random(seed)
    perm = list(range(n))
    for i in range(n - 1, 0, -1):
        j = rng.randrange(i)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


# ---------------------------------------------------------------------- shared files


def test_counts_ids_and_answer_kinds(shared):
    name, problems = shared
    spec = BENCHMARKS[name]
    assert len(problems) == COUNTS[name] == spec.size
    assert len({p.id for p in problems}) == len(problems)
    for p in problems:
        assert answer_kind(p) == spec.kind
        if spec.kind == "choice":
            assert len(p.choices) == 4 and p.answer in "ABCD"
    # Stable: a second read gives the same records in the same order.
    assert load_benchmark(name, data_dir=SHARED) == problems


def test_gold_answers_grade_correct(shared):
    name, problems = shared
    verdicts = [grade(as_response(p.answer), p.answer, kind=answer_kind(p)) for p in problems]
    correct = sum(v is Verdict.CORRECT for v in verdicts)
    print(f"\n{name}: gold answer as response: {correct}/{len(problems)} correct")
    assert correct >= MIN_CORRECT * len(problems), [
        (p.id, p.answer, v) for p, v in zip(problems, verdicts, strict=True) if not v.is_correct
    ][:20]


@pytest.mark.parametrize(("name", "field"), [("math500", "solution"), ("gsm8k", "orig_answer")])
def test_reference_solutions_grade_correct(name, field):
    problems = load_benchmark(name, data_dir=needs_shared())
    texts = [p.solution if field == "solution" else p.meta[field] for p in problems]
    assert all(texts)
    correct = sum(
        grade(text, p.answer, kind="math") is Verdict.CORRECT
        for p, text in zip(problems, texts, strict=True)
    )
    print(f"\n{name}: reference solution ({field}) as response: {correct}/{len(problems)} correct")
    assert correct >= MIN_CORRECT * len(problems)


def test_shuffled_answers_grade_wrong(shared):
    """Each problem graded against another problem's gold answer: only equal answers pass."""
    name, problems = shared
    perm = derangement(len(problems), seed=0)
    correct = equal = correct_unequal = 0
    for p, other in zip(problems, (problems[j] for j in perm), strict=True):
        ok = grade(as_response(other.answer), p.answer, kind=answer_kind(p)).is_correct
        same = other.answer == p.answer
        correct += ok
        equal += same
        correct_unequal += ok and not same
        if same:
            assert ok, (p.id, p.answer)
    print(f"\n{name}: shuffled answers: {correct}/{len(problems)} correct, {equal} equal by chance")
    if BENCHMARKS[name].kind == "choice":
        assert correct_unequal == 0  # a letter is right exactly when it is the gold letter
    else:
        # Answers written differently can still be equal in value; allow a few, no more.
        assert correct_unequal <= 0.01 * len(problems)
        assert correct <= 0.02 * len(problems)


def test_choice_letters_right_and_wrong():
    problems = load_benchmark("mmlu_stem", data_dir=needs_shared())
    for p in problems:
        for letter in "ABCD":
            verdict = grade(as_response(letter), p.answer, kind="choice")
            assert verdict is (Verdict.CORRECT if letter == p.answer else Verdict.WRONG), p.id


def test_mmlu_stem_subjects_are_those_of_the_shared_file():
    problems = load_benchmark("mmlu_stem", data_dir=needs_shared())
    assert sorted({p.meta["type"] for p in problems}) == sorted(MMLU_STEM_SUBJECTS)
    assert len(MMLU_STEM_SUBJECTS) == 18


# ------------------------------------------- hub normalisers on the shared raw fields


def test_hub_normalisers_reproduce_the_shared_normalisation():
    """The shared files keep every original field: rebuilt as hub rows and normalised, they
    give the same ids, problems and answers as the files' own normalised fields."""
    data = needs_shared()

    def original(p, name):
        return p.meta.get(f"orig_{name}", getattr(p, name, None) or p.meta.get(name))

    for p in load_benchmark("math500", data_dir=data):
        row = {"unique_id": p.id, "problem": p.problem, "answer": p.answer, **p.meta}
        got = bm.normalise_math500({**row, "solution": p.solution}, 0, None)
        assert (got.id, got.problem, got.answer, got.solution) == (
            p.id,
            p.problem,
            p.answer,
            p.solution,
        )

    normalise = BENCHMARKS["gsm8k"].normalise
    for p in load_benchmark("gsm8k", data_dir=data):
        row = {"question": p.meta["question"], "answer": p.meta["orig_answer"]}
        got = normalise(row, p.meta["idx"], "main")
        assert (got.id, got.problem, got.answer) == (p.id, p.problem, p.answer)
        assert "<<" not in got.solution and "####" not in got.solution
        assert got.solution.endswith(f"The answer is \\boxed{{{p.answer}}}.")
        assert grade(got.solution, p.answer, kind="math") is Verdict.CORRECT

    for name in ("aime24", "amc23"):
        for p in load_benchmark(name, data_dir=data):
            row = {
                "id": p.meta["orig_id"],
                "problem": p.problem,
                "answer": original(p, "answer"),
                "url": p.meta["url"],
                "solution": p.solution,
            }
            assert BENCHMARKS[name].normalise(row, 0, None).id == p.id
            assert BENCHMARKS[name].normalise(row, 0, None).answer == p.answer

    for p in load_benchmark("aime25", data_dir=data):
        part, number = p.id.split("-")[2:]
        row = {"question": p.meta["question"], "answer": original(p, "answer")}
        got = bm.normalise_aime25(row, int(number) - 1, f"AIME2025-{part}")
        assert (got.id, got.problem, got.answer) == (p.id, p.problem, p.answer)

    for p in load_benchmark("mmlu_stem", data_dir=data):
        row = {
            "question": p.problem,
            "subject": p.meta["type"],
            "choices": list(p.choices),
            "answer": p.meta["orig_answer"],
        }
        got = bm.normalise_mmlu(row, 7, p.meta["type"])
        assert (got.problem, got.answer, got.choices) == (p.problem, p.answer, p.choices)
        assert got.id == f"mmlu_stem-{p.meta['type']}-7"


# ------------------------------------------------ hub normalisers on hand-written rows

GPQA_ROW = {
    "Question": "  Which particle mediates the electromagnetic force?\n",
    "Correct Answer": " photon",
    "Incorrect Answer 1": "gluon",
    "Incorrect Answer 2": "W boson ",
    "Incorrect Answer 3": "graviton",
    "Explanation": "The photon is the gauge boson of QED.",
    "Record ID": "recA1b2C3d4E5f6G7",
    "Subdomain": "Physics (general)",
    "High-level domain": "Physics",
}

# name -> (raw hub row with the hub's field names, row index, config, expected id, answer)
HUB_ROWS = {
    "math500": (
        {
            "problem": "What is $1+1$?",
            "solution": "$1+1=\\boxed{2}$.",
            "answer": "2",
            "subject": "Prealgebra",
            "level": 1,
            "unique_id": "test/prealgebra/1.json",
        },
        0,
        None,
        "test/prealgebra/1.json",
        "2",
    ),
    "gsm8k": (
        {
            "question": "Ann has 1,000 pens and buys 234 more. How many pens?",
            "answer": "1000 + 234 = <<1000+234=1234>>1234\n#### 1,234",
        },
        5,
        "main",
        "gsm8k-5",
        "1234",
    ),
    "gsm8k_train": (
        {"question": "What is 2 + 3?", "answer": "2 + 3 = <<2+3=5>>5\n#### 5"},
        12,
        "main",
        "gsm8k-train-12",
        "5",
    ),
    "mmlu_stem": (
        {
            "question": "What is 2 + 2?",
            "subject": "elementary_mathematics",
            "choices": ["3", "4", "5", "22"],
            "answer": 1,
        },
        3,
        "elementary_mathematics",
        "mmlu_stem-elementary_mathematics-3",
        "B",
    ),
    "gpqa_diamond": (GPQA_ROW, 0, "gpqa_diamond", "gpqa-recA1b2C3d4E5f6G7", None),
    "aime23": (
        {
            "id": 41,
            "problem": "Find the answer.",
            "solution": "So it is $\\boxed{080}$.",
            "answer": "080",
            "url": "https://artofproblemsolving.com/wiki/index.php/2023_AIME_II_Problems/Problem_7",
        },
        41,
        None,
        "aime-2023-II-7",
        "80",
    ),
    "aime24": (
        {
            "id": 60,
            "problem": "Find the number of minutes.",
            "solution": "$\\boxed{204}$",
            "answer": "204",
            "url": "https://artofproblemsolving.com/wiki/index.php/2024_AIME_I_Problems/Problem_1",
            "year": "2024",
        },
        0,
        None,
        "aime-2024-I-1",
        "204",
    ),
    "aime25": (
        {"question": "Find the angle in degrees.", "answer": "336^\\circ"},
        4,
        "AIME2025-II",
        "aime-2025-II-5",
        "336",
    ),
    "amc23": (
        {
            "id": 0,
            "problem": "How many miles from City $A$ will they be when they meet?",
            "answer": 27.0,
            "url": "https://artofproblemsolving.com/wiki/index.php/2023_AMC_12A_Problems/Problem_1",
        },
        0,
        None,
        "amc-2023-12A-1",
        "27",
    ),
    "math_train": (
        {
            "problem": "Compute $\\frac{1}{2}+\\frac{1}{4}$.",
            "level": "Level 1",
            "type": "Algebra",
            "solution": "Half is $\\boxed{\\frac{2}{4}}$ here, so the sum is $\\boxed{\\frac{3}{4}}$.",
        },
        9,
        "algebra",
        "math-train-algebra-9",
        "\\frac{3}{4}",
    ),
}


def test_every_benchmark_has_a_hand_written_hub_row():
    assert set(HUB_ROWS) == set(BENCHMARKS)


@pytest.mark.parametrize("name", sorted(HUB_ROWS))
def test_hub_normaliser_on_a_raw_row(name):
    row, index, config, expected_id, expected_answer = HUB_ROWS[name]
    spec = BENCHMARKS[name]
    assert config in spec.configs
    assert spec.select is None or spec.select(row)
    p = spec.normalise(row, index, config)
    assert p.id == expected_id
    assert answer_kind(p) == spec.kind
    if expected_answer is not None:
        assert p.answer == expected_answer
    # Whatever the normaliser produced, the verifier accepts its gold answer.
    assert grade(as_response(p.answer), p.answer, kind=spec.kind) is Verdict.CORRECT
    if name.startswith("gsm8k"):
        assert "<<" not in p.solution and p.solution.endswith(f"\\boxed{{{p.answer}}}.")
        assert p.meta["orig_answer"] == row["answer"]


def test_contest_year_filters():
    row = dict(HUB_ROWS["aime23"][0])
    assert not BENCHMARKS["aime23"].select({**row, "url": row["url"].replace("2023", "2022")})
    amc = dict(HUB_ROWS["amc23"][0])
    assert not BENCHMARKS["amc23"].select({**amc, "url": amc["url"].replace("2023", "2022")})
    assert not BENCHMARKS["amc23"].select({**amc, "url": None})


def test_gpqa_options_are_shuffled_deterministically_by_id():
    normalise = BENCHMARKS["gpqa_diamond"].normalise
    p = normalise(GPQA_ROW, 0, "gpqa_diamond")
    assert p == normalise(dict(GPQA_ROW), 5, "gpqa_diamond")  # the id, not the row, seeds it
    assert p.problem == "Which particle mediates the electromagnetic force?"
    assert sorted(p.choices) == sorted(["photon", "gluon", "W boson", "graviton"])
    assert p.choices["ABCD".index(p.answer)] == "photon"
    # Pinned: a change of the seeding scheme would silently change every gold letter.
    assert (p.answer, p.choices) == ("C", ("gluon", "graviton", "photon", "W boson"))
    letters = {
        normalise({**GPQA_ROW, "Record ID": f"rec{i}"}, i, "gpqa_diamond").answer for i in range(40)
    }
    assert letters == set("ABCD")


@pytest.mark.parametrize(
    ("name", "row", "message"),
    [
        ("gsm8k", {"question": "Q?", "answer": "no final line"}, "####"),
        ("gsm8k", {"question": "Q?"}, "'answer'"),
        ("math_train", {"problem": "P", "solution": "no box"}, "boxed"),
        ("aime24", {"problem": "P", "answer": "12", "url": "https://example.org"}, "url"),
        ("aime25", {"question": "Q", "answer": "12.5"}, "integer"),
        ("mmlu_stem", {"question": "Q", "choices": ["a", "b"], "answer": 0}, "4 choices"),
        ("gpqa_diamond", {"Question": "Q", "Correct Answer": "a"}, "Incorrect Answer 1"),
    ],
)
def test_hub_normaliser_errors_name_the_problem(name, row, message):
    config = BENCHMARKS[name].configs[0]
    with pytest.raises(ValueError, match=message):
        BENCHMARKS[name].normalise(row, 0, config)


# ------------------------------------------------------------------ hub (faked)


def fake_hub(monkeypatch, tables):
    """Replace ``datasets.load_dataset`` by a lookup in ``tables[(hub_id, config, split)]``."""
    datasets = pytest.importorskip("datasets")
    calls = []

    def load_dataset(hub_id, config=None, *, split):
        calls.append((hub_id, config, split))
        if isinstance(tables, Exception):
            raise tables
        return tables[(hub_id, config, split)]

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return calls


def test_hub_load_concatenates_configs(monkeypatch):
    rows_i = [{"question": f"Part I problem {i}", "answer": str(i)} for i in range(1, 16)]
    rows_ii = [{"question": f"Part II problem {i}", "answer": f"{i:03d}"} for i in range(1, 16)]
    calls = fake_hub(
        monkeypatch,
        {
            ("opencompass/AIME2025", "AIME2025-I", "test"): rows_i,
            ("opencompass/AIME2025", "AIME2025-II", "test"): rows_ii,
        },
    )
    problems = load_benchmark("aime25")
    assert calls == [
        ("opencompass/AIME2025", "AIME2025-I", "test"),
        ("opencompass/AIME2025", "AIME2025-II", "test"),
    ]
    assert [p.id for p in problems[14:16]] == ["aime-2025-I-15", "aime-2025-II-1"]
    assert problems[-1].answer == "15" and problems[-1].meta["orig_answer"] == "015"


def test_hub_load_selects_the_year_and_warns_on_size(monkeypatch, caplog):
    url = "https://artofproblemsolving.com/wiki/index.php/{}_AMC_12B_Problems/Problem_{}"
    rows = [
        {"id": i, "problem": f"P{i}", "answer": float(i), "url": url.format(year, i)}
        for i, year in enumerate([2022, 2023, 2023, 2022, 2023], start=1)
    ]
    fake_hub(monkeypatch, {("AI-MO/aimo-validation-amc", None, "train"): rows})
    with caplog.at_level(logging.WARNING, logger="ictrepro.data.benchmarks"):
        problems = load_benchmark("amc23")
    assert [p.id for p in problems] == ["amc-2023-12B-2", "amc-2023-12B-3", "amc-2023-12B-5"]
    assert "3 problems" in caplog.text and "expected 40" in caplog.text


def test_hub_row_errors_name_hub_id_and_row(monkeypatch):
    rows = [{"question": "Q1", "answer": "x\n#### 1"}, {"question": "Q2", "answer": "no marker"}]
    fake_hub(monkeypatch, {("openai/gsm8k", "main", "test"): rows})
    with pytest.raises(ValueError, match=r"openai/gsm8k config main, split test, row 1: .*####"):
        load_benchmark("gsm8k")


def test_hub_duplicate_ids_are_refused(monkeypatch):
    row = HUB_ROWS["aime24"][0]
    fake_hub(monkeypatch, {("HuggingFaceH4/aime_2024", None, "train"): [row, dict(row)]})
    with pytest.raises(ValueError, match="duplicate problem id 'aime-2024-I-1'"):
        load_benchmark("aime24")


@pytest.mark.parametrize("name", ["math500", "gpqa_diamond"])
def test_unreachable_hub_names_the_source_and_suggests_data_dir(monkeypatch, name):
    fake_hub(monkeypatch, ConnectionError("Couldn't reach the Hub (OfflineModeIsEnabled)"))
    with pytest.raises(BenchmarkUnavailableError) as info:
        load_benchmark(name)
    message = str(info.value)
    assert BENCHMARKS[name].hub_id in message and "--data-dir" in message
    assert ("gated" in message) == (name == "gpqa_diamond")


def test_real_offline_hub_fails_with_a_clear_error():
    """With HF_DATASETS_OFFLINE=1 (tests/conftest.py) the real `datasets` fails fast."""
    pytest.importorskip("datasets")
    try:
        load_benchmark("math500")
    except BenchmarkUnavailableError as exc:
        assert "HuggingFaceH4/MATH-500" in str(exc) and "--data-dir" in str(exc)
    else:
        pytest.skip("MATH-500 is in this machine's Hugging Face cache, so offline mode loads it")


# --------------------------------------------------------------------- registry


def test_registry_and_evaluation_settings():
    assert set(PAPER_BENCHMARKS) | {"amc23"} | set(TRAINING_SETS) == set(BENCHMARKS)
    for name, spec in BENCHMARKS.items():
        assert spec.name == name and spec.kind in ("math", "choice")
        if name in TRAINING_SETS:
            assert not spec.is_evaluation and spec.local_file == "train.jsonl"
            continue
        assert (spec.temperature, spec.top_p, spec.max_new_tokens) == (1.0, 1.0, 1024)
        small = name.startswith(("aime", "amc"))
        assert spec.n == (16 if small else 4)
        assert spec.ks == ((1, 4, 16) if small else (1, 4)) and max(spec.ks) <= spec.n
    assert len(BENCHMARKS["mmlu_stem"].configs) == 18
    assert BENCHMARKS["gsm8k_train"].size + BENCHMARKS["math_train"].size == 14973


# -------------------------------------------------------------------- bad input


def write_lines(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def record(i: int, **fields) -> str:
    return json.dumps({"id": f"p{i}", "problem": f"Q{i}", "answer": str(i), **fields})


def test_malformed_line_names_file_and_line(tmp_path):
    path = write_lines(tmp_path / "gsm8k" / "test.jsonl", [record(1), "", "{not json"])
    with pytest.raises(ValueError, match=rf"{path}:3: not valid JSON"):
        load_benchmark("gsm8k", data_dir=tmp_path)


def test_missing_answer_names_file_line_and_field(tmp_path):
    bad = json.dumps({"id": "p2", "problem": "Q2"})
    path = write_lines(tmp_path / "gsm8k" / "test.jsonl", [record(1), bad])
    with pytest.raises(ValueError, match=rf"{path}:2: missing field 'answer'"):
        load_benchmark("gsm8k", data_dir=tmp_path)


def test_empty_file_is_an_error_naming_it(tmp_path):
    path = write_lines(tmp_path / "aime24" / "test.jsonl", [""])
    with pytest.raises(ValueError, match=rf"{path}: no problems"):
        load_benchmark("aime24", data_dir=tmp_path)


def test_duplicate_id_is_an_error_naming_it(tmp_path):
    write_lines(tmp_path / "gsm8k.jsonl", [record(1), record(2), record(1)])
    with pytest.raises(ValueError, match="duplicate problem id 'p1'"):
        load_benchmark("gsm8k", data_dir=tmp_path)


def test_unknown_benchmark_lists_valid_names(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown benchmark 'math5000'.*math500.*gpqa_diamond"):
        load_benchmark("math5000", data_dir=tmp_path)


def test_missing_file_names_the_paths_tried(tmp_path):
    with pytest.raises(DataError) as info:
        load_benchmark("aime23", data_dir=tmp_path)
    assert str(tmp_path / "aime23" / "test.jsonl") in str(info.value)
    assert str(tmp_path / "aime23.jsonl") in str(info.value)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "needs 2-4 choices"),
        ({"choices": ["a", "b", "c", "d"], "answer": "E"}, "names none of the options"),
        ({"choices": ["a", "b"], "answer": "C"}, "names none of the options"),
        ({"choices": "abcd", "answer": "A"}, "'choices' must be a list"),
    ],
)
def test_bad_choice_records(tmp_path, fields, message):
    path = write_lines(tmp_path / "mmlu_stem" / "test.jsonl", [record(1, **fields)])
    with pytest.raises(ValueError, match=rf"{path}:1: .*{message}"):
        load_benchmark("mmlu_stem", data_dir=tmp_path)


def test_choices_on_a_math_benchmark_are_refused(tmp_path):
    write_lines(tmp_path / "math500.jsonl", [record(1, choices=["1", "2", "3", "4"])])
    with pytest.raises(ValueError, match="math benchmark's problem has choices"):
        load_benchmark("math500", data_dir=tmp_path)


def test_other_fields_go_to_meta_and_written_files_read_back(tmp_path):
    path = write_lines(
        tmp_path / "gsm8k_train" / "train.jsonl",
        [record(1, source="x", meta={"split": "train"}, solution="s")],
    )
    (p,) = load_benchmark("gsm8k_train", data_dir=tmp_path)
    assert p.meta == {"source": "x", "split": "train"} and p.solution == "s"
    assert path.is_file()

    problems = load_benchmark("aime25", data_dir=needs_shared())
    write_benchmark_jsonl(problems, tmp_path / "out" / "aime25" / "test.jsonl")
    assert load_benchmark("aime25", data_dir=tmp_path / "out") == problems
