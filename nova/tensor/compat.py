"""The rest of ``torch.Tensor``'s everyday surface: factory methods (``new_zeros``...),
conversions by example (``type_as``, ``view_as``), layout queries, aliases, and the
in-place form of every elementwise method.

In-place forms are generated, not written out: ``x.exp_()`` is ``x._assign(x.exp(),
"exp_")`` -- the handle is rebound to the new value, writing through views as every
in-place op in Nova does (``Tensor._assign``), with its checks (shape kept, no
narrowing of the dtype, a leaf that requires grad refused under grad mode). So
``x.sigmoid_()`` on an int tensor fails as PyTorch's does (the float result cannot be
cast back), and comparisons in place (``x.lt_(0)``) write 1 and 0 in ``x``'s dtype.

Layout: Nova values have no memory layout a program can observe (a step's planner
chooses it), so every tensor reads as contiguous: ``is_contiguous()`` is True and
``stride()`` gives the row-major strides of the shape (a documented deviation: in
PyTorch ``x.t().is_contiguous()`` is False; code that then calls ``.contiguous()``
works either way).
"""
from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.core.memory_format import is_contiguous_as
from nova.tensor import movement, numeric, ops
from nova.tensor.tensor import Tensor


def _size_args(op: str, size: tuple, keyword: Any = None) -> tuple:
    """``new_zeros(2, 3)``, ``new_zeros((2, 3))`` and ``new_zeros(size=(2, 3))`` alike."""
    size = movement.sizes_given(op, size, "size", keyword)
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        return tuple(size[0])
    return size


def _like(self: Tensor, dtype: Any, device: Any) -> dict[str, Any]:
    """The dtype and device a ``new_*`` method gives: ``self``'s unless overridden."""
    return {"dtype": self.dtype if dtype is None else dtype,
            "device": self.device if device is None else device}


def new_tensor(self: Tensor, data: Any, *, dtype: Any = None, device: Any = None,
               requires_grad: builtins.bool = False, layout: Any = None,
               pin_memory: builtins.bool = False) -> Tensor:
    """A new leaf holding ``data`` (a copy), with ``self``'s dtype and device unless
    given (``torch.Tensor.new_tensor``)."""
    from nova.tensor.creation import check_options, tensor
    check_options("new_tensor", layout)
    if isinstance(data, Tensor):
        data = data.detach()
    return tensor(data, requires_grad=requires_grad, pin_memory=pin_memory,
                  **_like(self, dtype, device))


def new(self: Tensor, *args: Any, device: Any = None) -> Tensor:
    """The legacy constructor ``x.new(...)`` with ``x``'s dtype (and device unless
    given): no arguments, an empty tensor; ints or a shape, a tensor of that shape
    (zeros: Nova hands out no uninitialized memory); a tensor of ``x``'s dtype, that
    tensor; anything else, a copy of the data. A tuple of ints is a shape: Nova's
    shapes are plain tuples, so ``x.new(x.size())`` works (PyTorch reads a plain
    tuple, unlike its ``torch.Size``, as data)."""
    from nova.tensor.legacy import Size
    if not args:
        return new_empty(self, 0, device=device)
    if len(args) == 1 and isinstance(args[0], Tensor):
        if args[0].dtype != self.dtype:
            raise TypeError(f"new: expected a tensor of dtype {self.dtype.name}, got "
                            f"{args[0].dtype.name}")
        return args[0]
    if all(isinstance(a, (builtins.int, np.integer)) and not isinstance(a, builtins.bool)
           for a in args):
        return new_empty(self, *args, device=device)
    if len(args) == 1 and isinstance(args[0], tuple) and isinstance(args[0], Size):
        return new_empty(self, *args[0], device=device)
    if len(args) == 1:
        return new_tensor(self, args[0], device=device)
    raise TypeError(f"new: expected sizes (ints), a shape, a tensor or data, got "
                    f"{', '.join(type(a).__name__ for a in args)}")


def new_zeros(self: Tensor, *sizes: Any, size: Any = None, dtype: Any = None,
              layout: Any = None, device: Any = None, pin_memory: builtins.bool = False,
              requires_grad: builtins.bool = False) -> Tensor:
    from nova.tensor.creation import zeros
    return zeros(*_size_args("new_zeros", sizes, size), requires_grad=requires_grad,
                 layout=layout, pin_memory=pin_memory, **_like(self, dtype, device))


def new_ones(self: Tensor, *sizes: Any, size: Any = None, dtype: Any = None,
             layout: Any = None, device: Any = None, pin_memory: builtins.bool = False,
             requires_grad: builtins.bool = False) -> Tensor:
    from nova.tensor.creation import ones
    return ones(*_size_args("new_ones", sizes, size), requires_grad=requires_grad,
                layout=layout, pin_memory=pin_memory, **_like(self, dtype, device))


def new_empty(self: Tensor, *sizes: Any, size: Any = None, dtype: Any = None,
              layout: Any = None, device: Any = None, pin_memory: builtins.bool = False,
              requires_grad: builtins.bool = False) -> Tensor:
    """Zeros: Nova never hands out uninitialized memory (as ``nv.empty``)."""
    from nova.tensor.creation import empty
    return empty(*_size_args("new_empty", sizes, size), requires_grad=requires_grad,
                 layout=layout, pin_memory=pin_memory, **_like(self, dtype, device))


def new_full(self: Tensor, size: Any, fill_value: Any, *, dtype: Any = None,
             layout: Any = None, device: Any = None, pin_memory: builtins.bool = False,
             requires_grad: builtins.bool = False) -> Tensor:
    from nova.tensor.creation import full
    return full(size, fill_value, requires_grad=requires_grad, layout=layout,
                pin_memory=pin_memory, **_like(self, dtype, device))


def type_as(self: Tensor, other: Tensor) -> Tensor:
    """``self`` in ``other``'s dtype and on its device (``torch.Tensor.type_as``)."""
    _check_tensor_arg("type_as", other)
    return self.to(other.dtype).to(other.device)


def view_as(self: Tensor, other: Tensor) -> Tensor:
    _check_tensor_arg("view_as", other)
    return movement.view(self, other.shape)


def reshape_as(self: Tensor, other: Tensor) -> Tensor:
    _check_tensor_arg("reshape_as", other)
    return movement.reshape(self, other.shape)


def _check_tensor_arg(op: str, other: Any) -> None:
    if not isinstance(other, Tensor):
        raise TypeError(f"{op}: expected a Tensor argument, got {type(other).__name__}")


def broadcast_to(input: Tensor, *size: Any) -> Tensor:
    """``input`` expanded to ``size`` (``-1`` keeps a dim), as ``torch.broadcast_to``:
    a sequence, or ints (``x.broadcast_to(3)``, ``x.broadcast_to(2, 3)``)."""
    if len(size) == 1 and not isinstance(size[0], (builtins.int, np.integer)):
        size = tuple(size[0])
    return movement.expand(input, *size)


def broadcast_shapes(*shapes: Any) -> tuple[builtins.int, ...]:
    """The shape tensors of ``shapes`` broadcast to (``torch.broadcast_shapes``); an int
    is a 1-D shape. Raises naming the shapes that do not broadcast."""
    from nova.core.shapes import broadcast_shapes as _broadcast
    norm = [(s,) if isinstance(s, builtins.int) else tuple(s) for s in shapes]
    out: tuple[builtins.int, ...] = ()
    for s in norm:
        out = _broadcast("broadcast_shapes", out, s)
    return out


# ---------------------------------------------------------------- layout and queries

def is_contiguous(self: Tensor, memory_format: Any = None) -> builtins.bool:
    """True in the contiguous format: Nova values have no observable layout (see the
    module docstring) and read as row-major; in a channels-last format only where
    row-major is channels-last too (one channel, or one spatial position), as PyTorch
    answers for an NCHW tensor."""
    return is_contiguous_as(memory_format, self.shape)


def stride(self: Tensor, dim: builtins.int | None = None) -> Any:
    """The row-major strides of the shape, in elements (see the module docstring)."""
    strides, step = [], 1
    for s in reversed(self.shape):
        strides.append(step)
        step *= builtins.max(s, 1)
    strides.reverse()
    if dim is None:
        return tuple(strides)
    from nova.core.shapes import normalize_dim
    return strides[normalize_dim("stride", dim, self.ndim, self.shape)]


def storage_offset(self: Tensor) -> builtins.int:
    return 0


def nelement(self: Tensor) -> builtins.int:
    return self.numel()


def ndimension(self: Tensor) -> builtins.int:
    return self.ndim


def is_complex(self: Tensor) -> builtins.bool:
    """False: Nova has no complex dtypes."""
    return False


def is_signed(self: Tensor) -> builtins.bool:
    """Whether the dtype holds negative values (every Nova dtype but bool and uint8)."""
    return self.dtype.is_signed


def get_device(self: Tensor) -> builtins.int:
    """The CUDA device index (0), or -1 on the CPU, as ``torch.Tensor.get_device``."""
    return 0 if self.node.device == "cuda" else -1


def is_same_size(self: Tensor, other: Tensor) -> builtins.bool:
    _check_tensor_arg("is_same_size", other)
    return self.shape == other.shape


def is_nonzero(self: Tensor) -> builtins.bool:
    if self.numel() != 1:
        raise RuntimeError(f"is_nonzero: Boolean value of Tensor with {self.numel()} "
                           f"elements (shape {self.shape}) is ambiguous")
    return builtins.bool(self.item())


def equal(input: Tensor, other: Tensor) -> builtins.bool:
    """True when both have the same shape and equal elements (``torch.equal``; NaN is
    never equal)."""
    _check_tensor_arg("equal", input)
    _check_tensor_arg("equal", other)
    if input.shape != other.shape:
        return False
    return builtins.bool(numeric.all(ops.eq(input, other)).item())


def _where(self: Tensor, condition: Tensor, y: Any) -> Tensor:
    """``x.where(condition, y)``: ``x`` where ``condition`` holds, else ``y``."""
    return ops.where(condition, self, y)


def _retains_grad(self: Tensor) -> builtins.bool:
    """Whether this non-leaf keeps its ``.grad`` (``retain_grad()`` was called)."""
    fn = self._grad_fn
    return fn is not None and any(r() is self for r in fn.retained)


# ---------------------------------------------------------------- aliases and small ops

def positive(input: Tensor) -> Tensor:
    """``input`` itself (``torch.positive``; bools refused as PyTorch does)."""
    if input.dtype == dt.bool_:
        raise DTypeError("positive: the + operator on a bool tensor is not supported")
    return input


def rsub(input: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
    """``other - alpha * input`` (``torch.rsub``)."""
    return ops.sub(other, input, alpha=alpha)


def swapdims(input: Tensor, dim0: builtins.int, dim1: builtins.int) -> Tensor:
    return movement.transpose(input, dim0, dim1)


def fliplr(input: Tensor) -> Tensor:
    """Reverse the columns (dim 1; needs >= 2 dims), as ``torch.fliplr``."""
    if input.ndim < 2:
        raise ValueError(f"fliplr: input must have at least 2 dims, got shape {input.shape}")
    return numeric.flip(input, 1)


def flipud(input: Tensor) -> Tensor:
    """Reverse the rows (dim 0; needs >= 1 dim), as ``torch.flipud``."""
    if input.ndim < 1:
        raise ValueError("flipud: input must have at least 1 dim, got a 0-d tensor")
    return numeric.flip(input, 0)


def scalar_tensor(s: Any, *, dtype: Any = None, layout: Any = None, device: Any = None,
                  pin_memory: builtins.bool = False,
                  requires_grad: builtins.bool = False) -> Tensor:
    """A 0-d tensor of the default float dtype unless given (``torch.scalar_tensor``)."""
    from nova.tensor.creation import check_options, tensor
    check_options("scalar_tensor", layout)
    return tensor(s, dtype=dt.DEFAULT_FLOAT if dtype is None else dtype, device=device,
                  requires_grad=requires_grad, pin_memory=pin_memory)


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """``data`` itself when it already is a tensor of that dtype and device, else a new
    tensor (``torch.as_tensor``; Nova values never alias numpy memory, so a numpy
    array is copied)."""
    if isinstance(data, Tensor):
        out = data if dtype is None else data.to(dtype)
        return out if device is None else out.to(device)
    from nova.tensor.creation import tensor
    return tensor(data, dtype=dtype, device=device)


def asarray(obj: Any, *, dtype: Any = None, device: Any = None, copy: Any = None,
            requires_grad: builtins.bool = False) -> Tensor:
    """``torch.asarray``: as ``as_tensor``; ``requires_grad`` makes a new leaf."""
    out = as_tensor(obj, dtype, device)
    if copy:
        out = out.clone()
    if requires_grad:
        out = out.detach().requires_grad_()
    return out


def result_type(tensor1: Any, tensor2: Any) -> dt.DType:
    """The dtype ``tensor1 op tensor2`` computes in (``torch.result_type``): tensors
    or Python numbers."""
    tensors, scalars = [], []
    for v in (tensor1, tensor2):
        if isinstance(v, Tensor):
            tensors.append((v.dtype, v.ndim))
        else:
            scalars.append(v)
    return dt.result_type(tensors, scalars)


def sum_to_size(self: Tensor, *sizes: Any, size: Any = None) -> Tensor:
    """Sum ``self`` down to ``sizes`` (or ``size=``), which ``self`` must broadcast from
    (what a broadcast's gradient does), as ``torch.Tensor.sum_to_size``."""
    shape = tuple(_size_args("sum_to_size", sizes, size))
    try:
        if broadcast_shapes(shape, self.shape) != self.shape:
            raise ValueError
    except ValueError:
        raise RuntimeError(f"sum_to_size: size {shape} is not expandable to the tensor's "
                           f"size {self.shape}") from None
    lead = self.ndim - len(shape)
    dims = list(range(lead)) + [lead + i for i, s in enumerate(shape)
                                if s == 1 and self.shape[lead + i] != 1]
    out = ops.sum(self, dims, keepdim=True) if dims else self
    return movement.reshape(out, shape)


def split_with_sizes(self: Tensor, split_sizes: Sequence[builtins.int],
                     dim: builtins.int = 0) -> tuple[Tensor, ...]:
    return movement.split(self, list(split_sizes), dim)


# ---------------------------------------------------------------- the in-place family

# Methods whose in-place form is ``self._assign(self.method(...))``: every elementwise
# method whose result has ``self``'s shape. (The shape-changing ones -- ``t_``,
# ``squeeze_`` -- restride the tensor instead: ``Tensor._restride``.)
INPLACE_OF = (
    "abs", "absolute", "acos", "acosh", "arccos", "arccosh", "arcsin", "arcsinh", "arctan",
    "arctan2", "arctanh", "asin", "asinh", "atan", "atan2", "atanh", "addcdiv", "addcmul",
    "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "ceil", "clamp_max",
    "clamp_min", "clip", "copysign", "cos", "cosh", "cumprod", "cumsum", "deg2rad",
    "digamma", "divide", "eq", "erf", "erfc", "erfinv", "exp", "exp2", "expm1", "fix",
    "float_power", "floor", "floor_divide", "fmod", "frac", "ge", "greater", "greater_equal",
    "gt", "heaviside", "hypot", "i0", "index_add", "index_copy", "index_fill", "ldexp",
    "le", "lerp", "less", "less_equal", "lgamma", "log", "log10", "log1p", "log2",
    "logical_and", "logical_not", "logical_or", "logical_xor", "logit", "lt", "multiply",
    "mvlgamma", "nan_to_num", "ne", "neg", "negative", "not_equal", "polygamma", "pow",
    "rad2deg", "reciprocal", "relu", "remainder", "renorm", "round", "rsqrt", "scatter_add", "sgn", "sigmoid", "sign", "sin", "sinc", "sinh", "sqrt", "square",
    "subtract", "tan", "tanh", "tril", "triu", "true_divide", "trunc", "xlogy",
)


def _inplace(name: str):
    method = getattr(Tensor, name)

    def inplace(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return self._assign(method(self, *args, **kwargs), name + "_")

    inplace.__name__ = inplace.__qualname__ = name + "_"
    inplace.__doc__ = f"In-place ``{name}``: ``self`` rebound to ``self.{name}(...)``."
    return inplace


def scatter_(self: Tensor, dim: builtins.int, index: Tensor, src: Any = None, *,
             value: Any = None, reduce: str | None = None) -> Tensor:
    """In-place ``scatter`` (``src`` a tensor or number, or ``value=``), with PyTorch's
    older ``reduce="add"``/``"multiply"``, as ``ops.scatter``."""
    out = ops.scatter(self, dim, index, src, value=value, reduce=reduce)
    return self._assign(out, "scatter_")


# ---------------------------------------------------------------- random fills

def _generator_draw(self: Tensor, op: str) -> None:
    if not self.dtype.is_floating_point:
        raise DTypeError(f"{op}: expects a floating point tensor, got {self.dtype.name}")


def normal_(self: Tensor, mean: Any = 0.0, std: Any = 1.0, *, generator: Any = None) -> Tensor:
    """Fill with N(mean, std^2) draws (``torch.Tensor.normal_``)."""
    from nova.tensor.creation import randn
    from nova.tensor.grad_mode import no_grad
    _generator_draw(self, "normal_")
    if std < 0:
        raise ValueError(f"normal_: std must be >= 0, got {std}")
    with no_grad():
        draw = randn(self.shape, dtype=self.dtype, generator=generator)
    return self._assign(ops.add(ops.mul(draw, std), mean), "normal_")


def uniform_(self: Tensor, from_: Any = 0.0, to: Any = 1.0, *,
             generator: Any = None) -> Tensor:
    """Fill with U[from, to) draws (``torch.Tensor.uniform_``, whose ``from`` is a Python
    keyword: given by position, or as ``from_`` here)."""
    from nova.tensor.creation import rand
    _generator_draw(self, "uniform_")
    if from_ > to:
        raise ValueError(f"uniform_: expects from <= to, got from={from_}, to={to}")
    draw = rand(self.shape, dtype=self.dtype, generator=generator)
    return self._assign(ops.add(ops.mul(draw, to - from_), from_), "uniform_")


def bernoulli_(self: Tensor, p: Any = 0.5, *, generator: Any = None) -> Tensor:
    """Fill with 1 (probability ``p``, a number or a tensor broadcastable to ``self``)
    or 0, in ``self``'s dtype. A ``p`` outside [0, 1] (or NaN) raises, as PyTorch's --
    a tensor ``p`` where its values are in host memory; computed ones are not read back
    to check them (outside [0, 1] they act clamped)."""
    from nova.tensor.creation import rand
    if not isinstance(p, Tensor) and not 0.0 <= p <= 1.0:
        raise ValueError(f"bernoulli_: p must be in [0, 1], got {p}")
    known = ops.known_index_values(p) if isinstance(p, Tensor) else None
    if known is not None:
        outside = ~((known >= 0) & (known <= 1))
        if outside.any():
            raise ValueError(f"bernoulli: every probability must be in [0, 1], got "
                             f"{known[outside].flat[0]} in p of shape {p.shape}")
    draw = rand(self.shape, dtype=dt.float64, generator=generator)
    prob = ops.cast(p, dt.float64) if isinstance(p, Tensor) else builtins.float(p)
    return self._assign(ops.cast(ops.lt(draw, prob), self.dtype), "bernoulli_")


def bernoulli(input: Tensor, p: Any = None, *, generator: Any = None) -> Tensor:
    """1 with probability ``input`` (or ``p``) per element, else 0, in ``input``'s dtype
    (``torch.bernoulli``)."""
    from nova.tensor.creation import zeros_like
    out = zeros_like(input)
    return bernoulli_(out, input.detach() if p is None else p, generator=generator)


def exponential_(self: Tensor, lambd: Any = 1.0, *, generator: Any = None) -> Tensor:
    """Fill with Exp(lambd) draws: ``-log(1 - u) / lambd``."""
    from nova.tensor.creation import rand
    _generator_draw(self, "exponential_")
    if lambd <= 0:
        raise ValueError(f"exponential_: lambd must be > 0, got {lambd}")
    u = rand(self.shape, dtype=dt.float64, generator=generator)
    draw = ops.div(ops.neg(ops.log1p(ops.neg(u))), builtins.float(lambd))
    return self._assign(ops.cast(draw, self.dtype), "exponential_")


def log_normal_(self: Tensor, mean: Any = 1.0, std: Any = 2.0, *,
                generator: Any = None) -> Tensor:
    """Fill with ``exp(N(mean, std^2))`` draws."""
    from nova.tensor.creation import randn
    _generator_draw(self, "log_normal_")
    if std <= 0:
        raise ValueError(f"log_normal_: std must be > 0, got {std}")
    z = randn(self.shape, dtype=dt.float64, generator=generator)
    return self._assign(ops.cast(ops.exp(ops.add(ops.mul(z, std), mean)), self.dtype),
                        "log_normal_")


def cauchy_(self: Tensor, median: Any = 0.0, sigma: Any = 1.0, *,
            generator: Any = None) -> Tensor:
    """Fill with Cauchy(median, sigma) draws: ``median + sigma * tan(pi (u - 1/2))``."""
    from nova.tensor.creation import rand
    from nova.tensor.elementary import tan
    _generator_draw(self, "cauchy_")
    u = rand(self.shape, dtype=dt.float64, generator=generator)
    draw = ops.add(ops.mul(tan(ops.mul(ops.sub(u, 0.5), 3.141592653589793)), sigma), median)
    return self._assign(ops.cast(draw, self.dtype), "cauchy_")


def geometric_(self: Tensor, p: Any, *, generator: Any = None) -> Tensor:
    """Fill with the number of Bernoulli(p) trials up to the first success (1, 2,
    ...): ``ceil(log(1 - u) / log(1 - p))``."""
    import math
    from nova.tensor.creation import rand
    if not 0.0 < p <= 1.0:
        raise ValueError(f"geometric_: p must be in (0, 1], got {p}")
    u = rand(self.shape, dtype=dt.float64, generator=generator)
    if p == 1.0:
        draw = ops.add(ops.mul(u, 0.0), 1.0)
    else:
        draw = ops.maximum(numeric.ceil(ops.div(ops.log1p(ops.neg(u)), math.log1p(-p))), 1.0)
    return self._assign(ops.cast(draw, self.dtype), "geometric_")


def random_(self: Tensor, from_: Any = 0, to: Any = None, *, generator: Any = None) -> Tensor:
    """Fill with integers uniform in ``[from_, to)`` (``torch.Tensor.random_(from, to)``;
    ``random_(to)`` alone is ``[0, to)``). Without ``to``, PyTorch draws up to the
    dtype's largest exactly representable integer; Nova asks for the bound instead."""
    from nova.tensor.creation import randint
    if to is None:
        if from_ == 0:
            raise ValueError("random_: give the upper bound, random_(to) or random_(from, "
                             "to): Nova does not draw over the dtype's whole range")
        from_, to = 0, from_
    if self.dtype.category == dt.BOOL and not (0 <= from_ and to <= 2):
        raise ValueError(f"random_: a bool tensor takes values in [0, 2), got [{from_}, {to})")
    draw = randint(from_, to, self.shape, generator=generator)
    return self._assign(ops.cast(draw, self.dtype), "random_")


def fill_diagonal_(self: Tensor, fill_value: Any, wrap: builtins.bool = False) -> Tensor:
    """Write ``fill_value`` on the main diagonal (every index equal in all dims; a tall
    2-D matrix with ``wrap=True`` restarts it every ``cols + 1`` rows, as NumPy's and
    PyTorch's ``fill_diagonal_``)."""
    from nova.tensor.creation import arange
    if self.ndim < 2:
        raise ValueError(f"fill_diagonal_: dimensions must be larger than 1, got shape "
                         f"{self.shape}")
    if self.ndim > 2 and builtins.len(set(self.shape)) != 1:
        raise ValueError(f"fill_diagonal_: all dimensions of input must be of equal length, "
                         f"got shape {self.shape}")
    flat_index = arange(self.numel()).reshape(self.shape)
    # flat offsets of the diagonal: k * (1 + n + n^2 + ...) for a cube; rows*cols walk
    # with step cols + 1 for a matrix (wrapping rows past the square when asked)
    step = builtins.sum(stride(self))
    n = builtins.min(self.shape)
    if self.ndim == 2 and wrap:
        on = ops.eq(numeric.remainder(flat_index, step), 0)
    else:
        on = ops.logical_and(ops.eq(numeric.remainder(flat_index, step), 0),
                             ops.lt(flat_index, n * step))
    return self._assign(ops.masked_fill(self, on, fill_value), "fill_diagonal_")


TENSOR_METHODS = (
    "new", "new_tensor", "new_zeros", "new_ones", "new_empty", "new_full", "type_as", "view_as",
    "reshape_as", "broadcast_to", "is_contiguous", "stride", "storage_offset", "nelement",
    "ndimension", "is_complex", "is_signed", "get_device", "is_same_size", "is_nonzero",
    "equal", "positive", "swapdims", "fliplr", "flipud", "sum_to_size", "split_with_sizes",
    "normal_", "uniform_", "bernoulli_", "bernoulli", "exponential_", "log_normal_",
    "cauchy_", "geometric_", "random_", "fill_diagonal_", "scatter_",
)

# torch's other names for Nova's methods (and top-level functions, ``nova/__init__.py``).
ALIASES = {"multiply": "mul", "subtract": "sub", "negative": "neg", "true_divide": "div",
           "greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le",
           "not_equal": "ne", "absolute": "abs", "fix": "trunc", "sgn": "sign",
           "arccosh": "acosh", "arcsinh": "asinh", "arctanh": "atanh"}

# Module functions that are torch's top-level names (``nv.rsub``...).
__all__ = ["broadcast_to", "broadcast_shapes", "equal", "positive", "rsub", "swapdims",
           "fliplr", "flipud", "scalar_tensor", "as_tensor", "asarray", "result_type",
           "bernoulli"]


def install() -> None:
    """Attach the methods, the properties and the aliases to ``Tensor`` (called once by
    ``nova.tensor.tensor`` after every op module registered its methods, so the
    in-place family sees them all)."""
    for name in TENSOR_METHODS:
        setattr(Tensor, name, globals()[name])
    Tensor.where = _where
    Tensor.retains_grad = property(_retains_grad)
    Tensor.is_cpu = property(lambda self: self.node.device != "cuda")
    Tensor.itemsize = property(lambda self: self.dtype.itemsize)
    Tensor.nbytes = property(lambda self: self.numel() * self.dtype.itemsize)
    for alias, name in ALIASES.items():
        if not hasattr(Tensor, alias):
            setattr(Tensor, alias, getattr(Tensor, name))
    for name in INPLACE_OF:
        if not hasattr(Tensor, name + "_"):     # (add_, mul_, clamp_ ... are written out)
            setattr(Tensor, name + "_", _inplace(name))
