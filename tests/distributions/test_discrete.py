"""Bernoulli, Categorical and OneHotCategorical against formulas written here in float64
(scipy's ``log_expit``, ``entropy``): probs or logits, scores far in the tails, the
clamping of probabilities that PyTorch's logits have, sampling frequencies (a chi-square
test; a category of probability 0 is never drawn), shapes, enumerate_support and
gradients of the scores by finite differences."""
import math

import numpy as np
import pytest
import scipy.stats as st
from scipy.special import expit, log_expit

import nova as nv
import nova.distributions as D
from nova.autograd.gradcheck import gradcheck

PB = np.array([0.2, 0.7, 1e-3])
LB = np.array([-2.0, 0.5, 30.0])
V = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
PC = np.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])
IDX = np.array([[2, 0], [1, 1], [0, 2]])     # (sample, batch) category indices


def f64(a):
    return nv.tensor(np.asarray(a, dtype=np.float64), dtype=nv.float64)


def _bernoulli_ref(logits, v):
    """log-probability and entropy from the logits, with no cancellation."""
    p, q = expit(logits), expit(-logits)
    lp = v * log_expit(logits) + (1 - v) * log_expit(-logits)
    ent = -(p * log_expit(logits) + q * log_expit(-logits))
    return lp, ent


def test_values_against_formulas():
    bp = D.Bernoulli(f64(PB))
    bl = D.Bernoulli(logits=f64(LB))
    cp = D.Categorical(f64(PC * 3))           # normalized by the distribution
    cl = D.Categorical(logits=f64(np.log(PC) + 1))
    oh = D.OneHotCategorical(f64(PC))
    onehot = nv.tensor(np.eye(3)[IDX])
    outs = [bp.log_prob(f64(V)), bp.entropy(), bp.mean, bp.variance, bp.mode, bp.logits,
            bl.log_prob(f64(V)), bl.entropy(), bl.probs, bl.variance,
            cp.log_prob(nv.tensor(IDX)), cp.entropy(), cp.probs, cp.mode, cp.logits,
            cl.log_prob(nv.tensor(IDX)), cl.entropy(), cl.logits, cl.probs,
            oh.log_prob(onehot.double()), oh.entropy(), oh.mode, oh.mean, oh.variance,
            cp.mean, cp.variance, D.Bernoulli(f64([0.5, 0.0, 1.0])).mode,
            D.Bernoulli(f64([0.0, 1.0])).logits, D.Categorical(f64([0.0, 1.0])).entropy()]
    nv.realize(*outs)
    got = [o.numpy() for o in outs]
    lp, ent = _bernoulli_ref(np.log(PB) - np.log1p(-PB), V)
    np.testing.assert_allclose(got[0], lp, rtol=1e-14)
    np.testing.assert_allclose(got[1], ent, rtol=1e-14)
    np.testing.assert_allclose(got[2], PB, rtol=0)
    np.testing.assert_allclose(got[3], PB * (1 - PB), rtol=1e-15)
    np.testing.assert_array_equal(got[4], [0.0, 1.0, 0.0])
    np.testing.assert_allclose(got[5], np.log(PB / (1 - PB)), rtol=1e-14)
    lp, ent = _bernoulli_ref(LB, V)
    np.testing.assert_allclose(got[6], lp, rtol=1e-14)   # log(1 - sigmoid(30)) exactly
    np.testing.assert_allclose(got[7], ent, rtol=1e-13)  # 2.9e-12 at logit 30
    np.testing.assert_allclose(got[8], 1 / (1 + np.exp(-LB)), rtol=1e-15)
    np.testing.assert_allclose(got[9], np.exp(log_expit(LB) + log_expit(-LB)), rtol=1e-14)
    rows = np.arange(2)[None, :]
    np.testing.assert_allclose(got[10], np.log(PC[rows, IDX]), rtol=1e-14)
    np.testing.assert_allclose(got[11], st.entropy(PC.T), rtol=1e-14)
    np.testing.assert_allclose(got[12], PC, rtol=1e-15)
    np.testing.assert_array_equal(got[13], [2, 0])
    np.testing.assert_allclose(got[14], np.log(PC), rtol=1e-14)
    np.testing.assert_allclose(got[15], np.log(PC[rows, IDX]), rtol=1e-14)
    np.testing.assert_allclose(got[16], st.entropy(PC.T), rtol=1e-14)
    np.testing.assert_allclose(got[17], np.log(PC), rtol=1e-14)   # normalized logits
    np.testing.assert_allclose(got[18], PC, rtol=1e-15)
    np.testing.assert_allclose(got[19], np.log(PC[rows, IDX]), rtol=1e-14)
    np.testing.assert_allclose(got[20], st.entropy(PC.T), rtol=1e-14)
    np.testing.assert_array_equal(got[21], np.eye(3)[[2, 0]])
    np.testing.assert_allclose(got[22], PC, rtol=1e-15)
    np.testing.assert_allclose(got[23], PC * (1 - PC), rtol=1e-15)
    assert got[24].shape == got[25].shape == (2,) and np.isnan(got[24]).all()
    assert np.isnan(got[25]).all()
    np.testing.assert_array_equal(got[26], [np.nan, 0.0, 1.0])
    eps = np.finfo(np.float64).eps   # PyTorch's clamp of probabilities for the logits
    np.testing.assert_allclose(got[27], [math.log(eps) - math.log1p(-eps),
                                         math.log1p(-eps) - math.log(eps)], rtol=1e-15)
    assert 0 <= got[28] < 1e-15


def test_sampling_frequencies_and_shapes():
    """20000 draws: chi-square tests of the category and coin frequencies (a category
    of probability 0 never appears); one-hot samples; shapes and dtypes."""
    n = 20000
    probs = np.array([[0.2, 0.0, 0.3, 0.5], [0.6, 0.1, 0.05, 0.25]])
    c = D.Categorical(f64(probs))
    cl = D.Categorical(logits=f64(np.log(probs[1])))
    b = D.Bernoulli(logits=f64(np.log(PB / (1 - PB))))
    oh = D.OneHotCategorical(logits=f64(np.log(PC)))
    nv.manual_seed(3)
    sc, scl, sb, soh = c.sample((n,)), cl.sample((n,)), b.sample((n,)), oh.sample((2, 5))
    nv.realize(sc, scl, sb, soh)
    assert sc.shape == (n, 2) and sc.dtype == nv.int64 and scl.shape == (n,)
    assert sb.shape == (n, 3) and sb.dtype == nv.float64
    assert soh.shape == (2, 5, 2, 3) and soh.dtype == nv.float64
    for draws, p in ((sc.numpy()[:, 0], probs[0]), (sc.numpy()[:, 1], probs[1]),
                     (scl.numpy(), probs[1])):
        counts = np.bincount(draws, minlength=4)
        assert counts[p == 0].sum() == 0
        keep = p > 0
        assert st.chisquare(counts[keep], n * p[keep]).pvalue > 1e-4
    ones = sb.numpy().sum(0)
    assert set(np.unique(sb.numpy())) <= {0.0, 1.0}
    assert st.chisquare(np.concatenate([ones, n - ones]),
                        n * np.concatenate([PB, 1 - PB])).pvalue > 1e-4
    s = soh.numpy()
    assert set(np.unique(s)) <= {0.0, 1.0} and (s.sum(-1) == 1).all()
    assert b.sample().shape == (3,) and c.sample().shape == (2,)
    assert D.Categorical(f64([0.5, 0.5])).sample().shape == ()
    assert c.log_prob(nv.tensor(np.zeros((5, 1), np.int64))).shape == (5, 2)
    assert c.batch_shape == (2,) and c.event_shape == () and c.param_shape == (2, 4)
    assert oh.batch_shape == (2,) and oh.event_shape == (3,)
    assert c.expand((6, 2)).sample((3,)).shape == (3, 6, 2)
    assert oh.expand((6, 2)).sample().shape == (6, 2, 3)
    assert b.expand((4, 3)).batch_shape == (4, 3)
    assert c.enumerate_support().shape == (4, 2)
    assert c.enumerate_support(expand=False).shape == (4, 1)
    assert b.enumerate_support().shape == (2, 3)
    assert oh.enumerate_support().shape == (3, 2, 3)
    assert not c.has_rsample and c.has_enumerate_support
    with pytest.raises(NotImplementedError, match="rsample"):
        c.rsample()


def test_gradients_of_the_scores():
    """log_prob and entropy differentiate with respect to logits and probs."""
    idx = nv.tensor(IDX)
    v = f64(V[0])

    def fn(logits, probs):
        cl = D.Categorical(logits=logits)
        cp = D.Categorical(probs)
        bl = D.Bernoulli(logits=logits[0])
        return (cl.log_prob(idx), cl.entropy(), cp.log_prob(idx), cp.entropy(),
                bl.log_prob(v), bl.entropy())

    assert gradcheck(fn, [np.log(PC) + 0.5, PC * 2])


def test_argument_errors():
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified"):
        D.Bernoulli(f64([0.2]), f64([0.3]))
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified"):
        D.Categorical()
    with pytest.raises(ValueError, match="at least one-dimensional"):
        D.Categorical(f64(0.5))
    with pytest.raises(TypeError, match="`probs` must be a Tensor"):
        D.Categorical([0.5, 0.5])
    oh = D.OneHotCategorical(f64([0.5, 0.5]))
    with pytest.raises(ValueError, match=r"must match event_shape: \(3,\) vs \(2,\)"):
        oh.log_prob(f64([1.0, 0.0, 0.0]))


def test_edge_semantics_match_torch():
    """Where PyTorch's conventions decide the value (clamped probabilities at 0 and 1,
    zero-probability categories, Uniform's half-open interval, modes at ties), the
    numbers are PyTorch's."""
    torch = pytest.importorskip("torch")
    td = torch.distributions
    pb = [0.0, 1.0, 0.5]
    pc = [[0.0, 0.25, 0.75], [0.5, 0.5, 0.0]]
    v = [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]
    idx = [[0, 2], [1, 0]]
    mine = [D.Bernoulli(f64(pb)), D.Categorical(f64(pc)),
            D.Uniform(f64([0.0, 0.0]), f64([1.0, 2.0]), validate_args=False)]
    theirs = [td.Bernoulli(torch.tensor(pb, dtype=torch.float64)),
              td.Categorical(torch.tensor(pc, dtype=torch.float64)),
              td.Uniform(torch.tensor([0.0, 0.0], dtype=torch.float64),
                         torch.tensor([1.0, 2.0], dtype=torch.float64), validate_args=False)]
    values = [(f64(v), torch.tensor(v, dtype=torch.float64)),
              (nv.tensor(idx), torch.tensor(idx)),
              (f64([[0.0, 2.0], [1.0, -1.0]]), torch.tensor([[0.0, 2.0], [1.0, -1.0]],
                                                            dtype=torch.float64))]
    outs, refs = [], []
    for m, t, (vm, vt) in zip(mine, theirs, values):
        outs += [m.log_prob(vm), m.entropy(), m.mode]
        refs += [t.log_prob(vt), t.entropy(), t.mode]
    outs += [mine[0].logits, mine[1].logits]
    refs += [theirs[0].logits, theirs[1].logits]
    nv.realize(*outs)
    for o, r in zip(outs, refs):
        # (atol: log(1 - eps) at a clamped probability of 0 is -2.2e-16 here, and
        # PyTorch's subtraction rounds it to -0.0)
        np.testing.assert_allclose(o.numpy(), r.numpy(), rtol=1e-13, atol=3e-16)
