"""What the trainer needs under FSDP2 beyond ``accelerator.prepare``.

- ``enable_cpu_fsdp``: accelerate (1.16) turns a launch's FSDP settings into FSDP only on
  accelerator devices (its state picks FSDP for ``MULTI_GPU``/``MULTI_XPU``/..., never for
  ``MULTI_CPU``), so on a CPU-only machine ``configs/accelerate/cpu-fsdp-2proc.yaml`` would
  silently train as plain data parallel. The CPU stand-in of the GPU configs switches the
  state to FSDP itself, with the plugin the launcher's ``FSDP_*`` variables describe.
- ``prepare_reference``: the reference model sharded like the policy. accelerate's
  ``prepare_model(..., evaluation_mode=True)`` skips FSDP altogether, leaving every rank a
  whole (and, where loading was cpu-RAM-efficient, possibly empty) copy.
- ``head_forward``: a computation on the LM head's weight run *as* the head's forward,
  where FSDP's hooks hold the weight unsharded and reduce-scatter its gradient.
- ``param_checksum``: a checksum of the parameters that reads DTensor shards locally.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

import torch
from accelerate import Accelerator
from accelerate.state import PartialState
from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin
from torch import Tensor
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor


def fsdp_requested() -> bool:
    """Whether the launch asked for FSDP (``accelerate launch`` with an FSDP config)."""
    return os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"


def enable_cpu_fsdp(accelerator: Accelerator) -> bool:
    """Switch a CPU multi-process ``accelerator`` to FSDP when the launch asked for it.

    Returns whether it did. Only the distributed type and the plugin change: the process
    group (gloo), device (cpu) and mixed precision are accelerate's own. Call before any
    ``prepare``.
    """
    state = accelerator.state
    if not fsdp_requested() or state.distributed_type != DistributedType.MULTI_CPU:
        return False
    plugin = FullyShardedDataParallelPlugin()  # reads the launcher's FSDP_* variables
    if accelerator.mixed_precision != "no":
        plugin.set_mixed_precision(accelerator.mixed_precision)
    state.fsdp_plugin = plugin
    state.distributed_type = DistributedType.FSDP
    PartialState._shared_state["distributed_type"] = DistributedType.FSDP
    return True


def is_fsdp(accelerator: Accelerator) -> bool:
    return accelerator.distributed_type == DistributedType.FSDP


def prepare_reference(accelerator: Accelerator, model: torch.nn.Module) -> torch.nn.Module:
    """The frozen reference model, placed and (under FSDP2) sharded like the policy.

    Under FSDP2 it goes through accelerate's own ``fsdp2_prepare_model``: the plugin's
    wrap policy (one unit per decoder layer), mixed-precision policy, and, with
    ``cpu_ram_efficient_loading``, rank 0's weights broadcast to the ranks that hold none.
    Elsewhere ``prepare_model(..., evaluation_mode=True)`` moves it to the device (no
    gradient hooks).
    """
    model.requires_grad_(False).eval()
    if not is_fsdp(accelerator):
        return accelerator.prepare_model(model, evaluation_mode=True)
    if not accelerator.is_fsdp2:
        raise NotImplementedError("only FSDP2 is supported (fsdp_version: 2 in the config)")
    from accelerate.utils.fsdp_utils import fsdp2_prepare_model

    return fsdp2_prepare_model(accelerator, model).eval()


@contextlib.contextmanager
def head_forward(model: torch.nn.Module, fn: Callable[[Tensor, Tensor], Tensor]) -> Iterator[None]:
    """Within the block, ``model``'s LM head computes ``fn(head_weight, hidden)`` instead of
    its logits, so a call of the model returns ``fn``'s result as ``.logits``.

    The computation thus runs inside the head's own forward, itself inside the model's
    forward: under FSDP2 the weight is gathered there (outside it is a ``DTensor`` shard)
    and the gradient reaching it is reduce-scattered to the shards when backward reaches
    the head's inputs, as for the head's own matmul. (Calling the head a second time after
    the model's forward has returned segfaulted in FSDP2's backward, torch 2.13 on CPU.)
    With DDP or one process it is a plain call of ``fn`` on the same tensors.
    """
    head = getattr(model, "module", model).get_output_embeddings()
    if "forward" in head.__dict__:
        raise RuntimeError(f"the LM head's forward is already replaced: {head.forward}")
    head.forward = lambda hidden: fn(head.weight, hidden)
    try:
        yield
    finally:
        del head.forward


def reshard(model: torch.nn.Module) -> None:
    """Free the gathered weights an FSDP2 forward without backward leaves behind.

    accelerate shards the final norm and LM head (and a tied embedding) with
    ``reshard_after_forward=False``, and only backward reshards them: after a no-gradient
    pass they would stay whole on every process until the next backward (for the
    reference model, for ever). A no-op on a model that is not FSDP2-sharded.
    """

    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


@torch.no_grad()
def param_checksum(model: torch.nn.Module) -> Tensor:
    """``[1]`` float64: the sum of this process's parameter values, shards read locally
    (an FSDP2 ``DTensor`` contributes its local shard; summed over processes this is the
    whole model's checksum). Tied parameters count once."""
    params = {id(p): p for p in model.parameters()}.values()
    parts = [(p.to_local() if isinstance(p, DTensor) else p).double().sum() for p in params]
    return torch.stack(parts).sum().reshape(1)
