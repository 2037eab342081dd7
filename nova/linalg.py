"""``nova.linalg``: the vector norm under PyTorch's ``torch.linalg`` name."""
from nova.tensor.numeric import norm, vector_norm

__all__ = ["norm", "vector_norm"]
