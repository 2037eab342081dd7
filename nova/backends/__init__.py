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
- Attention (``cuda.enable_flash_sdp`` and the others, ``nova.nn.attention.sdpa_kernel``):
  Nova has one ``scaled_dot_product_attention``; the flags are checked and remembered
  and select nothing (``nova.backends.cuda``).

``cuda``, ``cudnn`` and ``mps`` are submodules, as PyTorch's: ``import
nova.backends.cudnn as cudnn`` and ``nv.backends.cudnn`` are the same module, and a flag
set through one (``cudnn.benchmark = True``) reads back through the other.
"""
from __future__ import annotations

import warnings

_MATMUL_PRECISIONS = ("highest", "high", "medium")
_state = {"matmul_precision": "highest", "deterministic": False, "warn_only": False}


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


from nova.backends import cuda, cudnn, mps  # noqa: E402,F401  (submodules, after _state)

__all__ = ["are_deterministic_algorithms_enabled", "cuda", "cudnn",
           "get_float32_matmul_precision", "is_deterministic_algorithms_warn_only_enabled",
           "mps", "set_float32_matmul_precision", "use_deterministic_algorithms"]
