"""What ``Embedding`` and ``EmbeddingBag`` share: the checked ``padding_idx``, the table
given to them (``_weight``, ``from_pretrained``) and the initialization of a new one."""
from __future__ import annotations

from typing import Any

from nova.autograd.grad_mode import no_grad
from nova.nn import init
from nova.nn.parameter import Parameter
from nova.tensor.tensor import Tensor


def checked_padding_idx(op: str, padding_idx: int | None, num_embeddings: int) -> int | None:
    """``padding_idx`` in ``[0, num_embeddings)`` (a negative one counts from the end)."""
    if padding_idx is None:
        return None
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(f"{op}: padding_idx {padding_idx} must be within "
                         f"num_embeddings {num_embeddings}")
    return padding_idx % num_embeddings


def given_table(op: str, weight: Tensor, num_embeddings: int, embedding_dim: int,
                requires_grad: bool) -> Parameter:
    """A copy of ``weight`` as the table, which must be ``(num_embeddings, embedding_dim)``."""
    if tuple(weight.shape) != (num_embeddings, embedding_dim):
        raise ValueError(f"{op}: _weight of shape {tuple(weight.shape)} does not match "
                         f"({num_embeddings}, {embedding_dim})")
    return Parameter(weight.detach().clone(), requires_grad=requires_grad)


def init_table(weight: Any, padding_idx: int | None) -> None:
    """N(0, 1), the ``padding_idx`` row at zero (PyTorch's initialization)."""
    init.normal_(weight)
    if padding_idx is not None:
        with no_grad():
            weight[padding_idx] = 0.0
