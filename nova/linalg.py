"""``nova.linalg``: PyTorch's ``torch.linalg`` names -- norms, the matrix power, the
triangular decompositions and solvers of ``nova.decompositions`` (Cholesky, LU,
triangular and general solves, inverse, determinants) and the orthogonal and spectral
ones of ``nova.decompositions_spectral`` (QR, symmetric eigendecomposition, SVD, and
the pseudo-inverse, rank, least squares, spectral norms and condition numbers built on
them); see those modules for how they are computed, when they realize to raise
``LinAlgError``, and what is not provided."""
from nova.decompositions import (
    LinAlgError, cholesky, cholesky_ex, det, inv, inv_ex, logdet, lu, lu_factor, lu_factor_ex,
    lu_solve, slogdet, solve, solve_ex, solve_triangular,
)
from nova.decompositions_spectral import (
    cond, eigh, eigvalsh, lstsq, matrix_norm, matrix_rank, norm, pinv, qr, svd, svdvals,
)
from nova.tensor.numeric import vector_norm
from nova.tensor.arrays import matrix_exp
from nova.tensor.products import matrix_power

__all__ = ["LinAlgError", "cholesky", "cholesky_ex", "cond", "det", "eigh", "eigvalsh", "inv",
           "inv_ex", "logdet", "lstsq", "lu", "lu_factor", "lu_factor_ex", "lu_solve",
           "matrix_exp", "matrix_norm", "matrix_power", "matrix_rank", "norm", "pinv", "qr",
           "slogdet", "solve", "solve_ex", "solve_triangular", "svd", "svdvals", "vector_norm"]
