"""``nv.nn.utils.parametrizations``: weight normalization and spectral normalization
as parametrizations (``nv.nn.utils.parametrize``), with PyTorch's names, state_dict keys
and buffers.

``orthogonal`` is not provided: its maps need ``matrix_exp``, a linear solve or
Householder products, which Nova does not have.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nova.autograd.grad_mode import no_grad
from nova.nn.conv_transpose import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from nova.nn.module import Module
from nova.nn.normalization import normalize
from nova.nn.utils import parametrize
from nova.nn.utils.weight_norm import _norm_except_dim, _weight_norm
from nova.tensor import ops
from nova.tensor.arrays import mv
from nova.tensor.creation import randn
from nova.tensor.products import vdot
from nova.tensor.tensor import Tensor


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


__all__ = ["spectral_norm", "weight_norm"]
