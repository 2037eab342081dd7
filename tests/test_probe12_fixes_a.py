"""Probe 12 fixes (a): the ``add*`` products with ``beta=0`` keep their input in the
graph with a zero gradient (PyTorch's ``.grad`` is zeros, so an optimizer still decays
and steps the parameter), and ``LambdaLR``/``MultiplicativeLR`` save and restore
PyTorch's ``lr_lambdas`` entry (None per function, a callable object's ``__dict__``).

References are numpy or hand-derived; the interpreter runs these tiny graphs."""
import numpy as np
import pytest

import nova as nv
from nova.optim import lr_scheduler as sched


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def _t(shape, seed, requires_grad=False):
    data = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return nv.tensor(data, requires_grad=requires_grad)


# Each case: the op's call, given the input, and the input's shape (broadcast inputs
# included: a bias of shape (n,) for addmm, a row for baddbmm).
_CASES = {
    "addmm": (lambda a: nv.addmm(a, _t((2, 4), 1), _t((4, 3), 2), beta=0), (2, 3)),
    "addmm_bias": (lambda a: nv.addmm(a, _t((2, 4), 1), _t((4, 3), 2), beta=0), (3,)),
    "addmm_method": (lambda a: a.addmm(_t((2, 4), 1), _t((4, 3), 2), beta=0.0,
                                       alpha=2), (2, 3)),
    "baddbmm": (lambda a: nv.baddbmm(a, _t((2, 2, 4), 1), _t((2, 4, 3), 2), beta=0),
                (1, 3)),
    "addbmm": (lambda a: nv.addbmm(a, _t((2, 2, 4), 1), _t((2, 4, 3), 2), beta=0),
               (2, 3)),
    "addmv": (lambda a: nv.addmv(a, _t((2, 4), 1), _t((4,), 2), beta=0), (2,)),
    "addr": (lambda a: nv.addr(a, _t((2,), 1), _t((3,), 2), beta=0), (2, 3)),
    "addr_method": (lambda a: a.addr(_t((2,), 1), _t((3,), 2), beta=0), (2, 3)),
}


@pytest.mark.parametrize("name", list(_CASES))
def test_beta0_input_gets_zero_grad(name):
    fn, shape = _CASES[name]
    a = _t(shape, 0, requires_grad=True)
    fn(a).sum().backward()
    assert a.grad is not None
    assert a.grad.shape == shape
    np.testing.assert_array_equal(a.grad.numpy(), np.zeros(shape, np.float32))


@pytest.mark.parametrize("name", ["addmm_", "baddbmm_", "addbmm_", "addmv_", "addr_"])
def test_beta0_inplace_input_gets_zero_grad(name):
    operands = {"addmm_": ((2, 3), (2, 4), (4, 3)), "baddbmm_": ((2, 2, 3), (2, 2, 4),
                                                                  (2, 4, 3)),
                "addbmm_": ((2, 3), (2, 2, 4), (2, 4, 3)), "addmv_": ((2,), (2, 4), (4,)),
                "addr_": ((2, 3), (2,), (3,))}[name]
    a = _t(operands[0], 0, requires_grad=True)
    b = a * 1.0                      # (a non-leaf, which may be written in place)
    getattr(b, name)(_t(operands[1], 1), _t(operands[2], 2), beta=0)
    b.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.zeros(operands[0], np.float32))


def test_beta0_ignores_nan_input_that_requires_grad():
    m1 = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
    m2 = np.arange(12, dtype=np.float32).reshape(4, 3) / 12
    a = nv.tensor(np.array([np.nan, np.inf, -np.inf], np.float32), requires_grad=True)
    w = nv.tensor(m1, requires_grad=True)
    out = nv.addmm(a, w, nv.tensor(m2), beta=0, alpha=2)
    np.testing.assert_allclose(out.numpy(), 2 * m1 @ m2, rtol=1e-6)
    out.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.zeros(3, np.float32))
    np.testing.assert_allclose(w.grad.numpy(), 2 * np.ones((2, 3)) @ m2.T, rtol=1e-6)


def test_beta0_keeps_the_products_dtype():
    a = nv.zeros(3, dtype=nv.float64, requires_grad=True)
    out = nv.addmm(a, _t((2, 4), 1), _t((4, 3), 2), beta=0)
    assert out.dtype == nv.float32
    out.sum().backward()
    assert a.grad.dtype == nv.float64


def test_adamw_decays_a_beta0_parameter():
    """The bias's gradient is zeros, so AdamW's step is its decoupled decay alone:
    ``p (1 - lr wd)`` (Adam's update of a zero gradient is 0)."""
    p0 = np.array([0.5, -1.0, 2.0], np.float32)
    bias = nv.tensor(p0, requires_grad=True)
    weight = _t((4, 3), 2, requires_grad=True)
    opt = nv.optim.AdamW([bias, weight], lr=0.1, weight_decay=0.5)
    nv.addmm(bias, _t((2, 4), 1), weight, beta=0).sum().backward()
    opt.step()
    lr, wd = 0.1, 0.5
    expected = p0 * np.float32(1 - lr * wd)
    np.testing.assert_allclose(bias.numpy(), expected, rtol=1e-6)


# ------------------------------------------------------------------ lr_lambdas state

class _Decay:
    """A callable object with state, as PyTorch's docs save one."""

    def __init__(self, factor):
        self.factor = factor

    def __call__(self, epoch):
        return self.factor ** epoch


def _opt(groups=1):
    return nv.optim.SGD([{"params": [nv.zeros(1, requires_grad=True)]}
                         for _ in range(groups)], lr=0.1)


@pytest.mark.parametrize("cls", [sched.LambdaLR, sched.MultiplicativeLR])
def test_lambda_state_dict_layout(cls):
    s = cls(_opt(2), [_Decay(0.5), lambda e: 0.9])
    state = s.state_dict()
    # PyTorch's keys in its order: the attributes, then lr_lambdas
    assert list(state) == ["base_lrs", "last_epoch", "_step_count", "_is_initial",
                           "_get_lr_called_within_step", "_last_lr", "lr_lambdas"]
    assert state["lr_lambdas"] == [{"factor": 0.5}, None]
    assert state["lr_lambdas"][0] is not s.lr_lambdas[0].__dict__     # a copy


@pytest.mark.parametrize("cls", [sched.LambdaLR, sched.MultiplicativeLR])
def test_lambda_state_dict_function_is_none(cls):
    def f(epoch):
        return 0.5

    assert cls(_opt(), f).state_dict()["lr_lambdas"] == [None]


def test_lambdalr_load_restores_callable_state():
    s = sched.LambdaLR(_opt(), _Decay(0.5))
    for _ in range(2):
        s.optimizer.step()
        s.step()
    state = s.state_dict()
    fresh = sched.LambdaLR(_opt(), _Decay(0.9))
    fresh.load_state_dict(state)
    assert fresh.lr_lambdas[0].factor == 0.5
    assert "lr_lambdas" in state                    # the caller's dict is left whole
    assert isinstance(fresh.lr_lambdas[0], _Decay)  # not replaced by the saved dict
    # the rate comes back with the optimizer's state dict (PyTorch's), not the scheduler's
    assert fresh.optimizer.param_groups[0]["lr"] == pytest.approx(0.1)
    fresh.optimizer.load_state_dict(s.optimizer.state_dict())
    assert fresh.optimizer.param_groups[0]["lr"] == pytest.approx(0.025)
    fresh.optimizer.step()
    fresh.step()
    assert fresh.get_last_lr() == [pytest.approx(0.1 * 0.5 ** 3)]


def test_multiplicativelr_load_restores_callable_state():
    s = sched.MultiplicativeLR(_opt(), _Decay(0.5))
    fresh = sched.MultiplicativeLR(_opt(), _Decay(0.9))
    fresh.load_state_dict(s.state_dict())
    assert fresh.lr_lambdas[0].factor == 0.5
    fresh.optimizer.step()
    fresh.step()                                    # lr * 0.5 ** 1
    assert fresh.get_last_lr() == [pytest.approx(0.05)]


def test_lambda_load_accepts_state_without_lr_lambdas():
    """A state saved before the entry existed leaves the callables as they are."""
    s = sched.LambdaLR(_opt(), _Decay(0.5))
    state = {k: v for k, v in s.state_dict().items() if k != "lr_lambdas"}
    fresh = sched.LambdaLR(_opt(), _Decay(0.9))
    fresh.load_state_dict(state)
    assert fresh.lr_lambdas[0].factor == 0.9


def test_lambda_load_rejects_a_count_mismatch():
    state = sched.LambdaLR(_opt(2), _Decay(0.5)).state_dict()
    with pytest.raises(ValueError, match="LambdaLR.load_state_dict: .*2 lr_lambdas"):
        sched.LambdaLR(_opt(1), _Decay(0.5)).load_state_dict(state)


def test_lambda_state_dict_matches_torch():
    torch = pytest.importorskip("torch")
    tp = torch.nn.Parameter(torch.zeros(1))
    topt = torch.optim.SGD([tp], lr=0.1)
    for cls in ("LambdaLR", "MultiplicativeLR"):
        ts = getattr(torch.optim.lr_scheduler, cls)(topt, _Decay(0.5))
        ns = getattr(sched, cls)(_opt(), _Decay(0.5))
        assert list(ns.state_dict()) == list(ts.state_dict())
        assert ns.state_dict()["lr_lambdas"] == ts.state_dict()["lr_lambdas"]
