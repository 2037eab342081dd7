"""``nova.linalg``: PyTorch's ``torch.linalg`` names -- norms, the matrix power, the
triangular decompositions and solvers of ``nova.decompositions`` (Cholesky, LU,
triangular and general solves, inverse, determinants) and the orthogonal and spectral
ones of ``nova.decompositions_spectral`` (QR, symmetric eigendecomposition, SVD, and
the pseudo-inverse, rank, least squares, spectral norms and condition numbers built on
them), and ``nova.linalg_more``'s products (``multi_dot``, ``vecdot``), ``vander``,
``tensorinv``/``tensorsolve``, ``householder_product`` and the general eigendecomposition
``eig``/``eigvals`` (complex results, computed on the host); see those modules for how
they are computed, when they realize to raise ``LinAlgError``, and what is not provided.
Importing it also loads ``nova.linalg_legacy``, PyTorch's pre-``linalg`` names
(``torch.cholesky_solve``, ``torch.lu_unpack``, ``Tensor.triangular_solve`` ...)."""
from nova.decompositions import (
    LinAlgError, cholesky, cholesky_ex, det, inv, inv_ex, logdet, lu, lu_factor, lu_factor_ex,
    lu_solve, matrix_power, slogdet, solve, solve_ex, solve_triangular,
)
from nova.decompositions_spectral import (
    cond, eigh, eigvalsh, lstsq, matrix_norm, matrix_rank, norm, pinv, qr, svd, svdvals,
)
from nova import linalg_legacy  # noqa: F401 (attaches PyTorch's legacy Tensor methods)
from nova.linalg_more import (
    diagonal, eig, eigvals, householder_product, matmul, multi_dot, tensorinv, tensorsolve,
    vander, vecdot,
)
from nova.tensor import numeric as _numeric
from nova.tensor.numeric import vector_norm
from nova.tensor import arrays as _arrays
from nova.tensor.arrays import matrix_exp
from nova.tensor.tensor import Tensor as _Tensor

# torch.norm(p='nuc') and its kin are matrix norms: nova.tensor's norm hands them here
_numeric.register_matrix_norm(matrix_norm)


def cross(input: _Tensor, other: _Tensor, *, dim: int = -1) -> _Tensor:
    """``torch.linalg.cross``: the cross product of 3-vectors along ``dim`` (the last by
    default, where ``torch.cross`` takes the first dim of size 3); the inputs have the
    same number of dims and broadcast in the others."""
    for name, t in (("input", input), ("other", other)):
        if not isinstance(t, _Tensor):
            raise TypeError(f"linalg.cross: {name} must be a Tensor, got {type(t).__name__}")
    if input.ndim != other.ndim:
        raise ValueError(f"linalg.cross: input {input.shape} and other {other.shape} must "
                         f"have the same number of dims")
    if input.ndim == 0 or not -input.ndim <= dim < input.ndim:
        raise IndexError(f"linalg.cross: dim {dim} is out of range for inputs of shape "
                         f"{input.shape}")
    if input.shape[dim] != 3 or other.shape[dim] != 3:
        raise ValueError(f"linalg.cross: inputs must have size 3 along dim {dim}, got "
                         f"{input.shape} and {other.shape}")
    return _arrays.cross(input, other, dim)


__all__ = ["LinAlgError", "cholesky", "cholesky_ex", "cond", "cross", "det", "diagonal", "eig",
           "eigh", "eigvals", "eigvalsh", "householder_product", "inv", "inv_ex", "logdet",
           "lstsq", "lu", "lu_factor", "lu_factor_ex", "lu_solve", "matmul", "matrix_exp",
           "matrix_norm", "matrix_power", "matrix_rank", "multi_dot", "norm", "pinv", "qr",
           "slogdet", "solve", "solve_ex", "solve_triangular", "svd", "svdvals", "tensorinv",
           "tensorsolve", "vander", "vecdot", "vector_norm"]
