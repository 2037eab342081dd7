"""Error classes shared across Nova.

:class:`ShapeError` is what Nova raises when shapes do not fit an op: operands that
do not broadcast, a matmul's inner dims that differ, a reshape to another number of
elements, tensors that do not concatenate. Nova's argument errors are ``ValueError``
(the brief, and Python's convention); PyTorch raises ``RuntimeError`` for these, and
ported code catches that (``except RuntimeError`` around a forward). A ``ShapeError``
is both, so either ``except`` catches it.
"""
from __future__ import annotations


class ShapeError(ValueError, RuntimeError):
    """Shapes that do not fit an op (module docstring): a ``ValueError`` and, as
    PyTorch's error for the same call, a ``RuntimeError``."""


__all__ = ["ShapeError"]
