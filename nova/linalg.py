"""``nova.linalg``: PyTorch's ``torch.linalg`` names -- norms, the matrix power, and the
decompositions and solvers of ``nova.decompositions`` (Cholesky, LU, triangular
and general solves, inverse, determinants; see that module for how they are computed,
when they realize to raise ``LinAlgError``, and what is not provided)."""
from nova.decompositions import (
    LinAlgError, cholesky, cholesky_ex, det, inv, inv_ex, logdet, lu, lu_factor, lu_factor_ex,
    lu_solve, slogdet, solve, solve_ex, solve_triangular,
)
from nova.tensor.numeric import norm, vector_norm
from nova.tensor.arrays import matrix_exp
from nova.tensor.products import matrix_power

__all__ = ["LinAlgError", "cholesky", "cholesky_ex", "det", "inv", "inv_ex", "logdet", "lu",
           "lu_factor", "lu_factor_ex", "lu_solve", "matrix_exp", "matrix_power", "norm", "slogdet", "solve",
           "solve_ex", "solve_triangular", "vector_norm"]
