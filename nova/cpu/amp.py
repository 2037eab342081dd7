"""``nova.cpu.amp``: PyTorch's older AMP spelling for the CPU (``from torch.cpu.amp
import autocast``): ``autocast(enabled=True, dtype=bfloat16, cache_enabled=True)`` and
``GradScaler(init_scale=2**16, ...)`` under those positional signatures, which are
``nova.amp.autocast('cpu', ...)`` / ``nova.amp.GradScaler('cpu', ...)`` underneath and
warn (FutureWarning) as PyTorch's do."""
from __future__ import annotations

from nova import amp as _amp
from nova.core import dtypes as _dt

_legacy = _amp.legacy_amp("cpu", _dt.bfloat16)
autocast = _legacy.autocast
GradScaler = _legacy.GradScaler

__all__ = ["GradScaler", "autocast"]
