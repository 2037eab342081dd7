"""``nv.version``: ``torch.version``'s fields, for scripts that log or check them.

``__version__`` is Nova's own version (``nv.__version__``). ``cuda`` is the CUDA
runtime version CuPy reports (``"13.0"``) where Nova's CUDA backend can run, else None,
as on PyTorch's CPU-only build; it is looked up on first access (``import nova`` never
imports CuPy). ``git_version`` is the commit of the source tree Nova runs from, read
from its ``.git`` directory without running git (once), or ``"Unknown"`` (an installed copy
without one), PyTorch's word for it. ``debug`` is False and ``hip`` None, as on
PyTorch's CUDA and CPU builds.
"""
from __future__ import annotations

import os
from typing import Any

from nova import __version__

debug = False
hip: str | None = None

_cached: dict[str, Any] = {}

__all__ = ["__version__", "debug", "hip"]   # (and cuda, git_version: __getattr__)


def _cuda_version() -> str | None:
    from nova.runtime.cuda_runtime import unavailable_reason
    if unavailable_reason() is not None:
        return None
    try:
        import cupy
        version = int(cupy.cuda.runtime.runtimeGetVersion())
    except Exception:      # a test backend without CuPy, or a runtime that will not say
        return None
    return f"{version // 1000}.{version % 1000 // 10}"


def _git_version() -> str:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    git = os.path.join(root, ".git")
    try:
        if os.path.isfile(git):                      # a worktree: "gitdir: <path>"
            with open(git) as f:
                git = os.path.join(root, f.read().split(":", 1)[1].strip())
        with open(os.path.join(git, "HEAD")) as f:
            head = f.read().strip()
        if not head.startswith("ref:"):
            return head                              # a detached HEAD: the commit
        ref = head.split(":", 1)[1].strip()
        for directory in (git, _common_dir(git)):
            path = os.path.join(directory, ref)
            if os.path.isfile(path):
                with open(path) as f:
                    return f.read().strip()
            packed = os.path.join(directory, "packed-refs")
            if os.path.isfile(packed):
                with open(packed) as f:
                    for line in f:
                        parts = line.split()
                        if len(parts) == 2 and parts[1] == ref:
                            return parts[0]
    except (OSError, IndexError):
        pass
    return "Unknown"


def _common_dir(git: str) -> str:
    """A worktree's shared git directory (its ``commondir`` file), else ``git``."""
    try:
        with open(os.path.join(git, "commondir")) as f:
            return os.path.normpath(os.path.join(git, f.read().strip()))
    except OSError:
        return git


def __getattr__(name: str) -> Any:
    if name == "cuda":
        return _cuda_version()
    if name == "git_version":
        if name not in _cached:
            _cached[name] = _git_version()
        return _cached[name]
    raise AttributeError(f"module 'nova.version' has no attribute {name!r}")
