"""Mixed precision: ``nv.autocast`` (``nv.amp.autocast``) and ``nv.amp.GradScaler``, with
PyTorch's surface.

``autocast(device_type, dtype=None, enabled=True)``: inside the block, matmul-like ops
(``@``, ``F.linear``, convolutions, ``einsum``, attention's products) cast float32
operands to ``dtype`` (bfloat16 by default on the CPU, float16 on CUDA, as in PyTorch)
and produce it; the ops PyTorch runs in float32 under autocast raise half inputs to
float32, by PyTorch's per-device lists: the losses (cross_entropy, nll_loss, mse_loss,
l1_loss, smooth_l1_loss, huber_loss, the binary cross entropies) everywhere, softmax,
log_softmax, layer_norm, rms_norm, batch_norm and group_norm on CUDA only. Everything else follows the usual type promotion, so a half activation added
to a float32 residual is float32. The casts are recorded ops, so the backward is theirs:
gradients reach float32 parameters in float32. Nova stores half types and computes in
float32 (rounding each op's result), so a bfloat16 matmul is PyTorch's CPU bfloat16
matmul: half operands, float32 accumulation, a half result.

``is_autocast_enabled(device_type)`` (CUDA's without one), ``is_autocast_available``
and ``get_autocast_dtype`` answer per device type, as PyTorch's do.

``custom_fwd`` / ``custom_bwd`` (PyTorch's ``torch.amp.custom_fwd(fwd=None, *,
device_type, cast_inputs=None)`` and ``custom_bwd(bwd=None, *, device_type)``) decorate
an ``autograd.Function``'s ``forward`` and ``backward``: ``forward`` notes on ``ctx``
whether autocast of ``device_type`` was on and its dtype; with ``cast_inputs`` inside an
enabled block, its floating-point tensor arguments of that device type (not float64)
are cast to ``cast_inputs`` and it runs with autocast off; ``backward`` runs with the
autocast state ``forward`` ran with, wherever ``.backward()`` is called.

``GradScaler``: dynamic loss scaling for float16. ``scale(loss)`` multiplies by the
scale (a runtime tensor: a new scale compiles nothing), ``unscale_(opt)`` divides the
gradients in place and notes whether any is inf/NaN, ``step(opt)`` skips the update
when one was, and ``update()`` halves the scale then (doubles it after
``growth_interval`` clean steps), in PyTorch's float32 arithmetic. Calls out of
PyTorch's order raise its errors (``step`` twice or ``unscale_`` after it before
``update``, ``update`` with no step or unscale since the last one, any of them before a
first ``scale``). Deciding to skip reads one flag on the host, which
realizes the step there: under ``nv.compile`` a step with an enabled scaler runs
recorded (with the usual warning naming the read). ``enabled=False`` (what scripts pass
when they train in float32 or bfloat16) makes every method a pass-through.
"""
from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.tensor import ops
from nova.tensor.autocast_state import LOWER
from nova.tensor.creation import tensor
from nova.tensor.grad_mode import no_grad
from nova.tensor.tensor import Tensor

_DEFAULT_DTYPE = {"cpu": dt.bfloat16, "cuda": dt.float16}


class autocast:
    """Context manager and decorator (``torch.autocast``); see the module docstring."""

    def __init__(self, device_type: str = "cuda", dtype: Any = None, enabled: bool = True,
                 cache_enabled: bool | None = None):
        if device_type not in _DEFAULT_DTYPE:
            raise ValueError(f"autocast: device_type must be 'cpu' or 'cuda', got "
                             f"{device_type!r}")
        self.device_type = device_type
        self.fast_dtype = _DEFAULT_DTYPE[device_type] if dtype is None else dt.get_dtype(dtype)
        if self.fast_dtype not in (dt.bfloat16, dt.float16):
            raise ValueError(f"autocast: dtype must be bfloat16 or float16, got "
                             f"{self.fast_dtype.name}")
        self.enabled = bool(enabled)
        self._tokens: list[Any] = []

    def __enter__(self) -> autocast:
        self._tokens.append(LOWER.set((self.fast_dtype, self.device_type) if self.enabled
                                      else None))
        return self

    def __exit__(self, *exc: Any) -> None:
        LOWER.reset(self._tokens.pop())

    def __call__(self, fn: Any) -> Any:
        import functools

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with autocast(self.device_type, self.fast_dtype, self.enabled):
                return fn(*args, **kwargs)
        return wrapper


# PyTorch's device types: ``is_autocast_enabled`` of one Nova has no autocast for is
# False, an unknown name an error, as in PyTorch.
_TORCH_DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep",
                       "hip", "ve", "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta",
                       "hpu", "mtia", "privateuseone")


def _device_type(op: str, device_type: Any) -> str:
    if not isinstance(device_type, str):
        raise TypeError(f"{op}: device_type must be a str such as 'cpu' or 'cuda', got "
                        f"{type(device_type).__name__}")
    kind = device_type.split(":")[0]           # "cuda:0" names its type, as in PyTorch
    if kind not in _TORCH_DEVICE_TYPES:
        raise RuntimeError(f"{op}: Expected one of {', '.join(_TORCH_DEVICE_TYPES)} device "
                           f"type at start of device string: {device_type}")
    return kind


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether an enabled ``autocast`` block of ``device_type`` is open
    (``torch.is_autocast_enabled``); without an argument, CUDA's, as PyTorch's legacy
    form answers."""
    device = "cuda" if device_type is None else _device_type("is_autocast_enabled",
                                                              device_type)
    state = LOWER.get()
    return state is not None and state[1] == device


def is_autocast_available(device_type: str) -> bool:
    """Whether ``autocast`` supports ``device_type`` (``torch.amp.is_autocast_available``)."""
    return _device_type("is_autocast_available", device_type) in _DEFAULT_DTYPE


def get_autocast_dtype(device_type: str = "cpu") -> dt.DType:
    """The dtype ``autocast`` of ``device_type`` lowers to: the open block's if it is of
    that device, else the device's default (``torch.get_autocast_dtype``)."""
    device = _device_type("get_autocast_dtype", device_type)
    state = LOWER.get()
    if state is not None and state[1] == device:
        return state[0]
    return _DEFAULT_DTYPE.get(device, dt.bfloat16)


def _check_device_type(device_type: Any) -> None:
    """PyTorch's check of ``custom_fwd``'s and ``custom_bwd``'s ``device_type``."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")


def _cast(value: Any, device_type: str, dtype: dt.DType) -> Any:
    """``value`` with its floating-point tensors of ``device_type`` (float64 excepted)
    cast to ``dtype``, through lists, tuples, dicts and other iterables, as PyTorch's
    ``torch.amp.autocast_mode._cast``; strings, bytes and numpy arrays as they are."""
    if isinstance(value, Tensor):
        eligible = (value.is_floating_point() and value.device.type == device_type
                    and value.dtype != dt.float64)
        return value.to(dtype) if eligible else value
    if isinstance(value, (str, bytes, np.ndarray)):
        return value
    if isinstance(value, Mapping):
        return {_cast(k, device_type, dtype): _cast(v, device_type, dtype)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, device_type, dtype) for v in value)
    if hasattr(value, "__iter__"):
        return (_cast(v, device_type, dtype) for v in value)
    return value


@contextmanager
def _autocast_state(device_type: str, enabled: bool, dtype: Any) -> Iterator[None]:
    """Autocast of ``device_type`` on (in ``dtype``) or off for the block, as
    ``torch.autocast(device_type, enabled=..., dtype=...)``: turning it off leaves an
    open block of another device type alone (PyTorch's state is per device type)."""
    if enabled:
        with autocast(device_type, dtype):
            yield
        return
    state = LOWER.get()
    token = LOWER.set(None if state is not None and state[1] == device_type else state)
    try:
        yield
    finally:
        LOWER.reset(token)


def custom_fwd(fwd: Callable[..., Any] | None = None, *, device_type: str,
               cast_inputs: Any = None) -> Callable[..., Any]:
    """Decorator of a custom ``autograd.Function``'s ``forward`` (``torch.amp.custom_fwd``):
    notes the autocast state of ``device_type`` on ``ctx`` for ``custom_bwd``; with
    ``cast_inputs``, inside an enabled autocast block, casts the floating-point tensor
    arguments to it and runs ``forward`` with autocast off (outside a block it is a
    no-op). Usable bare with keywords: ``@custom_fwd(device_type="cuda")``."""
    _check_device_type(device_type)
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    target = None if cast_inputs is None else dt.get_dtype(cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args: Any, **kwargs: Any) -> Any:
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        enabled = is_autocast_enabled(device_type)
        if target is None:
            ctx._fwd_used_autocast = enabled
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False
        if not enabled:
            return fwd(*args, **kwargs)
        with _autocast_state(device_type, False, None):
            return fwd(*_cast(args, device_type, target), **_cast(kwargs, device_type, target))
    return decorate_fwd


def custom_bwd(bwd: Callable[..., Any] | None = None, *, device_type: str
               ) -> Callable[..., Any]:
    """Decorator of a custom ``autograd.Function``'s ``backward`` (``torch.amp.custom_bwd``):
    it runs with the autocast state its ``forward`` (decorated by ``custom_fwd``) ran
    with."""
    _check_device_type(device_type)
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args: Any, **kwargs: Any) -> Any:
        ctx = args[0]
        with _autocast_state(device_type, ctx._fwd_used_autocast, ctx._dtype):
            return bwd(*args, **kwargs)
    return decorate_bwd


def _cuda_custom_fwd(fwd: Callable[..., Any] | None = None, *, cast_inputs: Any = None
                     ) -> Callable[..., Any]:
    """``nv.cuda.amp.custom_fwd``: PyTorch's deprecated spelling of
    ``custom_fwd(..., device_type="cuda")``, with its ``FutureWarning``."""
    warnings.warn("`nv.cuda.amp.custom_fwd(args...)` is deprecated. Please use "
                  "`nv.amp.custom_fwd(args..., device_type='cuda')` instead.",
                  FutureWarning, stacklevel=2)
    return custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def _cuda_custom_bwd(bwd: Callable[..., Any]) -> Callable[..., Any]:
    """``nv.cuda.amp.custom_bwd``: PyTorch's deprecated spelling of
    ``custom_bwd(..., device_type="cuda")``, with its ``FutureWarning``."""
    warnings.warn("`nv.cuda.amp.custom_bwd(args...)` is deprecated. Please use "
                  "`nv.amp.custom_bwd(args..., device_type='cuda')` instead.",
                  FutureWarning, stacklevel=2)
    return custom_bwd(bwd, device_type="cuda")


class _ScalerStateError(RuntimeError, AssertionError):
    """A ``GradScaler`` call out of order where PyTorch raises ``AssertionError`` (with
    the same message): a ``RuntimeError`` as Nova's errors are, and an
    ``AssertionError`` for code written against PyTorch that catches that."""


_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"   # PyTorch's OptState
_NO_SCALE_FIX = ("This may indicate your script did not use scaler.scale(loss or outputs) "
                 "earlier in the iteration.")


class GradScaler:
    """Dynamic loss scaling (``torch.amp.GradScaler``); see the module docstring.

    The order of calls is PyTorch's, and so are the errors for calls out of it: per
    optimizer and iteration ``unscale_`` at most once and before ``step``, ``step`` at
    most once, ``update`` after the iteration's steps (or unscales), and all of them
    after a ``scale`` (which fixes the scale, rounded to float32 as PyTorch stores it).
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True):
        self.device = device
        self._enabled = bool(enabled)
        if self._enabled:
            if growth_factor <= 1.0:
                raise _ScalerStateError(f"The growth factor must be > 1.0. (GradScaler got "
                                        f"growth_factor={growth_factor})")
            if backoff_factor >= 1.0:
                raise _ScalerStateError(f"The backoff factor must be < 1.0. (GradScaler got "
                                        f"backoff_factor={backoff_factor})")
        self._init_scale = float(init_scale)
        self._scale: float | None = None        # set by the first scale(), as PyTorch's
        self._growth_factor, self._backoff_factor = growth_factor, backoff_factor
        self._growth_interval = growth_interval
        self._init_growth_tracker = 0
        self._growth_tracker: int | None = None
        # per optimizer (by id) this iteration: its stage and its inf/NaN flag
        self._per_optimizer_states: dict[int, dict[str, Any]] = {}

    def _opt_state(self, optimizer: Any) -> dict[str, Any]:
        return self._per_optimizer_states.setdefault(id(optimizer),
                                                     {"stage": _READY, "found_inf": None})

    def _check_scale(self, funcname: str) -> None:
        if self._scale is None:
            raise _ScalerStateError(f"Attempted {funcname} but _scale is None.  "
                                    + _NO_SCALE_FIX)

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        """The current scale (``init_scale`` before the first ``scale``); 1.0 when
        disabled."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else \
            self._growth_tracker

    def scale(self, outputs: Any) -> Any:
        """``outputs * scale`` (a tensor, or an iterable of them: lists and tuples keep
        their type)."""
        if not self._enabled:
            return outputs
        if self._scale is None:
            self._scale = _f32(self._init_scale)
            self._growth_tracker = self._init_growth_tracker
        if isinstance(outputs, Tensor):
            return ops.mul(outputs, tensor(self._scale, dtype=dt.float32))
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if hasattr(outputs, "__iter__") and not isinstance(outputs, (str, bytes)):
            return map(self.scale, outputs)
        raise ValueError(f"outputs must be a Tensor or an iterable of Tensors (GradScaler."
                         f"scale got {type(outputs).__name__})")

    def unscale_(self, optimizer: Any) -> None:
        """Divide ``optimizer``'s gradients by the scale, in place (once per iteration,
        before ``step``), and note whether any is inf/NaN."""
        if not self._enabled:
            return
        self._check_scale("unscale_")
        state = self._opt_state(optimizer)
        if state["stage"] == _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since "
                               "the last update().")
        if state["stage"] == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        state["found_inf"] = self._unscale_grads(optimizer)
        state["stage"] = _UNSCALED

    def _unscale_grads(self, optimizer: Any) -> Tensor | None:
        """Unscale every gradient; the "any inf/NaN" flag (None: no gradients)."""
        inv = tensor(1.0 / self._scale, dtype=dt.float32)
        bad = None
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    if p.grad.dtype == dt.float16:
                        raise ValueError("Attempting to unscale FP16 gradients. (GradScaler "
                                         "unscales float32 gradients: keep the parameters "
                                         "in float32 and let autocast lower the compute)")
                    p.grad.mul_(inv.to(p.grad.dtype))
                    finite = ops.logical_not(ops.logical_or(ops.isnan(p.grad),
                                                            ops.isinf(p.grad)))
                    flag = ops.logical_not(ops.amin(finite)) if p.grad.numel() else \
                        tensor(False)
                    bad = flag if bad is None else ops.logical_or(bad, flag)
        return bad

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """``optimizer.step()`` unless a gradient was inf/NaN (reads one flag); once
        per optimizer and iteration."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        self._check_scale("step")
        state = self._opt_state(optimizer)
        if state["stage"] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] == _READY:
            self.unscale_(optimizer)
        if state["found_inf"] is None:
            raise _ScalerStateError("No inf checks were recorded for this optimizer. (none "
                                    "of its parameters has a gradient)")
        found = bool(state["found_inf"])
        state["found_inf"] = found              # read once; update() reuses it
        retval = None if found else optimizer.step(*args, **kwargs)
        state["stage"] = _STEPPED
        return retval

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Back off after an iteration with an inf/NaN gradient, grow after
        ``growth_interval`` clean ones (a growth to inf is not taken), or set
        ``new_scale``; then start the next iteration."""
        if not self._enabled:
            return
        self._check_scale("update")
        if new_scale is not None:
            self._scale = _f32(self._new_scale_value(new_scale))
        else:
            found = [st["found_inf"] for st in self._per_optimizer_states.values()
                     if st["found_inf"] is not None]
            if not found:
                raise _ScalerStateError("No inf checks were recorded prior to update.")
            self._update_scale(any(bool(f) for f in found))
        self._per_optimizer_states = {}

    @staticmethod
    def _new_scale_value(new_scale: float | Tensor) -> float:
        if isinstance(new_scale, Tensor):
            if new_scale.numel() != 1 or new_scale.requires_grad:
                raise _ScalerStateError(
                    "new_scale should be a float or a 1-element torch.cuda.FloatTensor or "
                    "torch.FloatTensor with requires_grad=False. (GradScaler.update got "
                    f"shape {new_scale.shape}, requires_grad={new_scale.requires_grad})")
            return float(new_scale.item())
        return float(new_scale)

    def _update_scale(self, found_inf: bool) -> None:
        """PyTorch's ``_amp_update_scale_``: the float32 scale times a factor (in
        double, rounded to float32)."""
        if found_inf:
            self._scale = _f32(self._scale * self._backoff_factor)
            self._growth_tracker = 0
            return
        successful = self._growth_tracker + 1
        if successful == self._growth_interval:
            grown = _f32(self._scale * self._growth_factor)
            if math.isfinite(grown):
                self._scale = grown
            self._growth_tracker = 0
        else:
            self._growth_tracker = successful

    def state_dict(self) -> dict[str, Any]:
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not self._enabled:
            return
        if not state:
            raise RuntimeError("The source state dict is empty, possibly because it was "
                               "saved from a disabled instance of GradScaler.")
        self._init_scale = float(state["scale"])
        if self._scale is not None:
            self._scale = _f32(state["scale"])
        self._growth_factor = float(state["growth_factor"])
        self._backoff_factor = float(state["backoff_factor"])
        self._growth_interval = int(state["growth_interval"])
        self._init_growth_tracker = int(state["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker = self._init_growth_tracker

    def __getstate__(self) -> dict[str, Any]:
        if self._enabled and self._per_optimizer_states:
            raise _ScalerStateError("A GradScaler instance may only be pickled at the "
                                    "beginning of an iteration, or at the end after "
                                    "scaler.update().")
        return self.__dict__.copy()


def _f32(x: float) -> float:
    """``x`` rounded to float32 (PyTorch keeps the scale in a float32 tensor); beyond
    its range, inf."""
    with np.errstate(over="ignore"):
        return float(np.float32(x))


__all__ = ["autocast", "GradScaler", "is_autocast_enabled", "is_autocast_available",
           "get_autocast_dtype", "custom_fwd", "custom_bwd"]


def legacy_amp(device_type: str, dtype: dt.DType) -> Any:
    """``torch.<device_type>.amp``: ``autocast(enabled=True, dtype=..., cache_enabled=True)``
    and ``GradScaler(init_scale=2**16, ...)`` under PyTorch's older signatures (no device
    argument), which scripts written for PyTorch < 2.4 still call; as PyTorch's, each
    warns (FutureWarning) that ``nova.amp.autocast('<device_type>', ...)`` /
    ``nova.amp.GradScaler('<device_type>', ...)`` are the current spelling."""
    import types

    def deprecated(what: str) -> None:
        warnings.warn(f"`nova.{device_type}.amp.{what}(args...)` is deprecated. Please use "
                      f"`nova.amp.{what}('{device_type}', args...)` instead.", FutureWarning,
                      stacklevel=3)

    default_dtype = dtype

    class LegacyAutocast(autocast):
        def __init__(self, enabled: bool = True, dtype: Any = default_dtype,
                     cache_enabled: bool = True) -> None:
            deprecated("autocast")
            super().__init__(device_type, dtype=dtype, enabled=enabled,
                             cache_enabled=cache_enabled)

    class LegacyGradScaler(GradScaler):
        def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                     backoff_factor: float = 0.5, growth_interval: int = 2000,
                     enabled: bool = True) -> None:
            deprecated("GradScaler")
            super().__init__(device_type, init_scale=init_scale, growth_factor=growth_factor,
                             backoff_factor=backoff_factor, growth_interval=growth_interval,
                             enabled=enabled)

    LegacyAutocast.__name__ = LegacyAutocast.__qualname__ = "autocast"
    LegacyGradScaler.__name__ = LegacyGradScaler.__qualname__ = "GradScaler"
    return types.SimpleNamespace(autocast=LegacyAutocast, GradScaler=LegacyGradScaler)
