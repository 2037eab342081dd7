"""``nova.tensor.products`` against numpy: contractions, distances (and their gradients
where points coincide), norms of slices, diagonal embeddings."""
import numpy as np
import pytest

import nova as nv
from nova.autograd.gradcheck import gradcheck

RNG = np.random.default_rng(11)


def _f32(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def test_contractions_match_numpy():
    a, b, m, v, w = _f32(2, 3, 4), _f32(4, 3, 5), _f32(3, 3), _f32(4), _f32(3)
    b1, b2, base = _f32(2, 3, 4), _f32(2, 4, 5), _f32(3, 5)
    got = [nv.tensordot(nv.tensor(a), nv.tensor(b), ([1, 2], [1, 0])),
           nv.tensordot(nv.tensor(a), nv.tensor(a), 0).sum(),
           nv.tensor(a).tensordot(nv.tensor(a), 3),
           nv.inner(nv.tensor(a), nv.tensor(v)), nv.inner(nv.tensor(2.0), nv.tensor(v)),
           nv.vdot(nv.tensor(v), nv.tensor(v)),
           nv.addr(nv.tensor(m), nv.tensor(w), nv.tensor(w), beta=0.5, alpha=2),
           nv.addbmm(nv.tensor(base), nv.tensor(b1), nv.tensor(b2), alpha=3),
           nv.matrix_power(nv.tensor(m), 5), nv.matrix_power(nv.tensor(m), 0),
           nv.tensor(np.stack([m, m])).matrix_power(2)]
    nv.realize(*got)
    want = [np.tensordot(a, b, ([1, 2], [1, 0])), np.tensordot(a, a, 0).sum(),
            np.tensordot(a, a, 3), np.inner(a, v), 2 * v, v @ v,
            0.5 * m + 2 * np.outer(w, w), base + 3 * np.einsum("bij,bjk->ik", b1, b2),
            np.linalg.matrix_power(m.astype(np.float64), 5), np.eye(3),
            np.stack([m @ m, m @ m])]
    for g, x in zip(got, want):
        np.testing.assert_allclose(g.numpy(), x, rtol=2e-5, atol=2e-5)
    with pytest.raises(ValueError, match="tensordot: contracted dims differ"):
        nv.tensordot(nv.tensor(a), nv.tensor(b), ([0], [0]))
    with pytest.raises(ValueError, match="matrix_power: expects a"):
        nv.matrix_power(nv.tensor(a), 2)

    # negative powers: powers of the inverse (batched), and a singular matrix refuses
    spd = np.array([[2.0, 1.0], [0.0, 3.0]])
    got = [nv.matrix_power(nv.tensor(spd), -2),
           nv.tensor(np.stack([spd, spd.T])).matrix_power(-3)]
    inv = np.linalg.inv(spd)
    want = [inv @ inv, np.stack([np.linalg.matrix_power(x, 3) for x in (inv, inv.T)])]
    for g, x in zip(got, want):
        np.testing.assert_allclose(g.numpy(), x, rtol=1e-6, atol=1e-7)
    with pytest.raises(nv.linalg.LinAlgError, match="singular"):
        nv.matrix_power(nv.zeros(2, 2), -1)


@pytest.mark.parametrize("p", [0, 1, 2, 3.5, np.inf])
def test_cdist_is_the_norm_of_every_difference(p):
    x1, x2 = _f32(2, 5, 3), _f32(2, 4, 3)
    x2[0, 1] = x1[0, 2]                         # a coincident pair
    d = x1[:, :, None, :].astype(np.float64) - x2[:, None, :, :]
    want = (np.count_nonzero(d, -1) if p == 0 else np.linalg.norm(d, p, -1))
    np.testing.assert_allclose(nv.cdist(nv.tensor(x1), nv.tensor(x2), p).numpy(), want,
                               rtol=3e-6, atol=1e-6)
    assert nv.cdist(nv.tensor(x1), nv.tensor(x2), p).shape == (2, 5, 4)


def test_distances_have_zero_gradient_where_points_coincide():
    x1 = RNG.normal(size=(3, 2))
    x2 = np.concatenate([x1[:1], RNG.normal(size=(2, 2))])
    a = nv.tensor(x1, requires_grad=True)
    nv.cdist(a, nv.tensor(x2)).sum().backward()
    assert np.isfinite(a.grad.numpy()).all()
    z = nv.zeros(3, requires_grad=True)
    nv.dist(z, nv.zeros(3)).backward()
    assert z.grad.tolist() == [0, 0, 0]
    assert gradcheck(lambda u, v: nv.cdist(u, v, 2), [x1 + 0.1, x2])
    assert gradcheck(lambda u, v: nv.cdist(u, v, 1.5), [x1 + 0.1, x2])


def test_vector_norm_gradient_is_zero_at_the_zero_vector_for_every_order():
    """Was NaN (the root's infinite slope times the sum's zero): F.normalize and
    clip_grad_norm_ of an all-zero row gave NaN gradients."""
    rows = np.array([[0.0, 0.0], [1.0, -2.0], [0.0, 3.0]])
    for p, zero_row_norm in [(2, 0.0), (3, 0.0), (1.5, 0.0), (0.5, 0.0), (-1, 0.0)]:
        x = nv.tensor(rows, requires_grad=True)
        n = nv.linalg.vector_norm(x, p, 1)
        n.sum().backward()
        g = x.grad.numpy()
        assert n.numpy()[0] == zero_row_norm and np.isfinite(g).all(), p
        assert g[0].tolist() == [0, 0] and g[2][0] == 0, p
        with np.errstate(divide="ignore"):
            want = np.sum(np.abs(rows) ** p, 1) ** (1 / p)
        np.testing.assert_allclose(n.numpy()[1:], want[1:], rtol=1e-12)
    assert nv.linalg.vector_norm(nv.tensor([0.0, 3.0]), -1).item() == 0.0
    assert nv.linalg.vector_norm(nv.tensor([np.inf, np.inf]), -1).item() == np.inf
    assert nv.renorm(nv.tensor([[1e30], [0.5]]), 2, 0, 2.0).tolist() == [[2.0], [0.5]]


def test_the_zero_norm_counts_and_has_pytorchs_zero_gradient():
    """``ord=0`` counts the nonzero entries; its gradient is zeros, not missing (a
    backward through it raised "does not require grad"), in every form that reaches it."""
    rows = np.array([[0.0, 2.0], [3.0, -4.0]])
    forms = [lambda x: nv.linalg.vector_norm(x, 0, 1), lambda x: x.norm(p=0),
             lambda x: nv.nn.functional.pairwise_distance(x, nv.zeros(2, 2), p=0)]
    for form, want in zip(forms, ([1.0, 2.0], 3.0, [2.0, 2.0])):
        x = nv.tensor(rows, requires_grad=True)
        n = form(x)
        assert n.requires_grad and n.tolist() == want
        n.sum().backward()
        assert x.grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert not nv.linalg.vector_norm(nv.tensor(rows), 0).requires_grad


def test_renorm_diag_embed_and_diagflat():
    a = _f32(3, 2, 4) * 3
    norms = np.linalg.norm(a.reshape(3, -1).astype(np.float64), 2, 1)
    scale = np.where(norms > 4, 4 / (norms + 1e-7), 1.0)
    v = _f32(2, 3)
    got = [nv.renorm(nv.tensor(a), 2, 0, 4.0)]
    want = [a * scale[:, None, None]]
    for off in (0, 2, -1):
        for d1, d2 in [(-2, -1), (0, 2), (2, 0), (1, 0)]:
            got.append(nv.diag_embed(nv.tensor(v), off, d1, d2))
            n = 3 + abs(off)
            m = np.zeros((2, n, n), np.float32)
            for b in range(2):
                m[b] = np.diag(v[b], off)
            want.append(np.moveaxis(m, (0, 1, 2), [k for k in range(3) if k not in
                                                   (d1 % 3, d2 % 3)] + [d1 % 3, d2 % 3]))
    got.append(nv.diagflat(nv.tensor(v), 1))
    want.append(np.diagflat(v, 1))
    nv.realize(*got)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-6)
    assert gradcheck(lambda t: nv.renorm(t, 2, 1, 1.0), [RNG.normal(size=(2, 3)) * 2])
    with pytest.raises(ValueError, match="diag_embed: diagonal dimensions"):
        nv.diag_embed(nv.tensor(v), 0, 1, 1)


def test_zero_sized_contractions_and_matrix_powers_of_their_own():
    assert nv.tensordot(nv.ones(2, 0), nv.ones(0, 3), 1).tolist() == [[0.0] * 3] * 2
    a = nv.ones(2, 2)
    b = a.matrix_power(1)
    b.add_(1.0)
    assert a.tolist() == [[1.0, 1.0]] * 2
    c = nv.ones(3, 2, 2).matrix_power(0)
    c.add_(1.0)
    assert c[0].tolist() == [[2.0, 1.0], [1.0, 2.0]]
