"""Constraints: the regions a distribution's parameters and samples live in
(``torch.distributions.constraints``, the same names and ``check`` semantics).

``check(value)`` works on a Nova tensor (recording lazy comparisons, as torch's does) and
on a numpy array (what argument validation uses, on values the host already knows: see
``utils.known_values``). A bound that is a tensor the host does not know makes a numpy
check raise ``UnknownValues``, which validation takes as "cannot check now"."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nova import linalg
from nova.core import dtypes as dt
from nova.distributions.utils import known_values
from nova.tensor import movement
from nova.tensor.creation import full, tensor
from nova.tensor.elementary import isclose
from nova.tensor.tensor import Tensor

__all__ = [
    "Constraint", "boolean", "cat", "corr_cholesky", "dependent", "dependent_property",
    "greater_than",
    "greater_than_eq", "half_open_interval", "independent", "integer_interval", "interval",
    "is_dependent", "less_than", "lower_cholesky", "lower_triangular", "nonnegative",
    "nonnegative_integer", "one_hot", "positive", "positive_definite", "positive_integer",
    "positive_semidefinite", "real", "real_vector", "simplex", "square", "stack",
    "symmetric", "unit_interval",
]


class UnknownValues(Exception):
    """A numpy check met a tensor bound whose values are not on the host yet."""


def _bound(bound: Any, value: Any) -> Any:
    """``bound`` in the kind of ``value``: as it is for a tensor value, as host values
    for a numpy value (``UnknownValues`` if the host does not know them)."""
    if isinstance(value, Tensor) or not isinstance(bound, Tensor):
        return bound
    known = known_values(bound)
    if known is None:
        raise UnknownValues
    return known


def _text(bound: Any) -> str:
    """A bound for a repr, never running a step: a tensor by its known values or its
    shape."""
    if not isinstance(bound, Tensor):
        return f"{bound}"
    known = known_values(bound)
    return f"{known}" if known is not None else f"Tensor of shape {bound.shape}"


class Constraint:
    """A region over which a variable is valid. ``is_discrete``: whether the region is
    discrete; ``event_dim``: how many rightmost dims ``check`` reduces over."""

    is_discrete = False
    event_dim = 0

    def check(self, value: Any) -> Any:
        """A boolean tensor (or array) of ``value``'s shape minus ``event_dim`` dims,
        True where the event satisfies the constraint."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.__class__.__name__[1:] + "()"


class _Dependent(Constraint):
    """A placeholder for variables whose support depends on other variables (nothing
    can be checked); ``is_discrete``/``event_dim`` when known statically."""

    def __init__(self, *, is_discrete: Any = NotImplemented, event_dim: Any = NotImplemented):
        self._is_discrete = is_discrete
        self._event_dim = event_dim

    @property
    def is_discrete(self) -> bool:  # type: ignore[override]
        if self._is_discrete is NotImplemented:
            raise NotImplementedError(".is_discrete cannot be determined statically")
        return self._is_discrete

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        if self._event_dim is NotImplemented:
            raise NotImplementedError(".event_dim cannot be determined statically")
        return self._event_dim

    def __call__(self, *, is_discrete: Any = NotImplemented,
                 event_dim: Any = NotImplemented) -> _Dependent:
        """``dependent(is_discrete=True, event_dim=1)``: the same with static attributes."""
        if is_discrete is NotImplemented:
            is_discrete = self._is_discrete
        if event_dim is NotImplemented:
            event_dim = self._event_dim
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, value: Any) -> Any:
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint: Any) -> bool:
    """Whether ``constraint`` is a dependent one (which validation skips)."""
    return isinstance(constraint, _Dependent)


class _DependentProperty(property, _Dependent):
    """A property that is a dependent constraint when read from the class and the
    instance's actual constraint when read from an instance::

        @constraints.dependent_property(is_discrete=False, event_dim=0)
        def support(self):
            return constraints.interval(self.low, self.high)
    """

    def __init__(self, fn: Callable[..., Any] | None = None, *,
                 is_discrete: Any = NotImplemented, event_dim: Any = NotImplemented):
        property.__init__(self, fn)
        self._is_discrete = is_discrete
        self._event_dim = event_dim

    def __call__(self, fn: Callable[..., Any]) -> _DependentProperty:  # type: ignore[override]
        return _DependentProperty(fn, is_discrete=self._is_discrete, event_dim=self._event_dim)


class _IndependentConstraint(Constraint):
    """``base_constraint`` with ``reinterpreted_batch_ndims`` more dims reduced: an event
    is valid when all its entries are."""

    def __init__(self, base_constraint: Constraint, reinterpreted_batch_ndims: int):
        if not isinstance(base_constraint, Constraint):
            raise TypeError(f"independent: base_constraint must be a Constraint, got "
                            f"{type(base_constraint).__name__}")
        if not isinstance(reinterpreted_batch_ndims, int) or reinterpreted_batch_ndims < 0:
            raise ValueError(f"independent: reinterpreted_batch_ndims must be an int >= 0, "
                             f"got {reinterpreted_batch_ndims!r}")
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    @property
    def is_discrete(self) -> bool:  # type: ignore[override]
        return self.base_constraint.is_discrete

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value: Any) -> Any:
        result = self.base_constraint.check(value)
        k = self.reinterpreted_batch_ndims
        if result.ndim < k:
            raise ValueError(f"Expected value.dim() >= {self.event_dim} but got {value.ndim}")
        return result.reshape(result.shape[:result.ndim - k] + (-1,)).all(-1)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__[1:]}({self.base_constraint!r}, "
                f"{self.reinterpreted_batch_ndims})")


class _Boolean(Constraint):
    """The two values {0, 1}."""

    is_discrete = True

    def check(self, value: Any) -> Any:
        return (value == 0) | (value == 1)


class _OneHot(Constraint):
    """One-hot vectors."""

    is_discrete = True
    event_dim = 1

    def check(self, value: Any) -> Any:
        is_boolean = (value == 0) | (value == 1)
        return is_boolean.all(-1) & (value.sum(-1) == 1)


class _IntegerInterval(Constraint):
    """Integers in ``[lower_bound, upper_bound]``."""

    is_discrete = True

    def __init__(self, lower_bound: Any, upper_bound: Any):
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound

    def check(self, value: Any) -> Any:
        lower, upper = _bound(self.lower_bound, value), _bound(self.upper_bound, value)
        return (value % 1 == 0) & (lower <= value) & (value <= upper)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__[1:]}(lower_bound={_text(self.lower_bound)}, "
                f"upper_bound={_text(self.upper_bound)})")


class _IntegerGreaterThan(Constraint):
    """Integers in ``[lower_bound, inf)``."""

    is_discrete = True

    def __init__(self, lower_bound: Any):
        self.lower_bound = lower_bound

    def check(self, value: Any) -> Any:
        return (value % 1 == 0) & (value >= _bound(self.lower_bound, value))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__[1:]}(lower_bound={_text(self.lower_bound)})"


class _Real(Constraint):
    """The extended real line ``[-inf, inf]`` (NaN is outside)."""

    def check(self, value: Any) -> Any:
        return value == value


class _GreaterThan(Constraint):
    """The half line ``(lower_bound, inf]``."""

    def __init__(self, lower_bound: Any):
        self.lower_bound = lower_bound

    def check(self, value: Any) -> Any:
        return value > _bound(self.lower_bound, value)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__[1:]}(lower_bound={_text(self.lower_bound)})"


class _GreaterThanEq(Constraint):
    """The half line ``[lower_bound, inf)``."""

    def __init__(self, lower_bound: Any):
        self.lower_bound = lower_bound

    def check(self, value: Any) -> Any:
        return value >= _bound(self.lower_bound, value)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__[1:]}(lower_bound={_text(self.lower_bound)})"


class _LessThan(Constraint):
    """The half line ``[-inf, upper_bound)``."""

    def __init__(self, upper_bound: Any):
        self.upper_bound = upper_bound

    def check(self, value: Any) -> Any:
        return value < _bound(self.upper_bound, value)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__[1:]}(upper_bound={_text(self.upper_bound)})"


class _Interval(Constraint):
    """The interval ``[lower_bound, upper_bound]``."""

    def __init__(self, lower_bound: Any, upper_bound: Any):
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound

    def check(self, value: Any) -> Any:
        lower, upper = _bound(self.lower_bound, value), _bound(self.upper_bound, value)
        return (value >= lower) & (value <= upper)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__[1:]}(lower_bound={_text(self.lower_bound)}, "
                f"upper_bound={_text(self.upper_bound)})")


class _HalfOpenInterval(_Interval):
    """The interval ``[lower_bound, upper_bound)``."""

    def check(self, value: Any) -> Any:
        lower, upper = _bound(self.lower_bound, value), _bound(self.upper_bound, value)
        return (value >= lower) & (value < upper)


class _Simplex(Constraint):
    """The unit simplex over the last dim: ``x >= 0`` and ``|sum(x) - 1| < 1e-6``."""

    event_dim = 1

    def check(self, value: Any) -> Any:
        return (value >= 0).all(-1) & (abs(value.sum(-1) - 1) < 1e-6)


def _lower_triangular(value: Any) -> Any:
    tril = np.tril(value) if isinstance(value, np.ndarray) else value.tril()
    same = tril == value
    return same.reshape(same.shape[:-2] + (-1,)).all(-1)


class _LowerTriangular(Constraint):
    """Lower-triangular square matrices."""

    event_dim = 2

    def check(self, value: Any) -> Any:
        return _lower_triangular(value)


class _LowerCholesky(Constraint):
    """Lower-triangular square matrices with a positive diagonal."""

    event_dim = 2

    def check(self, value: Any) -> Any:
        return _lower_triangular(value) & (value.diagonal(0, -2, -1) > 0).all(-1)


class _CorrCholesky(Constraint):
    """Lower Cholesky factors of correlation matrices: lower-triangular with a
    positive diagonal and rows of unit Euclidean norm, to ``10 n eps`` of the dtype
    (PyTorch's tolerance)."""

    event_dim = 2

    def check(self, value: Any) -> Any:
        if isinstance(value, Tensor):
            tol = dt.finfo(value.dtype).eps * value.shape[-1] * 10
            row_norm = linalg.norm(value.detach(), dim=-1)
        else:
            value = np.asarray(value)
            tol = np.finfo(value.dtype).eps * value.shape[-1] * 10
            row_norm = np.linalg.norm(value, axis=-1)
        unit_row_norm = (abs(row_norm - 1.0) <= tol).all(-1)
        return _LowerCholesky().check(value) & unit_row_norm


def _matrix_events(value: Any, valid: Any) -> Any:
    """``valid`` (one bool for all) as an array or tensor of ``value``'s batch shape
    (all but its two rightmost dims)."""
    shape = tuple(value.shape[:-2])
    if isinstance(value, Tensor):
        return full(shape, bool(valid), dtype=bool, device=value.device)
    return np.full(shape, bool(valid))


class _Square(Constraint):
    """Square matrices (a property of the shape alone)."""

    event_dim = 2

    def check(self, value: Any) -> Any:
        return _matrix_events(value, value.shape[-2] == value.shape[-1])


class _Symmetric(_Square):
    """Symmetric square matrices, to ``isclose(value, value.mT, atol=1e-6)``."""

    def check(self, value: Any) -> Any:
        if value.shape[-2] != value.shape[-1]:
            return super().check(value)
        if isinstance(value, Tensor):
            return isclose(value, value.mT, atol=1e-6).all(-1).all(-1)
        return np.isclose(value, np.swapaxes(value, -1, -2), atol=1e-6).all((-2, -1))


def _host_positive_definite(value: np.ndarray) -> np.ndarray:
    """Whether each matrix's Cholesky factorization (of its lower triangle, as
    LAPACK's) succeeds."""
    flat = value.reshape((-1,) + value.shape[-2:])
    ok = np.empty(len(flat), dtype=bool)
    for i, matrix in enumerate(flat):
        try:
            np.linalg.cholesky(np.tril(matrix) + np.tril(matrix, -1).T)
            ok[i] = True
        except np.linalg.LinAlgError:
            ok[i] = False
    return ok.reshape(value.shape[:-2])


class _PositiveDefinite(_Symmetric):
    """Symmetric positive-definite matrices: symmetric, and the Cholesky
    factorization succeeds (``linalg.cholesky_ex``'s ``info`` is 0, lazily for a
    tensor). Each matrix is judged on its own (PyTorch returns the symmetry check alone
    as soon as one matrix of the batch is not symmetric)."""

    def check(self, value: Any) -> Any:
        symmetric = super().check(value)
        if value.shape[-2] != value.shape[-1]:
            return symmetric
        if isinstance(value, Tensor):
            return symmetric & (linalg.cholesky_ex(value).info == 0)
        return symmetric & _host_positive_definite(np.asarray(value))


class _PositiveSemidefinite(_Symmetric):
    """Symmetric positive-semidefinite matrices: symmetric with eigenvalues >= 0.
    Nova has no eigenvalue decomposition, so a tensor's check reads its values (one
    realization, as PyTorch's check reads them back) and runs numpy's ``eigvalsh``."""

    def check(self, value: Any) -> Any:
        symmetric = super().check(value)
        if value.shape[-2] != value.shape[-1]:
            return symmetric
        host = value.detach().numpy() if isinstance(value, Tensor) else np.asarray(value)
        semidefinite = (np.linalg.eigvalsh(host) >= 0).all(-1)
        if isinstance(value, Tensor):
            return symmetric & tensor(semidefinite, device=value.device)
        return symmetric & semidefinite


def _check_constraints(op: str, cseq: Any) -> list[Constraint]:
    cseq = list(cseq)
    for i, c in enumerate(cseq):
        if not isinstance(c, Constraint):
            raise TypeError(f"{op}: element {i} of cseq is a {type(c).__name__}, not a "
                            "Constraint")
    return cseq


def _check_dim(op: str, value: Any, dim: int) -> None:
    if not -value.ndim <= dim < value.ndim:
        raise IndexError(f"{op}: dim {dim} is out of range for a value of shape "
                         f"{tuple(value.shape)}")


class _Cat(Constraint):
    """The constraints ``cseq`` on consecutive slices along ``dim`` of lengths
    ``lengths`` (1 each by default), as ``torch.cat`` joins them."""

    def __init__(self, cseq: Any, dim: int = 0, lengths: Any = None):
        self.cseq = _check_constraints("constraints.cat", cseq)
        self.lengths = [1] * len(self.cseq) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.cseq):
            raise ValueError(f"constraints.cat: {len(self.lengths)} lengths for "
                             f"{len(self.cseq)} constraints")
        self.dim = dim

    @property
    def is_discrete(self) -> bool:  # type: ignore[override]
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        return max(c.event_dim for c in self.cseq)

    def check(self, value: Any) -> Any:
        _check_dim("constraints.cat", value, self.dim)
        checks, start = [], 0
        for constraint, length in zip(self.cseq, self.lengths):
            if isinstance(value, Tensor):
                part = movement.narrow(value, self.dim, start, length)
            else:
                part = np.take(value, range(start, start + length), axis=self.dim)
            checks.append(constraint.check(part))
            start += length
        if isinstance(value, Tensor):
            return movement.cat(checks, self.dim)
        return np.concatenate(checks, self.dim)


class _Stack(Constraint):
    """The constraints ``cseq`` on the slices ``value.select(dim, i)``, as
    ``torch.stack`` joins them."""

    def __init__(self, cseq: Any, dim: int = 0):
        self.cseq = _check_constraints("constraints.stack", cseq)
        self.dim = dim

    @property
    def is_discrete(self) -> bool:  # type: ignore[override]
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        dim = max(c.event_dim for c in self.cseq)
        if self.dim + dim < 0:
            dim += 1
        return dim

    def check(self, value: Any) -> Any:
        _check_dim("constraints.stack", value, self.dim)
        if isinstance(value, Tensor):
            parts = [value.select(self.dim, i) for i in range(value.shape[self.dim])]
            return movement.stack([c.check(v) for v, c in zip(parts, self.cseq)], self.dim)
        parts = [np.take(value, i, axis=self.dim) for i in range(value.shape[self.dim])]
        return np.stack([c.check(v) for v, c in zip(parts, self.cseq)], self.dim)


dependent = _Dependent()
dependent_property = _DependentProperty
independent = _IndependentConstraint
boolean = _Boolean()
one_hot = _OneHot()
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
integer_interval = _IntegerInterval
real = _Real()
real_vector = independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
unit_interval = _Interval(0.0, 1.0)
interval = _Interval
half_open_interval = _HalfOpenInterval
simplex = _Simplex()
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
corr_cholesky = _CorrCholesky()
square = _Square()
symmetric = _Symmetric()
positive_semidefinite = _PositiveSemidefinite()
positive_definite = _PositiveDefinite()
cat = _Cat
stack = _Stack
