"""L-BFGS (Liu & Nocedal 1989) as PyTorch's ``torch.optim.LBFGS`` runs it: minFunc's
two-loop recursion, an optional strong-Wolfe line search (bracketing, then a zoom by
cubic interpolation), and the same termination tests, counters and state.

L-BFGS decides on the host: every iteration compares losses and directional
derivatives, so ``step(closure)`` realizes a few times per iteration (each closure's
forward and backward, the history update, the new direction) instead of recording one
update for a later step boundary. The vector algebra stays in Nova tensors -- the
parameters are one flat vector (their gradients concatenated in order) -- and only the
scalars the algorithm branches on come back to the host, where they are combined in the
parameters' dtype as PyTorch combines its 0-d tensors (``rho = 1 / y.s``, the first
step length ``min(1, 1 / |g|_1) * lr``); the line search's interpolation runs in Python
floats (PyTorch's mixes floats and 0-d tensors: the same numbers for float64
parameters, last-bit differences for float32 ones).

Each kind of realization keeps its structure from iteration to iteration, so a run
compiles a handful of functions once: step lengths enter as runtime inputs, and the
two-loop recursion always runs over ``history_size`` slots, the slots not filled yet
holding zero vectors with ``rho = 0``, which add exact zeros. The price: the history's
memory (``2 * history_size`` flat vectors) is taken at the first iteration, where
PyTorch's grows to it over ``history_size`` iterations.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np

from nova.autograd.grad_mode import enable_grad, no_grad
from nova.core import dtypes as dt
from nova.optim import _checks
from nova.optim.optimizer import Optimizer, zeros_state
from nova.tensor.arrays import dot
from nova.tensor.creation import zeros
from nova.tensor.function_template import stamped
from nova.tensor.movement import cat
from nova.tensor.realize import realize
from nova.tensor.tensor import Tensor
from nova.tensor.trace import buffer_node

# The state entries that are flat vectors (one element per parameter element), and the
# lists of them; PyTorch keeps every entry on the first parameter.
_VECTORS = ("d", "prev_flat_grad")
_VECTOR_LISTS = ("old_dirs", "old_stps")
# The host numbers (PyTorch's may be 0-d tensors), besides the list ``ro``.
_NUMBERS = ("t", "H_diag", "prev_loss")


def _host_tensor(values: Any, dtype: dt.DType) -> Tensor:
    """``values`` as a realized host buffer of ``dtype`` that any device's step reads:
    a runtime input (a step length, the ``rho`` of the history slots), never a constant
    compiled into the step, so new values reuse the compiled function."""
    return Tensor._wrap(buffer_node(np.asarray(values, dtype=dtype.np), dtype, None))




class _Point(NamedTuple):
    """The objective along the search direction ``d`` at step length ``t``: loss
    ``f``, flat gradient ``g``, directional derivative ``gtd = g.d``, ``gmax = max|g|``."""

    t: float
    f: float
    g: Tensor
    gtd: float
    gmax: float


def _cubic_interpolate(x1: float, f1: float, g1: float, x2: float, f2: float, g2: float,
                       bounds: tuple[float, float] | None = None) -> float:
    """The minimizer of the cubic through (x1, f1) and (x2, f2) with slopes g1, g2,
    clamped to ``bounds`` (default: between x1 and x2); their midpoint when the cubic
    has no minimizer (minFunc's ``polyinterp`` for two points)."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 * d1 - g1 * g2
    if not d2_square >= 0:
        return (lo + hi) / 2.0
    d2 = math.sqrt(d2_square)
    if x1 <= x2:
        at = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        at = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(at, lo), hi)


def _strong_wolfe(evaluate: Callable[[float], _Point], start: _Point, t: float,
                  d_norm: float, max_ls: int, c1: float = 1e-4, c2: float = 0.9,
                  tolerance_change: float = 1e-9) -> tuple[_Point, int]:
    """A step length satisfying the strong Wolfe conditions along ``d`` (minFunc's
    ``WolfeLineSearch``, as PyTorch ports it): from ``start`` (t = 0), try ``t``, and
    extrapolate by cubic interpolation until a bracket holds an acceptable point; then
    zoom into the bracket. ``evaluate(t)`` runs the closure at ``x + t d``; at most
    ``max_ls`` evaluations after the first. ``d_norm = max|d|`` (the zoom stops when
    the bracket moves the parameters less than ``tolerance_change``). Returns the best
    point found and the number of evaluations."""
    sufficient = c1 * start.gtd          # the Armijo slope
    curvature = -c2 * start.gtd          # the strong Wolfe bound on |g.d|
    new, evals, tries = evaluate(t), 1, 0
    prev = start
    bracket: list[_Point] | None = None
    done = False
    while tries < max_ls:
        if new.f > start.f + new.t * sufficient or (tries > 1 and new.f >= prev.f):
            bracket = [prev, new]
            break
        if abs(new.gtd) <= curvature:
            bracket, done = [new], True
            break
        if new.gtd >= 0:
            bracket = [prev, new]
            break
        t = _cubic_interpolate(prev.t, prev.f, prev.gtd, new.t, new.f, new.gtd,
                               bounds=(new.t + 0.01 * (new.t - prev.t), new.t * 10))
        prev, new = new, evaluate(t)
        evals, tries = evals + 1, tries + 1
    if bracket is None:                  # out of evaluations: the best of start and new
        bracket = [start, new]

    def order() -> tuple[int, int]:
        return (0, 1) if bracket[0].f <= bracket[-1].f else (1, 0)

    low, high = order()
    insufficient = False
    while not done and tries < max_ls:
        a, b = bracket
        if abs(b.t - a.t) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(a.t, a.f, a.gtd, b.t, b.f, b.gtd)
        top, bottom = max(a.t, b.t), min(a.t, b.t)
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:
            # Near an end of the bracket: accepted once; a second time in a row, or
            # outside the bracket, moved a tenth of the bracket inside it.
            if insufficient or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        new = evaluate(t)
        evals, tries = evals + 1, tries + 1
        if new.f > start.f + t * sufficient or new.f >= bracket[low].f:
            bracket[high] = new
            low, high = order()
        else:
            if abs(new.gtd) <= curvature:
                done = True
            elif new.gtd * (bracket[high].t - bracket[low].t) >= 0:
                bracket[high] = bracket[low]
            bracket[low] = new
    return bracket[low], evals


@stamped
def _two_loop(g: Tensor, h_diag: Tensor, *history: Tensor) -> Tensor:
    """``-H g`` for the L-BFGS inverse Hessian ``H`` of the history (``history``: the
    ``rho = 1 / y.s`` of its m slots, then their ``y``, then their ``s``, oldest
    first) over the initial ``h_diag * I``: Nocedal's two-loop recursion. Stamped: a
    later call with the same number of slots reuses the first call's nodes rather
    than recording its ~16 m ops again."""
    m = len(history) // 3
    rho, dirs, stps = history[:m], history[m:2 * m], history[2 * m:]
    q = -g
    al: list[Tensor] = [None] * m  # type: ignore[list-item]
    for i in range(m - 1, -1, -1):
        al[i] = dot(stps[i], q) * rho[i]
        q = q - al[i] * dirs[i]
    r = q * h_diag
    for i in range(m):
        be = dot(dirs[i], r) * rho[i]
        r = r + (al[i] - be) * stps[i]
    return r


class LBFGS(Optimizer):
    """L-BFGS over all parameters as one flat vector (PyTorch's algorithm, see the
    module docstring). ``step(closure)`` runs up to ``max_iter`` iterations and at most
    ``max_eval`` closure calls (default ``max_iter * 5 // 4``); the closure clears the
    gradients, computes the loss, calls ``backward()`` and returns the loss, and
    ``step`` returns what its first call returned. Iterations stop when ``max|g| <=
    tolerance_grad``, when ``g.d > -tolerance_change``, or when the step or the loss
    change is below ``tolerance_change``. ``line_search_fn``: None (fixed steps of
    ``lr``, the first ``min(1, 1 / |g|_1) * lr``) or ``"strong_wolfe"`` (whose own
    bracket tolerance is 1e-9 whatever ``tolerance_change`` is, as in PyTorch).

    One parameter group only, as in PyTorch; a second one is refused when added
    (PyTorch accepts it and fails at ``step``). The state lives on the first parameter
    under PyTorch's names, except PyTorch's scratch list ``al``; ``t``, ``ro``,
    ``H_diag`` and ``prev_loss`` are Python floats. A PyTorch LBFGS state dict loads
    (its 0-d tensors become those floats, ``al`` is dropped) and continues with the
    same iterates. Deviations, both from the fixed
    structure of the compiled functions (module docstring): the history's memory is
    taken at the first iteration, and ``history_size < 1`` is refused (PyTorch fails
    at its second iteration)."""

    def __init__(self, params: Iterable[Any], lr: float = 1, max_iter: int = 20,
                 max_eval: int | None = None, tolerance_grad: float = 1e-7,
                 tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None):
        _checks.nonnegative("LBFGS", lr=lr)
        if history_size < 1:
            raise ValueError(f"LBFGS: invalid history_size={history_size} (must be >= 1)")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                                      tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change,
                                      history_size=history_size,
                                      line_search_fn=line_search_fn))
        self._params: list[Tensor] = self.param_groups[0]["params"]
        self._pads: list[Tensor] = []     # distinct zero vectors: see _direction

    # PyTorch's per-iteration scratch list (``al``): not kept, not loaded.
    _scratch_state = frozenset({"al"})

    def add_param_group(self, group: dict[str, Any]) -> None:
        if self.param_groups:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        super().add_param_group(group)

    # ------------------------------------------------------------ flat vectors

    def _flat_grad(self) -> Tensor:
        """The gradients flattened and concatenated in parameter order, zeros for a
        parameter without one."""
        return cat([zeros(p.numel(), dtype=p.dtype, device=p.device) if p.grad is None
                    else p.grad.reshape(-1) for p in self._params])

    def _move(self, t: float, d: Tensor) -> None:
        """Record ``p += t * d`` (each parameter's slice of ``d``)."""
        step = _host_tensor(t, d.dtype)
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_((d[offset:offset + n] * step).reshape(p.shape))
            offset += n

    def _evaluate(self, closure: Callable[[], Any], t: float, d: Tensor | None
                  ) -> tuple[Any, _Point]:
        """Call the closure (with gradients on) at the parameters' current values, which
        are ``t`` along ``d``, and realize its loss, the flat gradient ``g``, ``max|g|``
        and, given ``d``, ``g.d`` (else NaN) in one step. Returns the closure's value
        and the point."""
        with enable_grad():
            value = closure()
        g = self._flat_grad()
        gmax = g.abs().max()
        gtd = None if d is None else dot(g, d)
        realize(*[v for v in (value, g, gmax, gtd) if isinstance(v, Tensor)])
        return value, _Point(t, float(value), g, float("nan") if gtd is None else gtd.item(),
                             gmax.item())

    def _direction(self, g: Tensor, dirs: list[Tensor], stps: list[Tensor],
                   ro: list[float], h_diag: float) -> tuple[Tensor, float, float]:
        """``d = -H g`` by the two-loop recursion over the history (``dirs``: the
        gradient changes y, ``stps``: the steps s, oldest first; ``rho = 1 / y.s``),
        with ``h_diag`` the initial inverse Hessian's scale. Returns ``d`` (realized),
        ``g.d`` and ``max|d|``. The history is padded to ``history_size`` at its old
        end with distinct zero vectors (distinct buffers: the compiled function's
        inputs stay the same as the history fills) whose ``rho`` is 0, so they change
        neither loop's vector."""
        slots = self.param_groups[0]["history_size"]
        missing = slots - len(dirs)
        pads = self._padding(2 * missing, g)
        dirs, stps = pads[:missing] + dirs, pads[missing:] + stps
        rho = [_host_tensor(v, g.dtype) for v in [0.0] * missing + ro]
        r = _two_loop(g, _host_tensor(h_diag, g.dtype), *rho, *dirs, *stps)
        gtd, dmax = dot(g, r), r.abs().max()
        realize(r, gtd, dmax)
        return r, gtd.item(), dmax.item()

    def _padding(self, count: int, like: Tensor) -> list[Tensor]:
        """``count`` distinct realized zero vectors shaped as ``like``, kept for the
        next call; those no longer needed are dropped."""
        pads = self._pads
        if pads and (pads[0].shape, pads[0].dtype, pads[0].device) != \
                (like.shape, like.dtype, like.device):
            pads.clear()
        pads.extend(zeros_state(like) for _ in range(count - len(pads)))
        del pads[count:]
        return list(pads)

    # ------------------------------------------------------------ the step

    def step(self, closure: Callable[[], Any]) -> Any:  # type: ignore[override]
        """Run up to ``max_iter`` L-BFGS iterations; return the closure's first value.
        The parameters are realized when it returns."""
        line_search = self.param_groups[0]["line_search_fn"]
        if line_search not in (None, "strong_wolfe"):
            raise RuntimeError(f"LBFGS: only 'strong_wolfe' is supported as line_search_fn "
                               f"(or None), got {line_search!r}")
        with no_grad():
            value = self._iterate(closure)
            realize(*self._params)
        return value

    def _iterate(self, closure: Callable[[], Any]) -> Any:
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size, line_search = group["history_size"], group["line_search_fn"]
        state = self.state.setdefault(self._params[0], {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        value, here = self._evaluate(closure, 0.0, None)
        evals = 1
        state["func_evals"] += 1
        if here.gmax <= tolerance_grad:
            return value

        d, t = state.get("d"), state.get("t")
        dirs, stps = state.get("old_dirs"), state.get("old_stps")
        ro, h_diag = state.get("ro"), state.get("H_diag")
        prev_g, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
        scalar = np.dtype(here.g.dtype.np).type   # host arithmetic in the parameters' dtype
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            g = here.g
            if state["n_iter"] == 1:             # the first iteration ever: steepest descent
                dirs, stps, ro, h_diag = [], [], [], 1.0
                d = -g
                gtd_t, g_l1 = dot(g, d), g.abs().sum()
                realize(d, gtd_t, g_l1)
                gtd, dmax = gtd_t.item(), here.gmax
                t = float(min(1.0, scalar(1.0) / scalar(g_l1.item())) * scalar(lr))
            else:
                y, s = g - prev_g, d * _host_tensor(t, d.dtype)
                ys_t, yy_t = dot(y, s), dot(y, y)
                realize(y, s, ys_t, yy_t)
                ys = ys_t.item()
                if ys > 1e-10:                   # curvature condition: remember (s, y)
                    dirs, stps = dirs + [y], stps + [s]
                    ro = ro + [float(scalar(1.0) / scalar(ys))]
                    h_diag = float(scalar(ys) / scalar(yy_t.item()))
                drop = max(len(dirs) - history_size, 0)     # the oldest beyond the size
                dirs, stps, ro = dirs[drop:], stps[drop:], ro[drop:]
                d, gtd, dmax = self._direction(g, dirs, stps, ro, h_diag)
                t = lr
            prev_g, prev_loss = g, here.f
            if gtd > -tolerance_change:          # not a descent direction (any more)
                break

            used = 0
            if line_search is not None:
                x = [p.clone() for p in self._params]

                def along(step: float, x: list[Tensor] = x, d: Tensor = d) -> _Point:
                    self._move(step, d)
                    point = self._evaluate(closure, step, d)[1]
                    for p, v in zip(self._params, x):
                        p.copy_(v)
                    return point

                here, used = _strong_wolfe(along, here._replace(t=0.0, gtd=gtd), t, dmax,
                                           max_ls=max_eval - evals)
                t = here.t
                self._move(t, d)
            else:
                self._move(t, d)
                if n_iter != max_iter:           # (the last iteration's loss is not needed)
                    here, used = self._evaluate(closure, t, d)[1], 1
            evals += used
            state["func_evals"] += used

            if n_iter == max_iter or evals >= max_eval or here.gmax <= tolerance_grad:
                break
            if abs(scalar(dmax) * scalar(t)) <= tolerance_change:   # max|t d|: no progress
                break
            if abs(here.f - prev_loss) < tolerance_change:
                break

        state.update(d=d, t=t, old_dirs=dirs, old_stps=stps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_g, prev_loss=prev_loss)
        return value

    # ------------------------------------------------------------ state dicts

    def _restored(self, key: str, v: Any, p: Tensor, index: Any) -> Any:
        """A loaded state entry, PyTorch's layout included: the flat vectors (``d``,
        ``prev_flat_grad``, the history) checked against the parameters' total size --
        the base would compare them with the first parameter's shape -- and moved to
        the parameters' device and dtype; ``t``, ``H_diag``, ``prev_loss`` and each
        ``rho`` of ``ro`` as Python floats (PyTorch keeps ``H_diag``, ``ro`` and at
        times ``t`` as 0-d tensors). PyTorch's scratch list ``al`` is dropped
        (``_scratch_state``)."""
        if key in _VECTORS:
            return self._flat_state(v, key, index)
        if key in _VECTOR_LISTS:
            return [self._flat_state(x, key, index) for x in v]
        if key in _NUMBERS:
            return self._number(v, key, index)
        if key == "ro":
            return [self._number(x, key, index) for x in v]
        return super()._restored(key, v, p, index)

    @staticmethod
    def _number(v: Any, key: str, index: Any) -> Any:
        """A saved host number (a 0-d tensor from PyTorch) as a float (None as is)."""
        if v is None or isinstance(v, (int, float)):
            return v
        if isinstance(v, Tensor) and v.numel() == 1:
            return float(v.item())
        got = f"a tensor of shape {tuple(v.shape)}" if isinstance(v, Tensor) else \
            type(v).__name__
        raise ValueError(f"LBFGS.load_state_dict: state {key!r} of parameter {index} must be "
                         f"a number (or a 0-d tensor), got {got}")

    def _flat_state(self, v: Any, key: str, index: Any) -> Any:
        """A saved flat vector on the parameters' device and in their dtype (None as
        is: the state before a first iteration)."""
        if v is None:
            return None
        numel = sum(p.numel() for p in self._params)
        if not isinstance(v, Tensor) or v.shape != (numel,):
            got = v.shape if isinstance(v, Tensor) else type(v).__name__
            raise ValueError(f"LBFGS.load_state_dict: state {key!r} of parameter {index} must "
                             f"be a 1-D tensor of the parameters' {numel} elements, got {got}")
        dtype = functools.reduce(dt.promote_types, (p.dtype for p in self._params))
        return v.to(self._params[0].device, dtype)


__all__ = ["LBFGS"]
