"""``nv.compile`` with complex tensors: a complex argument is guarded as one input (its
kind, shape, complex dtype, device) and read as its two real parts, a complex result is
rebuilt from its parts on replay, and a complex buffer is pinned where the module holds
it. References are numpy's complex arithmetic, or the uncompiled loop bit for bit."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import nova as nv
from nova.runtime.cache import RecompileWarning

rng = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def interpreted():
    """The capture is the same whatever runs the steps; the interpreter runs these
    tiny ones without compiling a kernel (one test below runs the compiled engine)."""
    with nv.engine("interp"):
        yield


def _complex(shape, dtype=np.complex64) -> np.ndarray:
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _log() -> str:
    return "\n".join(nv.debug.cache_stats().compile_log)


def _product_and_modulus(z, w):
    return z * w + z.conj(), (z.abs() * 2.0, w.real)


def _check_product(engine: str) -> None:
    fn = nv.compile(_product_and_modulus)
    replays_before = nv.debug.cache_stats().replays
    with nv.engine(engine), warnings.catch_warnings():
        warnings.simplefilter("error", RecompileWarning)     # nothing refused
        for _ in range(5):
            a, b = _complex((3, 4)), _complex((3, 4))
            out, (mod, re) = fn(nv.tensor(a), nv.tensor(b))
            assert out.dtype == nv.complex64 and out.is_complex()
            np.testing.assert_allclose(out.numpy(), a * b + a.conj(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(mod.numpy(), 2 * np.abs(a), rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal(re.numpy(), b.real)
    assert fn.recorded == 2 and fn.replays == 3
    assert nv.debug.cache_stats().replays - replays_before == 3


def test_complex_arguments_and_results_replay_with_each_calls_values():
    """Without the complex guard each call's argument was a new object (guarded by
    identity: a new key, recorded every call), and a complex result was refused."""
    _check_product("interp")


@pytest.mark.parametrize("engine", ["cpu"])
def test_complex_arguments_and_results_replay_on_the_compiled_engine(engine):
    _check_product(engine)


def test_a_complex_argument_viewing_a_real_tensor_replays():
    """``view_as_complex(x)`` (parts that view ``x``) is the same input as a complex
    tensor of its shape: the replays read each call's parts."""
    fn = nv.compile(lambda z: (z * z).exp())
    for i in range(4):
        x = rng.standard_normal((2, 3, 2)).astype(np.float32)
        z = x[..., 0] + 1j * x[..., 1]
        arg = nv.view_as_complex(nv.tensor(x)) if i % 2 else nv.tensor(z.astype(np.complex64))
        np.testing.assert_allclose(fn(arg).numpy(), np.exp(z * z), rtol=1e-5, atol=1e-5)
    assert fn.replays == 2


def test_a_complex_dtype_change_records_again_and_says_why():
    fn = nv.compile(lambda z, w: z * w)
    for dtype in (np.complex64,) * 3 + (np.complex128,) * 3:
        a, b = _complex((2, 3), dtype), _complex((2, 3), dtype)
        out = fn(nv.tensor(a), nv.tensor(b))
        assert out.numpy().dtype == dtype
        np.testing.assert_allclose(out.numpy(), a * b, rtol=1e-5 if dtype == np.complex64
                                   else 1e-12)
    assert fn.recorded == 4 and fn.replays == 2
    assert "input 0 dtype changed complex64 -> complex128 (argument z)" in _log()


def test_a_real_tensor_where_a_complex_one_was_records_again_and_says_why():
    fn = nv.compile(lambda z: z * 2)
    for _ in range(3):
        a = _complex((2,))
        np.testing.assert_allclose(fn(nv.tensor(a)).numpy(), 2 * a, rtol=1e-6)
    x = rng.standard_normal(2).astype(np.float32)
    np.testing.assert_array_equal(fn(nv.tensor(x)).numpy(), 2 * x)
    assert fn.replays == 1
    assert "changed from a complex tensor to a real one (argument z)" in _log()


def _rotary_training(compiled: bool) -> tuple[list[float], list[np.ndarray], object]:
    """A real model trained through complex intermediates (a rotary-style product of
    ``view_as_complex`` of its activations with ``polar`` phases)."""
    nv.manual_seed(3)
    lin = nv.nn.Linear(4, 8)
    opt = nv.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)

    def step(x):
        opt.zero_grad()
        h = lin(x)
        z = nv.view_as_complex(h.reshape(h.shape[0], 4, 2))
        phase = nv.polar(nv.ones(4), nv.arange(4).float() * 0.3)
        loss = nv.view_as_real(z * phase).pow(2).mean() + (z * phase).abs().mean()
        loss.backward()
        opt.step()
        return loss
    fn = nv.compile(step) if compiled else step
    data = np.random.default_rng(0).standard_normal((6, 3, 4)).astype(np.float32)
    losses = [fn(nv.tensor(x)).item() for x in data]
    return losses, [p.numpy() for p in lin.parameters()], fn


def test_a_training_step_through_complex_intermediates_replays_bit_identically():
    want_losses, want_params, _ = _rotary_training(False)
    losses, params, fn = _rotary_training(True)
    assert losses == want_losses
    for a, b in zip(params, want_params):
        np.testing.assert_array_equal(a, b)
    assert fn.replays >= 3 and fn.replays + fn.recorded == 6


def test_a_step_through_nv_fft_replays():
    """``nv.fft``'s DFT matrices are the same constants every call (not host data the
    call makes anew, which a replay could not supply)."""
    nv.manual_seed(4)
    lin = nv.nn.Linear(8, 8)
    opt = nv.optim.SGD(lin.parameters(), lr=0.1)

    @nv.compile
    def step(x):
        opt.zero_grad()
        loss = nv.fft.rfft(lin(x)).abs().mean()
        loss.backward()
        opt.step()
        return loss
    for _ in range(4):
        x = rng.standard_normal((3, 8)).astype(np.float32)
        w, b = (p.numpy().astype(np.float64) for p in lin.parameters())
        want = np.abs(np.fft.rfft(x @ w.T + b)).mean()
        np.testing.assert_allclose(step(nv.tensor(x)).item(), want, rtol=1e-5)
    assert step.replays == 2

    spectrum = nv.compile(lambda s: nv.fft.fft(s))
    for _ in range(4):
        s = _complex(8)
        np.testing.assert_allclose(spectrum(nv.tensor(s)).numpy(), np.fft.fft(s),
                                   rtol=1e-5, atol=1e-5)
    assert spectrum.replays == 2


class _Rotary(nv.nn.Module):
    def __init__(self, scale: float = 1.0):
        super().__init__()
        self.lin = nv.nn.Linear(4, 4)
        self.register_buffer("freqs", nv.polar(nv.ones(4), nv.arange(4).float() * scale))

    def forward(self, x):
        return self.lin(x) * self.freqs


def _rotary_reference(m: _Rotary, x: np.ndarray, scale: float) -> np.ndarray:
    w, b = m.lin.weight.numpy(), m.lin.bias.numpy()
    return (x @ w.T + b) * np.exp(1j * scale * np.arange(4))


def test_a_compiled_module_with_a_complex_buffer_replays_and_guards_it():
    """The buffer's parts are read where the module holds them; replacing the buffer
    (a new complex tensor in ``_buffers``) records the call again, saying why, where the
    replay would otherwise have read the old buffer's parts."""
    m = _Rotary()
    cm = nv.compile(m)
    with nv.no_grad():
        for _ in range(4):
            x = rng.standard_normal((3, 4)).astype(np.float32)
            np.testing.assert_allclose(cm(nv.tensor(x)).numpy(), _rotary_reference(m, x, 1.0),
                                       rtol=1e-5, atol=1e-6)
        assert cm._replayed.replays >= 1
        replays = cm._replayed.replays
        m.freqs = nv.polar(nv.ones(4), nv.arange(4).float() * 2.0)
        for _ in range(4):
            x = rng.standard_normal((3, 4)).astype(np.float32)
            np.testing.assert_allclose(cm(nv.tensor(x)).numpy(), _rotary_reference(m, x, 2.0),
                                       rtol=1e-5, atol=1e-6)
    assert cm._replayed.replays > replays
    assert "holds another object than the ComplexTensor it held when captured" in _log()


def test_a_complex_buffer_written_in_place_between_calls_is_read_anew():
    """Its parts, rebound in place, hold a pending value: the next calls record (the
    first realizes the write) until two agree, and the replays read the new parts."""
    m = _Rotary()
    cm = nv.compile(m)
    with nv.no_grad():
        for _ in range(4):
            cm(nv.tensor(rng.standard_normal((3, 4)).astype(np.float32)))
        assert cm._replayed.replays == 1
        m.freqs.mul_(2.0)
        for _ in range(4):
            x = rng.standard_normal((3, 4)).astype(np.float32)
            np.testing.assert_allclose(cm(nv.tensor(x)).numpy(),
                                       2 * _rotary_reference(m, x, 1.0), rtol=1e-5, atol=1e-6)
    assert cm._replayed.replays == 2
    assert "holds a pending value" in _log()
