"""Spectral normalization, PyTorch's original hook API (``torch.nn.utils.spectral_norm``,
from https://arxiv.org/abs/1802.05957): ``weight = weight_orig / sigma`` with ``sigma``
the largest singular value of ``weight_orig`` (as a matrix: ``dim`` first, the rest
flattened), estimated as ``u . (W v)`` from the buffers ``weight_u`` and ``weight_v``,
which a forward pre-hook refines by power iteration before each call in training mode
(eval mode only reads them).

The state is PyTorch's: the parameter ``<name>_orig``, the buffers ``<name>_u`` and
``<name>_v``, ``module.<name>`` a plain attribute recomputed by the hook, and the
metadata entry ``spectral_norm: {"<name>.version": 1}``, so the state_dict of a
spectral-normed PyTorch model (a GAN discriminator) loads and gives the same outputs.
A checkpoint older than version 1 (``<name>`` saved, no ``<name>_v``) is converted on
load as PyTorch does, solving for ``v`` with the pseudo-inverse (on the host).

PyTorch keeps this API beside ``parametrizations.spectral_norm`` (whose state_dict keys
differ); so does Nova.
"""
from __future__ import annotations

from typing import Any, TypeVar

import numpy as np

from nova.autograd.grad_mode import no_grad
from nova.nn.conv_transpose import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from nova.nn.module import Module
from nova.nn.normalization import normalize
from nova.nn.parameter import Parameter
from nova.tensor import ops
from nova.tensor.arrays import dot, mv
from nova.tensor.creation import randn, tensor
from nova.tensor.tensor import Tensor

ModuleT = TypeVar("ModuleT", bound=Module)


class SpectralNorm:
    """The forward pre-hook that sets ``module.<name>`` to ``<name>_orig / sigma``.

    Invariant after each training call: ``u = normalize(W @ v)`` (not at
    initialization). Version 1 (PyTorch's): ``W`` is not a buffer, ``v`` is, and eval
    mode computes ``W_orig / (u @ W_orig @ v)`` rather than reading a stored ``W``."""

    _version: int = 1

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        if n_power_iterations <= 0:
            raise ValueError("spectral_norm: expected n_power_iterations to be positive, "
                             f"but got n_power_iterations={n_power_iterations}")
        self.name = name
        self.dim = dim
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        """``weight`` as a matrix: dim ``self.dim`` as the rows, the rest flattened."""
        if self.dim != 0:
            weight = weight.permute(self.dim,
                                    *(d for d in range(weight.ndim) if d != self.dim))
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        """``<name>_orig / sigma``. With ``do_power_iteration`` the buffers ``u`` and
        ``v`` are first updated in place (v from u, then u from v, each normalized),
        outside autograd; sigma then uses copies of them, so a later call's update
        does not reach this call's backward (a GAN's ``D(real) - D(fake)``)."""
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(normalize(mv(weight_mat.t(), u), dim=0, eps=self.eps))
                    u.copy_(normalize(mv(weight_mat, v), dim=0, eps=self.eps))
                u, v = u.clone(), v.clone()
        sigma = dot(u, mv(weight_mat, v))
        return ops.div(weight, sigma)

    def remove(self, module: Module) -> None:
        """Make ``<name>`` a parameter again, holding the current normalized weight
        (no power iteration), and drop ``<name>_orig``, ``_u`` and ``_v``."""
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name,
                self.compute_weight(module, do_power_iteration=module.training))

    def _solve_v_and_rescale(self, weight_mat: Tensor, u: Tensor,
                             target_sigma: Tensor) -> Tensor:
        """A ``v`` with ``u = normalize(W @ v)`` and ``u @ W @ v = target_sigma``
        (through the pseudo-inverse of ``W^T W``, which may be singular), as PyTorch's.
        Computed on the host in float64: a one-off conversion of an old checkpoint at
        load, and Nova has no pseudo-inverse op."""
        w = np.asarray(weight_mat.numpy(), dtype=np.float64)
        u_host = np.asarray(u.numpy(), dtype=np.float64)
        v = np.linalg.pinv(w.T @ w) @ w.T @ u_host
        v = v * (float(target_sigma.item()) / (u_host @ w @ v))
        return tensor(v, dtype=u.dtype, device=u.device)

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int,
              eps: float) -> SpectralNorm:
        """Install on ``module``: ``<name>`` becomes ``<name>_orig`` (the same
        Parameter object), ``<name>_u``/``_v`` buffers start as normalized normal
        draws, and the forward, state-dict and load hooks are registered."""
        for hook in _forward_pre_hooks(module).values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same "
                                   f"parameter {name}")
        weight = module._parameters.get(name)
        if weight is None:
            raise ValueError(f"spectral_norm: {type(module).__name__} has no parameter "
                             f"'{name}' (`SpectralNorm` cannot be applied to a parameter "
                             "that is None or absent)")
        if getattr(type(weight), "cls_to_become", None) is not None:
            raise ValueError("The module passed to `SpectralNorm` can't have uninitialized "
                             "parameters. Make sure to run the dummy forward before "
                             "applying spectral normalization")
        if not -weight.ndim <= dim < weight.ndim:
            raise IndexError(f"spectral_norm: dim {dim} is out of range for parameter "
                             f"'{name}' of shape {weight.shape} (expected a dim in "
                             f"[{-weight.ndim}, {weight.ndim - 1}])")
        fn = SpectralNorm(name, n_power_iterations, dim % weight.ndim, eps)
        with no_grad():
            h, w = fn.reshape_weight_to_matrix(weight).shape
            u = normalize(randn(h, dtype=weight.dtype, device=weight.device), dim=0, eps=eps)
            v = normalize(randn(w, dtype=weight.dtype, device=weight.device), dim=0, eps=eps)
        delattr(module, name)
        module.register_parameter(name + "_orig", weight)
        # ``module.<name>`` stays readable (initializers use it): the raw weight, as a
        # plain attribute until the first call computes the normalized one
        setattr(module, name, weight.data)
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(fn)
        module._register_state_dict_hook(SpectralNormStateDictHook(fn))
        module._register_load_state_dict_pre_hook(SpectralNormLoadStateDictPreHook(fn))
        return fn


class SpectralNormLoadStateDictPreHook:
    """Converts a checkpoint older than version 1 on load.

    For a state_dict without a version (assumed past one training forward):
    ``u = normalize(W_orig @ v)`` and ``W = W_orig / sigma`` with
    ``sigma = u @ W_orig @ v``; ``v`` is recovered by solving ``W_orig @ x = u`` and
    rescaling ``x`` so that ``u @ W_orig @ v`` is ``W_orig / W``. A state_dict with
    ``_orig``, ``_u`` and ``_v`` and no ``<name>`` is taken as current (metadata lost,
    as ``nv.load`` of a torch file drops it)."""

    def __init__(self, fn: SpectralNorm) -> None:
        self.fn = fn

    def __call__(self, state_dict: dict[str, Any], prefix: str,
                 local_metadata: dict[str, Any], strict: bool, missing_keys: list[str],
                 unexpected_keys: list[str], error_msgs: list[str]) -> None:
        fn = self.fn
        version = local_metadata.get("spectral_norm", {}).get(fn.name + ".version", None)
        if version is not None and version >= 1:
            return
        weight_key = prefix + fn.name
        if version is None and weight_key not in state_dict and \
                all(weight_key + s in state_dict for s in ("_orig", "_u", "_v")):
            return
        absent = [weight_key + s for s in ("_orig", "", "_u") if weight_key + s not in state_dict]
        if absent:
            if strict:
                missing_keys.extend(absent)
            return
        with no_grad():
            weight_orig = _as_tensor(state_dict[weight_key + "_orig"])
            weight = _as_tensor(state_dict.pop(weight_key))
            sigma = ops.div(weight_orig, weight).mean()
            weight_mat = fn.reshape_weight_to_matrix(weight_orig)
            u = _as_tensor(state_dict[weight_key + "_u"])
            state_dict[weight_key + "_v"] = fn._solve_v_and_rescale(weight_mat, u, sigma)


class SpectralNormStateDictHook:
    """Records ``spectral_norm: {"<name>.version": 1}`` in the module's state_dict
    metadata, which the load hook reads."""

    def __init__(self, fn: SpectralNorm) -> None:
        self.fn = fn

    def __call__(self, module: Module, state_dict: dict[str, Any], prefix: str,
                 local_metadata: dict[str, Any]) -> None:
        entry = local_metadata.setdefault("spectral_norm", {})
        key = self.fn.name + ".version"
        if key in entry:
            raise RuntimeError(f"Unexpected key in metadata['spectral_norm']: {key}")
        entry[key] = self.fn._version


def _as_tensor(value: Any) -> Tensor:
    """A checkpoint entry as a tensor (``load_state_dict`` takes arrays too)."""
    return value if isinstance(value, Tensor) else tensor(value)


def _forward_pre_hooks(module: Module) -> dict[int, Any]:
    """The module's forward pre-hooks by handle id (each entry ``(hook, with_kwargs)``),
    as the hook objects themselves."""
    return {key: entry[0] for key, entry in (module._forward_pre_hooks or {}).items()}


def _drop(module: Module, table: str, cls: type, name: str) -> None:
    """Remove the first ``cls`` hook for ``name`` from ``module``'s ``table`` (entries
    are tuples whose first item is the hook)."""
    hooks = getattr(module, table) or {}
    for key, entry in list(hooks.items()):
        if isinstance(entry[0], cls) and entry[0].fn.name == name:
            del hooks[key]
            return


def spectral_norm(module: ModuleT, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> ModuleT:
    """Apply spectral normalization to parameter ``name`` of ``module`` (PyTorch's
    ``torch.nn.utils.spectral_norm``): ``module.<name>`` is recomputed before every
    call as ``<name>_orig / sigma``, ``n_power_iterations`` power iterations refining
    ``sigma`` in training mode. ``dim`` (the output dim) defaults to 1 for transposed
    convolutions, else 0. Returns ``module``. PyTorch recommends the parametrization
    (``nv.nn.utils.parametrizations.spectral_norm``); this form stays for its
    checkpoints."""
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d,
                                       ConvTranspose3d)) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: ModuleT, name: str = "weight") -> ModuleT:
    """Undo ``spectral_norm``: ``name`` becomes one parameter again, holding the
    current normalized weight; its hooks are removed."""
    for key, hook in _forward_pre_hooks(module).items():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            break
    else:
        raise ValueError(f"spectral_norm of '{name}' not found in {type(module).__name__}")
    _drop(module, "_state_dict_hooks", SpectralNormStateDictHook, name)
    _drop(module, "_load_state_dict_pre_hooks", SpectralNormLoadStateDictPreHook, name)
    return module


__all__ = ["SpectralNorm", "SpectralNormLoadStateDictPreHook", "SpectralNormStateDictHook",
           "remove_spectral_norm", "spectral_norm"]
