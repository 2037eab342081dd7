"""``nn.DataParallel``: PyTorch's single-process multi-GPU wrapper, which older scripts
apply unconditionally (``model = nn.DataParallel(model)``, then ``model.module``).

Nova runs a step on one device (the CPU's threads, or ``cuda:0``), so there is nothing
to scatter: the wrapper calls its module, and ``module``, ``device_ids`` and
``output_device`` read as in PyTorch. More than one device id is refused rather than
silently using one; for several processes or machines use ``DistributedDataParallel``.
"""
from __future__ import annotations

from typing import Any

from nova.nn.module import Module


class DataParallel(Module):
    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None,
                 dim: int = 0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel: expected an nn.Module, got {type(module).__name__}")
        ids = list(device_ids) if device_ids is not None else []
        if len(ids) > 1:
            raise ValueError(f"DataParallel: Nova runs a step on one device; got device_ids "
                             f"{ids}. Use DistributedDataParallel (one process per device)")
        self.module = module
        self.device_ids = ids
        self.output_device = output_device if output_device is not None else \
            (ids[0] if ids else None)
        self.dim = dim

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        return self.module(*inputs, **kwargs)


__all__ = ["DataParallel"]
