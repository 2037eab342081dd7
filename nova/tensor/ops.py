"""The op front end: checks arguments, then records primitive nodes.

Every public op validates shapes and dtypes here, at the user's line, and raises with
the op name, the shapes/dtypes and what would be valid. Composite ops (softmax, gelu,
var, logsumexp, ...) are written in terms of the primitive set of DESIGN.md, so fusion
later rediscovers them instead of special-casing them.
"""
from __future__ import annotations

import builtins
import math
import operator
from collections import namedtuple
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.core.errors import (ArgumentError, DTypeError, IndexRangeError, ShapeError,
                               complex_unsupported)
from nova.core.shapes import (
    broadcast_shapes, check_numel, normalize_dim, normalize_dims, numel,
)
from nova.tensor import autocast_state as _autocast
from nova.tensor import grad_mode, tape
from nova.tensor.function_template import stamped
from nova.tensor.tensor import Tensor, unaliased_detach
from nova.tensor.trace import Node

Scalar = (builtins.int, builtins.float, builtins.bool, np.number, np.bool_)

# ---------------------------------------------------------------- recording primitives


def prim(op: str, inputs: Sequence[Tensor], attrs: dict[str, Any], shape: tuple[int, ...],
         dtype: dt.DType) -> Tensor:
    """Record one primitive node (arguments were checked by the caller), plus its
    autograd record when grad mode is on and an input requires grad."""
    # (This runs for every recorded op: attribute reads and loops are kept inline.)
    nodes = tuple([t.node for t in inputs])
    device = None     # the inputs' device; constants (None) follow whatever they meet
    for n in nodes:
        d = n.device
        if d is not None and d != device:
            if device is not None:
                raise RuntimeError(
                    f"{op}: expected all tensors to be on the same device, but found at "
                    f"least two devices, {device} and {d} (move one with .to('{device}') "
                    f"or .to('{d}'))")
            device = d
    node = Node(op, nodes, attrs, shape if type(shape) is tuple else tuple(shape), dtype,
                None, device)
    out = Tensor._wrap(node)
    if inputs and grad_mode.STATE.enabled and dtype.is_floating_point:
        # each input's grad edge (``Tensor._grad_edge``): its GradFn, itself if it is a
        # leaf that requires grad, else None
        edges = tuple([t._grad_fn if t._grad_fn is not None else
                       (t if t._requires_grad else None) for t in inputs])
        for e in edges:   # (not ``count(None)``: a Tensor's == is elementwise)
            if e is not None:
                out._grad_fn = tape.GradFn(op, attrs, edges, nodes, node)
                break
    return out


def _scalar_value(value: Any, dtype: dt.DType, op: str = "full") -> Any:
    """``value`` as a number ``dtype`` holds exactly enough to be a constant of it;
    DTypeOverflowError at the user's line otherwise (never a wrapped value or a
    verifier error in the compiler)."""
    return dt.checked_scalar(value, dtype, op)


def full_const(value: Any, shape: tuple[int, ...], dtype: dt.DType, op: str = "full") -> Tensor:
    """A splat constant (baked into the step function: use a tensor for values that
    change every step). ``value`` must fit ``dtype`` (see ``dtypes.checked_scalar``)."""
    return prim("constant", [], {"value": _scalar_value(value, dtype, op)}, shape, dtype)


def _operand_const(value: Any, shape: tuple[int, ...], dtype: dt.DType, op: str) -> Tensor:
    """A Python number meeting a tensor in a binary op: floats round to the dtype as in
    PyTorch, ints must fit it (``dtypes.operand_scalar``)."""
    return prim("constant", [], {"value": dt.operand_scalar(value, dtype, op)}, shape, dtype)


def cast(x: Tensor, dtype: dt.DType) -> Tensor:
    if x.dtype == dtype:
        return x
    return prim("cast", [x], {}, x.shape, dtype)


def broadcast_to(x: Tensor, shape: Sequence[int], op: str = "expand") -> Tensor:
    shape = tuple(shape)
    if x.shape == shape:
        return x
    if len(shape) < x.ndim or broadcast_shapes(op, x.shape, shape) != shape:
        raise ShapeError(f"{op}: shape {x.shape} cannot be broadcast to {shape}")
    off = len(shape) - x.ndim
    return prim("broadcast_in_dim", [x], {"dims": tuple(range(off, len(shape)))}, shape,
                x.dtype)


def _is_scalar(v: Any) -> bool:
    return isinstance(v, Scalar)


def _check_operand(op: str, v: Any) -> None:
    if not isinstance(v, Tensor) and not _is_scalar(v):
        raise TypeError(f"{op}: expected a Tensor or a Python number, got {type(v).__name__}")


def promote(op: str, *args: Any) -> dt.DType:
    for a in args:
        _check_operand(op, a)
    # Fast path (most ops while recording): every tensor has one dtype and no scalar is
    # of a higher category, so the result is that dtype whatever the tensors' ranks.
    common = None
    for a in args:
        if isinstance(a, Tensor):
            if common is None:
                common = a.dtype
            elif a.dtype != common:
                common = None
                break
    if common is not None and all(isinstance(a, Tensor) or
                                  dt.scalar_category(a) <= common.category for a in args):
        return common
    return dt.result_type([(a.dtype, a.ndim) for a in args if isinstance(a, Tensor)],
                          [a for a in args if not isinstance(a, Tensor)])


_PLAIN_NUMBERS = (builtins.int, builtins.float)   # not bool, not numpy scalars


def operands(op: str, *args: Any, dtype: dt.DType | None = None) -> list[Tensor]:
    """Promote to a common dtype (or ``dtype``) and broadcast to a common shape;
    Python scalars become splat constants of the result shape."""
    if dtype is None and len(args) == 2:
        # the common cases while recording, checked cheaply (what the general path
        # finds): two tensors of one shape and dtype, or a float tensor and a Python number
        a, b = args
        ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
        if ta and tb:
            if a.shape == b.shape and a.dtype == b.dtype:
                return [a, b]
        elif ta and type(b) in _PLAIN_NUMBERS and a.dtype.is_floating_point:
            return [a, _operand_const(b, a.shape, a.dtype, op)]
        elif tb and type(a) in _PLAIN_NUMBERS and b.dtype.is_floating_point:
            return [_operand_const(a, b.shape, b.dtype, op), b]
    common = dtype or promote(op, *args)
    shape = broadcast_shapes(op, *[a.shape for a in args if isinstance(a, Tensor)])
    return [broadcast_to(cast(a, common), shape, op) if isinstance(a, Tensor)
            else _operand_const(a, shape, common, op) for a in args]


def _binary(prim_name: str, op: str, a: Any, b: Any, dtype: dt.DType | None = None) -> Tensor:
    x, y = operands(op, a, b, dtype=dtype)
    if x.dtype in _HALF_FLOATS and prim_name in ("mul", "div") and \
            _half_loses(a if isinstance(b, Tensor) else b, x.dtype):
        x32, y32 = operands(op, a, b, dtype=dt.float32)
        return cast(prim(prim_name, [x32, y32], {}, x.shape, dt.float32), x.dtype)
    return prim(prim_name, [x, y], {}, x.shape, x.dtype)


_HALF_FLOATS = (dt.float16, dt.bfloat16)


def _half_loses(value: Any, dtype: dt.DType) -> bool:
    """Whether a Python float meeting a float16/bfloat16 tensor is not exactly a value
    of that dtype. Then a product or quotient runs in float32 and rounds once, as
    PyTorch's (its mul and div keep the scalar at float32 precision: bfloat16
    1.359375 * 3.3 is 4.5 there, where 3.3 rounded to bfloat16 first gives 4.46875;
    its add and sub round the scalar to the tensor's dtype first, as Nova does)."""
    return type(value) is builtins.float and _rounded_to(value, dtype) != value


# ---------------------------------------------------------------- arithmetic

def _scaled(op: str, a: Any, b: Any, alpha: Any, common: dt.DType) -> Any:
    """``b * alpha`` for add/sub, computed in the result dtype ``common`` as PyTorch's
    kernels do (a uint8 ``b`` beside an int64 or float ``a`` must not wrap at 256 before
    the promotion, and a scalar ``b`` must not turn a 0-d result into int64); ``alpha``
    must fit the result dtype, as in PyTorch (``int32_tensor.add(1, alpha=2**40)``
    raises rather than wrapping), and be an integer for an integer or bool result."""
    if _is_scalar(alpha):
        if not common.is_floating_point and isinstance(alpha, (builtins.float, np.floating)):
            raise DTypeError(f"{op}: for integral input tensors ({common}), argument alpha "
                             f"must not be a floating point number (got {alpha!r})")
        dt.checked_scalar(alpha, common, op)
    if isinstance(b, Tensor):
        return mul(cast(b, common), alpha)
    product = b * alpha
    return builtins.bool(product) if common == dt.bool_ else product


def _widened(op: str, a: Any, b: Any, alpha: Any) -> Tensor | None:
    """``a + alpha * b`` (``-`` for sub) of a float16/bfloat16 result as PyTorch computes
    it: alpha rounded to that dtype, the rest in float32, rounded once; else None."""
    common = promote(op, a, b)
    if common not in _HALF_FLOATS or not _is_scalar(alpha):
        return None
    alpha = _rounded_to(builtins.float(alpha), common)
    x, y = (cast(v, dt.float32) if isinstance(v, Tensor) else v for v in (a, b))
    return cast(_binary(op, op, x, mul(y, alpha)), common)


def _rounded_to(value: builtins.float, dtype: dt.DType) -> builtins.float:
    """``value`` rounded to float16 (from the double) or bfloat16 (through float32), to
    nearest, ties to even: numpy's and ml_dtypes' conversions (``dtype.np``)."""
    with np.errstate(over="ignore"):               # (beyond the range: inf, as rounding gives)
        source = value if dtype == dt.float16 else np.float32(value)
        return builtins.float(np.asarray(source).astype(dtype.np))


def add(input: Any, other: Any, alpha: Any = 1) -> Tensor:
    if alpha != 1:
        if (wide := _widened("add", input, other, alpha)) is not None:
            return wide
        common = promote("add", input, other)
        return _binary("add", "add", input, _scaled("add", input, other, alpha, common),
                       dtype=common)
    return _binary("add", "add", input, other)


def _is_bool(v: Any) -> builtins.bool:
    if isinstance(v, Tensor):
        return v.dtype == dt.bool_
    return isinstance(v, (builtins.bool, np.bool_))


def _check_sub_operands(a: Any, b: Any) -> None:
    """PyTorch refuses a bool operand of ``-``, tensor or Python bool, whatever the
    other one is (``mask - 1`` would read as inverting a mask, and does not)."""
    if _is_bool(a) and _is_bool(b):
        raise DTypeError("sub: subtraction, the `-` operator, with two bool tensors is not "
                         "supported; use the `^` or logical_xor() operator instead")
    if _is_bool(a) or _is_bool(b):
        kinds = " and ".join(_kind(v) for v in (a, b))
        raise DTypeError(f"sub: subtraction, the `-` operator, with a bool tensor is not "
                         f"supported ({kinds}); if you are trying to invert a mask, use the "
                         f"`~` or logical_not() operator instead")


def sub(input: Any, other: Any, alpha: Any = 1) -> Tensor:
    _check_sub_operands(input, other)
    if alpha != 1:
        if (wide := _widened("sub", input, other, alpha)) is not None:
            return wide
        common = promote("sub", input, other)
        return _binary("sub", "sub", input, _scaled("sub", input, other, alpha, common),
                       dtype=common)
    return _binary("sub", "sub", input, other)


def mul(input: Any, other: Any) -> Tensor:
    return _binary("mul", "mul", input, other)


def div(a: Any, b: Any) -> Tensor:
    """True division: integer and bool inputs give float32, as in PyTorch."""
    common = promote("div", a, b)
    return _binary("div", "div", a, b,
                   dtype=common if common.is_floating_point else dt.DEFAULT_FLOAT)


def pow(input: Any, exponent: Any) -> Tensor:
    """``a ** b``; a number exponent of an integer power must fit the integer dtype
    (PyTorch raises for ``int32_tensor ** 2**32`` instead of wrapping the exponent), and
    be non-negative, as PyTorch's; a tensor of negative integer exponents gives the
    truncated ``1 / a ** -b`` (1 for a = 1, +-1 for a = -1, 0 otherwise), as PyTorch's."""
    common = promote("pow", input, exponent)
    if common == dt.bool_:
        return _bool_pow(input, exponent)
    if common.category == dt.INT and _is_scalar(exponent):
        dt.checked_scalar(exponent, common, "pow")
        if exponent < 0:
            raise RuntimeError(f"pow: integers to negative integer powers are not allowed "
                               f"({common} tensor ** {exponent}); use a floating-point exponent "
                               f"({exponent}.0) or a floating-point tensor")
    return _binary("pow", "pow", input, exponent)


def _bool_pow(a: Any, b: Any) -> Tensor:
    """``pow`` of bools, as PyTorch: a bool tensor to a Python bool power is a bool
    tensor (``m ** True`` is ``m``, ``m ** False`` all True); a bool tensor exponent
    of a bool base has no kernel there."""
    if isinstance(a, Tensor) and isinstance(b, builtins.bool):
        return logical_or(a, not b)
    raise DTypeError(f'pow: "pow" is not implemented for bool base and exponent (got '
                     f'{_kind(a)} ** {_kind(b)}); cast one of them to an integer or float '
                     'dtype')


def _kind(v: Any) -> str:
    return f"{v.dtype.name} tensor" if isinstance(v, Tensor) else type(v).__name__


def maximum(input: Any, other: Any) -> Tensor:
    return _binary("maximum", "maximum", input, other)


def minimum(input: Any, other: Any) -> Tensor:
    return _binary("minimum", "minimum", input, other)


def neg(input: Tensor) -> Tensor:
    _check_tensor("neg", input)
    if input.dtype == dt.bool_:
        raise DTypeError("neg: negation of a bool tensor is not supported; use ~ instead")
    return prim("neg", [input], {}, input.shape, input.dtype)


def abs(input: Tensor) -> Tensor:
    _check_tensor("abs", input)
    if input.dtype == dt.bool_:
        return input
    return prim("abs", [input], {}, input.shape, input.dtype)


def with_zero_slope(value: Tensor, old: Tensor) -> Tensor:
    """``value`` bit for bit, with a history that reaches ``old`` with slope zero:
    ``where(False, old, value)``. PyTorch's ops that read a tensor only to select
    (``threshold_backward``) or overwrite it (``copy_``) still pass it a gradient, zero;
    so do a gradient without history (``autograd.engine._linked``) and an in-place
    write that does not read what the tensor held (``Tensor._assign``)."""
    return where(full_const(False, value.shape, dt.bool_), old, value)


def unshared(result: Tensor, *inputs: Tensor) -> Tensor:
    """``result`` as a new tensor of the op that made it: a fresh handle on its value
    (``clone``, with its history) where a shortcut made it one of ``inputs`` (``sum``
    of a 0-d tensor, an ``interpolate`` to the same size) or a view -- of an input, built
    from the public view ops (``pixel_shuffle``'s reshape of a permute). PyTorch's ops
    other than its views return new tensors: an in-place write into such a result (or
    into the input, later) must not show in the other."""
    if result._view is not None or builtins.any(result is x for x in inputs):
        return result.clone()
    return result


def _check_tensor(op: str, x: Any) -> None:
    if not isinstance(x, Tensor):
        if getattr(type(x), "__nova_complex__", False):
            raise complex_unsupported(op, x)
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")


def _float_unary(name: str) -> Any:
    def op(input: Tensor) -> Tensor:
        _check_tensor(name, input)
        input = cast(input, input.dtype if input.dtype.is_floating_point else dt.DEFAULT_FLOAT)
        return prim(name, [input], {}, input.shape, input.dtype)
    op.__name__ = name
    op.__doc__ = f"Elementwise {name}; integer inputs compute in the default dtype."
    return op


exp = _float_unary("exp")
log = _float_unary("log")
sqrt = _float_unary("sqrt")
rsqrt = _float_unary("rsqrt")
reciprocal = _float_unary("reciprocal")
sin = _float_unary("sin")
cos = _float_unary("cos")
tanh = _float_unary("tanh")
erf = _float_unary("erf")
expm1 = _float_unary("expm1")
log1p = _float_unary("log1p")


def square(input: Tensor) -> Tensor:
    """``x * x``; bools square as int64, as in PyTorch (``x ** 2``)."""
    if isinstance(input, Tensor) and input.dtype == dt.bool_:
        input = cast(input, dt.int64)
    return mul(input, input)


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + exp(-x)), computed from ``e = exp(-|x|)`` (at most 1): ``1 / (1 + e)``
    for x >= 0 and ``e / (1 + e)`` below. So every intermediate, and every factor of the
    gradient, is finite for every finite x -- the plain form's gradient is 0 * inf = NaN
    once exp(-x) overflows (x < -88 in float32) -- and tiny results keep their relative
    precision. The exponent is a ``where``, not ``abs``, so the gradient at 0 is 1/4
    (abs's gradient there is 0)."""
    input = _as_float("sigmoid", input)
    nonneg = ge(input, 0.0)
    e = exp(where(nonneg, neg(input), input))
    return div(where(nonneg, 1.0, e), add(e, 1.0))


def relu(input: Tensor) -> Tensor:
    """``where(x <= 0, 0, x)``: NaN passes through and the gradient at 0 is 0, as in
    PyTorch."""
    _check_tensor("relu", input)
    return where(le(input, 0), 0, input)


@stamped
def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x * Phi(x) with the exact erf form, or PyTorch's ``approximate='tanh'`` form
    ``0.5 x (1 + tanh(u))``, u = sqrt(2/pi) (x + 0.044715 x^3).

    The tanh form is computed as the identical ``x * sigmoid(2u)`` (the stable sigmoid:
    no cancellation in 1 + tanh(u) for negative x), with the cube taken of x clamped to
    half the cube root of the dtype's largest value, where sigmoid(2u) is already exactly
    0 or 1: so x^3 never overflows, and the gradient at huge finite x is 1 or 0 instead
    of inf * 0 = NaN. The clamp uses maximum/minimum, whose gradient multiplies, so at
    x = +-inf the gradient is NaN, as PyTorch's is. Float16/bfloat16 in float32, rounded
    once, as PyTorch's kernels: rounded at every step, float16's erf form lost the
    whole negative tail (gelu(-3.7) was -0 for -0.0004)."""
    input = _as_float("gelu", input)
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")

    def evaluate(x: Tensor) -> Tensor:
        if approximate == "none":
            return mul(mul(x, 0.5), add(erf(mul(x, 1.0 / math.sqrt(2.0))), 1.0))
        bound = float(np.cbrt(dt.float_max(x.dtype))) / 2
        xc = minimum(maximum(x, -bound), bound)
        two_u = mul(add(xc, mul(mul(mul(xc, xc), xc), 0.044715)), math.sqrt(8.0 / math.pi))
        return mul(x, sigmoid(two_u))
    return _in_float32(input, evaluate)


def silu(x: Tensor) -> Tensor:
    """x * sigmoid(x)."""
    x = _as_float("silu", x)
    return mul(x, sigmoid(x))


def _as_float(op: str, x: Any) -> Tensor:
    _check_tensor(op, x)
    return cast(x, x.dtype if x.dtype.is_floating_point else dt.DEFAULT_FLOAT)


def clamp(input: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """Limit to [min, max] (``max`` wins if min > max). Written with ``where`` so the
    gradient passes where min <= x <= max (inclusive) and NaN propagates, as in PyTorch:
    a NaN in ``input`` stays, and so does a NaN bound (``clamp(x, min=nan)`` is all NaN)."""
    _check_tensor("clamp", input)
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    if input.dtype.category == dt.INT:     # an int bound the dtype cannot hold: name clamp
        for bound in (min, max):
            if isinstance(bound, (builtins.int, np.integer)) and not isinstance(bound, builtins.bool):
                dt.operand_scalar(bound, input.dtype, "clamp")
    if isinstance(min, Tensor) and isinstance(max, Tensor):
        # one promotion over all three, as PyTorch's: promoting pairwise lets a 0-d
        # bound of a higher category outrank a dimensioned one (int32 x, float64 0-d
        # min, float32 max gave float64; PyTorch float32)
        common = promote("clamp", input, min, max)
        input, min, max = cast(input, common), cast(min, common), cast(max, common)
    out = input
    if min is not None:
        out = _select("clamp", _beyond("lt", out, min), min, out)
    if max is not None:
        out = _select("clamp", _beyond("gt", out, max), max, out)
    return out


def _beyond(direction: str, x: Tensor, bound: Any) -> Tensor:
    """Where clamp replaces ``x`` by ``bound``: ``x`` past it, or the bound NaN."""
    past = _compare(direction, x, bound)
    if isinstance(bound, Tensor):
        return logical_or(past, isnan(bound)) if bound.dtype.is_floating_point else past
    if isinstance(bound, (builtins.float, np.floating)) and math.isnan(bound):
        return full_const(True, past.shape, dt.bool_)
    return past


clip = clamp


def zero_gradient_to(out: Tensor, *inputs: Any) -> Tensor:
    """``out`` unchanged, with a zero gradient to each of ``inputs`` that requires grad.
    PyTorch records a GradFn for ops whose derivative is zero almost everywhere
    (``sign``, ``copysign``'s sign operand), so their ``.grad`` is zeros, not None, and
    an optimizer still applies weight decay and momentum to such a parameter. A
    ``where`` on a constant False condition: the value is ``out``'s, bit for bit."""
    if grad_mode.STATE.enabled:
        for x in inputs:
            if isinstance(x, Tensor) and x.requires_grad:
                out = where(full_const(False, out.shape, dt.bool_), x, out)
    return out


_NOT_GIVEN: Any = object()


def where(condition: Tensor, input: Any = _NOT_GIVEN, other: Any = _NOT_GIVEN) -> Any:
    """``input`` where ``condition`` else ``other``; a number must fit the result dtype (PyTorch
    raises for ``where(c, int32_tensor, 2**40)``). ``where(cond)`` alone is
    ``nonzero(cond, as_tuple=True)`` (reads ``condition`` on the host)."""
    if input is _NOT_GIVEN and other is _NOT_GIVEN:
        from nova.tensor.data_dependent import nonzero
        return nonzero(condition, as_tuple=True)
    if input is _NOT_GIVEN or other is _NOT_GIVEN:
        raise TypeError("where: give both input and other, or neither (where(condition) "
                        "is nonzero(condition, as_tuple=True))")
    return _select("where", condition, input, other)


def _select(op: str, cond: Tensor, a: Any, b: Any) -> Tensor:
    """``where`` on behalf of ``op`` (so errors name the op the user called)."""
    _check_tensor(op, cond)
    if cond.dtype != dt.bool_:
        raise DTypeError(f"{op}: condition must be a bool tensor, got {cond.dtype.name}")
    common = promote(op, a, b)
    shape = broadcast_shapes(op, cond.shape,
                             *[v.shape for v in (a, b) if isinstance(v, Tensor)])
    x, y = (broadcast_to(cast(v, common), shape, op) if isinstance(v, Tensor)
            else full_const(v, shape, common, op) for v in (a, b))
    return prim("where", [broadcast_to(cond, shape, op), x, y], {}, shape, common)


def masked_fill(input: Tensor, mask: Tensor, value: Any, op: str = "masked_fill") -> Tensor:
    """``value`` where ``mask`` holds, else ``input``, over their broadcast shape (as
    PyTorch's out-of-place ``masked_fill``; ``masked_fill_`` (``op``) needs a mask that
    broadcasts to the tensor's own shape)."""
    _check_tensor(op, input)
    _check_tensor(op, mask)
    if mask.dtype != dt.bool_:
        raise DTypeError(f"{op}: mask must be a bool tensor, got {mask.dtype.name}")
    shape = broadcast_shapes(op, input.shape, mask.shape)
    if op == "masked_fill_" and shape != input.shape:
        raise ShapeError(f"masked_fill_: mask of shape {mask.shape} cannot be broadcast to "
                         f"the tensor's shape {input.shape}")
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise ValueError(f"{op}: value must be a number or a 0-d tensor, got shape "
                             f"{value.shape}")
        value = cast(value, input.dtype)
    else:
        value = full_const(value, shape, input.dtype, op)
    return where(mask, value, input)


# ---------------------------------------------------------------- comparisons, logic

def _compare(direction: str, a: Any, b: Any) -> Tensor:
    folded = _compare_beyond_range(direction, a, b)
    if folded is not None:
        return folded
    x, y = operands(direction, a, b)
    return prim("compare", [x, y], {"direction": direction}, x.shape, dt.bool_)


_MIRROR = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


def _compare_beyond_range(direction: str, a: Any, b: Any) -> Tensor | None:
    """``int32_tensor < 2**40`` and the like: a Python int beyond the integer tensor's
    range cannot be converted to its dtype (arithmetic with it raises), but every
    comparison with it has one answer for all elements, which numpy 2 gives too (PyTorch
    wraps the number and answers wrongly). None when the comparison is an ordinary one."""
    if isinstance(a, Tensor) and _is_python_int(b):
        t, v = a, builtins.int(b)
    elif isinstance(b, Tensor) and _is_python_int(a):
        t, v, direction = b, builtins.int(a), _MIRROR[direction]   # v op t == t op' v
    else:
        return None
    if t.dtype.category != dt.INT:
        return None
    lo, hi = dt.int_bounds(t.dtype)
    if lo <= v <= hi:
        return None
    above = v > hi                     # every element is below v (else above it)
    answer = {"lt": above, "le": above, "gt": not above, "ge": not above,
              "eq": False, "ne": True}[direction]
    return full_const(answer, t.shape, dt.bool_)


def _is_python_int(v: Any) -> builtins.bool:
    return isinstance(v, (builtins.int, np.integer)) and not isinstance(v, (builtins.bool,
                                                                            np.bool_))


def lt(input: Any, other: Any) -> Tensor: return _compare("lt", input, other)
def le(input: Any, other: Any) -> Tensor: return _compare("le", input, other)
def gt(input: Any, other: Any) -> Tensor: return _compare("gt", input, other)
def ge(input: Any, other: Any) -> Tensor: return _compare("ge", input, other)
def eq(input: Any, other: Any) -> Tensor: return _compare("eq", input, other)
def ne(input: Any, other: Any) -> Tensor: return _compare("ne", input, other)


def _as_bool(v: Any) -> Any:
    if isinstance(v, Tensor):
        return v if v.dtype == dt.bool_ else ne(v, 0)
    return builtins.bool(v)


def logical_not(input: Tensor) -> Tensor:
    return eq(_as_bool(input), False)


def logical_and(input: Any, other: Any) -> Tensor:
    return _binary("mul", "logical_and", _as_bool(input), _as_bool(other))


def logical_or(input: Any, other: Any) -> Tensor:
    return _binary("add", "logical_or", _as_bool(input), _as_bool(other))


def logical_xor(input: Any, other: Any) -> Tensor:
    return ne(_as_bool(input), _as_bool(other))


def _bitwise_dtype(op: str, *args: Any) -> dt.DType:
    """The common dtype of a bit operation's operands: integer or bool, as PyTorch's
    ``bitwise_*`` accept (floats raise at the user's line)."""
    common = promote(op, *args)
    if common.is_floating_point:
        got = ", ".join(a.dtype.name if isinstance(a, Tensor) else type(a).__name__
                        for a in args)
        raise DTypeError(f"{op}: expected integer or bool operands, got {got} (a bit "
                         f"operation is not defined on floating point; compare first, or "
                         f"cast with .to(nova.int32))")
    return common


def bitwise_and(input: Any, other: Any) -> Tensor:
    """``a & b``: bitwise on integers (two's complement), logical on bools."""
    if _bitwise_dtype("bitwise_and", input, other) == dt.bool_:
        return logical_and(input, other)
    return _binary("and", "bitwise_and", input, other)


def bitwise_or(input: Any, other: Any) -> Tensor:
    """``a | b``: bitwise on integers (two's complement), logical on bools."""
    if _bitwise_dtype("bitwise_or", input, other) == dt.bool_:
        return logical_or(input, other)
    return _binary("or", "bitwise_or", input, other)


def bitwise_xor(input: Any, other: Any) -> Tensor:
    """``a ^ b``: bitwise on integers (two's complement), logical on bools."""
    if _bitwise_dtype("bitwise_xor", input, other) == dt.bool_:
        return logical_xor(input, other)
    return _binary("xor", "bitwise_xor", input, other)


def bitwise_not(input: Tensor) -> Tensor:
    """``~x``: the bitwise complement of integers (``-x - 1``), logical not of bools."""
    _check_tensor("bitwise_not", input)
    if _bitwise_dtype("bitwise_not", input) == dt.bool_:
        return logical_not(input)
    return prim("not", [input], {}, input.shape, input.dtype)


def isnan(input: Tensor) -> Tensor:
    return ne(input, input)


def isinf(input: Tensor) -> Tensor:
    if not input.dtype.is_floating_point:
        return full_const(False, input.shape, dt.bool_)
    return eq(abs(input), math.inf)


# ---------------------------------------------------------------- reductions

def reduction_axes(op: str, dim: Any, ndim: builtins.int,
                   shape: tuple[int, ...]) -> tuple[int, ...]:
    """The axes a reduction's ``dim`` names, sorted: every axis for ``None`` and, as in
    PyTorch's reductions, for an empty tuple or list too (``x.sum(())`` is ``x.sum()``).
    (``normalize_dims`` keeps ``()`` as no axes: that is right for its other users.)"""
    if isinstance(dim, (tuple, list)) and not dim:
        dim = None
    return normalize_dims(op, dim, ndim, shape)


def _in_float32(x: Tensor, fn: Callable[[Tensor], Tensor]) -> Tensor:
    """``fn(x)``, evaluated on float16/bfloat16 ``x`` in float32 and rounded once to
    ``x``'s dtype, as PyTorch's reductions accumulate the half types: in the half dtype
    itself, ``full((1024,), 100.0, float16).mean()`` was inf (its sum, 102400, is past
    float16's 65504 before the division) and a variance's squares overflow at 256.
    Other dtypes are ``fn(x)`` as they are."""
    return _rounded_once(x.dtype, fn, x)


def _rounded_once(dtype: dt.DType, fn: Callable[..., Tensor], *args: Any) -> Tensor:
    """``fn(*args)``; for a float16/bfloat16 result ``dtype``, with the tensor arguments
    in float32 and the result rounded once to ``dtype``, as PyTorch's CPU kernels
    compute the half types (``_in_float32`` for one operand; rounded after each step,
    float16 ``lerp`` was off by ~490 ulp and ``addcmul`` by ~15)."""
    if dtype not in _HALF_FLOATS:
        return fn(*args)
    up = [cast(a, dt.float32) if isinstance(a, Tensor) else a for a in args]
    return cast(fn(*up), dtype)


def _reduce(prim_name: str, op: str, x: Tensor, dim: Any, keepdim: builtins.bool) -> Tensor:
    _check_tensor(op, x)
    axes = reduction_axes(op, dim, x.ndim, x.shape)
    out_shape = tuple(n for i, n in enumerate(x.shape) if i not in axes)
    r = prim(prim_name, [x], {"axes": axes}, out_shape, x.dtype) if axes else x.clone()
    if keepdim:
        kept = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
        r = prim("reshape", [r], {}, kept, r.dtype) if r.shape != kept else r
    return r


def sum(input: Tensor, dim: Any = None, keepdim: builtins.bool = False, *,
        dtype: Any = None) -> Tensor:
    """Sum over ``dim`` (all dims if None or empty); bool and integer inputs sum in
    int64. (The ``reduce_sum`` primitive accumulates float16/bfloat16 widely and
    rounds once, as PyTorch's sum: only a sum the dtype cannot hold is inf.)"""
    _check_tensor("sum", input)
    if dtype is not None:
        input = cast(input, dt.get_dtype(dtype))
    elif input.dtype.category != dt.FLOAT:
        input = cast(input, dt.int64)
    return _reduce("reduce_sum", "sum", input, dim, keepdim)


def mean(input: Tensor, dim: Any = None, keepdim: builtins.bool = False, *,
         dtype: Any = None) -> Tensor:
    """Mean over ``dim`` (all dims if None or empty); float16/bfloat16 in float32,
    rounded once (``_in_float32``)."""
    _check_tensor("mean", input)
    if dtype is not None:
        input = cast(input, dt.get_dtype(dtype))
    if not input.dtype.is_floating_point:
        raise DTypeError(f"mean: input dtype must be floating point, got {input.dtype.name}; "
                         "call .float() first")
    axes = reduction_axes("mean", dim, input.ndim, input.shape)
    count = numel(tuple(input.shape[a] for a in axes))
    return _in_float32(input, lambda w: mul(_reduce("reduce_sum", "mean", w, axes, keepdim),
                                        1.0 / count if count else math.nan))


def _check_nonempty(op: str, x: Tensor, axes: tuple[int, ...]) -> None:
    if any(x.shape[a] == 0 for a in axes) or (x.ndim == 0 and x.numel() == 0):
        raise IndexRangeError(f"{op}: cannot reduce over a zero-size dimension of shape "
                              f"{x.shape}")


def amax(input: Tensor, dim: Any = None, keepdim: builtins.bool = False) -> Tensor:
    """The largest value over ``dim`` (all dims if None or empty); a gradient is split
    evenly among tied maxima (PyTorch's ``amax`` rule; ``max(dim)`` differs)."""
    _check_tensor("amax", input)
    _check_nonempty("amax", input, reduction_axes("amax", dim, input.ndim, input.shape))
    return _reduce("reduce_max", "amax", input, dim, keepdim)


def amin(input: Tensor, dim: Any = None, keepdim: builtins.bool = False) -> Tensor:
    """The smallest value over ``dim``: ``-amax(-x)`` for floats; ``~amax(~x)`` for
    integers, where ``~`` reverses the order with no overflow (``-x`` wraps: -0 is 0 in
    uint8 and -(-128) is -128 in int8, so ``-amax(-x)`` missed a uint8 0 and an int8's
    or int32's smallest value)."""
    _check_tensor("amin", input)
    if input.dtype == dt.bool_:
        return logical_not(amax(logical_not(input), dim, keepdim))
    if input.dtype.category == dt.INT:
        return bitwise_not(amax(bitwise_not(input), dim, keepdim))
    return neg(amax(neg(input), dim, keepdim))


MaxResult = namedtuple("max", ["values", "indices"])
MinResult = namedtuple("min", ["values", "indices"])


def _other_form(op: str, dim: Any, keepdim: Any, other: Any) -> Any:
    """``max``/``min``'s elementwise form given as ``other=``: the tensor (only with no
    ``dim``/``keepdim``, as PyTorch's overloads), else None."""
    if other is None:
        return None
    if dim is not None or keepdim:
        raise TypeError(f"{op}() takes either dim (and keepdim) or other=, not both")
    return other


def max(input: Tensor, dim: Any = None, keepdim: builtins.bool = False, *,
        other: Any = None):
    """``max(x)`` -> 0-d tensor; ``max(x, dim)`` -> (values, indices); ``max(x, y)`` (or
    ``other=y``) -> elementwise maximum, as in PyTorch."""
    if other is not None:
        dim = _other_form("max", dim, keepdim, other)
    if isinstance(dim, Tensor):
        return maximum(input, dim)
    if dim is None:
        return shared_by_ties(input, amax(input))
    return MaxResult(*_extreme_at_index("max", input, dim, keepdim, True))


def min(input: Tensor, dim: Any = None, keepdim: builtins.bool = False, *,
        other: Any = None):
    if other is not None:
        dim = _other_form("min", dim, keepdim, other)
    if isinstance(dim, Tensor):
        return minimum(input, dim)
    if dim is None:
        return shared_by_ties(input, amin(input))
    return MinResult(*_extreme_at_index("min", input, dim, keepdim, False))


def shared_by_ties(x: Tensor, value: Tensor) -> Tensor:
    """``value`` (0-d: one of ``x``'s elements, as ``max()``, ``min()`` or ``median()``
    of all of ``x``) with PyTorch's gradient for such a reduction: shared evenly by the
    elements equal to it, or by the NaNs when it is NaN (``amax``'s rule gives a NaN
    nothing). The value is ``value``'s bit for bit: a finite one minus a zero made of
    ``v - v`` of the tied elements (subtracting keeps a zero's sign), an infinite or NaN
    one the sum of the ties each divided by their count. Only built when ``x`` takes a
    gradient."""
    if not (grad_mode.STATE.enabled and x.requires_grad and x.dtype.is_floating_point):
        return value
    v = unaliased_detach(value)
    tied = logical_or(eq(x, v), logical_and(isnan(x), isnan(v)))
    count = sum(cast(tied, x.dtype))
    zero = div(sum(where(tied, sub(unaliased_detach(x), x), 0.0)), count)
    ties = sum(where(tied, div(x, count), 0.0))
    return where(lt(abs(v), math.inf), sub(v, zero), ties)


def _extreme_at_index(op: str, x: Tensor, dim: Any, keepdim: builtins.bool,
                      largest: builtins.bool) -> tuple[Tensor, Tensor]:
    """``max(x, dim)``/``min(x, dim)``: the indices of the first extreme, and the values
    gathered at them, so the whole gradient goes to the returned index as in PyTorch
    (``amax``'s rule would split it among ties: ``[1, 3, 3]`` gave ``[0, .5, .5]``)."""
    index = _arg_extreme(op, x, dim, True, largest)
    if x.ndim == 0:
        return x.clone(), index           # (a new tensor, as PyTorch's)
    d = normalize_dim(op, dim, x.ndim, x.shape)
    values = gather(x, d, index)
    if keepdim:
        return values, index
    shape = x.shape[:d] + x.shape[d + 1:]
    return prim("reshape", [values], {}, shape, x.dtype), prim("reshape", [index], {}, shape,
                                                                 index.dtype)


def _arg_extreme(op: str, x: Tensor, dim: Any, keepdim: builtins.bool, largest: builtins.bool) -> Tensor:
    _check_tensor(op, x)
    if dim is None:
        flat = prim("reshape", [x], {}, (x.numel(),), x.dtype) if x.ndim != 1 else x
        r = _arg_extreme(op, flat, 0, False, largest)
        return prim("reshape", [r], {}, (1,) * x.ndim, dt.int64) if keepdim else r
    if not isinstance(dim, builtins.int):
        raise TypeError(f"{op}: dim must be an int or None, got {dim!r}")
    d = normalize_dim(op, dim, x.ndim, x.shape)
    if x.ndim == 0:
        return full_const(0, (), dt.int64)
    _check_nonempty(op, x, (d,))
    v = x if x.dtype != dt.bool_ else cast(x, dt.int32)
    ext = amax(v, d, True) if largest else amin(v, d, True)
    # First index where the extreme occurs (NaN counts as the extreme, as in PyTorch).
    hit = logical_or(eq(v, ext), isnan(v)) if v.dtype.is_floating_point else eq(v, ext)
    idx = prim("iota", [], {"dim": d}, x.shape, dt.int64)
    n = x.shape[d]
    cand = where(hit, idx, n)
    return amin(cand, d, keepdim)


def argmax(input: Tensor, dim: Any = None, keepdim: builtins.bool = False) -> Tensor:
    return _arg_extreme("argmax", input, dim, keepdim, True)


def argmin(input: Tensor, dim: Any = None, keepdim: builtins.bool = False) -> Tensor:
    return _arg_extreme("argmin", input, dim, keepdim, False)


def _correction(op: str, dim: Any, unbiased: Any, keepdim: Any, correction: Any
                ) -> tuple[Any, Any]:
    """``(dim, correction)`` from PyTorch's three forms of ``var``/``std`` (and their
    ``_mean`` pairs): ``(input, dim=None, *, correction=1, keepdim=False)``, ``(input,
    dim, unbiased, keepdim=False)`` and ``(input, unbiased)`` -- a bool where ``dim``
    goes is ``unbiased``, so ``x.var(False)`` is the population variance."""
    if isinstance(dim, (builtins.bool, np.bool_)):
        if unbiased is not None or keepdim or correction is not None:
            raise TypeError(f"{op}: a bool in dim's place ({dim!r}) is unbiased, PyTorch's "
                            f"(input, unbiased) form, which takes no other arguments; got "
                            f"unbiased={unbiased!r}, keepdim={keepdim!r}, correction="
                            f"{correction!r} too (give the dims first: {op}(x, dim, unbiased, "
                            f"keepdim))")
        return None, 1 if dim else 0
    if unbiased is None:
        return dim, 1 if correction is None else correction
    if not isinstance(unbiased, (builtins.bool, np.bool_)):
        raise TypeError(f"{op}: unbiased must be a bool, got {unbiased!r} (for another "
                        f"correction use correction={unbiased!r})")
    if correction is not None:
        raise TypeError(f"{op}: give unbiased ({unbiased}) or correction ({correction}), "
                        "not both")
    return dim, 1 if unbiased else 0


def var(input: Tensor, dim: Any = None, unbiased: Any = None, keepdim: builtins.bool = False, *,
        correction: Any = None) -> Tensor:
    """Variance with Bessel's ``correction`` (default 1; ``unbiased=False`` means 0) over
    ``dim`` (all dims if None or empty); float16/bfloat16 in float32, rounded once.
    PyTorch's three forms (``_correction``): ``x.var(False)`` is ``unbiased=False``."""
    dim, correction = _correction("var", dim, unbiased, keepdim, correction)
    input = _float_only("var", input)
    axes = reduction_axes("var", dim, input.ndim, input.shape)
    n = numel(tuple(input.shape[a] for a in axes))
    denom = builtins.max(n - correction, 0)

    def evaluate(w: Tensor) -> Tensor:
        centered = sub(w, mean(w, axes, keepdim=True))
        total = sum(mul(centered, centered), axes, keepdim)
        return mul(total, 1.0 / denom) if denom else div(total, 0.0)

    return _in_float32(input, evaluate)


def std(input: Tensor, dim: Any = None, unbiased: Any = None, keepdim: builtins.bool = False, *,
        correction: Any = None) -> Tensor:
    """``sqrt(var)`` of the deviations ``c = x - mean(x)`` scaled by their largest
    magnitude ``s`` (no gradient) and scaled back: ``s * std(c / s)`` is the same
    function, and its squares can neither overflow (float32 values past 1.8e19:
    ``std([1e30, -1e30])`` was inf, PyTorch's 1.4e30) nor underflow. The mean is taken
    of ``input`` scaled by its own largest magnitude (so its sum cannot overflow either),
    and the deviations are scaled, not ``input``: scaling ``input`` rounded every element by
    half an ulp of its magnitude, which is all of a small spread's precision
    (``std([1000, 1000.01, 1000.02, 1000.03])`` was 0.0129279 for 0.0129226). Where the
    result is 0 (constant data) the gradient is 0, as PyTorch's, not sqrt's infinite
    slope times var's zero (NaN). Float16/bfloat16 in float32, rounded once. PyTorch's
    three forms, as ``var``."""
    dim, correction = _correction("std", dim, unbiased, keepdim, correction)
    input = _float_only("std", input)
    axes = reduction_axes("std", dim, input.ndim, input.shape)
    if any(input.shape[a] == 0 for a in axes):     # NaN, as PyTorch's (no max to scale by)
        return sqrt(var(input, axes, keepdim=keepdim, correction=correction))

    def largest(t: Tensor) -> Tensor:       # max |t| over the axes, 1 where it is 0
        m = unaliased_detach(amax(abs(t), axes, keepdim=True))
        return where(eq(m, 0), 1.0, m)

    def evaluate(w: Tensor) -> Tensor:
        scale = largest(w)
        # deviations halved where |x| reaches 1 (exact there), so that x - mean cannot
        # overflow (|x - mean| < 2 max|x|): std([3e38, 3e38, -3e38]) is 3.46e38
        halved = ge(scale, 1.0)
        half = where(halved, 0.5, 1.0)
        m = mul(mean(div(w, scale), axes, keepdim=True), scale)
        c = sub(mul(w, half), mul(m, half))
        s = largest(c)
        v = var(div(c, s), axes, keepdim=True, correction=correction)
        out = mul(mul(_root_at_zero(v, sqrt), s), where(halved, 2.0, 1.0))
        if keepdim:
            return out
        shape = tuple(n for k, n in enumerate(out.shape) if k not in axes)
        return prim("reshape", [out], {}, shape, out.dtype)

    return _in_float32(input, evaluate)


def var_mean(input: Tensor, dim: Any = None, unbiased: Any = None,
             keepdim: builtins.bool = False, *, correction: Any = None
             ) -> tuple[Tensor, Tensor]:
    """``(var, mean)`` in one call (``torch.var_mean``), in ``var``'s three forms."""
    dim, correction = _correction("var_mean", dim, unbiased, keepdim, correction)
    return (var(input, dim, keepdim=keepdim, correction=correction),
            mean(_float_only("var_mean", input), dim, keepdim))


def std_mean(input: Tensor, dim: Any = None, unbiased: Any = None,
             keepdim: builtins.bool = False, *, correction: Any = None
             ) -> tuple[Tensor, Tensor]:
    """``(std, mean)`` in one call (``torch.std_mean``), in ``var``'s three forms."""
    dim, correction = _correction("std_mean", dim, unbiased, keepdim, correction)
    return (std(input, dim, keepdim=keepdim, correction=correction),
            mean(_float_only("std_mean", input), dim, keepdim))


def _root_at_zero(total: Tensor, root, at_zero: builtins.float = 0.0) -> Tensor:
    """``root(total)`` whose gradient is 0, not NaN, where ``total`` is 0 (a zero
    vector's norm, a constant's std: the root's slope there is infinite and the sum's
    is 0), as PyTorch's norm and std give; the value is unchanged (``at_zero``:
    ``root(0)``, inf for a negative order's root). The root sees 1 there, so neither
    branch of the ``where`` has an infinite derivative."""
    zero = eq(total, 0)
    return where(zero, at_zero, root(where(zero, 1.0, total)))


def _float_only(op: str, x: Any) -> Tensor:
    _check_tensor(op, x)
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{op}: input dtype must be floating point, got {x.dtype.name}")
    return x


def _row_shift(x: Tensor, dims: Any) -> Tensor:
    """The max along ``dims``, subtracted for numerical stability only. softmax,
    log_softmax and logsumexp are exactly invariant to it (f(x - c) = f(x) resp.
    f(x) - c), so it carries no gradient: the backward pass never differentiates the
    max, and need not keep its input alive (PyTorch's softmax backward likewise uses
    only the output)."""
    return unaliased_detach(amax(x, dims, keepdim=True))


def logsumexp(input: Tensor, dim: Any, keepdim: builtins.bool = False) -> Tensor:
    """log(sum(exp(x))) computed stably around the max (rows of -inf give -inf). Over
    an empty dim it is log(0) = -inf, as PyTorch's (there is no max to shift by)."""
    input = _as_float("logsumexp", input)
    axes = reduction_axes("logsumexp", dim, input.ndim, input.shape)
    if any(input.shape[a] == 0 for a in axes):
        out = log(sum(exp(input), axes, keepdim=True))
    else:
        m = _row_shift(input, axes)
        m = where(isinf(m), 0.0, m)
        out = add(log(sum(exp(sub(input, m)), axes, keepdim=True)), m)
    if not keepdim and axes:
        out = prim("reshape", [out], {},
                   tuple(n for i, n in enumerate(input.shape) if i not in axes), out.dtype)
    return out


@stamped
def softmax(input: Tensor, dim: builtins.int = -1, dtype: Any = None) -> Tensor:
    input = _autocast.full_precision(input, cuda_only=True) if isinstance(input, Tensor) else input
    input = _as_float("softmax", input if dtype is None else cast(input, dt.get_dtype(dtype)))
    d = normalize_dim("softmax", dim, input.ndim, input.shape)

    def evaluate(w: Tensor) -> Tensor:     # (half types in float32, rounded once)
        e = exp(sub(w, _row_shift(w, d)))
        return div(e, sum(e, d, keepdim=True))
    return _in_float32(input, evaluate)


@stamped
def log_softmax(input: Tensor, dim: builtins.int = -1, dtype: Any = None) -> Tensor:
    input = _autocast.full_precision(input, cuda_only=True) if isinstance(input, Tensor) else input
    input = _as_float("log_softmax", input if dtype is None else cast(input, dt.get_dtype(dtype)))
    d = normalize_dim("log_softmax", dim, input.ndim, input.shape)

    def evaluate(w: Tensor) -> Tensor:     # (half types in float32, rounded once)
        shifted = sub(w, _row_shift(w, d))
        return sub(shifted, log(sum(exp(shifted), d, keepdim=True)))
    return _in_float32(input, evaluate)


# ---------------------------------------------------------------- contraction

def matmul(input: Tensor, other: Tensor) -> Tensor:
    """``@`` with PyTorch's rules: 1-D operands are promoted and the added dim removed,
    batch dims broadcast."""
    a, b = input, other
    _check_tensor("matmul", a)
    _check_tensor("matmul", b)
    if _autocast.LOWER.get() is not None:
        a, b = _autocast.lowered(a), _autocast.lowered(b)
    sa, sb, dtype = a.shape, b.shape, a.dtype
    if not sa or not sb:
        raise ValueError(f"matmul: both arguments need at least 1 dim, got shapes {sa} "
                         f"and {sb}")
    if dtype != b.dtype:
        raise DTypeError(f"matmul: expected both operands to have the same dtype, got "
                         f"{dtype.name} and {b.dtype.name}")
    if dtype == dt.bool_:
        raise DTypeError("matmul: not implemented for bool tensors")
    x, xs = (a, sa) if len(sa) > 1 else (prim("reshape", [a], {}, (1, sa[0]), dtype),
                                         (1, sa[0]))
    y, ys = (b, sb) if len(sb) > 1 else (prim("reshape", [b], {}, (sb[0], 1), dtype),
                                         (sb[0], 1))
    if xs[-1] != ys[-2]:
        raise ShapeError(f"matmul: {sa} @ {sb}: inner dims {xs[-1]} != {ys[-2]}")
    if len(xs) > 2 and len(ys) == 2:
        # A batch of rows times one matrix (a linear layer on (batch, tokens, features))
        # is one product, as in PyTorch: the batch folds into M. The matrix is then packed
        # once, not once per batch element, and its gradient is one product over every
        # row (K = batch x tokens) instead of a batch of products and a sum over them.
        rows = numel(xs[:-1])
        flat = prim("reshape", [x], {}, (rows, xs[-1]), dtype)
        out = prim("matmul", [flat, y], {}, (rows, ys[-1]), dtype)
        return prim("reshape", [out], {}, xs[:-1] + (ys[-1],) * (len(sb) > 1), dtype)
    batch = xs[:-2]
    if ys[:-2] != batch:
        batch = broadcast_shapes("matmul", batch, ys[:-2])
        x = broadcast_to(x, batch + xs[-2:], "matmul")
        y = broadcast_to(y, batch + ys[-2:], "matmul")
    out_shape = batch + (xs[-2], ys[-1])
    out = prim("matmul", [x, y], {}, out_shape, dtype)
    final = batch + (xs[-2],) * (len(sa) > 1) + (ys[-1],) * (len(sb) > 1)
    return prim("reshape", [out], {}, final, dtype) if final != out_shape else out


def out_dtype_of(op: str, x: Any, out_dtype: Any) -> dt.DType | None:
    """PyTorch's ``out_dtype`` of ``mm``/``bmm``/``addmm``/``baddbmm``: None where the
    product keeps the operands' dtype (no ``out_dtype``, or theirs), float32 for
    float16/bfloat16 operands, whose product is then computed and returned in float32
    instead of rounded to 16 bits; any other is PyTorch's RuntimeError."""
    if out_dtype is None:
        return None
    want = dt.get_dtype(out_dtype)
    have = x.dtype if isinstance(x, Tensor) else None
    if want == have:
        return None
    if want == dt.float32 and have in (dt.float16, dt.bfloat16):
        return want
    raise RuntimeError(f"{op}: out_dtype must be the same as input dtype or fp32 for "
                       f"fp16/bf16 inputs, got out_dtype={want.name} for "
                       f"{getattr(have, 'name', type(x).__name__)} inputs")


def mm(input: Tensor, mat2: Tensor, out_dtype: Any = None) -> Tensor:
    """The matrix product ``input @ mat2`` (``torch.mm``), in ``out_dtype`` if given
    (``out_dtype_of``)."""
    wide = out_dtype_of("mm", input, out_dtype)
    if wide is not None:
        input, mat2 = cast(input, wide), cast(mat2, wide)
    return matmul(input, mat2)


def bmm(input: Tensor, mat2: Tensor, out_dtype: Any = None) -> Tensor:
    """The batched matrix product ``input @ mat2`` (``torch.bmm``), in ``out_dtype`` if
    given (``out_dtype_of``)."""
    wide = out_dtype_of("bmm", input, out_dtype)
    if wide is not None:
        input, mat2 = cast(input, wide), cast(mat2, wide)
    return matmul(input, mat2)


# ---------------------------------------------------------------- indexing-like

def known_index_values(index: Tensor) -> np.ndarray | None:
    """The values of ``index`` when they are in host memory already (a CPU tensor made
    from Python data or numpy, not computed since): then index checks run at the user's
    line instead of failing the step that uses them -- and so do the other checks of
    values PyTorch makes on the host (``multinomial``'s weights, ``bernoulli``'s
    probabilities). Device buffers are not read (that would wait for the device); their
    kernels check them."""
    node = index.node
    buf = node.buffer
    return buf if node.device != "cuda" and isinstance(buf, np.ndarray) else None


def check_index_values(op: str, index: Tensor, dim: builtins.int, shape: tuple[int, ...],
                       negative: builtins.bool) -> None:
    """IndexError at the user's line if a known value of ``index`` is outside dim
    ``dim`` of ``shape`` (``[-n, n)`` when ``negative`` indices wrap, else ``[0, n)``).
    Unknown values are checked when the step runs, by the kernels."""
    values = known_index_values(index)
    if values is None or values.size == 0:
        return
    n = shape[dim] if shape else 1
    bad = (values < (-n if negative else 0)) | (values >= n)
    if bad.any():
        raise IndexRangeError(f"{op}: index {values[bad].flat[0]} is out of bounds for dim "
                              f"{dim} with size {n} (shape {shape})")


def _as_1d(t: Tensor) -> Tensor:
    return prim("reshape", [t], {}, (1,), t.dtype)


def gather(input: Tensor, dim: builtins.int, index: Tensor, *,
           sparse_grad: builtins.bool = False) -> Tensor:
    """``torch.gather``: ``out[i][j] = x[index[i][j]][j]`` for dim=0 (and so on). Index
    values must lie in ``[0, x.shape[dim])`` (no wrapping, as in PyTorch; a 0-d input
    counts as size 1). ``sparse_grad`` is accepted; Nova has no sparse tensors, so
    ``input``'s gradient is dense either way (the same values)."""
    _check_tensor("gather", input)
    _check_tensor("gather", index)
    if index.dtype not in (dt.int32, dt.int64):
        raise DTypeError(f"gather: index must be int32 or int64, got {index.dtype.name}")
    d = normalize_dim("gather", dim, input.ndim, input.shape)
    if index.ndim != input.ndim:
        raise ShapeError(f"gather: index {index.shape} must have as many dims as input "
                         f"{input.shape}")
    if any(i > s for k, (i, s) in enumerate(zip(index.shape, input.shape)) if k != d):
        raise ShapeError(f"gather: index {index.shape} is larger than input {input.shape} "
                         f"outside dim {d}")
    check_index_values("gather", index, d, input.shape, negative=False)
    if input.ndim == 0:   # as a 1-element vector, so the kernel checks the index is 0
        return prim("reshape", [gather(_as_1d(input), 0, _as_1d(index))], {}, (), input.dtype)
    return prim("gather", [input, index], {"dim": d}, index.shape, input.dtype)


def _scatter_args(op: str, x: Tensor, dim: builtins.int, index: Tensor,
                  src: Any) -> tuple[builtins.int, Tensor]:
    """Check torch.scatter/scatter_add arguments; return the dim and src cut to the
    index shape in ``x``'s dtype (a number becomes a constant of that shape)."""
    for name, v in (("input", x), ("index", index)):
        _check_tensor(f"{op} {name}", v)
    if not isinstance(src, Tensor):
        if not _is_scalar(src):
            raise TypeError(f"{op}: src must be a Tensor or a number, got "
                            f"{type(src).__name__}")
        src = full_const(src, index.shape, x.dtype)
    d = normalize_dim(op, dim, x.ndim, x.shape)
    if index.dtype not in (dt.int32, dt.int64):
        raise DTypeError(f"{op}: index must be int32 or int64, got {index.dtype.name}")
    if index.ndim != x.ndim or src.ndim != x.ndim:
        raise ShapeError(f"{op}: input {x.shape}, index {index.shape} and src "
                         f"{src.shape} must have the same number of dims")
    if any(i > s for k, (i, s) in enumerate(zip(index.shape, x.shape)) if k != d) or any(
            i > s for i, s in zip(index.shape, src.shape)):
        raise ShapeError(f"{op}: index {index.shape} must not exceed src {src.shape} "
                         f"anywhere or input {x.shape} outside dim {d}")
    check_index_values(op, index, d, x.shape, negative=False)
    if src.shape != index.shape:
        src = prim("slice", [src], {"start": (0,) * src.ndim, "limit": index.shape,
                                    "stride": (1,) * src.ndim}, index.shape, src.dtype)
    return d, cast(src, x.dtype)


def _scatter_prim(name: str, x: Tensor, d: builtins.int, index: Tensor, src: Tensor) -> Tensor:
    if x.ndim == 0:   # as 1-element vectors, so the kernel checks the index is 0
        flat = _scatter_prim(name, _as_1d(x), 0, _as_1d(index), _as_1d(src))
        return prim("reshape", [flat], {}, (), x.dtype)
    return prim(name, [x, index, src], {"dim": d}, x.shape, x.dtype)


def scatter_add(input: Tensor, dim: builtins.int, index: Tensor, src: Tensor) -> Tensor:
    """``torch.scatter_add`` (out of place): every update counts, duplicates add up."""
    _check_tensor("scatter_add src", src)
    d, src = _scatter_args("scatter_add", input, dim, index, src)
    return _scatter_prim("scatter_add", input, d, index, src)


def scatter(input: Tensor, dim: builtins.int, index: Tensor, src: Any = None, *,
            value: Any = None, reduce: str | None = None) -> Tensor:
    """``torch.scatter`` (out of place) with a tensor or number ``src`` (or ``value=``).
    Where several updates hit one element the last in index order wins, as numpy's
    assignment does (PyTorch leaves that case undefined); the compiled kernels apply
    updates in that order, so the result is deterministic on every engine.

    ``reduce`` is PyTorch's older form of ``scatter_reduce``: ``"add"`` adds every
    update to the value there, ``"multiply"`` multiplies it by every update (duplicates
    all count; ``scatter_reduce(..., "prod")``)."""
    if src is None:
        src = value
    elif value is not None:
        raise TypeError("scatter: give src or value=, not both")
    if src is None:
        raise TypeError("scatter: give src (a tensor or number) or value=")
    if reduce not in (None, "add", "multiply"):
        raise ValueError(f"scatter: reduce must be 'add' or 'multiply' (or None), got "
                         f"{reduce!r}; scatter_reduce offers 'sum', 'prod', 'mean', "
                         f"'amax' and 'amin'")
    d, src = _scatter_args("scatter", input, dim, index, src)
    if reduce == "multiply":
        from nova.tensor.more_ops import scatter_reduce   # (above this module)
        return scatter_reduce(input, d, index, src, "prod")
    return _scatter_prim("scatter_add" if reduce == "add" else "scatter", input, d, index, src)


def one_hot(x: Tensor, num_classes: builtins.int = -1) -> Tensor:
    """int64 one-hot encoding, as ``torch.nn.functional.one_hot``: class values must
    lie in ``[0, num_classes)``; ``num_classes=-1`` reads the data (a host sync).

    Values known while recording (a tensor made from data, or the sync that
    ``num_classes=-1`` does) are checked here, at the user's line. Computed values are
    checked when the step runs: the encoding is a scatter of ones, whose kernel fails
    the step on an index out of range (as gather's does), so a bad class never becomes
    a silent row of zeros."""
    _check_tensor("one_hot", x)
    if x.dtype not in (dt.int32, dt.int64):
        raise DTypeError(f"one_hot: input must be an integer tensor, got {x.dtype.name}")
    if isinstance(num_classes, builtins.bool) or not hasattr(num_classes, "__index__"):
        raise TypeError(f"one_hot: num_classes must be an int, got {num_classes!r}")
    num_classes = operator.index(num_classes)
    values = known_index_values(x)   # values already on the host are checked now
    if num_classes == -1:
        if not x.numel():
            raise ValueError("one_hot: cannot infer the number of classes from an empty "
                             "tensor; pass num_classes")
        lo, hi = amin(x), amax(x)   # one step: realizing hi computes lo, still pending
        values = np.array([hi.item(), lo.item()])
        num_classes = builtins.int(values[0]) + 1
    if num_classes < 0 or (num_classes == 0 and x.numel()):
        raise ValueError(f"one_hot: num_classes must be positive (or -1 to infer it), got "
                         f"{num_classes}")
    _check_classes(values, num_classes)
    shape = x.shape + (num_classes,)
    check_numel("one_hot", shape)
    if not x.numel():
        return full_const(0, shape, dt.int64)
    column = x.shape + (1,)
    index = prim("reshape", [x], {}, column, x.dtype)
    return scatter_add(full_const(0, shape, dt.int64), x.ndim, index,
                       full_const(1, column, dt.int64))


def _check_classes(values: np.ndarray | None, num_classes: builtins.int) -> None:
    """ValueError if known class values fall outside ``[0, num_classes)``."""
    if values is None or values.size == 0:
        return
    lo, hi = builtins.int(values.min()), builtins.int(values.max())
    if lo < 0:
        raise ArgumentError(f"one_hot: class values must be non-negative, got {lo}")
    if hi >= num_classes:
        raise ArgumentError(f"one_hot: class values must be smaller than num_classes "
                            f"({num_classes}), got {hi}")


def _tri(op: str, x: Tensor, diagonal: builtins.int, lower: builtins.bool) -> Tensor:
    _check_tensor(op, x)
    if x.ndim < 2:
        raise ValueError(f"{op}: input must have at least 2 dims, got shape {x.shape}")
    rows = prim("iota", [], {"dim": x.ndim - 2}, x.shape, dt.int64)
    cols = prim("iota", [], {"dim": x.ndim - 1}, x.shape, dt.int64)
    keep = le(sub(cols, rows), diagonal) if lower else ge(sub(cols, rows), diagonal)
    return where(keep, x, full_const(0, x.shape, x.dtype))


def tril(input: Tensor, diagonal: builtins.int = 0) -> Tensor:
    return _tri("tril", input, diagonal, True)


def triu(input: Tensor, diagonal: builtins.int = 0) -> Tensor:
    return _tri("triu", input, diagonal, False)


TENSOR_METHODS = (
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "neg", "abs", "exp", "log",
    "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tanh", "erf", "expm1", "log1p", "square",
    "sigmoid", "relu", "gelu", "silu", "clamp", "clip", "masked_fill", "lt", "le", "gt", "ge", "eq", "ne",
    "logical_not", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bitwise_not", "isnan", "isinf", "sum", "mean", "amax",
    "amin", "max", "min", "argmax", "argmin", "var", "std", "logsumexp", "softmax",
    "log_softmax", "matmul", "mm", "bmm", "gather", "scatter_add", "scatter", "tril",
    "triu",
)
