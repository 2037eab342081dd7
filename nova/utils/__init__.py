"""Utilities with PyTorch's names: ``nova.utils.data`` is ``torch.utils.data``,
``nova.utils.hooks`` ``torch.utils.hooks``."""
from nova.utils import data, hooks

__all__ = ["data", "hooks"]
