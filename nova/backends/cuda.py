"""``nv.backends.cuda`` (``import nova.backends.cuda``): PyTorch's CUDA switches.

``matmul.allow_tf32`` mirrors the float32 matmul precision (see ``nova.backends``).

Scaled dot-product attention: PyTorch picks among several kernels (flash, memory
efficient, cuDNN, the math composite, an overrideable one) and lets a script switch
each off (``enable_flash_sdp(False)``) or restrict a block to some
(``nova.nn.attention.sdpa_kernel``). Nova has one ``scaled_dot_product_attention``: the
compiler finds attention in the step and fuses it into one flash-style kernel where it
can (``nova.compiler.passes.attention``), and keeps the composite elsewhere. So these
flags are checked as PyTorch checks them (a bool, else RuntimeError) and remembered
(the getters read them back, ``sdpa_kernel`` restores them on exit), and select nothing:
attention computes the same with every backend switched off, where PyTorch raises "No
viable backend".
"""
from __future__ import annotations

import contextlib
import enum
import warnings
from collections.abc import Iterator
from typing import Any

from nova.backends import _state

__all__ = ["SDPBackend", "cudnn_sdp_enabled", "enable_cudnn_sdp", "enable_flash_sdp",
           "enable_math_sdp", "enable_mem_efficient_sdp", "flash_sdp_enabled",
           "fp16_bf16_reduction_math_sdp_allowed", "allow_fp16_bf16_reduction_math_sdp",
           "is_built", "math_sdp_enabled", "matmul", "mem_efficient_sdp_enabled",
           "sdp_kernel"]


class _CudaMatmul:
    """``torch.backends.cuda.matmul``: ``allow_tf32`` mirrors the float32 matmul
    precision (True is ``"high"``), as in PyTorch; the reduced-precision reduction flags
    are remembered."""

    def __init__(self) -> None:
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    @property
    def allow_tf32(self) -> bool:
        return _state["matmul_precision"] != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        _state["matmul_precision"] = "high" if value else "highest"

    def __repr__(self) -> str:
        return (f"_CudaMatmul(allow_tf32={self.allow_tf32}, "
                f"allow_fp16_reduced_precision_reduction="
                f"{self.allow_fp16_reduced_precision_reduction}, "
                f"allow_bf16_reduced_precision_reduction="
                f"{self.allow_bf16_reduced_precision_reduction})")


matmul = _CudaMatmul()


def is_built() -> bool:
    """Whether Nova can generate CUDA code: always (NVRTC is loaded when used)."""
    return True


class SDPBackend(enum.Enum):
    """``torch.nn.attention.SDPBackend``, with PyTorch 2.13's members and values. As
    PyTorch's (a pybind11 enum), a member converts with ``int()`` but is not equal to
    the int."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4

    def __int__(self) -> int:
        return self.value

    __index__ = __int__


# PyTorch's flag names (``torch._C._get_<name>_sdp_enabled``) and their backends, in
# its order; and the default priority order of ``sdpa_kernel(..., set_priority=True)``.
_SDP_NAMES = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
              "mem_efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH,
              "overrideable": SDPBackend.OVERRIDEABLE}
_sdp: dict[str, Any] = {**dict.fromkeys(_SDP_NAMES, True), "fp16_bf16_reduction": True,
                        "priority": [1, 2, 0, 3, 4]}


def _set_flag(function: str, name: str, enabled: Any) -> None:
    if type(enabled) is not bool:
        kind = type(enabled)
        name = kind.__qualname__ if kind.__module__ == "builtins" else \
            f"{kind.__module__}.{kind.__qualname__}"
        if kind.__module__.startswith("nova."):
            name = kind.__qualname__                 # (PyTorch says Tensor, not the path)
        raise RuntimeError(f"{function} expects a bool, but got {name}")
    _sdp[name] = enabled


def enable_flash_sdp(enabled: bool) -> None:
    """Remember whether flash attention may be used (selects nothing: module docstring)."""
    _set_flag("enable_flash_sdp", "flash", enabled)


def flash_sdp_enabled() -> bool:
    return _sdp["flash"]


def enable_mem_efficient_sdp(enabled: bool) -> None:
    """Remember whether memory-efficient attention may be used (selects nothing)."""
    _set_flag("enable_mem_efficient_sdp", "mem_efficient", enabled)


def mem_efficient_sdp_enabled() -> bool:
    return _sdp["mem_efficient"]


def enable_math_sdp(enabled: bool) -> None:
    """Remember whether the math composite may be used (selects nothing)."""
    _set_flag("enable_math_sdp", "math", enabled)


def math_sdp_enabled() -> bool:
    return _sdp["math"]


def enable_cudnn_sdp(enabled: bool) -> None:
    """Remember whether cuDNN attention may be used (selects nothing; Nova never uses
    cuDNN)."""
    _set_flag("enable_cudnn_sdp", "cudnn", enabled)


def cudnn_sdp_enabled() -> bool:
    return _sdp["cudnn"]


def allow_fp16_bf16_reduction_math_sdp(enabled: bool) -> None:
    """Remember whether the math backend may reduce in half precision (Nova's attention
    accumulates in float32 whatever this says)."""
    _set_flag("allow_fp16_bf16_reduction_math_sdp", "fp16_bf16_reduction", enabled)


def fp16_bf16_reduction_math_sdp_allowed() -> bool:
    return _sdp["fp16_bf16_reduction"]


def _enabled_backends() -> list[SDPBackend]:
    return [backend for name, backend in _SDP_NAMES.items() if _sdp[name]]


@contextlib.contextmanager
def _sdpa_kernel(backends: Any, set_priority: bool = False) -> Iterator[dict]:
    """``nova.nn.attention.sdpa_kernel`` (defined here so that ``sdp_kernel`` below can
    use it without ``nova.backends`` importing ``nova.nn``)."""
    if not isinstance(backends, (list, SDPBackend)):
        raise AssertionError("Backend must be an instance of SDPBackend or a list of "
                             f"SDPBackend instances, got {type(backends).__name__}")
    if isinstance(backends, SDPBackend):
        backends = [backends]
    backends = list(dict.fromkeys(backends))
    previous = {name: _sdp[name] for name in _SDP_NAMES}, list(_sdp["priority"])
    try:
        for name, backend in _SDP_NAMES.items():
            # (as PyTorch's: an element that is no SDPBackend enables nothing)
            _sdp[name] = any(b is backend for b in backends)
        if set_priority:
            chosen = [int(b) for b in backends if isinstance(b, SDPBackend)]
            _sdp["priority"] = chosen + [p for p in previous[1] if p not in chosen]
        yield {}
    finally:
        _sdp.update(previous[0])
        _sdp["priority"] = previous[1]


@contextlib.contextmanager
def sdp_kernel(enable_flash: bool = True, enable_math: bool = True,
               enable_mem_efficient: bool = True, enable_cudnn: bool = True
               ) -> Iterator[dict]:
    """PyTorch's deprecated context manager: ``sdpa_kernel`` of the backends enabled
    here (warns FutureWarning, as PyTorch's)."""
    warnings.warn("`nova.backends.cuda.sdp_kernel()` is deprecated. In the future, this "
                  "context manager will be removed. Please see "
                  "`nova.nn.attention.sdpa_kernel()` for the new context manager, with "
                  "updated signature.", FutureWarning, stacklevel=3)
    chosen = []
    if enable_flash:
        chosen.append(SDPBackend.FLASH_ATTENTION)
    if enable_mem_efficient:
        chosen.append(SDPBackend.EFFICIENT_ATTENTION)
    if enable_math:
        chosen.append(SDPBackend.MATH)
    if enable_cudnn:
        chosen.append(SDPBackend.CUDNN_ATTENTION)
    with _sdpa_kernel(chosen) as context:
        yield context
