"""The one record schema that synthetic suites and real benchmark loaders both produce."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ictrepro.errors import DataError


@dataclass(frozen=True)
class Problem:
    """One benchmark or training problem.

    Attributes:
        id: unique and stable within its source (e.g. ``tiny-gsm8k-test-00017``).
        problem: the question text (for multiple choice, the stem without the options).
        answer: the gold final answer as a short string: a number, LaTeX, or a letter A-D.
        choices: the options in order A, B, C, D for multiple choice, else ``None``.
        solution: a worked solution ending in ``\\boxed{answer}`` (empty if unknown).
        meta: anything else (suite, split, generator, difficulty, original fields).
    """

    id: str
    problem: str
    answer: str
    choices: tuple[str, ...] | None = None
    solution: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        record = asdict(self)
        record["choices"] = list(self.choices) if self.choices is not None else None
        return record

    @classmethod
    def from_json(cls, record: dict[str, Any], *, where: str = "record") -> Problem:
        """Build from a JSON object; a missing or mistyped field is named with ``where``."""
        for name in ("id", "problem", "answer"):
            if name not in record:
                raise DataError(f"{where}: missing field {name!r}")
            if not isinstance(record[name], str):
                raise DataError(
                    f"{where}: field {name!r} must be a string, got {type(record[name]).__name__}"
                )
        choices = record.get("choices")
        if choices is not None and not (
            isinstance(choices, list) and all(isinstance(c, str) for c in choices)
        ):
            raise DataError(f"{where}: field 'choices' must be a list of strings or null")
        return cls(
            id=record["id"],
            problem=record["problem"],
            answer=record["answer"],
            choices=tuple(choices) if choices is not None else None,
            solution=record.get("solution") or "",
            meta=dict(record.get("meta") or {}),
        )
