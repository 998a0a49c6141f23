"""The project's own errors: what a user can fix, as opposed to a bug.

The CLI has one error boundary (``ictrepro.cli``): an :class:`IctreproError` becomes a
one-line message and exit code 2; anything else propagates with its traceback, because
it is a bug. Each subclass also derives from the builtin that its callers (and older
code) expect, so ``except ValueError`` keeps working where it did.

Messages name the bad input (file, line, field) and how to fix it.
"""

from __future__ import annotations


class IctreproError(Exception):
    """Base of every error the CLI reports as a message (exit code 2)."""


class ConfigError(IctreproError, ValueError):
    """A preset, config field, override or command-line value is invalid."""


class DataError(IctreproError, ValueError):
    """An input data file (benchmark, suite, responses, pinned results) is unusable."""


class RunDirError(IctreproError, RuntimeError):
    """A run directory holds another config's outputs, or is missing a stage's outputs."""


class UserModuleError(IctreproError, RuntimeError):
    """A user's method module (``--method-module FILE``) failed to load or misbehaved."""


class TrainingDiverged(IctreproError, RuntimeError):
    """Training produced non-finite values; the message names the step and quantity."""


class SamplerWeightsError(IctreproError, RuntimeError):
    """The inference engine does not sample from the trainer's weights (a weight push
    that did not land, or an engine built from another model)."""
