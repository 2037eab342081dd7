"""``nv.backends.cudnn`` (``import nova.backends.cudnn as cudnn``): PyTorch's cuDNN
switches, which scripts set unconditionally (``cudnn.benchmark = True``,
``cudnn.deterministic = True``, ``cudnn.allow_tf32 = True``).

Nova generates its own kernels and never uses cuDNN, so ``is_available()`` is False and
``version()`` None (PyTorch's CPU build answers the same); the flags are module
attributes with PyTorch's defaults, remembered and read back, and change nothing (see
``nova.backends``)."""
from __future__ import annotations

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """False: Nova generates its own kernels and never uses cuDNN."""
    return False


def version() -> None:
    return None


__all__ = ["allow_tf32", "benchmark", "deterministic", "enabled", "is_available",
           "version"]
