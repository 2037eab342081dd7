"""Tensors, dtypes, devices, creation, the op front end, the trace and realization."""
from nova.tensor.tensor import Tensor

__all__ = ["Tensor"]
