"""``nova.cuda.amp``: PyTorch's older AMP spelling (``from torch.cuda.amp import
autocast, GradScaler``), which training scripts written for PyTorch < 2.4 still use.

``autocast(enabled=True, dtype=float16, cache_enabled=True)`` and
``GradScaler(init_scale=2**16, ...)`` keep those older positional signatures and are
``nova.amp.autocast('cuda', ...)`` / ``nova.amp.GradScaler('cuda', ...)`` underneath;
as PyTorch's, constructing one warns (FutureWarning) that those are the current
spelling. ``custom_fwd``/``custom_bwd`` are ``nova.amp``'s with ``device_type='cuda'``
(deprecated the same way)."""
from __future__ import annotations

from nova import amp as _amp
from nova.core import dtypes as _dt

_legacy = _amp.legacy_amp("cuda", _dt.float16)
autocast = _legacy.autocast
GradScaler = _legacy.GradScaler
custom_fwd = _amp._cuda_custom_fwd
custom_bwd = _amp._cuda_custom_bwd

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd"]
