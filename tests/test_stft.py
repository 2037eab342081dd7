"""``nv.stft`` / ``nv.istft`` against a numpy reference of PyTorch's definition (framing,
centring pads, window padding, one-sided spectra, overlap-add with the window envelope),
their errors, round trips, and a gradient by finite differences; torch itself where it
is installed."""
import warnings

import numpy as np
import pytest

import nova as nv
from tests.helpers import sgd_step_losses


@pytest.fixture(autouse=True)
def engine():
    with nv.engine("interp"), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)       # (the no-window warnings)
        yield


RNG = np.random.default_rng(0)
X1 = RNG.standard_normal(21)
X2 = RNG.standard_normal((2, 19))
_NP_PAD = {"reflect": "reflect", "replicate": "edge", "circular": "wrap", "constant": "constant"}


def _full_window(window, win, n_fft):
    w = np.ones(win) if window is None else window
    left = (n_fft - win) // 2
    out = np.zeros(n_fft, dtype=w.dtype)
    out[left:left + win] = w
    return out


def ref_stft(x, n_fft, hop=None, win=None, window=None, center=True, pad_mode="reflect",
             normalized=False, onesided=None, align=False):
    """PyTorch's stft, written out in numpy."""
    hop = n_fft // 4 if hop is None else hop
    win = n_fft if win is None else win
    x = np.atleast_2d(x)
    if center:
        x = np.pad(x, [(0, 0), (n_fft // 2, n_fft // 2)], mode=_NP_PAD[pad_mode])
    w = _full_window(window, win, n_fft)
    if align and win < n_fft:
        left = (n_fft - win) // 2
        x = np.pad(x, [(0, 0), (left, n_fft - win - left)])
    n_frames = 1 + (x.shape[-1] - n_fft) // hop
    frames = np.stack([x[:, t * hop:t * hop + n_fft] * w for t in range(n_frames)], 1)
    onesided = not np.iscomplexobj(x) and not np.iscomplexobj(w) if onesided is None \
        else onesided
    spec = np.fft.rfft(frames, axis=-1) if onesided else np.fft.fft(frames, axis=-1)
    if normalized:
        spec = spec / np.sqrt(n_fft)
    return np.swapaxes(spec, -1, -2)


def ref_istft(spec, n_fft, hop=None, win=None, window=None, center=True, length=None):
    """PyTorch's istft (one-sided, real output), written out in numpy."""
    hop = n_fft // 4 if hop is None else hop
    win = n_fft if win is None else win
    w = _full_window(window, win, n_fft)
    frames = np.fft.irfft(np.swapaxes(spec, -1, -2), n=n_fft, axis=-1) * w
    n_frames = frames.shape[-2]
    expected = n_fft + hop * (n_frames - 1)
    y = np.zeros(frames.shape[:-2] + (expected,))
    env = np.zeros(expected)
    for t in range(n_frames):
        y[..., t * hop:t * hop + n_fft] += frames[..., t, :]
        env[t * hop:t * hop + n_fft] += w * w
    start = n_fft // 2 if center else 0
    end = start + length if length is not None else (expected - n_fft // 2 if center
                                                      else expected)
    y, env = y[..., start:min(end, expected)], env[start:min(end, expected)]
    y = y / env
    if end > expected:
        y = np.concatenate([y, np.zeros(y.shape[:-1] + (end - expected,))], -1)
    return y


def _close(got, ref, tol=1e-10):
    got = got.numpy()
    assert got.shape == ref.shape, (got.shape, ref.shape)
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)


CASES = [
    dict(n_fft=8),
    dict(n_fft=8, hop=3, win=5, window="rand"),
    dict(n_fft=7, center=False),
    dict(n_fft=8, pad_mode="constant", normalized=True),
    dict(n_fft=8, pad_mode="circular", onesided=False),
    dict(n_fft=6, pad_mode="replicate", hop=2),
    dict(n_fft=8, hop=4, win=4, window="rand", center=False, align=True),
    dict(n_fft=8, hop=3, win=5),               # no window: win_length ones, centred
    dict(n_fft=6, hop=3, win=4, center=False),
]


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
@pytest.mark.parametrize("x", [X1, X2], ids=["1d", "2d"])
def test_stft_matches_the_reference(case, x):
    case = dict(case)
    window = RNG.random(case["win"]) if case.pop("window", None) else None
    kw = dict(hop_length=case.get("hop"), win_length=case.get("win"),
              center=case.get("center", True), pad_mode=case.get("pad_mode", "reflect"),
              normalized=case.get("normalized", False), onesided=case.get("onesided"))
    if case.get("align"):
        kw["align_to_window"] = True
    got = nv.stft(nv.tensor(x), case["n_fft"], window=None if window is None else
                  nv.tensor(window), return_complex=True, **kw)
    assert got.dtype == nv.complex128
    _close(got, ref_stft(x, case["n_fft"], case.get("hop"), case.get("win"), window,
                         kw["center"], kw["pad_mode"], kw["normalized"], kw["onesided"],
                         case.get("align", False)).reshape(got.shape))


def test_stft_of_a_complex_signal_is_two_sided_and_the_method_matches():
    z = X1 + 1j * RNG.standard_normal(21)
    zt = nv.tensor(X1).to(nv.complex128) + nv.tensor(z.imag) * 1j
    got = zt.stft(8, hop_length=3)                        # complex: return_complex defaults
    _close(got, ref_stft(z, 8, 3)[0])
    _close(nv.tensor(X1).stft(8, return_complex=True), ref_stft(X1, 8)[0])
    with pytest.raises(RuntimeError, match="onesided"):
        nv.stft(zt, 8, onesided=True)


def test_stft_return_complex_false_warns_and_returns_the_real_view():
    with pytest.warns(UserWarning, match="return_complex=False is deprecated"):
        got = nv.stft(nv.tensor(X1), 8, return_complex=False)
    ref = ref_stft(X1, 8)[0]
    _close(got, np.stack([ref.real, ref.imag], -1))


def test_stft_warns_without_a_window():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        nv.stft(nv.tensor(X1), 8, return_complex=True)
        nv.stft(nv.tensor(X1), 8, window=nv.ones(8, dtype=nv.float64), return_complex=True)
    assert [str(w.message)[:30] for w in seen] == ["A window was not provided. A r"]


@pytest.mark.parametrize("call, error, match", [
    (lambda x: nv.stft(x, 8), RuntimeError, "return_complex parameter be given"),
    (lambda x: nv.stft(x, 30, center=False, return_complex=True), RuntimeError,
     r"expected 0 < n_fft <= 21, but got n_fft=30"),
    (lambda x: nv.stft(x, 0, return_complex=True), RuntimeError, "n_fft=0"),
    (lambda x: nv.stft(x, 8, hop_length=0, return_complex=True), RuntimeError,
     "hop_length > 0"),
    (lambda x: nv.stft(x, 8, win_length=9, return_complex=True), RuntimeError,
     "0 < win_length <= n_fft"),
    (lambda x: nv.stft(x, 8, window=nv.ones(5), return_complex=True), RuntimeError,
     "window tensor of size equal to win_length=8"),
    (lambda x: nv.stft(x.reshape(3, 7, 1), 4, return_complex=True), RuntimeError,
     "1D or 2D"),
    (lambda x: nv.stft(x, 8, pad_mode="bogus", return_complex=True), NotImplementedError,
     "Unrecognised padding mode bogus"),
    (lambda x: nv.stft(x[:5], 12, return_complex=True), RuntimeError,
     "Padding size should be less than"),
    (lambda x: nv.stft(x.long(), 8, return_complex=True), RuntimeError,
     "floating point or complex"),
    (lambda x: nv.stft(x, 8, return_complex=True, align_to_window=True), RuntimeError,
     "align_to_window should only be set when center = false"),
])
def test_stft_errors(call, error, match):
    with pytest.raises(error, match=match):
        call(nv.tensor(X1))


@pytest.mark.parametrize("kw", [dict(), dict(hop_length=3, win_length=5),
                                dict(center=False, length=15), dict(length=30),
                                dict(normalized=True)],
                         ids=["default", "short-window", "no-center", "padded", "normalized"])
def test_istft_inverts_stft(kw):
    x = nv.tensor(X2)
    win = kw.get("win_length", 8)
    window = nv.tensor(np.hanning(win + 2)[1:-1]) if "win_length" in kw else None
    skw = {k: v for k, v in kw.items() if k != "length"}
    spec = nv.stft(x, 8, window=window, return_complex=True, **skw)
    got = nv.istft(spec, 8, window=window, **kw)
    if kw.get("normalized"):
        spec = nv.stft(x, 8, window=window, return_complex=True)
    ref = ref_istft(spec.numpy(), 8, kw.get("hop_length"), kw.get("win_length"),
                    None if window is None else window.numpy(), kw.get("center", True),
                    kw.get("length"))
    _close(got, ref)
    if kw.get("center", True) and "length" not in kw:        # lossless where covered
        _close(got, X2[:, :got.shape[-1]])


def test_istft_without_a_window_uses_win_length_ones():
    """``window=None`` with ``win_length < n_fft``: ``win_length`` ones, centred in
    ``n_fft`` (PyTorch's), in the overlap-add and its envelope alike."""
    spec = nv.stft(nv.tensor(X2), 8, hop_length=2, win_length=4, return_complex=True)
    got = nv.istft(spec, 8, hop_length=2, win_length=4, length=16)
    _close(got, ref_istft(spec.numpy(), 8, 2, 4, None, True, 16))
    _close(got, X2[:, :16])


def test_istft_two_sided_and_complex_output():
    z = X1 + 1j * RNG.standard_normal(21)
    zt = nv.tensor(X1).to(nv.complex128) + nv.tensor(z.imag) * 1j
    spec = nv.stft(zt, 8)
    back = nv.istft(spec, 8, return_complex=True)
    _close(back, z[:20])
    real_spec = nv.stft(nv.tensor(X1), 8, return_complex=True, onesided=False)
    _close(nv.istft(real_spec, 8), X1[:20])                  # two-sided, real output
    with pytest.warns(UserWarning, match="padded with zeros"):
        padded = nv.istft(real_spec, 8, length=30)    # 24 points of frames, then zeros
    assert padded.shape == (30,)
    np.testing.assert_allclose(padded.numpy()[24:], 0.0)


@pytest.mark.parametrize("call, match", [
    (lambda s: nv.istft(s.real, 8), "complex-valued input"),
    (lambda s: nv.istft(s, 8, onesided=False), "match n_fft when onesided=False"),
    (lambda s: nv.istft(s, 10), r"match n_fft / 2 \+ 1 when onesided=True"),
    (lambda s: nv.istft(s, 8, hop_length=9), "0 < hop_length <= win_length"),
    (lambda s: nv.istft(s, 8, win_length=9), "0 < win_length <= n_fft"),
    (lambda s: nv.istft(s, 8, window=nv.ones(6, dtype=nv.float64)), "Invalid window shape"),
    (lambda s: nv.istft(s[:, :0], 8), "cannot be empty"),
    (lambda s: nv.istft(s.unsqueeze(0).unsqueeze(0), 8), "3 or 4 dimensions"),
    (lambda s: nv.istft(s, 8, return_complex=True), "onesided output"),
    (lambda s: nv.istft(s, 8, window=nv.zeros(8, dtype=nv.float64)), "window overlap add"),
    (lambda s: nv.istft(s, 8, hop_length=8, center=False,
                        window=nv.tensor(np.hanning(8))), "NOLA"),
])
def test_istft_errors(call, match):
    spec = nv.stft(nv.tensor(X1), 8, return_complex=True)
    with pytest.raises(RuntimeError, match=match):
        call(spec)


def test_stft_and_istft_gradients_match_finite_differences():
    x0 = RNG.standard_normal(12)
    w0 = np.hanning(8) + 0.1
    probe = RNG.standard_normal(12)

    def loss(x, w):
        spec = nv.stft(x, 8, hop_length=2, window=w, return_complex=True)
        return (spec.abs() ** 2).sum() + (nv.istft(spec * 0.5, 8, hop_length=2, window=w,
                                                   length=12) * nv.tensor(probe)).sum()

    x = nv.tensor(x0, requires_grad=True)
    w = nv.tensor(w0, requires_grad=True)
    loss(x, w).backward()
    eps = 1e-6
    for leaf, base, other in ((x, x0, lambda v: (nv.tensor(v), nv.tensor(w0))),
                              (w, w0, lambda v: (nv.tensor(x0), nv.tensor(v)))):
        num = np.zeros_like(base)
        for i in range(base.size):
            hi, lo = base.copy(), base.copy()
            hi[i] += eps
            lo[i] -= eps
            num[i] = (loss(*other(hi)).item() - loss(*other(lo)).item()) / (2 * eps)
        np.testing.assert_allclose(leaf.grad.numpy(), num, rtol=1e-6, atol=1e-6)


def test_matches_torch_where_installed():
    torch = pytest.importorskip("torch")
    w = RNG.random(6)
    for kw in (dict(hop_length=3, win_length=6), dict(center=False, normalized=True)):
        window = (torch.tensor(w), nv.tensor(w)) if "win_length" in kw else (None, None)
        ref = torch.stft(torch.tensor(X2), 8, window=window[0], return_complex=True, **kw)
        got = nv.stft(nv.tensor(X2), 8, window=window[1], return_complex=True, **kw)
        _close(got, ref.numpy())
        _close(nv.istft(got, 8, window=window[1], **kw),
               torch.istft(ref, 8, window=window[0], **kw).numpy())


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_a_compiled_step_through_stft_replays(mode):
    """nv.compile replays a training step through stft: its centring pad's gather
    indices and the framing's (Tensor.unfold) were numpy arrays made anew per call --
    host data a replay cannot supply -- so every such step was recorded again."""
    x = nv.tensor(RNG.standard_normal((2, 64)).astype(np.float32))
    w = nv.nn.Parameter(nv.ones(2, 64))
    window = nv.hann_window(16)
    losses, replays = sgd_step_losses(
        lambda: nv.stft(x * w, 16, hop_length=4, window=window, center=True, pad_mode=mode,
                        return_complex=True).abs().pow(2).mean(), [w])
    assert replays >= 3, replays
    assert losses[-1] < losses[0]
