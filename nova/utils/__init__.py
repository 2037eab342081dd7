"""Utilities with PyTorch's names: ``nova.utils.data`` is ``torch.utils.data``."""
from nova.utils import data

__all__ = ["data"]
