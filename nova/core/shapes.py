"""Shape rules shared by the op front end: broadcasting, dim normalization, reshape
inference. Each raises at record time with the op name and the shapes involved."""
from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from nova.core.errors import ShapeError

Shape = tuple[int, ...]

# The most elements a tensor may have: its bytes (8 per element at most) and every
# offset the kernels compute (int64) must fit in int64, as PyTorch requires of a
# storage's byte size. Shapes past it raise at record time; shapes below it that do not
# fit in memory fail when realized (a MemoryError), not while recording.
MAX_NUMEL = (2**63 - 1) // 8


class SizeError(ValueError, RuntimeError):
    """A size no tensor can have (negative, or past ``MAX_NUMEL`` elements), raised
    while recording. A ``ValueError`` by Nova's rules and a ``RuntimeError`` as PyTorch
    raises it, so code written for either catches it (like numpy's ``AxisError``)."""


def check_numel(op: str, shape: Sequence[int]) -> None:
    """SizeError unless ``shape`` has at most ``MAX_NUMEL`` elements."""
    n = 1
    for s in shape:
        n *= s
    if n > MAX_NUMEL or any(s > MAX_NUMEL for s in shape):
        raise SizeError(f"{op}: shape {tuple(shape)} ({n} elements) is too large: a tensor "
                        f"may have at most {MAX_NUMEL} elements and no size above that, "
                        "so that its bytes fit in int64")


def broadcast_shapes(op: str, *shapes: Shape) -> Shape:
    """NumPy/PyTorch broadcasting: align right; sizes must match or be 1."""
    if len(shapes) == 2:              # the common case when recording, checked cheaply
        a, b = shapes
        if a == b:
            return tuple(a)
        if len(a) == len(b):
            out = []
            for x, y in zip(a, b):
                if x == y or y == 1:
                    out.append(x)
                elif x == 1:
                    out.append(y)
                else:
                    break         # not broadcastable: the general path says why
            else:
                res = tuple(out)
                if res != a and res != b:   # only then can it outgrow both
                    check_numel(op, res)
                return res
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(rank):
        sizes = {s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            shown = " and ".join(str(tuple(s)) for s in shapes)
            raise ShapeError(f"{op}: shapes {shown} cannot be broadcast together "
                             f"(dim {k - rank} has sizes {sorted(sizes)})")
        out.append(sizes.pop() if sizes else 1)
    check_numel(op, out)
    return tuple(out)


def normalize_dim(op: str, dim: Any, ndim: int, shape: Shape | None = None) -> int:
    """A dim in [-ndim, ndim) as a non-negative int (a 0-d tensor accepts 0 and -1)."""
    if type(dim) is int and 0 <= dim < ndim:     # the common case, checked first
        return dim
    if isinstance(dim, bool) or not hasattr(dim, "__index__"):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__} {dim!r}")
    dim = operator.index(dim)
    n = max(ndim, 1)
    if not -n <= dim < n:
        where = f" of shape {tuple(shape)}" if shape is not None else ""
        raise IndexError(f"{op}: dim {dim} is out of range for a tensor{where} with {ndim} "
                         f"dims (valid: {-n} to {n - 1})")
    return dim % n


def normalize_dims(op: str, dim: Any, ndim: int, shape: Shape | None = None) -> tuple[int, ...]:
    """``None`` means all dims; an int or a sequence of ints otherwise (no repeats)."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (list, tuple)):
        dims = list(dim)
    elif hasattr(dim, "__index__") and not isinstance(dim, bool):
        dims = [operator.index(dim)]
    else:
        raise TypeError(f"{op}: dim must be an int, a tuple of ints or None, got "
                        f"{type(dim).__name__} {dim!r}")
    out = tuple(sorted(normalize_dim(op, d, ndim, shape) for d in dims))
    if ndim == 0:
        return ()
    if len(set(out)) != len(out):
        raise ShapeError(f"{op}: dim {dim} repeats a dimension")
    return out


def infer_reshape(op: str, shape: Shape, target: Sequence[Any]) -> Shape:
    """Resolve one ``-1`` and check that element counts agree."""
    target = [int(t) if not isinstance(t, int) else t for t in target]
    numel = 1
    for s in shape:
        numel *= s
    if target.count(-1) > 1:
        raise ShapeError(f"{op}: only one dimension can be -1, got {tuple(target)}")
    if any(t < -1 for t in target):
        raise ShapeError(f"{op}: invalid size in {tuple(target)}")
    known = 1
    for t in target:
        if t != -1:
            known *= t
    if -1 in target:
        if known == 0 or numel % known:
            raise ShapeError(f"{op}: shape {tuple(target)} is invalid for input of shape "
                             f"{shape} ({numel} elements)")
        target[target.index(-1)] = numel // known
    elif known != numel:
        raise ShapeError(f"{op}: shape {tuple(target)} ({known} elements) is invalid for "
                         f"input of shape {shape} ({numel} elements)")
    return tuple(target)


def reshape_groups(src: Sequence[int], dst: Sequence[int]
                   ) -> tuple[list[tuple[int, int, int, int]], int, int]:
    """The dims of a row-major reshape from ``src`` to ``dst`` in groups with equal
    element counts on both sides, each as small as it can be ((2048, 384) -> (16, 128,
    384): {2048} -> {16, 128} and {384} -> {384}): ``[(src_lo, src_hi, dst_lo,
    dst_hi)]``, and where the grouping stopped in ``src`` and ``dst`` (the dims left are
    unit dims of one side)."""
    groups = []
    i = j = 0
    while i < len(dst) and j < len(src):
        i0, j0 = i, j
        n_dst, n_src = dst[i], src[j]
        i, j = i + 1, j + 1
        while n_dst != n_src:
            if n_dst < n_src:
                n_dst *= dst[i]
                i += 1
            else:
                n_src *= src[j]
                j += 1
        groups.append((j0, j, i0, i))
    return groups, j, i


def shape_arg(args: tuple, op: str) -> Shape:
    """Accept ``f(2, 3)``, ``f((2, 3))`` and ``f([2, 3])`` like PyTorch."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    out = []
    for a in args:
        try:
            if isinstance(a, bool):
                raise TypeError
            out.append(operator.index(a))
        except TypeError:
            raise TypeError(f"{op}: sizes must be ints, got {args!r}") from None
    if any(s < 0 for s in out):
        raise SizeError(f"{op}: sizes must be non-negative, got {tuple(out)}")
    check_numel(op, out)
    return tuple(out)


def numel(shape: Shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
