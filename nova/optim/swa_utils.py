"""Stochastic Weight Averaging and EMA (``torch.optim.swa_utils``): ``AveragedModel``
keeps a copy of a model whose parameters are a running average of the model's,
``SWALR`` anneals the learning rate to a constant one for the SWA phase, and
``update_bn`` recomputes the BatchNorm statistics of the averaged weights.

The averages are PyTorch's: SWA ``avg + (p - avg) / (n + 1)`` (on a CUDA device, as
PyTorch's foreach path, ``avg.lerp_(p, 1 / (n + 1))``), EMA ``avg.lerp_(p, 1 - decay)``
for floating-point tensors (``get_ema_multi_avg_fn``) or ``decay * avg + (1 - decay) *
p`` (``get_ema_avg_fn``); the first ``update_parameters`` copies the model. The
updates are in-place tensor ops like any other, realized with the next step.
"""
from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from nova.autograd.grad_mode import no_grad
from nova.core import dtypes as dt
from nova.nn.module import Module
from nova.nn.normalization import _BatchNorm
from nova.optim.lr_scheduler import LRScheduler, _per_group, _warn_get_lr_called_within_step
from nova.optim.optimizer import Optimizer
from nova.tensor.creation import tensor
from nova.tensor.tensor import Tensor

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn",
           "get_swa_multi_avg_fn", "get_ema_avg_fn", "get_swa_avg_fn"]

ParamList = Sequence[Tensor]


def _check_decay(decay: float) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         "[0,1] range.")


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable[[ParamList, ParamList, Any], None]:
    """The in-place EMA ``avg = decay * avg + (1 - decay) * p`` over lists of tensors
    (``AveragedModel(multi_avg_fn=...)``): ``avg.lerp_(p, 1 - decay)`` for floating
    tensors, as PyTorch's ``_foreach_lerp_``."""
    _check_decay(decay)

    def ema_update(ema_params: ParamList, current: ParamList, _: Any) -> None:
        with no_grad():
            if ema_params and ema_params[0].dtype.is_floating_point:
                for e, p in zip(ema_params, current):
                    e.lerp_(p, 1 - decay)
            else:
                for e, p in zip(ema_params, current):
                    e.copy_(e * decay + p * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn() -> Callable[[ParamList, ParamList, Any], None]:
    """The in-place equal-weight average over lists of tensors: ``avg.lerp_(p, 1 / (n +
    1))`` for floating tensors, ``avg += (p - avg) / (n + 1)`` otherwise."""
    def swa_update(averaged: ParamList, current: ParamList, num_averaged: Any) -> None:
        with no_grad():
            if averaged and averaged[0].dtype.is_floating_point:
                for a, p in zip(averaged, current):
                    a.lerp_(p, 1 / (num_averaged + 1))
            else:
                for a, p in zip(averaged, current):
                    diff = p - a
                    if isinstance(num_averaged, Tensor):
                        a.addcdiv_(diff, num_averaged + 1)
                    else:
                        a.add_(diff, alpha=1.0 / (num_averaged + 1))
    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable[[Tensor, Tensor, Any], Tensor]:
    """The EMA of one tensor: ``decay * avg + (1 - decay) * p``."""
    _check_decay(decay)

    def ema_update(ema_param: Tensor, current: Tensor, num_averaged: Any) -> Tensor:
        with no_grad():
            return decay * ema_param + (1 - decay) * current
    return ema_update


def get_swa_avg_fn() -> Callable[[Tensor, Tensor, Any], Tensor]:
    """The equal-weight average of one tensor: ``avg + (p - avg) / (n + 1)``."""
    def swa_update(averaged: Tensor, current: Tensor, num_averaged: Any) -> Tensor:
        with no_grad():
            return averaged + (current - averaged) / (num_averaged + 1)
    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` (on ``device`` if given) whose parameters -- and buffers,
    with ``use_buffers`` -- ``update_parameters(model)`` averages with the model's:
    ``avg_fn(avg, p, n)`` returning the new value, or ``multi_avg_fn(avgs, ps, n)``
    updating lists in place (one call per device and dtype), or by default the equal
    average. ``n_averaged`` (a buffer: ``state_dict`` holds ``n_averaged`` and the copy's
    ``module.*`` entries) counts the updates; the first copies the model. Without
    ``use_buffers`` the buffers are copied from the model at every update. Calling it
    runs the copy."""

    def __init__(self, model: Module, device: Any = None,
                 avg_fn: Callable[[Tensor, Tensor, Any], Tensor] | None = None,
                 multi_avg_fn: Callable[[ParamList, ParamList, Any], None] | None = None,
                 use_buffers: bool = False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=dt.int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        """Average ``model``'s parameters (and buffers, with ``use_buffers``) into the
        copy's, in order; copy them on the first call."""
        mine = itertools.chain(self.module.parameters(), self.module.buffers()) \
            if self.use_buffers else self.parameters()
        theirs = itertools.chain(model.parameters(), model.buffers()) \
            if self.use_buffers else model.parameters()
        averaged: list[Tensor] = []
        current: list[Tensor] = []
        first = bool(self.n_averaged == 0)
        with no_grad():
            for a, p in zip(mine, theirs):
                p = p.detach().to(a.device)
                averaged.append(a.detach())
                current.append(p)
                if first:
                    a.detach().copy_(p)
            if not first:
                self._average(averaged, current)
            if not self.use_buffers:
                for b_avg, b_model in zip(self.module.buffers(), model.buffers()):
                    b_avg.detach().copy_(b_model.detach().to(b_avg.device))
            self.n_averaged += 1

    def _average(self, averaged: list[Tensor], current: list[Tensor]) -> None:
        """One averaging step of ``averaged`` toward ``current`` (PyTorch's choice of
        function: ``avg_fn`` per tensor, else ``multi_avg_fn`` -- or the SWA default --
        per device and dtype)."""
        if self.avg_fn is not None and self.multi_avg_fn is None:
            for a, p in zip(averaged, current):
                a.copy_(self.avg_fn(a, p, self.n_averaged.to(a.device)))
            return
        groups: dict[tuple[Any, str], tuple[list[Tensor], list[Tensor]]] = {}
        for a, p in zip(averaged, current):
            mine, theirs = groups.setdefault((a.device, a.dtype.name), ([], []))
            mine.append(a)
            theirs.append(p)
        for (device, _), (mine, theirs) in groups.items():
            n = self.n_averaged.to(device)
            if self.multi_avg_fn is not None:
                self.multi_avg_fn(mine, theirs, n)
            elif getattr(device, "type", device) == "cuda":
                get_swa_multi_avg_fn()(mine, theirs, n)
            else:
                swa = get_swa_avg_fn()
                for a, p in zip(mine, theirs):
                    a.copy_(swa(a, p, n))


def update_bn(loader: Iterable[Any], model: Module, device: Any = None) -> None:
    """Recompute the running statistics of ``model``'s BatchNorm layers over one pass of
    ``loader`` (a batch: a tensor, or a list or tuple whose first item is the input),
    as a cumulative average (``momentum=None`` during the pass), in training mode;
    the layers' momenta and the model's mode are restored after."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with no_grad():
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's rate to ``swa_lr`` (a number, or one per group) over
    ``anneal_epochs`` epochs, by cosine (``anneal_strategy='cos'``) or linearly, then
    hold it (PyTorch's ``SWALR``): at step ``s`` (``_step_count - 1``), with ``t(s) =
    clamp(s / max(1, anneal_epochs), 0, 1)`` and ``alpha = anneal(t)``, the rate is
    ``swa_lr * alpha + lr0 * (1 - alpha)``, where ``lr0`` is recovered from the current
    rate and the previous step's ``alpha`` -- so it continues from whatever rate the
    groups had when the SWA phase began. ``swa_lr`` lives in the groups."""

    def __init__(self, optimizer: Optimizer, swa_lr: float | Sequence[float],
                 anneal_epochs: int = 10, anneal_strategy: str = "cos",
                 last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"SWALR: expected an Optimizer, got {type(optimizer).__name__}")
        for lr, group in zip(_per_group("SWALR", "swa_lr", optimizer, swa_lr),
                             optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t: float) -> float:
        return t

    @staticmethod
    def _cosine_anneal(t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy: str) -> None:
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" \
            else self._linear_anneal

    def get_lr(self) -> list[float]:
        """The rates of this step (PyTorch's expressions; it warns outside ``step()``)."""
        _warn_get_lr_called_within_step(self)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        groups = self.optimizer.param_groups
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, prev_lrs)]

    def state_dict(self) -> dict[str, Any]:
        """The attributes, less the optimizer and the annealing function (PyTorch's)."""
        return {k: v for k, v in super().state_dict().items() if k != "anneal_func"}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the attributes (the rates come back with the optimizer's state)."""
        self.__dict__.update(state)
        self._set_anneal_func(self._anneal_strategy)
