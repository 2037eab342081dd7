"""``nova.nn.attention``: ``sdpa_kernel`` and ``SDPBackend``, as ``torch.nn.attention``.

``with sdpa_kernel(SDPBackend.FLASH_ATTENTION): ...`` restricts PyTorch's
``scaled_dot_product_attention`` to the backends named, for the block. Nova has one
attention (``F.scaled_dot_product_attention``, fused by the compiler into a flash-style
kernel where it can), so ``sdpa_kernel`` selects nothing: it checks its argument as
PyTorch's does (an ``SDPBackend`` or a list of them, else AssertionError; list elements
that are not ``SDPBackend`` members enable nothing, as there), sets the flags that
``nv.backends.cuda.flash_sdp_enabled()`` and the other getters read, honours
``set_priority`` in the order it remembers, and restores every flag and the order on
exit, exception or not. Attention computes the same inside; where PyTorch raises "No
viable backend" with every backend off, Nova computes.
"""
from __future__ import annotations

from typing import Any

from nova.backends.cuda import SDPBackend, _sdpa_kernel


def sdpa_kernel(backends: Any, set_priority: bool = False) -> Any:
    """Context manager: only ``backends`` (an ``SDPBackend`` or a list) enabled inside,
    in that priority order with ``set_priority=True``; yields ``{}`` as PyTorch's. See
    the module docstring for what it changes in Nova (the flags, not the kernel)."""
    return _sdpa_kernel(backends, set_priority)


__all__ = ["SDPBackend", "sdpa_kernel"]
