"""Catch tensors the project creates without naming a device.

On a CPU-only machine every tensor is on the CPU, so a factory call that forgets
``device=`` (and so would put a tensor on the CPU beside CUDA inputs) cannot fail by
itself. :class:`RequireExplicitDevice` makes it fail: inside it, a torch factory function
called from the ``ictrepro`` package without a ``device`` argument raises. Calls from
other packages (transformers, accelerate) are not checked.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

import ictrepro

PACKAGE_DIR = str(Path(ictrepro.__file__).resolve().parent)

#: Functions that make a new tensor and default to the CPU when given no device.
FACTORIES = {
    torch.zeros,
    torch.ones,
    torch.full,
    torch.empty,
    torch.arange,
    torch.rand,
    torch.randn,
    torch.randint,
    torch.randperm,
    torch.tensor,
    torch.eye,
    torch.linspace,
}


class DeviceNotNamed(AssertionError):
    pass


class RequireExplicitDevice(TorchFunctionMode):
    """Raise on a device-less tensor factory call made from ictrepro's own code."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in FACTORIES and kwargs.get("device") is None:
            caller = sys._getframe(1)
            # Skip torch's own frames (the mode is entered through torch.overrides).
            while caller is not None and "torch" in Path(caller.f_code.co_filename).parts:
                caller = caller.f_back
            filename = str(Path(caller.f_code.co_filename).resolve()) if caller else ""
            if filename.startswith(PACKAGE_DIR):
                raise DeviceNotNamed(
                    f"{func.__name__}() without device= at {filename}:{caller.f_lineno}"
                )
        return func(*args, **kwargs)
