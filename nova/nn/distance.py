"""Distances between vectors: ``F.cosine_similarity``, ``F.pairwise_distance``,
``F.pdist`` and the ``CosineSimilarity``/``PairwiseDistance`` modules, PyTorch's
semantics.

The norms are ``vector_norm``'s, whose gradient at a zero vector is PyTorch's, 0 (the
plain ``sqrt(sum x^2)`` would give ``0 * inf = NaN`` there): coincident points in
``pdist`` and a zero input of ``cosine_similarity`` get finite gradients, as in PyTorch.
"""
from __future__ import annotations

import numpy as np

from nova.core.shapes import normalize_dim
from nova.tensor.numeric import vector_norm
from nova.nn.module import Module
from nova.tensor import ops
from nova.tensor.constants import constant
from nova.tensor.arrays import index_select
from nova.tensor.tensor import Tensor


def _floating_pair(op: str, x1: Tensor, x2: Tensor) -> tuple[Tensor, Tensor]:
    for name, t in (("x1", x1), ("x2", x2)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
    x1, x2 = ops.operands(op, x1, x2)
    return ops._as_float(op, x1), ops._as_float(op, x2)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``sum(x1/||x1|| * x2/||x2||)`` along ``dim`` of the broadcast inputs, each norm
    clamped at ``eps``. As in PyTorch, each vector is divided by its norm before the
    product (so the result stays in [-1, 1]) and the clamp changes the value only: the
    gradient flows through the norm as if unclamped."""
    x1, x2 = _floating_pair("cosine_similarity", x1, x2)
    d = normalize_dim("cosine_similarity", dim, x1.ndim, x1.shape)

    def unit(x: Tensor) -> Tensor:
        n = vector_norm(x, 2, d, keepdim=True)
        # the value clamped, the gradient unclamped; (where, not n + (max(n, eps) - n):
        # an infinite norm gave inf - inf = NaN)
        clamped = ops.where(ops.ge(n, eps), n, ops.add(n, ops.sub(eps, n).detach()))
        return ops.div(x, clamped)

    return ops.sum(ops.mul(unit(x1), unit(x2)), d)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """``||x1 - x2 + eps||_p`` along the last dim of the broadcast inputs."""
    x1, x2 = _floating_pair("pairwise_distance", x1, x2)
    diff = ops.add(ops.sub(x1, x2), eps)
    if diff.ndim == 0:          # two 0-d inputs: |x1 - x2 + eps|_p of one element, 0-d
        return vector_norm(diff, p)
    return vector_norm(diff, p, diff.ndim - 1, keepdim)


def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """The ``p``-norm distance between every pair of rows ``i < j`` of an ``(N, M)``
    input, in row-major order of the pairs: ``N (N - 1) / 2`` values."""
    ops._check_tensor("pdist", input)
    if input.ndim != 2:
        raise ValueError(f"pdist: only supports 2-D tensors (N, M), got shape {input.shape}")
    if not p >= 0:
        raise ValueError(f"pdist: only supports non-negative p values, got {p}")
    x = ops._as_float("pdist", input)
    i, j = np.triu_indices(x.shape[0], 1)
    rows = index_select(x, 0, constant(i.astype(np.int64), device=x.device))
    cols = index_select(x, 0, constant(j.astype(np.int64), device=x.device))
    return vector_norm(ops.sub(rows, cols), p, 1)


class CosineSimilarity(Module):
    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


__all__ = ["cosine_similarity", "pairwise_distance", "pdist", "CosineSimilarity",
           "PairwiseDistance"]
