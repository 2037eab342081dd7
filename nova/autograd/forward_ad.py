"""Forward-mode AD with dual tensors (``nv.autograd.forward_ad``, PyTorch's
``torch.autograd.forward_ad``)::

    with fwAD.dual_level():
        x = fwAD.make_dual(primal, tangent)
        y = f(x)
        y_primal, y_tangent = fwAD.unpack_dual(y)     # y_tangent = J_f(primal) @ tangent

How. Nova has vector-Jacobian rules only, so tangents are not pushed through each op
as it is recorded: ``make_dual`` returns ``primal - s``, where ``s`` is a fresh zero
"tangent seed" that requires grad (so the dual's value is exactly ``primal``'s, -0.0
and NaN included), and ``unpack_dual(y)`` computes the Jacobian-vector product
of every dual of the level that ``y`` depends on by the double-backward trick
(as ``nv.func.jvp``): with ``u`` a zero tensor like ``y`` that requires grad,
``g_k = (dy/ds_k)^T u`` is linear in ``u``, and the gradient of ``sum_k <g_k, -t_k>``
with respect to ``u`` is ``sum_k J_k t_k``. Nothing is computed until the tangent is
read (everything is lazy), and only the outputs that are unpacked cost anything.

Deviations from PyTorch that this forces (all within a level):

- A dual tensor, and everything computed from it, requires grad and has a ``grad_fn``
  (PyTorch's dual of a tensor that does not require grad does not). A backward through
  it works and gives the same gradients; the seeds are internal leaves.
- Tangents ride on the autograd graph, so ops recorded under ``no_grad`` (or
  ``inference_mode``) do not carry them: ``unpack_dual`` of their result has tangent
  None, where PyTorch still propagates it. ``detach()`` drops the tangent, as PyTorch's.
- ``unpack_dual(y).primal`` is ``y.detach()`` when ``y``'s history is only the level's
  duals (as PyTorch: no tangent, no grad); when ``y`` also depends on tensors that
  require grad it is ``y`` itself, which keeps both its gradient history and its
  tangent in this level (PyTorch's primal keeps the history only).
- A tangent whose dtype differs from its primal's is cast to the primal's dtype
  (PyTorch keeps the tangent's dtype).
- A backward without ``retain_graph`` through a dual's graph frees it, after which
  ``unpack_dual`` of a result of that graph raises (the tangent is read by walking it).

Levels are process-wide and not nested, as PyTorch's (one level at a time; its index
is 0). Exiting a level drops its tangents: ``unpack_dual`` of a tensor made in it
then gives tangent None.
"""
from __future__ import annotations

import contextlib
import weakref
from typing import Any, NamedTuple

from nova.autograd import engine, grad_mode
from nova.tensor import creation, ops
from nova.tensor.tape import GradFn
from nova.tensor.tensor import Tensor

__all__ = ["UnpackedDualTensor", "enter_dual_level", "exit_dual_level", "make_dual",
           "unpack_dual", "dual_level"]


class UnpackedDualTensor(NamedTuple):
    """What ``unpack_dual`` returns: the primal and the tangent (None if none)."""

    primal: Tensor
    tangent: Tensor | None


class _Level:
    """An active dual level: its index and its duals, as (seed, -tangent) pairs in
    creation order (the seed's gradient pairs with the negated tangent, see the module
    docstring)."""

    __slots__ = ("index", "duals", "seed_ids")

    def __init__(self, index: int):
        self.index = index
        self.duals: list[tuple[Tensor, Tensor]] = []
        self.seed_ids: set[int] = set()


_LEVEL: _Level | None = None
# Every live tangent seed by id, whatever its level: a walk of a graph tells seeds (not
# history of the user's) from other leaves by it.
_SEEDS: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()


def enter_dual_level() -> int:
    """Enter a new dual level and return its index (0: one level at a time)."""
    global _LEVEL
    if _LEVEL is not None:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _LEVEL = _Level(0)
    return _LEVEL.index


def exit_dual_level(*, level: int | None = None) -> None:
    """Exit the current dual level (``level``, if given, must be it); its tangents are
    dropped."""
    global _LEVEL
    if _LEVEL is None:
        raise RuntimeError("exit_dual_level: no dual level is active (enter one with "
                           "enter_dual_level() or `with dual_level():`)")
    if level is not None and level != _LEVEL.index:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that "
                           f"was created. This is not supported. (exit_dual_level got level "
                           f"{level}; the current level is {_LEVEL.index})")
    _LEVEL = None


class dual_level(contextlib.ContextDecorator):  # noqa: N801  (PyTorch's name)
    """Context manager (or decorator) for a dual level: ``enter_dual_level`` on entry
    (its index is what ``with ... as`` binds), ``exit_dual_level`` on exit."""

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc: Any) -> None:
        exit_dual_level()


def _current(op: str, level: int | None) -> _Level | None:
    """The level ``level`` names (None: the current one, None if there is none)."""
    if level is None:
        return _LEVEL
    if _LEVEL is None or level != _LEVEL.index:
        current = "none is active" if _LEVEL is None else f"the current one is {_LEVEL.index}"
        raise RuntimeError(f"{op}: invalid dual level {level} ({current})")
    return _LEVEL


def _check_float(op: str, what: str, t: Any) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: expected {what} to be a Tensor, got {type(t).__name__}")
    if not t.dtype.is_floating_point:
        raise ValueError(f"{op}: Expected {what} to be floating point or complex, but got: "
                         f"{t.dtype.name}")


def _history(t: Tensor, level: _Level) -> tuple[set[int], bool]:
    """The ids of ``level``'s seeds that ``t``'s graph reaches, and whether it reaches
    anything else that requires grad (a leaf of the user's)."""
    seeds: set[int] = set()
    other = False
    root = t._grad_fn
    if root is None:
        return seeds, t.requires_grad and _SEEDS.get(id(t)) is not t
    seen = {id(root)}
    stack = [root]
    while stack:
        for e in stack.pop().next:
            if e is None or id(e) in seen:
                continue
            seen.add(id(e))
            if type(e) is GradFn:
                stack.append(e)
            elif id(e) in level.seed_ids:
                seeds.add(id(e))
            elif _SEEDS.get(id(e)) is not e:
                other = True
    return seeds, other


def make_dual(tensor: Tensor, tangent: Tensor, *, level: int | None = None) -> Tensor:
    """A dual tensor with the value of ``tensor`` and the tangent ``tangent`` in the
    current (or the given) dual level; see the module docstring for how, and what it
    changes from PyTorch."""
    lvl = _current("make_dual", level)
    if lvl is None:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, "
                           "make sure to enter_dual_level() first.")
    _check_float("make_dual", "primal", tensor)
    _check_float("make_dual", "tangent", tangent)
    if tangent.shape != tensor.shape:
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of the "
            f"original Tensor, this is not supported. Tensor is of size {list(tensor.shape)} "
            f"while the given forward gradient is of size {list(tangent.shape)}.")
    if _history(tensor, lvl)[0]:
        raise RuntimeError("Making a dual Tensor based on a Tensor that already has a forward "
                           f"gradient at the same level {lvl.index} is not supported.")
    with grad_mode.enable_grad():
        seed = creation.zeros_like(tensor).requires_grad_(True)
        dual = ops.sub(tensor, seed)
    _SEEDS[id(seed)] = seed
    lvl.seed_ids.add(id(seed))
    lvl.duals.append((seed, ops.neg(ops.cast(tangent, tensor.dtype))))
    return dual


def unpack_dual(tensor: Tensor, *, level: int | None = None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of ``tensor`` in the current (or the given) dual level;
    tangent None when ``tensor`` does not depend on a dual of that level (or there is
    no level)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"unpack_dual: expected a Tensor, got {type(tensor).__name__}")
    lvl = _current("unpack_dual", level)
    if lvl is None:
        return UnpackedDualTensor(tensor, None)
    reached, other = _history(tensor, lvl)
    if not reached:
        return UnpackedDualTensor(tensor, None)
    pairs = [(seed, t) for seed, t in lvl.duals if id(seed) in reached]
    keep = other or any(t.requires_grad for _, t in pairs)
    primal = tensor if other else tensor.detach()
    return UnpackedDualTensor(primal, _tangent(tensor, pairs, keep))


def _tangent(y: Tensor, pairs: list[tuple[Tensor, Tensor]], keep: bool) -> Tensor:
    """``sum_k J_k t_k`` for the seeds and negated tangents ``pairs`` that ``y`` depends
    on, by double backward (module docstring); differentiable if ``keep``."""
    with grad_mode.enable_grad():
        u = creation.zeros_like(y).requires_grad_(True)
        back = engine.grad([y], [s for s, _ in pairs], [u], retain_graph=True,
                           create_graph=True, allow_unused=True)
        used = [(g, t) for g, (_, t) in zip(back, pairs) if g is not None and g.requires_grad]
        if not used:
            return creation.zeros_like(y)
        # (retain_graph: the walk from the g_k also passes through the forward graph,
        # which must stay for later unpacks and backwards)
        (product,) = engine.grad([g for g, _ in used], [u], [t for _, t in used],
                                 retain_graph=True, create_graph=keep, allow_unused=True)
    if product is None:
        return creation.zeros_like(y)
    return product if keep else product.detach()
