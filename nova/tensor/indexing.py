"""``x[index]`` and ``x[index] = value``.

An index is split into a *basic* part (ints, slices with positive steps, None, Ellipsis)
that becomes one ``nova.slice`` plus a reshape, and an *advanced* part (integer tensors,
lists, numpy arrays) that becomes one ``nova.gather`` over the indexed dims linearized into
one. Basic results are views; advanced results are copies, as in PyTorch. Assignment is
functional: the new value of the whole tensor is built with ``nova.pad`` + ``nova.where``
(basic) and ``nova.scatter`` (advanced; ``nova.scatter_add`` for ``index_put_`` with
``accumulate=True``), then the handle is rebound.

Every integer-tensor index is checked against its own dim before the indices are
linearized (``nova.wrap_index``), so ``x[i, j]`` with ``j`` past the end of dim 1 is an
error, never an element of another row. Values already on the host (lists, numpy
arrays, tensors made from them) are checked here, at the user's line; computed indices
when the step runs. Assigning through repeated indices writes once per element, the last
value winning, as numpy does.

A boolean mask has a data-dependent result shape: reading through one (``x[mask]``,
``x[:, mask]``, ``x[idx, mask]``) reads the mask on the host (a sync, as ``.item()``)
and indexes with its true elements' positions, numpy's rule: a k-dim mask is k integer
index arrays (``expand_masks``); the tensor indexed stays lazy and gets the gradient.
Writing through one mask among basic entries needs no read when the value is the same
for every selected element: ``x[1:3, mask] = v`` and ``index_put_((mask,), v)`` are a
``where`` over the window. ``x[mask] += v`` reads ``x[mask]`` as a ``MaskedSelection``
(the read half of an augmented assignment is recognised from the caller's bytecode) so
that it stays a ``where`` too; a value with one entry per selected element takes the
read.

A basic index of a tensor already realized on the host, with no gradient to record, is
read straight from its buffer into a new realized leaf (still a view of the tensor, as
above): iterating a realized tensor or reading ``int(t[i])`` compiles nothing.
"""
from __future__ import annotations

import builtins
import dis
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.tensor import capture_log as _capture_log
from nova.tensor import grad_mode as _grad_mode
from nova.tensor import ops
from nova.tensor.movement import make_view, permute
from nova.tensor.ops import broadcast_to, full_const, prim
from nova.core.shapes import broadcast_shapes, numel
from nova.tensor.tensor import Tensor
from nova.tensor.trace import buffer_node


@dataclass(frozen=True)
class ParsedIndex:
    starts: tuple[int, ...]        # per input dim
    limits: tuple[int, ...]
    steps: tuple[int, ...]
    out_shape: tuple[int, ...]     # shape after ints are dropped and None dims inserted
    advanced: tuple[tuple[int, int, Tensor], ...]  # (dim in out_shape, input dim, index)

    @property
    def window(self) -> tuple[int, ...]:
        return tuple(-(-(b - a) // s) for a, b, s in zip(self.starts, self.limits, self.steps))


def mask_read_error(op: str, mask_shape: tuple[int, ...], shape: tuple[int, ...]) -> IndexError:
    """The refusal of a boolean-mask read (the one text for it: a mask among integer
    indices, and any use of ``x[mask]`` but ``x[mask] op= v``, see ``MaskedSelection``)."""
    return IndexError(f"{op}: boolean mask indexing of shape {mask_shape} into {shape} has a "
                      "data-dependent result shape, which Nova's static shapes cannot "
                      "express; use masked_fill or where instead")


def _as_index_tensor(op: str, entry: Any, shape: tuple[int, ...]) -> Tensor:
    if isinstance(entry, Tensor):
        t = entry
    else:
        arr = np.asarray(entry)
        if arr.dtype == object or arr.dtype.kind not in "biu":
            raise TypeError(f"{op}: index lists and arrays must hold integers, got {entry!r}")
        from nova.tensor.creation import from_numpy
        t = from_numpy(arr.astype(np.int64) if arr.dtype.kind != "b" else arr)
    if t.dtype == dt.bool_:
        raise mask_read_error(op, t.shape, shape)
    if t.dtype not in (dt.int32, dt.int64):
        hint = (" (a uint8 mask is PyTorch's deprecated form: index with .bool() for a "
                "mask, .long() for indices)" if t.dtype == dt.uint8 else "")
        raise IndexError(f"{op}: tensors used as indices must be int32 or int64, got "
                         f"{t.dtype.name} of shape {t.shape}{hint}")
    return t


def parse_index(op: str, shape: tuple[int, ...], index: Any) -> ParsedIndex:
    entries = list(index) if isinstance(index, tuple) else [index]
    consuming = [e for e in entries if e is not None and e is not Ellipsis]
    if builtins.sum(e is Ellipsis for e in entries) > 1:
        raise IndexError(f"{op}: an index can only have a single ellipsis (...)")
    if len(consuming) > len(shape):
        raise IndexError(f"{op}: too many indices for tensor of shape {shape}: "
                         f"{len(consuming)} given, {len(shape)} dims")
    fill = [slice(None)] * (len(shape) - len(consuming))
    ellipsis = [k for k, e in enumerate(entries) if e is Ellipsis]
    if ellipsis:
        entries[ellipsis[0]:ellipsis[0] + 1] = fill
    else:
        entries += fill
    starts, limits, steps, out_shape, advanced = [], [], [], [], []
    d = 0
    for e in entries:
        if e is None:
            out_shape.append(1)
            continue
        n = shape[d]
        if isinstance(e, (builtins.bool, np.bool_)):
            raise IndexError(f"{op}: bool scalars are not valid indices")
        if isinstance(e, (builtins.int, np.integer)):
            i = builtins.int(e)
            if not -n <= i < n:
                raise IndexError(f"{op}: index {i} is out of bounds for dim {d} with size {n} "
                                 f"(shape {shape})")
            i %= n
            starts.append(i), limits.append(i + 1), steps.append(1)
        elif isinstance(e, slice):
            step = 1 if e.step is None else builtins.int(e.step)
            if step <= 0:
                raise ValueError(f"{op}: slice step must be positive, got {step} (reverse "
                                 "with flip-free indexing is not supported)")
            a, b, _ = slice(e.start, e.stop, step).indices(n)
            b = builtins.max(a, b)
            starts.append(a), limits.append(b), steps.append(step)
            out_shape.append(-(-(b - a) // step))
        else:
            t = _as_index_tensor(op, e, shape)
            ops.check_index_values(op, t, d, shape, negative=True)
            starts.append(0), limits.append(n), steps.append(1)
            advanced.append((len(out_shape), d, t))
            out_shape.append(n)
        d += 1
    return ParsedIndex(tuple(starts), tuple(limits), tuple(steps), tuple(out_shape),
                       tuple(advanced))


def _host_buffer(x: Tensor) -> np.ndarray | None:
    """``x``'s host array when reading it directly gives exactly what the recorded
    ``slice`` + ``reshape`` would compute, else None.

    That is when ``x`` is realized on the host (a CUDA buffer keeps the recorded path,
    as does a pending value, which has no buffer yet) and no autograd record is due:
    with grad mode on and ``x`` requiring grad the ops are recorded, so the gradient
    flows through their rules exactly as before. Without this, reading a realized
    tensor element by element (``for v in t``, ``int(t[i])``) compiled one step per
    position, the slice's start being an attribute of the step."""
    node = x.node
    buffer = node.buffer
    if not isinstance(buffer, np.ndarray) or node.device not in ("cpu", None):
        return None
    if _grad_mode.STATE.enabled and x._grad_edge() is not None:
        return None
    if _capture_log.ACTIVE.get() is not None:
        return None      # nv.compile: a value read on the host would not be read again
    return buffer


def realize_to_iterate(x: Tensor) -> None:
    """Realize a pending host tensor that is about to be iterated, when its elements
    would then be read from its buffer (``_host_buffer``'s conditions): otherwise every
    element (``for i in torch.randint(...)``, nanoGPT's ``get_batch``) is a step of its
    own that recomputes the whole tensor to slice one position out of it, and a
    different step per position, the slice start being an attribute of the step."""
    node = x.node
    if node.realized or node.device not in ("cpu", None):
        return
    if _grad_mode.STATE.enabled and x._grad_edge() is not None:
        return
    if _capture_log.ACTIVE.get() is not None:
        return       # nv.compile: the elements stay recorded, so a replay computes them
    from nova.tensor.realize import realize
    realize(x)


def _host_basic(x: Tensor, buffer: np.ndarray, p: ParsedIndex) -> Tensor:
    """The basic window of a realized host tensor as a new realized leaf (nothing
    compiles). A C-contiguous window is a read-only numpy view of ``x``'s buffer (no
    copy: Nova buffers are never written, and a donated buffer is never one that
    another array views, see ``host_buffers.sole_host_owner``); a strided one is copied
    once, so the steps that read it do not each make it contiguous again."""
    window = tuple(slice(a, b, s) for a, b, s in zip(p.starts, p.limits, p.steps))
    arr = buffer[window + (Ellipsis,)].reshape(p.out_shape)   # (Ellipsis: 0-d stays an array)
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")
    return Tensor._wrap(buffer_node(arr, x.dtype, x.node.device))


def _basic(x: Tensor, p: ParsedIndex) -> Tensor:
    """``x``'s basic window reshaped to ``p.out_shape``: ``x`` itself for the whole
    tensor, read straight from the buffer of a realized host tensor (``_host_buffer``),
    else a recorded ``slice`` and ``reshape``."""
    sliced = p.window != x.shape or any(s != 1 for s in p.steps)
    if not sliced and p.window == p.out_shape:
        return x
    buffer = _host_buffer(x)
    if buffer is not None:
        return _host_basic(x, buffer, p)
    y = x
    if sliced:
        y = prim("slice", [x], {"start": p.starts, "limit": p.limits, "stride": p.steps},
                 p.window, x.dtype)
    return y if y.shape == p.out_shape else prim("reshape", [y], {}, p.out_shape, y.dtype)


def _basic_put(x: Tensor, p: ParsedIndex, value: Tensor) -> Tensor:
    """``x`` with the basic window replaced by ``value`` (of shape ``p.out_shape``)."""
    if numel(p.window) == 0:
        return x
    v = value if value.shape == p.window else prim("reshape", [value], {}, p.window, value.dtype)
    if p.window == x.shape:
        return v
    low = p.starts
    interior = tuple(s - 1 for s in p.steps)
    high = tuple(n - (a + (w - 1) * s + 1) for n, a, w, s in zip(x.shape, p.starts, p.window,
                                                                 p.steps))
    attrs = {"low": low, "high": high, "interior": interior}
    padded = prim("pad", [v, full_const(0, (), x.dtype)], attrs, x.shape, x.dtype)
    mask = prim("pad", [full_const(True, p.window, dt.bool_), full_const(False, (), dt.bool_)],
                attrs, x.shape, dt.bool_)
    return ops.where(mask, padded, x)


@dataclass(frozen=True)
class _Advanced:
    """Indexed dims moved to the front and merged into one of size ``rows``."""

    dims: tuple[int, ...]
    perm: tuple[int, ...]
    rows: int
    rest: tuple[int, ...]
    flat: Tensor          # linear row index per element of the broadcast index shape
    bshape: tuple[int, ...]


def _linearize(op: str, y: Tensor, advanced: tuple[tuple[int, int, Tensor], ...]) -> _Advanced:
    """Each index is wrapped and checked against its own dim (``wrap_index``) before the
    indexed dims are merged into one: a linear index alone cannot tell ``x[0, 4]`` on a
    (3, 4) tensor from ``x[1, 0]``."""
    dims = tuple(d for d, _, _ in advanced)
    bshape = broadcast_shapes(op, *[t.shape for _, _, t in advanced])
    flat = None
    for d, src_dim, t in advanced:
        n = y.shape[d]
        i = prim("wrap_index", [t], {"size": n, "dim": src_dim}, t.shape, t.dtype)
        i = broadcast_to(ops.cast(i, dt.int64), bshape, op)
        flat = i if flat is None else ops.add(ops.mul(flat, n), i)
    perm = dims + tuple(k for k in range(y.ndim) if k not in dims)
    rest = tuple(y.shape[k] for k in perm[len(dims):])
    return _Advanced(dims, perm, numel(tuple(y.shape[d] for d in dims)), rest, flat, bshape)


def _front(y: Tensor, a: _Advanced) -> Tensor:
    moved = permute(y, *a.perm) if a.perm != tuple(range(y.ndim)) else y
    return prim("reshape", [moved], {}, (a.rows,) + a.rest, y.dtype)


def _row_index(a: _Advanced) -> Tensor:
    m = numel(a.bshape)
    col = prim("reshape", [a.flat], {}, (m,) + (1,) * len(a.rest), dt.int64)
    return broadcast_to(col, (m,) + a.rest, "index")


def _adjacent(dims: tuple[int, ...]) -> bool:
    return dims == tuple(range(dims[0], dims[0] + len(dims)))


def _advanced_get(op: str, y: Tensor, advanced) -> Tensor:
    a = _linearize(op, y, advanced)
    out = prim("gather", [_front(y, a), _row_index(a)], {"dim": 0},
               (numel(a.bshape),) + a.rest, y.dtype)
    out = prim("reshape", [out], {}, a.bshape + a.rest, y.dtype)
    if _adjacent(a.dims) and a.dims[0] > 0:  # numpy rule: adjacent index dims stay in place
        nb, p = len(a.bshape), a.dims[0]
        order = tuple(range(nb, nb + p)) + tuple(range(nb)) + tuple(range(nb + p, out.ndim))
        out = permute(out, *order)
    return out


def _result_shape(y: Tensor, a: _Advanced) -> tuple[int, ...]:
    if _adjacent(a.dims) and a.dims[0] > 0:
        p = a.dims[0]
        return a.rest[:p] + a.bshape + a.rest[p:]
    return a.bshape + a.rest


def _advanced_put(op: str, y: Tensor, advanced, value: Any,
                  accumulate: bool = False, drop_leading_ones: bool = False) -> Tensor:
    """``y`` with the indexed elements set to ``value`` (``accumulate``: ``value`` added
    to them). An element named twice is written once, the last value winning, as in
    numpy (PyTorch leaves it undefined); with ``accumulate`` every value counts.
    ``drop_leading_ones``: see ``_value_as``."""
    a = _linearize(op, y, advanced)
    target = _result_shape(y, a)
    v = _value_as(op, value, target, y.dtype, drop_leading_ones)
    if _adjacent(a.dims) and a.dims[0] > 0:  # bring the index dims to the front
        nb, p = len(a.bshape), a.dims[0]
        order = tuple(range(p, p + nb)) + tuple(range(p)) + tuple(range(p + nb, v.ndim))
        v = permute(v, *order)
    m = numel(a.bshape)
    v = prim("reshape", [v], {}, (m,) + a.rest, y.dtype)
    rows = _row_index(a)
    put = ops.scatter_add if accumulate else ops.scatter
    front = put(_front(y, a), 0, rows, v)
    moved_shape = tuple(y.shape[k] for k in a.perm)
    back = prim("reshape", [front], {}, moved_shape, y.dtype)
    inverse = tuple(a.perm.index(k) for k in range(y.ndim))
    return permute(back, *inverse) if inverse != tuple(range(y.ndim)) else back


_NUMBERS = (builtins.int, builtins.float, builtins.bool, np.number, np.bool_)


def _without_leading_ones(shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` with its leading size-1 dims dropped (PyTorch's ``slicePrefix1sSize``)."""
    k = 0
    while k < len(shape) and shape[k] == 1:
        k += 1
    return shape[k:]


def _value_as(op: str, value: Any, shape: tuple[int, ...], dtype: dt.DType,
              drop_leading_ones: bool = False) -> Tensor:
    """``value`` cast to ``dtype`` and broadcast to the indexed ``shape``.

    ``drop_leading_ones`` (``x[index] = value``): a value with more dims than ``shape``
    loses its leading size-1 dims first, as PyTorch's ``__setitem__`` does, so
    ``out[t] = o`` with ``o`` of shape (1, 2, 4) fills a (2, 4) window; ``index_put_``
    keeps the strict broadcast, as in PyTorch."""
    if isinstance(value, Tensor):
        v = value
        if drop_leading_ones and v.ndim > len(shape):
            v = prim("reshape", [v], {}, _without_leading_ones(v.shape), v.dtype)
        if v.ndim > len(shape) or broadcast_shapes(op, v.shape, shape) != shape:
            raise ValueError(f"{op}: value of shape {value.shape} cannot be broadcast to the "
                             f"indexed shape {shape}")
        return broadcast_to(ops.cast(v, dtype), shape, op)
    if isinstance(value, _NUMBERS):
        return full_const(value, shape, dtype)
    from nova.tensor.creation import tensor
    return _value_as(op, tensor(value, dtype=dtype), shape, dtype, drop_leading_ones)


# A list index shorter than this may stand for a tuple of indices (``as_index_tuple``).
SEQUENCE_AS_TUPLE_MAX = 32


def as_index_tuple(index: Any) -> Any:
    """``index`` as subscripting reads it: a list shorter than
    ``SEQUENCE_AS_TUPLE_MAX`` holding a tensor, an array, a list or tuple, a slice,
    ``None`` or ``...`` is a tuple of indices, one per dim (``x[[rows, cols]]`` is
    ``x[rows, cols]``), as PyTorch and NumPy's legacy rule read it; any other list
    (of ints or bools) is one advanced index."""
    if type(index) is list and len(index) < SEQUENCE_AS_TUPLE_MAX:
        for e in index:
            if e is None or e is Ellipsis or isinstance(e, (Tensor, list, tuple, slice,
                                                            np.ndarray)):
                index = tuple(index)
                break
    if isinstance(index, (builtins.bool, np.bool_)):
        return _bool_scalar(index)
    if type(index) is tuple and builtins.any(isinstance(e, (builtins.bool, np.bool_))
                                            for e in index):
        return tuple(_bool_scalar(e) if isinstance(e, (builtins.bool, np.bool_)) else e
                     for e in index)
    return index


def _bool_scalar(value: Any) -> Tensor:
    """A Python bool index as the 0-d mask it means in PyTorch: ``x[True]`` adds a dim
    of 1, ``x[False]`` one of 0."""
    from nova.tensor.creation import tensor
    return tensor(builtins.bool(value))


def getitem(x: Tensor, index: Any) -> Tensor | MaskedSelection:
    index = as_index_tuple(index)
    masked = _mask_index("__getitem__", x.shape, index)
    if masked is not None:
        if _augmented_subscript(_caller_frame()):      # the user's ``x[mask] op= v``
            return MaskedSelection(x, index, masked)
        return _masked_read(_basic(x, masked.basic), masked)
    return _read(x, expand_masks("__getitem__", x.shape, index))


def narrowed(x: Tensor, dim: int, start: int, length: int) -> Tensor:
    """``x[..., start:start + length, ...]`` along ``dim`` (checked by the caller): the
    view ``getitem`` makes of that slice, its index built directly (``narrow``,
    ``split`` and ``chunk`` run this per piece: a qkv split is 3 per attention layer)."""
    shape = x.shape
    starts = (0,) * dim + (start,) + (0,) * (len(shape) - dim - 1)
    limits = shape[:dim] + (start + length,) + shape[dim + 1:]
    p = ParsedIndex(starts, limits, (1,) * len(shape),
                    shape[:dim] + (length,) + shape[dim + 1:], ())
    return make_view(x, lambda b: _basic(b, p), lambda b, v: _basic_put(b, p, v),
                     "__getitem__")


def _read(x: Tensor, index: Any) -> Tensor:
    """``x[index]`` for an index without boolean masks."""
    p = parse_index("__getitem__", x.shape, index)
    if p.advanced:
        return _advanced_get("__getitem__", _basic(x, p), p.advanced)
    return make_view(x, lambda b: _basic(b, p), lambda b, v: _basic_put(b, p, v), "__getitem__")


def _caller_frame() -> Any:
    """The frame that subscripted the tensor (``getitem`` is called by
    ``Tensor.__getitem__``), or None when there is none (a call from C with no Python
    frame below)."""
    try:
        return sys._getframe(3)
    except ValueError:
        return None


_COPY = dis.opmap.get("COPY")
_BINARY_SUBSCR = dis.opmap.get("BINARY_SUBSCR")


def _augmented_subscript(frame: Any) -> bool:
    """Whether ``frame`` is executing the read half of an augmented subscript assignment
    (``x[i] += v``, which CPython 3.11-3.13 compile as ``COPY 2; COPY 2; BINARY_SUBSCR``
    before the operation and the ``STORE_SUBSCR``). It only decides whether ``x[mask]``
    may leave its host read to the write-back: a wrong "no" costs a sync, never a wrong
    value (a "yes" elsewhere is impossible: nothing else compiles to that sequence)."""
    if frame is None or _COPY is None or _BINARY_SUBSCR is None:
        return False
    code, at = frame.f_code.co_code, frame.f_lasti
    return (at >= 4 and code[at] == _BINARY_SUBSCR and code[at - 4] == _COPY
            and code[at - 3] == 2 and code[at - 2] == _COPY and code[at - 1] == 2)


def _mask_entry(entry: Any) -> Tensor | np.ndarray | None:
    """``entry`` when it is a boolean mask (a bool tensor, or a numpy array or list of
    bools with at least one dim), as a tensor or an array; None otherwise. Nothing is
    read here."""
    if isinstance(entry, Tensor):
        return entry if entry.dtype == dt.bool_ else None
    if isinstance(entry, (list, np.ndarray)):
        arr = np.asarray(entry)
        if arr.dtype == np.bool_ and arr.ndim > 0:
            return arr
    return None


def _mask_values(mask: Tensor | np.ndarray) -> np.ndarray:
    """A mask's values on the host (the sync of a masked read)."""
    return mask._host_values() if isinstance(mask, Tensor) else mask


def expand_masks(op: str, shape: tuple[int, ...], index: Any) -> Any:
    """``index`` with every boolean mask replaced by the integer index arrays of its true
    elements, read on the host: numpy's and PyTorch's rule, a k-dim mask covering k
    dims is the k arrays of ``nonzero``, which then broadcast with any other index
    arrays. Each mask's shape must equal the dims it covers. ``index`` itself when it
    holds no mask."""
    entries = list(index) if isinstance(index, tuple) else [index]
    masks = [_mask_entry(e) for e in entries]
    if all(m is None for m in masks):
        return index
    consumed = builtins.sum(m.ndim if m is not None else int(e is not None and e is not Ellipsis)
                            for e, m in zip(entries, masks))
    if consumed > len(shape):
        raise IndexError(f"{op}: too many indices for tensor of shape {shape}: {consumed} "
                         f"dims indexed (a boolean mask indexes as many dims as it has)")
    out: list[Any] = []
    d = 0
    for e, m in zip(entries, masks):
        if m is None:
            out.append(e)
            d += len(shape) - consumed if e is Ellipsis else int(e is not None)
            continue
        covered = shape[d:d + m.ndim]
        if m.ndim == 0:
            raise IndexError(f"{op}: a 0-d boolean index works among ints and slices only, "
                             f"not with other tensor indices (tensor of shape {shape})")
        if tuple(m.shape) != covered:
            raise IndexError(f"{op}: the shape of the mask {tuple(m.shape)} does not match "
                             f"the indexed dims {covered} of tensor {shape} (from dim {d})")
        out.extend(np.nonzero(_mask_values(m)))
        d += m.ndim
    return tuple(out)


def _masked_read(window: Tensor, m: _MaskIndex) -> Tensor:
    """``x[index]`` for one mask among basic entries, from ``x``'s basic window: the
    mask's dims (from ``m.at``) replaced by one of the selected count, read on the host.
    A 0-d mask adds a dim of size 1 (true) or 0 (false), as in numpy."""
    values = _mask_values(m.mask)
    if m.mask.ndim == 0:
        from nova.tensor.movement import unsqueeze
        y = unsqueeze(window, m.at)
        return y if values else _read(y, (slice(None),) * m.at + (slice(0, 0),))
    return _read(window, (slice(None),) * m.at + tuple(np.nonzero(values)))


def _bool_mask(entry: Any) -> Tensor | None:
    """``entry`` as a bool tensor when it is a boolean mask (a bool tensor, or a numpy
    array or list of bools), else None."""
    if isinstance(entry, Tensor):
        return entry if entry.dtype == dt.bool_ else None
    if isinstance(entry, (list, np.ndarray)):
        arr = np.asarray(entry)
        if arr.dtype == np.bool_ and arr.ndim > 0:
            from nova.tensor.creation import from_numpy
            return from_numpy(arr)
    return None


def _is_basic(entry: Any) -> bool:
    """An int, slice, None or Ellipsis (a bool is not: ``parse_index`` refuses it)."""
    return entry is None or entry is Ellipsis or isinstance(entry, slice) or (
        isinstance(entry, (builtins.int, np.integer)) and
        not isinstance(entry, (builtins.bool, np.bool_)))


@dataclass(frozen=True)
class _MaskIndex:
    """An index of basic entries and one boolean mask. ``basic`` reads the window that
    holds every candidate element (the mask's dims whole), in which the mask's dims
    start at ``at``. PyTorch's result has the window's shape with the mask's dims
    replaced by one of the selected count, which depends on the mask's data; a value
    that is the same along that dim (``size1``: the count as 1) fits any count."""

    basic: ParsedIndex
    mask: Tensor
    at: int

    @property
    def size1(self) -> tuple[int, ...]:
        w = self.basic.out_shape
        return w[:self.at] + (1,) + w[self.at + self.mask.ndim:]

    def where(self, selected: Tensor, window: Tensor) -> Tensor:
        """``selected`` at the mask's True elements, ``window`` elsewhere."""
        rest = self.basic.out_shape[self.at + self.mask.ndim:]
        shaped = self.mask.reshape((1,) * self.at + self.mask.shape + (1,) * len(rest))
        return ops.where(shaped, selected, window)

    def fits(self, value: Any, drop_leading_ones: bool = False) -> bool:
        """Whether ``value`` is the same for every selected element (broadcastable to
        ``size1``), so that writing it needs no count; a Python number always is."""
        if isinstance(value, MaskedSelection):
            return False
        shape = tuple(value.shape) if isinstance(value, (Tensor, np.ndarray)) else \
            np.shape(value)
        if drop_leading_ones and len(shape) > len(self.size1):
            shape = _without_leading_ones(shape)
        if len(shape) > len(self.size1):
            return False
        try:
            return broadcast_shapes("fits", shape, self.size1) == self.size1
        except ValueError:
            return False

    def spread(self, op: str, value: Tensor, drop_leading_ones: bool = False) -> Tensor:
        """``value`` (a tensor of the same value for every selected element: broadcastable
        to ``size1``) with the selected dim turned into the mask's dims, so that it
        broadcasts against the window. A 0-d value is returned as it is (it keeps its
        place in type promotion)."""
        if value.ndim == 0:
            return value
        kept = _without_leading_ones(value.shape) \
            if drop_leading_ones and value.ndim > len(self.size1) else value.shape
        if len(kept) > len(self.size1) or \
                broadcast_shapes(op, kept, self.size1) != self.size1:
            fits = self.size1[1:] if self.at == 0 else self.size1
            raise IndexError(
                f"{op}: x[mask] with a value of shape {value.shape} needs one value per "
                f"selected element, a count that depends on the mask's data "
                f"({self.mask.shape} into the window {self.basic.out_shape}), which Nova's "
                f"static shapes cannot express; use a value broadcastable to {fits} (the "
                "same for every selected element), or nv.where")
        full = (1,) * (len(self.size1) - len(kept)) + kept
        return value.reshape(full[:self.at] + (1,) * self.mask.ndim + full[self.at + 1:])


def _mask_index(op: str, shape: tuple[int, ...], index: Any) -> _MaskIndex | None:
    """``index`` as a ``_MaskIndex`` when it is one boolean mask among basic entries
    (``x[m]``, ``x[1:3, m]``, ``x[..., m, 0]``), else None (a mask among integer
    indices stays refused by ``parse_index``). Checks the mask's shape against the
    dims it covers."""
    entries = list(index) if isinstance(index, tuple) else [index]
    masks = [k for k, e in enumerate(entries) if _bool_mask(e) is not None]
    if len(masks) != 1 or not all(_is_basic(e) for k, e in enumerate(entries)
                                  if k != masks[0]):
        return None
    k = masks[0]
    mask = _bool_mask(entries[k])
    whole = entries[:k] + [slice(None)] * mask.ndim + entries[k + 1:]
    basic = parse_index(op, shape, tuple(whole))
    consumed = builtins.sum(e is not None and e is not Ellipsis for e in whole)
    in_dim = at = 0
    for e in entries[:k]:
        span = len(shape) - consumed if e is Ellipsis else 1
        in_dim += 0 if e is None else span
        at += 0 if isinstance(e, (builtins.int, np.integer)) else span
    covered = shape[in_dim:in_dim + mask.ndim]
    if mask.shape != covered:
        raise IndexError(f"{op}: the shape of the mask {mask.shape} does not match the "
                         f"indexed dims {covered} of tensor {shape} (from dim {in_dim})")
    return _MaskIndex(basic, mask, at)


def _masked_put(op: str, x: Tensor, m: _MaskIndex, value: Any, accumulate: bool = False,
                drop_leading_ones: bool = False) -> Tensor:
    """``x`` with ``value`` written at (``accumulate``: added to) the elements the mask
    selects: ``where(mask, value, window)`` in the window, of static shape whatever the
    mask holds, since ``value`` is the same for every selected element."""
    if not isinstance(value, Tensor):
        from nova.tensor.creation import tensor
        value = tensor(value, dtype=x.dtype)
    v = ops.cast(m.spread(op, value, drop_leading_ones), x.dtype)
    window = _basic(x, m.basic)
    return _basic_put(x, m.basic, m.where(ops.add(window, v) if accumulate else v, window))


class MaskedSelection:
    """What the read half of ``x[mask] += v`` gives (one boolean mask among ints and
    slices; ``getitem`` recognises the augmented assignment, and any other ``x[mask]``
    is an ordinary tensor read on the host): a stand-in for the selected elements, so
    that ``x[mask] += v`` (and ``-= *= /= //= %= **= &= |= ^=``), which Python runs as
    ``s = x[mask]; s += v; x[mask] = s``, needs no host read when ``v`` is the same for
    every selected element (broadcastable to the selection with its data-dependent dim
    as 1). The update is applied to a snapshot of the whole window (elements the mask
    leaves out hold 1 there, so that no NaN from them reaches a gradient), and assigning
    ``s`` back through the same index writes ``where(mask, s, window)``. A ``v`` with
    one value per selected element makes the selection a tensor (``materialized``: the
    mask is read on the host) and the update an ordinary one."""

    __slots__ = ("_entries", "_shape", "_index", "_values")

    def __init__(self, x: Tensor, index: Any, m: _MaskIndex):
        self._entries = list(index) if isinstance(index, tuple) else [index]
        self._shape, self._index = x.shape, m
        window = _basic(x, m.basic)
        self._values = m.where(window, full_const(1, (), x.dtype))

    def _error(self) -> IndexError:
        return mask_read_error("__getitem__", self._index.mask.shape, self._shape)

    def materialized(self) -> Tensor:
        """The selected elements as a tensor (reads the mask on the host)."""
        return _masked_read(self._values, self._index)

    def _update(self, method: str, value: Any) -> MaskedSelection | Tensor:
        if isinstance(value, MaskedSelection):
            value = value.materialized()
        if not self._index.fits(value):
            return getattr(self.materialized(), method)(value)
        if isinstance(value, Tensor):
            value = self._index.spread(method, value)
        self._values = getattr(self._values, method)(value)
        return self

    def written_into(self, x: Tensor, index: Any) -> Tensor | None:
        """``x`` with this selection written back through ``index`` when that is the
        index it was read with, into a tensor of the shape it was read from; else None
        (the caller writes ``materialized()`` as an ordinary value)."""
        entries = list(index) if isinstance(index, tuple) else [index]
        same = x.shape == self._shape and len(entries) == len(self._entries) and all(
            a is b or (_is_basic(a) and _is_basic(b) and a == b)
            for a, b in zip(entries, self._entries))
        if not same:
            return None
        m = self._index
        return _basic_put(x, m.basic, m.where(ops.cast(self._values, x.dtype),
                                              _basic(x, m.basic)))

    def __repr__(self) -> str:
        return (f"<nova x[mask] of a tensor of shape {self._shape}: the read half of "
                "x[mask] op= v>")

    def __getattr__(self, name: str) -> Any:
        raise self._error()


def _in_place(method: str):
    def update(self: MaskedSelection, value: Any) -> MaskedSelection:
        return self._update(method, value)
    update.__name__ = update.__qualname__ = method
    return update


def _refused(name: str):
    def refuse(self: MaskedSelection, *args: Any, **kwargs: Any) -> Any:
        raise self._error()
    refuse.__name__ = refuse.__qualname__ = name
    return refuse


for _name in ("__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__",
              "__imod__", "__ipow__", "__iand__", "__ior__", "__ixor__"):
    setattr(MaskedSelection, _name, _in_place(_name))
for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and",
              "or", "xor", "lshift", "rshift"):
    setattr(MaskedSelection, f"__{_name}__", _refused(f"__{_name}__"))
    setattr(MaskedSelection, f"__r{_name}__", _refused(f"__r{_name}__"))
for _name in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__neg__",
              "__pos__", "__abs__", "__invert__", "__bool__", "__len__", "__iter__",
              "__contains__", "__getitem__", "__setitem__", "__array__", "__float__",
              "__int__", "__index__", "__complex__", "__str__", "__format__"):
    setattr(MaskedSelection, _name, _refused(_name))
MaskedSelection.__hash__ = None        # (it defines __eq__)


def _host_put(x: Tensor, p: ParsedIndex, value: Any) -> Tensor | None:
    """``x`` with a basic window set to a Python number, written into a copy of its
    host buffer when ``x`` is realized on the host with no gradient to record
    (``_host_buffer``): ``losses[k] = loss.item()`` then compiles nothing, where the
    recorded put is a different step for every ``k`` (the window is an attribute of the
    step). None (the recorded path) otherwise, and for a float written into an integer
    or bool tensor or an integer out of the tensor's range, whose conversion the
    recorded path owns."""
    if p.advanced or not isinstance(value, _NUMBERS):
        return None
    buffer = _host_buffer(x)
    if buffer is None or buffer.dtype.kind not in "fiub":
        return None
    if buffer.dtype.kind in "iu" and not (
            isinstance(value, (builtins.int, np.integer)) and
            np.iinfo(buffer.dtype).min <= value <= np.iinfo(buffer.dtype).max):
        return None
    if buffer.dtype.kind == "b" and isinstance(value, (builtins.float, np.floating)):
        return None
    arr = buffer.copy()
    arr[tuple(slice(a, b, s) for a, b, s in zip(p.starts, p.limits, p.steps))] = value
    return Tensor._wrap(buffer_node(arr, x.dtype, x.node.device))


def setitem(x: Tensor, index: Any, value: Any) -> None:
    index = as_index_tuple(index)
    if isinstance(value, MaskedSelection):           # the write half of x[mask] += v
        written = value.written_into(x, index)
        if written is not None:
            x._assign(written, "__setitem__")
            return
        value = value.materialized()
    masked = _mask_index("__setitem__", x.shape, index)
    if masked is not None and masked.fits(value, drop_leading_ones=True):
        x._assign(_masked_put("__setitem__", x, masked, value, drop_leading_ones=True),
                  "__setitem__")
        return
    index = expand_masks("__setitem__", x.shape, index)
    p = parse_index("__setitem__", x.shape, index)
    on_host = _host_put(x, p, value)
    if on_host is not None:
        x._assign(on_host, "__setitem__")
        return
    if p.advanced:
        new_window = _advanced_put("__setitem__", _basic(x, p), p.advanced, value,
                                   drop_leading_ones=True)
    else:
        new_window = _value_as("__setitem__", value, p.out_shape, x.dtype,
                               drop_leading_ones=True)
    row = _int_row(x, index, p)
    if row is not None:
        x._assign(_row_put(x, *row, new_window), "__setitem__")
        return
    x._assign(_basic_put(x, p, new_window), "__setitem__")


def _int_row(x: Tensor, index: Any, p: ParsedIndex) -> tuple[int, int] | None:
    """``(dim, position)`` when ``index`` writes one position of one dim, picked by a
    Python int (a loop variable: ``obs[step] = x``), every other dim whole; None
    otherwise, and inside ``nv.compile``, whose replays keep the recorded window."""
    entries = index if isinstance(index, tuple) else (index,)
    if p.advanced or _capture_log.ACTIVE.get() is not None or not any(
            isinstance(e, (builtins.int, np.integer)) and not isinstance(e, (bool, np.bool_))
            for e in entries):
        return None
    partial = [d for d, (a, b, s, n) in enumerate(zip(p.starts, p.limits, p.steps, x.shape))
               if (a, b, s) != (0, n, 1)]
    if len(partial) != 1 or p.window[partial[0]] != 1:
        return None
    return partial[0], p.starts[partial[0]]


def _row_put(x: Tensor, dim: int, position: int, value: Tensor) -> Tensor:
    """``x`` with position ``position`` of ``dim`` replaced by ``value`` (the window's
    values), the position read at run time from a 0-d host buffer: a loop writing
    ``obs[step] = x`` for each ``step`` is one step function, not one per position (the
    window's offset would be an attribute of the step). The kernel is the static put's:
    one pass over ``x`` selecting the new row where the index is."""
    window = x.shape[:dim] + (1,) + x.shape[dim + 1:]
    if value.shape != window:
        value = prim("reshape", [value], {}, window, value.dtype)
    # device None: a small host value any device's step reads (uploaded by a CUDA step)
    at = Tensor._wrap(buffer_node(np.asarray(position, np.int64), dt.int64, None))
    rows = prim("iota", [], {"dim": dim}, x.shape, dt.int64)
    here = ops.eq(rows, broadcast_to(at, x.shape, "__setitem__"))
    return ops.where(here, broadcast_to(value, x.shape, "__setitem__"), x)


def _index_put_index(op: str, x: Tensor, indices: Any, values: Any) -> tuple:
    """Check ``index_put``'s arguments as PyTorch does: a tuple of index tensors (None
    keeps a dim whole) and a tensor of ``x``'s dtype; the index they make."""
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"{op}: indices must be a tuple of tensors, got "
                        f"{type(indices).__name__}")
    for i in indices:
        if i is not None and not isinstance(i, Tensor):
            raise TypeError(f"{op}: indices must be tensors (or None), got "
                            f"{type(i).__name__}")
    if not isinstance(values, Tensor):
        raise TypeError(f"{op}: values must be a Tensor, got {type(values).__name__}")
    if values.dtype != x.dtype:
        raise DTypeError(f"{op}: values of dtype {values.dtype.name} must match the "
                         f"destination's dtype {x.dtype.name}")
    return tuple(slice(None) if i is None else i for i in indices)


def _index_put_value(op: str, x: Tensor, indices: Any, values: Tensor,
                     accumulate: bool) -> Tensor:
    index = _index_put_index(op, x, indices, values)
    masked = _mask_index(op, x.shape, index)
    if masked is not None and masked.fits(values):
        return _masked_put(op, x, masked, values, accumulate)
    p = parse_index(op, x.shape, expand_masks(op, x.shape, index))
    if p.advanced:
        return _advanced_put(op, x, p.advanced, values, accumulate)
    whole = broadcast_to(values, x.shape, op)   # no index tensor: every element
    return ops.add(x, whole) if accumulate else whole


def index_put(input: Tensor, indices: Any, values: Tensor, accumulate: bool = False) -> Tensor:
    """``input`` with ``x[indices] = values`` (``accumulate``: ``+= values``, every value of
    a repeated index counting), as ``torch.index_put``."""
    return _index_put_value("index_put", input, indices, values, accumulate)


def index_put_(x: Tensor, indices: Any, values: Tensor, accumulate: bool = False) -> Tensor:
    """In-place ``index_put``: rebinds ``x`` and returns it."""
    return x._assign(_index_put_value("index_put_", x, indices, values, accumulate),
                     "index_put_")
