"""Learning-rate schedules. Each scheduler has a closed form ``lr_at(epoch)``, so
``SequentialLR`` composes them exactly and the values are easy to test; ``step()``
writes the new rate into the optimizer's groups, from where it enters the next step as
a runtime input (no recompile)."""
from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from typing import Any

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


__all__ = ["LRScheduler", "LambdaLR", "StepLR", "CosineAnnealingLR", "LinearLR", "SequentialLR",
           "ExponentialLR", "MultiStepLR", "CosineAnnealingWarmRestarts"]
