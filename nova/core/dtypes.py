"""Nova's dtypes and PyTorch's type-promotion rules.

A dtype is a small immutable object that knows its numpy storage type, its MLIR element
type name and its *category* (bool < integer < floating), which is all type promotion
needs. float16 and bfloat16 are storage types: the reference interpreter computes them
in float32 and rounds each op's result, as PyTorch does on CPU. int8, uint8 and int16
are storage types too: the compiled engines compute them in int32 and wrap each op's
result back to the narrow type (numpy computes them natively), which gives PyTorch's
two's complement wrap-around exactly.
"""
from __future__ import annotations

import builtins
import math
from typing import Any

import ml_dtypes
import numpy as np

BOOL, INT, FLOAT = 0, 1, 2


class DType:
    """A tensor element type (``nv.float32``, ``nv.int64``, ...)."""

    __slots__ = ("name", "np", "category", "itemsize", "mlir")

    # ``mlir`` is the element type's MLIR name, unique per dtype: signless ``i8``/``i16``
    # hold the signed types (as ``i32``/``i64`` do) and ``ui8`` uint8, so the two
    # 8-bit types never share an IR type, a cache key or a lookup entry.

    def __init__(self, name: str, np_dtype: Any, category: int, mlir: str):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.category = category
        self.itemsize = self.np.itemsize
        self.mlir = mlir

    @property
    def is_floating_point(self) -> bool:
        return self.category == FLOAT

    is_complex = False

    @property
    def is_signed(self) -> bool:
        """Whether the dtype holds negative values (``torch.dtype.is_signed``): every
        one but bool and uint8."""
        return self.category != BOOL and self.np.kind != "u"

    def __repr__(self) -> str:
        return f"nova.{self.name}"

    def __reduce__(self):
        return (get_dtype, (self.name,))


float32 = DType("float32", np.float32, FLOAT, "f32")
float64 = DType("float64", np.float64, FLOAT, "f64")
float16 = DType("float16", np.float16, FLOAT, "f16")
bfloat16 = DType("bfloat16", ml_dtypes.bfloat16, FLOAT, "bf16")
uint8 = DType("uint8", np.uint8, INT, "ui8")
int8 = DType("int8", np.int8, INT, "i8")
int16 = DType("int16", np.int16, INT, "i16")
int32 = DType("int32", np.int32, INT, "i32")
int64 = DType("int64", np.int64, INT, "i64")
bool_ = DType("bool", np.bool_, BOOL, "i1")

ALL_DTYPES = (float32, float64, float16, bfloat16, uint8, int8, int16, int32, int64, bool_)
# The integer dtypes held in a narrow storage type and computed in int32 by the compiled
# engines (each op's result wrapped back to the storage type).
NARROW_INTS = (uint8, int8, int16)
_BY_NAME = {d.name: d for d in ALL_DTYPES}
_BY_NAME.update({"float": float32, "double": float64, "half": float16, "short": int16,
                 "int": int32, "long": int64})
_BY_NP = {d.np: d for d in ALL_DTYPES}
_BY_MLIR = {d.mlir: d for d in ALL_DTYPES}



class ComplexDType:
    """A complex element type (``nv.complex64``, ``nv.complex128``). Not a ``DType``:
    no engine computes complex values. A complex tensor is its real and imaginary parts,
    two tensors of the floating dtype ``real`` (``nova.tensor.complex``), so a complex
    dtype reaching a real op's ``get_dtype`` fails there instead of being computed as a
    real type."""

    __slots__ = ("name", "np", "real", "itemsize")
    is_complex = True
    is_floating_point = False
    is_signed = True

    def __init__(self, name: str, np_dtype: Any, real: DType):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.real = real
        self.itemsize = self.np.itemsize

    def __repr__(self) -> str:
        return f"nova.{self.name}"

    def __reduce__(self):
        return (get_complex_dtype, (self.name,))


complex64 = ComplexDType("complex64", np.complex64, float32)
complex128 = ComplexDType("complex128", np.complex128, float64)
COMPLEX_DTYPES = (complex64, complex128)
_COMPLEX_BY_NAME = {"complex64": complex64, "cfloat": complex64, "complex128": complex128,
                    "cdouble": complex128}


def get_complex_dtype(spec: Any) -> ComplexDType | None:
    """``spec`` as a complex dtype (``nv.complex64``, ``"complex64"``, ``"cfloat"``,
    ``np.complex128``, Python's ``complex``), or None when it names none."""
    if isinstance(spec, ComplexDType):
        return spec
    if spec is builtins.complex:
        return complex_of(DEFAULT_FLOAT)
    if isinstance(spec, str):
        return _COMPLEX_BY_NAME.get(spec.removeprefix("torch.").removeprefix("nova."))
    if isinstance(spec, DType):
        return None
    try:
        npd = np.dtype(spec)
    except TypeError:
        return None
    return {np.dtype(np.complex64): complex64, np.dtype(np.complex128): complex128}.get(npd)


def complex_of(real: DType) -> ComplexDType:
    """The complex dtype whose parts are ``real``: complex128 for float64, complex64 for
    every other (float32, the half types, integers; as PyTorch's promotion)."""
    return complex128 if real == float64 else complex64


# The dtype of Python floats, of float factories without ``dtype=`` and of integer
# inputs to float functions: ``set_default_dtype`` replaces it (process-wide, as
# PyTorch's); read it at call time as ``dtypes.DEFAULT_FLOAT``, never bind it at import.
DEFAULT_FLOAT = float32
DEFAULT_INT = int64


def get_default_dtype() -> DType:
    """The default floating dtype (``torch.get_default_dtype``): float32 unless
    ``set_default_dtype`` changed it."""
    return DEFAULT_FLOAT


def set_default_dtype(d: Any) -> None:
    """Make ``d`` the dtype of Python floats and of float factories without ``dtype=``
    (``torch.set_default_dtype``): process-wide, as PyTorch's; tensors made before keep
    theirs, and so does every compiled step (their dtypes are recorded)."""
    global DEFAULT_FLOAT
    dtype = get_dtype(d)
    if dtype.category != FLOAT:
        raise TypeError(f"set_default_dtype: only floating dtypes are supported as the "
                        f"default, got {dtype.name}; valid: float32, float64, float16, "
                        "bfloat16")
    DEFAULT_FLOAT = dtype

# Promotion lattice inside a category: the wider type wins; float16 with bfloat16 gives
# float32 (neither holds the other), and uint8 with int8 int16 (neither holds the other),
# as in PyTorch.
_FLOAT_RANK = {float16: 1, bfloat16: 1, float32: 2, float64: 3}
_INT_RANK = {uint8: 1, int8: 1, int16: 2, int32: 3, int64: 4}


def get_dtype(spec: Any) -> DType:
    """Turn ``nv.float32``, ``"float32"``, ``np.float32`` or a Python type into a DType."""
    if isinstance(spec, DType):
        return spec
    if spec is builtins.float:
        return DEFAULT_FLOAT
    if spec is builtins.int:
        return DEFAULT_INT
    if spec is builtins.bool:
        return bool_
    if isinstance(spec, str) and spec in _BY_NAME:
        return _BY_NAME[spec]
    try:
        npd = np.dtype(spec)
    except TypeError:
        npd = None
    if npd is not None and npd in _BY_NP:
        return _BY_NP[npd]
    valid = ", ".join(d.name for d in ALL_DTYPES)
    raise TypeError(f"dtype: {spec!r} is not a Nova dtype; valid dtypes are {valid}")


def from_mlir(name: str) -> DType:
    return _BY_MLIR[name]


def from_numpy_dtype(npd: np.dtype, op: str = "from_numpy") -> DType:
    """The Nova dtype holding a numpy dtype: itself where Nova has it (uint8, int8 and
    int16 included); uint16 widens to int32 and uint32/uint64 to int64, which hold their
    values (uint64 up to 2**63 - 1)."""
    npd = np.dtype(npd)
    if npd in _BY_NP:
        return _BY_NP[npd]
    if npd.kind == "u" and npd.itemsize == 2:
        return int32
    if npd.kind in "iu" and npd.itemsize >= 4:
        return int64
    raise TypeError(f"{op}: numpy dtype {npd} has no Nova equivalent; valid dtypes are "
                    + ", ".join(d.name for d in ALL_DTYPES))


def _max_in(dtypes: list[DType]) -> DType | None:
    if not dtypes:
        return None
    cat = max(d.category for d in dtypes)
    same = [d for d in dtypes if d.category == cat]
    if cat == BOOL:
        return bool_
    if cat == INT:
        best = max(same, key=lambda d: _INT_RANK[d])
        if best in (uint8, int8) and {uint8, int8} <= set(same):
            return int16
        return best
    best = max(same, key=lambda d: _FLOAT_RANK[d])
    if _FLOAT_RANK[best] == 1 and {float16, bfloat16} <= set(same):
        return float32
    return best


def scalar_category(value: Any) -> int:
    if isinstance(value, (builtins.bool, np.bool_)):
        return BOOL
    if isinstance(value, (builtins.int, np.integer)):
        return INT
    return FLOAT


def result_type(tensors: list[tuple[DType, int]], scalars: list[Any]) -> DType:
    """PyTorch's ``result_type``: dimensioned tensors first, then 0-d tensors, then
    Python scalars; a lower-priority group only matters if its category is higher.

    ``tensors`` holds (dtype, ndim) pairs.
    """
    dim = _max_in([d for d, n in tensors if n > 0])
    zero = _max_in([d for d, n in tensors if n == 0])
    res = dim
    if zero is not None and (res is None or zero.category > res.category):
        res = zero
    if scalars:
        cat = max(scalar_category(s) for s in scalars)
        if res is None or cat > res.category:
            res = {BOOL: bool_, INT: DEFAULT_INT, FLOAT: DEFAULT_FLOAT}[cat]
    assert res is not None
    return res


# ---------------------------------------------------------------- value ranges

class DTypeOverflowError(OverflowError, ValueError, RuntimeError):
    """A number that a dtype cannot hold (``full((2,), 2**40, dtype=nv.int32)``).

    Raised while recording, at the user's line, instead of wrapping silently or failing
    in the compiler. It is an ``OverflowError`` and a ``ValueError`` (what numpy 2 and
    Nova's argument checks raise) and a ``RuntimeError`` (what PyTorch raises for most
    of these cases), so code written against any of them catches it.
    """


# Python ints PyTorch accepts as a scalar operand: int64, or uint64 for the top half.
_SCALAR_INT_LO, _SCALAR_INT_HI = -2**63, 2**64


_INT_BOUNDS = {d: (builtins.int(np.iinfo(d.np).min), builtins.int(np.iinfo(d.np).max))
               for d in ALL_DTYPES if d.category == INT}
_FLOAT_MAX = {d: builtins.float(ml_dtypes.finfo(d.np).max)
              for d in ALL_DTYPES if d.category == FLOAT}


def int_bounds(dtype: DType) -> tuple[int, int]:
    """The inclusive range of an integer dtype."""
    return _INT_BOUNDS[dtype]


def float_max(dtype: DType) -> builtins.float:
    """The largest finite value of a floating dtype (bfloat16 included)."""
    return _FLOAT_MAX[dtype]


def _overflow(value: Any, dtype: DType, op: str) -> DTypeOverflowError:
    if dtype.category == INT:
        lo, hi = int_bounds(dtype)
        valid = f"integers in [{lo}, {hi}]"
    else:
        valid = f"finite values of magnitude <= {float_max(dtype):.6g}, or inf"
    return DTypeOverflowError(f"{op}: value {value!r} cannot be converted to {dtype.name} "
                              f"without overflow; {dtype.name} holds {valid}")


def _is_int(value: Any) -> builtins.bool:
    return isinstance(value, (builtins.int, np.integer)) and not isinstance(
        value, (builtins.bool, np.bool_))


def _scalar_int_range(value: Any, dtype: DType, op: str) -> None:
    """A Python int operand must fit int64 or uint64, as in PyTorch (which raises
    ``OverflowError: int too big to convert`` past that)."""
    if not _SCALAR_INT_LO <= value < _SCALAR_INT_HI:
        raise DTypeOverflowError(f"{op}: Python integer {value} is too big for a scalar "
                                 f"operand (valid: [-2**63, 2**64)), whatever the dtype "
                                 f"{dtype.name}")


def checked_scalar(value: Any, dtype: DType, op: str) -> builtins.int | builtins.float:
    """``value`` as a Python number of ``dtype``, or DTypeOverflowError if ``dtype``
    cannot hold it: an integer outside the dtype's range, a float beyond its largest
    finite value (inf and NaN are fine for floats), a NaN, inf or out-of-range float for
    an integer dtype (truncated toward zero first, as a cast does). PyTorch's
    ``checked_convert`` rules, used by ``full``, ``where``, ``masked_fill``, ``clamp``,
    ``fill_`` and ``pow`` exponents."""
    if dtype.category == BOOL:
        return builtins.int(builtins.bool(value))
    if _is_int(value):
        _scalar_int_range(builtins.int(value), dtype, op)
    if dtype.category == INT:
        lo, hi = int_bounds(dtype)
        if isinstance(value, (builtins.float, np.floating)):
            f = builtins.float(value)
            if f != f or f in (math.inf, -math.inf):
                raise _overflow(value, dtype, op)
            v = builtins.int(f)
        else:
            v = builtins.int(value)
        if not lo <= v <= hi:
            raise _overflow(value, dtype, op)
        return v
    f = builtins.float(value)
    if math.isfinite(f) and builtins.abs(f) > float_max(dtype):
        raise _overflow(value, dtype, op)
    return f


def operand_scalar(value: Any, dtype: DType, op: str) -> builtins.int | builtins.float:
    """``value`` converted for a binary op with a tensor of ``dtype`` (``x + 2**40``,
    ``x < 1e300``): ints outside [-2**63, 2**64) raise (as in PyTorch); an int that an
    integer dtype cannot hold raises too, where PyTorch wraps it modulo 2**bits
    (``int32 + 2**32`` adding 0: a wrong number, so Nova refuses it, as numpy 2 does for
    arithmetic; convert the tensor first -- comparisons with such an int are answered
    before this, see ``ops._compare_beyond_range``); floats are kept and
    round to the dtype in the step (1e300 is inf in float32, as in PyTorch)."""
    if dtype.category == BOOL:
        return builtins.int(builtins.bool(value))
    if _is_int(value):
        v = builtins.int(value)
        _scalar_int_range(v, dtype, op)
        if dtype.category == INT:
            lo, hi = int_bounds(dtype)
            if not lo <= v <= hi:
                raise DTypeOverflowError(
                    f"{op}: Python integer {v} is out of range for a {dtype.name} tensor "
                    f"(valid: [{lo}, {hi}]); PyTorch would wrap it modulo 2**"
                    f"{8 * dtype.itemsize}, Nova refuses: convert the tensor first, e.g. "
                    f"x.to(nv.int64)")
            return v
        return builtins.float(v)
    if dtype.category == INT:
        return checked_scalar(value, dtype, op)
    return builtins.float(value)


# ---------------------------------------------------------------- dtype information

class finfo:
    """Machine limits of a floating dtype, as ``torch.finfo``: ``bits``, ``eps``,
    ``max``, ``min``, ``tiny`` (= ``smallest_normal``), ``resolution`` and ``dtype``
    (its name). ``finfo()`` describes the default dtype."""

    def __init__(self, type: Any = None):  # noqa: A002 (torch's name)
        dtype = DEFAULT_FLOAT if type is None else get_dtype(type)
        if dtype.category != FLOAT:
            raise TypeError(f"finfo: {dtype.name} is not a floating dtype; use iinfo for "
                            "integers")
        info = ml_dtypes.finfo(dtype.np)
        self.bits = builtins.int(info.bits)
        self.eps = builtins.float(info.eps)
        self.max = builtins.float(info.max)
        self.min = builtins.float(info.min)
        self.tiny = self.smallest_normal = builtins.float(info.smallest_normal)
        # PyTorch's: 10 ** -(the decimal digits eps resolves), 0.001 for float16
        self.resolution = 10.0 ** -math.floor(-math.log10(self.eps))
        self.dtype = dtype.name

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer (or bool) dtype, as ``torch.iinfo``: ``bits``, ``min``,
    ``max`` and ``dtype`` (its name)."""

    def __init__(self, type: Any):  # noqa: A002 (torch's name)
        dtype = get_dtype(type)
        if dtype.category == FLOAT:
            raise TypeError(f"iinfo: {dtype.name} is a floating dtype; use finfo")
        self.bits = 8 * dtype.itemsize
        self.min, self.max = (0, 1) if dtype.category == BOOL else int_bounds(dtype)
        self.dtype = dtype.name

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


def promote_types(type1: Any, type2: Any) -> DType:
    """The dtype two tensors of these dtypes compute in (``torch.promote_types``)."""
    return result_type([(get_dtype(type1), 1), (get_dtype(type2), 1)], [])


def can_cast(from_: Any, to: Any) -> builtins.bool:
    """Whether ``torch.can_cast`` allows it: never to a lower category (float to int,
    int to bool); within one, any width."""
    return get_dtype(from_).category <= get_dtype(to).category
