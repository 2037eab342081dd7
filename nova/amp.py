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

``GradScaler``: dynamic loss scaling for float16. ``scale(loss)`` multiplies by the
scale (a runtime tensor: a new scale compiles nothing), ``unscale_(opt)`` divides the
gradients in place and notes whether any is inf/NaN, ``step(opt)`` skips the update
when one was, and ``update()`` halves the scale then (doubles it after
``growth_interval`` clean steps). Deciding to skip reads one flag on the host, which
realizes the step there: under ``nv.compile`` a step with an enabled scaler runs
recorded (with the usual warning naming the read). ``enabled=False`` (what scripts pass
when they train in float32 or bfloat16) makes every method a pass-through.
"""
from __future__ import annotations

import math
import warnings
from typing import Any

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


def is_autocast_enabled() -> bool:
    return LOWER.get() is not None


def get_autocast_dtype(device_type: str = "cpu") -> dt.DType:
    state = LOWER.get()
    return _DEFAULT_DTYPE.get(device_type, dt.bfloat16) if state is None else state[0]


class GradScaler:
    """Dynamic loss scaling (``torch.amp.GradScaler``); see the module docstring."""

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True):
        if growth_factor <= 1.0 or not 0.0 < backoff_factor < 1.0 or growth_interval < 1:
            raise ValueError(f"GradScaler: growth_factor ({growth_factor}) must be > 1, "
                             f"backoff_factor ({backoff_factor}) in (0, 1), growth_interval "
                             f"({growth_interval}) >= 1")
        self.device = device
        self._enabled = bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor, self._backoff_factor = growth_factor, backoff_factor
        self._growth_interval = growth_interval
        self._growth_tracker = 0
        self._found_inf: dict[int, Tensor] = {}     # per optimizer, since its unscale_
        self._stepped_inf = False

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        return self._scale if self._enabled else 1.0

    def scale(self, outputs: Any) -> Any:
        """``outputs * scale`` (tensors, or lists/tuples of them)."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return ops.mul(outputs, tensor(self._scale, dtype=dt.float32))
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise TypeError(f"GradScaler.scale: expected a Tensor or a sequence of them, got "
                        f"{type(outputs).__name__}")

    def unscale_(self, optimizer: Any) -> None:
        """Divide ``optimizer``'s gradients by the scale, in place (once per step)."""
        if not self._enabled:
            return
        if id(optimizer) in self._found_inf:
            raise RuntimeError("GradScaler.unscale_: unscale_() has already been called on "
                               "this optimizer since the last update()")
        inv = tensor(1.0 / self._scale, dtype=dt.float32)
        bad = None
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.grad.mul_(inv.to(p.grad.dtype))
                    finite = ops.logical_not(ops.logical_or(ops.isnan(p.grad),
                                                            ops.isinf(p.grad)))
                    flag = ops.logical_not(ops.amin(finite)) if p.grad.numel() else None
                    if flag is not None:
                        bad = flag if bad is None else ops.logical_or(bad, flag)
        self._found_inf[id(optimizer)] = bad if bad is not None else tensor(False)

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """``optimizer.step()`` unless a gradient was inf/NaN (reads one flag)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if id(optimizer) not in self._found_inf:
            self.unscale_(optimizer)
        if bool(self._found_inf[id(optimizer)]):
            self._stepped_inf = True
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Back off after a skipped step, grow after ``growth_interval`` clean ones."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale)
        elif self._stepped_inf or any(bool(f) for f in self._found_inf.values()):
            self._scale *= self._backoff_factor
            self._growth_tracker = 0
        else:
            self._growth_tracker += 1
            if self._growth_tracker == self._growth_interval:
                self._scale *= self._growth_factor
                self._growth_tracker = 0
        if not math.isfinite(self._scale) or self._scale == 0.0:
            warnings.warn(f"GradScaler: the scale became {self._scale}", RuntimeWarning,
                          stacklevel=2)
        self._found_inf.clear()
        self._stepped_inf = False

    def state_dict(self) -> dict[str, Any]:
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not self._enabled:
            return
        if not state:
            raise RuntimeError("GradScaler.load_state_dict: the state dict is empty (it came "
                               "from a disabled scaler)")
        self._scale = float(state["scale"])
        self._growth_factor = float(state["growth_factor"])
        self._backoff_factor = float(state["backoff_factor"])
        self._growth_interval = int(state["growth_interval"])
        self._growth_tracker = int(state["_growth_tracker"])


__all__ = ["autocast", "GradScaler", "is_autocast_enabled", "get_autocast_dtype"]
