"""``nv.testing``: ``assert_close`` and ``make_tensor``, as ``torch.testing``'s.

``assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None,
equal_nan=False, check_device=True, check_dtype=True, check_layout=True,
check_stride=False, msg=None)`` follows PyTorch 2.13's rules and messages:

- inputs: tensors (complex ones too), Python and numpy numbers, bools, None, and
  sequences and mappings of them, nested; a pair of numpy arrays compares as tensors;
  a tensor and a number, or a tensor and a numpy array, are refused (TypeError "No
  comparison pair ..."), as there;
- closeness ``|actual - expected| <= atol + rtol * |expected|`` elementwise, infinities
  close only to themselves, NaNs only with ``equal_nan``; the default tolerances by
  dtype, the looser of the two inputs' (float16 1e-3/1e-5, bfloat16 0.016/1e-5,
  float32 and complex64 1.3e-6/1e-5, float64 and complex128 1e-7/1e-7, others 0/0;
  Python numbers as int64, float64, complex128); ``rtol`` and ``atol`` given together
  or not at all (ValueError);
- shape, then ``layout``/``stride()`` (``check_layout``, ``check_stride``),
  ``device`` and ``dtype`` checked first; with a check off, values are compared on the
  host in the promoted dtype;
- an ``AssertionError`` naming the mismatched elements (``Mismatched elements: 2 / 3
  (66.7%)``) and the greatest absolute and relative differences with their indices and
  the tolerances, PyTorch's wording (``Tensor-likes are not close!``, ``Scalars are not
  close!``, ``The values for attribute 'dtype' do not match: ...``), and for nested
  inputs the item that failed; ``msg`` replaces the message (a string) or edits it (a
  callable).

Values are compared on the host (each tensor is realized and read back, as PyTorch's
CUDA comparison copies to the CPU), in numpy, in the comparison dtype as PyTorch's
kernels compute them (bfloat16 through ``ml_dtypes``); an integer comparison with
tolerances computes its errors in float64, where PyTorch mixes int64 and float32.
Nova's dtypes and sizes print as Nova's (``nova.float32``, ``nova.Size([2])``).

``make_tensor(*shape, dtype, device, low=None, high=None, requires_grad=False,
noncontiguous=False, exclude_zero=False, memory_format=None)``: PyTorch's ranges,
clamping and errors; the values come from Nova's generator (``nv.manual_seed``), so they
are not PyTorch's draws. Nova tensors have no strides, so ``noncontiguous=True``
returns the same kind of view PyTorch builds (every second element of a last dimension
twice as long) and ``memory_format`` is accepted as ``clone`` accepts it.
"""
from __future__ import annotations

import cmath
import collections.abc
import contextlib
import math
import warnings
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np

from nova.core import dtypes as dt
from nova.tensor.complex import ComplexTensor
from nova.tensor.tensor import Tensor, strided

__all__ = ["assert_close", "make_tensor"]

# {dtype: (rtol, atol)}: PyTorch's table (torch/testing/_comparison.py).
_DTYPE_PRECISIONS: dict[Any, tuple[float, float]] = {
    dt.float16: (0.001, 1e-5),
    dt.bfloat16: (0.016, 1e-5),
    dt.float32: (1.3e-6, 1e-5),
    dt.float64: (1e-7, 1e-7),
    dt.complex64: (1.3e-6, 1e-5),
    dt.complex128: (1e-7, 1e-7),
}
_NUMBER_DTYPES = {int: dt.int64, float: dt.float64, complex: dt.complex128}
_TENSORS = (Tensor, ComplexTensor)


class _Failure(Exception):
    """A mismatch (or a bad argument) found while comparing: the exception type to
    raise, its message, and the path of the item inside nested inputs."""

    def __init__(self, type_: type[Exception], msg: str, id: tuple[Any, ...] = ()):
        super().__init__(msg)
        self.type, self.msg, self.id = type_, msg, id

    def to_error(self, msg: str | Callable[[str], str] | None = None) -> Exception:
        if not isinstance(msg, str):
            generated = self.msg
            if self.id:
                generated += ("\n\nThe failure occurred for item "
                              f"{''.join(str([item]) for item in self.id)}")
            msg = msg(generated) if callable(msg) else generated
        return self.type(msg)


class _Unsupported(Exception):
    """This kind of pair cannot compare these inputs; try the next."""


def _tolerances(*dtypes: Any, rtol: float | None, atol: float | None,
                id: tuple[Any, ...]) -> tuple[float, float]:
    if (rtol is None) ^ (atol is None):
        raise _Failure(ValueError, "Both 'rtol' and 'atol' must be either specified or "
                       f"omitted, but got no {'rtol' if rtol is None else 'atol'}.", id)
    if rtol is not None and atol is not None:
        return rtol, atol
    rtols, atols = zip(*[_DTYPE_PRECISIONS.get(d, (0.0, 0.0)) for d in dtypes])
    return max(rtols), max(atols)


def _mismatch_msg(*, identifier: str | Callable[[str], str] | None, default: str,
                  extra: str | None, abs_diff: Any, abs_idx: tuple[int, ...] | None,
                  atol: float, rel_diff: Any, rel_idx: tuple[int, ...] | None,
                  rtol: float) -> str:
    equality = rtol == 0 and atol == 0

    def diff_msg(kind: str, diff: Any, idx: tuple[int, ...] | None, tol: float) -> str:
        if idx is None:
            text = f"{kind.title()} difference: {diff}"
        else:
            text = f"Greatest {kind} difference: {diff} at index {idx}"
        if not equality:
            text += f" (up to {tol} allowed)"
        return text + "\n"

    if identifier is None:
        identifier = default
    elif callable(identifier):
        identifier = identifier(default)
    text = f"{identifier} are not {'equal' if equality else 'close'}!\n\n"
    if extra:
        text += f"{extra.strip()}\n"
    text += diff_msg("absolute", abs_diff, abs_idx, atol)
    text += diff_msg("relative", rel_diff, rel_idx, rtol)
    return text.strip()


def _scalar_mismatch_msg(actual: Any, expected: Any, *, rtol: float, atol: float) -> str:
    abs_diff = abs(actual - expected)
    rel_diff = float("inf") if expected == 0 else abs_diff / abs(expected)
    return _mismatch_msg(identifier=None, default="Scalars",
                         extra=f"Expected {expected} but got {actual}.",
                         abs_diff=abs_diff, abs_idx=None, atol=atol, rel_diff=rel_diff,
                         rel_idx=None, rtol=rtol)


# ------------------------------------------------------------------------------ pairs


class _NonePair:
    def __init__(self, actual: Any, expected: Any, id: tuple[Any, ...], **_: Any):
        if not (actual is None or expected is None):
            raise _Unsupported
        self.actual, self.expected, self.id = actual, expected, id

    def compare(self) -> None:
        if not (self.actual is None and self.expected is None):
            raise _Failure(AssertionError, f"None mismatch: {self.actual} is not "
                           f"{self.expected}", self.id)


class _BooleanPair:
    def __init__(self, actual: Any, expected: Any, id: tuple[Any, ...], **_: Any):
        if not all(isinstance(x, (bool, np.bool_)) for x in (actual, expected)):
            raise _Unsupported
        self.actual, self.expected, self.id = bool(actual), bool(expected), id

    def compare(self) -> None:
        if self.actual is not self.expected:
            raise _Failure(AssertionError, f"Booleans mismatch: {self.actual} is not "
                           f"{self.expected}", self.id)


class _NumberPair:
    def __init__(self, actual: Any, expected: Any, id: tuple[Any, ...], *,
                 rtol: float | None, atol: float | None, equal_nan: bool,
                 check_dtype: bool, **_: Any):
        kinds = (int, float, complex, np.number)
        if not all(isinstance(x, kinds) for x in (actual, expected)):
            raise _Unsupported
        actual, expected = (x.item() if isinstance(x, np.number) else x
                            for x in (actual, expected))
        self.actual, self.expected, self.id = actual, expected, id
        self.rtol, self.atol = _tolerances(
            *[_NUMBER_DTYPES[int if type(x) is bool else type(x)] for x in (actual, expected)],
            rtol=rtol, atol=atol, id=id)
        self.equal_nan, self.check_dtype = equal_nan, check_dtype

    def compare(self) -> None:
        a, e = self.actual, self.expected
        if self.check_dtype and type(a) is not type(e):
            raise _Failure(AssertionError, f"The (d)types do not match: {type(a)} != "
                           f"{type(e)}.", self.id)
        if a == e:
            return
        if self.equal_nan and cmath.isnan(a) and cmath.isnan(e):
            return
        abs_diff = abs(a - e)
        if cmath.isfinite(abs_diff) and abs_diff <= self.atol + self.rtol * abs(e):
            return
        raise _Failure(AssertionError,
                       _scalar_mismatch_msg(a, e, rtol=self.rtol, atol=self.atol), self.id)


def _kind(x: Any) -> type:
    """The type ``allow_subclasses`` compares: a complex tensor is a tensor, as in
    PyTorch (where both are ``torch.Tensor``)."""
    return Tensor if type(x) is ComplexTensor else type(x)


class _TensorLikePair:
    def __init__(self, actual: Any, expected: Any, id: tuple[Any, ...], *,
                 allow_subclasses: bool, rtol: float | None, atol: float | None,
                 equal_nan: bool, check_device: bool, check_dtype: bool,
                 check_layout: bool, check_stride: bool, **_: Any):
        tensors = [isinstance(x, _TENSORS) for x in (actual, expected)]
        if any(tensors):
            if not all(tensors):
                raise _Unsupported
        elif not (isinstance(actual, type(expected)) or isinstance(expected, type(actual))):
            raise _Unsupported
        if not allow_subclasses and _kind(actual) is not _kind(expected):
            raise _Unsupported
        actual, expected = self._to_tensor(actual), self._to_tensor(expected)
        self.actual, self.expected, self.id = actual, expected, id
        self.rtol, self.atol = _tolerances(actual.dtype, expected.dtype, rtol=rtol,
                                           atol=atol, id=id)
        self.equal_nan = equal_nan
        self.check_device, self.check_dtype = check_device, check_dtype
        self.check_layout, self.check_stride = check_layout, check_stride

    @staticmethod
    def _to_tensor(x: Any) -> Any:
        if isinstance(x, _TENSORS):
            return x
        from nova.tensor.compat import as_tensor
        try:
            return as_tensor(x)
        except Exception:
            raise _Unsupported from None

    def _fail(self, msg: str) -> NoReturn:
        raise _Failure(AssertionError, msg, self.id)

    def compare(self) -> None:
        a, e = self.actual, self.expected

        def attribute(name: str, av: Any, ev: Any) -> NoReturn:
            self._fail(f"The values for attribute '{name}' do not match: {av} != {ev}.")

        if tuple(a.shape) != tuple(e.shape):
            from nova.tensor.legacy import Size
            attribute("shape", repr(Size(a.shape)), repr(Size(e.shape)))
        layouts = getattr(a, "layout", strided), getattr(e, "layout", strided)
        if layouts[0] != layouts[1]:
            if self.check_layout:
                attribute("layout", *layouts)
        elif self.check_stride and hasattr(a, "stride") and hasattr(e, "stride") \
                and a.stride() != e.stride():
            attribute("stride()", a.stride(), e.stride())
        if self.check_device and a.device != e.device:
            attribute("device", a.device, e.device)
        if self.check_dtype and a.dtype != e.dtype:
            attribute("dtype", a.dtype, e.dtype)
        dtype = _promoted(a.dtype, e.dtype)
        self._compare_values(_host(a, dtype), _host(e, dtype), dtype)

    def _compare_values(self, a: np.ndarray, e: np.ndarray, dtype: Any) -> None:
        rtol, atol = self.rtol, self.atol
        matches = _isclose(a, e, rtol=rtol, atol=atol, equal_nan=self.equal_nan)
        if matches.all():
            return
        if a.shape == ():
            self._fail(_scalar_mismatch_msg(a.item(), e.item(), rtol=rtol, atol=atol))
        n, bad = matches.size, int(matches.size - matches.sum())
        extra = f"Mismatched elements: {bad} / {n} ({bad / n:.1%})"
        a, e, keep = a.reshape(-1), e.reshape(-1), matches.reshape(-1)
        with np.errstate(all="ignore"):
            if not (dtype.is_floating_point or dtype.is_complex):
                a, e = a.astype(np.int64), e.astype(np.int64)   # (as PyTorch: int64)
                abs_diff = np.abs(a - e)
                abs_diff[keep] = 0
                real = dt.get_default_dtype().np        # int / int divides in the default
                rel_diff = abs_diff.astype(real) / np.abs(e).astype(real)
            else:
                abs_diff = np.abs(a - e)
                abs_diff[keep] = 0
                rel_diff = abs_diff / np.abs(e)
            rel_diff[keep] = 0
        i, j = int(np.argmax(abs_diff)), int(np.argmax(rel_diff))
        self._fail(_mismatch_msg(identifier=None, default="Tensor-likes", extra=extra,
                                 abs_diff=abs_diff[i].item(), abs_idx=_unravel(i, matches.shape),
                                 atol=atol, rel_diff=rel_diff[j].item(),
                                 rel_idx=_unravel(j, matches.shape), rtol=rtol))


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def _promoted(a: Any, b: Any) -> Any:
    """``torch.promote_types`` for the comparison, complex dtypes included."""
    if a == b:
        return a
    if not (a.is_complex or b.is_complex):
        return dt.promote_types(a, b)
    parts = [{dt.complex64: dt.float32, dt.complex128: dt.float64}.get(d, d) for d in (a, b)]
    real = dt.promote_types(*parts)
    return dt.complex128 if real == dt.float64 else dt.complex64


def _host(t: Any, dtype: Any) -> np.ndarray:
    """The tensor's values on the host, in ``dtype``'s numpy type."""
    values = np.asarray(t.detach().numpy() if hasattr(t, "detach") else t.numpy())
    if dtype.is_complex:
        target = np.complex128 if dtype == dt.complex128 else np.complex64
    else:
        target = dtype.np
    return values.astype(target, copy=False)


def _isclose(a: np.ndarray, e: np.ndarray, *, rtol: float, atol: float,
             equal_nan: bool) -> np.ndarray:
    """``torch.isclose``: equal, or both NaN with ``equal_nan``, or a finite error within
    ``atol + |rtol * e|`` (computed in the inputs' dtype; integers in float64)."""
    with np.errstate(all="ignore"):
        close = np.asarray(a == e)
        floating = a.dtype.kind in "fcV" or a.dtype.name == "bfloat16"
        if equal_nan and floating:
            close = close | (np.isnan(a) & np.isnan(e))
        if rtol == 0 and atol == 0:
            return close
        if not floating:
            a, e = a.astype(np.float64), e.astype(np.float64)
        allowed = atol + np.abs(rtol * e)
        actual = np.abs(a - e)
        return close | (np.isfinite(actual) & (actual <= allowed))


_PAIRS = (_NonePair, _BooleanPair, _NumberPair, _TensorLikePair)


def _originate(actual: Any, expected: Any, id: tuple[Any, ...],
               options: dict[str, Any]) -> list[Any]:
    sequence, mapping = collections.abc.Sequence, collections.abc.Mapping
    if isinstance(actual, sequence) and not isinstance(actual, str) and \
            isinstance(expected, sequence) and not isinstance(expected, str):
        if len(actual) != len(expected):
            raise _Failure(AssertionError, "The length of the sequences mismatch: "
                           f"{len(actual)} != {len(expected)}", id)
        pairs = []
        for i in range(len(actual)):
            pairs += _originate(actual[i], expected[i], (*id, i), options)
        return pairs
    if isinstance(actual, mapping) and isinstance(expected, mapping):
        actual_keys, expected_keys = set(actual.keys()), set(expected.keys())
        if actual_keys != expected_keys:
            raise _Failure(AssertionError,
                           "The keys of the mappings do not match:\n"
                           f"Missing keys in the actual mapping: "
                           f"{sorted(expected_keys - actual_keys)}\n"
                           f"Additional keys in the actual mapping: "
                           f"{sorted(actual_keys - expected_keys)}", id)
        keys: Any = actual_keys
        with contextlib.suppress(Exception):
            keys = sorted(keys)
        pairs = []
        for key in keys:
            pairs += _originate(actual[key], expected[key], (*id, key), options)
        return pairs
    for pair in _PAIRS:
        try:
            return [pair(actual, expected, id, **options)]
        except _Unsupported:
            continue
    raise _Failure(TypeError, "No comparison pair was able to handle inputs of type "
                   f"{type(actual)} and {type(expected)}.", id)


def assert_close(actual: Any, expected: Any, *, allow_subclasses: bool = True,
                 rtol: float | None = None, atol: float | None = None,
                 equal_nan: bool = False, check_device: bool = True,
                 check_dtype: bool = True, check_layout: bool = True,
                 check_stride: bool = False,
                 msg: str | Callable[[str], str] | None = None) -> None:
    """Raise ``AssertionError`` unless ``actual`` and ``expected`` are close (the module
    docstring: PyTorch's ``torch.testing.assert_close``)."""
    __tracebackhide__ = True
    options = dict(allow_subclasses=allow_subclasses, rtol=rtol, atol=atol,
                   equal_nan=equal_nan, check_device=check_device,
                   check_dtype=check_dtype, check_layout=check_layout,
                   check_stride=check_stride)
    try:
        pairs = _originate(actual, expected, (), options)
    except _Failure as failure:
        raise failure.to_error() from None
    for pair in pairs:
        try:
            pair.compare()
        except _Failure as failure:
            raise failure.to_error(msg) from None


# ------------------------------------------------------------------------- make_tensor

_INTEGRAL = (dt.uint8, dt.int8, dt.int16, dt.int32, dt.int64)
_FLOATING = (dt.float16, dt.bfloat16, dt.float32, dt.float64)
_COMPLEX = {dt.complex64: dt.float32, dt.complex128: dt.float64}


def make_tensor(*shape: Any, dtype: Any, device: Any, low: float | None = None,
                high: float | None = None, requires_grad: bool = False,
                noncontiguous: bool = False, exclude_zero: bool = False,
                memory_format: Any = None) -> Any:
    """A tensor of ``shape`` with values drawn uniformly from ``[low, high)`` (module
    docstring). Defaults by dtype, as PyTorch's: bool [0, 2), unsigned [0, 10), signed
    integers [-9, 10), floating and complex [-9, 9); bounds outside the dtype's finite
    range are clamped to it."""
    from nova.tensor.creation import empty, full, randint

    def bounds(lowest: float, highest: float, default_low: float,
               default_high: float) -> tuple[float, float]:
        lo = low if low is not None else default_low
        hi = high if high is not None else default_high
        if any(isinstance(v, float) and math.isnan(v) for v in (lo, hi)):
            raise ValueError(f"`low` and `high` cannot be NaN, but got low={lo} and high={hi}")
        if lo == hi and (dtype in _FLOATING or dtype in _COMPLEX):
            warnings.warn("Passing `low==high` to `nova.testing.make_tensor` for floating "
                          "or complex types is deprecated since 2.1 and will be removed "
                          "in 2.3. Use `nova.full(...)` instead.", FutureWarning,
                          stacklevel=3)
        elif lo >= hi:
            raise ValueError(f"`low` must be less than `high`, but got {lo} >= {hi}")
        elif hi < lowest or lo >= highest:
            raise ValueError(f"The value interval specified by `low` and `high` is "
                             f"[{lo}, {hi}), but {dtype} only supports [{lowest}, {highest})")
        lo, hi = min(max(lo, lowest), highest), min(max(hi, lowest), highest)
        if dtype is dt.bool_ or dtype in _INTEGRAL:
            return math.ceil(lo), math.ceil(hi)
        return lo, hi

    if len(shape) == 1 and isinstance(shape[0], collections.abc.Sequence):
        shape = shape[0]
    shape = tuple(shape)
    if noncontiguous and memory_format is not None:
        raise ValueError(f"The parameters `noncontiguous` and `memory_format` are mutually "
                         f"exclusive, but got noncontiguous={noncontiguous} and "
                         f"memory_format={memory_format}")
    if requires_grad and (dtype is dt.bool_ or dtype in _INTEGRAL):
        raise ValueError(f"`requires_grad=True` is not supported for boolean and integral "
                         f"dtypes, but got dtype={dtype}")
    noncontiguous = noncontiguous and math.prod(shape) > 1
    if noncontiguous:
        shape = (*shape[:-1], 2 * shape[-1])

    if dtype is dt.bool_ or dtype in _INTEGRAL:
        if dtype is dt.bool_:
            lo, hi = bounds(0, 2, 0, 2)
        else:
            info = dt.iinfo(dtype)
            lo, hi = bounds(info.min, info.max + (1 if dtype is not dt.int64 else 0), -9, 10)
        result = randint(lo, hi, shape, dtype=dtype, device=device)
    elif dtype in _FLOATING or dtype in _COMPLEX:
        real = _COMPLEX.get(dtype, dtype)
        info = dt.finfo(real)
        lo, hi = bounds(info.min, info.max, -9, 9)
        parts = (*shape, 2) if dtype in _COMPLEX else shape
        values = empty(parts, dtype=real, device=device)
        if lo == hi:
            values = values.fill_(lo)
        elif hi - lo >= info.max:        # (PyTorch's scaling: the width would overflow)
            values = values.uniform_(lo / 2, hi / 2).mul_(2)
        else:
            values = values.uniform_(lo, hi)
        if exclude_zero:
            zero = values == 0
            if dtype in _COMPLEX:
                zero = (zero[..., :1] & zero[..., 1:]).expand(*parts)
                tiny = full(parts, 0.0, dtype=real, device=device)
                tiny[..., 0] = info.tiny
                values = values.masked_fill(zero, 0.0) + tiny.masked_fill(~zero, 0.0)
            else:
                values = values.masked_fill(zero, info.tiny)
        values = values.detach()
        if dtype in _COMPLEX:
            from nova.tensor.complex import view_as_complex
            result = view_as_complex(values)
        else:
            result = values
    else:
        raise TypeError(f"The requested dtype '{dtype}' is not supported by "
                        "nova.testing.make_tensor().")
    if noncontiguous:
        result = result[..., 1::2]
    elif memory_format is not None:
        result = result.clone(memory_format=memory_format)
    if exclude_zero and (dtype is dt.bool_ or dtype in _INTEGRAL):
        result = result.masked_fill(result == 0, True if dtype is dt.bool_ else 1)
    if dtype in _FLOATING or dtype in _COMPLEX:
        result.requires_grad_(requires_grad)
    return result
