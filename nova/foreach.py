"""PyTorch's ``torch._foreach_*`` list ops, as loops of Nova's per-tensor ops.

They are private in PyTorch but public in practice: EMA helpers (timm's ``ModelEmaV3``,
``ema-pytorch``, diffusers' ``EMAModel``) and hand-written optimizers call
``torch._foreach_lerp_``/``_foreach_mul_``/``_foreach_add_``/``_foreach_norm`` on lists of
parameters. PyTorch fuses each into few kernels; Nova's lazy graph fuses the per-tensor
ops anyway, so a loop gives the same values. As PyTorch: out-of-place ops return a
tuple of new tensors, in-place ones write each tensor and return the list; the second
operand is a number, a list of numbers, a list of tensors, or (where PyTorch takes one)
a single tensor; lists must have equal lengths and at least one tensor."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from nova.tensor.tensor import Tensor

_UNARY = ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp",
          "expm1", "floor", "frac", "lgamma", "log", "log10", "log1p", "log2", "neg",
          "reciprocal", "round", "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "tan",
          "tanh", "trunc")
# Binary ops: the second operand as a scalar, a list of scalars or a list of tensors;
# those marked True also take one tensor and (add/sub, with a tensor list) ``alpha``.
_BINARY = {"add": True, "sub": True, "mul": True, "div": True, "pow": False,
           "maximum": False, "minimum": False, "clamp_min": False, "clamp_max": False}


def _tensors(op: str, xs: Any, what: str = "self") -> list[Tensor]:
    if isinstance(xs, Tensor) or not isinstance(xs, (list, tuple)):
        raise TypeError(f"{op}: {what} must be a list or tuple of tensors, got "
                        f"{type(xs).__name__}")
    if not xs:
        raise RuntimeError(f"{op}: Tensor list must have at least one tensor.")
    for x in xs:
        if not isinstance(x, Tensor):
            raise TypeError(f"{op}: {what} must hold tensors, got {type(x).__name__}")
    return list(xs)


def _operands(op: str, n: int, other: Any, tensor_ok: bool) -> list[Any]:
    """The per-tensor second operands: ``other`` repeated, or its items."""
    if isinstance(other, Tensor):
        if not tensor_ok and other.ndim != 0:
            raise TypeError(f"{op}: expected a number, a list of numbers or a list of "
                            f"tensors, got a tensor of shape {tuple(other.shape)}")
        return [other] * n
    if isinstance(other, (int, float, bool, complex)):
        return [other] * n
    if not isinstance(other, (list, tuple)):
        raise TypeError(f"{op}: expected a number, a list of numbers or a list of tensors, "
                        f"got {type(other).__name__}")
    if len(other) != n:
        kind = "tensors" if other and isinstance(other[0], Tensor) else "scalars"
        if kind == "tensors":
            raise RuntimeError(f"{op}: Tensor lists must have the same number of tensors, "
                               f"got {n} and {len(other)}")
        raise RuntimeError(f"{op}: Tensor list must have same number of elements as "
                           f"scalar list ({n} and {len(other)}).")
    return list(other)


def _scalar_list(op: str, n: int, value: Any) -> list[Any]:
    """``value`` per tensor: a number, a list of numbers, or a 1-D tensor of them."""
    if isinstance(value, Tensor):
        if value.ndim != 1 or value.shape[0] != n:
            raise RuntimeError(f"{op}: a tensor of scalars must be 1-D with {n} elements, "
                               f"got shape {tuple(value.shape)}")
        return [v for v in value.tolist()]
    return _operands(op, n, value, tensor_ok=False)


def _apply(op: str, method: str, self: Any, rest: list[list[Any]], inplace: bool,
           **kwargs: Any) -> Any:
    xs = _tensors(op, self)
    outs = []
    for i, x in enumerate(xs):
        args = [r[i] for r in rest]
        if inplace and method in ("maximum", "minimum"):
            x.copy_(getattr(x, method)(*args))     # Tensor has no maximum_/minimum_
            outs.append(x)
        else:
            outs.append(getattr(x, method + ("_" if inplace else ""))(*args, **kwargs))
    return xs if inplace else tuple(outs)


def _make_unary(name: str, inplace: bool) -> Callable[..., Any]:
    op = f"_foreach_{name}{'_' if inplace else ''}"

    def fn(self: Sequence[Tensor]) -> Any:
        return _apply(op, name, self, [], inplace)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"``{name}`` of each tensor (PyTorch's ``torch.{op}``)."
    return fn


def _make_binary(name: str, tensor_ok: bool, inplace: bool) -> Callable[..., Any]:
    op = f"_foreach_{name}{'_' if inplace else ''}"

    def fn(self: Any, other: Any, *, alpha: Any = None) -> Any:
        if name == "pow" and not inplace and isinstance(self, (int, float)):
            base = self                    # _foreach_pow(scalar, exponents)
            return tuple(base ** e for e in _tensors(op, other, "exponent"))
        xs = _tensors(op, self)
        others = _operands(op, len(xs), other, tensor_ok)
        kwargs = {}
        if alpha is not None:
            if name not in ("add", "sub") or not (isinstance(other, Tensor) or (
                    isinstance(other, (list, tuple)) and isinstance(other[0], Tensor))):
                raise TypeError(f"{op}: alpha is accepted only with tensor operands of "
                                f"add and sub")
            kwargs["alpha"] = alpha
        return _apply(op, name, xs, [others], inplace, **kwargs)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"``{name}`` of each tensor with its operand (PyTorch's ``torch.{op}``)."
    return fn


def _make_pointwise(name: str, inplace: bool) -> Callable[..., Any]:
    op = f"_foreach_{name}{'_' if inplace else ''}"

    def fn(self: Any, tensor1: Any, tensor2: Any, value: Any = 1) -> Any:
        xs = _tensors(op, self)
        t1 = _tensors(op, tensor1, "tensor1")
        t2 = _tensors(op, tensor2, "tensor2")
        if not len(xs) == len(t1) == len(t2):
            raise RuntimeError(f"{op}: Tensor lists must have the same number of tensors, "
                               f"got {len(xs)}, {len(t1)} and {len(t2)}")
        values = _scalar_list(op, len(xs), value)
        outs = []
        for x, a, b, v in zip(xs, t1, t2, values):
            outs.append(getattr(x, name + ("_" if inplace else ""))(a, b, value=v))
        return xs if inplace else tuple(outs)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"``{name}`` of each tensor (PyTorch's ``torch.{op}``)."
    return fn


def _make_lerp(inplace: bool) -> Callable[..., Any]:
    op = f"_foreach_lerp{'_' if inplace else ''}"

    def fn(self: Any, tensors1: Any, weight: Any) -> Any:
        xs = _tensors(op, self)
        ends = _tensors(op, tensors1, "tensors1")
        if len(ends) != len(xs):
            raise RuntimeError(f"{op}: Tensor lists must have the same number of tensors, "
                               f"got {len(xs)} and {len(ends)}")
        weights = _operands(op, len(xs), weight, tensor_ok=False)
        return _apply(op, "lerp", xs, [ends, weights], inplace)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"``lerp`` of each tensor towards its partner (PyTorch's ``torch.{op}``)."
    return fn


def _foreach_norm(self: Sequence[Tensor], ord: float = 2, dtype: Any = None
                  ) -> tuple[Tensor, ...]:
    """Each tensor's vector norm (all elements), as ``torch._foreach_norm``."""
    from nova.linalg import vector_norm
    xs = _tensors("_foreach_norm", self)
    if not isinstance(ord, (int, float)) or isinstance(ord, bool):
        raise TypeError(f"_foreach_norm: ord must be a number, got {type(ord).__name__}")
    return tuple(vector_norm(x, ord, dtype=dtype) for x in xs)


def _foreach_max(self: Sequence[Tensor]) -> tuple[Tensor, ...]:
    """Each tensor's largest element (0-d), as ``torch._foreach_max``."""
    return tuple(x.max() for x in _tensors("_foreach_max", self))


def _foreach_clone(self: Sequence[Tensor]) -> tuple[Tensor, ...]:
    """A copy of each tensor (in the autograd graph, as ``clone``), as ``torch._foreach_clone``."""
    return tuple(x.clone() for x in _tensors("_foreach_clone", self))


def _foreach_copy_(self: Sequence[Tensor], src: Sequence[Tensor],
                   non_blocking: bool = False) -> list[Tensor]:
    """Copies each ``src`` tensor into its partner, as ``torch._foreach_copy_``."""
    xs = _tensors("_foreach_copy_", self)
    srcs = _tensors("_foreach_copy_", src, "src")
    if len(srcs) != len(xs):
        raise RuntimeError(f"_foreach_copy_: Tensor lists must have the same number of "
                           f"tensors, got {len(xs)} and {len(srcs)}")
    for x, s in zip(xs, srcs):
        x.copy_(s)
    return xs


def _foreach_zero_(self: Sequence[Tensor]) -> list[Tensor]:
    """Zeroes each tensor, as ``torch._foreach_zero_``."""
    xs = _tensors("_foreach_zero_", self)
    for x in xs:
        x.zero_()
    return xs


def _build() -> dict[str, Callable[..., Any]]:
    ops: dict[str, Callable[..., Any]] = {}
    for inplace in (False, True):
        for name in _UNARY:
            f = _make_unary(name, inplace)
            ops[f.__name__] = f
        for name, tensor_ok in _BINARY.items():
            f = _make_binary(name, tensor_ok, inplace)
            ops[f.__name__] = f
        for name in ("addcmul", "addcdiv"):
            f = _make_pointwise(name, inplace)
            ops[f.__name__] = f
        f = _make_lerp(inplace)
        ops[f.__name__] = f
    for f in (_foreach_norm, _foreach_max, _foreach_clone, _foreach_copy_, _foreach_zero_):
        ops[f.__name__] = f
    return ops


FOREACH_OPS = _build()
globals().update(FOREACH_OPS)
__all__ = sorted(FOREACH_OPS) + ["FOREACH_OPS"]
