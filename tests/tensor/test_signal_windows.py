"""Window functions: torch's top-level ``hann_window``/``hamming_window``/
``blackman_window``/``bartlett_window``/``kaiser_window`` (``periodic=True`` by default)
and ``nv.signal.windows`` (``torch.signal.windows``: ``sym=True`` by default), against
``scipy.signal.windows``. Windows are host constants: nothing compiles, so one engine."""
import numpy as np
import pytest
import scipy.signal.windows as sw

import nova as nv

W = nv.signal.windows
LENGTHS = (0, 1, 2, 5, 6)


@pytest.fixture(autouse=True)
def engine():
    with nv.engine("interp"):
        yield "interp"


# ---------------------------------------------------------------- nv.signal.windows

SIGNAL_CASES = {
    "hann": (lambda m, s: W.hann(m, sym=s), lambda m, s: sw.hann(m, s)),
    "hamming": (lambda m, s: W.hamming(m, sym=s), lambda m, s: sw.hamming(m, s)),
    "blackman": (lambda m, s: W.blackman(m, sym=s), lambda m, s: sw.blackman(m, s)),
    "bartlett": (lambda m, s: W.bartlett(m, sym=s), lambda m, s: sw.bartlett(m, s)),
    "nuttall": (lambda m, s: W.nuttall(m, sym=s), lambda m, s: sw.nuttall(m, s)),
    "cosine": (lambda m, s: W.cosine(m, sym=s), lambda m, s: sw.cosine(m, s)),
    "kaiser": (lambda m, s: W.kaiser(m, beta=5.0, sym=s),
               lambda m, s: sw.kaiser(m, 5.0, s)),
    "kaiser_default": (lambda m, s: W.kaiser(m, sym=s), lambda m, s: sw.kaiser(m, 12.0, s)),
    "gaussian": (lambda m, s: W.gaussian(m, std=1.5, sym=s),
                 lambda m, s: sw.gaussian(m, 1.5, s)),
    "exponential": (lambda m, s: W.exponential(m, tau=2.0, sym=s),
                    lambda m, s: sw.exponential(m, None, 2.0, s)),
    "general_hamming": (lambda m, s: W.general_hamming(m, alpha=0.6, sym=s),
                        lambda m, s: sw.general_hamming(m, 0.6, s)),
    "general_cosine": (lambda m, s: W.general_cosine(m, a=[0.5, 0.3, 0.2], sym=s),
                       lambda m, s: sw.general_cosine(m, [0.5, 0.3, 0.2], s)),
}


@pytest.mark.parametrize("name", sorted(SIGNAL_CASES))
def test_signal_windows_match_scipy(name):
    ours, ref = SIGNAL_CASES[name]
    for m in LENGTHS:
        for sym in (True, False):
            got = ours(m, sym)
            assert got.dtype == nv.float32 and got.shape == (m,), (m, sym)
            np.testing.assert_allclose(got.numpy(), ref(m, sym), rtol=1e-6, atol=1e-7,
                                       err_msg=f"M={m} sym={sym}")


def test_signal_windows_default_is_symmetric_and_options_apply():
    np.testing.assert_allclose(W.hann(5).numpy(), sw.hann(5, True), atol=1e-7)
    c = W.exponential(6, center=1.0, sym=False, dtype=nv.float64)
    assert c.dtype == nv.float64
    np.testing.assert_allclose(c.numpy(), sw.exponential(6, 1.0, 1.0, False), rtol=1e-12)
    g = W.gaussian(4, dtype=nv.float64, requires_grad=True)
    assert g.requires_grad and g.is_leaf
    nv.set_default_dtype(nv.float64)
    try:
        assert W.cosine(3).dtype == nv.float64
    finally:
        nv.set_default_dtype(nv.float32)


@pytest.mark.parametrize("call,error,match", [
    (lambda: W.hann(-1), ValueError, "non-negative"),
    (lambda: W.hann(4.5), TypeError, "int"),
    (lambda: W.hann(4, dtype=nv.float16), ValueError, "float32 or float64"),
    (lambda: W.hann(4, dtype=nv.int32), ValueError, "float32 or float64"),
    (lambda: W.gaussian(5, std=0.0), ValueError, "positive"),
    (lambda: W.exponential(5, tau=0.0), ValueError, "positive"),
    (lambda: W.exponential(5, center=1.0), ValueError, "symmetric"),
    (lambda: W.kaiser(5, beta=-1.0), ValueError, "non-negative"),
    (lambda: W.general_cosine(5, a=[]), ValueError, "empty"),
    (lambda: W.general_cosine(5, a=3), TypeError, "list or tuple"),
    (lambda: W.hann(4, layout="sparse"), ValueError, "strided"),
])
def test_signal_windows_refuse_what_torch_refuses(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_general_cosine_of_length_one_ignores_the_coefficients():
    assert W.general_cosine(1, a=[]).tolist() == [1.0]      # as PyTorch's


# ---------------------------------------------------------------- torch.*_window

def _hamming(m, periodic, alpha, beta):
    n = np.arange(m)
    return alpha - beta * np.cos(2 * np.pi * n / (m if periodic else m - 1))


TOP_LEVEL = {
    "hann_window": lambda m, sym: sw.hann(m, sym),
    "hamming_window": lambda m, sym: sw.hamming(m, sym),
    "blackman_window": lambda m, sym: sw.blackman(m, sym),
    "bartlett_window": lambda m, sym: sw.bartlett(m, sym),
    "kaiser_window": lambda m, sym: sw.kaiser(m, 12.0, sym),
}


@pytest.mark.parametrize("name", sorted(TOP_LEVEL))
def test_top_level_windows_match_scipy_and_default_to_periodic(name):
    fn, ref = getattr(nv, name), TOP_LEVEL[name]
    for m in LENGTHS:
        np.testing.assert_allclose(fn(m).numpy(), ref(m, False), atol=1e-6, rtol=1e-6)
        np.testing.assert_allclose(fn(m, False).numpy(), ref(m, True), atol=1e-6,
                                   rtol=1e-6)
        np.testing.assert_allclose(fn(m, periodic=True).numpy(), ref(m, False), atol=1e-6,
                                   rtol=1e-6)


def test_top_level_shape_parameters():
    np.testing.assert_allclose(nv.hamming_window(5, True, 0.6, 0.3).numpy(),
                               _hamming(5, True, 0.6, 0.3), rtol=1e-6)
    np.testing.assert_allclose(nv.hamming_window(3, False, 0.5).numpy(),
                               _hamming(3, False, 0.5, 0.46), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(nv.kaiser_window(6, False, 5.0).numpy(),
                               sw.kaiser(6, 5.0, True), rtol=1e-6)
    # I0 is even: a negative beta is |beta| (PyTorch does not refuse it here)
    np.testing.assert_allclose(nv.kaiser_window(5, True, -3.0).numpy(),
                               sw.kaiser(5, 3.0, False), rtol=1e-6)


def test_top_level_dtype_device_requires_grad():
    for d in (nv.float16, nv.bfloat16, nv.float64):
        w = nv.hann_window(4, dtype=d)
        assert w.dtype == d
        # float64 values rounded once: 0.5 exactly in float16 and bfloat16
        np.testing.assert_allclose(w.numpy().astype(np.float64), [0.0, 0.5, 1.0, 0.5],
                                   atol=1e-15)
    w = nv.blackman_window(5, device="cpu", requires_grad=True, layout=nv.strided)
    assert w.requires_grad and w.is_leaf and w.device == nv.device("cpu")
    (w * 2.0).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), 2.0)


@pytest.mark.parametrize("call,errors,match", [
    (lambda: nv.hann_window(-1), (ValueError, RuntimeError), "non-negative"),
    (lambda: nv.bartlett_window(4, dtype=nv.int64), (ValueError, RuntimeError),
     "floating point"),
    (lambda: nv.kaiser_window(4, dtype=nv.bool), (ValueError, RuntimeError),
     "floating point"),
    (lambda: nv.hann_window(4.0), (TypeError,), "int"),
    (lambda: nv.hann_window(True), (TypeError,), "int"),
    (lambda: nv.hann_window(4, 1), (TypeError,), "periodic"),
])
def test_top_level_windows_refuse_what_torch_refuses(call, errors, match):
    for error in errors:             # PyTorch raises RuntimeError; Nova's rules ValueError
        with pytest.raises(error, match=match):
            call()


def test_against_torch_where_installed():
    torch = pytest.importorskip("torch")
    for m in (1, 4, 7):
        for periodic in (True, False):
            for name in TOP_LEVEL:
                np.testing.assert_allclose(getattr(nv, name)(m, periodic).numpy(),
                                           getattr(torch, name)(m, periodic).numpy(),
                                           atol=2e-6)
            for name in ("hann", "blackman", "bartlett", "nuttall", "cosine", "kaiser",
                         "gaussian", "exponential", "hamming"):
                np.testing.assert_allclose(
                    getattr(W, name)(m, sym=periodic, dtype=nv.float64).numpy(),
                    getattr(torch.signal.windows, name)(m, sym=periodic,
                                                        dtype=torch.float64).numpy(),
                    atol=1e-12)
