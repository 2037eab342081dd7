"""DLPack exchange for host tensors (``Tensor.__dlpack__``, ``nv.from_dlpack``), through
numpy's DLPack support.

Nova values are immutable, so unlike PyTorch's an exported tensor is a copy: the
consumer owns fresh memory, and writes to it never reach the Nova tensor
(``copy=False`` is refused with ``BufferError``). An imported array is wrapped as
``nv.from_numpy`` wraps one, without copying. GPU tensors and producers are refused
with what to do instead.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from nova.tensor.tensor import Tensor

KDL_CPU, KDL_CUDA = 1, 2


def dlpack_device(t: Tensor) -> tuple[int, int]:
    """``(device type, index)`` in DLPack's numbering: ``(1, 0)`` on the host."""
    return (KDL_CUDA, 0) if t.node.device == "cuda" else (KDL_CPU, 0)


def to_dlpack(t: Tensor, stream: Any = -1, max_version: Any = None, dl_device: Any = None,
              copy: Any = None) -> Any:
    """A DLPack capsule holding a copy of ``t``'s values (module docstring)."""
    if t.requires_grad:
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
    if t.node.device == "cuda":
        raise BufferError("__dlpack__: Nova exports host tensors only; call .cpu() first")
    if copy is False:
        raise BufferError("__dlpack__: copy=False cannot be honoured: Nova tensors' values "
                          "are immutable, so an export is always a copy")
    if dl_device is not None and tuple(dl_device)[0] != KDL_CPU:
        raise BufferError(f"__dlpack__: cannot export to device {tuple(dl_device)}; Nova "
                          "exports to the host (1, 0) only")
    arr = t.numpy()
    if arr.dtype.kind not in "biuf" or arr.dtype.itemsize != t.dtype.itemsize:
        raise BufferError(f"__dlpack__: {t.dtype.name} has no numpy DLPack export; convert "
                          "first (e.g. .float())")
    kwargs = {} if max_version is None else {"max_version": tuple(max_version)}
    return arr.__dlpack__(**kwargs)


class _Capsule:
    """A bare (legacy) DLPack capsule as an object numpy's ``from_dlpack`` accepts."""

    def __init__(self, capsule: Any):
        self.capsule = capsule

    def __dlpack__(self, **_: Any) -> Any:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (KDL_CPU, 0)


def from_dlpack(ext_tensor: Any, *, device: Any = None, copy: bool | None = None) -> Tensor:
    """``torch.from_dlpack``: a tensor of the values of any object that implements
    ``__dlpack__`` (numpy, JAX, PyTorch CPU arrays...) or a DLPack capsule."""
    from nova.tensor.creation import from_numpy, tensor
    if isinstance(ext_tensor, Tensor):
        return ext_tensor
    if not hasattr(ext_tensor, "__dlpack__"):
        if type(ext_tensor).__name__ != "PyCapsule":
            raise TypeError(f"from_dlpack: expected an object implementing __dlpack__ or "
                            f"a DLPack capsule, got {type(ext_tensor).__name__}")
        ext_tensor = _Capsule(ext_tensor)
    if hasattr(ext_tensor, "__dlpack_device__"):
        kind = int(ext_tensor.__dlpack_device__()[0])
        if kind != KDL_CPU:
            raise RuntimeError(f"from_dlpack: the producer's data is on DLPack device type "
                               f"{kind}; Nova imports host (CPU) data only: move it to the "
                               "host first")
    arr = np.from_dlpack(ext_tensor)
    out = from_numpy(np.array(arr) if copy else arr)
    return out if device is None else tensor(out, device=device)
