"""Making complex tensors and reaching them from ``nv``'s functions.

The factories (``zeros ones empty full randn rand *_like tensor from_numpy``) for a
complex ``dtype=`` or complex data, and ``install``: ``nv.<name>`` called with a complex
argument runs the complex implementation in ``FUNCTIONS`` (``nova.tensor.complex``), a
factory with a complex dtype the one in ``FACTORIES``; any other call is the real
function, unchanged.
"""
from __future__ import annotations

import builtins
import functools
import inspect
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.tensor import creation as _creation
from nova.tensor.complex import (
    _COMPLEX_NUMBERS, METHODS, PARTWISE, ComplexTensor, _as_complex, cat, imag, real,
    stack, view_as_real, where,
)
from nova.tensor.complex_math import METHODS as MATH_METHODS
from nova.tensor.out_arg import write_out


def from_numpy(arr: np.ndarray, requires_grad: bool = False,
               device: Any = None) -> ComplexTensor:
    """A complex numpy array (or Python complex data) as a complex tensor."""
    arr = np.asarray(arr)
    real_dtype = dt.float64 if arr.dtype == np.complex128 else dt.float32
    z = ComplexTensor(_creation.tensor(np.array(arr.real), dtype=real_dtype,
                                       device=device),
                      _creation.tensor(np.array(arr.imag), dtype=real_dtype,
                                       device=device))
    return z.requires_grad_() if requires_grad else z


def _holds_complex(data: Any) -> bool:
    if isinstance(data, _COMPLEX_NUMBERS):
        return True
    if isinstance(data, np.ndarray):
        return data.dtype.kind == "c"
    if isinstance(data, (list, tuple)):
        return any(_holds_complex(d) for d in data)
    return False


def _complex_factory(name: str, make: Callable[[tuple, dt.DType, Any], tuple]) -> Callable:
    def factory(*size: Any, dtype: Any, device: Any = None, requires_grad: bool = False,
                generator: Any = None, **kwargs: Any) -> ComplexTensor:
        target = dt.get_complex_dtype(dtype)
        shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (list, tuple)) \
            else tuple(size)
        re, im = make(shape, target.real, generator, device, **kwargs)
        z = ComplexTensor(re, im)
        return z.requires_grad_() if requires_grad else z
    factory.__name__ = name
    return factory


def _zeros(shape: tuple, d: dt.DType, gen: Any, device: Any) -> tuple:
    return (_creation.zeros(shape, dtype=d, device=device),
            _creation.zeros(shape, dtype=d, device=device))


def _ones(shape: tuple, d: dt.DType, gen: Any, device: Any) -> tuple:
    return (_creation.ones(shape, dtype=d, device=device),
            _creation.zeros(shape, dtype=d, device=device))


def _randn(shape: tuple, d: dt.DType, gen: Any, device: Any) -> tuple:
    """Real and imaginary parts each N(0, 1/2), so E|z|^2 = 1 (PyTorch's complex randn)."""
    both = _creation.randn((2,) + shape, dtype=d, generator=gen, device=device) * math.sqrt(0.5)
    return both[0], both[1]


def _rand(shape: tuple, d: dt.DType, gen: Any, device: Any) -> tuple:
    both = _creation.rand((2,) + shape, dtype=d, generator=gen, device=device)
    return both[0], both[1]


zeros = _complex_factory("zeros", _zeros)
empty = _complex_factory("empty", _zeros)
ones = _complex_factory("ones", _ones)
randn = _complex_factory("randn", _randn)
rand = _complex_factory("rand", _rand)


def full(size: Any, fill_value: Any, *, dtype: Any = None, device: Any = None,
         requires_grad: bool = False) -> ComplexTensor:
    target = dt.get_complex_dtype(dtype) if dtype is not None else dt.complex_of(dt.DEFAULT_FLOAT)
    value = builtins.complex(fill_value)
    z = ComplexTensor(_creation.full(size, value.real, dtype=target.real, device=device),
                      _creation.full(size, value.imag, dtype=target.real, device=device))
    return z.requires_grad_() if requires_grad else z


def eye(n: int, m: int | None = None, *, dtype: Any = None, device: Any = None,
        requires_grad: bool = False) -> ComplexTensor:
    """The identity with a complex ``dtype`` (imaginary part 0)."""
    target = dt.get_complex_dtype(dtype)
    re = _creation.eye(n, m, dtype=target.real, device=device)
    z = ComplexTensor(re, _creation.zeros_like(re))
    return z.requires_grad_() if requires_grad else z


def _like(name: str, factory: Callable) -> Callable:
    def like(x: Any, *, dtype: Any = None, device: Any = None, **kwargs: Any) -> ComplexTensor:
        target = dtype if dtype is not None else x.dtype
        dev = device if device is not None else x.device
        return factory(*x.shape, dtype=target, device=dev, **kwargs)
    like.__name__ = name
    return like


zeros_like = _like("zeros_like", zeros)
ones_like = _like("ones_like", ones)
empty_like = _like("empty_like", empty)
randn_like = _like("randn_like", randn)
rand_like = _like("rand_like", rand)


def full_like(x: Any, fill_value: Any, *, dtype: Any = None, device: Any = None) -> ComplexTensor:
    return full(x.shape, fill_value, dtype=dtype if dtype is not None else x.dtype,
                device=device if device is not None else x.device)


def tensor(data: Any, *, dtype: Any = None, device: Any = None,
           requires_grad: bool = False) -> ComplexTensor:
    """``nv.tensor`` of complex data, or of any data with a complex ``dtype``."""
    if isinstance(data, ComplexTensor):
        data = data.numpy()
    target = dt.get_complex_dtype(dtype) if dtype is not None else None
    arr = np.asarray(data)
    if target is None:
        # numpy data keeps its precision (a numpy scalar too: np.complex128 is also a
        # Python complex, which alone takes the default's)
        target = dt.complex128 if arr.dtype in (np.complex128, np.float64) and \
            isinstance(data, (np.ndarray, np.generic)) else dt.complex_of(dt.DEFAULT_FLOAT)
    return from_numpy(arr.astype(target.np), requires_grad=requires_grad, device=device)



def _partwise_function(name: str) -> Callable:
    def fn(z: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(_as_complex(name, z), name)(*args, **kwargs)
    fn.__name__ = name
    return fn


# ``nv.<name>`` called with a complex argument runs these (``install``); the factories
# run them for a complex ``dtype=`` or complex data.
def _part_products(product: Callable[[list], Any], operands: list) -> ComplexTensor:
    """A multilinear product of complex (and real) operands as the real products of
    their parts: every choice of a real or imaginary part per operand contributes
    ``i^k`` times the real product, ``k`` the number of imaginary parts chosen (even
    ``k`` to the real part, odd to the imaginary; ``i^2 = -1``)."""
    import itertools
    choices = [((z.real, 0), (z.imag, 1)) if isinstance(z, ComplexTensor) else ((z, 0),)
               for z in operands]
    sums: list[Any] = [None, None]
    for combo in itertools.product(*choices):
        k = builtins.sum(part for _, part in combo)
        term = product([t for t, _ in combo])
        if k % 4 >= 2:
            term = -term
        sums[k % 2] = term if sums[k % 2] is None else sums[k % 2] + term
    re, im = sums
    return ComplexTensor(re if re is not None else im * 0, im if im is not None else re * 0)


def _einsum(equation: str, *operands: Any) -> ComplexTensor:
    """``torch.einsum`` with complex operands (an FNO's ``"bix,iox->box"`` spectral
    weights): the real einsums of their parts (``_part_products``)."""
    from nova.tensor.einsum import einsum
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return _part_products(lambda parts: einsum(equation, *parts), list(operands))


def _tensordot(a: Any, b: Any, dims: Any = 2) -> ComplexTensor:
    """``torch.tensordot`` with complex operands, as ``_einsum``."""
    from nova.tensor.products import tensordot
    return _part_products(lambda parts: tensordot(parts[0], parts[1], dims), [a, b])


def _kron(a: Any, b: Any) -> ComplexTensor:
    """``torch.kron`` with complex operands: bilinear, so the part products."""
    from nova.tensor.arrays import kron
    return _part_products(lambda parts: kron(*parts), [a, b])


def _cross(a: Any, b: Any, *args: Any, **kwargs: Any) -> ComplexTensor:
    """``torch.cross`` with complex operands, as ``_kron``."""
    from nova.tensor.arrays import cross
    return _part_products(lambda parts: cross(*parts, *args, **kwargs), [a, b])


FUNCTIONS: dict[str, Callable] = {
    **{name: fn for name, fn in METHODS.items() if not name.endswith("_")
       and name not in ("expand_as", "view_as", "reshape_as")},
    **MATH_METHODS,
    **{name: _partwise_function(name) for name in PARTWISE},
    "cat": cat, "concat": cat, "concatenate": cat, "stack": stack, "where": where,
    "einsum": _einsum, "tensordot": _tensordot, "kron": _kron, "cross": _cross,
    "real": real, "imag": imag, "view_as_real": view_as_real,
    "is_complex": lambda z: True, "is_floating_point": lambda z: False,
    "is_tensor": lambda z: True,
    "numel": lambda z: z.numel(),
}
FACTORIES: dict[str, Callable] = {
    "zeros": zeros, "ones": ones, "empty": empty, "randn": randn, "rand": rand,
    "full": full, "eye": eye, "zeros_like": zeros_like, "ones_like": ones_like,
    "empty_like": empty_like, "randn_like": randn_like, "rand_like": rand_like,
    "full_like": full_like, "tensor": tensor, "as_tensor": tensor, "from_numpy": from_numpy,
}
# functions whose first argument may be a real tensor with a complex ``dtype=``
_LIKE = {"zeros_like", "ones_like", "empty_like", "randn_like", "rand_like", "full_like"}


def _has_complex(args: tuple, kwargs: dict) -> bool:
    for a in (*args, *kwargs.values()):
        if isinstance(a, ComplexTensor):
            return True
        if isinstance(a, (list, tuple)) and any(isinstance(x, ComplexTensor) for x in a):
            return True
    return False


def _positional_names(fn: Callable) -> list[str]:
    """The names of ``fn``'s parameters that can be given by position, in order."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _keyword_map(fn: Callable, impl: Callable | None) -> dict[str, str]:
    """{``fn``'s name: ``impl``'s name} for the parameters at the same position that
    the two name differently (``nv.add(input=z, other=w)`` reaches the complex ``add(a,
    b)``). A position ``impl`` takes in ``*args`` keeps the keyword: ``impl`` passes it
    on to the real function, which takes it."""
    if impl is None:
        return {}
    try:
        params = inspect.signature(impl).parameters
    except (TypeError, ValueError):
        return {}
    theirs = [p.name for p in params.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return {mine: theirs[i] for i, mine in enumerate(_positional_names(fn))
            if i < len(theirs) and theirs[i] != mine and mine not in params}


def _renamed(kwargs: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    return {names.get(k, k): v for k, v in kwargs.items()}


def _leading(args: tuple, kwargs: dict[str, Any], names: list[str]) -> tuple[tuple, dict]:
    """The leading arguments ``names`` given by keyword moved into ``args`` (a factory's
    data or template tensor, and ``full``'s fill value, which say whether the call is a
    complex one)."""
    args, kwargs = list(args), dict(kwargs)
    for name in names[len(args):]:
        if name not in kwargs:
            break
        args.append(kwargs.pop(name))
    return tuple(args), kwargs


# PyTorch's factory keywords that change nothing in Nova (``creation.check_options``)
_OPTIONS = ("layout", "pin_memory", "memory_format")


def _complex_factory_call(name: str, factory: Callable, args: tuple, kwargs: dict) -> Any:
    options = {k: kwargs.pop(k) for k in _OPTIONS if k in kwargs}
    _creation.check_options(name, options.get("layout"))
    out = kwargs.pop("out", None)
    result = factory(*args, **kwargs)
    return result if out is None else write_out(name, result, out)


def _dispatching(fn: Callable, name: str, functions: dict[str, Callable]) -> Callable:
    impl, factory = functions.get(name), FACTORIES.get(name)
    names = _keyword_map(fn, impl)
    lead = _positional_names(fn)[:2 if name in ("full", "full_like") else 1 if name in (
        _LIKE | {"tensor", "as_tensor", "from_numpy"}) else 0]

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if factory is not None:
            if kwargs and len(args) < len(lead):
                args, kwargs = _leading(args, kwargs, lead)
            dtype = kwargs.get("dtype")
            if (dtype is not None and dt.get_complex_dtype(dtype) is not None) or \
                    (name in ("tensor", "as_tensor", "from_numpy") and args and
                     _holds_complex(args[0])) or \
                    (name in _LIKE and args and isinstance(args[0], ComplexTensor)) or \
                    (name in ("full", "full_like") and len(args) > 1 and
                     isinstance(args[1], _COMPLEX_NUMBERS)):
                return _complex_factory_call(name, factory, args, kwargs)
            return fn(*args, **kwargs)
        if _has_complex(args, kwargs):
            out = kwargs.pop("out", None)
            result = impl(*args, **(_renamed(kwargs, names) if names else kwargs))
            return result if out is None else write_out(name, result, out)
        return fn(*args, **kwargs)
    call.__nova_complex__ = True
    return call


def install(namespace: dict[str, Any], functions: dict[str, Callable] | None = None) -> None:
    """Let ``namespace``'s functions named in ``functions`` (default ``FUNCTIONS``, with
    the factories of ``FACTORIES``; ``complex_math.LINALG_FUNCTIONS`` for
    ``nova.linalg``) take complex tensors (wrapped once; aliases of one function share
    the wrapper)."""
    if functions is None:
        functions = {**FUNCTIONS, **FACTORIES}
    wrapped: dict[int, Callable] = {}
    for name in functions:
        fn = namespace.get(name)
        if callable(fn) and not isinstance(fn, type) and not getattr(fn, "__nova_complex__",
                                                                     False):
            key = id(fn)
            if key not in wrapped:
                w = _dispatching(fn, name, functions)
                w.__module__ = namespace.get("__name__", w.__module__)
                w.__qualname__ = name
                wrapped[key] = w
            namespace[name] = wrapped[key]


def share_wrappers(namespace: dict[str, Any], installed: dict[str, Any]) -> None:
    """Point ``namespace``'s aliases of functions ``install`` wrapped in ``installed`` at
    those wrappers (``nv.special.expit`` is ``nv.sigmoid``, complex-aware as it is)."""
    wrappers = {id(fn.__wrapped__): fn for fn in installed.values()
                if getattr(fn, "__nova_complex__", False) and hasattr(fn, "__wrapped__")}
    for name, fn in list(namespace.items()):
        if id(fn) in wrappers:
            namespace[name] = wrappers[id(fn)]
