"""Movement ops: reshape, permute, squeeze/unsqueeze, expand, cat/stack/split/chunk.

Ops that are views in PyTorch return view tensors here (see ``Tensor._assign``): they
record a primitive like any op, and also remember how to write an in-place update back
into their base.
"""
from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any

from nova.core import dtypes as dt
from nova.core.errors import ArgumentError, ShapeError
from nova.core.memory_format import check_layout_rank, check_memory_format
from nova.tensor.ops import broadcast_to, cast, prim, unshared
from nova.core.shapes import infer_reshape, normalize_dim, shape_arg
from nova.tensor.tensor import Tensor, _View


def make_view(base: Tensor, derive: Callable[[Tensor], Tensor],
              write_back: Callable[[Tensor, Tensor], Tensor] | None, op: str) -> Tensor:
    """``derive(base)`` as a view of ``base``: in-place updates of either side are seen
    by the other."""
    value = derive(base)
    if value is base:  # an identity view is still a distinct (differentiable) handle
        value = base.clone()
    view = _View(base, derive, write_back, op, rederives=op in _REDERIVING)
    if value._view is None and value._version == 0 and not value._requires_grad:
        value._view = view   # a fresh result nobody else holds becomes the view itself
        return value
    return Tensor._wrap(value.node, view, value._grad_fn)


# The view ops whose elements may alias each other (``unfold``'s overlapping windows;
# see ``_View.rederives``).
_REDERIVING = frozenset({"unfold"})


def _reshape_prim(x: Tensor, shape: tuple[int, ...]) -> Tensor:
    return x if x.shape == shape else prim("reshape", [x], {}, shape, x.dtype)


def sizes_given(op: str, args: tuple, name: str, value: Any) -> tuple:
    """A shape or dims argument that PyTorch takes as separate ints or one sequence
    (``x.permute(1, 0)``, ``x.permute((1, 0))``) or by its keyword (``x.permute(dims=(1,
    0))``): the positional form, or the keyword's value as one (not both at once)."""
    if value is None:
        return args
    if args:
        raise TypeError(f"{op}() got multiple values for argument '{name}'")
    return (value,)


def reshape(input: Tensor, *args: Any, shape: Any = None) -> Tensor:
    """Row-major reshape to ``shape`` (ints, one sequence, or ``shape=``). Always a view
    here (PyTorch copies when the input is not contiguous; Nova has no strides, so
    writes through a reshape always reach the base)."""
    shape = sizes_given("reshape", args, "shape", shape)
    target = infer_reshape("reshape", input.shape, shape_arg_any(shape, "reshape"))
    return make_view(input, lambda b: _reshape_prim(b, target),
                     lambda b, v: _reshape_prim(v, b.shape), "reshape")


def shape_arg_any(shape: tuple, op: str) -> tuple[int, ...]:
    """Like shape_arg but allowing -1."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    out = []
    for s in shape:
        if isinstance(s, bool) or not hasattr(s, "__index__"):
            raise TypeError(f"{op}: sizes must be ints, got {shape!r}")
        out.append(s.__index__())
    return tuple(out)


def view(x: Tensor, *shape: Any, size: Any = None, dtype: Any = None) -> Tensor:
    """``view(*shape)`` (or ``size=``) as ``reshape``; ``view(dtype)`` (or ``dtype=``)
    reads the stored bits as ``dtype`` (``nova.tensor.bitcast``)."""
    if dtype is not None:
        if shape or size is not None:
            raise TypeError("view() takes either a shape or dtype=, not both")
        shape = (dtype,)
    shape = sizes_given("view", shape, "size", size)
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list)) and not hasattr(
            shape[0], "__index__"):
        if dt.get_complex_dtype(shape[0]) is not None:
            raise TypeError(f"view: reinterpreting {x.dtype.name} as {shape[0]} is not "
                            "supported; use nv.view_as_complex")
        from nova.tensor.bitcast import view_dtype
        return view_dtype(x, dt.get_dtype(shape[0]))
    return reshape(x, *shape)


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if input.ndim == 0:
        return reshape(input, 1)
    s = normalize_dim("flatten", start_dim, input.ndim, input.shape)
    e = normalize_dim("flatten", end_dim, input.ndim, input.shape)
    if s > e:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} for "
                         f"shape {input.shape}")
    merged = 1
    for n in input.shape[s:e + 1]:
        merged *= n
    return reshape(input, input.shape[:s] + (merged,) + input.shape[e + 1:])


def unflatten(input: Tensor, dim: int, sizes: Sequence[int]) -> Tensor:
    d = normalize_dim("unflatten", dim, input.ndim, input.shape)
    sizes = infer_reshape("unflatten", (input.shape[d],), tuple(sizes))
    return reshape(input, input.shape[:d] + sizes + input.shape[d + 1:])


def permute(input: Tensor, *args: Any, dims: Any = None) -> Tensor:
    """``input`` with its dims in the order ``dims`` (ints, one sequence, or ``dims=``)."""
    dims = shape_arg_any(sizes_given("permute", args, "dims", dims), "permute")
    ndim, shape = input.ndim, input.shape
    perm = tuple([normalize_dim("permute", d, ndim, shape) for d in dims])
    identity = tuple(range(ndim))
    if tuple(sorted(perm)) != identity:
        raise ShapeError(f"permute: dims {dims} are not a permutation of the {ndim} dims "
                         f"of shape {shape}")
    if perm == identity:
        return make_view(input, lambda b: b, lambda b, v: v, "permute")
    inverse = [0] * ndim
    for i, d in enumerate(perm):
        inverse[d] = i
    inverse = tuple(inverse)

    def derive(b: Tensor, p: tuple[int, ...] = perm) -> Tensor:
        bs = b.shape
        return prim("transpose", [b], {"perm": p}, tuple([bs[i] for i in p]), b.dtype)

    return make_view(input, derive, lambda b, v: derive(v, inverse), "permute")


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    if input.ndim == 0:
        return permute(input)
    a = normalize_dim("transpose", dim0, input.ndim, input.shape)
    b = normalize_dim("transpose", dim1, input.ndim, input.shape)
    perm = list(range(input.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return permute(input, *perm)


def t(input: Tensor) -> Tensor:
    if input.ndim > 2:
        raise ValueError(f"t: expects a tensor with <= 2 dims, got shape {input.shape}")
    return permute(input, *reversed(range(input.ndim)))


def swapaxes(input: Tensor, axis0: int, axis1: int) -> Tensor:
    """``transpose`` under NumPy's name and parameter names (``torch.swapaxes``)."""
    return transpose(input, axis0, axis1)


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    d = normalize_dim("unsqueeze", dim, input.ndim + 1)
    return reshape(input, input.shape[:d] + (1,) + input.shape[d:])


def squeeze(input: Tensor, dim: Any = None) -> Tensor:
    if dim is None:
        return reshape(input, tuple(n for n in input.shape if n != 1))
    dims = [dim] if isinstance(dim, int) else list(dim)
    ds = {normalize_dim("squeeze", d, input.ndim, input.shape) for d in dims}
    return reshape(input, tuple(n for i, n in enumerate(input.shape) if not (i in ds and n == 1)))


def expand(x: Tensor, *sizes: Any, size: Any = None) -> Tensor:
    """Broadcast to ``sizes`` (ints, one sequence, or ``size=``; -1 keeps a dim). The
    result's elements alias each other, so it cannot be written in place (as in
    PyTorch)."""
    sizes = shape_arg_any(sizes_given("expand", sizes, "size", size), "expand")
    if len(sizes) < x.ndim:
        raise ShapeError(f"expand: the number of sizes {len(sizes)} must be >= the number of "
                         f"dims of shape {x.shape}")
    off = len(sizes) - x.ndim
    target = tuple(x.shape[i - off] if s == -1 and i >= off else s for i, s in enumerate(sizes))
    if any(s < 0 for s in target):
        raise ShapeError(f"expand: invalid sizes {sizes} for shape {x.shape}")
    for i, n in enumerate(x.shape):
        if n != 1 and n != target[i + off]:
            raise ShapeError(f"expand: the size of dim {i} ({n}) must match the target size "
                             f"{target[i + off]} or be 1 (shape {x.shape} to {target})")
    return make_view(x, lambda b: broadcast_to(b, target, "expand"), None, "expand")


def expand_as(x: Tensor, other: Tensor) -> Tensor:
    return expand(x, other.shape)


def broadcast_tensors(*tensors: Tensor) -> list[Tensor]:
    from nova.core.shapes import broadcast_shapes
    shape = broadcast_shapes("broadcast_tensors", *[t.shape for t in tensors])
    return [expand(t, shape) for t in tensors]


def contiguous(x: Tensor, memory_format: Any = None) -> Tensor:
    """``x`` itself when it is not a view, as PyTorch returns a contiguous tensor (so an
    in-place op on the result reaches ``x``); a copy of a view (layout is the compiler's
    business in Nova: a view is copied even where PyTorch's strides would let it alias,
    a row slice ``x[1:]``). ``memory_format`` is checked (a channels-last one needs a
    4-D or 5-D tensor, as PyTorch says) and has no effect: Nova values have no strides."""
    check_layout_rank("contiguous", check_memory_format("contiguous", memory_format), x.ndim)
    return x if x._view is None else x.clone()


def _check_seq(op: str, tensors: Sequence[Tensor]) -> list[Tensor]:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}: expected a list or tuple of tensors, got {type(tensors).__name__}")
    if not tensors:
        raise ValueError(f"{op}: expected a non-empty list of tensors")
    for t_ in tensors:
        if not isinstance(t_, Tensor):
            raise TypeError(f"{op}: expected tensors, got {type(t_).__name__}")
    return list(tensors)


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Concatenation along ``dim`` (``torch.cat``). As PyTorch's, a 1-D empty tensor
    (shape (0,)) is left out when the others have more dims -- the accumulator idiom
    ``out = nv.cat([out, batch])`` from ``out = nv.tensor([])`` -- though its dtype
    still takes part in the result's."""
    ts = _check_seq("cat", tensors)
    out_dtype = dt.result_type([(t_.dtype, 1) for t_ in ts], [])
    kept = [t_ for t_ in ts if t_.shape != (0,)]
    if kept and builtins.any(t_.ndim != 1 for t_ in kept):
        ts = kept
    ref = ts[0]
    d = normalize_dim("cat", dim, ref.ndim, ref.shape)
    if ref.ndim == 0:
        raise ShapeError("cat: zero-dimensional tensors cannot be concatenated")
    for k, t_ in enumerate(ts):
        if t_.ndim != ref.ndim or any(a != b for i, (a, b) in enumerate(zip(t_.shape, ref.shape))
                                      if i != d):
            shapes = ", ".join(str(x.shape) for x in ts)
            raise ShapeError(f"cat: tensor {k} has shape {t_.shape}, which does not match "
                             f"{ref.shape} outside dim {d} (shapes: {shapes})")
    ts = [cast(t_, out_dtype) for t_ in ts]
    if len(ts) == 1:        # a new tensor, as PyTorch's: never the input or a view of it
        return ts[0].clone()  # (an in-place write to cat([x]) or stack([x]) changed x)
    shape = list(ref.shape)
    shape[d] = builtins.sum(t_.shape[d] for t_ in ts)
    return prim("concat", ts, {"dim": d}, tuple(shape), out_dtype)


concatenate = cat


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    ts = _check_seq("stack", tensors)
    for k, t_ in enumerate(ts):
        if t_.shape != ts[0].shape:
            raise ShapeError(f"stack: expects each tensor to be equal size, but got "
                             f"{ts[0].shape} at entry 0 and {t_.shape} at entry {k}")
    d = normalize_dim("stack", dim, ts[0].ndim + 1)
    return cat([unsqueeze(t_, d) for t_ in ts], d)


def narrow(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    d = normalize_dim("narrow", dim, input.ndim, input.shape)
    if start < 0:
        start += input.shape[d]
    if not (0 <= start and length >= 0 and start + length <= input.shape[d]):
        raise IndexError(f"narrow: start {start} + length {length} exceeds dim {d} of shape "
                         f"{input.shape}")
    from nova.tensor.indexing import narrowed
    return narrowed(input, d, start, length)


_MISSING = object()


def split(tensor: Tensor, split_size_or_sections: Any = _MISSING, dim: int = 0, *,
          split_size: Any = _MISSING) -> tuple[Tensor, ...]:
    """``tensor`` cut along ``dim`` into pieces of ``split_size_or_sections`` (an int
    size, or a list of sizes). ``torch.split`` names it ``split_size_or_sections``, the
    method ``Tensor.split`` names it ``split_size``: either keyword is taken."""
    if split_size is not _MISSING:
        if split_size_or_sections is not _MISSING:
            raise TypeError("split() got multiple values for argument 'split_size'")
        split_size_or_sections = split_size
    elif split_size_or_sections is _MISSING:
        raise TypeError("split() missing 1 required positional argument: "
                        "'split_size_or_sections'")
    d = normalize_dim("split", dim, tensor.ndim, tensor.shape)
    n = tensor.shape[d]
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        if size <= 0:
            raise ArgumentError(f"split: split_size must be positive, got {size}")
        sizes = [builtins.min(size, n - s) for s in range(0, n, size)] or [0]
    else:
        sizes = list(split_size_or_sections)
        if builtins.sum(sizes) != n or any(s < 0 for s in sizes):
            raise ArgumentError(f"split: sections {sizes} must be non-negative and sum to "
                                f"{n}, the size of dim {d} of shape {tensor.shape}")
    out, start = [], 0
    for s in sizes:
        out.append(narrow(tensor, d, start, s))
        start += s
    return tuple(out)


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    d = normalize_dim("chunk", dim, input.ndim, input.shape)
    if input.shape[d] == 0:             # ``chunks`` empty pieces, as PyTorch
        return split(input, [0] * chunks, d)
    return split(input, -(-input.shape[d] // chunks), d)


def unbind(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    d = normalize_dim("unbind", dim, input.ndim, input.shape)
    return tuple(input[(slice(None),) * d + (i,)] for i in range(input.shape[d]))


def repeat(x: Tensor, *sizes: Any, repeats: Any = None) -> Tensor:
    """``x`` tiled ``sizes`` times along each dim (ints, one sequence, or ``repeats=``)."""
    sizes = shape_arg(sizes_given("repeat", sizes, "repeats", repeats), "repeat")
    if len(sizes) < x.ndim:
        raise ValueError(f"repeat: number of repeat dims {len(sizes)} must be >= the number "
                         f"of dims of shape {x.shape}")
    x = reshape(x, (1,) * (len(sizes) - x.ndim) + x.shape)
    inter = []
    for r, n in zip(sizes, x.shape):
        inter += [r, n]
    spread = broadcast_to(reshape(x, tuple(v for n in x.shape for v in (1, n))), tuple(inter),
                          "repeat")
    return unshared(_reshape_prim(spread, tuple(r * n for r, n in zip(sizes, x.shape))), x)


TENSOR_METHODS = (
    "reshape", "view", "flatten", "unflatten", "permute", "transpose", "t", "swapaxes",
    "unsqueeze", "squeeze", "expand", "expand_as", "contiguous", "narrow", "split", "chunk",
    "unbind", "repeat",
)


# ---------------------------------------------------------------- in-place shape ops
# (``Tensor._restride``: the handle changes shape, the elements stay where they are)

def _permute_prim(x: Tensor, perm: tuple[int, ...]) -> Tensor:
    return prim("transpose", [x], {"perm": perm}, tuple([x.shape[i] for i in perm]), x.dtype)


def _restride_reshape(x: Tensor, shape: tuple[int, ...], op: str) -> Tensor:
    before = x.shape
    return x._restride(lambda b: _reshape_prim(b, shape), lambda v: _reshape_prim(v, before),
                       op)


def _restride_swap(x: Tensor, dim0: int, dim1: int, op: str) -> Tensor:
    perm = list(range(x.ndim))
    a = normalize_dim(op, dim0, x.ndim, x.shape)
    b = normalize_dim(op, dim1, x.ndim, x.shape)
    perm[a], perm[b] = perm[b], perm[a]
    perm = tuple(perm)       # (a swap is its own inverse)
    return x._restride(lambda t_: _permute_prim(t_, perm), lambda v: _permute_prim(v, perm),
                       op)


def squeeze_(x: Tensor, dim: Any = None) -> Tensor:
    """In-place ``squeeze``: ``x`` itself loses its size-1 dims (those of ``dim``, an
    int or a tuple, if given), as ``torch.Tensor.squeeze_``."""
    if dim is None:
        shape = tuple(n for n in x.shape if n != 1)
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
        ds = {normalize_dim("squeeze_", d, x.ndim, x.shape) for d in dims}
        shape = tuple(n for i, n in enumerate(x.shape) if not (i in ds and n == 1))
    return _restride_reshape(x, shape, "squeeze_")


def unsqueeze_(x: Tensor, dim: int) -> Tensor:
    """In-place ``unsqueeze``: ``x`` itself gains a size-1 dim at ``dim``."""
    d = normalize_dim("unsqueeze_", dim, x.ndim + 1)
    return _restride_reshape(x, x.shape[:d] + (1,) + x.shape[d:], "unsqueeze_")


def transpose_(x: Tensor, dim0: int, dim1: int) -> Tensor:
    """In-place ``transpose``: ``x`` itself has ``dim0`` and ``dim1`` swapped."""
    if x.ndim == 0:
        return _restride_reshape(x, (), "transpose_")
    return _restride_swap(x, dim0, dim1, "transpose_")


def swapaxes_(x: Tensor, axis0: int, axis1: int) -> Tensor:
    """``transpose_`` under NumPy's name (``torch.Tensor.swapaxes_``)."""
    if x.ndim == 0:
        return _restride_reshape(x, (), "swapaxes_")
    return _restride_swap(x, axis0, axis1, "swapaxes_")


def swapdims_(x: Tensor, dim0: int, dim1: int) -> Tensor:
    """``transpose_`` under its other name (``torch.Tensor.swapdims_``)."""
    if x.ndim == 0:
        return _restride_reshape(x, (), "swapdims_")
    return _restride_swap(x, dim0, dim1, "swapdims_")


def t_(x: Tensor) -> Tensor:
    """In-place ``t``: a matrix transposed in place; 0-d and 1-d tensors unchanged."""
    if x.ndim > 2:
        raise ValueError(f"t_: expects a tensor with <= 2 dims, but self is {x.ndim}-D "
                         f"(shape {x.shape})")
    if x.ndim < 2:
        return _restride_reshape(x, x.shape, "t_")
    return _restride_swap(x, 0, 1, "t_")


def resize_(x: Tensor, *sizes: Any, memory_format: Any = None) -> Tensor:
    """``x`` itself given the shape ``sizes`` (``Tensor.resize_``): with the same number of
    elements a row-major reshape in place (views of ``x`` keep seeing its elements);
    otherwise its elements in row-major order, cut to the new count or followed by
    zeros (PyTorch leaves them uninitialized; Nova's ``empty`` is zeros too). Changing
    the count of a view or of a tensor with live views is refused: they share the
    storage PyTorch would reallocate. ``memory_format`` is checked and has no effect
    (Nova values have no strides)."""
    from nova.tensor.ops import full_const
    from nova.tensor.tensor import live_views
    shape = shape_arg(sizes, "resize_")
    check_layout_rank("resize_", check_memory_format("resize_", memory_format), len(shape))
    if any(n < 0 for n in shape):
        raise ValueError(f"resize_: sizes must be non-negative, got {shape}")
    n, m = x.numel(), 1
    for k in shape:
        m *= k
    if m == n:
        return _restride_reshape(x, shape, "resize_")
    if x._view is not None or live_views(x):
        raise RuntimeError(f"resize_: cannot change the number of elements of a view or of a "
                           f"tensor with live views (shape {x.shape} to {shape})")

    def forward(b: Tensor) -> Tensor:
        flat = _reshape_prim(b, (n,))
        if m < n:
            flat = prim("slice", [flat], {"start": (0,), "limit": (m,), "stride": (1,)},
                        (m,), b.dtype)
        else:
            flat = prim("pad", [flat, full_const(0, (), b.dtype)],
                        {"low": (0,), "high": (m - n,), "interior": (0,)}, (m,), b.dtype)
        return _reshape_prim(flat, shape)
    return x._restride(forward, lambda v: v, "resize_")


def resize_as_(x: Tensor, other: Tensor, memory_format: Any = None) -> Tensor:
    """``x.resize_(other.shape)`` (``Tensor.resize_as_``)."""
    if not isinstance(other, Tensor):
        raise TypeError(f"resize_as_: expected a Tensor, got {type(other).__name__}")
    return resize_(x, other.shape, memory_format=memory_format)


RESTRIDE_METHODS = ("squeeze_", "unsqueeze_", "transpose_", "swapaxes_", "swapdims_", "t_",
                    "resize_", "resize_as_")
