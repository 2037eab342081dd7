"""Parameters as one flat vector and back (``torch.nn.utils.convert_parameters``)."""
from __future__ import annotations

from collections.abc import Iterable

from nova.tensor.movement import cat
from nova.tensor.tensor import Tensor


def _same_device(op: str, param: Tensor, first: Tensor | None) -> Tensor:
    """The first parameter seen; raises if ``param`` lives on another device."""
    if not isinstance(param, Tensor):
        raise TypeError(f"{op}: expected Tensors, got {type(param).__name__}")
    if first is None:
        return param
    if param.device != first.device:
        raise TypeError(f"{op}: found two parameters on different devices ({first.device} "
                        f"and {param.device}), this is currently not supported.")
    return first


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and concatenated in order into one 1-D tensor
    (differentiable with respect to each of them)."""
    first = None
    flat = []
    for param in parameters:
        first = _same_device("parameters_to_vector", param, first)
        flat.append(param.reshape(-1))
    if not flat:
        raise ValueError("parameters_to_vector: expected at least one parameter, got none")
    return cat(flat)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Make each parameter's ``.data`` the next ``numel`` elements of the 1-D ``vec``,
    in order (elements left over are ignored), as PyTorch's: the parameters then share
    ``vec``'s storage, so an in-place update of ``vec`` changes them and one of a
    parameter (under ``no_grad``) changes ``vec``; each keeps its own ``requires_grad``
    and ``.grad``."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"vector_to_parameters: expected a Tensor, but got: "
                        f"{type(vec).__name__}")
    if vec.ndim != 1:
        raise RuntimeError(f"vector_to_parameters: vec must be 1-D, got shape {vec.shape}")
    first = None
    pointer = 0
    for param in parameters:
        first = _same_device("vector_to_parameters", param, first)
        n = param.numel()
        if pointer + n > vec.shape[0]:
            raise RuntimeError(f"vector_to_parameters: vec of {vec.shape[0]} elements is too "
                               f"short: the parameters so far need {pointer + n}")
        param.data = vec[pointer:pointer + n].reshape(param.shape).detach()
        pointer += n


__all__ = ["parameters_to_vector", "vector_to_parameters"]
