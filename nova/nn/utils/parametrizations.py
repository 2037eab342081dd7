"""``nv.nn.utils.parametrizations``: orthogonal, weight-normalized and
spectral-normalized weights as parametrizations (``nv.nn.utils.parametrize``), with
PyTorch's names, state_dict keys and buffers.
"""
from __future__ import annotations

from collections.abc import Callable
from enum import Enum, auto
from typing import Any

from nova.autograd.grad_mode import no_grad
from nova.core.dtypes import finfo, int32
from nova.decompositions import solve_ex
from nova.decompositions_spectral import _householder, qr
from nova.nn.conv_transpose import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from nova.nn.module import Module
from nova.nn.normalization import normalize
from nova.nn.utils import parametrize
from nova.nn.utils.weight_norm import _norm_except_dim, _weight_norm
from nova.tensor import movement, ops
from nova.tensor.arrays import allclose, matrix_exp, mv
from nova.tensor.creation import eye, randn, zeros
from nova.tensor.products import vdot
from nova.tensor.tensor import Tensor


def _eye_like(rows: int, cols: int, ref: Tensor) -> Tensor:
    return eye(rows, cols, dtype=ref.dtype, device=ref.device)


def _is_orthogonal(Q: Tensor) -> bool:
    """Whether the tall ``Q`` (..., n, k) has orthonormal columns, to PyTorch's
    tolerance ``10 n eps`` (realizes ``Q``)."""
    n, k = Q.shape[-2:]
    return allclose(Q.mT @ Q, _eye_like(k, k, Q), atol=10.0 * n * finfo(Q.dtype).eps)


def _make_orthogonal(A: Tensor) -> Tensor:
    """The ``Q`` of ``A = Q R`` (``A`` tall) with ``R``'s diagonal made non-negative:
    the orthonormal columns Gram-Schmidt would give, PyTorch's ``_make_orthogonal``."""
    Q, R = qr(A)
    return Q * R.diagonal(0, -2, -1).sgn().unsqueeze(-2)


def _householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """The first ``k`` columns of ``H_0 H_1 ... H_{k-1}`` (``torch.linalg.
    householder_product`` of ``A`` (..., n, k), ``tau`` (..., k)), ``H_i = I - tau_i
    v_i v_i^T`` with ``v_i`` column ``i`` of ``A`` below the diagonal, 1 on it and 0
    above (only ``A``'s strictly lower triangle is read). One rank-1 update per
    reflector, last first, each recorded as plain products so the gradient is
    autograd's."""
    n, k = A.shape[-2:]
    unit = _eye_like(n, k, A)
    V = A.tril(-1) + unit
    Q = unit.expand(*A.shape[:-2], n, k)
    for i in reversed(range(k)):
        v = V[..., :, i:i + 1]                       # (..., n, 1)
        t = tau[..., i:i + 1].unsqueeze(-1)         # (..., 1, 1)
        Q = Q - (t * v) @ (v.mT @ Q)
    return Q


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


class _Orthogonal(Module):
    """A matrix (or a batch of them) with orthonormal columns (tall and square) or rows
    (wide) computed from an unconstrained one of the same shape, by PyTorch's maps and
    formulas (``torch.nn.utils.parametrizations._Orthogonal``); with the dynamic
    trivialization the result is ``base @ map(original)``, ``base`` a buffer that
    ``right_inverse`` sets."""

    def __init__(self, weight: Tensor, orthogonal_map: _OrthMaps, *,
                 use_trivialization: bool = True) -> None:
        super().__init__()
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def _trivialized(self) -> bool:
        return "base" in self._buffers

    def forward(self, X: Tensor) -> Tensor:
        n, k = X.shape[-2:]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            Q = self._skew_map(X, n, k)
        else:
            A = X.tril(-1)
            tau = 2.0 / (1.0 + (A * A).sum(-2))
            # X's diagonal holds the signs (+-1); not differentiated, as PyTorch's .int()
            Q = _householder_product(A, tau) * X.diagonal(0, -2, -1).to(int32).unsqueeze(-2)
        if self._trivialized():
            if self.base is None:
                raise RuntimeError(
                    "orthogonal: the trivialization's base was never set (the tensor was "
                    "already parametrized when orthogonal() was registered, so its "
                    "right_inverse did not run); assign an orthogonal matrix to the "
                    "parametrized tensor first, or use use_trivialization=False")
            Q = self.base @ Q
        return Q.mT if transposed else Q

    def _skew_map(self, X: Tensor, n: int, k: int) -> Tensor:
        """``matrix_exp(A)`` or the Cayley map ``(I - A/2)^-1 (I + A/2)`` of the
        skew-symmetric ``A = L - L^T``, ``L`` the lower triangle of the tall ``X``
        padded to n x n with zeros; its first ``k`` columns."""
        L = X.tril()
        if n != k:
            L = movement.cat([L, zeros(*X.shape[:-2], n, n - k, dtype=X.dtype,
                                       device=X.device)], -1)
        A = L - L.mT
        if self.orthogonal_map == _OrthMaps.matrix_exp:
            Q = matrix_exp(A)
        else:       # I - A/2 is invertible for every skew-symmetric A: no check needed
            Id = _eye_like(n, n, A)
            Q = solve_ex(Id - 0.5 * A, Id + 0.5 * A).result
        return Q[..., :k] if n != k else Q

    def right_inverse(self, Q: Tensor) -> Tensor:
        """The original tensor that gives ``Q`` (PyTorch's semantics): with the
        trivialization, ``base`` becomes ``Q`` (orthogonalized by QR when it is not
        orthogonal; a tall one completed to a square orthogonal matrix with random
        columns) and the original ``-I`` (which every map takes to the identity);
        without it, the Householder map's reflectors of ``Q``'s QR (``geqrf``), the
        diagonal holding the signs; the other maps cannot be inverted
        (NotImplementedError, so ``register_parametrization`` keeps the original)."""
        if Q.shape != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                             f"Got a tensor of shape {Q.shape}.")
        with no_grad():
            return self._right_inverse(Q)

    def _right_inverse(self, Q: Tensor) -> Tensor:
        Q_init = Q
        n, k = Q.shape[-2:]
        transpose = n < k
        if transpose:
            Q = Q.mT
            n, k = k, n
        if not self._trivialized():
            if self.orthogonal_map != _OrthMaps.householder:
                raise NotImplementedError(
                    "It is not possible to assign to the matrix exponential or the Cayley "
                    "parametrizations when use_trivialization=False.")
            A = self._reflectors(Q, n, k)
            return A.mT if transpose else A
        if n == k:
            Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
        else:
            N = randn(*Q.shape[:-2], n, n - k, dtype=Q.dtype, device=Q.device)
            Q = _make_orthogonal(movement.cat([Q, N], -1))
        self.base = Q
        rows, cols = Q_init.shape[-2:]
        return zeros(*Q_init.shape, dtype=Q_init.dtype, device=Q_init.device) - \
            _eye_like(rows, cols, Q_init)

    @staticmethod
    def _reflectors(Q: Tensor, n: int, k: int) -> Tensor:
        """``geqrf(Q)`` (``R`` above the diagonal, the reflectors below) with the
        diagonal set to the signs of ``R``'s, negated where ``tau`` is 0 (LAPACK left
        that column unreflected, while the map always reflects)."""
        W, H, _ = _householder(Q, pivot=False)
        tau = H.diagonal(0, -2, -1)
        sign = W.diagonal(0, -2, -1).sign()
        sign = ops.where(tau == 0.0, -sign, sign)
        on_diagonal = _eye_like(n, k, Q) != 0
        return ops.where(on_diagonal, sign.unsqueeze(-2), W.triu(1) + H.tril(-1))


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Make ``module.<name>`` (a matrix or a batch of them, ``(..., m, n)``) orthogonal
    (PyTorch's ``parametrizations.orthogonal``): ``Q^T Q = I`` when ``m >= n``, ``Q Q^T
    = I`` when ``m < n``. ``orthogonal_map`` is ``"matrix_exp"`` (the default for a
    square matrix), ``"cayley"`` or ``"householder"`` (the default otherwise). With
    ``use_trivialization`` (the default) the buffer ``parametrizations.<name>.0.base``
    holds the starting point and the weight starts as the original weight if that is
    orthogonal, else as its QR orthogonalization (the same holds for ``"householder"``
    without the trivialization); otherwise the map of the original is the weight. The
    random completion of a non-square base draws from Nova's generator, so its values
    differ from PyTorch's (the weight itself does not)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of "
                         f"{weight.ndim} dimensions.")
    if not weight.dtype.is_floating_point:
        raise TypeError(f"orthogonal: expected a floating point weight, got "
                        f"{weight.dtype.name}")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] \
            else "householder"
    orth_enum = _OrthMaps.__members__.get(orthogonal_map) \
        if isinstance(orthogonal_map, str) else None
    if orth_enum is None:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", '
                         f'"householder". Got: {orthogonal_map}')
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


class _WeightNorm(Module):
    """``weight = g * v / ||v||`` from ``original0 = g`` and ``original1 = v``."""

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrize ``module.<name>`` as ``g * v / ||v||`` (PyTorch's
    ``parametrizations.weight_norm``): ``g`` (the norm over every dim but ``dim``;
    ``dim=None`` or ``-1``: of the whole tensor) is stored as
    ``parametrizations.<name>.original0`` and ``v`` as ``original1``; the weight is
    recomputed on every access (once inside ``parametrize.cached()``).

    A checkpoint of the old API (``nn.utils.weight_norm``: ``<name>_g`` and
    ``<name>_v``) loads too: a load pre-hook renames those keys, as PyTorch's
    ``_weight_norm_compat_hook``."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    module._register_load_state_dict_pre_hook(_weight_norm_compat_hook(name))
    return module


def _weight_norm_compat_hook(name: str) -> Callable[..., None]:
    """The load pre-hook that moves an old-API checkpoint's ``<prefix><name>_g`` and
    ``<prefix><name>_v`` to ``parametrizations.<name>.original0`` and ``original1``
    (both must be there; otherwise the keys load, or are reported, as they are)."""

    def hook(state_dict: dict[str, Any], prefix: str, local_metadata: dict[str, Any],
             strict: bool, missing_keys: list[str], unexpected_keys: list[str],
             error_msgs: list[str]) -> None:
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    hook.__name__ = hook.__qualname__ = "_weight_norm_compat_hook"
    return hook


class _SpectralNorm(Module):
    """``weight / sigma`` with ``sigma`` the largest singular value of the weight seen
    as a matrix (``dim`` first, the rest flattened), estimated by power iteration on the
    buffers ``_u`` and ``_v``. In training each access runs ``n_power_iterations``
    iterations and writes ``_u``/``_v`` in place, recorded into the step like any
    buffer update; in eval mode they are only read."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"spectral_norm: dimension out of range (expected to be in "
                             f"range of [{-ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError(f"spectral_norm: expected n_power_iterations to be positive, "
                             f"but got n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:    # a vector is normalized exactly (see forward)
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight.detach())
            h, w = weight_mat.shape
            u = randn(h, dtype=weight.dtype, device=weight.device)
            v = randn(w, dtype=weight.dtype, device=weight.device)
            self.register_buffer("_u", normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        """Update ``_u`` and ``_v`` in place (their identity stays, so a module copy or
        ``functional_call`` that substituted them sees the update, as in PyTorch)."""
        with no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(normalize(mv(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(normalize(mv(weight_mat.T, self._u), dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        # Values are immutable, so the u and v read here are unaffected by later in-place
        # updates of the buffers (PyTorch clones them for that); they carry no gradient.
        sigma = vdot(self._u, mv(weight_mat, self._v))
        return ops.div(weight, sigma)

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    """Reparametrize ``module.<name>`` as ``weight / sigma(weight)`` (PyTorch's
    ``parametrizations.spectral_norm``): the original is
    ``parametrizations.<name>.original`` and the power-iteration vectors the buffers
    ``parametrizations.<name>.0._u`` and ``._v``. ``dim`` defaults to 1 for transposed
    convolutions, else 0."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{type(module).__name__}' has no parameter or buffer with "
                         f"name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d,
                                       ConvTranspose3d)) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


__all__ = ["orthogonal", "spectral_norm", "weight_norm"]
