"""Helpers shared by the distributions (``torch.distributions.utils``' names where it has
them): parameter broadcasting, probability/logit conversion, the standard noise the
samplers transform, and ``known_values``, which says what a tensor holds when the host
already knows it, without computing anything (what argument validation reads)."""
from __future__ import annotations

import builtins
import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nova.core import dtypes as dt
# the softplus of every distribution: nn.functional.softplus's threshold (x itself above 20,
# an error of exp(-20) that float64 sees) is not wanted here
from nova.nn.functional import log1p_exp as softplus
from nova.tensor import ops
from nova.tensor.creation import rand, tensor
from nova.tensor.grad_mode import enable_grad
from nova.tensor.movement import broadcast_tensors
from nova.tensor.tensor import Tensor

euler_constant = 0.57721566490153286060  # Euler-Mascheroni constant

Number = (builtins.int, builtins.float, np.number)


def is_number(value: Any) -> bool:
    """A Python or numpy real number (a bool is not one, as in torch's ``_Number``
    check in practice: ``Normal(True, 1.)`` is refused)."""
    return isinstance(value, Number) and not isinstance(value, (builtins.bool, np.bool_))


def broadcast_all(*values: Any) -> tuple[Tensor, ...]:
    """The arguments as tensors of one broadcast shape (``torch.distributions.utils.
    broadcast_all``): Python numbers become tensors of the first tensor argument's dtype
    and device, or of the default dtype when all are numbers. Numbers become host
    tensors (runtime inputs, not constants baked into the step), so a loop that builds
    ``Normal(0.0, sigma_t)`` with a new ``sigma_t`` each step compiles once."""
    if not all(isinstance(v, Tensor) or is_number(v) for v in values):
        raise ValueError("broadcast_all: input arguments must all be instances of Number "
                         "or nova Tensor, got "
                         f"{', '.join(type(v).__name__ for v in values)}")
    first = next((v for v in values if isinstance(v, Tensor)), None)
    dtype = dt.DEFAULT_FLOAT if first is None else first.dtype
    device = None if first is None else first.device
    as_tensors = [v if isinstance(v, Tensor) else tensor(v, dtype=dtype, device=device)
                  for v in values]
    return tuple(broadcast_tensors(*as_tensors))


def counts_and_param(dist: Any, total_count: Any, probs: Any, logits: Any) -> None:
    """Set ``dist.total_count`` and whichever of ``probs``/``logits`` was given (the
    other is a lazy property), broadcast together, the count in the parameter's dtype,
    and ``dist._param`` (Binomial's and NegativeBinomial's construction)."""
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")
    name, value = ("probs", probs) if probs is not None else ("logits", logits)
    count, param = broadcast_all(total_count, value)
    setattr(dist, name, param)
    dist.total_count = count.to(param.dtype)
    dist._param = param


def size_arg(shape: Any, what: str) -> tuple[int, ...]:
    """``shape`` (a tuple, list or ``nv.Size``-like sequence of ints) as a tuple; an int
    or anything else is a TypeError, as ``torch.Size(5)`` is."""
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
        raise TypeError(f"{what} must be a sequence of ints (e.g. (n,) or []), got "
                        f"{type(shape).__name__} {shape!r}")
    out = []
    for s in shape:
        if isinstance(s, builtins.bool) or not hasattr(s, "__index__"):
            raise TypeError(f"{what} must be a sequence of ints, got {shape!r}")
        s = operator.index(s)
        if s < 0:
            raise ValueError(f"{what} must hold non-negative sizes, got {tuple(shape)!r}")
        out.append(s)
    return tuple(out)


def sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """Sum out the ``dim`` rightmost dims of ``value`` (``_sum_rightmost``)."""
    if dim == 0:
        return value
    return value.reshape(value.shape[:value.ndim - dim] + (-1,)).sum(-1)


def clamp_probs(probs: Tensor) -> Tensor:
    """Probabilities clamped to ``[eps, 1 - eps]`` of their dtype, as torch's
    ``clamp_probs`` (so their logits are finite)."""
    eps = dt.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """``sigmoid(logits)`` for binary events, else ``softmax`` over the last dim."""
    return ops.sigmoid(logits) if is_binary else ops.softmax(logits, -1)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """Log-odds (binary) or log-probabilities of the clamped ``probs``, as torch's."""
    clamped = clamp_probs(probs)
    if is_binary:
        return clamped.log() - (-clamped).log1p()
    return clamped.log()


def standard_uniform(shape: tuple[int, ...], like: Tensor) -> Tensor:
    """Uniform draws in [0, 1) with 53 random bits (float64), on ``like``'s device, for
    samplers that transform them nonlinearly: the transformed noise keeps its tails
    (``-log1p(-u)`` reaches 36.7, not float32's 16.6) before it is rounded to the
    parameters' dtype."""
    return rand(shape, dtype=dt.float64, device=like.device)


class lazy_property:
    """A property computed on first access (with grad enabled, so it can carry
    gradients back to the parameter it is derived from) and then stored on the instance
    (torch's ``lazy_property``). Argument validation skips such a property when it was
    not given, as torch does."""

    def __init__(self, wrapped: Callable[[Any], Any]):
        self.wrapped = wrapped
        functools.update_wrapper(self, wrapped)

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        with enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


# ---------------------------------------------------------------- known values

def known_values(value: Any) -> np.ndarray | None:
    """What ``value`` holds, when the host knows it without computing anything: a
    Python number; a host tensor made from data or already realized; a constant
    (``nv.zeros``, ``nv.full``); or a broadcast or reshape of one of those (what
    ``broadcast_all`` and ``expand`` make of them). None for anything that would need a
    step to run (a pending result) or a device read (a CUDA buffer).

    This is what argument validation reads: PyTorch checks every value and so reads it
    back from the device; Nova checks the values it already has and leaves values
    still in the lazy graph unchecked, so validation never forces a realization."""
    if is_number(value) or isinstance(value, (builtins.bool, np.bool_)):
        return np.asarray(value)
    if isinstance(value, np.ndarray):
        return value
    if not isinstance(value, Tensor):
        return None
    return _known_node(value.node)


def _known_node(node: Any) -> np.ndarray | None:
    if node.buffer is not None:
        return node.buffer if node.device != "cuda" and isinstance(node.buffer,
                                                                   np.ndarray) else None
    if node.op == "constant":
        return np.full(node.shape, node.attrs["value"], dtype=node.dtype.np)
    if node.op == "broadcast_in_dim":
        source = _known_node(node.inputs[0])
        if source is None:
            return None
        kept = [1] * len(node.shape)
        for axis, size in zip(node.attrs["dims"], source.shape):
            kept[axis] = size
        return np.broadcast_to(source.reshape(kept), node.shape)
    if node.op == "reshape":
        source = _known_node(node.inputs[0])
        return None if source is None else source.reshape(node.shape)
    return None
