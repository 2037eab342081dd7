"""Probe 13's findings in Nova's core: NumPy-style keyword aliases (Spinning Up's
``.sum(axis=-1)``), ``nv.pi``/``e``/``inf``/``nan``, complex ``einsum``/``tensordot``
(an FNO's spectral weights), and ``autograd.grad(..., is_grads_batched=True)``."""
import math

import numpy as np
import pytest

import nova as nv

A = np.arange(6.0).reshape(2, 3)


@pytest.mark.parametrize("call,want", [
    (lambda x: x.sum(axis=-1), A.sum(-1)),
    (lambda x: x.sum(1, keepdims=True), A.sum(1, keepdims=True)),
    (lambda x: nv.mean(x, axis=0, keepdims=True), A.mean(0, keepdims=True)),
    (lambda x: x.amax(axis=1), A.max(1)),
    (lambda x: x.max(axis=1).values, A.max(1)),
    (lambda x: x.argmax(axis=0), A.argmax(0)),
    (lambda x: x.logsumexp(axis=1), np.log(np.exp(A).sum(1))),
    (lambda x: x.cumsum(axis=1), A.cumsum(1)),
    (lambda x: x.softmax(axis=1), np.exp(A) / np.exp(A).sum(1, keepdims=True)),
    (lambda x: nv.cat([x, x], axis=1), np.concatenate([A, A], 1)),
    (lambda x: nv.stack([x, x], axis=0), np.stack([A, A], 0)),
    (lambda x: x.unsqueeze(axis=0), A[None]),
    (lambda x: x.std(axis=1, keepdims=True), A.std(1, ddof=1, keepdims=True)),
])
def test_numpy_keyword_aliases(call, want):
    np.testing.assert_allclose(call(nv.tensor(A)).numpy(), want, rtol=1e-12)


def test_an_alias_and_its_name_together_is_an_error():
    with pytest.raises(TypeError, match=r"sum\(\) got both 'dim' and its alias 'axis'"):
        nv.tensor(A).sum(dim=0, axis=1)
    with pytest.raises(TypeError, match="got both 'keepdim' and its alias 'keepdims'"):
        nv.mean(nv.tensor(A), 0, keepdim=True, keepdims=True)


def test_math_constants():
    assert (nv.pi, nv.e) == (math.pi, math.e)
    assert math.isinf(nv.inf) and nv.inf > 0 and math.isnan(nv.nan)


def _c(rng, *shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex128)


def test_complex_einsum_and_tensordot():
    rng = np.random.default_rng(0)
    x, w, r = _c(rng, 2, 3, 5), _c(rng, 3, 4, 5), rng.standard_normal(5)
    X, W, R = nv.tensor(x), nv.tensor(w), nv.tensor(r)
    out = nv.einsum("bix,iox->box", X, W)               # an FNO layer's spectral mixing
    assert out.dtype == nv.complex128
    np.testing.assert_allclose(out.numpy(), np.einsum("bix,iox->box", x, w), rtol=1e-12)
    np.testing.assert_allclose(nv.einsum("bix,x->bi", [X, R]).numpy(),
                               np.einsum("bix,x->bi", x, r), rtol=1e-12)
    np.testing.assert_allclose(nv.tensordot(X, W, dims=([1, 2], [0, 2])).numpy(),
                               np.tensordot(x, w, axes=([1, 2], [0, 2])), rtol=1e-12)


def test_complex_einsum_gradient_through_real_parameters():
    """d/dw of |einsum(x, complex(w_re, w_im))|^2 summed, against central differences."""
    rng = np.random.default_rng(1)
    x = _c(rng, 2, 3)
    wr, wi = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))

    def loss(a, b):
        y = np.einsum("bi,io->bo", x, a + 1j * b)
        return float((np.abs(y) ** 2).sum())

    tr, ti = nv.tensor(wr, requires_grad=True), nv.tensor(wi, requires_grad=True)
    y = nv.einsum("bi,io->bo", nv.tensor(x), nv.complex(tr, ti))
    g_re, g_im = nv.autograd.grad((y.abs() ** 2).sum(), [tr, ti])
    eps = 1e-6
    for g, which in ((g_re, 0), (g_im, 1)):
        num = np.zeros_like(wr)
        for idx in np.ndindex(wr.shape):
            d = np.zeros_like(wr)
            d[idx] = eps
            plus = loss(wr + d, wi) if which == 0 else loss(wr, wi + d)
            minus = loss(wr - d, wi) if which == 0 else loss(wr, wi - d)
            num[idx] = (plus - minus) / (2 * eps)
        np.testing.assert_allclose(g.numpy(), num, rtol=1e-6, atol=1e-8)


def test_grad_with_batched_cotangents():
    a = np.array([0.1, 0.2, 0.3])
    x = nv.tensor(a, requires_grad=True)
    (jac,) = nv.autograd.grad(x.exp() * x, x, nv.eye(3, dtype=nv.float64),
                              is_grads_batched=True)
    np.testing.assert_allclose(jac.numpy(), np.diag(np.exp(a) * (1 + a)), rtol=1e-12)
    # the graph stays usable for the next call, as each row ran with retain_graph
    y = (x * x).sum()
    (rows,) = nv.autograd.grad(y, x, nv.tensor([1.0, 2.0], dtype=nv.float64),
                               is_grads_batched=True, retain_graph=True)
    np.testing.assert_allclose(rows.numpy(), [2 * a, 4 * a], rtol=1e-12)
    with pytest.raises(RuntimeError, match="needs grad_outputs"):
        nv.autograd.grad(y, x, is_grads_batched=True)
