"""``nv.backends`` and the process-wide switches training scripts set through torch:
``torch.backends.cuda.matmul.allow_tf32 = True``, ``torch.backends.cudnn.benchmark =
True``, ``torch.set_float32_matmul_precision("high")``,
``torch.use_deterministic_algorithms(True)``.

They are accepted and remembered (so code that reads them back works), and none
changes what Nova computes, for reasons that hold on every engine:

- Precision: Nova's CPU GEMMs compute float32 products in float32 (no reduced-precision
  mode exists there); its CUDA GEMMs of float32 use TF32 tensor cores, which is what
  ``allow_tf32 = True`` / precision ``"high"`` ask for. ``"highest"`` (PyTorch's default)
  therefore does not hold for float32 matmuls on the GPU: asking for it explicitly warns.
- Determinism: every Nova kernel reduces in a fixed order (the thread pool splits work
  by index, not by arrival), so results repeat bit for bit run to run on one machine;
  ``use_deterministic_algorithms`` has nothing to switch.
- ``cudnn``: Nova does not use cuDNN; ``benchmark`` would choose among its kernels by
  timing them, and Nova configures kernels analytically instead.
"""
from __future__ import annotations

import warnings

_MATMUL_PRECISIONS = ("highest", "high", "medium")
_state = {"matmul_precision": "highest", "deterministic": False, "warn_only": False}


class _Flags:
    """An attribute bag with the defaults PyTorch has (a script may set any of them)."""

    def __init__(self, **defaults):
        self.__dict__.update(defaults)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__dict__})"


class _CudaMatmul(_Flags):
    """``torch.backends.cuda.matmul``: ``allow_tf32`` mirrors the float32 matmul
    precision (True is ``"high"``), as in PyTorch."""

    @property
    def allow_tf32(self) -> bool:
        return _state["matmul_precision"] != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        _state["matmul_precision"] = "high" if value else "highest"


class _Cuda:
    matmul = _CudaMatmul(allow_fp16_reduced_precision_reduction=True,
                         allow_bf16_reduced_precision_reduction=True)

    @staticmethod
    def is_built() -> bool:
        """Whether Nova can generate CUDA code: always (NVRTC is loaded when used)."""
        return True


class _Cudnn(_Flags):
    @staticmethod
    def is_available() -> bool:
        """False: Nova generates its own kernels and never uses cuDNN."""
        return False

    @staticmethod
    def version() -> None:
        return None


class _Mps(_Flags):
    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def is_built() -> bool:
        return False


cuda = _Cuda()
cudnn = _Cudnn(enabled=True, benchmark=False, deterministic=False, allow_tf32=True)
mps = _Mps()


def set_float32_matmul_precision(precision: str) -> None:
    """Remember the float32 matmul precision (``torch.set_float32_matmul_precision``):
    ``"highest"``, ``"high"`` or ``"medium"``. See the module docstring for what Nova
    computes; ``"highest"`` warns that CUDA float32 GEMMs stay TF32."""
    if precision not in _MATMUL_PRECISIONS:
        raise ValueError(f"set_float32_matmul_precision: precision must be one of "
                         f"{list(_MATMUL_PRECISIONS)}, got {precision!r}")
    if precision == "highest":
        warnings.warn("set_float32_matmul_precision('highest'): Nova's CPU GEMMs are full "
                      "float32, but its CUDA GEMMs of float32 use TF32 tensor cores "
                      "(PyTorch's 'high') whatever this setting", UserWarning, stacklevel=2)
    _state["matmul_precision"] = precision


def get_float32_matmul_precision() -> str:
    return _state["matmul_precision"]


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Remember the flag (``torch.use_deterministic_algorithms``): Nova's kernels are
    deterministic whatever it says (see the module docstring)."""
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms: mode must be a bool, got {mode!r}")
    _state["deterministic"], _state["warn_only"] = mode, bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    return _state["deterministic"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _state["warn_only"]
