"""Tensor creation: from host data (a runtime input of the step function) and from
patterns (constants and ``iota``, recorded lazily like any op)."""
from __future__ import annotations

import builtins
import operator
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.core.errors import ArgumentError
from nova.core.memory_format import check_layout_rank, check_memory_format
from nova.tensor import movement, ops, sorting
from nova.tensor import random as rnd
from nova.tensor.device import check_device, factory_device
from nova.tensor.device import device as Device
from nova.tensor.ops import add, cast, full_const, mul, prim
from nova.core.shapes import SizeError, check_numel, shape_arg
from nova.tensor.tensor import Tensor, strided
from nova.tensor.trace import buffer_node, device_buffer_node


class NarrowIntegerWarning(UserWarning):
    """A numpy integer dtype Nova has no dtype for (uint16, uint32) was widened: the
    values are exact, the arithmetic is the wider type's. (uint8, int8 and int16 are
    Nova dtypes, kept as they are.)"""


_WARNED_WIDENED: set[np.dtype] = set()


def _numpy_ints_dtype(op: str, arr: np.ndarray, stacklevel: int = 3) -> dt.DType:
    """The Nova dtype of a numpy array, refusing uint64 values past int64 (they would
    wrap to negatives) and saying once per dtype when a narrow integer type widens."""
    target = dt.from_numpy_dtype(arr.dtype, op)
    if arr.dtype.kind == "u" and arr.dtype.itemsize == 8 and arr.size and \
            int(arr.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"{op}: uint64 values up to {int(arr.max())} do not fit int64, "
                         "Nova's widest integer type")
    if arr.dtype.kind in "iu" and arr.dtype != target.np and arr.dtype.itemsize < 8 and \
            arr.dtype not in _WARNED_WIDENED:
        _WARNED_WIDENED.add(arr.dtype)
        warnings.warn(f"{op}: numpy {arr.dtype} has no Nova dtype; its values are held "
                      f"exactly as {target.name}, and arithmetic on them follows "
                      f"{target.name} (no wrap-around at 2**{8 * arr.dtype.itemsize}); "
                      "cast first (e.g. .astype(np.float32)) to choose",
                      NarrowIntegerWarning, stacklevel=stacklevel)
    return target


def _infer_dtype(data: Any, arr: np.ndarray) -> dt.DType:
    if isinstance(data, np.ndarray) or isinstance(data, np.generic):
        return _numpy_ints_dtype("tensor", arr, stacklevel=4)
    if isinstance(data, (list, tuple)) and arr.dtype.kind in "biuf":
        inferred = _sequence_dtype(data)
        if inferred is not None:
            return inferred
    if arr.dtype.kind == "b":
        return dt.bool_
    if arr.dtype.kind in "iu":
        return dt.int64
    if arr.dtype.kind == "f" or arr.size == 0:
        return dt.DEFAULT_FLOAT
    raise TypeError(f"tensor: cannot build a tensor from {type(data).__name__} holding "
                    f"{arr.dtype}; expected numbers, bools, nested lists or numpy arrays")


def _sequence_dtype(data: list | tuple) -> dt.DType | None:
    """PyTorch's inference for a nested sequence holding numpy scalars: each element's
    own type -- a numpy scalar its dtype, a Python float the default dtype, an int
    int64, a bool bool -- promoted together (``[np.float64(1.5), 2.0]`` is float64,
    ``[np.float16(1), 2.0]`` float32). None when it holds no numpy scalar: the array's
    kind decides, as for plain Python numbers."""
    types: set[type] = set()
    stack: list[Any] = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
        else:
            types.add(type(x))
    if not any(issubclass(t, np.generic) for t in types):
        return None
    out: dt.DType | None = None
    for t in types:
        if issubclass(t, np.generic):
            d = dt.from_numpy_dtype(np.dtype(t), "tensor")
        elif issubclass(t, bool):
            d = dt.bool_
        elif issubclass(t, int):
            d = dt.int64
        else:
            d = dt.DEFAULT_FLOAT
        out = d if out is None else dt.promote_types(out, d)
    return out


def _to_numpy(data: Any) -> np.ndarray:
    if isinstance(data, Tensor):
        return data.numpy()
    if isinstance(data, (list, tuple)) and any(isinstance(d, Tensor) for d in data):
        return np.array([_to_numpy(d) for d in data])
    try:
        arr = np.asarray(data)
    except ValueError as e:
        raise ValueError(f"tensor: data is not rectangular: {e}") from None
    if arr.dtype == object:
        _check_python_ints(data)
        raise TypeError(f"tensor: cannot build a tensor from {data!r}: expected numbers, "
                        "bools, nested lists of equal lengths or numpy arrays")
    return arr


def _check_python_ints(data: Any) -> None:
    """DTypeOverflowError naming the first Python int in ``data`` too big for any Nova
    dtype (numpy then holds the data as objects); PyTorch raises ``ValueError:
    Overflow when unpacking long long``."""
    if isinstance(data, (list, tuple)):
        for d in data:
            _check_python_ints(d)
    elif isinstance(data, builtins.int) and not isinstance(data, bool):
        lo, hi = dt.int_bounds(dt.int64)
        if not lo <= data <= hi:
            raise dt.DTypeOverflowError(f"tensor: value {data} does not fit in int64 "
                                        f"(valid: [{lo}, {hi}])")


def _check_fits(arr: np.ndarray, target: dt.DType) -> None:
    """Python data (not numpy arrays, which convert as ``astype`` does, as in PyTorch)
    must fit the dtype it is stored in: ``tensor([2**40], dtype=nv.int32)`` and
    ``tensor([2**63])`` raise instead of wrapping, and so do NaN, inf and out-of-range
    floats stored as integers (PyTorch: "value cannot be converted to type int32
    without overflow"). Floats too large for a float dtype become inf, as in PyTorch."""
    if target.category != dt.INT or arr.size == 0 or arr.dtype.kind not in "iuf":
        return
    lo, hi = dt.int_bounds(target)
    if arr.dtype.kind == "f":
        whole = np.trunc(arr)
        bad = ~np.isfinite(arr) | (whole < lo) | (whole >= float(hi + 1))   # 2**k exact
    elif arr.dtype.kind == "u":
        bad = arr > np.uint64(hi)
    else:
        bad = (arr < lo) | (arr > hi)
    if bad.any():
        value = arr[bad].flat[0]
        raise dt.DTypeOverflowError(
            f"tensor: value {value.item()!r} cannot be converted to {target.name} without "
            f"overflow; {target.name} holds integers in [{lo}, {hi}]")


def _finish(t: Tensor, requires_grad: bool) -> Tensor:
    return t.requires_grad_() if requires_grad else t


def check_options(op: str, layout: Any = None, pin_memory: Any = False,
                  device: Device | None = None) -> None:
    """PyTorch's ``layout=`` and ``pin_memory=`` factory keywords. Nova has one layout
    (``nv.strided``) and nothing to pin (a host tensor reaches the GPU from wherever it
    lives: ``Tensor.pin_memory``), so they change nothing; another layout is refused,
    and so is pinning a CUDA tensor, as PyTorch refuses it."""
    if layout is not None and layout is not strided:
        raise ValueError(f"{op}: Nova tensors have one layout, nv.strided; got {layout!r}")
    if pin_memory and device is not None and device.type == "cuda":
        raise RuntimeError(f"{op}: only CPU tensors can be pinned, not one made on "
                           f"{device} (pin_memory=True)")


def _place(t: Tensor, device: Device) -> Tensor:
    """Pin a freshly recorded pattern (constant, iota, random draw: pending, with no
    device of its own) to ``device``, so it is computed by that device's step."""
    if device.type != "cpu":
        t.node.device = device.type
    return t


def tensor(data: Any, dtype: Any = None, device: Any = None,
           requires_grad: bool = False, *, pin_memory: bool = False) -> Tensor:
    """A tensor holding a copy of ``data`` (Python numbers, nested lists, numpy arrays).

    Python floats default to the default dtype (float32 unless ``set_default_dtype``)
    and ints to int64, as in PyTorch.
    """
    where = factory_device(device, "tensor")
    check_options("tensor", None, pin_memory, where)
    arr = _to_numpy(data)
    target = dt.get_dtype(dtype) if dtype is not None else (
        data.dtype if isinstance(data, Tensor) else _infer_dtype(data, arr))
    if not isinstance(data, (Tensor, np.ndarray, np.generic)):
        _check_fits(arr, target)
    with np.errstate(over="ignore"):   # float overflow gives inf, as in PyTorch
        host = np.array(arr, dtype=target.np, copy=True)
    if where.type == "cuda":
        from nova.runtime.cuda_runtime import to_device
        made = Tensor._wrap(device_buffer_node(to_device(host), target, "cuda"))
    else:
        made = Tensor._wrap(buffer_node(host, target))
    return _finish(made, requires_grad)


def from_numpy(array: np.ndarray) -> Tensor:
    """Wrap a numpy array without copying it; the tensor keeps the numpy dtype where
    Nova has it (uint8, int8 and int16 included; uint16 widens to int32, uint32 and
    uint64 to int64, with a ``NarrowIntegerWarning`` once per dtype; uint64 values past
    int64 are refused)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected np.ndarray, got {type(array).__name__}")
    target = _numpy_ints_dtype("from_numpy", array)
    if array.dtype != target.np:
        array = array.astype(target.np)
    return Tensor._wrap(buffer_node(array, target))


def _dtype(dtype: Any, default: dt.DType | None = None) -> dt.DType:
    """``dtype`` as a DType; ``default`` (the default float dtype if None) without one."""
    if dtype is not None:
        return dt.get_dtype(dtype)
    return dt.DEFAULT_FLOAT if default is None else default


def full(size: Sequence[int], fill_value: Any, *, dtype: Any = None, layout: Any = None,
         device: Any = None, pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    where = factory_device(device, "full")
    check_options("full", layout, pin_memory, where)
    shape = shape_arg((size,), "full")
    if dtype is None:
        dtype = dt.result_type([], [fill_value])
    return _finish(_place(full_const(fill_value, shape, dt.get_dtype(dtype)), where),
                   requires_grad)


def _size(op: str, sizes: tuple, size: Sequence[int] | None) -> tuple[int, ...]:
    """The shape given to a factory as ``op(2, 3)``, ``op((2, 3))`` or, as in PyTorch,
    ``op(size=(2, 3))`` (a tuple or list, not both forms at once)."""
    if size is None:
        return shape_arg(sizes, op)
    if sizes:
        raise TypeError(f"{op}: got sizes both as positional arguments {sizes!r} and as "
                        f"size={size!r}; pass one of them")
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"{op}: argument 'size' must be a tuple of ints, got "
                        f"{type(size).__name__} {size!r}")
    return shape_arg((size,), op)


def zeros(*sizes: Any, size: Sequence[int] | None = None, dtype: Any = None,
          layout: Any = None, device: Any = None, pin_memory: bool = False,
          requires_grad: bool = False) -> Tensor:
    where = factory_device(device, "zeros")
    check_options("zeros", layout, pin_memory, where)
    shape = _size("zeros", sizes, size)
    return _finish(_place(full_const(0, shape, _dtype(dtype)), where), requires_grad)


def ones(*sizes: Any, size: Sequence[int] | None = None, dtype: Any = None,
         layout: Any = None, device: Any = None, pin_memory: bool = False,
         requires_grad: bool = False) -> Tensor:
    where = factory_device(device, "ones")
    check_options("ones", layout, pin_memory, where)
    shape = _size("ones", sizes, size)
    return _finish(_place(full_const(1, shape, _dtype(dtype)), where), requires_grad)


def empty(*sizes: Any, size: Sequence[int] | None = None, dtype: Any = None,
          layout: Any = None, device: Any = None, pin_memory: bool = False,
          requires_grad: bool = False, memory_format: Any = None) -> Tensor:
    """Uninitialized memory in PyTorch; zeros here, since lazily it costs nothing more.
    ``memory_format`` is checked and has no effect (Nova values have no strides)."""
    shape = _size("empty", sizes, size)
    check_layout_rank("empty", check_memory_format("empty", memory_format), len(shape))
    return zeros(shape, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory,
                 requires_grad=requires_grad)


def _like(x: Tensor, dtype: Any, layout: Any = None, memory_format: Any = None,
          op: str = "*_like") -> tuple[tuple[int, ...], dt.DType]:
    """``x``'s shape and the result's dtype; ``layout`` and ``memory_format`` (PyTorch's
    keywords) are checked and have nothing to do (one layout, no strides)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    check_options(op, layout)
    check_layout_rank(op, check_memory_format(op, memory_format), x.ndim)
    return x.shape, (x.dtype if dtype is None else dt.get_dtype(dtype))


def _like_device(x: Tensor, device: Any) -> Any:
    """``*_like`` results live on ``x``'s device unless told otherwise (as in torch;
    named, so the default device does not apply)."""
    return device if device is not None else (x.node.device or "cpu")


def zeros_like(input: Tensor, *, dtype: Any = None, layout: Any = None, device: Any = None,
               requires_grad: bool = False, memory_format: Any = None) -> Tensor:
    shape, d = _like(input, dtype, layout, memory_format, "zeros_like")
    return zeros(shape, dtype=d, device=_like_device(input, device), requires_grad=requires_grad)


def ones_like(input: Tensor, *, dtype: Any = None, layout: Any = None, device: Any = None,
              requires_grad: bool = False, memory_format: Any = None) -> Tensor:
    shape, d = _like(input, dtype, layout, memory_format, "ones_like")
    return ones(shape, dtype=d, device=_like_device(input, device), requires_grad=requires_grad)


def empty_like(input: Tensor, *, dtype: Any = None, layout: Any = None, device: Any = None,
               requires_grad: bool = False, memory_format: Any = None) -> Tensor:
    shape, d = _like(input, dtype, layout, memory_format, "empty_like")
    return zeros(shape, dtype=d, device=_like_device(input, device), requires_grad=requires_grad)


def full_like(input: Tensor, fill_value: Any, *, dtype: Any = None, layout: Any = None,
              device: Any = None, requires_grad: bool = False,
              memory_format: Any = None) -> Tensor:
    shape, d = _like(input, dtype, layout, memory_format, "full_like")
    return full(shape, fill_value, dtype=d, device=_like_device(input, device),
                requires_grad=requires_grad)


def rand_like(input: Tensor, *, dtype: Any = None, generator: Any = None, layout: Any = None,
              device: Any = None, requires_grad: bool = False,
              memory_format: Any = None) -> Tensor:
    shape, d = _like(input, dtype, layout, memory_format, "rand_like")
    return rand(shape, dtype=d, generator=generator, device=_like_device(input, device),
                requires_grad=requires_grad)


def randn_like(input: Tensor, *, dtype: Any = None, generator: Any = None, layout: Any = None,
               device: Any = None, requires_grad: bool = False,
               memory_format: Any = None) -> Tensor:
    shape, d = _like(input, dtype, layout, memory_format, "randn_like")
    return randn(shape, dtype=d, generator=generator, device=_like_device(input, device),
                 requires_grad=requires_grad)


def arange(start: Any = None, end: Any = None, step: Any = 1, *, dtype: Any = None,
           layout: Any = None, device: Any = None, pin_memory: bool = False,
           requires_grad: bool = False) -> Tensor:
    """``[start, end)`` by ``step``; int64 when all bounds are ints, else float32.
    ``arange(end)`` and ``arange(end=end)`` start at 0, as PyTorch's ``arange(start=0,
    end, step=1)``.

    As in PyTorch, the step must be nonzero and point from start toward end (an empty
    range needs start == end), the bounds must be finite, and integer bounds must fit
    int64; every such mistake raises here rather than returning an empty tensor. An
    integer ``dtype`` with non-integer bounds truncates them first (``_truncated``)."""
    where = factory_device(device, "arange")
    check_options("arange", layout, pin_memory, where)
    if end is None:
        if start is None:
            raise TypeError("arange() missing 1 required positional argument: 'end'")
        start, end = 0, start
    elif start is None:
        start = 0
    bounds = []
    for name, v in (("start", start), ("end", end), ("step", step)):
        if isinstance(v, Tensor):
            v = v.item()
        if not isinstance(v, (builtins.int, builtins.float, np.number)) or isinstance(v, bool):
            raise TypeError(f"arange: {name} must be a number, got {v!r}")
        if isinstance(v, (builtins.int, np.integer)):
            v = dt.checked_scalar(v, dt.int64, "arange")
        elif not np.isfinite(v):
            raise SizeError(f"arange: {name} must be finite, got {v} (range {start} -> {end} "
                            f"by {step})")
        bounds.append(v)
    start, end, step = bounds
    all_int = all(isinstance(v, builtins.int) for v in bounds)
    if step == 0:
        raise SizeError(f"arange: step must be nonzero (range {start} -> {end})")
    if (end - start) * step < 0:
        raise SizeError(f"arange: upper bound and lower bound inconsistent with step sign: "
                        f"{start} -> {end} by {step}")
    target = _dtype(dtype, dt.int64 if all_int else None)
    if all_int:
        n = -((start - end) // step)   # exact ceil((end - start) / step)
    elif target.category == dt.INT:
        n, start, step = _truncated(start, end, step, target)
        all_int = True
    else:
        n = _float_count(start, end, step)
    check_numel("arange", (n,))
    if n == 0:
        return _finish(_place(full_const(0, (0,), target), where), requires_grad)
    work = dt.int64 if all_int and target.category != dt.FLOAT else dt.float64
    idx = prim("iota", [], {"dim": 0}, (n,), work)
    return _finish(_place(cast(add(mul(idx, step), start), target), where), requires_grad)


def _float_count(start: Any, end: Any, step: Any) -> int:
    """``ceil((end - start) / step)`` in double, as PyTorch sizes a float range."""
    count = np.ceil((np.float64(end) - np.float64(start)) / np.float64(step))
    if not np.isfinite(count):
        raise SizeError(f"arange: {start} -> {end} by {step} has too many elements")
    return int(count)


def _truncated(start: Any, end: Any, step: Any, target: dt.DType) -> tuple[int, int, int]:
    """(count, start, step) of ``arange`` in an integer dtype from non-integer bounds, as
    PyTorch's CPU kernel: start, end and step are truncated toward zero to int64 (its
    accumulation type) and the values are ``start + i * step`` from those. For int64 the
    count comes from the truncated bounds too, and a step that truncates to 0 is refused;
    for int32 PyTorch counts with the original bounds in double (so ``arange(0, 5, 0.5,
    dtype=int32)`` is ten zeros there, and here)."""
    s, e, st = (dt.checked_scalar(builtins.int(v), dt.int64, "arange") for v in (start, end, step))
    if target != dt.int64:
        return _float_count(start, end, step), s, st
    if st == 0:
        raise SizeError(f"arange: step must be nonzero: step {step} truncates to 0 in int64, "
                        f"the dtype asked for (range {start} -> {end}); pass an integer step")
    return -((s - e) // st), s, st


def _count(op: str, name: str, v: Any) -> int:
    """A non-negative int argument that is a size (``eye``'s n, ``linspace``'s steps)."""
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{op}: {name} must be an int, got {type(v).__name__} {v!r}")
    v = operator.index(v)
    if v < 0:
        raise SizeError(f"{op}: {name} must be non-negative, got {v}")
    return v


def linspace(start: float, end: float, steps: int, *, dtype: Any = None, layout: Any = None,
             device: Any = None, pin_memory: bool = False,
             requires_grad: bool = False) -> Tensor:
    where = factory_device(device, "linspace")
    check_options("linspace", layout, pin_memory, where)
    steps = _count("linspace", "steps", steps)
    check_numel("linspace", (steps,))
    if steps <= 1:
        out = full_const(start, (steps,), _dtype(dtype), "linspace")
    else:
        idx = prim("iota", [], {"dim": 0}, (steps,), dt.float64)
        out = cast(add(mul(idx, (end - start) / (steps - 1)), float(start)), _dtype(dtype))
    return _finish(_place(out, where), requires_grad)


def eye(n: int, m: int | None = None, *, dtype: Any = None, layout: Any = None,
        device: Any = None, pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    where = factory_device(device, "eye")
    check_options("eye", layout, pin_memory, where)
    n = _count("eye", "n", n)
    m = n if m is None else _count("eye", "m", m)
    check_numel("eye", (n, m))
    rows = prim("iota", [], {"dim": 0}, (n, m), dt.int64)
    cols = prim("iota", [], {"dim": 1}, (n, m), dt.int64)
    out = cast(prim("compare", [rows, cols], {"direction": "eq"}, (n, m), dt.bool_),
               _dtype(dtype))
    return _finish(_place(out, where), requires_grad)


def rand(*sizes: Any, size: Sequence[int] | None = None, dtype: Any = None,
         generator: Any = None, layout: Any = None, device: Any = None,
         pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """Uniform in [0, 1) from the counter-based generator."""
    where = factory_device(device, "rand")
    check_options("rand", layout, pin_memory, where)
    shape = _size("rand", sizes, size)
    return _finish(_place(rnd.uniform(shape, _dtype(dtype), generator), where), requires_grad)


def randn(*sizes: Any, size: Sequence[int] | None = None, dtype: Any = None,
          generator: Any = None, layout: Any = None, device: Any = None,
          pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """Standard normal (Box-Muller) from the counter-based generator."""
    where = factory_device(device, "randn")
    check_options("randn", layout, pin_memory, where)
    shape = _size("randn", sizes, size)
    return _finish(_place(rnd.normal(shape, _dtype(dtype), generator), where), requires_grad)


def randperm(n: int, *, generator: Any = None, dtype: Any = None, layout: Any = None,
             device: Any = None, pin_memory: bool = False,
             requires_grad: bool = False) -> Tensor:
    """A random permutation of ``0 .. n-1`` (int64 by default), as ``torch.randperm``;
    drawn on the host from the generator (``random.host_permutation``), so it is
    realized at once and compiles nothing."""
    where = factory_device(device, "randperm")
    check_options("randperm", layout, pin_memory, where)
    target = _dtype(dtype, dt.int64)
    n = rnd.permutation_length(n)
    if target.category == dt.INT and n > 0 and n - 1 > dt.int_bounds(target)[1]:
        raise dt.DTypeOverflowError(f"randperm: n={n} does not fit {target.name}")
    perm = rnd.host_permutation(n, generator).astype(target.np)
    return _finish(_place(tensor(perm, dtype=target), where), requires_grad)


def randint(low: int = 0, high: Any = None, size: Any = None, *, dtype: Any = None,
            generator: Any = None, layout: Any = None, device: Any = None,
            pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """``randint(high, size)`` or ``randint(low, high, size)``: integers in [low, high).
    As in PyTorch, ``size`` may be a keyword (``randint(5, size=(3,))``, ``high`` the
    one integer given) and ``low`` defaults to 0 (``randint(high=5, size=(3,))``)."""
    where = factory_device(device, "randint")
    check_options("randint", layout, pin_memory, where)
    if size is None:
        if high is None or not isinstance(high, (tuple, list)):
            raise TypeError("randint: expected randint(high, size) or randint(low, high, size)")
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"randint: argument 'size' must be a tuple of ints, got "
                        f"{type(size).__name__} {size!r}")
    target = _dtype(dtype, dt.int64)
    low, high = int(low), int(high)
    if target.category == dt.INT and high > low:   # (high <= low: integers() says why)
        lo, hi = dt.int_bounds(target)
        if low < lo or high - 1 > hi:
            raise dt.DTypeOverflowError(
                f"randint: range [{low}, {high}) does not fit {target.name} "
                f"(valid: low >= {lo}, high <= {hi + 1})")
    if target == dt.bool_ and high > low and (low < 0 or high > 2):
        raise dt.DTypeOverflowError(f"randint: range [{low}, {high}) does not fit bool "
                                    f"(valid: low >= 0, high <= 2)")
    return _finish(_place(rnd.integers(low, high, shape_arg((size,), "randint"), target,
                                       generator), where), requires_grad)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,
                generator: Any = None) -> Tensor:
    """``torch.multinomial``: ``num_samples`` category indices (int64) per row of the
    non-negative weights ``input`` (1-D, or 2-D with a row per distribution; rows need
    not sum to 1).

    Drawn by the Gumbel-max trick: each sample is ``argmax(log(w) + g)`` over fresh
    float64 Gumbel noise ``g = -log(-log(u))``, which picks category ``i`` with
    probability ``w_i / sum(w)`` exactly as inverse-CDF sampling does, with no prefix
    sum and no host read (the draw stays inside the compiled step, and a loop that
    samples every step compiles once). Without replacement, ``num_samples > 1`` takes
    the ``num_samples`` largest perturbed scores (Gumbel-top-k), which draws a sample
    without replacement in order, as successive draws with the chosen weight removed.
    The numbers differ from PyTorch's (another generator), their distribution does not.
    Weights already in host memory (made from Python data or numpy) are checked at the
    call, as PyTorch's CPU multinomial checks them: a negative, infinite or NaN weight,
    or a row of zeros, raises ``RuntimeError``. Computed weights are not read back to
    check them (as ``torch.multinomial`` on CUDA): such a row gives an unspecified index
    in range (argmax of a row of -inf is index 0)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"multinomial: expected a Tensor, got {type(input).__name__}")
    if input.ndim not in (1, 2) or not input.dtype.is_floating_point:
        raise ValueError(f"multinomial: input must be a 1-D or 2-D float tensor of weights, "
                         f"got shape {input.shape} of {input.dtype.name}")
    n = input.shape[-1]
    if isinstance(num_samples, builtins.bool) or not isinstance(num_samples, int) \
            or num_samples < 1:
        raise ValueError(f"multinomial: num_samples must be a positive int, got {num_samples!r}")
    if n == 0:
        raise ValueError(f"multinomial: input of shape {input.shape} has no categories")
    if not replacement and num_samples > n:
        raise ArgumentError(f"multinomial: cannot draw {num_samples} samples without "
                            f"replacement from {n} categories (shape {input.shape})")
    _check_known_weights(input)
    rows = input.shape[:-1]
    logw = ops.log(cast(input, dt.float64))
    draws = num_samples if replacement else 1
    u = _place(rnd.uniform((*rows, draws, n), dt.float64, generator),
               check_device(_like_device(input, None), "multinomial"))
    scores = ops.add(movement.unsqueeze(logw, -2), ops.neg(ops.log(ops.neg(ops.log(u)))))
    if replacement or num_samples == 1:
        return ops.argmax(scores, -1)
    return sorting.topk(movement.squeeze(scores, -2), num_samples, -1).indices


def _check_known_weights(input: Tensor) -> None:
    """``multinomial``'s weights, where they are in host memory: PyTorch's errors."""
    w = ops.known_index_values(input)
    if w is None:
        return
    with np.errstate(invalid="ignore"):
        if (w < 0).any():
            raise RuntimeError("multinomial: invalid multinomial distribution (encountering "
                               f"probability entry < 0; weights of shape {input.shape})")
        if not np.isfinite(w).all():
            raise RuntimeError("multinomial: invalid multinomial distribution (encountering "
                               f"probability entry = infinity or NaN; weights of shape "
                               f"{input.shape})")
        if (w.reshape(-1, w.shape[-1]).sum(-1) <= 0).any():
            raise RuntimeError("multinomial: invalid multinomial distribution (sum of "
                               f"probabilities <= 0 in a row of weights of shape "
                               f"{input.shape})")


def empty_strided(size: Sequence[int], stride: Sequence[int], *, dtype: Any = None,
                  layout: Any = None, device: Any = None, requires_grad: bool = False,
                  pin_memory: bool = False) -> Tensor:
    """``torch.empty_strided``: a tensor of ``size`` (zeros, as ``nv.empty``). Nova
    values have no strides of their own (the tensor reads as row-major, see
    ``Tensor.stride``), so ``stride`` is checked as PyTorch checks it -- one
    non-negative int per dimension -- and then has no effect."""
    shape = shape_arg((size,), "empty_strided")
    if not isinstance(stride, (tuple, list)):
        raise TypeError(f"empty_strided(): argument 'stride' (position 2) must be tuple of "
                        f"ints, not {type(stride).__name__}")
    for i, s in enumerate(stride):
        if isinstance(s, builtins.bool) or not isinstance(s, (builtins.int, np.integer)):
            raise TypeError(f"empty_strided(): argument 'stride' (position 2) must be tuple "
                            f"of ints, but found element of type {type(s).__name__} at pos {i}")
    if len(stride) != len(shape):
        raise RuntimeError(f"empty_strided: dimensionality of sizes ({len(shape)}) must match "
                           f"dimensionality of strides ({len(stride)})")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"empty_strided: negative strides are not supported, got sizes="
                           f"{list(shape)} and strides={list(stride)}")
    return empty(shape, dtype=dtype, device=device, requires_grad=requires_grad)


def frombuffer(buffer: Any, *, dtype: Any, count: int = -1, offset: int = 0,
               requires_grad: bool = False) -> Tensor:
    """``torch.frombuffer``: the ``count`` elements of ``dtype`` (all, for -1) that start
    ``offset`` bytes into an object implementing the buffer protocol (``bytes``,
    ``bytearray``, ``memoryview``, ``array.array``, numpy arrays). The values are
    copied: Nova values are immutable, so later writes into the buffer are not seen
    (PyTorch's tensor shares the memory). Always on the CPU, as PyTorch's."""
    target = dt.get_dtype(dtype)
    try:
        raw = memoryview(buffer).cast("B")
    except TypeError:
        raise ValueError(f"frombuffer: object of type {type(buffer).__name__} does not "
                         "implement Python buffer protocol.") from None
    length, size = raw.nbytes, target.itemsize
    if length == 0 or count == 0:
        raise ValueError(f"frombuffer: both buffer length ({length}) and count ({count}) "
                         "must not be 0")
    if not 0 <= offset < length:
        raise ValueError(f"frombuffer: offset ({offset} bytes) must be non-negative and no "
                         f"greater than buffer length ({length} bytes) minus 1")
    if count < 0:
        if (length - offset) % size:
            raise ValueError(f"frombuffer: buffer length ({length - offset} bytes) after "
                             f"offset ({offset} bytes) must be a multiple of element size "
                             f"({size})")
        count = (length - offset) // size
    elif offset + count * size > length:
        raise ValueError(f"frombuffer: requested buffer length ({count} * {size} bytes) "
                         f"after offset ({offset} bytes) must not be greater than actual "
                         f"buffer length ({length} bytes)")
    arr = np.frombuffer(raw, dtype=target.np, count=count, offset=offset)
    return tensor(arr, dtype=target, device="cpu", requires_grad=requires_grad)
