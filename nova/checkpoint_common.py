"""What ``nv.load``'s two readers share (``nova.serialization`` for safetensors files,
``nova.serialization_torch`` for PyTorch's zip files): the error they raise, the bounds
on what a file may claim, and the type of the function that places a loaded array.

A module of its own so that the safetensors reader can hand PyTorch files to the other
reader without the two importing each other."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from nova.core import dtypes as dt

if TYPE_CHECKING:
    from nova.tensor.tensor import Tensor

MAX_HEADER = 100_000_000     # the safetensors library's own limit
MAX_NESTING = 100            # containers inside containers, in what save accepts
MAX_RANK = 64                # numpy's limit on dimensions


class CheckpointError(ValueError):
    """A checkpoint file is truncated, corrupted or not a valid safetensors or PyTorch
    file. (A file that cannot be opened -- missing, unreadable, a directory -- raises the
    ``OSError`` that opening it raised, ``FileNotFoundError`` and the others, as
    ``torch.load`` does.)"""


# (which tensor, for messages; its bytes; its dtype; its saved location) -> the Tensor
Placement = Callable[[str, np.ndarray, dt.DType, str], "Tensor"]


# ``nv.serialization.add_safe_globals``: what scripts registered for
# ``torch.load(weights_only=True)`` (a global, or a (global, "module.qualname") pair), in
# order. Recorded only: the torch reader names a registered global when it refuses it.
SAFE_GLOBALS: list = []


def safe_global_name(entry: object) -> str:
    """The dotted name a pickle uses for a registered global."""
    if isinstance(entry, tuple):
        return entry[1]
    return f"{getattr(entry, '__module__', '')}.{getattr(entry, '__qualname__', '')}"
