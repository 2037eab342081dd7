"""Gradient checks for every differentiable op: central differences in float64, and the
float32 gradients against the float64 ones."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import nova as nv
from nova.autograd.gradcheck import analytic_grads, gradcheck


def distinct(shape, seed, positive=False):
    """Values that are pairwise distinct and away from 0 (no kinks, no ties)."""
    n = int(np.prod(shape))
    rng = np.random.default_rng(seed)
    v = (rng.permutation(n) - n / 2 + 0.5) * (2.0 / max(n, 1)) + rng.uniform(-0.02, 0.02, n)
    # (pushed away from 0, not replaced by one value: equal replacements made ties, where
    # finite differences see half the slope max(dim) gives its returned index)
    v = np.where(np.abs(v) < 0.05, v + np.copysign(0.1, v), v)
    if positive:
        v = np.abs(v) + 0.5
    return v.reshape(shape)


def check(fn, arrays, f32_rtol=2e-3):
    gradcheck(fn, arrays)
    g64 = analytic_grads(fn, arrays, nv.float64)
    g32 = analytic_grads(fn, [a.astype(np.float32) for a in arrays], nv.float32)
    for a, b in zip(g32, g64):
        np.testing.assert_allclose(a, b, rtol=f32_rtol, atol=f32_rtol * (1 + np.abs(b).max()))


def distinct_many(shapes, seed, positive=False):
    """Like ``distinct``, with values distinct across all the arrays too."""
    sizes = [int(np.prod(s)) for s in shapes]
    flat = distinct((sum(sizes),), seed, positive)
    out, start = [], 0
    for s, n in zip(shapes, sizes):
        out.append(flat[start:start + n].reshape(s))
        start += n
    return out


small_shapes = hnp.array_shapes(min_dims=0, max_dims=3, max_side=3)
seeds = st.integers(0, 2**16)

UNARY = {
    "neg": (lambda x: -x, False), "exp": (nv.exp, False), "log": (nv.log, True),
    "sqrt": (nv.sqrt, True), "rsqrt": (nv.rsqrt, True), "reciprocal": (nv.reciprocal, False),
    "sin": (nv.sin, False), "cos": (nv.cos, False), "tanh": (nv.tanh, False),
    "erf": (nv.erf, False), "abs": (nv.abs, False), "sigmoid": (nv.sigmoid, False),
    "expm1": (nv.expm1, False), "log1p": (nv.log1p, True),
    "relu": (nv.relu, False), "gelu": (nv.gelu, False),
    "gelu_tanh": (lambda x: nv.gelu(x, approximate="tanh"), False), "silu": (nv.silu, False),
    "square": (nv.square, False), "pow_scalar": (lambda x: x ** 3, False),
    "rpow": (lambda x: 2.0 ** x, False), "clamp": (lambda x: x.clamp(-0.5, 0.4), False),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@settings(max_examples=8)
@given(shape=small_shapes, seed=seeds)
def test_unary(name, shape, seed):
    fn, positive = UNARY[name]
    check(fn, [distinct(shape, seed, positive)])


BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "maximum": nv.maximum, "minimum": nv.minimum,
    "pow": lambda a, b: a.abs() ** b, "where": lambda a, b: nv.where(a > b, a, b * 2),
    "clamp_tensors": lambda a, b: nv.clamp(a, min=b - 0.1, max=b + 0.2),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@settings(max_examples=8)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3),
       seed=seeds)
def test_binary_with_broadcasting(name, shapes, seed):
    check(BINARY[name], distinct_many(shapes.input_shapes, seed))


REDUCTIONS = {
    "sum": lambda x, d, k: x.sum(d, keepdim=k), "mean": lambda x, d, k: x.mean(d, keepdim=k),
    "amax": lambda x, d, k: x.amax(d, keepdim=k), "amin": lambda x, d, k: x.amin(d, keepdim=k),
    "var": lambda x, d, k: x.var(d, keepdim=k), "std": lambda x, d, k: x.std(d, keepdim=k),
    "logsumexp": lambda x, d, k: nv.logsumexp(x, d if d is not None else tuple(range(x.ndim)),
                                              keepdim=k),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@settings(max_examples=8)
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=3), seed=seeds,
       data=st.data())
def test_reductions_with_dims_and_keepdim(name, shape, seed, data):
    nd = len(shape)
    dim = data.draw(st.one_of(st.none(), st.integers(-nd, nd - 1),
                              st.lists(st.integers(0, nd - 1), min_size=1, unique=True).map(tuple)))
    keep = data.draw(st.booleans())
    check(lambda x: REDUCTIONS[name](x, dim, keep), [distinct(shape, seed)])


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "max_values"])
@settings(max_examples=8)
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), seed=seeds,
       data=st.data())
def test_softmax_family_and_max_dim(name, shape, seed, data):
    d = data.draw(st.integers(-len(shape), len(shape) - 1))
    fns = {"softmax": lambda x: x.softmax(d), "log_softmax": lambda x: x.log_softmax(d),
           "max_values": lambda x: x.max(d).values}
    check(fns[name], [distinct(shape, seed)])


@st.composite
def matmul_case(draw):
    m, k, n = (draw(st.integers(1, 3)) for _ in range(3))
    kind = draw(st.sampled_from(["vv", "vm", "mv", "mm", "bmm", "broadcast"]))
    return {"vv": ((k,), (k,)), "vm": ((k,), (k, n)), "mv": ((m, k), (k,)),
            "mm": ((m, k), (k, n)), "bmm": ((2, m, k), (2, k, n)),
            "broadcast": ((2, 1, m, k), (3, k, n))}[kind]


@settings(max_examples=12)
@given(shapes=matmul_case(), seed=seeds)
def test_matmul(shapes, seed):
    check(lambda a, b: a @ b, distinct_many(shapes, seed))


MOVEMENT = {
    "reshape": lambda x: x.reshape(2, -1) * 1.0,
    "permute": lambda x: x.permute(2, 0, 1), "transpose": lambda x: x.transpose(0, 2),
    "unsqueeze_squeeze": lambda x: x.unsqueeze(1).squeeze(), "flatten": lambda x: x.flatten(1),
    "expand": lambda x: x[:, :1].expand(2, 5, 3), "cat": lambda x: nv.cat([x, x * 2], 1),
    "stack": lambda x: nv.stack([x, x.exp()], 0), "split": lambda x: x.split(2, dim=1)[1],
    "chunk": lambda x: x.chunk(2, dim=2)[0] * x.chunk(2, dim=2)[0],
    "getitem_basic": lambda x: x[1, 1:4:2, None, ...],
    "getitem_tensor": lambda x: x[nv.tensor([1, 1, 0])][:, nv.tensor([0, 3])],
    "getitem_mixed": lambda x: x[:, nv.tensor([[4, 0], [2, 2]]), 1],
    # one index per line covering the other dims: the gradient is a one-hot mask
    "gather": lambda x: x.gather(1, nv.tensor([[[0, 1, 0]], [[4, 4, 2]]])),
    "gather_last": lambda x: x.gather(2, nv.tensor([[[2], [0], [1], [1], [0]]] * 2)),
    # repeated indices, and an index narrower than the input: a scatter-add
    "gather_repeats": lambda x: x.gather(1, nv.tensor([[[0, 1, 0], [0, 3, 0]],
                                                       [[4, 4, 2], [4, 1, 2]]])),
    "gather_narrow": lambda x: x.gather(1, nv.tensor([[[0, 1]], [[4, 4]]])),
    "scatter_add": lambda x: nv.scatter_add(x, 1, nv.tensor([[[0, 1, 0]], [[4, 4, 2]]]),
                                            x[:, :1] * 3),
    "masked_fill": lambda x: x.masked_fill(x > 0.2, 0.0),
    "tril": lambda x: nv.tril(x, -1), "triu": lambda x: nv.triu(x),
    "repeat": lambda x: x.repeat(1, 2, 1),
}


@pytest.mark.parametrize("name", sorted(MOVEMENT))
@settings(max_examples=4)
@given(seed=seeds)
def test_movement_indexing_and_gather(name, seed):
    check(MOVEMENT[name], [distinct((2, 5, 3), seed)])


def test_setitem_and_inplace_views_are_differentiable():
    def fn(x, v):
        y = x * 1.0
        y[0, 1:3] = v
        y[1] *= 2
        y[:, nv.tensor([0])] = v[:1].reshape(1, 1) * 3
        return y
    check(fn, distinct_many([(2, 4), (2,)], 3))


def test_integer_outputs_carry_no_gradient():
    x = nv.tensor([1.0, 3.0, 2.0], requires_grad=True)
    assert not x.argmax().requires_grad
    assert not (x > 1).requires_grad
    assert not x.long().requires_grad
    assert x.max(0).values.requires_grad and not x.max(0).indices.requires_grad


def test_cast_between_floats_casts_the_gradient_back():
    x = nv.tensor([1.0, 2.0], dtype=nv.float64, requires_grad=True)
    (x.float() * nv.tensor([3.0, 4.0])).sum().backward()
    assert x.grad.dtype == nv.float64 and x.grad.tolist() == [3.0, 4.0]
    h = nv.tensor([1.0, 2.0], dtype=nv.float16, requires_grad=True)
    (h.float() ** 2).sum().backward()
    assert h.grad.dtype == nv.float16 and h.grad.tolist() == [2.0, 4.0]
