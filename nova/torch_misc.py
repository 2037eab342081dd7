"""The last of ``torch``'s top-level functions that scripts call outside any subsystem:
``set_default_tensor_type`` (deprecated in PyTorch 2.1, still in older scripts),
``get_num_interop_threads``/``set_num_interop_threads`` and ``typename``."""
from __future__ import annotations

import os
import warnings
from typing import Any

from nova.core import dtypes as dt
from nova.tensor.complex import ComplexTensor
from nova.tensor.legacy import _BY_STRING
from nova.tensor.tensor import Tensor

__all__ = ["get_num_interop_threads", "set_default_tensor_type", "set_num_interop_threads",
           "typename"]


def set_default_tensor_type(t: Any, /) -> None:
    """``torch.set_default_tensor_type``: ``nv.set_default_dtype`` of a floating legacy
    tensor type's dtype (``nv.DoubleTensor``, ``nv.FloatTensor``, ``nv.HalfTensor``,
    ``nv.BFloat16Tensor``) or of its name (``"torch.DoubleTensor"``, as ported scripts
    still spell it, or ``"nova.DoubleTensor"``); warns (UserWarning) that it is
    deprecated, as PyTorch's does. Integer types and anything else raise PyTorch's
    TypeError. A CUDA type (``nv.cuda.FloatTensor``), which in PyTorch also makes CUDA
    the default device, is refused with a TypeError naming the two calls that do that
    (``nv.set_default_dtype`` and ``nv.set_default_device('cuda')``); an unknown name
    is a TypeError (PyTorch fails importing it)."""
    given = t
    if isinstance(t, str):
        name = t.strip()
        if name.startswith("nova."):
            name = "torch." + name[len("nova."):]
        t = _BY_STRING.get(name)
        if t is None:
            raise TypeError(f"set_default_tensor_type: unknown tensor type {given!r}; "
                            "expected a name such as 'torch.DoubleTensor'")
    if not (isinstance(t, type) and any(t is legacy for legacy in _BY_STRING.values())):
        raise TypeError("invalid type object: only floating-point types are supported as "
                        "the default type")
    if t.is_cuda:
        raise TypeError(f"set_default_tensor_type({t.type_name}): Nova does not switch the "
                        "default device through a tensor type; call "
                        f"nv.set_default_dtype(nv.{t.dtype.name}) and "
                        "nv.set_default_device('cuda') instead")
    if t.dtype.category != dt.FLOAT:
        raise TypeError("only floating-point types are supported as the default type")
    warnings.warn("nova.set_default_tensor_type() is deprecated as of PyTorch 2.1, please "
                  "use nova.set_default_dtype() and nova.set_default_device() as "
                  "alternatives.", UserWarning, stacklevel=2)
    dt.set_default_dtype(t.dtype)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


_interop = {"threads": _cores()}


def get_num_interop_threads() -> int:
    """PyTorch's inter-op thread count (threads running independent ops at once, for the
    TorchScript interpreter): remembered, default the usable cores as PyTorch's. Nova
    runs one compiled step at a time and parallelizes inside its kernels
    (``nv.set_num_threads``), so this changes nothing."""
    return _interop["threads"]


def set_num_interop_threads(num: int) -> None:
    """Remember ``num`` (a positive int, else PyTorch's RuntimeError); see
    ``get_num_interop_threads``. PyTorch allows one call, before any parallel work;
    Nova, which starts no inter-op pool, accepts it at any time."""
    if type(num) is not int:
        raise RuntimeError(f"set_num_interop_threads expects an int, but got "
                           f"{type(num).__name__}")
    if num <= 0:
        raise RuntimeError("set_num_interop_threads expects a positive integer")
    _interop["threads"] = num


def typename(obj: Any, /) -> str:
    """``torch.typename``: a tensor's legacy type name (``'torch.FloatTensor'``, what
    ``x.type()`` says; ``'torch.ComplexFloatTensor'`` for complex64), else the object's
    fully qualified type name (``'nova.nn.layers.Linear'``, ``'int'``)."""
    if isinstance(obj, Tensor):
        return obj.type()
    if isinstance(obj, ComplexTensor):
        kind = "ComplexDoubleTensor" if obj.dtype == dt.complex128 else "ComplexFloatTensor"
        return f"torch.{'cuda.' if str(obj.device).startswith('cuda') else ''}{kind}"
    module = getattr(obj, "__module__", "") or ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module = obj.__class__.__module__ or ""
        qualname = obj.__class__.__qualname__
    if module in {"", "builtins"}:
        return qualname
    return f"{module}.{qualname}"
