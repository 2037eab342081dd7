"""Process-wide switches scripts set through torch (``nova.backends``), print options
and the default generator's state as a tensor."""
import re
import warnings

import numpy as np

import pytest

import nova as nv
from nova.tensor import printing


def test_backend_flags_are_remembered_and_tf32_mirrors_the_matmul_precision():
    before = nv.get_float32_matmul_precision()
    try:
        nv.backends.cuda.matmul.allow_tf32 = True
        assert nv.get_float32_matmul_precision() == "high"
        nv.set_float32_matmul_precision("medium")
        assert nv.backends.cuda.matmul.allow_tf32
        with pytest.warns(UserWarning, match="TF32"):
            nv.set_float32_matmul_precision("highest")
        assert not nv.backends.cuda.matmul.allow_tf32
        with pytest.raises(ValueError, match="set_float32_matmul_precision"):
            nv.set_float32_matmul_precision("low")
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nv.set_float32_matmul_precision(before)
    nv.backends.cudnn.benchmark = True
    assert nv.backends.cudnn.benchmark and not nv.backends.cudnn.is_available()
    assert not nv.backends.mps.is_available() and nv.backends.cuda.is_built()
    try:
        nv.use_deterministic_algorithms(True, warn_only=True)
        assert nv.are_deterministic_algorithms_enabled()
        assert nv.is_deterministic_algorithms_warn_only_enabled()
    finally:
        nv.use_deterministic_algorithms(False)
    with pytest.raises(TypeError, match="use_deterministic_algorithms"):
        nv.use_deterministic_algorithms("yes")


def test_cuda_cudnn_and_mps_are_submodules_shared_with_the_attributes():
    """``import torch.backends.cudnn as cudnn`` and ``import torch.backends.cuda`` port:
    the modules are ``nv.backends``' attributes, so a flag set through either reads
    back through the other (``nova/backends/``)."""
    import importlib

    import nova.backends.cuda as cuda
    import nova.backends.cudnn as cudnn
    import nova.backends.mps as mps
    assert (cuda, cudnn, mps) == (nv.backends.cuda, nv.backends.cudnn, nv.backends.mps)
    assert importlib.import_module("nova.backends.cuda") is nv.backends.cuda
    before = nv.get_float32_matmul_precision(), cudnn.allow_tf32
    try:
        cuda.matmul.allow_tf32 = True
        assert nv.backends.cuda.matmul.allow_tf32 and nv.get_float32_matmul_precision() == "high"
        cudnn.allow_tf32 = False
        assert nv.backends.cudnn.allow_tf32 is False
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nv.set_float32_matmul_precision(before[0])
        cudnn.allow_tf32 = before[1]
    assert cuda.flash_sdp_enabled() and cuda.is_built() and not mps.is_built()


@pytest.fixture
def print_defaults():
    yield
    nv.set_printoptions(profile="default")


def test_print_options_change_the_repr(print_defaults):
    x = nv.tensor([1.23456, 100.0])
    assert repr(x) == "tensor([  1.2346, 100.0000])"     # PyTorch's format
    nv.set_printoptions(precision=2)
    assert repr(x) == "tensor([  1.23, 100.00])"
    nv.set_printoptions(sci_mode=True)
    assert repr(x) == "tensor([1.23e+00, 1.00e+02])"
    nv.set_printoptions(profile="default")
    assert printing.OPTIONS["precision"] == 4 and printing.OPTIONS["sci_mode"] is None
    nv.set_printoptions(threshold=5, edgeitems=1)
    assert repr(nv.arange(10)) == "tensor([0,  ..., 9])"      # (PyTorch's elision)
    with pytest.raises(ValueError, match="set_printoptions: profile"):
        nv.set_printoptions(profile="long")
    with pytest.raises(ValueError, match="precision must be a non-negative int"):
        nv.set_printoptions(precision=-1)


_SCI_MODE_PRINTED = [   # (print options, values, PyTorch 2.13's repr)
    (dict(precision=2, sci_mode=False), [1.2345, 0.0001], "tensor([1.23, 0.00])"),
    (dict(precision=4, sci_mode=False), [1e9, 1.0], "tensor([1000000000.,          1.])"),
    (dict(precision=2, sci_mode=False), [-1e10, 3.5],
     "tensor([-10000000000.00,            3.50])"),
    (dict(precision=0, sci_mode=False), [12345.678, -9.87], "tensor([12346,   -10])"),
    (dict(precision=0, sci_mode=True), [1234567.5, 12345.5], "tensor([1e+06, 1e+04])"),
    (dict(precision=2, sci_mode=True), [1.0, 2.0, 3.0], "tensor([1.00e+00, 2.00e+00, 3.00e+00])"),
    (dict(precision=4, sci_mode=True), [0.0, 0.0], "tensor([0., 0.])"),
    (dict(precision=4, sci_mode=True), [0.0, float("nan"), float("-inf")],
     "tensor([0., nan, -inf])"),
    (dict(precision=3, sci_mode=False), [float("nan"), 1e-5, -2.0],
     "tensor([   nan,  0.000, -2.000])"),
    (dict(precision=2, sci_mode=False), 0.0001, "tensor(0.00)"),
    (dict(precision=6), [1.2345, 0.0001], "tensor([1.234500e+00, 1.000000e-04])"),
    (dict(precision=2, sci_mode=False), [1.2345 + 2j, 0.0001 - 300j],
     "tensor([1.23+2.j, 0.00-300.j])"),
]


@pytest.mark.parametrize("options,values,printed", _SCI_MODE_PRINTED)
def test_sci_mode_pads_numbers_to_the_format_it_picks(print_defaults, options, values,
                                                      printed):
    """``sci_mode`` True or False chose the format but the width still came from the
    format PyTorch would have picked itself (``tensor([    1.23,     0.00])`` for
    ``[1.2345, 0.0001]`` with precision 2, sized as ``1.23e+00``); and a tensor
    without nonzero finite values printed scientific with ``sci_mode=True``, where
    PyTorch prints ``0.``."""
    nv.set_printoptions(**options)
    assert repr(nv.tensor(values)) == printed


def test_sci_mode_and_precision_print_as_pytorch(print_defaults):
    """Every ``sci_mode`` and several precisions over values that pick each format
    (integral, fixed, scientific by range, by size, by ratio; negatives, NaN, infinities,
    zeros only), in each float dtype, as PyTorch prints them."""
    torch = pytest.importorskip("torch")
    inf, nan = float("inf"), float("nan")

    def numbers(text):
        return re.sub(r",\s*dtype=\w+\.\w+", "", text)

    values = [[1.2345, 0.0001], [1.2345, 1e-5], [0.0, 0.0], [0.0, nan], [nan, inf, -inf],
              [1.0, 2.0, 3.0], [1.0, -2.0, 300.0], [1e9, 1.0], [123456789.0, 2.0],
              [-1e10, 3.5], [0.5, -0.25], [1e-5, 2e-5], [100.0, 0.01], [-0.0, 1.5],
              [12345.678, -9.87], [3.0, nan, -inf], [1e-8], [-7.0], [2.5], [1.0, 1001.0],
              [1e8, 1.0], [1.5e8, 2.0], [99999.5, 0.1], [-123.456, 0.0, 7.89, 1e-3],
              [1e20, -1e-20, 0.0], [5e-5, 0.3, nan], [1.0, 2.0, inf], [0.1, 0.2, 0.3] * 40,
              list(np.linspace(-3, 3, 1500)), [[1.2345, -100.5], [0.0001, 4e4]],
              [[[1.0, 2.0]], [[3.0, -4.0]]], [65504.0, 1.0], -0.5, 0.0, 1e-6]
    try:
        for sci_mode in (None, True, False):
            for precision in (0, 1, 2, 4, 6):
                nv.set_printoptions(precision=precision, sci_mode=sci_mode)
                torch.set_printoptions(precision=precision, sci_mode=sci_mode)
                for v in values:
                    for dtype in ("float32", "float64", "float16", "bfloat16"):
                        t = torch.tensor(v, dtype=getattr(torch, dtype))
                        x = nv.tensor(t.double().numpy(), dtype=getattr(nv, dtype))
                        # (the numbers: ``dtype=nova.float64`` is a character shorter,
                        # so it wraps past the line width elsewhere)
                        assert numbers(repr(x)) == numbers(repr(t)), \
                            (sci_mode, precision, dtype, v)
                for c in ([1.2345 + 2j, 0.0001 - 3.5j], [1e9 + 1j, 0.5j], [0j, 2j]):
                    assert repr(nv.tensor(c)) == repr(torch.tensor(c)), (sci_mode, precision, c)
    finally:
        torch.set_printoptions(profile="default")


def test_rng_state_round_trips_and_seeds_are_reported():
    nv.manual_seed(-5)
    assert nv.initial_seed() == 2**64 - 5            # as torch reports a negative seed
    state = nv.get_rng_state()
    a = nv.rand(4).tolist()
    nv.set_rng_state(state)
    assert nv.rand(4).tolist() == a and nv.initial_seed() == 2**64 - 5
    assert state.dtype == nv.int64 and state.shape == (2,)
    s = nv.seed()
    assert nv.initial_seed() == s and 0 <= s < 2**63
    with pytest.raises(ValueError, match="set_rng_state"):
        nv.set_rng_state(nv.tensor([1.0, 2.0]))
    nv.manual_seed(0)


_PRINTED = [   # (values, dtype, PyTorch 2.13's repr)
    ([1.5, 2.0], "float32", "tensor([1.5000, 2.0000])"),
    (3.25, "float32", "tensor(3.2500)"),
    ([1.0, float("nan"), float("inf"), -2.5], "float32", "tensor([ 1.0000,     nan,     inf, -2.5000])"),
    ([1.0, float("nan")], "float32", "tensor([1., nan])"),
    ([0.0, 0.0], "float32", "tensor([0., 0.])"),
    ([1e-5, 1.0], "float32", "tensor([1.0000e-05, 1.0000e+00])"),
    ([[1e10, 1.0]], "float32", "tensor([[1.0000e+10, 1.0000e+00]])"),
    ([100000.0, 1.0], "float32", "tensor([1.0000e+05, 1.0000e+00])"),
    ([123456789.0], "float32", "tensor([1.2346e+08])"),
    (-0.0, "float32", "tensor(-0.)"),
    ([1.5], "float64", "tensor([1.5000], dtype=nova.float64)"),
    ([[1.5410, -0.2934, -2.1788], [0.5684, -1.0845, -1.3986]], "float32",
     "tensor([[ 1.5410, -0.2934, -2.1788],\n        [ 0.5684, -1.0845, -1.3986]])"),
]


@pytest.mark.parametrize("values,dtype,printed", _PRINTED)
def test_floats_print_in_pytorchs_format(values, dtype, printed):
    """A float tensor printed numpy's way (``tensor([1.5, 2. ])``, ``tensor(3.25)``),
    not PyTorch's (``precision`` digits, scientific past 1e8 or below 1e-4, integral
    values as ``2.``): logs and doctests of ported scripts differed."""
    assert repr(nv.tensor(values, dtype=getattr(nv, dtype))) == printed


def test_what_records_gradients_says_so_when_printed():
    x = nv.tensor([1.0, 2.0], requires_grad=True)
    assert repr(x) == "tensor([1., 2.], requires_grad=True)"
    assert repr(x * 2) == "tensor([2., 4.], grad_fn=<MulBackward0>)"
    assert repr((x * x).sum()) == "tensor(5., grad_fn=<SumBackward0>)"
    assert repr(nv.zeros(2, 0)) == "tensor([], size=(2, 0))"
    with nv.no_grad():
        assert repr(x * 2) == "tensor([2., 4.])"


def test_printing_matches_pytorch_on_random_tensors(print_defaults):
    """Layout too: a fixed count of padded numbers per line, summarized tensors (the
    format chosen from the numbers shown), integers, booleans, empty tensors, complex
    numbers, and a suffix (``dtype=...``) on a line of its own past the line width."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    cases = []
    for shape in ((100, 100), (2000,), (3, 400, 5), (1001,), (40, 30), (3,), (2, 4), (),
                  (2, 3, 4), (0,), (7, 7), (5, 1, 3), (12, 12, 12)):
        a = rng.standard_normal(shape).astype(np.float32)
        cases += [a, np.round(a * 10), a * 1e-6, a * 1e9, (a * 100).astype(np.int64), a > 0,
                  (a * 3).astype(np.int8), np.asarray(a, np.float64),
                  np.asarray(a + 1j * np.round(a * 10), np.complex64),
                  np.asarray(a * 1e-6 - 2j * a, np.complex128)]
    for a in cases:
        assert repr(nv.tensor(a)) == repr(torch.tensor(a)).replace("torch.", "nova."), \
            (a.shape, a.dtype)
    for precision in (2, 6):
        nv.set_printoptions(precision=precision)
        torch.set_printoptions(precision=precision)
        try:
            a = rng.standard_normal((20, 70)).astype(np.float32)
            assert repr(nv.tensor(a)) == repr(torch.tensor(a))
        finally:
            torch.set_printoptions(profile="default")
