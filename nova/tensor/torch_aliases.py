"""torch's top-level names for what Nova has as Tensor methods, and small index utilities.

* The in-place functions (``nv.exp_(x)``, ``nv.sigmoid_(x)``, ``nv.clamp_(x, 0, 1)``,
  ``nv.zero_(x)``...): torch exposes each in-place method as a function too; here each
  calls the method, so it rebinds ``x`` (and writes through its views) exactly as
  ``x.exp_()`` does (see ``Tensor._assign``), with the method's checks. (The in-place
  forms of ``torch.nn.functional``'s ops -- ``dropout_``, ``selu_``... -- live in
  ``nova.nn.torch_aliases``: this layer must not import ``nova.nn``.)
* ``unravel_index`` and the queries ``is_nonzero``, ``is_same_size``,
  ``is_signed``, ``is_complex`` as functions.
"""
from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.tensor import numeric, ops
from nova.tensor.tensor import Tensor

# torch's top-level in-place functions whose method Nova's Tensor has (``torch.exp_`` is
# ``Tensor.exp_``). torch has no top-level ``add_``, ``mul_``... so neither does Nova.
INPLACE_FUNCTIONS = (
    "abs_", "acos_", "acosh_", "addmv_", "arccos_", "arccosh_", "arcsin_", "arcsinh_",
    "arctan_", "arctanh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_",
    "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_", "deg2rad_", "detach_", "erf_",
    "erfc_", "exp2_", "exp_", "expm1_", "fill_", "fix_", "floor_", "frac_", "gcd_", "i0_",
    "index_put_", "lcm_", "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_",
    "nan_to_num_", "neg_", "negative_", "rad2deg_", "reciprocal_", "relu_", "round_",
    "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_",
    "trunc_", "xlogy_", "zero_",
)


def _method_as_function(name: str) -> Callable[..., Tensor]:
    """``torch.<name>(input, ...)``: ``input.<name>(...)``. The method is looked up at
    call time, so the function is whatever ``Tensor.<name>`` is (a subclass's too)."""

    def function(input: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}(): argument 'input' must be a Tensor, got "
                            f"{type(input).__name__}")
        return getattr(input, name)(*args, **kwargs)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = (f"``input.{name}(...)`` as a function (``torch.{name}``): "
                        f"``input`` is updated in place and returned.")
    return function


for _name in INPLACE_FUNCTIONS:
    globals()[_name] = _method_as_function(_name)
del _name


# ---------------------------------------------------------------- queries

def _check_tensor(op: str, name: str, value: Any) -> None:
    if not isinstance(value, Tensor):
        raise TypeError(f"{op}(): argument '{name}' must be a Tensor, got "
                        f"{type(value).__name__}")


def is_nonzero(input: Tensor) -> builtins.bool:
    """Whether the single element of ``input`` is nonzero (``torch.is_nonzero``); a
    tensor of any other size is ambiguous and raises."""
    _check_tensor("is_nonzero", "input", input)
    return input.is_nonzero()


def is_same_size(input: Tensor, other: Tensor) -> builtins.bool:
    """Whether ``input`` and ``other`` have the same shape (``torch.is_same_size``)."""
    _check_tensor("is_same_size", "input", input)
    _check_tensor("is_same_size", "other", other)
    return input.shape == other.shape


def is_signed(input: Tensor) -> builtins.bool:
    """Whether ``input``'s dtype holds negative values (``torch.is_signed``): False for
    ``bool`` and ``uint8``."""
    _check_tensor("is_signed", "input", input)
    return input.dtype.is_signed


def is_complex(input: Tensor) -> builtins.bool:
    """False: Nova has no complex dtypes (``torch.is_complex``)."""
    _check_tensor("is_complex", "input", input)
    return False


# ---------------------------------------------------------------- splits and indices

def _unravel_shape(shape: Any) -> tuple[builtins.int, ...]:
    """``shape`` (an int or a sequence of ints) as a tuple, checked as torch checks it."""
    if isinstance(shape, (builtins.int, np.integer)) and not isinstance(shape, builtins.bool):
        dims: tuple = (shape,)
    elif isinstance(shape, Sequence) and not isinstance(shape, str):
        dims = tuple(shape)
    else:
        raise TypeError(f"unravel_index: expected 'shape' to be int or sequence of ints, but "
                        f"got {type(shape).__name__}")
    for d in dims:
        if not isinstance(d, (builtins.int, np.integer)) or isinstance(d, builtins.bool):
            raise TypeError(f"unravel_index: expected 'shape' sequence to only contain ints, "
                            f"but got {type(d).__name__}")
    if any(d < 0 for d in dims):
        raise ValueError(f"unravel_index: 'shape' cannot have negative values, but got "
                         f"{dims}")
    if 0 in dims:
        raise ValueError(f"unravel_index: 'shape' {dims} has no elements, so no flat index "
                         "lies in it (PyTorch raises a ZeroDivisionError)")
    return tuple(builtins.int(d) for d in dims)


def unravel_index(indices: Tensor, shape: Any) -> tuple[Tensor, ...]:
    """The coordinates in ``shape`` of the flat (row-major) ``indices``: one int64
    tensor of ``indices``' shape per dim of ``shape`` (``torch.unravel_index``).

    As PyTorch's, coordinate ``i`` is ``(indices // stride_i) % shape[i]``, with floor
    division and a remainder of the divisor's sign, so an index outside ``[0,
    prod(shape))`` is not an error: it wraps (``-1`` gives the last element's
    coordinates, ``prod(shape)`` the first's). Checking the range would need the
    values, which a lazy tensor does not have yet."""
    _check_tensor("unravel_index", "indices", indices)
    if indices.dtype.category != dt.INT:
        raise TypeError(f"unravel_index: expected 'indices' to be integer dtype, but got "
                        f"{indices.dtype.name}")
    dims = _unravel_shape(shape)
    flat = ops.cast(indices, dt.int64)
    strides, step = [], 1
    for d in reversed(dims):
        strides.append(step)
        step *= d
    strides.reverse()
    return tuple(numeric.remainder(numeric.floor_divide(flat, s), d)
                 for s, d in zip(strides, dims))


__all__ = list(INPLACE_FUNCTIONS) + [
    "is_nonzero", "is_same_size", "is_signed", "is_complex", "unravel_index",
]
