"""Learning-rate schedules. Each epoch-driven scheduler has a closed form
``lr_at(epoch)``, so ``SequentialLR`` composes them exactly and the values are easy to
test; ``step()`` writes the new rate into the optimizer's groups, from where it enters
the next step as a runtime input (no recompile). ``OneCycleLR`` also writes the
momentum (SGD's and RMSprop's ``momentum``, Adam's ``betas[0]``), a runtime input too.
``ReduceLROnPlateau`` is driven by a metric instead of a closed form."""
from __future__ import annotations

import bisect
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, SupportsFloat

from nova.capture import _Rerecord
from nova.optim.optimizer import Optimizer
from nova.tensor import capture_log


class LRScheduler:
    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__}: expected an Optimizer, got "
                            f"{type(optimizer).__name__}")
        self.optimizer = optimizer
        for g in optimizer.param_groups:
            g.setdefault("initial_lr", g["lr"])
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def lr_at(self, epoch: int) -> list[float]:
        raise NotImplementedError

    def step(self) -> None:
        capture_log.action("sched_step", self)
        self.last_epoch += 1
        self._last_lr = self.lr_at(self.last_epoch)
        for g, lr in zip(self.optimizer.param_groups, self._last_lr):
            g["lr"] = lr

    def get_last_lr(self) -> list[float]:
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()
                if k not in ("optimizer", "lr_lambdas", "schedulers")}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._last_lr = self.lr_at(self.last_epoch)
        for g, lr in zip(self.optimizer.param_groups, self._last_lr):
            g["lr"] = lr


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


class StepLR(LRScheduler):
    """``base_lr * gamma ** (epoch // step_size)``."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1):
        if step_size <= 0:
            raise ValueError(f"StepLR: step_size must be positive, got {step_size}")
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        return [base * self.gamma ** (epoch // self.step_size) for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """``eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2``."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,
                 last_epoch: int = -1):
        if T_max <= 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be positive, got {T_max}")
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        c = (1 + math.cos(math.pi * epoch / self.T_max)) / 2
        return [self.eta_min + (base - self.eta_min) * c for base in self.base_lrs]


class LinearLR(LRScheduler):
    """Factor moving linearly from ``start_factor`` to ``end_factor`` over
    ``total_iters`` epochs, then constant."""

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3,
                 end_factor: float = 1.0, total_iters: int = 5, last_epoch: int = -1):
        if not (0 < start_factor <= 1 and 0 <= end_factor <= 1) or total_iters < 1:
            raise ValueError(f"LinearLR: need 0 < start_factor <= 1, 0 <= end_factor <= 1 and "
                             f"total_iters >= 1, got {start_factor}, {end_factor}, {total_iters}")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        frac = min(epoch, self.total_iters) / self.total_iters
        factor = self.start_factor + (self.end_factor - self.start_factor) * frac
        return [base * factor for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """``base_lr * gamma ** epoch``."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        return [base * self.gamma ** epoch for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """``base_lr * gamma ** (milestones passed)``; a milestone listed twice counts twice,
    as in PyTorch."""

    def __init__(self, optimizer: Optimizer, milestones: Sequence[int], gamma: float = 0.1,
                 last_epoch: int = -1):
        self.milestones, self.gamma = sorted(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        return [base * self.gamma ** bisect.bisect_right(self.milestones, epoch)
                for base in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing restarted every ``T_i`` epochs, ``T_0`` first, each period
    ``T_mult`` times the last: ``eta_min + (base - eta_min)(1 + cos(pi T_cur / T_i)) / 2``
    (SGDR; the closed form of PyTorch's integer-epoch schedule)."""

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0,
                 last_epoch: int = -1):
        if T_0 <= 0 or not isinstance(T_0, int) or T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"CosineAnnealingWarmRestarts: T_0 must be a positive int and "
                             f"T_mult an int >= 1, got {T_0} and {T_mult}")
        self.T_0, self.T_mult, self.eta_min = T_0, T_mult, eta_min
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        if self.T_mult == 1:
            t_cur, t_i = epoch % self.T_0, self.T_0
        else:
            n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
            t_cur = epoch - self.T_0 * (self.T_mult ** n - 1) // (self.T_mult - 1)
            t_i = self.T_0 * self.T_mult ** n
            if t_cur >= t_i:            # float log landed one period short
                t_cur, t_i = t_cur - t_i, t_i * self.T_mult
        c = (1 + math.cos(math.pi * t_cur / t_i)) / 2
        return [self.eta_min + (base - self.eta_min) * c for base in self.base_lrs]


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
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch: int) -> list[float]:
        i = bisect.bisect_right(self.milestones, epoch)
        start = self.milestones[i - 1] if i else 0
        return self.schedulers[i].lr_at(epoch - start)


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


class OneCycleLR(LRScheduler):
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

    def _set_momentum(self, group: dict[str, Any], value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

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

    def lr_at(self, epoch: int) -> list[float]:
        return self._at(epoch)[0]

    def momentum_at(self, epoch: int) -> list[float] | None:
        """Every group's momentum (or ``betas[0]``) at ``epoch``; None without cycling."""
        return self._at(epoch)[1]

    def step(self) -> None:
        """Advance one training step: the rate and (with ``cycle_momentum``) the momentum
        of the next optimizer step. Raises ``ValueError`` past ``total_steps``, with
        ``last_epoch`` already advanced, as PyTorch does."""
        capture_log.action("sched_step", self)
        self.last_epoch += 1
        lrs, moms = self._at(self.last_epoch)
        self._write(lrs, moms)

    def _write(self, lrs: list[float], moms: list[float] | None) -> None:
        for i, group in enumerate(self.optimizer.param_groups):
            group["lr"] = lrs[i]
            if moms is not None:
                self._set_momentum(group, moms[i])
        self._last_lr = list(lrs)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the position in the schedule and write its rate and momentum into
        the groups (as the other schedulers write their rate). A state saved after a
        step past the end leaves the groups as they are."""
        self.__dict__.update(state)
        if self.last_epoch <= self.total_steps:
            self._write(*self._at(self.last_epoch))


__all__ = ["LRScheduler", "LambdaLR", "StepLR", "CosineAnnealingLR", "LinearLR", "SequentialLR",
           "ExponentialLR", "MultiStepLR", "CosineAnnealingWarmRestarts", "ReduceLROnPlateau",
           "OneCycleLR"]
