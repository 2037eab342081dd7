"""``nv.nn.utils.prune``: PyTorch's pruning API (``torch.nn.utils.prune``).

Pruning parameter ``name`` of a module replaces it by ``<name>_orig`` (the same
Parameter, still trained) and a buffer ``<name>_mask`` of zeros and ones, and recomputes
``module.<name> = <name>_orig * <name>_mask`` in a forward pre-hook before every call,
so pruned entries contribute nothing and receive a zero gradient. Pruning the same
parameter again combines the masks (``PruningContainer``): an unstructured method
chooses among the entries still unpruned, a structured one among the channels not yet
fully pruned, each taking its ``amount`` of those. ``remove`` makes the pruning
permanent: ``<name>`` is the original Parameter again (the object optimizers hold),
holding the masked values.

Masks are computed once, eagerly, on the host (numpy): which entries to prune is a
data-dependent choice made when pruning is applied, not part of any step. Among equal
importance scores the lower flat index is pruned first (PyTorch's ``topk`` leaves the
order of ties unspecified). An ``amount`` is a count (int) or a fraction of the
candidates (float in [0, 1], rounded as Python's ``round``), as PyTorch's.
"""
from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

import numpy as np

from nova.core.shapes import normalize_dim
from nova.nn.module import Module
from nova.tensor.creation import tensor as _tensor
from nova.tensor.grad_mode import no_grad
from nova.tensor.tensor import Tensor


def _validate_amount_init(amount: Any) -> None:
    if isinstance(amount, bool) or not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount!r}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or \
            (not isinstance(amount, numbers.Integral) and not 0.0 <= float(amount) <= 1.0):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] "
                         "or a non-negative integer")


def _to_prune(amount: Any, size: int) -> int:
    """How many of ``size`` candidates ``amount`` prunes (checked against ``size``)."""
    if isinstance(amount, numbers.Integral):
        if amount > size:
            raise ValueError(f"amount={amount} should be smaller than the number of "
                             f"parameters to prune={size}")
        return int(amount)
    return round(float(amount) * size)


def _host(t: Any, what: str) -> np.ndarray:
    if not isinstance(t, Tensor):
        raise TypeError(f"prune: {what} must be a Tensor, got {type(t).__name__}")
    return np.asarray(t.detach().numpy())


def _smallest(scores: np.ndarray, k: int) -> np.ndarray:
    """Flat indices of the ``k`` smallest scores, ties to the lower index."""
    return np.argsort(scores.reshape(-1), kind="stable")[:k]


def _channel_dim(dim: int, ndim: int, op: str) -> int:
    if ndim <= 1:
        raise ValueError(f"{op}: structured pruning can only be applied to multidimensional "
                         f"tensors, got a tensor of {ndim} dims")
    return normalize_dim(op, dim, ndim)


class BasePruningMethod(ABC):
    """A pruning method: ``compute_mask`` chooses what to prune; ``apply`` reparametrizes
    a module's parameter with it (module docstring); the instance is then the module's
    forward pre-hook that recomputes the pruned tensor."""

    PRUNING_TYPE = "unstructured"      # "unstructured", "structured" or "global"
    _tensor_name: str

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask_array(self, t: np.ndarray, default_mask: np.ndarray) -> np.ndarray:
        """The new mask (a float array of ``t``'s shape) from importance scores ``t``
        and the mask so far."""

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """``compute_mask_array`` on Tensors: a mask of ``t``'s shape and dtype."""
        scores, mask = _host(t, "importance scores"), _host(default_mask, "default_mask")
        if scores.shape != mask.shape:
            raise ValueError(f"prune: importance scores of shape {list(scores.shape)} and a "
                             f"mask of shape {list(mask.shape)} differ")
        out = self.compute_mask_array(scores, mask)
        return _tensor(out.astype(mask.dtype), device=default_mask.device)

    def apply_mask(self, module: Module) -> Tensor:
        """``<name>_orig * <name>_mask``: the pruned tensor."""
        name = self._tensor_name
        return getattr(module, name + "_orig") * getattr(module, name + "_mask")

    @classmethod
    def apply(cls, module: Module, name: str, *args: Any,
              importance_scores: Tensor | None = None, **kwargs: Any) -> BasePruningMethod:
        """Prune ``module.<name>`` with a new ``cls(*args, **kwargs)``, combined with any
        pruning already applied to it."""
        if not isinstance(module, Module):
            raise TypeError(f"prune: expected a Module, got {type(module).__name__}")
        old = None
        for key, hook in _pruning_hooks(module).items():
            if hook._tensor_name == name:
                old = hook
                del module._forward_pre_hooks[key]
                break
        method = cls(*args, **kwargs)
        method._tensor_name = name
        if old is not None:
            container = old if isinstance(old, PruningContainer) else PruningContainer(old)
            container.add_pruning_method(method)
            method = container
            orig = getattr(module, name + "_orig")
            default_mask = getattr(module, name + "_mask").detach().clone()
        else:
            orig = module._parameters.get(name)
            if orig is None:
                raise AttributeError(f"prune: {type(module).__name__} has no parameter "
                                     f"'{name}' (its parameters: "
                                     f"{sorted(module._parameters)})")
            default_mask = _tensor(np.ones(orig.shape, np.asarray(orig.detach().numpy()).dtype),
                                   device=orig.device)
        scores = orig if importance_scores is None else importance_scores
        _host(scores, "importance_scores")
        if tuple(scores.shape) != tuple(orig.shape):
            raise ValueError(f"prune: importance_scores of shape {list(scores.shape)} must "
                             f"have the shape of {name}, {list(orig.shape)}")
        mask = method.compute_mask(scores, default_mask)
        if old is None:
            del module._parameters[name]
            module.register_parameter(name + "_orig", orig)
        module.register_buffer(name + "_mask", mask)
        setattr(module, name, method.apply_mask(module))
        module.register_forward_pre_hook(method)
        return method

    def prune(self, t: Tensor, default_mask: Tensor | None = None,
              importance_scores: Tensor | None = None) -> Tensor:
        """``t`` with this method's mask applied (no module involved)."""
        scores = t if importance_scores is None else importance_scores
        mask = default_mask if default_mask is not None else _tensor(
            np.ones(t.shape, np.asarray(t.detach().numpy()).dtype))
        return t * self.compute_mask(scores, mask)

    def remove(self, module: Module) -> None:
        """Make the pruning permanent: ``<name>`` is the original Parameter again,
        holding the masked values; ``<name>_orig`` and ``<name>_mask`` are gone."""
        name = self._tensor_name
        weight = self.apply_mask(module).detach()
        orig = module._parameters[name + "_orig"]
        delattr(module, name)
        with no_grad():
            orig.copy_(weight)
        del module._parameters[name + "_orig"]
        del module._buffers[name + "_mask"]
        module.register_parameter(name, orig)


class PruningContainer(BasePruningMethod):
    """Successive pruning of one parameter: each new method's mask is computed on what
    the earlier ones left (module docstring)."""

    def __init__(self, *methods: BasePruningMethod):
        self._pruning_methods: tuple[BasePruningMethod, ...] = ()
        for m in methods:
            self.add_pruning_method(m)

    def add_pruning_method(self, method: BasePruningMethod) -> None:
        if not isinstance(method, BasePruningMethod):
            raise TypeError(f"{type(method).__name__} is not a BasePruningMethod subclass")
        if self._pruning_methods and method._tensor_name != self._tensor_name:
            raise ValueError(f"Can only add pruning methods acting on the parameter named "
                             f"'{self._tensor_name}' to PruningContainer, not "
                             f"'{method._tensor_name}'")
        self._tensor_name = method._tensor_name
        self._pruning_methods += (method,)

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, i: int) -> BasePruningMethod:
        return self._pruning_methods[i]

    def compute_mask_array(self, t: np.ndarray, default_mask: np.ndarray) -> np.ndarray:
        """The last method's mask over the candidates the mask so far leaves: the
        unpruned entries (unstructured, global) or the channels along its ``dim`` not
        fully pruned (structured)."""
        method = self._pruning_methods[-1]
        if method.PRUNING_TYPE in ("unstructured", "global"):
            return _among_unpruned(method, t, default_mask)
        new = default_mask.copy()
        if method.PRUNING_TYPE == "structured":
            dim = _channel_dim(method.dim, t.ndim, type(method).__name__)
            others = tuple(d for d in range(t.ndim) if d != dim)
            alive = np.nonzero(default_mask.sum(axis=others) != 0)[0]
            index = [slice(None)] * t.ndim
            index[dim] = alive
            index = tuple(index)
            new[index] = method.compute_mask_array(t[index], default_mask[index])
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {method.PRUNING_TYPE!r}")
        return new


def _among_unpruned(method: BasePruningMethod, t: np.ndarray,
                    default_mask: np.ndarray) -> np.ndarray:
    """``method``'s mask over the entries ``default_mask`` leaves unpruned."""
    new = default_mask.copy()
    keep = default_mask == 1
    new[keep] = method.compute_mask_array(t[keep], default_mask[keep])
    return new


class Identity(BasePruningMethod):
    """Prunes nothing: the reparametrization alone."""

    def compute_mask_array(self, t: np.ndarray, default_mask: np.ndarray) -> np.ndarray:
        return default_mask.copy()


class _ByScore(BasePruningMethod):
    """Unstructured pruning of the ``amount`` entries of smallest ``score``."""

    def __init__(self, amount: Any):
        _validate_amount_init(amount)
        self.amount = amount

    @abstractmethod
    def score(self, t: np.ndarray) -> np.ndarray:
        """Per entry of ``t``, its score (the lowest are pruned)."""

    def compute_mask_array(self, t: np.ndarray, default_mask: np.ndarray) -> np.ndarray:
        k = _to_prune(self.amount, t.size)
        mask = default_mask.copy()
        if k:
            mask.reshape(-1)[_smallest(self.score(t), k)] = 0
        return mask


class RandomUnstructured(_ByScore):
    """``amount`` entries chosen at random (``nv.rand``, so ``nv.manual_seed`` fixes
    them)."""

    def score(self, t: np.ndarray) -> np.ndarray:
        from nova.tensor.creation import rand
        return rand(max(t.size, 1)).numpy()[: t.size]


class L1Unstructured(_ByScore):
    """The ``amount`` entries of smallest absolute value."""

    def score(self, t: np.ndarray) -> np.ndarray:
        return np.abs(t)


class RandomStructured(BasePruningMethod):
    """``amount`` channels along ``dim`` chosen at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount: Any, dim: int = -1):
        _validate_amount_init(amount)
        self.amount, self.dim = amount, dim

    def compute_mask_array(self, t: np.ndarray, default_mask: np.ndarray) -> np.ndarray:
        from nova.tensor.creation import rand
        dim = _channel_dim(self.dim, t.ndim, "RandomStructured")
        k = _to_prune(self.amount, t.shape[dim])
        return _zero_channels(default_mask, dim, _smallest(rand(t.shape[dim]).numpy(), k))


class LnStructured(BasePruningMethod):
    """The ``amount`` channels along ``dim`` of smallest ``n``-norm (``n`` as
    ``vector_norm``'s ``ord``: a number, ``inf``, ``-inf``, or ``'fro'`` for 2)."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount: Any, n: Any, dim: int = -1):
        _validate_amount_init(amount)
        self.amount, self.n, self.dim = amount, n, dim

    def compute_mask_array(self, t: np.ndarray, default_mask: np.ndarray) -> np.ndarray:
        dim = _channel_dim(self.dim, t.ndim, "LnStructured")
        k = _to_prune(self.amount, t.shape[dim])
        rows = np.moveaxis(np.abs(t.astype(np.float64)), dim, 0).reshape(t.shape[dim], -1)
        n = 2 if self.n == "fro" else self.n
        if n == 0:
            norms = (rows != 0).sum(1).astype(np.float64)
        elif n == np.inf:
            norms = rows.max(1)
        elif n == -np.inf:
            norms = rows.min(1)
        else:
            norms = (rows ** n).sum(1) ** (1.0 / n)
        return _zero_channels(default_mask, dim, _smallest(norms, k))


def _zero_channels(default_mask: np.ndarray, dim: int, channels: np.ndarray) -> np.ndarray:
    mask = default_mask.copy()
    index = [slice(None)] * mask.ndim
    index[dim] = channels
    mask[tuple(index)] = 0
    return mask


class CustomFromMask(BasePruningMethod):
    """A given mask (combined with any earlier one)."""

    PRUNING_TYPE = "global"

    def __init__(self, mask: Tensor):
        self.mask = mask

    def compute_mask_array(self, t: np.ndarray, default_mask: np.ndarray) -> np.ndarray:
        given = _host(self.mask, "mask")
        if given.size != default_mask.size:
            raise ValueError(f"custom_from_mask: a mask of shape {list(given.shape)} for a "
                             f"tensor of {default_mask.size} elements")
        return default_mask * given.reshape(default_mask.shape).astype(default_mask.dtype)


def _pruning_hooks(module: Module) -> dict:
    return {key: entry[0] for key, entry in (module._forward_pre_hooks or {}).items()
            if isinstance(entry[0], BasePruningMethod)}


def identity(module: Module, name: str) -> Module:
    Identity.apply(module, name)
    return module


def random_unstructured(module: Module, name: str, amount: Any) -> Module:
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module: Module, name: str, amount: Any,
                    importance_scores: Tensor | None = None) -> Module:
    L1Unstructured.apply(module, name, amount, importance_scores=importance_scores)
    return module


def random_structured(module: Module, name: str, amount: Any, dim: int) -> Module:
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module: Module, name: str, amount: Any, n: Any, dim: int,
                  importance_scores: Tensor | None = None) -> Module:
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module: Module, name: str, mask: Tensor) -> Module:
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters: Iterable[tuple[Module, str]], pruning_method: type,
                        importance_scores: dict | None = None, **kwargs: Any) -> None:
    """Prune the (module, name) pairs together: one mask over all their entries
    (``pruning_method``, an unstructured class, with ``kwargs``; scores from
    ``importance_scores[(module, name)]`` or the parameters), applied to each as
    ``custom_from_mask``."""
    pairs = list(parameters)
    if not pairs:
        raise ValueError("global_unstructured: parameters is empty")
    if getattr(pruning_method, "PRUNING_TYPE", None) == "structured":
        raise TypeError('Only "unstructured" PRUNING_TYPE supported for the '
                        f"`pruning_method`. Found method {pruning_method.__name__} of type "
                        "structured")
    scores = importance_scores or {}
    flat_scores, flat_masks = [], []
    for module, name in pairs:
        current = getattr(module, name)
        flat_scores.append(_host(scores.get((module, name), current), "importance score")
                           .reshape(-1))
        mask = getattr(module, name + "_mask", None)
        flat_masks.append(np.ones(current.numel(), np.float32) if mask is None
                          else _host(mask, "mask").reshape(-1).astype(np.float32))
    combined = _among_unpruned(pruning_method(**kwargs), np.concatenate(flat_scores),
                               np.concatenate(flat_masks))
    start = 0
    for (module, name), flat in zip(pairs, flat_scores):
        piece = combined[start:start + flat.size]
        start += flat.size
        custom_from_mask(module, name, _tensor(piece.reshape(getattr(module, name).shape)))


def remove(module: Module, name: str) -> Module:
    """Make ``module.<name>``'s pruning permanent (``BasePruningMethod.remove``)."""
    for key, hook in _pruning_hooks(module).items():
        if hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"Parameter '{name}' of module {type(module).__name__} has to be "
                     "pruned before pruning can be removed")


def is_pruned(module: Module) -> bool:
    """Whether ``module`` or any submodule has a pruned parameter."""
    return any(_pruning_hooks(m) for m in module.modules())


__all__ = ["BasePruningMethod", "CustomFromMask", "Identity", "L1Unstructured",
           "LnStructured", "PruningContainer", "RandomStructured", "RandomUnstructured",
           "custom_from_mask", "global_unstructured", "identity", "is_pruned",
           "l1_unstructured", "ln_structured", "random_structured", "random_unstructured",
           "remove"]
