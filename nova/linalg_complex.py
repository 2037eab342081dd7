"""Complex linear systems for ``nova.linalg``: ``inv`` and ``solve`` of complex
matrices through the real embedding ``[[A, -B], [B, A]]`` of ``A + iB``, so the real
solvers (and their gradients) serve. (Here, not in ``nova.tensor.complex_math``: the
tensor layer does not import ``nova.linalg``.)"""
from __future__ import annotations

from typing import Any

from nova.linalg import cross as real_cross
from nova.linalg import inv as real_inv
from nova.linalg import solve as real_solve
from nova.tensor import movement as _movement
from nova.tensor.complex import ComplexTensor, _as_complex
from nova.tensor.complex_creation import _part_products
from nova.tensor.tensor import Tensor


def _real_embedding(a: ComplexTensor) -> Tensor:
    """``A + iB`` as the real ``[[A, -B], [B, A]]`` (batched): a complex linear map as the
    real one on ``[re; im]``, so the real solvers (and their gradients) serve."""
    top = _movement.cat([a._re, -a._im], -1)
    bottom = _movement.cat([a._im, a._re], -1)
    return _movement.cat([top, bottom], -2)


def _square(op: str, a: ComplexTensor) -> int:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{op}: A must be a batch of square matrices, got shape "
                         f"{list(a.shape)}")
    return a.shape[-1]


def inv(a: Any) -> ComplexTensor:
    """The inverse of a complex matrix (``torch.linalg.inv``): the top-left and
    bottom-left blocks of the real embedding's inverse are its parts."""
    a = _as_complex("linalg.inv", a)
    n = _square("linalg.inv", a)
    full = real_inv(_real_embedding(a))
    return ComplexTensor(full[..., :n, :n], full[..., n:, :n])


def solve(a: Any, b: Any, *, left: bool = True) -> ComplexTensor:
    """``X`` with ``A X = B`` (``torch.linalg.solve``; ``left=False``: ``X A = B``) as
    the real system ``[[A_r, -A_i], [A_i, A_r]] [X_r; X_i] = [B_r; B_i]``; a 1-D ``B``
    is a vector."""
    a, b = _as_complex("linalg.solve", a), _as_complex("linalg.solve", b)
    n = _square("linalg.solve", a)
    if not left:
        return solve(a.mT, b.mT).mT
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape[-1] == n)
    rhs = b.unsqueeze(-1) if vector else b
    if rhs.shape[-2] != n:
        raise ValueError(f"linalg.solve: A of shape {list(a.shape)} and B of shape "
                         f"{list(b.shape)} do not fit (B needs {n} rows)")
    x = real_solve(_real_embedding(a), _movement.cat([rhs._re, rhs._im], -2))
    out = ComplexTensor(x[..., :n, :], x[..., n:, :])
    return out[..., 0] if vector else out


def cross(a: Any, b: Any, *, dim: int = -1) -> ComplexTensor:
    """The cross product over ``dim`` (``torch.linalg.cross``), bilinear: the real
    products of the parts."""
    return _part_products(lambda parts: real_cross(parts[0], parts[1], dim=dim), [a, b])


# ``nv.linalg.<name>(z)`` (``nova/__init__.py`` installs them) and ``z.inverse()``.
FUNCTIONS = {"inv": inv, "solve": solve, "cross": cross}
ComplexTensor.inverse = inv      # type: ignore[attr-defined]
