"""``nova.fft`` against numpy's FFTs: every transform, lengths padded and truncated, odd
and even, every ``norm``, n-dimensional forms, and a gradient through a real loss."""
import numpy as np
import pytest

import nova as nv
from tests.helpers import sgd_step_losses


@pytest.fixture(autouse=True)
def engine():
    with nv.engine("interp"):
        yield


RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 8))
Z = RNG.standard_normal((3, 8)) + 1j * RNG.standard_normal((3, 8))


def _close(got, ref, tol=1e-9):
    got = got.numpy()
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
def test_one_dimensional_transforms_match_numpy(norm):
    x, z = nv.tensor(X), nv.tensor(Z)            # float64 and complex128
    assert nv.fft.fft(x).dtype == nv.complex128
    for n in (None, 5, 11):
        _close(nv.fft.fft(z, n=n, norm=norm), np.fft.fft(Z, n=n, norm=norm))
        _close(nv.fft.fft(x, n=n, norm=norm), np.fft.fft(X, n=n, norm=norm))
        _close(nv.fft.ifft(z, n=n, norm=norm), np.fft.ifft(Z, n=n, norm=norm))
        _close(nv.fft.rfft(x, n=n, norm=norm), np.fft.rfft(X, n=n, norm=norm))
        _close(nv.fft.hfft(z, n=n, norm=norm), np.fft.hfft(Z, n=n, norm=norm))
        _close(nv.fft.ihfft(x, n=n, norm=norm), np.fft.ihfft(X, n=n, norm=norm))
    for n in (None, 7, 8, 14):
        _close(nv.fft.irfft(z, n=n, norm=norm), np.fft.irfft(Z, n=n, norm=norm))
    _close(nv.fft.fft(z, dim=0, norm=norm), np.fft.fft(Z, axis=0, norm=norm))


def test_n_dimensional_transforms_match_numpy():
    x, z = nv.tensor(X), nv.tensor(Z)
    _close(nv.fft.fft2(z), np.fft.fft2(Z))
    _close(nv.fft.ifft2(z, norm="ortho"), np.fft.ifft2(Z, norm="ortho"))
    _close(nv.fft.fftn(z, s=(4, 6)), np.fft.fftn(Z, s=(4, 6), axes=(0, 1)))
    _close(nv.fft.ifftn(z, dim=1), np.fft.ifftn(Z, axes=(1,)))
    _close(nv.fft.rfft2(x), np.fft.rfft2(X))
    _close(nv.fft.rfftn(x, dim=(1, 0)), np.fft.rfftn(X, axes=(1, 0)))
    _close(nv.fft.irfftn(z, s=(3, 6)), np.fft.irfftn(Z, s=(3, 6), axes=(0, 1)))
    _close(nv.fft.irfft2(nv.fft.rfft2(x)), X)


def test_hermitian_n_dimensional_transforms():
    """hfftn/hfft2 are the inverse real transforms of the conjugate scaled as forward
    transforms, ihfftn/ihfft2 the conjugate of rfftn scaled as inverse ones
    (``torch.fft.hfftn``; numpy has the 1-D pair only, so the reference is built from
    its rfftn/irfftn); they were missing."""
    x, z = nv.tensor(X), nv.tensor(Z)
    swap = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}
    for norm in (None, "ortho", "forward"):
        _close(nv.fft.hfftn(z, norm=norm), np.fft.irfftn(Z.conj(), norm=swap[norm]))
        _close(nv.fft.hfft2(z, s=(4, 6), norm=norm),
               np.fft.irfftn(Z.conj(), s=(4, 6), norm=swap[norm]))
        _close(nv.fft.ihfftn(x, norm=norm), np.fft.rfftn(X, norm=swap[norm]).conj())
        _close(nv.fft.ihfft2(x, s=(2, 5), norm=norm),
               np.fft.rfftn(X, s=(2, 5), norm=swap[norm]).conj())
    _close(nv.fft.hfftn(z, dim=(1, 0), s=(4, -1)),
           np.fft.irfftn(Z.conj(), s=(4, 4), axes=(1, 0), norm="forward"))
    _close(nv.fft.ihfftn(x, dim=0), np.fft.ihfft(X, axis=0))
    _close(nv.fft.hfftn(z, dim=-1), np.fft.hfft(Z))
    # round trip, and a gradient through the real input
    np.testing.assert_allclose(nv.fft.hfft2(nv.fft.ihfft2(x), s=X.shape).numpy(), X,
                               atol=1e-12)
    xg = nv.tensor(X, requires_grad=True)
    nv.fft.ihfftn(xg).imag.sum().backward()
    basis = np.eye(X.size).reshape((X.size,) + X.shape)                 # linear in x:
    reference = [np.fft.rfftn(e, norm="forward").conj().imag.sum() for e in basis]
    np.testing.assert_allclose(xg.grad.numpy().reshape(-1), reference, atol=1e-12)
    with pytest.raises(ValueError, match="hfftn: Invalid normalization mode: 'half'"):
        nv.fft.hfftn(z, norm="half")
    with pytest.raises(RuntimeError, match="ihfftn expects a real input"):
        nv.fft.ihfftn(z)
    with pytest.raises(RuntimeError, match="hfftn must transform at least one axis"):
        nv.fft.hfftn(z, dim=())


def test_a_length_of_minus_one_keeps_the_dimension_as_pytorch():
    """``s=(-1, n)``: -1 keeps that dimension's own length (PyTorch's convention; for
    the inverse real transforms, their default 2 (m - 1)); it raised "Invalid number
    of data points (-1)"."""
    x, z = nv.tensor(X), nv.tensor(Z)
    _close(nv.fft.fftn(z, s=(-1, 5)), np.fft.fftn(Z, s=(3, 5), axes=(0, 1)))
    _close(nv.fft.fft2(x, s=(5, -1)), np.fft.fft2(X, s=(5, 8)))
    _close(nv.fft.ifftn(z, s=(-1, 2)), np.fft.ifftn(Z, s=(3, 2), axes=(0, 1)))
    _close(nv.fft.rfftn(x, s=(2, -1)), np.fft.rfftn(X, s=(2, 8), axes=(0, 1)))
    _close(nv.fft.irfftn(z, s=(-1, -1)), np.fft.irfftn(Z, s=(3, 14), axes=(0, 1)))
    _close(nv.fft.irfft2(z, s=(2, -1)), np.fft.irfft2(Z, s=(2, 14)))


def test_frequencies_and_shifts():
    np.testing.assert_allclose(nv.fft.fftfreq(7, 0.5).numpy(), np.fft.fftfreq(7, 0.5),
                               rtol=1e-6)
    np.testing.assert_allclose(nv.fft.rfftfreq(8).numpy(), np.fft.rfftfreq(8), rtol=1e-6)
    assert nv.fft.fftfreq(4).dtype == nv.float32
    _close(nv.fft.fftshift(nv.tensor(Z), dim=1), np.fft.fftshift(Z, axes=1))
    _close(nv.fft.ifftshift(nv.tensor(X[:, :7])), np.fft.ifftshift(X[:, :7]))


def test_float32_inputs_give_complex64():
    x = nv.tensor(X.astype(np.float32))
    out = nv.fft.rfft(x)
    assert out.dtype == nv.complex64
    np.testing.assert_allclose(out.numpy(), np.fft.rfft(X.astype(np.float32)), atol=2e-5)


def test_gradient_of_a_spectral_loss_matches_finite_differences():
    """sum |rfft(x)|^2 weighted per frequency, differentiated through the DFT products."""
    w = np.linspace(0.5, 2.0, 5)

    def loss(v):
        return float((np.abs(np.fft.rfft(v)) ** 2 * w).sum())

    x0 = RNG.standard_normal(8)
    x = nv.tensor(x0, requires_grad=True)
    ((nv.fft.rfft(x).abs() ** 2) * nv.tensor(w)).sum().backward()
    eps = 1e-6
    fd = [(loss(x0 + eps * e) - loss(x0 - eps * e)) / (2 * eps) for e in np.eye(8)]
    np.testing.assert_allclose(x.grad.numpy(), fd, rtol=1e-6, atol=1e-6)


def test_errors_name_the_transform():
    x = nv.tensor(X)
    with pytest.raises(ValueError, match="fft: Invalid normalization mode: 'half'"):
        nv.fft.fft(x, norm="half")
    with pytest.raises(RuntimeError, match=r"rfft: Invalid number of data points \(0\)"):
        nv.fft.rfft(x, n=0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        nv.fft.fft(x, dim=2)
    with pytest.raises(RuntimeError, match="rfft expects a real input"):
        nv.fft.rfft(nv.tensor(Z))
    with pytest.raises(RuntimeError, match="same length"):
        nv.fft.fftn(x, s=(2, 2, 2), dim=(0, 1))


def test_rfft_of_a_real_signal_has_exactly_zero_imaginary_dc_and_nyquist():
    """Regression: the zero frequency's imaginary part was -0 (the sum negated after)
    and the Nyquist frequency's +-3e-16 (np.sin(pi)), so ``angle`` gave -pi where
    PyTorch gives pi. Both are +0 now: quarter turns of the DFT matrix are exact."""
    x = np.array([-1.0, 2.0, -3.0, 0.5], np.float32)
    out = nv.fft.rfft(nv.tensor(x))
    im = out.imag.numpy()
    assert im[0] == 0.0 and not np.signbit(im[0])
    assert im[-1] == 0.0 and not np.signbit(im[-1])
    np.testing.assert_allclose(out.angle().numpy(), np.angle(np.fft.rfft(x.astype(np.float64))),
                               rtol=1e-6)
    np.testing.assert_allclose(out.real.numpy(), np.fft.rfft(x.astype(np.float64)).real,
                               rtol=1e-6)
    # and fft / ifft, real and complex input: the sign folded into the DFT matrix
    for got, want in ((nv.fft.fft(nv.tensor(x)), np.fft.fft(x.astype(np.float64))),
                      (nv.fft.ifft(nv.tensor(x)), np.fft.ifft(x.astype(np.float64))),
                      (nv.fft.fft(nv.fft.fft(nv.tensor(x))),
                       np.fft.fft(np.fft.fft(x.astype(np.float64))))):
        im = got.imag.numpy()
        assert not np.signbit(im[0]) and not np.signbit(im[2]), im
        np.testing.assert_allclose(got.angle().numpy(), np.angle(want), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("transform", ["rfft", "irfft", "hfft"])
def test_a_compiled_step_through_a_transform_replays(transform):
    """nv.compile replays a training step through the transforms: irfft (and hfft,
    which uses it) made its Hermitian weights as new host data every call, which a
    replay cannot supply, so such steps never replayed (an FNO's every step)."""
    x = nv.tensor(RNG.standard_normal((2, 8)).astype(np.float32))
    w = nv.nn.Parameter(nv.tensor(RNG.standard_normal((2, 8)).astype(np.float32)))
    forward = {"rfft": lambda v: nv.fft.rfft(v).abs(),
               "irfft": lambda v: nv.fft.irfft(nv.fft.rfft(v), n=8),
               "hfft": lambda v: nv.fft.hfft(nv.fft.rfft(v)[:, :4], n=6)}[transform]
    losses, replays = sgd_step_losses(lambda: forward(x * w).pow(2).mean(), [w])
    assert replays >= 3, replays
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]


def test_a_transform_over_no_dims_is_a_new_tensor():
    """``fftn`` of a 0-d tensor transforms nothing: its result's real part was the input
    itself, so a write into either showed in the other (fuzz_alias)."""
    for fn in (nv.fft.fftn, nv.fft.ifftn):
        x = nv.tensor(0.75)
        r = fn(x)
        r.fill_(9.0)
        assert x.item() == 0.75
        x = nv.tensor(0.75)
        r = fn(x)
        x.add_(1.0)
        assert r.real.item() == 0.75
