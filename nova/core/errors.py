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


class ComplexUnsupportedError(TypeError, AttributeError):
    """An op complex tensors do not have (``nova.tensor.complex`` lists those they do): a
    ``TypeError`` naming it (an ``AttributeError`` too, so ``hasattr`` and
    ``getattr(z, name, default)`` see no such method)."""


def complex_unsupported(op: str, z: object) -> ComplexUnsupportedError:
    """The error for ``op`` given the complex tensor ``z``: names the op, its dtype and
    shape, and where to turn."""
    return ComplexUnsupportedError(
        f"{op}: not supported for complex tensors (a {z.dtype.name} tensor of shape "  # type: ignore[attr-defined]
        f"{list(z.shape)}); nova.tensor.complex lists what is (or take .real, .imag, "  # type: ignore[attr-defined]
        ".abs() or nv.view_as_real first)")


__all__ = ["ComplexUnsupportedError", "ShapeError", "complex_unsupported"]
