"""``Distribution``: the base class (``torch.distributions.Distribution``'s interface).

Validation. As in PyTorch, ``validate_args`` defaults to on (``__debug__``;
``Distribution.set_default_validate_args`` changes it), and then the constructor
checks each parameter against ``arg_constraints`` and ``log_prob``/``cdf`` check the
value's shape and support. The shape checks always run. The value checks run on the
values the host already knows (``utils.known_values``: Python numbers, tensors made from
data or already realized, constants and their broadcasts); a value still pending in the
lazy graph is not checked, since reading it would force the step to run (PyTorch reads
every value back, a device sync). Realize a tensor first (``nv.realize``) to have it
checked, or call ``constraint.check(value)`` for a lazy boolean tensor.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from nova.distributions import constraints
from nova.distributions.utils import known_values, lazy_property, size_arg
from nova.tensor.creation import tensor
from nova.tensor.grad_mode import no_grad
from nova.tensor.tensor import Tensor

__all__ = ["Distribution"]


def _host_check(constraint: constraints.Constraint, host: np.ndarray | None
                ) -> np.ndarray | None:
    """``constraint.check`` on host values, or None when they (or the constraint's
    bounds) are not known without running a step."""
    if host is None:
        return None
    try:
        return np.asarray(constraint.check(host))
    except constraints.UnknownValues:
        return None


def _shape_text(value: Any) -> str:
    return str(tuple(value.shape)) if hasattr(value, "shape") else "()"


class Distribution:
    """Abstract base class for probability distributions.

    Args:
        batch_shape: the shape over which parameters are batched.
        event_shape: the shape of a single sample (without batching).
        validate_args: whether to validate arguments (default: the class default,
            ``__debug__``, see ``set_default_validate_args``).
    """

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn validation on or off for every distribution built without an explicit
        ``validate_args`` (as ``torch.distributions.Distribution``'s)."""
        if value not in [True, False]:
            raise ValueError(f"set_default_validate_args: expected True or False, got "
                             f"{value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape: Any = (), event_shape: Any = (),
                 validate_args: bool | None = None):
        self._batch_shape = size_arg(batch_shape, "batch_shape")
        self._event_shape = size_arg(event_shape, "event_shape")
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            self._validate_parameters()

    def _validate_parameters(self) -> None:
        try:
            arg_constraints = self.arg_constraints
        except NotImplementedError:
            arg_constraints = {}
            warnings.warn(f"{self.__class__} does not define `arg_constraints`. Please set "
                          "`arg_constraints = {}` or initialize the distribution with "
                          "`validate_args=False` to turn off validation.", stacklevel=3)
        for param, constraint in arg_constraints.items():
            if constraints.is_dependent(constraint):
                continue
            if param not in self.__dict__ and isinstance(getattr(type(self), param, None),
                                                         lazy_property):
                continue   # a parameter derived from another one: that one is checked
            value, host = self._known_parameter(param)
            valid = _host_check(constraint, host)
            if valid is not None and not valid.all():
                raise ValueError(
                    f"Expected parameter {param} ({type(value).__name__} of shape "
                    f"{_shape_text(value)}) of distribution {self!r} to satisfy the "
                    f"constraint {constraint!r}, but found invalid values:\n{host}")

    def _known_parameter(self, param: str) -> tuple[Any, np.ndarray | None]:
        """The parameter ``param`` and its host values if known (validation's input). A
        subclass whose parameter is a pending function of its argument (Categorical's
        normalized ``probs``) computes it here on the host from a known argument."""
        value = getattr(self, param)
        return value, known_values(value)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        """A new distribution with the batch dims expanded to ``batch_shape`` (the
        parameters are ``expand``-ed views; no validation is repeated)."""
        raise NotImplementedError

    @property
    def batch_shape(self) -> tuple[int, ...]:
        """The shape over which parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self) -> tuple[int, ...]:
        """The shape of a single sample (without batching)."""
        return self._event_shape

    @property
    def arg_constraints(self) -> dict[str, constraints.Constraint]:
        """The constraint each parameter must satisfy."""
        raise NotImplementedError

    @property
    def support(self) -> constraints.Constraint:
        """The constraint that samples satisfy."""
        raise NotImplementedError

    @property
    def mean(self) -> Tensor:
        raise NotImplementedError

    @property
    def mode(self) -> Tensor:
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self) -> Tensor:
        raise NotImplementedError

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def sample(self, sample_shape: Any = ()) -> Tensor:
        """A sample of shape ``sample_shape + batch_shape + event_shape``, without
        gradient (recorded in the lazy graph: nothing runs until it is realized)."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        """A reparameterized sample: differentiable with respect to the parameters."""
        raise NotImplementedError(f"{self.__class__.__name__} has no rsample "
                                  "(not reparameterizable); use sample()")

    def log_prob(self, value: Tensor) -> Tensor:
        """The log of the probability density/mass function at ``value``."""
        raise NotImplementedError

    def cdf(self, value: Tensor) -> Tensor:
        """The cumulative distribution function at ``value``."""
        raise NotImplementedError

    def icdf(self, value: Tensor) -> Tensor:
        """The inverse cumulative distribution function at ``value``."""
        raise NotImplementedError

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """Every value of a discrete distribution's support along dim 0."""
        raise NotImplementedError

    def entropy(self) -> Tensor:
        """The entropy, batched over ``batch_shape``."""
        raise NotImplementedError

    def perplexity(self) -> Tensor:
        """``exp(entropy())``."""
        return self.entropy().exp()

    def _extended_shape(self, sample_shape: Any = ()) -> tuple[int, ...]:
        """``sample_shape + batch_shape + event_shape``."""
        return size_arg(sample_shape, "sample_shape") + self._batch_shape + self._event_shape

    def _validate_sample(self, value: Any) -> None:
        """The checks ``log_prob``/``cdf`` make on ``value``: a tensor whose rightmost
        dims match ``event_shape`` and broadcast with ``batch_shape``; when its values
        are known on the host, inside the support."""
        if not isinstance(value, Tensor):
            raise ValueError(f"The value argument to log_prob must be a Tensor, got "
                             f"{type(value).__name__}")
        shape = tuple(value.shape)
        event = self._event_shape
        if shape[len(shape) - len(event):] != event or len(shape) < len(event):
            raise ValueError(f"The right-most size of value must match event_shape: "
                             f"{shape} vs {event}.")
        expected = self._batch_shape + event
        for i, j in zip(reversed(shape), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: "
                                 f"{shape} vs {expected}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{self.__class__} does not define `support` to enable sample "
                          "validation. Please initialize the distribution with "
                          "`validate_args=False` to turn off validation.", stacklevel=3)
            return
        host = known_values(value)
        valid = _host_check(support, host)
        if valid is not None and not valid.all():
            raise ValueError(
                f"Expected value argument ({type(value).__name__} of shape {shape}) to be "
                f"within the support ({support!r}) of the distribution {self!r}, but found "
                f"invalid values:\n{host}")

    def _expand_param(self, cls: type, batch_shape: Any, _instance: Any = None,
                      **attrs: Any) -> Any:
        """``expand`` of a distribution parameterized by ``probs`` or ``logits``: a new
        ``cls`` holding whichever of the two this one holds (the other stays lazy)
        expanded to ``batch_shape``, as its ``_param``, with ``attrs`` set as given
        (other parameters, already expanded) and this one's validation setting."""
        new = self._get_checked_instance(cls, _instance)
        batch_shape = tuple(batch_shape)
        for name, value in attrs.items():
            setattr(new, name, value)
        for name in ("probs", "logits"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(batch_shape))
                new._param = getattr(new, name)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _get_checked_instance(self, cls: type, _instance: Any = None) -> Any:
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom "
                "__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self) -> str:
        """Parameters of one element by value (when the host knows it: a repr never
        runs a step), others by shape."""
        try:
            names = [k for k in self.arg_constraints if k in self.__dict__]
        except NotImplementedError:
            names = []
        parts = []
        for name in names:
            value = self.__dict__[name]
            host = known_values(value)
            if host is not None and host.size == 1:
                text = f"{host.item()}" if host.ndim == 0 else repr(tensor(host, value.dtype))
            else:
                text = f"{tuple(value.shape)}"
            parts.append(f"{name}: {text}")
        return f"{self.__class__.__name__}({', '.join(parts)})"


class LocScale(Distribution):
    """A location-scale family over the reals (``Normal``, ``Laplace``, ``Cauchy``):
    ``loc`` and positive ``scale`` broadcast together, the batch shape theirs (``()``
    for two numbers), ``expand`` expanding both, the mode at ``loc``."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc: Tensor | float, scale: Tensor | float,
                 validate_args: bool | None = None):
        from nova.distributions.utils import broadcast_all, is_number
        self.loc, self.scale = broadcast_all(loc, scale)
        batch_shape = () if is_number(loc) and is_number(scale) else self.loc.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> LocScale:
        new = self._get_checked_instance(type(self), _instance)
        batch_shape = tuple(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mode(self) -> Tensor:
        return self.loc
