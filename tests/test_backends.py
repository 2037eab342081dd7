"""Process-wide switches scripts set through torch (``nova.backends``), print options
and the default generator's state as a tensor."""
import warnings

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


@pytest.fixture
def print_defaults():
    yield
    nv.set_printoptions(profile="default")


def test_print_options_change_the_repr(print_defaults):
    x = nv.tensor([1.23456, 100.0])
    assert repr(x) == "tensor([  1.2346, 100.    ])"
    nv.set_printoptions(precision=2)
    assert repr(x) == "tensor([  1.23, 100.  ])"
    nv.set_printoptions(sci_mode=True)
    assert repr(x) == "tensor([1.23e+00, 1.00e+02])"
    nv.set_printoptions(profile="default")
    assert printing.OPTIONS["precision"] == 4 and printing.OPTIONS["sci_mode"] is None
    nv.set_printoptions(threshold=5, edgeitems=1)
    assert repr(nv.arange(10)) == "tensor([0, ..., 9])"
    with pytest.raises(ValueError, match="set_printoptions: profile"):
        nv.set_printoptions(profile="long")
    with pytest.raises(ValueError, match="precision must be a non-negative int"):
        nv.set_printoptions(precision=-1)


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
