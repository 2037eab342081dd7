"""Learning-rate schedules. ``step()`` updates the rate in the optimizer's groups, from
where it enters the next step as a runtime input (no recompile), by PyTorch's recursive
rule (``_chain_lr``, its ``get_lr``): the schedules PyTorch computes from each group's
current rate (``StepLR``, ``MultiStepLR``, ``ExponentialLR``, ``ConstantLR``,
``LinearLR``, ``PolynomialLR``, ``MultiplicativeLR``, ``CosineAnnealingLR``) scale that
rate, so a rate changed by hand between steps, or a group added later, is decayed from
there as PyTorch does; the others (``LambdaLR``, ``CosineAnnealingWarmRestarts``,
``OneCycleLR``, ``CyclicLR``) set it from their base rates. Every epoch-driven scheduler
also has a closed form ``lr_at(epoch)`` (the same rates when nothing else touches
them), which ``SequentialLR`` composes (it runs one at a time) and ``load_state_dict``
writes. ``OneCycleLR`` and ``CyclicLR`` also write the momentum (SGD's and RMSprop's
``momentum``, Adam's ``betas[0]``), a runtime input too. ``ReduceLROnPlateau`` is driven
by a metric instead of a closed form.

Two schedulers built on one optimizer and stepped one after the other (``ConstantLR``
warmup then ``ExponentialLR``, as PyTorch's docs show) compose as in PyTorch, each
updating the rate the one before it left; so do those of a ``ChainedScheduler``.

The constructor's step runs in PyTorch's initial mode: the schedules that scale the
current rate keep it, so a scheduler built with ``last_epoch=k`` on an optimizer whose
state was loaded (PyTorch's resume idiom) continues from the loaded rate. ``step(epoch)``
is PyTorch's deprecated jump (its warning; the closed form where PyTorch has one, else
the rule at that epoch); ``CosineAnnealingWarmRestarts.step(epoch)`` takes fractional
epochs, as PyTorch's does.

A scheduler written against PyTorch -- a subclass of ``LRScheduler`` (or
``_LRScheduler``) overriding ``get_lr()``, as most warmup schedulers are -- steps by
PyTorch's rule: ``step()`` advances ``last_epoch`` and sets each group's rate to what
``get_lr()`` returns (``_get_closed_form_lr()``, where it defines one, for the deprecated
``step(epoch)``); its ``load_state_dict`` restores the attributes and leaves the rates to
the optimizer's state, as PyTorch's base does. The built-in schedulers' ``get_lr()``
returns what PyTorch's returns -- the rule applied to the groups' current rates -- and
warns, as PyTorch does, when called outside ``step()`` (``get_last_lr()`` is the rate
last set); ``OneCycleLR``'s and ``CyclicLR``'s also write the momentum, PyTorch's side
effect.

A scheduler wraps its optimizer's ``step`` as PyTorch's does, and its first
``step()`` after the constructor's warns PyTorch's words when the optimizer never
stepped ("Detected call of `lr_scheduler.step()` before `optimizer.step()`") or its
``step`` was replaced since."""
from __future__ import annotations

import bisect
import functools
import math
import types
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, SupportsFloat

from nova.capture import _Rerecord
from nova.optim.optimizer import Optimizer
from nova.tensor import capture_log


# PyTorch's warning for ``step(epoch)``, word for word.
EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being "
    "deprecated where possible. Please use `scheduler.step()` to step the "
    "scheduler. During the deprecation, if epoch is different from None, the "
    "closed form is used instead of the new chainable form, where available. "
    "Please open an issue if you are unable to replicate your use case: "
    "https://github.com/pytorch/pytorch/issues/new/choose."
)


class LRScheduler:
    """The base of every scheduler (PyTorch's ``LRScheduler``): subclasses define the
    rates by a closed form ``lr_at(epoch)`` and a recursive rule ``_chain_lr`` (Nova's
    own, see the module docstring) or, as in PyTorch, by overriding ``get_lr()``."""

    # Entries of ``__dict__`` that ``state_dict`` leaves out: the optimizer, functions,
    # other schedulers (saved by their own state dicts), caches.
    _unsaved: tuple[str, ...] = ("optimizer", "lr_lambdas", "schedulers", "_chained",
                                 "_in_chain")
    # ``step()`` applies ``_chain_lr`` to the groups' current rates (PyTorch's rule);
    # ``SequentialLR`` clears it for the schedulers it runs (they write ``lr_at``).
    _chained: bool = True
    # Set by ``ChainedScheduler``: the chain, not this scheduler, restores the rate a
    # loaded state implies.
    _in_chain: bool = False
    # True during the constructor's step (PyTorch's ``_initial_mode``): the schedules
    # that scale the current rate keep it then, so a scheduler built to resume
    # (``last_epoch=k`` on a loaded optimizer) does not decay the loaded rate again.
    _is_initial: bool = False
    # True while ``step()`` asks for the rates (PyTorch's flag of the same name: the
    # built-in ``get_lr()`` warns when called outside a step, and a ``get_lr`` ported
    # from PyTorch's sources reads it to do the same).
    _get_lr_called_within_step: bool = False
    # Whether ``step(epoch)`` (deprecated) sets the rate from ``lr_at`` (PyTorch's
    # ``_get_closed_form_lr``, which only some schedulers have) rather than by the
    # recursive rule.
    _closed_form_on_epoch: bool = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        self._attach(optimizer, last_epoch)
        self._initial_step()

    def _attach(self, optimizer: Optimizer, last_epoch: int) -> None:
        """Take ``optimizer`` and the groups' initial rates (``initial_lr``, kept in the
        groups so the optimizer's state dict carries them) as the base rates. Resuming
        (``last_epoch != -1``) needs them already there, as in PyTorch: a fresh group's
        rate is not the schedule's base."""
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__}: expected an Optimizer, got "
                            f"{type(optimizer).__name__}")
        self.optimizer = optimizer
        _track_step_called(optimizer)
        if last_epoch == -1:
            for g in optimizer.param_groups:
                g.setdefault("initial_lr", g["lr"])
        else:
            for i, g in enumerate(optimizer.param_groups):
                if "initial_lr" not in g:
                    raise KeyError(
                        f"{type(self).__name__}: param 'initial_lr' is not specified in "
                        f"param_groups[{i}] when resuming scheduler with last_epoch >= 0 "
                        f"(last_epoch={last_epoch}); load the optimizer's state dict "
                        "(which carries it) before building the scheduler, or pass "
                        "last_epoch=-1 for a fresh run")
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0         # step() calls, the constructor's included (PyTorch's)

    def _initial_step(self) -> None:
        """The constructor's step, in PyTorch's initial mode (``_is_initial``)."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def lr_at(self, epoch: int) -> list[float]:
        """The rates at ``epoch`` by this schedule's closed form."""
        raise NotImplementedError(
            f"{type(self).__name__} has no closed form lr_at(epoch): a scheduler defines "
            "its rates by overriding get_lr() (PyTorch's way) or lr_at")

    def get_lr(self) -> list[float]:
        """The rates of the current step (PyTorch's ``get_lr``, its chainable form):
        this schedule's rule applied to the groups' current rates at ``last_epoch``.
        ``step()`` calls it once ``last_epoch`` has advanced; called anywhere else it
        warns, as PyTorch's does -- the rate last set is ``get_last_lr()`` (a schedule
        that scales the current rate would scale it once more here). A subclass
        written against PyTorch overrides it."""
        if not self._has_rule():
            raise NotImplementedError(f"{type(self).__name__}: a scheduler subclass must "
                                      "override get_lr() (or lr_at)")
        _warn_get_lr_called_within_step(self)
        return self._chain_lr([g["lr"] for g in self.optimizer.param_groups],
                              self.last_epoch)

    get_lr._nova_rule = True     # type: ignore[attr-defined]

    def _custom_get_lr(self) -> bool:
        """Whether this class overrides ``get_lr`` (a scheduler written against
        PyTorch, or a subclass of a built-in one): ``step()`` then uses it."""
        return not getattr(type(self).get_lr, "_nova_rule", False)

    def _has_rule(self) -> bool:
        """Whether the class defines Nova's rules (``lr_at`` or ``_chain_lr``)."""
        cls = type(self)
        return cls.lr_at is not LRScheduler.lr_at or \
            cls._chain_lr is not LRScheduler._chain_lr

    def _chain_lr(self, lrs: list[float], epoch: int) -> list[float]:
        """The rates after this scheduler's step to ``epoch`` inside a chain, from the
        groups' current rates ``lrs`` (PyTorch's ``get_lr``). A schedule that PyTorch
        computes from its base rates alone sets them: ``lr_at``. A class overriding
        ``get_lr`` is asked with the groups at ``lrs`` and ``last_epoch`` at ``epoch``."""
        if self._custom_get_lr():
            return self._get_lr_at(lrs, epoch)
        return self.lr_at(epoch)

    def _get_lr_at(self, lrs: list[float], epoch: int) -> list[float]:
        """``get_lr()`` (as ``step()`` calls it) with the groups' rates set to ``lrs``
        and ``last_epoch`` to ``epoch``; the groups keep ``lrs``."""
        for g, lr in zip(self.optimizer.param_groups, lrs):
            g["lr"] = lr
        last, self.last_epoch = self.last_epoch, epoch
        try:
            with _within_step(self):
                return list(self.get_lr())
        finally:
            self.last_epoch = last

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch. ``epoch`` (deprecated, as in PyTorch, which warns the same)
        jumps to that epoch instead: the closed form where PyTorch has one, else the
        recursive rule at that epoch. An ``nv.compile`` replay steps without arguments,
        so a call passing ``epoch`` runs recorded."""
        if epoch is None:
            capture_log.action("sched_step", self)
        else:
            capture_log.refuse(f"{type(self).__name__}.step(epoch) sets the epoch from a "
                               "value of this call; call it outside the compiled function")
        if self._step_count == 1:
            _warn_stepped_before_optimizer(self.optimizer)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        """Move to the next epoch (or to ``epoch``) and write its rates."""
        with _within_step(self):
            if epoch is None:
                self.last_epoch += 1
                lrs = self._next_lrs()
            else:
                self.last_epoch = epoch
                closed = getattr(self, "_get_closed_form_lr", None)
                if closed is not None:
                    lrs = closed()
                elif self._closed_form_on_epoch:
                    lrs = self.lr_at(epoch)
                else:
                    lrs = self._next_lrs()
        self._last_lr = list(lrs)
        for g, lr in zip(self.optimizer.param_groups, self._last_lr):
            g["lr"] = lr

    def _next_lrs(self) -> list[float]:
        """The rates at ``last_epoch`` by the rule this scheduler steps by: an
        overridden ``get_lr()``, else Nova's recursive rule (or, run by a
        ``SequentialLR``, the closed form)."""
        if self._custom_get_lr():
            with _within_step(self):
                return list(self.get_lr())
        if self._chained:
            return self._chain_lr([g["lr"] for g in self.optimizer.param_groups],
                                  self.last_epoch)
        return self.lr_at(self.last_epoch)

    def get_last_lr(self) -> list[float]:
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        """The scheduler's attributes (``last_epoch``, ``base_lrs``, ``_last_lr``,
        ``_step_count`` and its own settings), as PyTorch's ``__dict__`` less the
        optimizer; functions and other schedulers are left out (``_unsaved``)."""
        return {k: v for k, v in self.__dict__.items() if k not in self._unsaved}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the attributes (the position in the schedule, ``_last_lr``), as
        PyTorch's does: the rates come back with the optimizer's state dict, so a
        resumed run continues bit for bit and a rate set by hand before the save is
        kept. (Writing the closed form's rate into the groups here, as Nova did, lost
        such a rate and moved others by an ulp from the recursive rule's.) A state
        without a key (saved by an older Nova: no ``_step_count``) leaves that
        attribute as it is."""
        self.__dict__.update(state)


class _LRScheduler(LRScheduler):
    """PyTorch's old name for ``LRScheduler`` (a subclass, as in PyTorch, so that its
    ``__name__`` is the old one): schedulers written against it subclass it."""


class _within_step:
    """``_get_lr_called_within_step`` set while ``step()`` asks for the rates
    (PyTorch's ``_enable_get_lr_call``)."""

    def __init__(self, scheduler: LRScheduler):
        self.scheduler = scheduler

    def __enter__(self) -> _within_step:
        self.outer = self.scheduler.__dict__.get("_get_lr_called_within_step", False)
        self.scheduler._get_lr_called_within_step = True
        return self

    def __exit__(self, *exc: Any) -> None:
        self.scheduler._get_lr_called_within_step = self.outer


def _track_step_called(optimizer: Optimizer) -> None:
    """PyTorch's ``patch_track_step_called``: wrap ``optimizer.step`` (an attribute of
    the instance, once per optimizer) so that every call marks ``optimizer._opt_called``
    -- what the first ``scheduler.step()`` checks (``_warn_stepped_before_optimizer``).
    The wrapper holds the optimizer weakly, as PyTorch's."""
    step = optimizer.step
    if hasattr(step, "_wrapped_by_lr_sched"):
        return
    opt_ref = weakref.ref(optimizer)
    func = getattr(step, "__func__", None)

    @functools.wraps(func if func is not None else step)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        opt = opt_ref()
        opt._opt_called = True      # type: ignore[union-attr]
        if func is None:            # (a plain function assigned to optimizer.step)
            return step(*args, **kwargs)
        return func.__get__(opt, opt.__class__)(*args, **kwargs)

    wrapper._wrapped_by_lr_sched = True     # type: ignore[attr-defined]
    optimizer.step = wrapper                 # type: ignore[method-assign]


def _warn_stepped_before_optimizer(optimizer: Optimizer) -> None:
    """PyTorch's warnings at the first ``scheduler.step()`` after the constructor's:
    ``optimizer.step`` replaced since the scheduler wrapped it, or never called (the
    schedule would skip its first value). Word for word."""
    if not hasattr(optimizer.step, "_wrapped_by_lr_sched"):
        warnings.warn(
            "Seems like `optimizer.step()` has been overridden after learning rate scheduler "
            "initialization. Please, make sure to call `optimizer.step()` before "
            "`lr_scheduler.step()`. See more details at "
            "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
            UserWarning, stacklevel=3)
    elif not getattr(optimizer, "_opt_called", False):
        warnings.warn(
            "Detected call of `lr_scheduler.step()` before `optimizer.step()`. "
            "In PyTorch 1.1.0 and later, you should call them in the opposite order: "
            "`optimizer.step()` before `lr_scheduler.step()`.  Failure to do this "
            "will result in PyTorch skipping the first value of the learning rate schedule. "
            "See more details at "
            "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
            UserWarning, stacklevel=3)


def _warn_get_lr_called_within_step(scheduler: LRScheduler) -> None:
    """PyTorch's warning for a built-in scheduler's ``get_lr()`` called by the user."""
    if not scheduler._get_lr_called_within_step:
        warnings.warn("To get the last learning rate computed by the scheduler, please use "
                      "`get_last_lr()`.", UserWarning, stacklevel=3)


class LambdaLR(LRScheduler):
    """``base_lr * lr_lambda(epoch)``."""

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable[[int], float] | Sequence,
                 last_epoch: int = -1):
        n = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * n
        if len(self.lr_lambdas) != n:
            raise ValueError(f"LambdaLR: expected {n} lr_lambdas, got {len(self.lr_lambdas)}")
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        return [base * f(epoch) for base, f in zip(self.base_lrs, self.lr_lambdas)]

    def state_dict(self) -> dict[str, Any]:
        """The base's state with PyTorch's ``lr_lambdas`` last: per group None for a
        function, a copy of a callable object's ``__dict__`` for one."""
        return _with_lambda_states(self, super().state_dict())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the attributes and the callable objects' ``__dict__``s (before the
        rates are recomputed from them); ``state`` is left as it was."""
        super().load_state_dict(_restore_lambda_states(self, state))


def _with_lambda_states(scheduler: Any, state: dict[str, Any]) -> dict[str, Any]:
    """``state`` with PyTorch's ``lr_lambdas`` entry (``LambdaLR``, ``MultiplicativeLR``):
    None for a plain function or lambda, else the callable's ``__dict__`` copied."""
    saved: list[dict[str, Any] | None] = []
    for i, fn in enumerate(scheduler.lr_lambdas):
        if isinstance(fn, types.FunctionType):
            saved.append(None)
            continue
        try:
            saved.append(fn.__dict__.copy())
        except AttributeError:
            raise AttributeError(
                f"{type(scheduler).__name__}.state_dict: lr_lambdas[{i}] "
                f"({type(fn).__name__}) is neither a function nor an object with a "
                "__dict__, so its state cannot be saved (as in PyTorch); use a function "
                "or a callable object") from None
    state["lr_lambdas"] = saved
    return state


def _restore_lambda_states(scheduler: Any, state: dict[str, Any]) -> dict[str, Any]:
    """Update the callable objects' ``__dict__``s from ``state["lr_lambdas"]`` (PyTorch's
    ``load_state_dict``); return the rest of ``state`` for the attributes. A state
    without the entry (saved by an older Nova) leaves the callables as they are."""
    saved = state.get("lr_lambdas")
    if saved is not None:
        if len(saved) != len(scheduler.lr_lambdas):
            raise ValueError(
                f"{type(scheduler).__name__}.load_state_dict: the state has "
                f"{len(saved)} lr_lambdas entries, the scheduler {len(scheduler.lr_lambdas)} "
                "lr_lambdas (one per parameter group)")
        for fn, d in zip(scheduler.lr_lambdas, saved):
            if d is not None:
                fn.__dict__.update(d)
    return {k: v for k, v in state.items() if k != "lr_lambdas"}


class StepLR(LRScheduler):
    """``base_lr * gamma ** (epoch // step_size)``."""

    _closed_form_on_epoch = True

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1):
        if step_size <= 0:
            raise ValueError(f"StepLR: step_size must be positive, got {step_size}")
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        return [base * self.gamma ** (epoch // self.step_size) for base in self.base_lrs]

    def _chain_lr(self, lrs: list[float], epoch: int) -> list[float]:
        if epoch == 0 or epoch % self.step_size:
            return lrs
        return [lr * self.gamma for lr in lrs]


class CosineAnnealingLR(LRScheduler):
    """``eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2``."""

    _closed_form_on_epoch = True

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,
                 last_epoch: int = -1):
        if T_max <= 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be positive, got {T_max}")
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        c = (1 + math.cos(math.pi * epoch / self.T_max)) / 2
        return [self.eta_min + (base - self.eta_min) * c for base in self.base_lrs]

    def _chain_lr(self, lrs: list[float], epoch: int) -> list[float]:
        """PyTorch's recursion: the ratio of consecutive cosine factors, applied above
        ``eta_min``; one period past ``T_max`` (where that ratio is 0/0) a step up. The
        constructor's step keeps the current rate (also when resuming)."""
        if self._is_initial:
            return lrs
        if self._step_count == 1 and epoch > 0:
            # PyTorch's closed form for a first step outside its initial mode, in its
            # order of operations (the constructor's step is in initial mode, so only a
            # reset ``_step_count`` gets here)
            return [self.eta_min + (base - self.eta_min) *
                    (1 + math.cos(epoch * math.pi / self.T_max)) / 2
                    for base in self.base_lrs]
        if (epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [lr + (base - self.eta_min) * (1 - math.cos(math.pi / self.T_max)) / 2
                    for lr, base in zip(lrs, self.base_lrs)]
        ratio = ((1 + math.cos(math.pi * epoch / self.T_max)) /
                 (1 + math.cos(math.pi * (epoch - 1) / self.T_max)))
        return [ratio * (lr - self.eta_min) + self.eta_min for lr in lrs]


class LinearLR(LRScheduler):
    """Factor moving linearly from ``start_factor`` to ``end_factor`` over
    ``total_iters`` epochs, then constant."""

    _closed_form_on_epoch = True

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3,
                 end_factor: float = 1.0, total_iters: int = 5, last_epoch: int = -1):
        if not (0 < start_factor <= 1 and 0 <= end_factor <= 1) or total_iters < 1:
            raise ValueError(f"LinearLR: need 0 < start_factor <= 1, 0 <= end_factor <= 1 and "
                             f"total_iters >= 1, got {start_factor}, {end_factor}, {total_iters}")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        return [base * (self.start_factor + (self.end_factor - self.start_factor) *
                        min(self.total_iters, epoch) / self.total_iters)
                for base in self.base_lrs]

    def _chain_lr(self, lrs: list[float], epoch: int) -> list[float]:
        if epoch == 0:
            return [lr * self.start_factor for lr in lrs]
        if self._is_initial or epoch > self.total_iters:
            return lrs
        change = self.end_factor - self.start_factor
        ratio = 1.0 + change / (self.total_iters * self.start_factor + (epoch - 1) * change)
        return [lr * ratio for lr in lrs]


class ExponentialLR(LRScheduler):
    """``base_lr * gamma ** epoch``."""

    _closed_form_on_epoch = True

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        return [base * self.gamma ** epoch for base in self.base_lrs]

    def _chain_lr(self, lrs: list[float], epoch: int) -> list[float]:
        return lrs if self._is_initial else [lr * self.gamma for lr in lrs]


class MultiStepLR(LRScheduler):
    """``base_lr * gamma ** (milestones passed)``; a milestone listed twice counts twice,
    as in PyTorch."""

    _closed_form_on_epoch = True

    def __init__(self, optimizer: Optimizer, milestones: Sequence[int], gamma: float = 0.1,
                 last_epoch: int = -1):
        self.milestones, self.gamma = sorted(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        return [base * self.gamma ** bisect.bisect_right(self.milestones, epoch)
                for base in self.base_lrs]

    def _chain_lr(self, lrs: list[float], epoch: int) -> list[float]:
        times = self.milestones.count(epoch)
        return [lr * self.gamma ** times for lr in lrs] if times else lrs

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """As the base's; PyTorch's state holds the milestones as a ``Counter`` (a
        milestone to its count), Nova's as the sorted list with repeats."""
        milestones = state.get("milestones")
        if isinstance(milestones, Mapping):
            state = {**state, "milestones": sorted(
                m for m, count in milestones.items() for _ in range(count))}
        super().load_state_dict(state)


class ConstantLR(LRScheduler):
    """``base_lr * factor`` for the first ``total_iters`` epochs, then ``base_lr``."""

    _closed_form_on_epoch = True

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1):
        if not 0 <= factor <= 1:
            raise ValueError(f"ConstantLR: factor must be in [0, 1], got {factor}")
        if total_iters < 1:
            raise ValueError(f"ConstantLR: total_iters must be >= 1, got {total_iters}")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        return [base * (self.factor + (epoch >= self.total_iters) * (1 - self.factor))
                for base in self.base_lrs]

    def _chain_lr(self, lrs: list[float], epoch: int) -> list[float]:
        if epoch == 0:
            return [lr * self.factor for lr in lrs]
        if epoch != self.total_iters:
            return lrs
        if self.factor == 0:
            raise ValueError("ConstantLR: in a chain the factor is undone by multiplying by "
                             "1 / factor at total_iters (PyTorch's rule), which factor=0 "
                             "cannot do")
        return [lr * (1.0 / self.factor) for lr in lrs]


class PolynomialLR(LRScheduler):
    """``base_lr * (1 - min(epoch, total_iters) / total_iters) ** power``."""

    _closed_form_on_epoch = True

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0,
                 last_epoch: int = -1):
        if total_iters < 1:
            raise ValueError(f"PolynomialLR: total_iters must be >= 1, got {total_iters}")
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        factor = (1.0 - min(self.total_iters, epoch) / self.total_iters) ** self.power
        return [base * factor for base in self.base_lrs]

    def _chain_lr(self, lrs: list[float], epoch: int) -> list[float]:
        if self._is_initial or epoch > self.total_iters:
            return lrs
        ratio = ((1.0 - epoch / self.total_iters) /
                 (1.0 - (epoch - 1) / self.total_iters)) ** self.power
        return [lr * ratio for lr in lrs]


class MultiplicativeLR(LRScheduler):
    """``base_lr * f(1) * f(2) * ... * f(epoch)`` (``f``: ``lr_lambda``, or one per
    group): each step multiplies the rate by ``f(epoch)``, in PyTorch's order, so the
    products round alike. ``lr_at`` keeps the last epoch's rates, so stepping costs one
    call of ``f`` per group; another epoch multiplies from the base rates again."""

    _unsaved = LRScheduler._unsaved + ("_memo",)

    def __init__(self, optimizer: Optimizer,
                 lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
                 last_epoch: int = -1):
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"MultiplicativeLR: expected {n} lr_lambdas (one per "
                                 f"parameter group), got {len(lr_lambda)}")
            lambdas = list(lr_lambda)
        else:
            lambdas = [lr_lambda] * n
        for f in lambdas:
            if not callable(f):
                raise TypeError(f"MultiplicativeLR: lr_lambda should be a function, but got "
                                f"{type(f).__name__}")
        self.lr_lambdas = lambdas
        self._memo: tuple[int, list[float]] | None = None   # (epoch, its rates)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        memo = self._memo
        if memo is not None and memo[0] == epoch:
            return list(memo[1])
        if memo is not None and memo[0] == epoch - 1 and epoch >= 1:
            start, lrs = epoch, memo[1]
        else:
            start, lrs = 1, list(self.base_lrs)
        for e in range(start, epoch + 1):
            lrs = [lr * f(e) for lr, f in zip(lrs, self.lr_lambdas)]
        self._memo = (epoch, lrs)
        return list(lrs)

    def _chain_lr(self, lrs: list[float], epoch: int) -> list[float]:
        if self._is_initial:
            return lrs
        return [lr * f(epoch) for lr, f in zip(lrs, self.lr_lambdas)]

    def state_dict(self) -> dict[str, Any]:
        """As ``LambdaLR``'s: PyTorch's ``lr_lambdas`` entry last."""
        return _with_lambda_states(self, super().state_dict())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._memo = None          # (of the base rates being replaced)
        super().load_state_dict(_restore_lambda_states(self, state))


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing restarted every ``T_i`` epochs, ``T_0`` first, each period
    ``T_mult`` times the last: ``eta_min + (base - eta_min)(1 + cos(pi T_cur / T_i)) / 2``
    (SGDR). ``T_cur`` (epochs since the last restart) and ``T_i`` (the current period)
    are attributes that ``step`` moves as PyTorch's does: ``step()`` one epoch on,
    ``step(epoch)`` to any (fractional) epoch, so ``step(epoch + i / iters)`` anneals
    within an epoch as PyTorch's docs show, and a later ``step()`` continues from
    ``floor(epoch)``. ``lr_at`` is the closed form of the integer-epoch schedule
    (what ``SequentialLR`` composes)."""

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0,
                 last_epoch: int = -1):
        if T_0 <= 0 or not isinstance(T_0, int) or T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"CosineAnnealingWarmRestarts: T_0 must be a positive int and "
                             f"T_mult an int >= 1, got {T_0} and {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"CosineAnnealingWarmRestarts: Expected float or int eta_min, "
                             f"but got {eta_min} of type {type(eta_min).__name__}")
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur: float = last_epoch
        super().__init__(optimizer, last_epoch)

    def _position(self, epoch: int) -> tuple[int, int]:
        """(T_cur, T_i) at ``epoch``: the epochs since the last restart and the period."""
        if self.T_mult == 1:
            return epoch % self.T_0, self.T_0
        n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
        t_cur = epoch - self.T_0 * (self.T_mult ** n - 1) // (self.T_mult - 1)
        t_i = self.T_0 * self.T_mult ** n
        if t_cur >= t_i:            # float log landed one period short
            t_cur, t_i = t_cur - t_i, t_i * self.T_mult
        return t_cur, t_i

    def lr_at(self, epoch: int) -> list[float]:
        t_cur, t_i = self._position(epoch)
        c = (1 + math.cos(math.pi * t_cur / t_i)) / 2
        return [self.eta_min + (base - self.eta_min) * c for base in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        """One epoch on, or (``epoch``, a float) to that epoch: PyTorch's rule, its
        arithmetic included (it neither warns nor counts ``_step_count`` here). An
        ``nv.compile`` replay steps without arguments, so a call passing ``epoch``
        runs recorded."""
        if epoch is None:
            capture_log.action("sched_step", self)
        else:
            capture_log.refuse("CosineAnnealingWarmRestarts.step(epoch) sets the epoch "
                               "from a value of this call; call it outside the compiled "
                               "function")
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            self._jump(epoch)
        self.last_epoch = math.floor(epoch)
        self._write_position()

    def _jump(self, epoch: float) -> None:
        """``T_cur`` and ``T_i`` at ``epoch`` (PyTorch's expressions)."""
        if epoch < 0:
            raise ValueError(f"CosineAnnealingWarmRestarts.step: Expected non-negative "
                             f"epoch, but got {epoch}")
        if epoch >= self.T_0:
            if self.T_mult == 1:
                self.T_cur = epoch % self.T_0
            else:
                n = int(math.log((epoch / self.T_0 * (self.T_mult - 1) + 1), self.T_mult))
                self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                self.T_i = self.T_0 * self.T_mult ** n
        else:
            self.T_i = self.T_0
            self.T_cur = epoch

    def get_lr(self) -> list[float]:
        """The rates at (``T_cur``, ``T_i``) (PyTorch's ``get_lr``; it warns outside
        ``step()`` as PyTorch's does)."""
        _warn_get_lr_called_within_step(self)
        return [self.eta_min + (base - self.eta_min) *
                (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for base in self.base_lrs]

    get_lr._nova_rule = True     # type: ignore[attr-defined]

    def _write_position(self) -> None:
        """Write the rates at (``T_cur``, ``T_i``) (``get_lr``, or a subclass's)."""
        with _within_step(self):
            self._last_lr = list(self.get_lr())
        for g, lr in zip(self.optimizer.param_groups, self._last_lr):
            g["lr"] = lr

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the position (``T_cur`` and ``T_i``; a state saved without them, by
        an older Nova, places them at ``last_epoch``); the rates come back with the
        optimizer's state dict (``LRScheduler.load_state_dict``)."""
        self.__dict__.update(state)
        if "T_cur" not in state or "T_i" not in state:
            self.T_cur, self.T_i = self._position(self.last_epoch)


class SequentialLR(LRScheduler):
    """Run ``schedulers[i]`` from ``milestones[i-1]`` on, each restarting at epoch 0
    (warmup then cosine: ``SequentialLR(opt, [LinearLR(...), CosineAnnealingLR(...)],
    milestones=[warmup])``)."""

    def __init__(self, optimizer: Optimizer, schedulers: Sequence[LRScheduler],
                 milestones: Sequence[int], last_epoch: int = -1):
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR: expected {len(schedulers) - 1} milestones, got "
                             f"{len(milestones)}")
        for s in schedulers:
            if s.optimizer is not optimizer:
                raise ValueError("SequentialLR: all schedulers must belong to the optimizer")
        self.schedulers = list(schedulers)
        self.milestones = list(milestones)
        for sch in self.schedulers:
            sch._chained = False
        for g in optimizer.param_groups:    # (as PyTorch: the first runs from the base)
            if "initial_lr" in g:
                g["lr"] = g["initial_lr"]
        super().__init__(optimizer, last_epoch)

    def step(self) -> None:  # type: ignore[override]
        """Advance one epoch (PyTorch's ``SequentialLR.step`` takes no epoch)."""
        super().step()

    def lr_at(self, epoch: int) -> list[float]:
        """The rates of the scheduler running at ``epoch``, at its own epoch. One that
        defines ``get_lr()`` (PyTorch's way: no closed form) is asked for them with the
        groups' current rates, and its ``last_epoch`` moves there, as PyTorch's
        ``SequentialLR`` steps it. A ``OneCycleLR`` or ``CyclicLR`` cycling the
        momentum writes it too, as its ``get_lr()`` does when PyTorch steps it."""
        i = bisect.bisect_right(self.milestones, epoch)
        start = self.milestones[i - 1] if i else 0
        child = self.schedulers[i]
        if isinstance(child, _MomentumSchedule) and not child._custom_get_lr():
            # PyTorch steps the child, whose get_lr() writes the momentum too
            lrs, moms = child._at(epoch - start)
            child._write_momentum(moms)
            return lrs
        if child._custom_get_lr():
            lrs = child._get_lr_at([g["lr"] for g in self.optimizer.param_groups],
                                   epoch - start)
            child.last_epoch, child._last_lr = epoch - start, list(lrs)
            return lrs
        return child.lr_at(epoch - start)


class ReduceLROnPlateau(LRScheduler):
    """Multiply each group's rate by ``factor`` once ``metrics`` has not improved for
    more than ``patience`` consecutive ``step(metrics)`` calls (PyTorch's rule, to the
    comparison): improving means below ``best * (1 - threshold)`` (``mode='min'``,
    ``threshold_mode='rel'``), below ``best - threshold`` (``'abs'``), or above
    ``best * (1 + threshold)`` / ``best + threshold`` in ``mode='max'``. After a
    reduction, ``cooldown`` steps count no bad epochs; a rate never goes below its
    ``min_lr``, and a reduction smaller than ``eps`` is skipped.

    The rate is decided on the host from the metric's value (a 0-d tensor is read
    with ``float``), and enters the next training step as a runtime input like any
    scheduled rate, so a reduction does not recompile. Call ``step(metrics)`` outside
    an ``nv.compile`` d function: a replay could not see a new metric, so a function
    calling it runs recorded every call.
    """

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, threshold_mode: str = "rel",
                 cooldown: int = 0, min_lr: float | Sequence[float] = 0,
                 eps: float = 1e-8):
        # No ``super().__init__``: there is no closed form to step to epoch 0 with; the
        # rates start as the optimizer's, as in PyTorch.
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor should be < 1.0, got {factor}")
        self.factor = factor
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"ReduceLROnPlateau: expected an Optimizer, got "
                            f"{type(optimizer).__name__}")
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != n:
                raise ValueError(f"ReduceLROnPlateau: expected {n} min_lrs (one per "
                                 f"parameter group), got {len(min_lr)}")
            self.default_min_lr: float | None = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * n
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = [g["lr"] for g in optimizer.param_groups]
        self._init_is_better(mode=mode, threshold=threshold, threshold_mode=threshold_mode)
        self._reset()

    def _reset(self) -> None:
        """No best value yet, no bad epochs, no cooldown."""
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def lr_at(self, epoch: int) -> list[float]:
        raise TypeError("ReduceLROnPlateau: the rate depends on the metrics passed to "
                        "step(metrics), not on the epoch alone (it has no closed form, so "
                        "SequentialLR cannot compose it)")

    def step(self, metrics: SupportsFloat,  # type: ignore[override]
             epoch: int | None = None) -> None:
        """Count ``metrics`` (a number or a 0-d tensor) as one epoch's result and reduce
        the rates if it is the ``patience + 1``-th bad epoch in a row."""
        # An nv.compile replay re-runs a scheduler's step() without arguments and would
        # not see this call's metric (nor the Python deciding on it): record every call.
        capture_log.refuse("ReduceLROnPlateau.step(metrics) decides the learning rate from "
                           "a value of this call; call it outside the compiled function")
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn("ReduceLROnPlateau.step: the epoch argument is deprecated (as in "
                          "PyTorch); call step(metrics) once per epoch", UserWarning,
                          stacklevel=2)
        self.last_epoch = epoch
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0             # bad epochs in cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def _reduce_lr(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"ReduceLROnPlateau: the optimizer has {len(groups)} parameter groups "
                    f"but min_lr gave {len(self.min_lrs)} (a group was added since); set "
                    "the scheduler's min_lrs to one value per group")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for i, group in enumerate(groups):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, self.min_lrs[i])
            if old_lr - new_lr > self.eps:
                group["lr"] = new_lr

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def is_better(self, a: float, best: float) -> bool:
        """Whether ``a`` improves on ``best`` by more than the threshold (the expressions
        are PyTorch's, so ties and rounding decide alike)."""
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min":
            return a < best - self.threshold
        if self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    _is_better = is_better          # PyTorch's current (private) name

    def _init_is_better(self, mode: str, threshold: float, threshold_mode: str) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode {mode!r} is unknown (expected "
                             "'min' or 'max')")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: threshold mode {threshold_mode!r} is "
                             "unknown (expected 'rel' or 'abs')")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the counters and the best value. The rates themselves live in the
        optimizer's groups (restored by its own ``load_state_dict``), as in PyTorch."""
        self.__dict__.update(state)
        self._init_is_better(mode=self.mode, threshold=self.threshold,
                             threshold_mode=self.threshold_mode)


def _per_group(scheduler: str, name: str, optimizer: Optimizer, value: Any) -> list[Any]:
    """``value`` for every parameter group: a list or tuple gives one per group."""
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{scheduler}: {name} must have the same length as "
                             f"optimizer.param_groups. {name} has {len(value)} values, "
                             f"param_groups has {n}.")
        return list(value)
    return [value] * n


class _SteppedPastTheEnd(ValueError, _Rerecord):
    """``OneCycleLR.step()`` past ``total_steps``: a ``ValueError`` for the caller, as in
    PyTorch. Also an ``nv.compile`` re-record signal: a replay runs the call's host
    events before its kernels, so raising from there would skip the training step that
    the uncompiled call ran before its scheduler failed; the replay instead undoes its
    host events and records the call, which then fails exactly as uncompiled."""


class _MomentumSchedule(LRScheduler):
    """A schedule of the rate and, with ``cycle_momentum``, the momentum: SGD's and
    RMSprop's ``momentum`` or the Adam family's ``betas[0]`` (``use_beta1``), whichever
    the optimizer's defaults have. Both are runtime inputs of the optimizers' steps."""

    use_beta1: bool = False

    def _set_momentum(self, group: dict[str, Any], value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _write_momentum(self, moms: list[float] | None) -> None:
        """Write every group's momentum (or ``betas[0]``); None: not cycled."""
        if moms is not None:
            for group, m in zip(self.optimizer.param_groups, moms):
                self._set_momentum(group, m)

    def _write(self, lrs: list[float], moms: list[float] | None) -> None:
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._write_momentum(moms)
        self._last_lr = list(lrs)

    def get_lr(self) -> list[float]:
        """The rates at ``last_epoch`` (PyTorch's ``get_lr``). With ``cycle_momentum``
        it also writes the momentum at ``last_epoch`` into the groups, PyTorch's side
        effect: called by hand (it warns then, as PyTorch's), it puts back the scheduled
        momentum over one set since."""
        _warn_get_lr_called_within_step(self)
        lrs, moms = self._at(self.last_epoch)
        self._write_momentum(moms)
        return lrs

    get_lr._nova_rule = True     # type: ignore[attr-defined]

    def _update_lr(self, epoch: int | None = None) -> None:
        """Advance one training step (or go to step ``epoch``): write the rate and (with
        ``cycle_momentum``) the momentum of the next optimizer step. A subclass
        overriding ``get_lr()`` steps by it (``LRScheduler._update_lr``)."""
        if self._custom_get_lr():
            super()._update_lr(epoch)
            return
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        self._write(*self._at(self.last_epoch))

    def _at(self, epoch: int) -> tuple[list[float], list[float] | None]:
        """Every group's rate and momentum (None without cycling) at ``epoch``."""
        raise NotImplementedError

    def lr_at(self, epoch: int) -> list[float]:
        return self._at(epoch)[0]

    def momentum_at(self, epoch: int) -> list[float] | None:
        """Every group's momentum (or ``betas[0]``) at ``epoch``; None without cycling."""
        return self._at(epoch)[1]


class OneCycleLR(_MomentumSchedule):
    """The 1cycle policy (Smith & Topin), PyTorch's schedule step by step. Over
    ``total_steps`` (or ``epochs * steps_per_epoch``) ``step()`` calls the rate goes from
    ``max_lr / div_factor`` up to ``max_lr`` in the first ``pct_start`` of the steps,
    then down to ``max_lr / div_factor / final_div_factor`` (with ``three_phase``: back
    to the initial rate by ``2 * pct_start``, then down to the minimum), annealed by
    cosine or linearly within each phase; with ``cycle_momentum`` the momentum moves
    the opposite way between ``max_momentum`` and ``base_momentum``.

    A phase ending at step ``e`` after one ending at ``s`` (``e = pct_start *
    total_steps - 1`` for the first, ``s = 0`` before it) places step ``n`` at ``pct =
    (n - s) / (e - s)``; cosine gives ``end + (start - end) / 2 * (1 + cos(pi pct))``,
    linear ``start + (end - start) pct``. The momentum written is SGD's and RMSprop's
    ``momentum`` or Adam's ``betas[0]`` (whichever the optimizer's defaults have); the
    optimizers take it as a runtime input, like the rate, so the training step
    compiles once. The schedule's bounds live in the parameter groups (``initial_lr``,
    ``max_lr``, ``min_lr``, ``max_momentum``, ``base_momentum``), as in PyTorch, so the
    optimizer's state dict carries them.
    """

    def __init__(self, optimizer: Optimizer, max_lr: float | Sequence[float],
                 total_steps: int | None = None, epochs: int | None = None,
                 steps_per_epoch: int | None = None, pct_start: float = 0.3,
                 anneal_strategy: str = "cos", cycle_momentum: bool = True,
                 base_momentum: float | Sequence[float] = 0.85,
                 max_momentum: float | Sequence[float] = 0.95, div_factor: float = 25.0,
                 final_div_factor: float = 1e4, three_phase: bool = False,
                 last_epoch: int = -1):
        # The checks and their order are PyTorch's, the messages name the scheduler.
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"OneCycleLR: expected an Optimizer, got "
                            f"{type(optimizer).__name__}")
        self.optimizer = optimizer
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"OneCycleLR: Expected positive integer total_steps, but "
                                 f"got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"OneCycleLR: Expected positive integer epochs, but got "
                                 f"{epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(f"OneCycleLR: Expected positive integer steps_per_epoch, "
                                 f"but got {steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("OneCycleLR: You must define either total_steps OR (epochs AND "
                             "steps_per_epoch)")
        total = self.total_steps
        # (end step, group key of the start and end rate, of the start and end momentum)
        if three_phase:
            self._schedule_phases = [
                {"end_step": float(pct_start * total) - 1, "start_lr": "initial_lr",
                 "end_lr": "max_lr", "start_momentum": "max_momentum",
                 "end_momentum": "base_momentum"},
                {"end_step": float(2 * pct_start * total) - 2, "start_lr": "max_lr",
                 "end_lr": "initial_lr", "start_momentum": "base_momentum",
                 "end_momentum": "max_momentum"},
                {"end_step": total - 1, "start_lr": "initial_lr", "end_lr": "min_lr",
                 "start_momentum": "max_momentum", "end_momentum": "max_momentum"},
            ]
        else:
            self._schedule_phases = [
                {"end_step": float(pct_start * total) - 1, "start_lr": "initial_lr",
                 "end_lr": "max_lr", "start_momentum": "max_momentum",
                 "end_momentum": "base_momentum"},
                {"end_step": total - 1, "start_lr": "max_lr", "end_lr": "min_lr",
                 "start_momentum": "base_momentum", "end_momentum": "max_momentum"},
            ]
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"OneCycleLR: Expected float between 0 and 1 pct_start, but got "
                             f"{pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be one of 'cos' or 'linear', "
                             f"instead got {anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        max_lrs = _per_group("OneCycleLR", "max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for lr, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = lr / div_factor
                group["max_lr"] = lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(f"OneCycleLR: optimizer must support momentum or beta1 with "
                                 f"`cycle_momentum` option enabled ({type(optimizer).__name__} "
                                 "has neither; pass cycle_momentum=False)")
            self.use_beta1 = "betas" in optimizer.defaults
            max_ms = _per_group("OneCycleLR", "max_momentum", optimizer, max_momentum)
            base_ms = _per_group("OneCycleLR", "base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for m_max, m_base, group in zip(max_ms, base_ms, optimizer.param_groups):
                    self._set_momentum(group, m_max)
                    group["max_momentum"] = m_max
                    group["base_momentum"] = m_base
        if last_epoch != -1:
            # Resuming: the bounds come from the optimizer's (loaded) groups.
            needed = ["initial_lr", "max_lr", "min_lr"] + (
                ["max_momentum", "base_momentum"] if cycle_momentum else [])
            for i, group in enumerate(optimizer.param_groups):
                missing = [k for k in needed if k not in group]
                if missing:
                    raise KeyError(f"OneCycleLR: param_groups[{i}] has no {missing} to resume "
                                   f"from (last_epoch={last_epoch}); load the optimizer's "
                                   "state dict first")
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def _at(self, step: int) -> tuple[list[float], list[float] | None]:
        """Every group's rate (and momentum, if cycled) at ``step``; past
        ``total_steps`` an error, as in PyTorch (step ``total_steps`` itself is allowed)."""
        if step > self.total_steps:
            raise _SteppedPastTheEnd(f"OneCycleLR: Tried to step {step} times. The specified "
                                     f"number of total steps is {self.total_steps}")
        start_step = 0.0
        last = len(self._schedule_phases) - 1
        for i, phase in enumerate(self._schedule_phases):
            end_step = phase["end_step"]
            if step <= end_step or i == last:
                break
            start_step = end_step
        if end_step == start_step:
            # PyTorch divides by zero here (ZeroDivisionError); say why instead.
            raise ValueError(f"OneCycleLR: phase {i + 1} of {last + 1} has no steps (it ends "
                             f"at step {end_step:g}, where the one before it starts), so step "
                             f"{step} cannot be placed in it; choose pct_start so that every "
                             f"phase spans steps of total_steps={self.total_steps}")
        pct = (step - start_step) / (end_step - start_step)
        groups = self.optimizer.param_groups
        lrs = [self._anneal(g[phase["start_lr"]], g[phase["end_lr"]], pct) for g in groups]
        moms = [self._anneal(g[phase["start_momentum"]], g[phase["end_momentum"]], pct)
                for g in groups] if self.cycle_momentum else None
        return lrs, moms

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the position in the schedule; the rates and momenta come back with
        the optimizer's state dict (``LRScheduler.load_state_dict``)."""
        self.__dict__.update(state)


class CyclicLR(_MomentumSchedule):
    """The cyclical learning rate policy (Smith 2017), PyTorch's schedule step by step.
    A cycle is ``step_size_up`` steps from ``base_lr`` up to ``max_lr`` and
    ``step_size_down`` (default: the same) back; at step ``n``, ``cycle = floor(1 + n /
    total)``, ``x = 1 + n / total - cycle``, the position ``x / ratio`` going up and
    ``(x - 1) / (ratio - 1)`` going down (``ratio = up / total``), and the rate
    ``base_lr + (max_lr - base_lr) * position * scale_fn(...)`` of the cycle number
    (``scale_mode='cycle'``) or of ``n`` (``'iterations'``). ``mode`` picks the scale:
    ``'triangular'`` 1, ``'triangular2'`` ``1 / 2 ** (cycle - 1)`` (the amplitude halves
    every cycle), ``'exp_range'`` ``gamma ** n``; a ``scale_fn`` replaces them (and
    ``mode``). With ``cycle_momentum`` the momentum (or ``betas[0]``) goes the other
    way, ``max_momentum - (max_momentum - base_momentum) * position * scale``.

    ``base_lr``, ``max_lr`` and the momenta are numbers or one per group. The rate and
    momentum are runtime inputs of the optimizers' steps: a cycling training loop
    compiles once. A custom ``scale_fn`` is not saved by ``state_dict`` (as
    ``LambdaLR``'s functions are not): the restoring scheduler is built with it.
    """

    _unsaved = _MomentumSchedule._unsaved + ("_scale_fn_custom",)

    def __init__(self, optimizer: Optimizer, base_lr: float | Sequence[float],
                 max_lr: float | Sequence[float], step_size_up: int = 2000,
                 step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn: Callable[[float], float] | None = None,
                 scale_mode: str = "cycle", cycle_momentum: bool = True,
                 base_momentum: float | Sequence[float] = 0.8,
                 max_momentum: float | Sequence[float] = 0.9, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"CyclicLR: expected an Optimizer, got {type(optimizer).__name__}")
        base_lrs = _per_group("CyclicLR", "base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                group["lr"] = lr
        self.max_lrs = _per_group("CyclicLR", "max_lr", optimizer, max_lr)
        # (PyTorch divides by zero on the first step when step_size_up is 0)
        if not step_size_up > 0 or (step_size_down is not None and not step_size_down >= 0):
            raise ValueError(f"CyclicLR: step_size_up must be > 0 and step_size_down >= 0, "
                             f"got {step_size_up} and {step_size_down}")
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError(f"CyclicLR: mode {mode!r} is invalid and scale_fn is None "
                             "(expected 'triangular', 'triangular2' or 'exp_range', or a "
                             "scale_fn)")
        if scale_mode not in ("cycle", "iterations"):
            raise ValueError(f"CyclicLR: scale_mode must be 'cycle' or 'iterations', got "
                             f"{scale_mode!r}")
        self.mode, self.gamma = mode, gamma
        self._scale_fn_custom = scale_fn
        # The built-in modes fix the scale mode, as in PyTorch (exp_range per iteration).
        if scale_fn is None:
            scale_mode = "iterations" if mode == "exp_range" else "cycle"
        self.scale_mode = scale_mode
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(f"CyclicLR: optimizer must support momentum or beta1 with "
                                 f"`cycle_momentum` option enabled ({type(optimizer).__name__} "
                                 "has neither; pass cycle_momentum=False)")
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = _per_group("CyclicLR", "base_momentum", optimizer,
                                             base_momentum)
            self.max_momentums = _per_group("CyclicLR", "max_momentum", optimizer,
                                            max_momentum)
            if last_epoch == -1:
                for m_max, m_base, group in zip(self.max_momentums, self.base_momentums,
                                                optimizer.param_groups):
                    self._set_momentum(group, m_max)
                    group["max_momentum"] = m_max
                    group["base_momentum"] = m_base
        self._attach(optimizer, last_epoch)
        self.base_lrs = base_lrs
        self.step()

    def scale_fn(self, x: float) -> float:
        """The amplitude's scale at ``x`` (a cycle number or a step, by ``scale_mode``)."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def _at(self, step: int) -> tuple[list[float], list[float] | None]:
        """Every group's rate (and momentum, if cycled) at ``step`` (PyTorch's
        expressions, in its order: the same rounding)."""
        cycle = math.floor(1 + step / self.total_size)
        x = 1.0 + step / self.total_size - cycle
        if x <= self.step_ratio:
            position = x / self.step_ratio
        else:
            position = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else step)
        lrs = [base + (top - base) * position * scale
               for base, top in zip(self.base_lrs, self.max_lrs)]
        moms = [top - (top - base) * position * scale
                for base, top in zip(self.base_momentums, self.max_momentums)
                ] if self.cycle_momentum else None
        return lrs, moms

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the position in the cycle; the rates and momenta come back with the
        optimizer's state dict (``LRScheduler.load_state_dict``)."""
        self.__dict__.update(state)


class ChainedScheduler(LRScheduler):
    """Step several schedulers of one optimizer together: ``step()`` steps each in
    turn, and each updates the rate the ones before it left, by PyTorch's recursive
    rule (``_chain_lr``): ``ConstantLR``, ``LinearLR``, ``StepLR``, ``MultiStepLR``,
    ``ExponentialLR``, ``PolynomialLR``, ``MultiplicativeLR`` and ``CosineAnnealingLR``
    scale it; ``LambdaLR``, ``CosineAnnealingWarmRestarts``, ``OneCycleLR`` and
    ``CyclicLR`` set it from their base rates. (Every scheduler steps by that rule,
    chained or not.)

    Building the schedulers one after another makes each write its own rate in Nova
    (PyTorch's constructors compose them), so when every scheduler is at epoch 0 the
    chain writes the composed starting rate. ``SequentialLR`` (which restarts its
    schedulers at milestones) and ``ReduceLROnPlateau`` (stepped with a metric) cannot
    be chained. The chain steps nothing of its own under ``nv.compile``: a replay
    re-runs each scheduler's step.
    """

    def __init__(self, schedulers: Sequence[LRScheduler], optimizer: Optimizer | None = None):
        schedulers = list(schedulers)
        if not schedulers:
            raise ValueError("ChainedScheduler expects at least one scheduler to be chained, "
                             "but got no scheduler.")
        optimizer = optimizer if optimizer is not None else schedulers[0].optimizer
        for i, s in enumerate(schedulers):
            if not isinstance(s, LRScheduler):
                raise TypeError(f"ChainedScheduler: the scheduler at index {i} is a "
                                f"{type(s).__name__}, not an LRScheduler")
            if isinstance(s, (ReduceLROnPlateau, SequentialLR, ChainedScheduler)):
                raise ValueError(f"ChainedScheduler: cannot chain the {type(s).__name__} at "
                                 f"index {i} (chainable: the epoch-driven schedulers)")
            if s.optimizer is not optimizer:
                raise ValueError(f"ChainedScheduler expects all schedulers to belong to the "
                                 f"same optimizer, but the {type(s).__name__} at index {i} "
                                 f"belongs to another {type(s.optimizer).__name__}")
        self.optimizer = optimizer
        self._schedulers = schedulers
        for s in schedulers:
            s._chained = s._in_chain = True
        if all(s.last_epoch == 0 for s in schedulers):
            lrs = [g["initial_lr"] for g in optimizer.param_groups]
            for s in schedulers:
                s._is_initial = True        # as in its constructor's step
                try:
                    lrs = s._chain_lr(lrs, 0)
                finally:
                    s._is_initial = False
                s._last_lr = list(lrs)
            for g, lr in zip(optimizer.param_groups, lrs):
                g["lr"] = lr

    def lr_at(self, epoch: int) -> list[float]:
        raise TypeError("ChainedScheduler: the rate is each step's composition of the "
                        "chained schedulers' updates, not a closed form of the epoch")

    def step(self) -> None:
        for s in self._schedulers:
            s.step()

    def get_last_lr(self) -> list[float]:
        """The rates the last step of the chain wrote (the last scheduler's)."""
        return self._schedulers[-1].get_last_lr()

    def state_dict(self) -> dict[str, Any]:
        """The chained schedulers' state dicts, in order (PyTorch's layout)."""
        return {"_schedulers": [s.state_dict() for s in self._schedulers]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore every chained scheduler (the rates come back with the optimizer's
        state dict, as in PyTorch)."""
        saved = state["_schedulers"]
        if len(saved) != len(self._schedulers):
            raise ValueError(f"ChainedScheduler.load_state_dict: the state has "
                             f"{len(saved)} schedulers, the chain {len(self._schedulers)}")
        for s, entry in zip(self._schedulers, saved):
            s.load_state_dict(entry)


__all__ = ["LRScheduler", "_LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR",
           "LinearLR", "ExponentialLR", "PolynomialLR", "CosineAnnealingLR",
           "CosineAnnealingWarmRestarts", "SequentialLR", "ChainedScheduler",
           "ReduceLROnPlateau", "OneCycleLR", "CyclicLR"]
