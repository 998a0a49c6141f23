"""The answer verifier shared by RL training rewards and benchmark scoring.

- :func:`extract_answer` / :func:`last_boxed`: find the final answer in a response;
- :func:`grade`: one response against its gold answer, in the current process -> :class:`Verdict`;
- :class:`Verifier`: many :class:`GradeRequest` in order, in-process or in worker processes
  with a guard against hung gradings; :func:`count_verdicts` for reports.

Only ``Verdict.CORRECT`` is correct. ``UNGRADABLE`` (the gold could not be parsed) is a
data problem: report it, never count it as a wrong answer.
"""

from ictrepro.verify.extract import KINDS, extract_answer, last_boxed
from ictrepro.verify.grade import Verdict, grade
from ictrepro.verify.pool import GradeRequest, Verifier, count_verdicts

__all__ = [
    "KINDS",
    "GradeRequest",
    "Verdict",
    "Verifier",
    "count_verdicts",
    "extract_answer",
    "grade",
    "last_boxed",
]
