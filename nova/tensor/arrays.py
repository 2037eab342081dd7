"""Array manipulation and small linear-algebra helpers with PyTorch's names and
semantics (``prod``, ``roll``, ``diff``, ``tile``, ``repeat_interleave``, ``movedim``,
``meshgrid``, the ``*stack`` and ``*split`` families, ``diag``/``diagonal``/``trace``,
``outer``/``dot``/``mv``/``kron``, ``index_select``, ``take_along_dim``, ``addmm``...),
``index_add``/``index_copy``/``index_fill``, ``cross``, ``rot90``, ``median``,
``quantile``/``nanquantile``, the scatters into copies (``masked_scatter``,
``diagonal/select/slice_scatter``, ``put``), ``histogram``, ``matrix_exp``, the
complex-number API of real tensors (``conj``, ``real``, ``adjoint``...)), written over
views, ``cat``, ``gather``, ``scatter``, ``sort`` and ``matmul``, so they fuse like the
rest and differentiate by their parts' rules.
``prod`` is the last running product of ``cumprod`` (whose gradient is zero-safe).
Shapes are static: the functions whose result size depends on the data (``nonzero``,
``unique``, ``masked_select``, ``bincount``, ``repeat_interleave`` with a tensor of
repeats and no ``output_size``) read it on the host (``data_dependent``).
"""
from __future__ import annotations

import builtins
import math
import warnings
from collections import namedtuple
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.core.shapes import broadcast_shapes, normalize_dim
from nova.tensor import movement, ops, scan
from nova.tensor.constants import constant
from nova.tensor.autocast_state import autocast_op, rounded_once
from nova.tensor.creation import check_options, tensor
from nova.tensor.integration import trapezoid, trapz
from nova.tensor.tensor import Tensor


def _dims(op: str, x: Tensor, dims: Any) -> tuple[int, ...]:
    seq = (dims,) if isinstance(dims, (builtins.int, np.integer)) else tuple(dims)
    return tuple(normalize_dim(op, d, x.ndim, x.shape) for d in seq)


@autocast_op("prod")
def prod(input: Tensor, dim: Any = None, keepdim: builtins.bool = False, *,
         dtype: Any = None) -> Tensor:
    """Product over ``dim`` (all elements if None; ``torch.prod``); bool and integer
    inputs multiply in int64, as ``sum`` adds."""
    ops._check_tensor("prod", input)
    if dtype is not None:
        input = ops.cast(input, dt.get_dtype(dtype))
    elif not input.dtype.is_floating_point:
        input = ops.cast(input, dt.int64)
    if dim is None:
        flat = movement.reshape(input, -1)
        if flat.shape[0] == 0:
            return ops.full_const(1, (), input.dtype)
        out = scan.cumprod(flat, 0)[-1]
        return movement.reshape(out, (1,) * input.ndim) if keepdim else out
    d = normalize_dim("prod", dim, input.ndim, input.shape)
    if input.ndim == 0:                 # (dim 0 or -1 of a 0-d tensor: its one element)
        return input.clone()
    if input.shape[d] == 0:
        shape = input.shape[:d] + ((1,) if keepdim else ()) + input.shape[d + 1:]
        return ops.full_const(1, shape, input.dtype)
    last = movement.narrow(scan.cumprod(input, d), d, input.shape[d] - 1, 1)
    return last if keepdim else movement.squeeze(last, d)


def roll(input: Tensor, shifts: Any, dims: Any = None) -> Tensor:
    """Elements shifted along ``dims`` with wrap-around (``torch.roll``); without
    ``dims``, over the flattened tensor."""
    ops._check_tensor("roll", input)
    if dims is None:
        if not isinstance(shifts, (builtins.int, np.integer)):
            raise ValueError(f"roll: without dims, shifts must be one int, got {shifts!r}")
        return movement.reshape(roll(movement.reshape(input, -1), shifts, 0), input.shape)
    dims = _dims("roll", input, dims)
    shifts = (shifts,) if isinstance(shifts, (builtins.int, np.integer)) else tuple(shifts)
    if len(shifts) != len(dims):
        raise ValueError(f"roll: shifts {shifts} and dims {dims} must have the same length")
    out = input
    for s, d in zip(shifts, dims):
        n = input.shape[d]
        k = builtins.int(s) % n if n else 0
        if k:
            out = movement.cat([movement.narrow(out, d, n - k, k),
                                movement.narrow(out, d, 0, n - k)], d)
    # a new tensor even where nothing moves, as PyTorch's (a write into roll(x, 0) changed x)
    return ops.unshared(out, input)


def diff(input: Tensor, n: builtins.int = 1, dim: builtins.int = -1, prepend: Tensor | None = None,
         append: Tensor | None = None) -> Tensor:
    """``n``-th forward difference along ``dim`` (``torch.diff``), after ``prepend``
    and ``append`` are concatenated there."""
    ops._check_tensor("diff", input)
    if n < 0:
        raise ValueError(f"diff: order must be non-negative, got {n}")
    d = normalize_dim("diff", dim, input.ndim, input.shape)
    parts = [p for p in (prepend, input, append) if p is not None]
    input = movement.cat(parts, d) if len(parts) > 1 else input
    for _ in range(n):
        m = input.shape[d]
        if m == 0:
            break
        hi, lo = movement.narrow(input, d, 1, m - 1), movement.narrow(input, d, 0, m - 1)
        input = ops.logical_xor(hi, lo) if input.dtype == dt.bool_ else ops.sub(hi, lo)
    return ops.unshared(input, *parts)           # (n = 0: the input, as a new tensor)


def tile(input: Tensor, dims: Any) -> Tensor:
    """``input`` repeated ``dims`` times along each dim, ones prepended to the shorter of
    the two (``torch.tile``)."""
    reps = (dims,) if isinstance(dims, (builtins.int, np.integer)) else tuple(dims)
    reps = (1,) * (input.ndim - len(reps)) + reps
    return movement.repeat(input, *reps)


def repeat_interleave(input: Tensor, repeats: Any = None, dim: builtins.int | None = None, *,
                      output_size: builtins.int | None = None) -> Tensor:
    """Each element repeated ``repeats`` times along ``dim`` (the flattened tensor if
    None; ``torch.repeat_interleave``). ``repeats``: an int; a host sequence of ints,
    one per element along ``dim``; a 0-d (or one-element) integer tensor, read as an int
    (a host sync, as ``arange`` reads tensor bounds); or a 1-D integer tensor of counts.
    Without ``output_size`` those are read on the host (the result's length depends on
    them, and Nova's shapes are static); with it they are not: counts already on the
    host are checked here, computed ones when the step runs (a negative count or an
    ``output_size`` other than their sum fails it, as an index out of range). The
    one-argument form ``repeat_interleave(repeats, output_size=n)`` repeats each index
    ``i`` ``repeats[i]`` times."""
    if repeats is None:
        return _repeated_indices(input, output_size)
    ops._check_tensor("repeat_interleave", input)
    if dim is None:
        input, dim = movement.reshape(input, -1), 0
    d = normalize_dim("repeat_interleave", dim, input.ndim, input.shape)
    n = input.shape[d]
    if isinstance(repeats, Tensor):
        repeats = _tensor_repeats(repeats, n, d, output_size)
        if isinstance(repeats, Tensor):
            return index_select(input, d, _repeat_index(repeats, n, output_size))
    if isinstance(repeats, (builtins.int, np.integer)):
        r = builtins.int(repeats)
        if r < 0:
            raise ValueError(f"repeat_interleave: repeats must be non-negative, got {r}")
        y = movement.unsqueeze(input, d + 1)
        shape = input.shape[:d + 1] + (r,) + input.shape[d + 1:]
        # the primitive reshape: a new tensor, as PyTorch's (the public one would
        # make a view of the expand, which cannot be written in place)
        out = movement._reshape_prim(movement.expand(y, shape),
                                     input.shape[:d] + (n * r,) + input.shape[d + 1:])
    else:
        counts = [builtins.int(c) for c in repeats]
        if len(counts) != n or builtins.min(counts, default=0) < 0:
            raise ValueError(f"repeat_interleave: repeats must give one non-negative count "
                             f"per element of dim {d} (size {n}), got {len(counts)}: "
                             f"{counts[:8]}")
        index = constant(np.repeat(np.arange(n), counts).astype(np.int64), device=input.device)
        out = index_select(input, d, index)
    if output_size is not None and out.shape[d] != output_size:
        raise ValueError(f"repeat_interleave: output_size {output_size} does not match the "
                         f"repeated size {out.shape[d]}")
    return out


def _tensor_repeats(repeats: Tensor, n: builtins.int, d: builtins.int,
                    output_size: builtins.int | None) -> Any:
    """A tensor of repeats checked: one count for every element is read as an int;
    else, with ``output_size``, the 1-D tensor itself (one count per element) -- never
    read from its values, even when they are on the host, so that a traced step does
    not depend on them (known values are checked here); without it, the counts read on
    the host, as a list."""
    if repeats.dtype not in (dt.int32, dt.int64):
        raise DTypeError(f"repeat_interleave: repeats must be an int32 or int64 tensor, got "
                         f"{repeats.dtype.name}")
    if repeats.ndim > 1:
        raise ValueError(f"repeat_interleave: repeats must be 0-D or 1-D, got shape "
                         f"{repeats.shape}")
    if repeats.numel() == 1:
        return builtins.int(repeats.item())    # one count for every element
    if repeats.shape[0] != n:
        raise ValueError(f"repeat_interleave: repeats must have one count per element of "
                         f"dim {d} (size {n}), got {repeats.shape[0]}")
    if n == 0:
        return []                               # no counts: their sum, 0, is known
    if output_size is None:      # the length depends on the counts: read them (a sync)
        return [builtins.int(c) for c in repeats._host_values()]
    known = ops.known_index_values(repeats)
    if known is not None and (known.min() < 0 or known.sum() != output_size):
        raise ValueError(f"repeat_interleave: repeats must be non-negative counts adding up "
                         f"to output_size {output_size}, got {known.tolist()[:8]} (sum "
                         f"{known.sum()})")
    return repeats


def _repeat_index(repeats: Tensor, n: builtins.int, output_size: builtins.int) -> Tensor:
    """The source position of each of the ``output_size`` results: the number of
    elements after the first whose run starts at or before it (a scatter of run starts
    and a running sum: linear in n + output_size). Counts that are negative or do not
    add up to ``output_size`` turn every position into n, out of range: the step fails
    where the index is checked."""
    from nova.tensor.creation import ones, zeros
    if not isinstance(output_size, (builtins.int, np.integer)) or output_size < 0:
        raise ValueError(f"repeat_interleave: output_size must be a non-negative int, got "
                         f"{output_size!r}")
    counts = ops.cast(repeats, dt.int64)
    ends = scan.cumsum(counts, 0)
    starts = ops.clamp(ops.sub(ends, counts)[1:], 0, output_size)
    marks = ops.scatter_add(zeros(output_size + 1, dtype=dt.int64), 0, starts,
                            ones(n - 1, dtype=dt.int64))
    index = scan.cumsum(marks[:output_size], 0)
    bad = ops.logical_or(ops.ne(ends[-1], output_size), ops.lt(ops.amin(counts), 0))
    return ops.where(bad, n, index)


def _repeated_indices(repeats: Any, output_size: builtins.int | None) -> Tensor:
    """``repeat_interleave(repeats)``: each index ``i`` of the 1-D ``repeats`` repeated
    ``repeats[i]`` times, in ``repeats``' dtype."""
    from nova.tensor.creation import arange
    if not isinstance(repeats, Tensor) or repeats.ndim != 1:
        raise ValueError(f"repeat_interleave: the one-argument form takes a 1-D tensor of "
                         f"repeats, got {getattr(repeats, 'shape', type(repeats).__name__)}")
    indices = arange(repeats.shape[0], dtype=repeats.dtype, device=repeats.device)
    return repeat_interleave(indices, repeats, 0, output_size=output_size)


def movedim(input: Tensor, source: Any, destination: Any) -> Tensor:
    """Dims ``source`` moved to positions ``destination``, the rest in order
    (``torch.movedim``)."""
    src, dst = _dims("movedim", input, source), _dims("movedim", input, destination)
    if len(src) != len(dst) or len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"movedim: source {source!r} and destination {destination!r} must "
                         "be the same number of distinct dims")
    rest = iter([d for d in range(input.ndim) if d not in src])
    placed = dict(zip(dst, src))
    return movement.permute(input, *[placed[k] if k in placed else next(rest)
                                 for k in range(input.ndim)])


moveaxis = movedim


def meshgrid(*tensors: Any, indexing: str = "ij") -> tuple[Tensor, ...]:
    """Coordinate grids of 1-D tensors (``torch.meshgrid``), ``indexing`` ``"ij"``
    (matrix) or ``"xy"`` (Cartesian: the first two dims swapped)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    for t in tensors:
        if not isinstance(t, Tensor) or t.ndim > 1:
            raise ValueError("meshgrid: expects 0-D or 1-D tensors, got "
                             f"{[getattr(v, 'shape', type(v).__name__) for v in tensors]}")
    flat = [movement.reshape(t, -1) for t in tensors]
    swap = indexing == "xy" and len(flat) >= 2
    order = [1, 0] + list(range(2, len(flat))) if swap else list(range(len(flat)))
    shape = tuple(flat[k].shape[0] for k in order)
    out = []
    for k, t in enumerate(flat):
        view = [1] * len(flat)
        view[order.index(k)] = t.shape[0]
        out.append(movement.expand(movement.reshape(t, tuple(view)), shape))
    return tuple(out)


def atleast_1d(*tensors: Any) -> Any:
    return _atleast(tensors, 1)


def atleast_2d(*tensors: Any) -> Any:
    return _atleast(tensors, 2)


def atleast_3d(*tensors: Any) -> Any:
    return _atleast(tensors, 3)


def _atleast(tensors: tuple, n: builtins.int) -> Any:
    """PyTorch's ``atleast_Nd``: 0-D -> (1,)*n, 1-D (k,) -> (1, k) [-> (1, k, 1)],
    2-D (a, b) -> (a, b, 1) for n = 3."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    out = []
    for t in tensors:
        shape = t.shape
        if len(shape) < n:
            if len(shape) == 0:
                shape = (1,) * n
            elif len(shape) == 1:
                shape = (1, shape[0]) + ((1,) if n == 3 else ())
            else:
                shape = shape + (1,)
            t = movement.reshape(t, shape)
        out.append(t)
    return out[0] if len(out) == 1 else tuple(out)


def hstack(tensors: Sequence[Tensor]) -> Tensor:
    ts = [atleast_1d(t) for t in tensors]
    return movement.cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors: Sequence[Tensor]) -> Tensor:
    return movement.cat([atleast_2d(t) for t in tensors], 0)


row_stack = vstack


def dstack(tensors: Sequence[Tensor]) -> Tensor:
    return movement.cat([atleast_3d(t) for t in tensors], 2)


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    cols = [movement.reshape(t, (-1, 1)) if t.ndim <= 1 else t for t in tensors]
    return movement.cat(cols, 1)


def _one_of(op: str, first: str, **given: Any) -> Any:
    """The one argument of ``given`` (PyTorch's overloads of one parameter under
    several keywords: ``tensor_split(x, sections=3)``, ``indices=[1]``) that is not
    None; a TypeError naming ``first`` when none is, or naming both when two are."""
    named = [(k, v) for k, v in given.items() if v is not None]
    if not named:
        raise TypeError(f"{op}() missing 1 required positional argument: '{first}'")
    if len(named) > 1:
        raise TypeError(f"{op}() got both '{named[0][0]}' and '{named[1][0]}'; give one")
    return named[0][1]


def tensor_split(input: Tensor, indices_or_sections: Any = None, dim: builtins.int = 0, *,
                 sections: Any = None, indices: Any = None) -> tuple[Tensor, ...]:
    """``input`` split along ``dim`` into ``n`` near-equal parts (the first ``size % n``
    one larger) or at the given indices (``torch.tensor_split``; PyTorch's overloads
    name the argument ``sections=`` and ``indices=``)."""
    indices_or_sections = _one_of("tensor_split", "indices_or_sections",
                                  indices_or_sections=indices_or_sections,
                                  sections=sections, indices=indices)
    d = normalize_dim("tensor_split", dim, input.ndim, input.shape)
    size = input.shape[d]
    if isinstance(indices_or_sections, Tensor):     # a 0-d count or a 1-D list of indices
        t = indices_or_sections
        if t.dtype != dt.int64 or t.ndim > 1:
            raise DTypeError(f"tensor_split: a tensor indices_or_sections must be a 0-d or "
                             f"1-D int64 tensor, got {t.dtype.name} of shape {t.shape}")
        indices_or_sections = t.item() if t.ndim == 0 else t.tolist()
    if isinstance(indices_or_sections, (builtins.int, np.integer)):
        n = builtins.int(indices_or_sections)
        if n <= 0:
            raise ValueError(f"tensor_split: sections must be positive, got {n}")
        q, r = divmod(size, n)
        bounds = np.cumsum([0] + [q + (1 if k < r else 0) for k in range(n)]).tolist()
    else:
        cuts = [builtins.min(builtins.max(builtins.int(i) + (size if i < 0 else 0), 0), size)
                for i in indices_or_sections]
        bounds = [0] + cuts + [size]
    return tuple(movement.narrow(input, d, a, builtins.max(b - a, 0))
                 for a, b in zip(bounds[:-1], bounds[1:]))


def hsplit(input: Tensor, sections: Any = None, *, indices: Any = None) -> tuple[Tensor, ...]:
    """``input`` split along dim 1 (dim 0 of a 1-D tensor), as ``torch.hsplit``."""
    ops._check_tensor("hsplit", input)
    sections = _one_of("hsplit", "sections", sections=sections, indices=indices)
    return _even_split("hsplit", input, sections, 0 if input.ndim == 1 else 1, 1)


def vsplit(input: Tensor, sections: Any = None, *, indices: Any = None) -> tuple[Tensor, ...]:
    """``input`` split along dim 0 (at least 2-D), as ``torch.vsplit``."""
    ops._check_tensor("vsplit", input)
    sections = _one_of("vsplit", "sections", sections=sections, indices=indices)
    return _even_split("vsplit", input, sections, 0, 2)


def dsplit(input: Tensor, sections: Any = None, *, indices: Any = None) -> tuple[Tensor, ...]:
    """``input`` split along dim 2 (depth; at least 3-D), as ``torch.dsplit``."""
    ops._check_tensor("dsplit", input)
    sections = _one_of("dsplit", "sections", sections=sections, indices=indices)
    return _even_split("dsplit", input, sections, 2, 3)


def _even_split(op: str, x: Tensor, sections: Any, dim: builtins.int,
                min_ndim: builtins.int) -> tuple[Tensor, ...]:
    """``tensor_split`` into ``sections`` equal parts (an int, which must divide the dim)
    or at the indices of a list or tuple, with PyTorch's checks."""
    if x.ndim < min_ndim:
        raise ValueError(f"{op}: requires a tensor with at least {min_ndim} dimension"
                         f"{'s' if min_ndim > 1 else ''}, but got a tensor with {x.ndim} "
                         f"dimensions (shape {x.shape})")
    if isinstance(sections, (builtins.int, np.integer)) and not isinstance(sections,
                                                                          builtins.bool):
        if sections <= 0 or x.shape[dim] % sections:
            raise ValueError(f"{op}: attempted to split along dimension {dim}, but the size "
                             f"of the dimension {x.shape[dim]} is not divisible by the "
                             f"split_size {sections}")
    elif not isinstance(sections, (list, tuple)):
        raise TypeError(f"{op}: sections must be an int or a list or tuple of ints, got "
                        f"{type(sections).__name__}")
    return tensor_split(x, sections, dim)


def select(input: Tensor, dim: builtins.int, index: builtins.int) -> Tensor:
    """The slice at ``index`` along ``dim``, that dim removed (``torch.select``)."""
    d = normalize_dim("select", dim, input.ndim, input.shape)
    return input[(slice(None),) * d + (index,)]


def ravel(input: Tensor) -> Tensor:
    return movement.reshape(input, -1)


def diagonal(input: Tensor, offset: builtins.int = 0, dim1: builtins.int = 0,
             dim2: builtins.int = 1) -> Tensor:
    """The diagonal of the ``(dim1, dim2)`` planes as the last dim (``torch.diagonal``):
    the two dims moved last and flattened, read with a stride of one row plus one."""
    d1 = normalize_dim("diagonal", dim1, input.ndim, input.shape)
    d2 = normalize_dim("diagonal", dim2, input.ndim, input.shape)
    if d1 == d2:
        raise ValueError(f"diagonal: dim1 and dim2 must differ, both are {d1}")
    rows, cols = input.shape[d1], input.shape[d2]
    length = builtins.max(builtins.min(rows, cols - offset) if offset >= 0
                          else builtins.min(rows + offset, cols), 0)
    planes = movedim(input, (d1, d2), (-2, -1))
    flat = movement.reshape(planes, planes.shape[:-2] + (rows * cols,))
    if length == 0:
        return flat[..., :0]
    start = offset if offset >= 0 else -offset * cols
    return flat[..., start:start + (length - 1) * (cols + 1) + 1:cols + 1]


_diagonal_of = diagonal      # (diag's argument is named ``diagonal``, as torch's)


def diag(input: Tensor, diagonal: builtins.int = 0) -> Tensor:  # noqa: A002 (torch's name)
    """A 1-D tensor as the ``diagonal``-th diagonal of a square matrix, or a 2-D
    tensor's ``diagonal``-th diagonal (``torch.diag``)."""
    ops._check_tensor("diag", input)
    if input.ndim == 2:                 # (a copy, as PyTorch's; ``diagonal`` is the view)
        return ops.unshared(_diagonal_of(input, diagonal), input)
    if input.ndim != 1:
        raise ValueError(f"diag: expected a 1-D or 2-D tensor, got shape {input.shape}")
    n = input.shape[0] + builtins.abs(diagonal)
    on = constant(np.arange(n)[None, :] - np.arange(n)[:, None] == diagonal, device=input.device)
    # x[i] sits at (i, i + diagonal) above the main diagonal, at (i - diagonal, i)
    # below it: read by row in the first case, by column in the second
    src = movement.cat([input, ops.full_const(0, (n - input.shape[0],), input.dtype)], 0) \
        if n != input.shape[0] else input
    src = movement.reshape(src, (n, 1) if diagonal >= 0 else (1, n))
    return ops.where(on, src, ops.full_const(0, (), input.dtype))


@autocast_op("trace")
def trace(input: Tensor) -> Tensor:
    """Sum of a matrix's main diagonal (``torch.trace``)."""
    ops._check_tensor("trace", input)
    if input.ndim != 2:
        raise ValueError(f"trace: expected a 2-D tensor, got shape {list(input.shape)}")
    return ops.sum(diagonal(input))


def tril_indices(row: builtins.int, col: builtins.int, offset: builtins.int = 0, *,
                 dtype: Any = dt.int64, device: Any = None, layout: Any = None,
                 pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """The (2, N) row and column indices of the lower triangle (``torch.tril_indices``)."""
    check_options("tril_indices", layout)
    r, c = np.tril_indices(row, offset, col)
    return tensor(np.stack([r, c]), dtype=dtype, device=device, requires_grad=requires_grad,
                  pin_memory=pin_memory)


def triu_indices(row: builtins.int, col: builtins.int, offset: builtins.int = 0, *,
                 dtype: Any = dt.int64, device: Any = None, layout: Any = None,
                 pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """The (2, N) row and column indices of the upper triangle (``torch.triu_indices``)."""
    check_options("triu_indices", layout)
    r, c = np.triu_indices(row, offset, col)
    return tensor(np.stack([r, c]), dtype=dtype, device=device, requires_grad=requires_grad,
                  pin_memory=pin_memory)


def _vector(op: str, v: Any, name: str) -> None:
    ops._check_tensor(op, v)
    if v.ndim != 1:
        raise ValueError(f"{op}: {name} must be a 1-D tensor, got "
                         f"{getattr(v, 'shape', type(v).__name__)}")


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """``a[:, None] * b[None, :]`` (``torch.outer``)."""
    _vector("outer", input, "input")
    _vector("outer", vec2, "vec2")
    return ops.mul(movement.reshape(input, (-1, 1)), movement.reshape(vec2, (1, -1)))


ger = outer


@autocast_op("dot")
def dot(input: Tensor, tensor: Tensor) -> Tensor:
    """Inner product of two 1-D tensors of one length and dtype (``torch.dot``)."""
    _vector("dot", input, "input")
    _vector("dot", tensor, "tensor")
    if input.shape != tensor.shape:
        raise ValueError(f"dot: 1-D tensors must have the same size, got {input.shape} and "
                         f"{tensor.shape}")
    if input.dtype != tensor.dtype:
        raise DTypeError(f"dot: expected both tensors of one dtype, got {input.dtype.name} and "
                         f"{tensor.dtype.name}")
    if not input.dtype.is_floating_point:
        return ops.cast(ops.sum(ops.mul(input, tensor)), input.dtype)
    return movement.reshape(ops.matmul(movement.reshape(input, (1, -1)),
                                       movement.reshape(tensor, (-1, 1))), ())


@autocast_op("mv")
def mv(input: Tensor, vec: Tensor) -> Tensor:
    """Matrix-vector product (``torch.mv``)."""
    if not isinstance(input, Tensor) or input.ndim != 2:
        raise ValueError(f"mv: expected a 2-D matrix, got {getattr(input, 'shape', input)}")
    _vector("mv", vec, "vec")
    return ops.matmul(input, vec)


def kron(input: Tensor, other: Tensor) -> Tensor:
    """Kronecker product (``torch.kron``): every element of ``input`` times ``other``, laid out
    block by block."""
    nd = builtins.max(input.ndim, other.ndim)
    input = movement.reshape(input, (1,) * (nd - input.ndim) + input.shape)
    other = movement.reshape(other, (1,) * (nd - other.ndim) + other.shape)
    spread_a = movement.reshape(input, tuple(v for n in input.shape for v in (n, 1)))
    spread_b = movement.reshape(other, tuple(v for n in other.shape for v in (1, n)))
    return movement.reshape(ops.mul(spread_a, spread_b),
                            tuple(p * q for p, q in zip(input.shape, other.shape)))


def index_select(input: Tensor, dim: builtins.int, index: Tensor) -> Tensor:
    """The entries at ``index`` (1-D integers) along ``dim`` (``torch.index_select``)."""
    ops._check_tensor("index_select", input)
    if not isinstance(index, Tensor) or index.ndim > 1 or index.dtype not in (dt.int32, dt.int64):
        raise ValueError(f"index_select: index must be a 0-D or 1-D int32/int64 tensor, got "
                         f"{getattr(index, 'shape', index)} "
                         f"{getattr(getattr(index, 'dtype', None), 'name', '')}")
    d = normalize_dim("index_select", dim, input.ndim, input.shape)
    flat = movement.reshape(index, -1)
    if input.ndim == 0:                 # PyTorch's: a 0-D input reads as one element, 0-D out
        return movement.reshape(index_select(movement.reshape(input, (1,)), 0, flat), ())
    # PyTorch refuses a negative index here (``index out of range in self``), where
    # ``x[..., index]`` would wrap it: known values are checked at the user's line, and
    # the gather's kernel rejects computed ones outside [0, n)
    ops.check_index_values("index_select", flat, d, input.shape, negative=False)
    spread = movement.reshape(flat, (1,) * d + (flat.shape[0],) + (1,) * (input.ndim - d - 1))
    return ops.gather(input, d, movement.expand(spread, input.shape[:d] + (flat.shape[0],)
                                            + input.shape[d + 1:]))


def take_along_dim(input: Tensor, indices: Tensor, dim: builtins.int | None = None) -> Tensor:
    """``gather`` with ``indices`` broadcast against ``input`` outside ``dim``; the flattened
    ``input`` when ``dim`` is None (``torch.take_along_dim``). Unlike ``gather``'s, negative
    indices count from the end, as PyTorch's do here."""
    ops._check_tensor("take_along_dim", input)
    ops._check_tensor("take_along_dim", indices)
    if indices.dtype not in (dt.int32, dt.int64):
        raise DTypeError(f"take_along_dim: indices must be int32 or int64, got "
                         f"{indices.dtype.name}")
    if dim is None:
        flat = movement.reshape(input, -1)
        return ops.gather(flat, 0, _wrapped("take_along_dim", movement.reshape(indices, -1),
                                            0, flat.shape))
    d = normalize_dim("take_along_dim", dim, input.ndim, input.shape)
    if indices.ndim != input.ndim:
        raise ValueError(f"take_along_dim: input {input.shape} and indices {indices.shape} must "
                         "have the same number of dims")
    shape = tuple(builtins.max(p, q) for p, q in zip(input.shape, indices.shape))
    xs = movement.expand(input, shape[:d] + (input.shape[d],) + shape[d + 1:])
    ix = movement.expand(indices, shape[:d] + (indices.shape[d],) + shape[d + 1:])
    return ops.gather(xs, d, _wrapped("take_along_dim", ix, d, input.shape))


def _wrapped(op: str, index: Tensor, d: builtins.int, shape: tuple[builtins.int, ...]) -> Tensor:
    """``index`` into dim ``d`` of ``shape`` with its negative values counted from the
    end, each checked to lie in ``[-n, n)`` (here when known, else by the kernel)."""
    ops.check_index_values(op, index, d, shape, negative=True)
    return ops.prim("wrap_index", [index], {"size": shape[d], "dim": d}, index.shape,
                    index.dtype)


@autocast_op("addmm")
def addmm(input: Any, mat1: Tensor, mat2: Tensor, out_dtype: Any = None, *, beta: Any = 1,
          alpha: Any = 1) -> Tensor:
    """``beta * input + alpha * (mat1 @ mat2)`` (``torch.addmm``; ``beta = 0`` ignores
    ``input``, NaN included), in ``out_dtype`` if given (``ops.out_dtype_of``)."""
    input, mat1, mat2 = _in_out_dtype("addmm", out_dtype, input, mat1, mat2)
    # a half product and its scaled input are summed in float32 and rounded once, as
    # PyTorch's CPU addmm does
    return rounded_once(lambda i, a, b: _scaled_sum(i, ops.matmul(a, b), beta, alpha),
                        input, mat1, mat2)


@autocast_op("addmv")
def addmv(input: Any, mat: Tensor, vec: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    return _scaled_sum(input, mv(mat, vec), beta, alpha)


@autocast_op("baddbmm")
def baddbmm(input: Any, batch1: Tensor, batch2: Tensor, out_dtype: Any = None, *,
            beta: Any = 1, alpha: Any = 1) -> Tensor:
    input, batch1, batch2 = _in_out_dtype("baddbmm", out_dtype, input, batch1, batch2)
    # rounded once for half operands, as PyTorch's CPU baddbmm (not its addbmm)
    return rounded_once(lambda i, a, b: _scaled_sum(i, ops.bmm(a, b), beta, alpha),
                        input, batch1, batch2)


def _in_out_dtype(op: str, out_dtype: Any, input: Any, a: Tensor, b: Tensor) -> tuple:
    """The operands of ``addmm``/``baddbmm``, cast to float32 where ``out_dtype`` asks
    for float32 results of 16-bit operands (``ops.out_dtype_of``)."""
    wide = ops.out_dtype_of(op, a, out_dtype)
    if wide is None:
        return input, a, b
    return tuple(ops.cast(t, wide) if isinstance(t, Tensor) else t for t in (input, a, b))


def _scaled_sum(input: Any, product: Tensor, beta: Any, alpha: Any) -> Tensor:
    """``beta * input + alpha * product`` for the ``add*`` products. With ``beta = 0``
    the input's values are ignored (its NaNs included; only its shape broadcasts), but
    it stays in the graph with a zero gradient: PyTorch gives it ``.grad`` zeros, not
    None, so an optimizer still decays and steps such a parameter."""
    scaled = product if alpha == 1 else ops.mul(product, alpha)
    if beta == 0:
        shape = broadcast_shapes("addmm", scaled.shape, getattr(input, "shape", ()))
        out = scaled if shape == scaled.shape else movement.expand(scaled, shape)
        if isinstance(input, Tensor) and input.requires_grad:
            # (cast first, so the result keeps the product's dtype, as without it)
            out = ops.zero_gradient_to(out, ops.cast(input, out.dtype))
        return out
    return ops.add(input if beta == 1 else ops.mul(input, beta), scaled)


_MinMax = namedtuple("aminmax", ["min", "max"])


var_mean = ops.var_mean      # (torch.var_mean/std_mean, in var's three forms)
std_mean = ops.std_mean


def aminmax(input: Tensor, *, dim: builtins.int | None = None,
            keepdim: builtins.bool = False) -> tuple[Tensor, Tensor]:
    """``(min, max)`` (``torch.aminmax``), over one dim or all of them."""
    if dim is not None and not isinstance(dim, (builtins.int, np.integer)):
        raise TypeError(f"aminmax: dim must be an int or None, got {dim!r}")
    return _MinMax(ops.amin(input, dim, keepdim), ops.amax(input, dim, keepdim))


def bucketize(input: Any, boundaries: Tensor, *, out_int32: builtins.bool = False,
              right: builtins.bool = False) -> Tensor:
    """The index of the bucket of each value among the increasing 1-D ``boundaries``
    (``torch.bucketize``): the number of boundaries below it (``right=False``: ``b[i-1]
    < v <= b[i]``) or at most it (``right=True``)."""
    if not isinstance(boundaries, Tensor) or boundaries.ndim != 1:
        raise ValueError(f"bucketize: boundaries must be a 1-D tensor, got "
                         f"{getattr(boundaries, 'shape', boundaries)}")
    v = input if isinstance(input, Tensor) else tensor(input)
    return _insertion_points(boundaries, v, right, dt.int32 if out_int32 else dt.int64)


def searchsorted(sorted_sequence: Tensor, values: Any, *, out_int32: builtins.bool = False,
                 right: builtins.bool = False, side: str | None = None,
                 sorter: Tensor | None = None) -> Tensor:
    """Insertion points of ``values`` into the increasing last dim of
    ``sorted_sequence`` (``torch.searchsorted``): ``left`` counts the entries below a
    value, ``right`` those at most it. A 1-D sequence serves every value; an N-D one
    matches ``values`` in its leading dims. ``sorter`` (int64, the sequence's shape)
    holds the positions that sort an unsorted sequence along its last dim, as
    ``argsort`` gives them; the result counts positions in that sorted order."""
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ValueError("searchsorted: side='left' contradicts right=True")
        right = side == "right"
    if sorter is not None:
        sorted_sequence = _sorted_by("searchsorted", sorted_sequence, sorter)
    v = values if isinstance(values, Tensor) else tensor(values)
    scalar = v.ndim == 0
    if scalar:
        v = movement.reshape(v, (1,))
    if sorted_sequence.ndim > 1 and sorted_sequence.shape[:-1] != v.shape[:-1]:
        raise ValueError(f"searchsorted: sorted_sequence {sorted_sequence.shape} and values "
                         f"{v.shape} must agree in all dims but the last")
    seq = sorted_sequence if sorted_sequence.ndim == 1 else movement.unsqueeze(sorted_sequence, -2)
    out = _insertion_points(seq, v, right, dt.int32 if out_int32 else dt.int64)
    return movement.reshape(out, ()) if scalar else out


def _sorted_by(op: str, seq: Tensor, sorter: Tensor) -> Tensor:
    """``seq`` gathered along its last dim by ``sorter``, checked as PyTorch checks it
    (int64, the sequence's shape; an index outside the last dim is an IndexError, here
    when its values are known, else when the step runs)."""
    ops._check_tensor(f"{op} sorted_sequence", seq)
    if not isinstance(sorter, Tensor) or sorter.dtype != dt.int64:
        # a tensor of another dtype is PyTorch's RuntimeError, a non-tensor its TypeError
        raise (DTypeError if isinstance(sorter, Tensor) else TypeError)(
            f"{op}: sorter must be an int64 tensor, got "
            f"{getattr(getattr(sorter, 'dtype', None), 'name', type(sorter).__name__)}")
    if sorter.shape != seq.shape:
        raise ValueError(f"{op}: sorted_sequence {seq.shape} and sorter {sorter.shape} must "
                         f"have the same shape")
    if seq.ndim == 0:
        raise ValueError(f"{op}: sorted_sequence must have at least one dim, got a 0-d tensor")
    return ops.gather(seq, seq.ndim - 1, sorter)


def _insertion_points(seq: Tensor, v: Tensor, right: builtins.bool, dtype: dt.DType) -> Tensor:
    """Where PyTorch's binary search over the last dim of ``seq`` puts each ``v``: the
    first entry ``>= v`` (``> v`` with ``right``), or the length when there is none --
    the count of entries below ``v`` where one exists (NaN entries, sorted last, are
    never below), the length where none does: a NaN value goes past everything (the
    plain count put it at 0)."""
    at = movement.unsqueeze(v, -1)
    below = (ops.le if right else ops.lt)(seq, at)
    reached = ops.gt(ops.sum((ops.gt if right else ops.ge)(seq, at), -1), 0)
    count = ops.sum(below, -1, dtype=dtype)
    return ops.where(reached, count, ops.full_const(seq.shape[-1], count.shape, dtype))


def clone(input: Tensor, *, memory_format: Any = None) -> Tensor:
    return input.clone(memory_format=memory_format)


def detach(input: Tensor) -> Tensor:
    return input.detach()


def numel(input: Tensor) -> builtins.int:
    return math.prod(input.shape)


def is_tensor(obj: Any) -> builtins.bool:
    return isinstance(obj, Tensor)


def is_floating_point(input: Tensor) -> builtins.bool:
    return input.dtype.is_floating_point




# ---------------------------------------------------------------- more of torch's names

def index_add(input: Tensor, dim: builtins.int, index: Tensor, source: Tensor, *,
              alpha: Any = 1) -> Tensor:
    """``input`` with ``alpha * source``'s slices added at ``index`` along ``dim``, repeated
    indices accumulating (``torch.index_add``)."""
    d, idx = _index_along("index_add", input, dim, index, source)
    src = source if alpha == 1 else ops.mul(source, alpha)
    return ops.scatter_add(input, d, idx, src)


@autocast_op("index_copy")
def index_copy(input: Tensor, dim: builtins.int, index: Tensor, source: Tensor) -> Tensor:
    """``input`` with ``source``'s slices written at ``index`` along ``dim``
    (``torch.index_copy``; a repeated index keeps one of its slices, as there)."""
    d, idx = _index_along("index_copy", input, dim, index, source)
    return ops.scatter(input, d, idx, source)


def index_fill(input: Tensor, dim: builtins.int, index: Tensor, value: Any) -> Tensor:
    """``input`` with the slices at ``index`` along ``dim`` set to ``value``
    (``torch.index_fill``). Negative indices count from the end; one outside ``[-n, n)``
    is an IndexError, at this line when its values are known, else when the step runs
    (``wrap_index``'s check, as for ``x[index]``) -- never a silently skipped slice."""
    ops._check_tensor("index_fill", input)
    if not isinstance(index, Tensor) or index.dtype not in (dt.int32, dt.int64):
        raise IndexError(f"index_fill: index must be an int32 or int64 tensor, got "
                         f"{getattr(getattr(index, 'dtype', None), 'name', type(index).__name__)}")
    if index.ndim > 1:
        raise RuntimeError(f"index_fill: index must be 0-D or 1-D, got shape {index.shape}")
    if isinstance(value, Tensor) and value.ndim != 0:
        raise RuntimeError(f"index_fill: value must be a number or a 0-D tensor, got shape "
                           f"{value.shape}")
    d = normalize_dim("index_fill", dim, input.ndim, input.shape)
    n = input.shape[d] if input.ndim else 1
    ops.check_index_values("index_fill", index, d, input.shape, negative=True)
    flat = movement.reshape(index, (-1,))
    wrapped = ops.prim("wrap_index", [flat], {"size": n, "dim": d}, flat.shape, flat.dtype)
    hit = ops.scatter(ops.full_const(False, (n,), dt.bool_), 0, wrapped, True)
    mask = movement.reshape(hit, (n,) + (1,) * (input.ndim - d - 1) if input.ndim else ())
    # the result keeps x's dtype, the value converted to it (as PyTorch and masked_fill)
    value = (ops.cast(value, input.dtype) if isinstance(value, Tensor)
             else ops.full_const(value, input.shape, input.dtype, "index_fill"))
    return ops.where(mask, value, input)


def _index_along(op: str, x: Tensor, dim: builtins.int, index: Tensor, source: Tensor
                 ) -> tuple[builtins.int, Tensor]:
    """The dim and the index expanded to ``source``'s shape, as scatter takes them."""
    ops._check_tensor(op, x)
    d = normalize_dim(op, dim, x.ndim, x.shape)
    if not isinstance(index, Tensor) or index.ndim > 1:
        raise ValueError(f"{op}: index must be a 0-D or 1-D integer tensor, got "
                         f"{getattr(index, 'shape', index)}")
    k = 1 if index.ndim == 0 else index.shape[0]
    want = x.shape[:d] + (k,) + x.shape[d + 1:]
    if tuple(source.shape) != want:
        raise ValueError(f"{op}: source must have shape {want} (x {x.shape} with dim {d} "
                         f"of size {k}, the index's length), got {source.shape}")
    view = [1] * x.ndim
    view[d] = k
    return d, movement.expand(movement.reshape(ops.cast(index, dt.int64), tuple(view)), want)


def cross(input: Tensor, other: Tensor, dim: builtins.int | None = None) -> Tensor:
    """Cross product of 3-vectors along ``dim`` (``torch.cross``; without ``dim``, the
    first dim of size 3, as PyTorch does)."""
    if dim is None:
        sizes = broadcast_shapes("cross", input.shape, other.shape)
        dim = next((k for k, n in enumerate(sizes) if n == 3), None)
        if dim is None:
            raise ValueError(f"cross: no dim of size 3 in {input.shape} and {other.shape}")
    x, y = ops.operands("cross", input, other)
    d = normalize_dim("cross", dim, x.ndim, x.shape)
    if x.shape[d] != 3:
        raise ValueError(f"cross: dim {d} must have size 3, got shape {x.shape}")
    c = [(movement.narrow(x, d, i, 1), movement.narrow(y, d, i, 1)) for i in range(3)]
    return movement.cat([ops.sub(ops.mul(c[(i + 1) % 3][0], c[(i + 2) % 3][1]),
                                 ops.mul(c[(i + 2) % 3][0], c[(i + 1) % 3][1]))
                         for i in range(3)], d)


def rot90(input: Tensor, k: builtins.int = 1, dims: Sequence[builtins.int] = (0, 1)) -> Tensor:
    """``input`` rotated by ``k`` quarter turns in the plane of ``dims``, from the first
    toward the second (``torch.rot90``)."""
    from nova.tensor.numeric import flip
    d0, d1 = _dims("rot90", input, dims)
    if d0 == d1:
        raise ValueError(f"rot90: dims must differ, got {tuple(dims)}")
    k %= 4
    if k == 1:
        return movement.transpose(flip(input, dims=[d1]), d0, d1)
    if k == 2:
        return flip(input, dims=[d0, d1])
    if k == 3:
        return flip(movement.transpose(input, d0, d1), dims=[d1])
    return input.clone()


def block_diag(*tensors: Tensor) -> Tensor:
    """The 0-D, 1-D and 2-D ``tensors`` along the diagonal of one zero matrix
    (``torch.block_diag``; none: an empty (1, 0) matrix of the default dtype, as there)."""
    if not tensors:
        return ops.full_const(0, (1, 0), dt.DEFAULT_FLOAT)
    mats = [movement.reshape(t, (1, 1)) if t.ndim == 0 else
            movement.reshape(t, (1, -1)) if t.ndim == 1 else t for t in tensors]
    if any(m.ndim != 2 for m in mats):
        raise ValueError("block_diag: expects tensors of at most 2 dims, got "
                         f"{[t.shape for t in tensors]}")
    width = builtins.sum(m.shape[1] for m in mats)
    common = ops.promote("block_diag", *tensors)   # 0-d tensors rank below the others
    rows, left = [], 0
    for m in mats:
        right = width - left - m.shape[1]
        pieces = [ops.full_const(0, (m.shape[0], left), common)] if left else []
        pieces.append(ops.cast(m, common))
        if right:
            pieces.append(ops.full_const(0, (m.shape[0], right), common))
        rows.append(movement.cat(pieces, 1) if len(pieces) > 1 else pieces[0])
        left += m.shape[1]
    return movement.cat(rows, 0)


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """Every combination of the 1-D ``tensors``' elements, one per row
    (``torch.cartesian_prod``; one tensor: itself)."""
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return movement.stack([movement.reshape(g, -1) for g in grids], 1)


# (trapezoid and trapz live in nova.tensor.integration, beside cumulative_trapezoid)


_ValuesIndices = namedtuple("median", ["values", "indices"])


def median(input: Tensor, dim: builtins.int | None = None, keepdim: builtins.bool = False) -> Any:
    """The lower median (``torch.median``: the ``(n - 1) // 2``-th smallest; NaN if the
    slice has one, with the index of its first NaN); with ``dim``, ``(values,
    indices)``, the index of that element, which takes the whole gradient; without, the
    gradient is shared by the elements equal to the median (the NaNs if it is NaN), as
    in PyTorch."""
    from nova.tensor.sorting import sort
    ops._check_tensor("median", input)
    if dim is None:
        return ops.shared_by_ties(input, median(movement.reshape(input, -1), 0).values)
    if input.ndim == 0:                     # as a 1-element vector, as PyTorch
        normalize_dim("median", dim, 1)
        one = median(movement.reshape(input, 1), 0)
        return _ValuesIndices(movement.reshape(one.values, ()),
                              movement.reshape(one.indices, ()))
    d = normalize_dim("median", dim, input.ndim, input.shape)
    at = (input.shape[d] - 1) // 2
    indices = movement.narrow(sort(input, d, stable=True).indices, d, at, 1)
    if input.dtype.is_floating_point:       # (the sort puts NaN last: it would be skipped)
        nan = ops.cast(ops.isnan(input), dt.int32)
        has_nan = ops.gt(ops.amax(nan, d, keepdim=True), 0)
        indices = ops.where(has_nan, ops.argmax(nan, d, keepdim=True), indices)
    values = ops.gather(input, d, indices)
    if not keepdim:
        values, indices = movement.squeeze(values, d), movement.squeeze(indices, d)
    return _ValuesIndices(values, indices)


@autocast_op("quantile")
def quantile(input: Tensor, q: Any, dim: builtins.int | None = None, keepdim: builtins.bool = False,
             *, interpolation: str = "linear") -> Tensor:
    """The ``q``-th quantiles along ``dim`` (the flattened tensor if None;
    ``torch.quantile``): the sorted values at positions ``q (n - 1)``, between
    neighbours by ``interpolation`` (linear, lower, higher, nearest, midpoint); NaN
    where the slice holds one: its last NaN, which takes the gradient, as in PyTorch. A
    sequence or 1-D tensor of ``q`` adds a leading dim."""
    from nova.tensor.sorting import sort
    qs, scalar = _quantile_args("quantile", input, q, interpolation)
    if dim is None or input.ndim == 0:       # (a 0-d input is its one value, as in PyTorch)
        if dim is not None:
            normalize_dim("quantile", dim, input.ndim, input.shape)
        input, d, out_keep = movement.reshape(input, -1), 0, False
    else:
        d, out_keep = normalize_dim("quantile", dim, input.ndim, input.shape), keepdim
    n = input.shape[d]
    ordered = sort(input, d).values
    has_nan = ops.amax(ops.isnan(input), d, keepdim=True)
    last = movement.narrow(ordered, d, n - 1, 1)       # (NaN sorts last, stably)
    # the rank in x's dtype, as PyTorch computes it: q = 1/6 of 4 float32 values is at
    # 0.5 exactly (which "nearest" rounds down to even), not at 0.5000000149
    real = np.float64 if input.dtype == dt.float64 else np.float32
    outs = []
    for v in qs:
        pos = real(v) * real(n - 1)
        lo, hi = math.floor(pos), math.ceil(pos)
        frac = float(pos - real(lo))
        pos = float(pos)
        if interpolation == "lower" or (interpolation == "nearest" and
                                        round(pos) == lo):      # (half to even, as torch)
            hi, frac = lo, 0.0
        elif interpolation in ("higher", "nearest"):
            lo, frac = hi, 0.0
        elif interpolation == "midpoint":
            frac = 0.5 if hi != lo else 0.0
        a = movement.narrow(ordered, d, lo, 1)
        val = a if hi == lo or frac == 0.0 else \
            ops.add(a, ops.mul(ops.sub(movement.narrow(ordered, d, hi, 1), a), frac))
        val = ops.where(has_nan, last, val)
        outs.append(val if out_keep else movement.squeeze(val, d))
    return outs[0] if scalar else movement.stack(outs, 0)


def logspace(start: float, end: float, steps: builtins.int, base: float = 10.0, *,
             dtype: Any = None, layout: Any = None, device: Any = None,
             pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """``base ** linspace(start, end, steps)`` (``torch.logspace``)."""
    from nova.tensor.creation import linspace
    exponents = linspace(start, end, steps, dtype=dt.float64, layout=layout, device=device,
                         pin_memory=pin_memory)
    out = ops.pow(base, exponents)
    out = ops.cast(out, dt.get_dtype(dtype) if dtype is not None else dt.DEFAULT_FLOAT)
    return out.requires_grad_() if requires_grad else out


@autocast_op("nanquantile")
def nanquantile(input: Tensor, q: Any, dim: builtins.int | None = None,
                keepdim: builtins.bool = False, *, interpolation: str = "linear") -> Tensor:
    """``quantile`` over the values that are not NaN (``torch.nanquantile``): per slice
    the rank ``q (k - 1)`` among its ``k`` sorted non-NaN values (NaN sorts last),
    computed in ``input``'s dtype as PyTorch computes it (so ``lower``/``higher``/``nearest``
    pick the same neighbour), then ``lerp`` of the neighbours in float64, rounded once;
    NaN where a slice holds no number."""
    from nova.tensor.elementary import lerp
    from nova.tensor.numeric import ceil, floor, round
    from nova.tensor.sorting import sort
    qs, scalar = _quantile_args("nanquantile", input, q, interpolation)
    if dim is None or input.ndim == 0:       # (a 0-d input is its one value, as in PyTorch)
        if dim is not None:
            normalize_dim("nanquantile", dim, input.ndim, input.shape)
        input, d, out_keep = movement.reshape(input, -1), 0, False
    else:
        d, out_keep = normalize_dim("nanquantile", dim, input.ndim, input.shape), keepdim
    ordered = sort(input, d).values
    count = ops.sum(ops.logical_not(ops.isnan(input)), d, keepdim=True, dtype=dt.int64)
    last = ops.cast(ops.maximum(ops.sub(count, 1), 0), input.dtype)  # (no number: rank 0, NaN)
    outs = []
    for v in qs:
        rank = ops.mul(last, ops.full_const(v, (), input.dtype))
        rank = {"lower": floor, "higher": ceil, "nearest": round}.get(interpolation,
                                                                      lambda r: r)(rank)
        below = ops.cast(rank, dt.int64)
        val = ops.gather(ordered, d, below)
        if interpolation in ("linear", "midpoint"):
            weight = ops.sub(rank, ops.cast(below, input.dtype)) if interpolation == "linear" \
                else ops.full_const(0.5, rank.shape, input.dtype)
            above = ops.gather(ordered, d, ops.cast(ceil(rank), dt.int64))
            val = ops.cast(lerp(*(ops.cast(t_, dt.float64) for t_ in (val, above, weight))),
                           input.dtype)
        outs.append(val if out_keep else movement.squeeze(val, d))
    return outs[0] if scalar else movement.stack(outs, 0)


def _quantile_args(op: str, x: Tensor, q: Any, interpolation: str
                   ) -> tuple[list[float], builtins.bool]:
    """``q`` as a list of floats in [0, 1] and whether it was one number; raises as
    ``quantile`` does for a bad ``interpolation``, ``q`` or dtype."""
    if interpolation not in ("linear", "lower", "higher", "nearest", "midpoint"):
        raise ValueError(f"{op}: interpolation must be linear, lower, higher, nearest or "
                         f"midpoint, got {interpolation!r}")
    ops._check_tensor(op, x)
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{op}: input dtype must be floating point, got {x.dtype.name}")
    qs = q.tolist() if isinstance(q, Tensor) else q
    scalar = not isinstance(qs, (list, tuple))
    qs = [float(qs)] if scalar else [float(v) for v in qs]
    if any(not 0.0 <= v <= 1.0 for v in qs):
        raise ValueError(f"{op}: q must lie in [0, 1], got {qs}")
    return qs, scalar


# ---------------------------------------------------------------- torch's complex-number API
# Nova has no complex dtypes: every tensor is real, so its conjugate, real part and
# resolved forms are the tensor itself, as PyTorch returns them for real dtypes.

def _itself(name: str, doc: str) -> Callable[[Tensor], Tensor]:
    """A function of a real tensor that returns the tensor itself, as PyTorch's does."""
    def itself(input: Tensor) -> Tensor:
        ops._check_tensor(name, input)
        return input
    itself.__name__ = itself.__qualname__ = name
    itself.__doc__ = doc
    return itself


def _never(name: str) -> Callable[[Tensor], builtins.bool]:
    """A test that a real tensor never passes (``is_conj``, ``is_neg``)."""
    def never(input: Tensor) -> builtins.bool:
        ops._check_tensor(name, input)
        return False
    never.__name__ = never.__qualname__ = name
    return never


conj = _itself("conj", "``input`` itself (``torch.conj`` of a real tensor).")
conj_physical = _itself("conj_physical", "``input`` itself (``torch.conj_physical`` of a real "
                        "tensor).")
resolve_conj = _itself("resolve_conj", "``input`` itself: a real tensor is never a lazy "
                       "conjugate.")
resolve_neg = _itself("resolve_neg", "``input`` itself: Nova has no lazy negation bit.")
real = _itself("real", "``input`` itself: the real part of a real tensor (``torch.real``).")
is_conj, is_neg = _never("is_conj"), _never("is_neg")


def imag(input: Tensor) -> Tensor:
    """Refused, with PyTorch's error: a real tensor has no imaginary part to view."""
    ops._check_tensor("imag", input)
    raise RuntimeError(f"imag: imag is not implemented for tensors with non-complex dtypes "
                       f"(got {input.dtype.name})")


def isreal(input: Tensor) -> Tensor:
    """All True, of ``input``'s shape (``torch.isreal``: every real value is real)."""
    from nova.tensor.creation import ones
    ops._check_tensor("isreal", input)
    return ones(input.shape, dtype=dt.bool_, device=input.device)


def matrix_transpose(x: Tensor, name: str) -> Tensor:
    """The last two dims swapped: ``x.mT``, ``x.mH``, ``x.adjoint()`` (``name``), which
    need a matrix or a batch of them; a 0-d tensor is itself, with PyTorch's
    deprecation warning."""
    if x.ndim == 0:
        warnings.warn(f"{name} is deprecated on 0-D tensors; it is the identity in these "
                      "cases", UserWarning, stacklevel=3)
        return movement.permute(x)
    if x.ndim == 1:
        raise ValueError(f"{name} is only supported on matrices or batches of matrices. Got "
                         f"1-D tensor of shape {x.shape}")
    return movement.transpose(x, -2, -1)


def adjoint(input: Tensor) -> Tensor:
    """The conjugate transpose of the last two dims: their transpose for real tensors
    (``torch.adjoint``)."""
    ops._check_tensor("adjoint", input)
    return matrix_transpose(input, "adjoint()")


def matrix_H(x: Tensor) -> Tensor:
    """``x.H``: the conjugate transpose of a matrix (2-D only, as PyTorch's)."""
    if x.ndim not in (0, 2):
        hint = "; for batches of matrices, consider using tensor.mH" if x.ndim > 2 else ""
        raise ValueError(f"tensor.H is only supported on matrices (2-D tensors). Got "
                         f"{x.ndim}-D tensor of shape {x.shape}{hint}")
    return matrix_transpose(x, "tensor.H")


# ---------------------------------------------------------------- activations as methods
# (``torch.Tensor.hardshrink``/``prelu``; ``nv.nn.functional``'s are these)

def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x`` where ``|x| > lambd``, else 0 (integers compute in the default float
    dtype)."""
    x = ops._as_float("hardshrink", input)
    return ops.where(ops.le(ops.abs(x), lambd), 0.0, x)


@autocast_op("prelu")
def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``x if x > 0 else weight * x``, one slope per channel (dim 1; an input of fewer
    than 2 dims has one channel) or one for all. The gradient at 0 is the slope, as
    PyTorch's."""
    ops._check_tensor("prelu", input)
    ops._check_tensor("prelu", weight)
    channels = input.shape[1] if input.ndim >= 2 else 1
    if weight.ndim > 1 or weight.numel() not in (1, channels):
        raise ValueError(f"prelu: weight of shape {weight.shape} must have 1 or {channels} "
                         f"elements (one per channel of input {input.shape})")
    x = ops._as_float("prelu", input)
    w = movement.reshape(weight, ()) if weight.numel() == 1 else \
        movement.reshape(weight, (channels,) + (1,) * (input.ndim - 2))
    return ops.where(ops.gt(x, 0), x, ops.mul(x, w))


# ---------------------------------------------------------------- scatters into copies

def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """``input`` (broadcast with the bool ``mask``) whose elements where ``mask`` holds
    are replaced, in row-major order, by ``source``'s first elements
    (``torch.masked_scatter``). Each such element takes the ``source`` element at its
    rank among the True positions (a cumulative count), so the shapes stay static;
    ``source`` needs at least as many elements as ``mask`` has True values: checked here
    when the mask's values are known, otherwise by the gather's kernel when the step
    runs."""
    from nova.tensor.creation import zeros
    for t_ in (input, mask, source):
        ops._check_tensor("masked_scatter", t_)
    if mask.dtype != dt.bool_:
        raise DTypeError(f"masked_scatter: mask must be a bool tensor, got {mask.dtype.name}")
    if source.dtype != input.dtype:
        raise DTypeError(f"masked_scatter: expected input and source to have the same dtype, "
                         f"got {input.dtype.name} and {source.dtype.name}")
    shape = broadcast_shapes("masked_scatter", input.shape, mask.shape)
    known = ops.known_index_values(mask)
    if known is not None and known.size:     # (broadcasting repeats each element alike)
        needed = builtins.int(known.sum()) * (math.prod(shape) // known.size)
        if needed > source.numel():
            raise RuntimeError(f"masked_scatter: the number of elements of source "
                               f"({source.numel()}) is less than the number of True values "
                               f"in mask ({needed})")
    flat_mask = movement.reshape(movement.expand(mask, shape), -1)
    rank = scan.cumsum(ops.cast(flat_mask, dt.int64), 0)          # 1 at the first True
    src = movement.reshape(source, -1)
    if src.shape[0]:
        rank = ops.sub(rank, 1)
    else:        # (no element to take: any True reads past this one placeholder)
        src = zeros(1, dtype=input.dtype, device=input.device)
    picked = ops.gather(src, 0, ops.where(flat_mask, rank, 0))
    whole = movement.reshape(movement.expand(input, shape), -1)
    return movement.reshape(ops.where(flat_mask, picked, whole), shape)


def _scatter_into(op: str, input: Tensor, src: Tensor, part: Any) -> Tensor:
    """A copy of ``input`` with the view ``part(copy)`` overwritten by ``src`` (cast to
    ``input``'s dtype, as ``copy_``), which must have that view's shape exactly."""
    ops._check_tensor(op, input)
    ops._check_tensor(op, src)
    out = input.clone()
    target = part(out)
    if src.shape != target.shape:
        raise ValueError(f"{op}: expected src to have a size equal to the slice of input: "
                         f"src has shape {src.shape}, the slice {target.shape} (input "
                         f"{input.shape})")
    target.copy_(src)
    return out


def diagonal_scatter(input: Tensor, src: Tensor, offset: builtins.int = 0,
                     dim1: builtins.int = 0, dim2: builtins.int = 1) -> Tensor:
    """A copy of ``input`` with ``diagonal(offset, dim1, dim2)`` replaced by ``src``
    (``torch.diagonal_scatter``)."""
    return _scatter_into("diagonal_scatter", input, src,
                         lambda out: diagonal(out, offset, dim1, dim2))


def select_scatter(input: Tensor, src: Tensor, dim: builtins.int,
                   index: builtins.int) -> Tensor:
    """A copy of ``input`` with ``select(dim, index)`` replaced by ``src``
    (``torch.select_scatter``)."""
    ops._check_tensor("select_scatter", input)
    d = normalize_dim("select_scatter", dim, input.ndim, input.shape)
    n = input.shape[d]
    if not -n <= index < n:
        raise IndexError(f"select_scatter: index {index} is out of range for dim {d} of "
                         f"size {n} (input {input.shape})")
    return _scatter_into("select_scatter", input, src,
                         lambda out: out[(slice(None),) * d + (index,)])


def slice_scatter(input: Tensor, src: Tensor, dim: builtins.int = 0,
                  start: builtins.int | None = None, end: builtins.int | None = None,
                  step: builtins.int = 1) -> Tensor:
    """A copy of ``input`` with ``input[..., start:end:step, ...]`` (in ``dim``)
    replaced by ``src`` (``torch.slice_scatter``)."""
    ops._check_tensor("slice_scatter", input)
    if step <= 0:
        raise ValueError(f"slice_scatter: slice step must be positive, got {step}")
    d = normalize_dim("slice_scatter", dim, input.ndim, input.shape)
    return _scatter_into("slice_scatter", input, src,
                         lambda out: out[(slice(None),) * d + (slice(start, end, step),)])


def put(input: Tensor, index: Tensor, source: Tensor,
        accumulate: builtins.bool = False) -> Tensor:
    """A copy of ``input`` with the elements at ``index`` into its flattened form
    (negative counting from the end) set to ``source``'s, or incremented by them with
    ``accumulate`` (``torch.put``); ``index`` and ``source`` have any shapes of one
    element count."""
    from nova.tensor.indexing import _index_put_value
    for t_ in (input, index, source):
        ops._check_tensor("put", t_)
    if index.dtype.category != dt.INT:
        raise DTypeError(f"put: index must be an integer tensor, got {index.dtype.name}")
    if source.dtype != input.dtype:
        raise DTypeError(f"put: input and source must have the same dtype, got "
                         f"{input.dtype.name} and {source.dtype.name}")
    if source.numel() != index.numel():
        raise IndexError(f"put: expected source and index to have the same number of "
                         f"elements, got {source.numel()} (source {source.shape}) and "
                         f"{index.numel()} (index {index.shape})")
    flat = _index_put_value("put", movement.reshape(input, -1),
                            (movement.reshape(index, -1),), movement.reshape(source, -1),
                            accumulate)
    return movement.reshape(flat, input.shape)


# ---------------------------------------------------------------- histogram

_Histogram = namedtuple("histogram", ["hist", "bin_edges"])


def histogram(input: Tensor, bins: Any = 100, *, range: Sequence[float] | None = None,
              weight: Tensor | None = None, density: builtins.bool = False) -> Any:
    """``(hist, bin_edges)`` of ``input``'s elements (flattened), as
    ``torch.histogram``: ``bins`` equal bins over ``range`` (default: the data's min
    and max, widened by 0.5 each way if equal; (0, 1) for no data) or the edges of a
    1-D tensor ``bins``. Bin ``i`` holds ``edges[i] <= x < edges[i+1]``, the last one its
    right edge too; elements outside, and NaN, are not counted. The edges are computed
    in ``input``'s dtype by the formula of PyTorch's ``linspace`` (from the low end in
    the first half, from the high end in the second: both ends exact; PyTorch's
    vectorized kernel can differ in the last bit), and an element's bin is found as
    PyTorch finds it (linear interpolation, then a search among the neighbouring
    edges), so the bins always agree with the edges returned. ``weight`` (of
    ``input``'s shape) counts each element by its weight; ``density`` divides by the
    total and the bin widths.

    Deviation: without ``range``, PyTorch raises when the data hold an infinity or NaN
    (its min or max is not finite); Nova cannot see the values while recording and
    takes the range of the finite elements (as ``nv.histc`` does)."""
    op = "histogram"
    ops._check_tensor(op, input)
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{op}: input must be floating point, got {input.dtype.name}")
    x = movement.reshape(input, -1)
    if weight is not None:
        ops._check_tensor(op, weight)
        if weight.shape != input.shape:
            raise ValueError(f"{op}: weight must have input's shape {input.shape}, got "
                             f"{weight.shape}")
        if weight.dtype != input.dtype:
            raise DTypeError(f"{op}: weight must have input's dtype {input.dtype.name}, got "
                             f"{weight.dtype.name}")
        weight = movement.reshape(weight, -1)
    if isinstance(bins, Tensor):
        if range is not None:
            raise TypeError(f"{op}: range cannot be given with a tensor of bin edges")
        if bins.ndim != 1 or bins.shape[0] < 1:
            raise ValueError(f"{op}: bins tensor should have one dimension and at least one "
                             f"edge, got shape {bins.shape}")
        if bins.dtype != input.dtype:
            raise DTypeError(f"{op}: input and bins should have the same dtype, got "
                             f"{input.dtype.name} and {bins.dtype.name}")
    elif isinstance(bins, builtins.bool) or not isinstance(bins, builtins.int) or bins <= 0:
        raise ValueError(f"{op}: bins must be a positive int or a 1-D tensor, got {bins!r}")
    edges, index, inside = bin_of(op, x, bins, range)
    count = edges.shape[0] - 1
    amount = ops.cast(inside, input.dtype) if weight is None else \
        ops.where(inside, weight, 0.0)
    from nova.tensor.creation import zeros
    hist = zeros(count, dtype=input.dtype, device=input.device)
    if count:
        hist = ops.scatter_add(hist, 0, ops.where(inside, index, 0), amount)
    if density:
        hist = ops.div(ops.div(hist, ops.sum(hist)), ops.sub(edges[1:], edges[:-1]))
    return _Histogram(hist, edges)


def bin_of(op: str, x: Tensor, bins: Any, range: Any) -> tuple[Tensor, Tensor, Tensor]:
    """``(edges, bin, inside)`` of the values ``x`` (1-D) as ``histogram`` bins them:
    ``bins`` a tensor of edges or a count over ``range`` (``_histogram_range``); each
    value's bin (the last bin closed) and whether it lies within the edges."""
    if isinstance(bins, Tensor):
        edges = bins
        index = ops.sub(ops.sum(ops.le(edges, movement.unsqueeze(x, -1)), -1,
                                dtype=dt.int64), 1)
    else:
        lo, hi = _histogram_range(op, x, range)
        edges = _linspace_like_torch(lo, hi, bins, x.dtype)
        lo, hi = edges[0], edges[-1]
        estimate = ops.div(ops.mul(ops.sub(x, lo), float(bins)), ops.sub(hi, lo))
        index = _local_search(edges, x, ops.cast(ops.clamp(ops.where(
            ops.isnan(estimate), 0.0, estimate), 0, bins), dt.int64))
    count = edges.shape[0] - 1
    inside = ops.logical_and(ops.ge(x, edges[0]), ops.le(x, edges[-1]))
    index = ops.where(ops.lt(index, count - 1), index, builtins.max(count - 1, 0))
    return edges, index, inside


def _histogram_range(op: str, x: Tensor, range: Any) -> tuple[Tensor, Tensor]:
    """``torch.histogram``'s outer edges as float64 0-d tensors: ``range``, or the
    finite data's min and max ((0, 1) for no element), widened by 0.5 each way when
    equal."""
    if range is not None:
        lo_v, hi_v = (builtins.float(v) for v in range)
        if lo_v > hi_v:
            raise ValueError(f"{op}: min should not exceed max, got range ({lo_v}, {hi_v})")
        if not (math.isfinite(lo_v) and math.isfinite(hi_v)):
            raise ValueError(f"{op}: range [{lo_v}, {hi_v}] is not finite")
        lo, hi = ops.full_const(lo_v, (), dt.float64), ops.full_const(hi_v, (), dt.float64)
    elif x.shape[0] == 0:
        lo, hi = ops.full_const(0.0, (), dt.float64), ops.full_const(1.0, (), dt.float64)
    else:
        w = ops.cast(x, dt.float64)
        finite = ops.lt(ops.abs(w), math.inf)
        lo = ops.amin(ops.where(finite, w, math.inf))
        hi = ops.amax(ops.where(finite, w, -math.inf))
        none = ops.logical_not(ops.lt(lo, math.inf))            # no finite element
        lo, hi = ops.where(none, 0.0, lo), ops.where(none, 0.0, hi)
    point = ops.eq(lo, hi)
    return ops.where(point, ops.sub(lo, 0.5), lo), ops.where(point, ops.add(hi, 0.5), hi)


def _linspace_like_torch(lo: Tensor, hi: Tensor, bins: builtins.int,
                         dtype: dt.DType) -> Tensor:
    """``bins + 1`` edges from ``lo`` to ``hi`` (0-d tensors) as PyTorch's CPU
    ``linspace`` computes them in ``dtype``: ``lo + step i`` in the first half, ``hi -
    step (bins - i)`` in the second, ``step = (hi - lo) / bins``."""
    from nova.tensor.creation import arange
    lo, hi = ops.cast(lo, dtype), ops.cast(hi, dtype)
    step = ops.div(ops.sub(hi, lo), float(bins))
    i = arange(bins + 1, dtype=dtype)
    first = ops.add(lo, ops.mul(step, i))
    second = ops.sub(hi, ops.mul(step, ops.sub(float(bins), i)))
    return ops.where(ops.lt(i, float((bins + 1) // 2)), first, second)


def _local_search(edges: Tensor, x: Tensor, estimate: Tensor) -> Tensor:
    """PyTorch's correction of an interpolated bin ``estimate``: the last edge ``<= x``
    among ``edges[estimate - 1 : estimate + 2]`` (an upper bound over that window),
    so the bin agrees with the edges returned."""
    n = edges.shape[0]
    start = ops.maximum(ops.sub(estimate, 1), 0)
    stop = ops.minimum(ops.add(estimate, 2), n)
    found = ops.sub(start, 1)
    for k in builtins.range(3):
        at = ops.add(start, k)
        edge = ops.gather(edges, 0, ops.minimum(at, n - 1))
        found = ops.add(found, ops.cast(ops.logical_and(ops.lt(at, stop), ops.le(edge, x)),
                                        dt.int64))
    return found


# ---------------------------------------------------------------- matrix exponential

# Bader, Blanes and Casas (2019), "Computing the matrix exponential with an optimized
# Taylor polynomial approximation": the degree-18 Taylor polynomial in 5 products
# (``_taylor18``), accurate to float64's unit roundoff for a 1-norm up to ``_THETA18``.
_TAYLOR18 = (
    (0.0, -1.00365581030144618291e-01, -8.02924648241156932449e-03,
     -8.92138498045729985177e-04, 0.0),
    (0.0, 3.97849749499645077844e-01, 1.36783778460411720168e+00,
     4.98289622525382669416e-01, -6.37898194594723280150e-04),
    (-1.09676396052962061844e+01, 1.68015813878906206114e+00, 5.71779846478865511061e-02,
     -6.98210122488052056106e-03, 3.34975017086070470649e-05),
    (-9.04316832390810593223e-02, -6.76404519071381882256e-02, 6.75961301770459654925e-02,
     2.95552570429315521194e-02, -1.39180257516060693404e-05),
    (0.0, 0.0, -9.23364619367118555360e-02, -1.69364939002081722752e-02,
     -1.40086798182036094347e-05),
)
_THETA18 = 1.090863719290036
# Squarings the graph holds (each applied where a matrix's scaling needs it): a 1-norm
# up to _THETA18 * 2**_MAX_SQUARINGS (about 4.7e9); beyond it the result is NaN.
_MAX_SQUARINGS = 32


def _taylor18(a: Tensor) -> Tensor:
    from nova.tensor.creation import eye
    n = a.shape[-1]
    ident = eye(n, dtype=a.dtype, device=a.device)
    a2 = ops.matmul(a, a)
    a3 = ops.matmul(a2, a)
    a6 = ops.matmul(a3, a3)
    powers = (ident, a, a2, a3, a6)
    b = []
    for row in _TAYLOR18:
        acc = None
        for c, p in zip(row, powers):
            if c:
                term = ops.mul(p, c)
                acc = term if acc is None else ops.add(acc, term)
        b.append(acc)
    a9 = ops.add(ops.matmul(b[0], b[4]), b[3])
    return ops.add(b[1], ops.matmul(ops.add(b[2], a9), a9))


def matrix_exp(A: Tensor) -> Tensor:
    """``exp(A)`` of a square matrix or a batch of them (``torch.matrix_exp``), by
    scaling and squaring: ``A / 2^s`` with the smallest ``s`` that brings its 1-norm
    under ``_THETA18``, the degree-18 Taylor approximant of Bader, Blanes and Casas (the
    one PyTorch uses; a Pade approximant would need a linear solve, which Nova lacks),
    then ``s`` squarings. Computed in float64 and rounded once to ``A``'s dtype.

    Shapes are static, so the graph holds ``_MAX_SQUARINGS`` squarings and each matrix
    of a batch takes the result after its own ``s`` of them; a matrix whose norm needs
    more (above ~4.7e9) gets NaN (PyTorch's own result there is mostly NaN or inf too).
    The gradient is autograd's through these products (``s`` is a constant of the
    data: its derivative is zero)."""
    from nova.tensor.elementary import exp2, log2
    from nova.tensor.numeric import ceil
    from nova.tensor.tensor import unaliased_detach
    ops._check_tensor("matrix_exp", A)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"matrix_exp: A must be a square matrix or a batch of square "
                         f"matrices, got shape {A.shape}")
    if not A.dtype.is_floating_point:
        raise DTypeError(f"matrix_exp: expected a floating point tensor, got {A.dtype.name}")
    if A.numel() == 0:
        return A.clone()
    a = ops.cast(A, dt.float64)
    if A.shape[-1] == 1:
        return ops.cast(ops.exp(a), A.dtype)
    norm = ops.amax(ops.sum(ops.abs(unaliased_detach(a)), -2, keepdim=True), -1, keepdim=True)
    s = ops.maximum(ceil(log2(ops.div(norm, _THETA18))), 0.0)
    out = _taylor18(ops.mul(a, exp2(ops.neg(ops.minimum(s, float(_MAX_SQUARINGS))))))
    left = s                     # (a countdown, so every squaring is the same kernel)
    for _ in builtins.range(_MAX_SQUARINGS):
        out = ops.where(ops.gt(left, 0.0), ops.matmul(out, out), out)
        left = ops.sub(left, 1.0)
    out = ops.where(ops.gt(left, 0.0), math.nan, out)
    return ops.cast(out, A.dtype)


# ---------------------------------------------------------------- allclose

def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: builtins.bool = False) -> builtins.bool:
    """Whether every element of ``input`` is ``isclose`` to ``other``'s
    (``torch.allclose``; realizes both)."""
    from nova.tensor.elementary import isclose
    from nova.tensor.numeric import all
    ops._check_tensor("allclose", input)
    ops._check_tensor("allclose", other)
    return builtins.bool(all(isclose(input, other, rtol, atol, equal_nan)).item())


# Shapes that depend on values: read on the host, then static (``data_dependent``).
from nova.tensor.data_dependent import (  # noqa: E402
    argwhere, bincount, masked_select, nonzero, nonzero_static, unique, unique_consecutive)


TENSOR_METHODS = (
    "prod", "roll", "diff", "tile", "repeat_interleave", "movedim", "moveaxis", "select",
    "ravel", "diagonal", "diag", "trace", "outer", "ger", "dot", "mv", "kron",
    "index_select", "take_along_dim", "addmm", "addmv", "baddbmm", "aminmax",
    "tensor_split", "hsplit", "vsplit", "dsplit", "index_add", "index_copy", "index_fill", "cross",
    "rot90", "median", "quantile", "nonzero", "nonzero_static", "argwhere", "masked_select",
    "unique", "unique_consecutive", "bincount", "nanquantile", "conj", "conj_physical",
    "resolve_conj", "resolve_neg", "is_conj", "is_neg", "isreal", "adjoint", "hardshrink",
    "prelu", "masked_scatter", "diagonal_scatter", "select_scatter", "slice_scatter", "put",
    "histogram", "matrix_exp", "allclose",
)

__all__ = list(TENSOR_METHODS) + [
    "meshgrid", "atleast_1d", "atleast_2d", "atleast_3d", "hstack", "vstack", "row_stack",
    "dstack", "column_stack", "tril_indices", "triu_indices", "var_mean", "std_mean",
    "bucketize", "searchsorted", "clone", "detach", "numel", "is_tensor",
    "is_floating_point", "block_diag", "cartesian_prod", "trapezoid", "trapz", "logspace",
    "real", "imag",
]
