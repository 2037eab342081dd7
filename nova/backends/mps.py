"""``nv.backends.mps``: Apple's Metal backend, which Nova does not have."""
from __future__ import annotations


def is_available() -> bool:
    return False


def is_built() -> bool:
    return False


__all__ = ["is_available", "is_built"]
