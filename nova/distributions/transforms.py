"""Invertible transforms of random variables (``torch.distributions.transforms``): the
base ``Transform`` with its inverse (``.inv``) and single-value cache, the elementwise
``ExpTransform``, ``PowerTransform``, ``SigmoidTransform``, ``TanhTransform``,
``SoftplusTransform``, ``AbsTransform``, ``AffineTransform`` and
``CumulativeDistributionTransform``, the event-shaped ``SoftmaxTransform``,
``StickBreakingTransform``, ``LowerCholeskyTransform``, ``PositiveDefiniteTransform``,
``CorrCholeskyTransform`` and ``ReshapeTransform``, and the combinators ``ComposeTransform`` (with
``identity_transform``), ``IndependentTransform``, ``CatTransform`` and
``StackTransform``: what ``TransformedDistribution`` and ``biject_to``/``transform_to``
are built from.

Where PyTorch's formulas go through ``F.softplus`` (thresholded to ``x`` past 20) these
use the exact ``log(1 + exp(x))`` (``utils.softplus``): the same values to 1e-9
relative past the threshold and to the last digit below it."""
from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from nova import linalg
from nova.core import dtypes as dt
from nova.core.shapes import broadcast_shapes
from nova.distributions import constraints
from nova.distributions.utils import broadcast_all, is_number, size_arg, softplus, sum_rightmost
from nova.nn.functional import pad
from nova.tensor import ops
from nova.tensor.creation import arange, eye, full_like, tensor, zeros, zeros_like
from nova.tensor.elementary import atanh
from nova.tensor.movement import cat, narrow, stack
from nova.tensor.tensor import Tensor

__all__ = [
    "AbsTransform", "AffineTransform", "CatTransform", "ComposeTransform",
    "CorrCholeskyTransform", "CumulativeDistributionTransform", "ExpTransform",
    "IndependentTransform",
    "LowerCholeskyTransform", "PositiveDefiniteTransform", "PowerTransform",
    "ReshapeTransform", "SigmoidTransform", "SoftmaxTransform", "SoftplusTransform",
    "StackTransform", "StickBreakingTransform", "TanhTransform", "Transform",
    "identity_transform",
]


class Transform:
    """An invertible map ``x -> y`` with a computable log-determinant of its Jacobian.

    Subclasses implement ``_call`` and ``_inverse`` (and ``log_abs_det_jacobian`` when
    bijective). ``cache_size=1`` remembers the latest ``(x, y)`` pair, so inverting a
    value this transform produced returns the exact ``x`` it came from (what keeps
    ``TanhTransform``'s inverse finite at samples that rounded to +-1).

    Attributes: ``domain`` and ``codomain`` (constraints), ``bijective``, ``sign`` (+1
    or -1 for monotone univariate transforms)."""

    bijective = False
    domain: constraints.Constraint
    codomain: constraints.Constraint

    def __init__(self, cache_size: int = 0):
        if cache_size not in (0, 1):
            raise ValueError(f"{type(self).__name__}: cache_size must be 0 or 1, got "
                             f"{cache_size!r}")
        self._cache_size = cache_size
        self._inv: Transform | None = None
        self._cached_x_y: tuple[Any, Any] = (None, None)

    def __getstate__(self) -> dict:
        """Pickled without the inverse (which points back here), as PyTorch's."""
        state = self.__dict__.copy()
        state["_inv"] = None
        return state

    @property
    def event_dim(self) -> int:
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self) -> Transform:
        """The inverse transform (``t.inv.inv is t``)."""
        if self._inv is None:
            self._inv = _InverseTransform(self)
        return self._inv

    @property
    def sign(self) -> Any:
        """The sign of the Jacobian's determinant (for monotone univariate transforms)."""
        raise NotImplementedError

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self)}.with_cache is not implemented")

    def __eq__(self, other: Any) -> bool:
        return self is other

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def __call__(self, x: Tensor) -> Tensor:
        """``y = t(x)``."""
        if self._cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = x, y
        return y

    def _inv_call(self, y: Tensor) -> Tensor:
        if self._cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = x, y
        return x

    def _call(self, x: Tensor) -> Tensor:
        raise NotImplementedError

    def _inverse(self, y: Tensor) -> Tensor:
        raise NotImplementedError

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        """``log |dy/dx|`` given an input and its output."""
        raise NotImplementedError

    def forward_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The output shape for an input of ``shape``."""
        return tuple(shape)

    def inverse_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The input shape for an output of ``shape``."""
        return tuple(shape)

    def __repr__(self) -> str:
        return self.__class__.__name__ + "()"


class _InverseTransform(Transform):
    """The inverse of a transform (made by ``Transform.inv``)."""

    def __init__(self, transform: Transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    @constraints.dependent_property(is_discrete=False)
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        return self._inv.codomain

    @constraints.dependent_property(is_discrete=False)
    def codomain(self) -> constraints.Constraint:  # type: ignore[override]
        return self._inv.domain

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return self._inv.bijective

    @property
    def sign(self) -> Any:
        return self._inv.sign

    @property
    def inv(self) -> Transform:
        return self._inv

    def with_cache(self, cache_size: int = 1) -> Transform:
        return self.inv.with_cache(cache_size).inv

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self._inv!r})"

    def __call__(self, x: Tensor) -> Tensor:
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return self._inv.forward_shape(shape)


def _check_transforms(op: str, parts: Any) -> list[Transform]:
    """``parts`` as a list of transforms, or a TypeError naming ``op`` and the culprit."""
    if isinstance(parts, Transform) or not isinstance(parts, Sequence):
        raise TypeError(f"{op}: expected a list of Transforms, got {type(parts).__name__}")
    for i, part in enumerate(parts):
        if not isinstance(part, Transform):
            raise TypeError(f"{op}: element {i} is a {type(part).__name__}, not a Transform")
    return list(parts)


# ---------------------------------------------------------------- combinators


class ComposeTransform(Transform):
    """The transforms ``parts`` applied in order. The parts do the caching (a nonzero
    ``cache_size`` gives each part that cache). The domain and codomain are the first
    part's domain and the last part's codomain, reinterpreted to the largest event dim
    the chain reaches (a part coupling k dims makes every step see at least k)."""

    def __init__(self, parts: list[Transform], cache_size: int = 0):
        parts = _check_transforms("ComposeTransform", parts)
        if cache_size:
            parts = [part.with_cache(cache_size) for part in parts]
        super().__init__(cache_size=cache_size)
        self.parts = parts

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    __hash__ = object.__hash__

    @constraints.dependent_property(is_discrete=False)
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        event_dim = self.parts[-1].codomain.event_dim
        for part in reversed(self.parts):
            event_dim += part.domain.event_dim - part.codomain.event_dim
            event_dim = max(event_dim, part.domain.event_dim)
        if event_dim > domain.event_dim:
            domain = constraints.independent(domain, event_dim - domain.event_dim)
        return domain

    @constraints.dependent_property(is_discrete=False)
    def codomain(self) -> constraints.Constraint:  # type: ignore[override]
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim += part.codomain.event_dim - part.domain.event_dim
            event_dim = max(event_dim, part.codomain.event_dim)
        if event_dim > codomain.event_dim:
            codomain = constraints.independent(codomain, event_dim - codomain.event_dim)
        return codomain

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return all(p.bijective for p in self.parts)

    @property
    def sign(self) -> Any:
        sign: Any = 1
        for p in self.parts:
            sign = sign * p.sign
        return sign

    @property
    def inv(self) -> Transform:
        if self._inv is None:
            inv = ComposeTransform([p.inv for p in reversed(self.parts)])
            inv._inv = self
            self._inv = inv
        return self._inv

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return ComposeTransform(self.parts, cache_size=cache_size)

    def __call__(self, x: Tensor) -> Tensor:
        for part in self.parts:
            x = part(x)
        return x

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        """The parts' log-determinants at the intermediate values (recomputed from
        ``x``, free where the parts cache), each summed over the event dims it sees."""
        if not self.parts:
            return zeros_like(x)
        xs = [x]
        for part in self.parts[:-1]:
            xs.append(part(xs[-1]))
        xs.append(y)
        terms = []
        event_dim = self.domain.event_dim
        for part, a, b in zip(self.parts, xs[:-1], xs[1:]):
            terms.append(sum_rightmost(part.log_abs_det_jacobian(a, b),
                                       event_dim - part.domain.event_dim))
            event_dim += part.codomain.event_dim - part.domain.event_dim
        return functools.reduce(operator.add, terms)

    def forward_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        for part in self.parts:
            shape = part.forward_shape(shape)
        return tuple(shape)

    def inverse_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        for part in reversed(self.parts):
            shape = part.inverse_shape(shape)
        return tuple(shape)

    def __repr__(self) -> str:
        return (self.__class__.__name__ + "(\n    "
                + ",\n    ".join(repr(p) for p in self.parts) + "\n)")


identity_transform = ComposeTransform([])


def _check_ndim(op: str, value: Tensor, needed: int) -> None:
    if value.ndim < needed:
        raise ValueError(f"{op}: too few dimensions on input: expected at least {needed}, "
                         f"got shape {tuple(value.shape)}")


class IndependentTransform(Transform):
    """``base_transform`` with ``reinterpreted_batch_ndims`` more rightmost dims taken
    as one event: the values are the base's, the log-determinant is summed over those
    dims."""

    def __init__(self, base_transform: Transform, reinterpreted_batch_ndims: int,
                 cache_size: int = 0):
        if not isinstance(base_transform, Transform):
            raise TypeError(f"IndependentTransform: base_transform must be a Transform, got "
                            f"{type(base_transform).__name__}")
        if isinstance(reinterpreted_batch_ndims, bool) or \
                not isinstance(reinterpreted_batch_ndims, int) or reinterpreted_batch_ndims < 0:
            raise ValueError(f"IndependentTransform: reinterpreted_batch_ndims must be an "
                             f"int >= 0, got {reinterpreted_batch_ndims!r}")
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims,
                                    cache_size=cache_size)

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, IndependentTransform)
                and self.reinterpreted_batch_ndims == other.reinterpreted_batch_ndims
                and self.base_transform == other.base_transform)

    __hash__ = object.__hash__

    @constraints.dependent_property(is_discrete=False)
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.independent(self.base_transform.domain,
                                       self.reinterpreted_batch_ndims)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.independent(self.base_transform.codomain,
                                       self.reinterpreted_batch_ndims)

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return self.base_transform.bijective

    @property
    def sign(self) -> Any:
        return self.base_transform.sign

    def _call(self, x: Tensor) -> Tensor:
        _check_ndim("IndependentTransform", x, self.domain.event_dim)
        return self.base_transform(x)

    def _inverse(self, y: Tensor) -> Tensor:
        _check_ndim("IndependentTransform.inv", y, self.codomain.event_dim)
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y),
                             self.reinterpreted_batch_ndims)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.base_transform!r}, "
                f"{self.reinterpreted_batch_ndims})")

    def forward_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return self.base_transform.inverse_shape(shape)


class ReshapeTransform(Transform):
    """Reshapes the rightmost ``in_shape`` dims to ``out_shape`` (the same number of
    elements); the Jacobian is a permutation, its log-determinant 0."""

    bijective = True

    def __init__(self, in_shape: Sequence[int], out_shape: Sequence[int], cache_size: int = 0):
        self.in_shape = size_arg(in_shape, "ReshapeTransform in_shape")
        self.out_shape = size_arg(out_shape, "ReshapeTransform out_shape")
        if math.prod(self.in_shape) != math.prod(self.out_shape):
            raise ValueError(f"ReshapeTransform: in_shape {self.in_shape} and out_shape "
                             f"{self.out_shape} have different numbers of elements")
        super().__init__(cache_size=cache_size)

    @constraints.dependent_property
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.independent(constraints.real, len(self.in_shape))

    @constraints.dependent_property
    def codomain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return ReshapeTransform(self.in_shape, self.out_shape, cache_size=cache_size)

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, ReshapeTransform) and self.in_shape == other.in_shape
                and self.out_shape == other.out_shape)

    __hash__ = object.__hash__

    def _call(self, x: Tensor) -> Tensor:
        batch_shape = tuple(x.shape)[:x.ndim - len(self.in_shape)]
        return x.reshape(batch_shape + self.out_shape)

    def _inverse(self, y: Tensor) -> Tensor:
        batch_shape = tuple(y.shape)[:y.ndim - len(self.out_shape)]
        return y.reshape(batch_shape + self.in_shape)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        batch_shape = tuple(x.shape)[:x.ndim - len(self.in_shape)]
        return zeros(batch_shape, dtype=x.dtype, device=x.device)

    def _reshaped(self, what: str, shape: Any, have: tuple, give: tuple) -> tuple[int, ...]:
        shape = tuple(shape)
        if len(shape) < len(have):
            raise ValueError(f"ReshapeTransform.{what}: too few dimensions on input: shape "
                             f"{shape} has fewer than {len(have)}")
        cut = len(shape) - len(have)
        if shape[cut:] != have:
            raise ValueError(f"ReshapeTransform.{what}: shape mismatch: expected {have} but "
                             f"got {shape[cut:]}")
        return shape[:cut] + give

    def forward_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return self._reshaped("forward_shape", shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return self._reshaped("inverse_shape", shape, self.out_shape, self.in_shape)


# ---------------------------------------------------------------- elementwise


class ExpTransform(Transform):
    """``y = exp(x)``."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ExpTransform)

    __hash__ = object.__hash__

    def _call(self, x: Tensor) -> Tensor:
        return x.exp()

    def _inverse(self, y: Tensor) -> Tensor:
        return y.log()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return x


class PowerTransform(Transform):
    """``y = x ** exponent`` on the positive reals (``exponent`` a number or a tensor,
    broadcast with ``x``)."""

    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent: Tensor | float, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        (self.exponent,) = broadcast_all(exponent)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return PowerTransform(self.exponent, cache_size=cache_size)

    @property
    def sign(self) -> Any:
        return self.exponent.sign()

    def __eq__(self, other: Any) -> bool:
        """Equal exponents (compared by value, which realizes them, as PyTorch's
        ``.item()`` does)."""
        if not isinstance(other, PowerTransform):
            return False
        return self.exponent is other.exponent or bool(
            ops.eq(self.exponent, other.exponent).all())

    __hash__ = object.__hash__

    def _call(self, x: Tensor) -> Tensor:
        return x.pow(self.exponent)

    def _inverse(self, y: Tensor) -> Tensor:
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return broadcast_shapes("PowerTransform", tuple(shape), tuple(self.exponent.shape))

    def inverse_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return self.forward_shape(shape)


def _clipped_sigmoid(x: Tensor) -> Tensor:
    """``sigmoid(x)`` kept inside ``[tiny, 1 - eps]`` of its dtype, so its logit and
    the logs taken of it stay finite."""
    info = dt.finfo(x.dtype)
    return ops.sigmoid(x).clamp(min=info.tiny, max=1.0 - info.eps)


class SigmoidTransform(Transform):
    """``y = 1 / (1 + exp(-x))``; the inverse is the logit, of the clamped ``y`` (as
    PyTorch's, so 0 and 1 map to finite values)."""

    domain = constraints.real
    codomain = constraints.unit_interval
    bijective = True
    sign = +1

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, SigmoidTransform)

    __hash__ = object.__hash__

    def _call(self, x: Tensor) -> Tensor:
        return _clipped_sigmoid(x)

    def _inverse(self, y: Tensor) -> Tensor:
        info = dt.finfo(y.dtype)
        y = y.clamp(min=info.tiny, max=1.0 - info.eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -softplus(-x) - softplus(x)


class SoftplusTransform(Transform):
    """``y = log(1 + exp(x))``; the inverse is ``y + log(-expm1(-y))``."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, SoftplusTransform)

    __hash__ = object.__hash__

    def _call(self, x: Tensor) -> Tensor:
        return softplus(x)

    def _inverse(self, y: Tensor) -> Tensor:
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -softplus(-x)


class TanhTransform(Transform):
    """``y = tanh(x)``, the squashing of SAC policies. The log-determinant is
    ``2 (log 2 - x - softplus(-2x))``, which stays finite where ``1 - tanh(x)^2``
    rounds to 0. The inverse ``atanh`` is not clamped: a sample that rounded to +-1
    inverts to +-inf, so score samples through ``cache_size=1``, which returns the
    ``x`` they came from."""

    domain = constraints.real
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = +1

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, TanhTransform)

    __hash__ = object.__hash__

    def _call(self, x: Tensor) -> Tensor:
        return x.tanh()

    def _inverse(self, y: Tensor) -> Tensor:
        return atanh(y)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return 2.0 * (math.log(2.0) - x - softplus(-2.0 * x))


class AbsTransform(Transform):
    """``y = |x|`` (not bijective: the inverse returns the nonnegative preimage)."""

    domain = constraints.real
    codomain = constraints.positive

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, AbsTransform)

    __hash__ = object.__hash__

    def _call(self, x: Tensor) -> Tensor:
        return x.abs()

    def _inverse(self, y: Tensor) -> Tensor:
        return y


class AffineTransform(Transform):
    """``y = loc + scale * x``, elementwise; ``event_dim`` is the number of rightmost
    dims that form an event (their log-determinants are summed)."""

    bijective = True

    def __init__(self, loc: Tensor | float, scale: Tensor | float, event_dim: int = 0,
                 cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.loc = loc
        self.scale = scale
        self._event_dim = event_dim

    @property
    def event_dim(self) -> int:
        return self._event_dim

    @constraints.dependent_property(is_discrete=False)
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self) -> constraints.Constraint:  # type: ignore[override]
        return self.domain

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self.event_dim, cache_size=cache_size)

    def __eq__(self, other: Any) -> bool:
        """Equal parameters (tensors are compared by value, which realizes them, as
        PyTorch's ``.item()`` does)."""
        if not isinstance(other, AffineTransform):
            return False
        for a, b in ((self.loc, other.loc), (self.scale, other.scale)):
            if is_number(a) and is_number(b):
                if a != b:
                    return False
            elif a is not b and not bool(ops.eq(a, b).all()):
                return False
        return True

    __hash__ = object.__hash__

    @property
    def sign(self) -> Any:
        if is_number(self.scale):
            return 1 if self.scale > 0 else -1 if self.scale < 0 else 0
        return self.scale.sign()

    def _call(self, x: Tensor) -> Tensor:
        return self.loc + self.scale * x

    def _inverse(self, y: Tensor) -> Tensor:
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        shape = x.shape
        if is_number(self.scale):
            result = full_like(x, math.log(abs(self.scale)))
        else:
            result = self.scale.abs().log()
        if self.event_dim:
            result = result.reshape(result.shape[:result.ndim - self.event_dim] + (-1,)).sum(-1)
            shape = shape[:len(shape) - self.event_dim]
        return result.expand(shape)

    def forward_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return broadcast_shapes("AffineTransform", tuple(shape), _shape(self.loc),
                                _shape(self.scale))

    def inverse_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return self.forward_shape(shape)


def _shape(value: Any) -> tuple[int, ...]:
    return tuple(value.shape) if isinstance(value, Tensor) else ()


class CumulativeDistributionTransform(Transform):
    """``y = distribution.cdf(x)``, onto the unit interval (a copula's marginals); the
    inverse is the ``icdf`` and the log-determinant the ``log_prob``."""

    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution: Any, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        return self.distribution.support

    def _call(self, x: Tensor) -> Tensor:
        return self.distribution.cdf(x)

    def _inverse(self, y: Tensor) -> Tensor:
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return self.distribution.log_prob(x)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return CumulativeDistributionTransform(self.distribution, cache_size=cache_size)


# ---------------------------------------------------------------- event-shaped


def _vector_shape(op: str, shape: Any) -> tuple[int, ...]:
    shape = tuple(shape)
    if len(shape) < 1:
        raise ValueError(f"{op}: too few dimensions on input: a vector event needs at least "
                         f"1, got shape {shape}")
    return shape


class SoftmaxTransform(Transform):
    """Unconstrained vectors to the simplex: ``exp`` then normalize over the last dim.
    Not bijective (adding a constant changes nothing); the inverse is ``log``, one
    preimage. Mostly coordinate-wise, which suits optimization (``transform_to``)."""

    domain = constraints.real_vector
    codomain = constraints.simplex

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, SoftmaxTransform)

    __hash__ = object.__hash__

    def _call(self, x: Tensor) -> Tensor:
        probs = (x - x.amax(-1, keepdim=True)).exp()
        return probs / probs.sum(-1, keepdim=True)

    def _inverse(self, y: Tensor) -> Tensor:
        return y.log()

    def forward_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return _vector_shape("SoftmaxTransform", shape)

    def inverse_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return _vector_shape("SoftmaxTransform", shape)


def _stick_offsets(k: int, like: Tensor) -> Tensor:
    """``[k, k-1, ..., 1]``: the stick-breaking offsets that put the zero vector at the
    simplex's centre."""
    return arange(k, 0, -1, dtype=like.dtype, device=like.device)


class StickBreakingTransform(Transform):
    """Unconstrained vectors of size K to the simplex of size K + 1 by stick breaking:
    each coordinate's sigmoid (shifted so that zero maps to the centre) takes its share
    of the stick that is left. Bijective (what ``biject_to(simplex)`` is, for HMC)."""

    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, StickBreakingTransform)

    __hash__ = object.__hash__

    def _call(self, x: Tensor) -> Tensor:
        offset = _stick_offsets(x.shape[-1], x)
        z = _clipped_sigmoid(x - offset.log())
        z_cumprod = (1 - z).cumprod(-1)
        return pad(z, [0, 1], value=1) * pad(z_cumprod, [1, 0], value=1)

    def _inverse(self, y: Tensor) -> Tensor:
        y_crop = y[..., :-1]
        offset = _stick_offsets(y_crop.shape[-1], y)
        # clamped so the stick left stays positive where y[-1] ~ 0 or y[:-1].sum() ~ 1
        sf = (1 - y_crop.cumsum(-1)).clamp(min=dt.finfo(y.dtype).tiny)
        return y_crop.log() - sf.log() + offset.log()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        x = x - _stick_offsets(x.shape[-1], x).log()
        # log(1 - sigmoid(x)) = -x + log(sigmoid(x))
        return (-x - softplus(-x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        shape = _vector_shape("StickBreakingTransform", shape)
        return shape[:-1] + (shape[-1] + 1,)

    def inverse_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        shape = _vector_shape("StickBreakingTransform", shape)
        return shape[:-1] + (shape[-1] - 1,)


def _lower_with_diagonal(x: Tensor, diagonal_map: str) -> Tensor:
    """``x``'s strict lower triangle plus ``exp`` or ``log`` of its diagonal."""
    diagonal = x.diagonal(0, -2, -1)
    diagonal = diagonal.exp() if diagonal_map == "exp" else diagonal.log()
    return x.tril(-1) + diagonal.diag_embed()


class LowerCholeskyTransform(Transform):
    """Unconstrained square matrices to lower-triangular ones with a positive diagonal
    (the strict lower triangle kept, the diagonal exponentiated, the upper triangle
    dropped): a Cholesky factor to optimize."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, LowerCholeskyTransform)

    __hash__ = object.__hash__

    def _call(self, x: Tensor) -> Tensor:
        return _lower_with_diagonal(x, "exp")

    def _inverse(self, y: Tensor) -> Tensor:
        return _lower_with_diagonal(y, "log")


class PositiveDefiniteTransform(Transform):
    """Unconstrained square matrices to positive-definite ones: ``L L^T`` of
    ``LowerCholeskyTransform``'s ``L``. The inverse factors ``y`` with
    ``linalg.cholesky``, which reads the values (one realization) to raise on a matrix
    that is not positive-definite."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, PositiveDefiniteTransform)

    __hash__ = object.__hash__

    def _call(self, x: Tensor) -> Tensor:
        lower = LowerCholeskyTransform()(x)
        return lower @ lower.mT

    def _inverse(self, y: Tensor) -> Tensor:
        return LowerCholeskyTransform().inv(linalg.cholesky(y))


def _tril_positions(n: int, diag: int) -> np.ndarray:
    """Flat positions (row-major) in an ``n x n`` matrix of the entries at or below
    diagonal ``diag``, in row order."""
    rows, cols = np.indices((n, n))
    return np.flatnonzero(cols < rows + (diag + 1))


def tril_matrix_to_vec(mat: Tensor, diag: int = 0) -> Tensor:
    """The entries of ``mat`` (``... x D x D``) at or below diagonal ``diag``, in row
    order, as the last dim (``torch.distributions.utils.tril_matrix_to_vec``)."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    index = tensor(_tril_positions(n, diag), dtype=dt.int64, device=mat.device)
    flat = mat.reshape(tuple(mat.shape[:-2]) + (n * n,))
    return flat.index_select(-1, index)


def vec_to_tril_matrix(vec: Tensor, diag: int = 0) -> Tensor:
    """The inverse of ``tril_matrix_to_vec``: a ``D x D`` matrix (batched over the
    leading dims), zero above diagonal ``diag``, its lower part filled from ``vec`` in
    row order (``torch.distributions.utils.vec_to_tril_matrix``)."""
    size = vec.shape[-1]
    # the positive root of D^2 + (1 + 2 diag) D - |diag| (diag + 1) - 2 size = 0
    n = (-(1 + 2 * diag) + math.sqrt((1 + 2 * diag) ** 2 + 8 * size
                                     + 4 * abs(diag) * (diag + 1))) / 2
    if abs(round(n) - n) > dt.finfo(vec.dtype).eps:
        raise ValueError(f"The size of last dimension is {size} which cannot be expressed "
                         "as the lower triangular part of a square D x D matrix.")
    n = round(n)
    source = np.full(n * n, size)          # the index of an appended zero
    source[_tril_positions(n, diag)] = np.arange(size)
    padded = pad(vec, [0, 1], value=0.0)
    index = tensor(source, dtype=dt.int64, device=vec.device)
    return padded.index_select(-1, index).reshape(tuple(vec.shape[:-1]) + (n, n))


class CorrCholeskyTransform(Transform):
    """Unconstrained vectors of length ``D (D - 1) / 2`` to Cholesky factors of ``D x
    D`` correlation matrices (lower-triangular, positive diagonal, unit-norm rows):
    the vector fills the strict lower triangle in row order, ``tanh`` maps each entry
    into (-1, 1), and each row goes through a signed stick breaking of its squares
    (Stan's construction, as PyTorch's). Bijective; ``log_abs_det_jacobian`` is that
    of ``x`` and the flattened strict lower triangle of ``y``."""

    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, CorrCholeskyTransform)

    __hash__ = object.__hash__

    def _call(self, x: Tensor) -> Tensor:
        x = ops.tanh(x)
        eps = dt.finfo(x.dtype).eps
        x = x.clamp(min=-1 + eps, max=1 - eps)
        r = vec_to_tril_matrix(x, diag=-1)
        # y = sign(r) sqrt(z cumprod(1 - z)) = r sqrt(cumprod(1 - z)) for z = r^2
        z1m_cumprod_sqrt = (1 - r ** 2).sqrt().cumprod(-1)
        r = r + eye(r.shape[-1], dtype=r.dtype, device=r.device)
        return r * pad(z1m_cumprod_sqrt[..., :-1], [1, 0], value=1.0)

    def _inverse(self, y: Tensor) -> Tensor:
        y_cumsum = 1 - (y * y).cumsum(-1)
        y_cumsum_shifted = pad(y_cumsum[..., :-1], [1, 0], value=1.0)
        y_vec = tril_matrix_to_vec(y, diag=-1)
        y_cumsum_vec = tril_matrix_to_vec(y_cumsum_shifted, diag=-1)
        t = y_vec / y_cumsum_vec.sqrt()
        return atanh(t)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        y1m_cumsum = 1 - (y * y).cumsum(-1)
        # diag=-2 drops each row's last stick, so no shift is needed (also for 2 x 2)
        y1m_cumsum_tril = tril_matrix_to_vec(y1m_cumsum, diag=-2)
        stick_breaking_logdet = 0.5 * y1m_cumsum_tril.log().sum(-1)
        tanh_logdet = -2 * (x + softplus(-2 * x) - math.log(2.0)).sum(-1)
        return stick_breaking_logdet + tanh_logdet

    def forward_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(shape) < 1:
            raise ValueError("CorrCholeskyTransform.forward_shape: too few dimensions on "
                             f"input: shape {tuple(shape)}")
        N = shape[-1]
        D = round((0.25 + 2 * N) ** 0.5 + 0.5)
        if D * (D - 1) // 2 != N:
            raise ValueError(f"CorrCholeskyTransform.forward_shape: input is not a flattened "
                             f"lower-diagonal number: last dim {N} is not D (D - 1) / 2")
        return tuple(shape[:-1]) + (D, D)

    def inverse_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(shape) < 2:
            raise ValueError("CorrCholeskyTransform.inverse_shape: too few dimensions on "
                             f"input: shape {tuple(shape)}")
        N, D = shape[-2], shape[-1]
        if N != D:
            raise ValueError(f"CorrCholeskyTransform.inverse_shape: input is not square: "
                             f"{tuple(shape[-2:])}")
        return tuple(shape[:-2]) + (N * (N - 1) // 2,)


# ---------------------------------------------------------------- cat and stack


def _check_dim(op: str, what: str, value: Tensor, dim: int, size: int) -> None:
    """``dim`` is a dim of ``value`` and of size ``size`` there."""
    if not -value.ndim <= dim < value.ndim:
        raise IndexError(f"{op}: dim {dim} is out of range for {what} of shape "
                         f"{tuple(value.shape)}")
    if value.shape[dim] != size:
        raise ValueError(f"{op}: {what} of shape {tuple(value.shape)} has size "
                         f"{value.shape[dim]} at dim {dim}, expected {size}")


class CatTransform(Transform):
    """The transforms ``tseq`` applied to consecutive slices along ``dim`` of lengths
    ``lengths`` (1 each by default), the results concatenated (``torch.cat``)."""

    def __init__(self, tseq: Sequence[Transform], dim: int = 0,
                 lengths: Sequence[int] | None = None, cache_size: int = 0):
        tseq = _check_transforms("CatTransform", tseq)
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = tseq
        self.lengths = [1] * len(tseq) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise ValueError(f"CatTransform: {len(self.lengths)} lengths for "
                             f"{len(self.transforms)} transforms")
        self.dim = dim

    @property
    def event_dim(self) -> int:
        return max(t.event_dim for t in self.transforms)

    @property
    def length(self) -> int:
        return sum(self.lengths)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, CatTransform) and self.dim == other.dim
                and self.lengths == other.lengths and self.transforms == other.transforms)

    __hash__ = object.__hash__

    def _slices(self, what: str, value: Tensor) -> list[Tensor]:
        _check_dim("CatTransform", what, value, self.dim, self.length)
        starts = [sum(self.lengths[:i]) for i in range(len(self.lengths))]
        return [narrow(value, self.dim, s, n) for s, n in zip(starts, self.lengths)]

    def _call(self, x: Tensor) -> Tensor:
        return cat([t(s) for t, s in zip(self.transforms, self._slices("x", x))], self.dim)

    def _inverse(self, y: Tensor) -> Tensor:
        return cat([t.inv(s) for t, s in zip(self.transforms, self._slices("y", y))],
                   self.dim)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        """Each slice's log-determinant, summed to the common event dim; concatenated
        along ``dim`` when it is a batch dim, added when it lies inside the event."""
        terms = []
        for t, xs, ys in zip(self.transforms, self._slices("x", x), self._slices("y", y)):
            term = t.log_abs_det_jacobian(xs, ys)
            if t.event_dim < self.event_dim:
                term = sum_rightmost(term, self.event_dim - t.event_dim)
            terms.append(term)
        dim = self.dim - x.ndim if self.dim >= 0 else self.dim
        dim += self.event_dim
        if dim < 0:
            return cat(terms, dim)
        return functools.reduce(operator.add, terms)

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @constraints.dependent_property
    def codomain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)


class StackTransform(Transform):
    """The transforms ``tseq`` applied to the slices ``value.select(dim, i)``, the
    results stacked along ``dim`` (``torch.stack``)."""

    def __init__(self, tseq: Sequence[Transform], dim: int = 0, cache_size: int = 0):
        tseq = _check_transforms("StackTransform", tseq)
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = tseq
        self.dim = dim

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return StackTransform(self.transforms, self.dim, cache_size)

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, StackTransform) and self.dim == other.dim
                and self.transforms == other.transforms)

    __hash__ = object.__hash__

    def _slices(self, what: str, value: Tensor) -> list[Tensor]:
        _check_dim("StackTransform", what, value, self.dim, len(self.transforms))
        return [value.select(self.dim, i) for i in range(len(self.transforms))]

    def _call(self, x: Tensor) -> Tensor:
        return stack([t(s) for t, s in zip(self.transforms, self._slices("x", x))], self.dim)

    def _inverse(self, y: Tensor) -> Tensor:
        return stack([t.inv(s) for t, s in zip(self.transforms, self._slices("y", y))],
                     self.dim)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return stack([t.log_abs_det_jacobian(xs, ys) for t, xs, ys in
                      zip(self.transforms, self._slices("x", x), self._slices("y", y))],
                     self.dim)

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @constraints.dependent_property
    def codomain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.stack([t.codomain for t in self.transforms], self.dim)
