"""``nova.linalg``: the vector norm and the matrix power under PyTorch's ``torch.linalg``
names."""
from nova.tensor.numeric import norm, vector_norm
from nova.tensor.products import matrix_power

__all__ = ["matrix_power", "norm", "vector_norm"]
