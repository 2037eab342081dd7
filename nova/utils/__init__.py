"""Utilities with PyTorch's names: ``nova.utils.data`` is ``torch.utils.data``,
``nova.utils.hooks`` ``torch.utils.hooks``, ``nova.utils.checkpoint``
``torch.utils.checkpoint``."""
from nova.utils import checkpoint, data, hooks

__all__ = ["checkpoint", "data", "hooks"]
