"""Vector products as reductions: a ``nova.matmul`` with a unit M, N or K dim.

A matrix-vector product -- ``M == 1``: a Linear layer applied to one row, each step of
batch-1 generation; ``N == 1``: ``W @ v``, ``torch.dot`` -- has nothing to block: the
matrix is read once and each element is used once. The BLIS kernel packs the matrix
anyway and runs its register tile over one row, so on the 2-core AVX-512 VM
``x @ W.T`` with a 4096 x 4096 float32 ``W`` took 6.5 ms, where the same sum written
as ``(W * x).sum(-1)`` -- a row reduction, vectorized along K and split across the
threads over the outputs -- took 1.9 ms (numpy 1.5 ms), and ``torch.dot`` of two
200k-vectors 8.3 ms against 0.07 ms.

So such a product becomes that reduction: ``reduce_sum(matrix * broadcast(vector))``
over K, with the matrix read in place -- but only where the reduction walks it with
unit stride (``W`` itself under ``transpose(W)``, a row-major left operand). Read the
other way it would be a column reduction, no faster than the GEMM here (5.6 ms), and
the product is left alone. A few rows (``M <= FEW_ROWS``) against such a matrix are a
reduction over an ``(N, M, K)`` grid, transposed to ``(M, N)``. A unit K (an outer
product: the weight gradient of a one-row Linear) becomes the elementwise product of
its broadcast operands.

Only float32 and float64 products: a float16/bfloat16 product would round each term
to its dtype before the sum, where the GEMM keeps them in float32. Values: every
output is the same sum of the same products over K, added in the reduction's order
instead of the GEMM's (so equal to rounding, not bit for bit).
"""
from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from nova.compiler import dialect as nd
from nova.compiler.passes.checks import replace_each

_FLOATS = ("f32", "f64")

# A product of at most this many rows by a matrix read along K (a batch of a few
# rows, as in batch-2..4 generation) is a reduction too, over an (N, M, K) grid: each
# row of the matrix is read once from memory and meets the M rows in cache. Measured
# on the 2-core AVX-512 VM, float32, GEMM against the reduction: N = K = 4096, M = 2:
# 6.4 / 3.0 ms, M = 4: 6.2 / 4.4 ms, M = 8: 6.4 / 7.1 ms (the GEMM wins from 8);
# N = 50304, K = 768 (a language model's head): M = 2 25.1 / 7.1 ms, M = 4 12.9 / 7.7.
FEW_ROWS = 4


class _Builder:
    """Ops inserted before ``at``, carrying its attributes (its source location)."""

    def __init__(self, at: Operation, element: str):
        self.at, self.element = at, element

    def _add(self, cls: type, operands: list[SSAValue], shape: tuple[int, ...],
             **properties) -> SSAValue:
        op = cls.create(operands=operands, result_types=[nd.tensor_type(shape, self.element)],
                        properties=properties, attributes=dict(self.at.attributes))
        self.at.parent.insert_op_before(op, self.at)
        return op.results[0]

    def broadcast(self, v: SSAValue, shape: tuple[int, ...]) -> SSAValue:
        """``v`` (same rank, unit dims where ``shape`` is larger) repeated to ``shape``."""
        if nd.shape_of(v) == shape:
            return v
        return self._add(nd.BroadcastInDimOp, [v], shape,
                         dims=nd.i64_array(range(len(shape))))

    def spread(self, v: SSAValue, shape: tuple[int, ...], dims: tuple[int, ...]) -> SSAValue:
        """``v``'s dim ``i`` as dim ``dims[i]`` of ``shape``, repeated along the others."""
        return self._add(nd.BroadcastInDimOp, [v], shape, dims=nd.i64_array(dims))

    def reshape(self, v: SSAValue, shape: tuple[int, ...]) -> SSAValue:
        return self._add(nd.ReshapeOp, [v], shape)

    def swap_last_two(self, v: SSAValue) -> SSAValue:
        if nd.swaps_last_two(v.owner):
            return v.owner.input
        shape = nd.shape_of(v)
        r = len(shape)
        return self._add(nd.TransposeOp, [v], (*shape[:-2], shape[-1], shape[-2]),
                         perm=nd.i64_array([*range(r - 2), r - 1, r - 2]))

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(nd.MulOp, [a, b], nd.shape_of(a))

    def sum_last(self, v: SSAValue) -> SSAValue:
        shape = nd.shape_of(v)
        return self._add(nd.ReduceSumOp, [v], shape[:-1],
                         axes=nd.i64_array([len(shape) - 1]))


def _walks_last_dim(value: SSAValue, dim: int) -> bool:
    """Whether reading ``value`` along ``dim`` walks what it views along that one's last
    dim: every value is laid out row-major (a buffer, a computed value, a reshape), so
    only transposes and broadcasts on the way move the dim."""
    viewed = nd.viewed_dim(value, dim)
    return viewed is not None and viewed[1] == len(nd.shape_of(viewed[0])) - 1


def _rewritten(op: nd.MatmulOp) -> SSAValue | None:
    """The reduction (or product) computing ``op``'s value, built before it; None where
    the GEMM stays (module docstring)."""
    a, b = op.lhs, op.rhs
    element = nd.element_name(op.result.type.element_type)
    if element not in _FLOATS:
        return None
    *batch, m, k = nd.shape_of(a)
    n = nd.shape_of(b)[-1]
    out = nd.shape_of(op.result)
    r = len(out)
    build = _Builder(op, element)
    if k == 1:                                   # (M, 1) x (1, N): an outer product
        return build.mul(build.broadcast(a, out), build.broadcast(b, out))
    if n == 1 and _walks_last_dim(a, r - 1):
        row = build.reshape(b, (*batch, 1, k))   # (K, 1) -> (1, K): the same order
        return build.reshape(build.sum_last(build.mul(a, build.broadcast(row, (*batch, m, k)))),
                             out)
    if m == 1 and _walks_last_dim(b, r - 2):
        matrix = build.swap_last_two(b)          # (N, K), read along K in place
        return build.reshape(build.sum_last(build.mul(matrix, build.broadcast(a, (*batch, n, k)))),
                             out)
    if m <= FEW_ROWS and _walks_last_dim(b, r - 2):
        # (N, M, K): each row of the matrix meets the M rows of a while it is in cache
        nb = len(batch)
        grid = (*batch, n, m, k)
        matrix = build.spread(build.swap_last_two(b), grid, (*range(nb), nb, nb + 2))
        rows = build.spread(a, grid, (*range(nb), nb + 1, nb + 2))
        return build.swap_last_two(build.sum_last(build.mul(matrix, rows)))
    return None


def vector_products(module: ModuleOp) -> ModuleOp:
    """Rewrite every matrix-vector, few-row and outer product (module docstring) in
    place."""
    return replace_each(module, nd.MatmulOp, _rewritten)
