"""Error classes shared across Nova.

:class:`ShapeError` is what Nova raises when shapes do not fit an op: operands that
do not broadcast, a matmul's inner dims that differ, a reshape to another number of
elements, tensors that do not concatenate. Nova's argument errors are ``ValueError``
(the brief, and Python's convention); PyTorch raises ``RuntimeError`` for these, and
ported code catches that (``except RuntimeError`` around a forward). A ``ShapeError``
is both, so either ``except`` catches it.

:class:`DTypeError` is the same for a tensor of a dtype an op does not take: a float
index to ``gather`` or ``embedding``, a bit operation on floats, a matmul of float32
with float64, an integer input to an op defined on floating point. Nova raises
``TypeError`` for these (Python's convention for a wrong type); PyTorch raises
``RuntimeError`` (or its subclass ``NotImplementedError``, "not implemented for
'Float'"). A ``DTypeError`` is both. A Python argument of the wrong type (a str where
an int goes, a list where a tensor goes) stays a plain ``TypeError``, as in PyTorch.
"""
from __future__ import annotations


class ShapeError(ValueError, RuntimeError):
    """Shapes that do not fit an op (module docstring): a ``ValueError`` and, as
    PyTorch's error for the same call, a ``RuntimeError``."""


class DTypeError(TypeError, RuntimeError):
    """A tensor whose dtype an op does not take (module docstring): a ``TypeError``
    and, as PyTorch's error for the same call, a ``RuntimeError``."""


class ArgumentError(ValueError, RuntimeError):
    """A bad size, count or option (a ``split`` whose sections do not add up, a
    ``one_hot`` class past ``num_classes``, more samples than categories without
    replacement): a ``ValueError``, as Nova's argument checks raise, and a
    ``RuntimeError``, as PyTorch raises for these, so code written against either
    catches it."""


class IndexRangeError(IndexError, RuntimeError):
    """An index value outside the dim it indexes (``gather``, ``scatter``,
    ``index_select``, ``embedding``), or a reduction over an empty dim: an
    ``IndexError`` and a ``RuntimeError``, since PyTorch raises one or the other
    depending on the op (``gather``'s out-of-bounds index is a ``RuntimeError``,
    ``index_select``'s an ``IndexError``)."""


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


__all__ = ["ArgumentError", "ComplexUnsupportedError", "DTypeError", "IndexRangeError",
           "ShapeError", "complex_unsupported"]
