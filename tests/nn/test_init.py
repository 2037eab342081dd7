"""``nv.nn.init``: PyTorch's gains and formulas, statistics of large draws within a few
standard errors, exact structure where it is exact (orthogonal, eye, dirac, truncation
bounds, sparsity per column), reproducible draws from a ``generator``, and PyTorch's
errors for shapes an initializer does not support."""
import math

import numpy as np
import pytest

import nova as nv
from nova import nn
from nova.nn import init


def _moments(t):
    a = t.numpy().astype(np.float64).ravel()
    return a.mean(), a.std(), a.size


def test_calculate_gain_matches_pytorch():
    for name in ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                 "conv_transpose2d", "conv_transpose3d", "sigmoid"):
        assert init.calculate_gain(name) == 1
    assert init.calculate_gain("tanh") == 5.0 / 3
    assert init.calculate_gain("relu") == math.sqrt(2.0)
    assert init.calculate_gain("selu") == 0.75
    assert init.calculate_gain("leaky_relu") == math.sqrt(2.0 / (1 + 0.01 ** 2))
    assert init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2.0 / 1.04)
    assert init.calculate_gain("leaky_relu", 0) == math.sqrt(2.0)
    with pytest.raises(ValueError, match="negative_slope True is not a valid number"):
        init.calculate_gain("leaky_relu", True)
    with pytest.raises(ValueError, match="unsupported nonlinearity 'gelu'; valid: linear"):
        init.calculate_gain("gelu")


def test_normal_family_statistics():
    g = nv.Generator(7)
    w = nv.zeros(200, 250)                     # fan_in 250, fan_out 200
    checks = [
        (lambda: init.normal_(w, 1.0, 0.5, generator=g), 1.0, 0.5),
        (lambda: init.xavier_normal_(w, gain=2.0, generator=g), 0.0, 2.0 * math.sqrt(2 / 450)),
        (lambda: init.kaiming_normal_(w, a=0.2, generator=g), 0.0,
         math.sqrt(2.0 / 1.04) / math.sqrt(250)),
        (lambda: init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu", generator=g),
         0.0, math.sqrt(2.0) / math.sqrt(200)),
    ]
    for fill, mean, std in checks:
        fill()
        m, s, n = _moments(w)
        assert abs(m - mean) < 4 * std / math.sqrt(n)
        assert abs(s - std) < 4 * std / math.sqrt(2 * n)


def test_uniform_family_bounds_and_generator():
    w = nv.zeros(200, 300)
    init.kaiming_uniform_(w, a=math.sqrt(5), generator=nv.Generator(1))
    bound = math.sqrt(2.0 / 6.0) * math.sqrt(3.0 / 300)        # Linear's default init
    a = w.numpy()
    assert np.abs(a).max() <= bound and np.abs(a).max() > 0.99 * bound
    assert abs(a.std() - bound / math.sqrt(3)) < 4 * bound / math.sqrt(3 * a.size)
    again = nv.zeros(200, 300)
    init.kaiming_uniform_(again, a=math.sqrt(5), generator=nv.Generator(1))
    np.testing.assert_array_equal(again.numpy(), a)            # same generator state, same draw
    init.uniform_(w, -3.0, -1.0, generator=nv.Generator(2))
    assert w.numpy().min() >= -3.0 and w.numpy().max() < -1.0
    with pytest.raises(ValueError, match="kaiming_normal_: mode must be 'fan_in' or 'fan_out'"):
        init.kaiming_normal_(w, mode="fan_avg")
    with pytest.warns(UserWarning, match="zero-element tensors is a no-op"):
        init.kaiming_uniform_(nv.zeros(0, 3))


def test_trunc_normal_lies_in_its_bounds_with_the_truncated_moments():
    w = nv.zeros(400, 250)
    mean, std, a, b = 0.5, 2.0, -1.0, 3.0
    init.trunc_normal_(w, mean, std, a, b, generator=nv.Generator(3))
    values = w.numpy().astype(np.float64)
    assert values.min() >= a and values.max() <= b
    alpha, beta = (a - mean) / std, (b - mean) / std
    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)   # noqa: E731
    cdf = lambda z: (1 + math.erf(z / math.sqrt(2))) / 2             # noqa: E731
    z = cdf(beta) - cdf(alpha)
    want_mean = mean + std * (pdf(alpha) - pdf(beta)) / z
    want_var = std ** 2 * (1 + (alpha * pdf(alpha) - beta * pdf(beta)) / z
                           - ((pdf(alpha) - pdf(beta)) / z) ** 2)
    assert abs(values.mean() - want_mean) < 4 * math.sqrt(want_var / values.size)
    assert abs(values.var() - want_var) < 0.02 * want_var
    narrow = nv.zeros(1000)
    init.trunc_normal_(narrow, 0.0, 1.0, 0.1, 0.2)             # far in one side of the mass
    assert narrow.numpy().min() >= np.float32(0.1) and narrow.numpy().max() <= np.float32(0.2)
    with pytest.warns(UserWarning, match="mean is more than 2 std from"):
        init.trunc_normal_(nv.zeros(10), 5.0, 1.0, -1.0, 1.0)
    with pytest.raises(ValueError, match="a \\(2.0\\) must not be greater than b"):
        init.trunc_normal_(nv.zeros(3), a=2.0, b=1.0)


def test_orthogonal_is_orthogonal_with_gain():
    tall, wide = nv.zeros(40, 12), nv.zeros(6, 3, 2, 2)         # (wide: 6 x 12 flattened)
    init.orthogonal_(tall, generator=nv.Generator(4))
    init.orthogonal_(wide, gain=2.0, generator=nv.Generator(4))
    q = tall.numpy().astype(np.float64)
    np.testing.assert_allclose(q.T @ q, np.eye(12), atol=1e-6)
    r = wide.numpy().astype(np.float64).reshape(6, 12)
    np.testing.assert_allclose(r @ r.T, 4.0 * np.eye(6), atol=4e-6)
    with pytest.raises(ValueError, match="orthogonal_: only tensors with 2 or more"):
        init.orthogonal_(nv.zeros(5))


def test_eye_dirac_and_sparse_structure():
    e = init.eye_(nv.zeros(3, 5))
    np.testing.assert_array_equal(e.numpy(), np.eye(3, 5))
    d = init.dirac_(nv.ones(4, 3, 3, 5), groups=2)
    want = np.zeros((4, 3, 3, 5))
    for g in range(2):
        for c in range(2):
            want[g * 2 + c, c, 1, 2] = 1
    np.testing.assert_array_equal(d.numpy(), want)
    d1 = init.dirac_(nv.ones(2, 3, 4))
    want1 = np.zeros((2, 3, 4))
    want1[0, 0, 2] = want1[1, 1, 2] = 1
    np.testing.assert_array_equal(d1.numpy(), want1)
    s = init.sparse_(nv.zeros(50, 8), 0.3, std=0.5, generator=nv.Generator(5)).numpy()
    np.testing.assert_array_equal((s == 0).sum(0), [15] * 8)      # ceil(0.3 * 50) per column
    assert np.all(s.any(0)) and 0.3 < s[s != 0].std() < 0.7
    for fn, arg, message in ((init.eye_, nv.zeros(2, 2, 2), "eye_: only tensors with 2 dim"),
                             (init.dirac_, nv.zeros(2, 2), "dirac_: only tensors with 3, 4"),
                             (init.sparse_, nv.zeros(4), "sparse_: only tensors with 2 dim")):
        with pytest.raises(ValueError, match=message):
            fn(arg) if fn is not init.sparse_ else fn(arg, 0.1)
    with pytest.raises(ValueError, match="dim 0 \\(3\\) must be divisible by groups \\(2\\)"):
        init.dirac_(nv.zeros(3, 2, 3), groups=2)


def test_initializers_leave_no_autograd_history():
    p = nn.Parameter(nv.zeros(8, 4))
    for fill in (init.orthogonal_, init.xavier_normal_, init.eye_, init.kaiming_normal_,
                 lambda t: init.trunc_normal_(t, std=0.02)):
        fill(p)
        assert p.requires_grad and p.grad_fn is None
