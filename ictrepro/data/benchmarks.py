"""The paper's real benchmarks and training sets, normalised to :class:`Problem` records.

:data:`BENCHMARKS` names every data set, where it lives on the Hugging Face hub, how a raw
hub row becomes a :class:`Problem`, its answer kind, and (for evaluation benchmarks) the
sampling settings of its evaluation. :func:`load_benchmark` reads one either from a local
directory (``data_dir/<name>/test.jsonl``, already in the record schema; no network) or
from the hub (needs network, and for GPQA an account that accepted its terms).

| name | hub id (config) | split | rows | kind |
|---|---|---|---|---|
| ``math500`` | HuggingFaceH4/MATH-500 | test | 500 | math |
| ``gsm8k`` | openai/gsm8k (main) | test | 1319 | math |
| ``mmlu_stem`` | cais/mmlu (18 STEM subjects) | test | 3018 | choice |
| ``gpqa_diamond`` | Idavidrein/gpqa (gpqa_diamond), gated | train | 198 | choice |
| ``aime23`` | AI-MO/aimo-validation-aime, rows of 2023 | train | 30 | math |
| ``aime24`` | HuggingFaceH4/aime_2024 | train | 30 | math |
| ``aime25`` | opencompass/AIME2025 (AIME2025-I, AIME2025-II) | test | 30 | math |
| ``amc23`` (extra) | AI-MO/aimo-validation-amc, rows of 2023 | train | 40 | math |
| ``gsm8k_train`` | openai/gsm8k (main) | train | 7473 | math |
| ``math_train`` | EleutherAI/hendrycks_math (7 subjects) | train | 7500 | math |

Normalisation (hub rows; the local files are read as they are):

- ids are unique and stable: MATH-500's ``unique_id``; ``gsm8k-<row>``; ``aime-<year>-<I|II>-<n>``
  and ``amc-2023-<12A|12B>-<n>`` parsed from the AoPS url (AIME 2025: from the config and
  the row); ``mmlu_stem-<subject>-<row>``; ``gpqa-<Record ID>``; ``math-train-<subject>-<row>``;
- GSM8K's answer is the number after ``####`` without thousands commas; AIME and AMC
  answers are plain integer strings: ``025`` -> ``25``, ``27.0`` -> ``27``,
  ``336^\\circ`` -> ``336``;
- GSM8K: the worked solution loses its ``<<48/2=24>>`` calculator notes and its final
  ``#### N`` line becomes ``The answer is \\boxed{N}.``; the original is kept in
  ``meta["orig_answer"]``;
- MATH training set: the answer is the last ``\\boxed{}`` of the solution;
- MMLU: the answer index 0-3 becomes a letter A-D, options keep their order;
- GPQA: the correct and three incorrect options are shuffled by a generator seeded with
  the problem id, so the order (and the gold letter) is the same on every machine.

Evaluation settings (``n`` samples per problem, pass@k for ``ks``, ``temperature``,
``top_p``, ``max_new_tokens``) are *inferred*: the paper does not state its decoding. All
benchmarks use temperature 1.0, top-p 1.0 and 1,024 new tokens (the training response
length); the 30-40 problem sets (AIME 2023/24/25, AMC 2023) draw 16 samples per problem
instead of 4 so that their pass@1 is not dominated by sampling noise.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ictrepro.data.records import Problem
from ictrepro.errors import ConfigError, DataError
from ictrepro.io import atomic_write_jsonl, read_jsonl_numbered
from ictrepro.verify.extract import last_boxed

logger = logging.getLogger(__name__)

LETTERS = "ABCD"

MMLU_STEM_SUBJECTS = (
    "abstract_algebra",
    "astronomy",
    "college_biology",
    "college_chemistry",
    "college_computer_science",
    "college_mathematics",
    "college_physics",
    "computer_security",
    "conceptual_physics",
    "electrical_engineering",
    "elementary_mathematics",
    "high_school_biology",
    "high_school_chemistry",
    "high_school_computer_science",
    "high_school_mathematics",
    "high_school_physics",
    "high_school_statistics",
    "machine_learning",
)
"""The 18 MMLU subjects of Qwen2.5-Math's ``mmlu_stem`` (3,018 test questions)."""

MATH_SUBJECTS = (
    "algebra",
    "counting_and_probability",
    "geometry",
    "intermediate_algebra",
    "number_theory",
    "prealgebra",
    "precalculus",
)
"""The configs of EleutherAI/hendrycks_math (MATH's seven subjects)."""

Row = Mapping[str, Any]
Normaliser = Callable[[Row, int, str | None], Problem]
"""``normalise(row, index, config)``: one raw hub row, its index within its config's split,
and that config (``None`` for single-config data sets) -> a :class:`Problem`."""


# ------------------------------------------------------------------------ field helpers


def _field(row: Row, name: str) -> Any:
    if name not in row or row[name] is None:
        raise ValueError(f"missing field {name!r}")
    return row[name]


def _text(row: Row, name: str) -> str:
    value = _field(row, name)
    if not isinstance(value, str):
        raise ValueError(f"field {name!r} must be a string, got {type(value).__name__}")
    return value


_INTEGER = re.compile(r"(-?\d+)(?:\.0*)?")
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?$")


def integer_answer(value: Any) -> str:
    """An integer answer as a plain string: ``"025"`` -> ``"25"``, ``27.0`` -> ``"27"``,
    ``"336^\\circ"`` -> ``"336"``, ``"1,234"`` -> ``"1234"``; anything else is an error."""
    text = _DEGREES.sub("", str(value).strip()).replace(",", "").strip()
    match = _INTEGER.fullmatch(text)
    if match is None:
        raise ValueError(f"expected an integer answer, got {value!r}")
    return str(int(match.group(1)))


# ---------------------------------------------------------------------------- GSM8K

_CALCULATOR_NOTE = re.compile(r"<<[^<>]*>>")


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def gsm8k_answer(worked: str) -> str:
    """The gold number of a GSM8K worked solution: the text after its last ``####``,
    stripped, thousands commas removed (``#### 1,234`` -> ``1234``)."""
    if "####" not in worked:
        raise ValueError("GSM8K solution has no '####' final-answer line")
    answer = worked.rsplit("####", 1)[1].strip().replace(",", "")
    if _NUMBER.fullmatch(answer) is None:
        raise ValueError(f"GSM8K final answer is not a number: {answer!r}")
    return answer


def gsm8k_solution(worked: str) -> str:
    """The worked solution without calculator notes, ending in ``\\boxed{answer}``."""
    body = worked.rsplit("####", 1)[0]
    body = _CALCULATOR_NOTE.sub("", body).rstrip()
    return f"{body}\nThe answer is \\boxed{{{gsm8k_answer(worked)}}}."


def _gsm8k(id_prefix: str) -> Normaliser:
    def normalise(row: Row, index: int, config: str | None = None) -> Problem:
        worked = _text(row, "answer")
        return Problem(
            id=f"{id_prefix}-{index}",
            problem=_text(row, "question"),
            answer=gsm8k_answer(worked),
            solution=gsm8k_solution(worked),
            meta={"orig_answer": worked},
        )

    return normalise


# ----------------------------------------------------------------------------- MATH


def normalise_math500(row: Row, index: int, config: str | None = None) -> Problem:
    """HuggingFaceH4/MATH-500: problem, solution, answer, subject, level, unique_id."""
    return Problem(
        id=_text(row, "unique_id"),
        problem=_text(row, "problem"),
        answer=_text(row, "answer"),
        solution=row.get("solution") or "",
        meta={"subject": row.get("subject"), "level": row.get("level")},
    )


def normalise_math_train(row: Row, index: int, config: str | None = None) -> Problem:
    """EleutherAI/hendrycks_math (one config per subject): problem, level, type, solution.
    The answer is the content of the solution's last ``\\boxed{}``."""
    solution = _text(row, "solution")
    answer = last_boxed(solution)
    if answer is None or not answer.strip():
        raise ValueError("MATH solution has no \\boxed{} answer")
    return Problem(
        id=f"math-train-{config or 'all'}-{index}",
        problem=_text(row, "problem"),
        answer=answer.strip(),
        solution=solution,
        meta={"subject": row.get("type"), "level": row.get("level")},
    )


# ----------------------------------------------------------------------- AIME / AMC

_AOPS_URL = re.compile(r"(\d{4})_(AIME|AMC)_(I{1,2}|12A|12B|10A|10B)_Problems/Problem_(\d+)")


def _aops(row: Row) -> tuple[int, str, str, int]:
    """(year, contest, part, problem number) from an AoPS wiki url."""
    url = _text(row, "url")
    match = _AOPS_URL.search(url)
    if match is None:
        raise ValueError(f"cannot read year/contest/problem from url {url!r}")
    year, contest, part, number = match.groups()
    return int(year), contest, part, int(number)


def _aops_year(year: int, contest: str) -> Callable[[Row], bool]:
    """Row filter: the AoPS url names ``contest`` of ``year``."""

    def select(row: Row) -> bool:
        match = _AOPS_URL.search(str(row.get("url") or ""))
        return match is not None and (int(match[1]), match[2]) == (year, contest)

    return select


def normalise_aops(row: Row, index: int, config: str | None = None) -> Problem:
    """AI-MO/aimo-validation-aime, HuggingFaceH4/aime_2024, AI-MO/aimo-validation-amc:
    id, problem, answer (a string or, for AMC, a float), url, solution (AIME only)."""
    year, contest, part, number = _aops(row)
    raw = _field(row, "answer")
    answer = integer_answer(raw)
    meta: dict[str, Any] = {"url": row["url"], "orig_id": row.get("id")}
    if str(raw) != answer:
        meta["orig_answer"] = raw
    return Problem(
        id=f"{contest.lower()}-{year}-{part}-{number}",
        problem=_text(row, "problem"),
        answer=answer,
        solution=row.get("solution") or "",
        meta=meta,
    )


def normalise_aime25(row: Row, index: int, config: str | None = None) -> Problem:
    """opencompass/AIME2025 (configs AIME2025-I and AIME2025-II): question, answer. Rows are
    in problem order, so the problem number is the row index + 1."""
    if config not in ("AIME2025-I", "AIME2025-II"):
        raise ValueError(f"AIME 2025 needs its config AIME2025-I or AIME2025-II, got {config!r}")
    raw = _field(row, "answer")
    answer = integer_answer(raw)
    return Problem(
        id=f"aime-2025-{config.split('-')[1]}-{index + 1}",
        problem=_text(row, "question"),
        answer=answer,
        meta={} if str(raw) == answer else {"orig_answer": raw},
    )


# ------------------------------------------------------------------ multiple choice


def normalise_mmlu(row: Row, index: int, config: str | None = None) -> Problem:
    """cais/mmlu (one config per subject): question, subject, choices (4), answer (0-3)."""
    subject = config or _text(row, "subject")
    choices = tuple(str(c) for c in _field(row, "choices"))
    gold = _field(row, "answer")
    if len(choices) != 4 or gold not in range(4):
        raise ValueError(f"expected 4 choices and an answer index 0-3, got {choices!r}, {gold!r}")
    return Problem(
        id=f"mmlu_stem-{subject}-{index}",
        problem=_text(row, "question"),
        answer=LETTERS[gold],
        choices=choices,
        meta={"subject": subject, "orig_answer": gold},
    )


def normalise_gpqa(row: Row, index: int, config: str | None = None) -> Problem:
    """Idavidrein/gpqa: Question, Correct Answer, Incorrect Answer 1-3, Explanation,
    Record ID, Subdomain, High-level domain. The options are shuffled by a generator seeded
    with the problem id (a string seed is hashed with SHA-512: the same on every machine)."""
    problem_id = f"gpqa-{row.get('Record ID') or index}"
    names = ("Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")
    options = [_text(row, name).strip() for name in names]
    order = list(range(4))
    random.Random(problem_id).shuffle(order)
    return Problem(
        id=problem_id,
        problem=_text(row, "Question").strip(),
        answer=LETTERS[order.index(0)],
        choices=tuple(options[i] for i in order),
        solution=row.get("Explanation") or "",
        meta={"domain": row.get("High-level domain"), "subdomain": row.get("Subdomain")},
    )


# -------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class BenchmarkSpec:
    """One data set: its hub source, normaliser, answer kind and evaluation settings.

    Attributes:
        hub_config: a config name, a tuple of configs (concatenated in order), or ``None``.
        select: keeps only the hub rows it returns true for (e.g. one year of a contest).
        size: the number of problems of the full data set (a hub load of another size
            is logged as a warning).
        n, ks, temperature, top_p, max_new_tokens: evaluation sampling (inferred, see the
            module docstring); ``None`` for training sets.
        local_file: the file name looked for in ``data_dir/<name>/``.
        paper_name: how the paper's tables name the benchmark (reports show it);
            ``None`` for a data set the paper does not evaluate on.
    """

    name: str
    hub_id: str
    hub_config: str | tuple[str, ...] | None
    hub_split: str
    normalise: Normaliser
    kind: str
    size: int
    select: Callable[[Row], bool] | None = None
    gated: bool = False
    n: int | None = None
    ks: tuple[int, ...] | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_new_tokens: int | None = None
    local_file: str = "test.jsonl"
    paper_name: str | None = None

    @property
    def configs(self) -> tuple[str | None, ...]:
        if isinstance(self.hub_config, tuple):
            return self.hub_config
        return (self.hub_config,)

    @property
    def is_evaluation(self) -> bool:
        return self.n is not None


def _evaluation(
    name: str, *, n: int = 4, ks: tuple[int, ...] = (1, 4), **source: Any
) -> BenchmarkSpec:
    return BenchmarkSpec(
        name, **source, n=n, ks=ks, temperature=1.0, top_p=1.0, max_new_tokens=1024
    )


def _training(name: str, **source: Any) -> BenchmarkSpec:
    return BenchmarkSpec(name, **source, local_file="train.jsonl")


_SMALL = {"n": 16, "ks": (1, 4, 16)}
"""AIME/AMC: 30-40 problems, so more samples per problem."""

BENCHMARKS: dict[str, BenchmarkSpec] = {
    s.name: s
    for s in (
        _evaluation(
            "math500",
            paper_name="MATH500",
            hub_id="HuggingFaceH4/MATH-500",
            hub_config=None,
            hub_split="test",
            normalise=normalise_math500,
            kind="math",
            size=500,
        ),
        _evaluation(
            "gsm8k",
            paper_name="GSM8K",
            hub_id="openai/gsm8k",
            hub_config="main",
            hub_split="test",
            normalise=_gsm8k("gsm8k"),
            kind="math",
            size=1319,
        ),
        _evaluation(
            "mmlu_stem",
            paper_name="MMLU-STEM",
            hub_id="cais/mmlu",
            hub_config=MMLU_STEM_SUBJECTS,
            hub_split="test",
            normalise=normalise_mmlu,
            kind="choice",
            size=3018,
        ),
        _evaluation(
            "gpqa_diamond",
            paper_name="GPQA",
            hub_id="Idavidrein/gpqa",
            hub_config="gpqa_diamond",
            hub_split="train",
            normalise=normalise_gpqa,
            kind="choice",
            size=198,
            gated=True,
        ),
        _evaluation(
            "aime23",
            paper_name="AIME23",
            hub_id="AI-MO/aimo-validation-aime",
            hub_config=None,
            hub_split="train",
            normalise=normalise_aops,
            select=_aops_year(2023, "AIME"),
            kind="math",
            size=30,
            **_SMALL,
        ),
        _evaluation(
            "aime24",
            paper_name="AIME24",
            hub_id="HuggingFaceH4/aime_2024",
            hub_config=None,
            hub_split="train",
            normalise=normalise_aops,
            kind="math",
            size=30,
            **_SMALL,
        ),
        _evaluation(
            "aime25",
            paper_name="AIME25",
            hub_id="opencompass/AIME2025",
            hub_config=("AIME2025-I", "AIME2025-II"),
            hub_split="test",
            normalise=normalise_aime25,
            kind="math",
            size=30,
            **_SMALL,
        ),
        _evaluation(
            "amc23",
            hub_id="AI-MO/aimo-validation-amc",
            hub_config=None,
            hub_split="train",
            normalise=normalise_aops,
            select=_aops_year(2023, "AMC"),
            kind="math",
            size=40,
            **_SMALL,
        ),
        _training(
            "gsm8k_train",
            hub_id="openai/gsm8k",
            hub_config="main",
            hub_split="train",
            normalise=_gsm8k("gsm8k-train"),
            kind="math",
            size=7473,
        ),
        _training(
            "math_train",
            hub_id="EleutherAI/hendrycks_math",
            hub_config=MATH_SUBJECTS,
            hub_split="train",
            normalise=normalise_math_train,
            kind="math",
            size=7500,
        ),
    )
}

PAPER_BENCHMARKS = (
    "math500",
    "gsm8k",
    "mmlu_stem",
    "gpqa_diamond",
    "aime23",
    "aime24",
    "aime25",
)
"""The paper's seven evaluation benchmarks (``amc23`` is an extra)."""
TRAINING_SETS = ("gsm8k_train", "math_train")


def get_benchmark(name: str) -> BenchmarkSpec:
    if name not in BENCHMARKS:
        raise ConfigError(f"unknown benchmark {name!r}; valid: {', '.join(BENCHMARKS)}")
    return BENCHMARKS[name]


# ------------------------------------------------------------------ local JSON Lines

_SCHEMA_FIELDS = ("id", "problem", "answer", "choices", "solution", "meta")


def _check(problem: Problem, kind: str, where: str) -> None:
    """The answer and options fit the benchmark's answer kind."""
    if not problem.id.strip():
        raise DataError(f"{where}: empty id")
    if not problem.answer.strip():
        raise DataError(f"{where}: empty answer")
    if kind == "math" and problem.choices is not None:
        raise DataError(f"{where}: a math benchmark's problem has choices")
    if kind == "choice":
        if problem.choices is None or not 2 <= len(problem.choices) <= len(LETTERS):
            raise DataError(f"{where}: a multiple-choice problem needs 2-4 choices")
        if len(problem.answer) != 1 or problem.answer not in LETTERS[: len(problem.choices)]:
            raise DataError(f"{where}: answer {problem.answer!r} names none of the options")


def read_problems(path: str | Path, *, kind: str) -> list[Problem]:
    """Problems from a JSON Lines file in the record schema.

    Each line holds ``id``, ``problem``, ``answer`` (strings), optionally ``choices`` (a list
    of 2-4 strings, for ``kind="choice"``), ``solution`` and ``meta`` (an object); any other
    field is kept in ``meta``. Errors name the file and line (and the missing field); an
    empty file and a repeated id are errors.
    """
    path = Path(path)
    problems: list[Problem] = []
    for lineno, record in read_jsonl_numbered(path):
        where = f"{path}:{lineno}"
        meta = record.get("meta")
        if meta is not None and not isinstance(meta, dict):
            raise DataError(f"{where}: field 'meta' must be an object")
        solution = record.get("solution")
        if solution is not None and not isinstance(solution, str):
            raise DataError(f"{where}: field 'solution' must be a string")
        extra = {k: v for k, v in record.items() if k not in _SCHEMA_FIELDS}
        problem = Problem.from_json({**record, "meta": {**extra, **(meta or {})}}, where=where)
        _check(problem, kind, where)
        problems.append(problem)
    if not problems:
        raise DataError(f"{path}: no problems (the file is empty)")
    _check_unique(problems, str(path))
    return problems


def _check_unique(problems: Iterable[Problem], source: str) -> None:
    seen: set[str] = set()
    for p in problems:
        if p.id in seen:
            raise DataError(f"{source}: duplicate problem id {p.id!r}")
        seen.add(p.id)


def local_paths(name: str, data_dir: str | Path) -> list[Path]:
    """Where :func:`load_benchmark` looks for ``name`` in ``data_dir``, in order."""
    spec = get_benchmark(name)
    data_dir = Path(data_dir)
    return [data_dir / name / spec.local_file, data_dir / f"{name}.jsonl"]


def write_benchmark_jsonl(problems: Iterable[Problem], path: str | Path) -> None:
    """Write problems (atomically) in the record schema that :func:`read_problems` reads:
    e.g. ``write_benchmark_jsonl(load_benchmark("gpqa_diamond"), "data/gpqa_diamond/test.jsonl")``
    on a machine with hub access, for offline use elsewhere."""
    problems = list(problems)
    _check_unique(problems, str(path))
    atomic_write_jsonl(path, (p.to_json() for p in problems))


# ------------------------------------------------------------------------------ hub


class BenchmarkUnavailableError(DataError):
    """The hub (or the ``datasets`` library) could not provide a benchmark."""


def _load_hub(spec: BenchmarkSpec) -> list[Problem]:
    def unavailable(config: str | None, exc: BaseException) -> BenchmarkUnavailableError:
        source = f"{spec.hub_id}" + (f" (config {config})" if config else "")
        gated = (
            f" {spec.hub_id} is gated: accept its terms on huggingface.co and log in "
            "(`huggingface-cli login`)."
            if spec.gated
            else ""
        )
        return BenchmarkUnavailableError(
            f"could not load benchmark {spec.name!r} from the Hugging Face hub: {source}, "
            f"split {spec.hub_split}: {type(exc).__name__}: {exc}.{gated} Without hub access, "
            f"pass --data-dir DIR with DIR/{spec.name}/{spec.local_file} in the record "
            "schema (docs/benchmarks.md)."
        )

    try:
        import datasets  # here: slow to import, and only the hub path needs it
    except ImportError as exc:
        raise unavailable(spec.configs[0], exc) from exc
    problems: list[Problem] = []
    for config in spec.configs:
        try:
            rows = datasets.load_dataset(spec.hub_id, config, split=spec.hub_split)
        except Exception as exc:
            raise unavailable(config, exc) from exc
        for index, row in enumerate(rows):
            if spec.select is not None and not spec.select(row):
                continue
            try:
                problem = spec.normalise(row, index, config)
                _check(problem, spec.kind, "normalised row")
            except ValueError as exc:
                where = f"{spec.hub_id}" + (f" config {config}" if config else "")
                raise DataError(f"{where}, split {spec.hub_split}, row {index}: {exc}") from exc
            problems.append(problem)
    if not problems:
        raise DataError(f"{spec.hub_id}: no problems for benchmark {spec.name!r}")
    if len(problems) != spec.size:
        logger.warning(
            "benchmark %s: %d problems from %s, expected %d",
            spec.name,
            len(problems),
            spec.hub_id,
            spec.size,
        )
    _check_unique(problems, spec.hub_id)
    return problems


def load_benchmark(name: str, *, data_dir: str | Path | None = None) -> list[Problem]:
    """The problems of benchmark ``name`` (a key of :data:`BENCHMARKS`), in source order.

    With ``data_dir``: read ``data_dir/<name>/test.jsonl`` (``train.jsonl`` for training
    sets) or else ``data_dir/<name>.jsonl`` with :func:`read_problems`; no network. Without:
    download from the hub with ``datasets`` and the spec's normaliser; a failure raises
    :class:`BenchmarkUnavailableError` naming the hub id and suggesting ``--data-dir``.
    """
    spec = get_benchmark(name)
    if data_dir is None:
        return _load_hub(spec)
    candidates = local_paths(name, data_dir)
    for path in candidates:
        if path.is_file():
            return read_problems(path, kind=spec.kind)
    tried = ", ".join(str(p) for p in candidates)
    raise DataError(
        f"benchmark {name!r} not found in {data_dir}; tried {tried}. Write it there with "
        "write_benchmark_jsonl (docs/benchmarks.md) or drop --data-dir to load it from the hub."
    )
