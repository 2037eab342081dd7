"""``nv.cpu``: PyTorch's ``torch.cpu`` -- the device queries scripts make without
checking for a GPU, and the older AMP spelling ``torch.cpu.amp.autocast`` /
``torch.cpu.amp.GradScaler`` that CPU training scripts (and ones written for
PyTorch < 2.4) still call.

The AMP names live in the submodule ``nova.cpu.amp`` (``from nova.cpu.amp import
autocast``), thin wrappers over ``nova.amp`` with ``device_type='cpu'``; as PyTorch's,
they warn (FutureWarning) that ``nova.amp.autocast('cpu', ...)`` is the current
spelling."""
from __future__ import annotations

from typing import Any

from nova.cpu import amp

__all__ = ["amp", "current_device", "device_count", "is_available", "set_device",
           "synchronize"]


def is_available() -> bool:
    """Always True: the CPU backend is always there."""
    return True


def device_count() -> int:
    """1, as PyTorch's: the CPU is one device."""
    return 1


def current_device() -> str:
    """``'cpu'``, as PyTorch's."""
    return "cpu"


def set_device(device: Any) -> None:
    """Nothing to do (one CPU device), as PyTorch's ``torch.cpu.set_device``."""


def synchronize(device: Any = None) -> None:
    """Nothing to wait for: CPU steps finish before they return."""

