"""nv.func.functional_call: substitution, restoration (also on errors), gradients with
respect to the given tensors, tied weights, strict keys and PyTorch's errors."""
import numpy as np
import pytest

import nova as nv
import nova.nn as nn
from nova.autograd import gradcheck
from nova.func import functional_call
from nova.nn.utils import parametrize

RNG = np.random.default_rng(1)


class Counter(nn.Module):
    """A linear layer that adds and rebinds a buffer, and can be told to fail."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.register_buffer("count", nv.zeros(2))

    def forward(self, x, *, fail=False, scale=1.0):
        self.count = self.count + 1
        if fail:
            raise ZeroDivisionError("boom")
        return self.lin(x) * scale + self.count


def test_substitutes_restores_and_differentiates():
    m = Counter()
    weight, bias, count = m.lin.weight, m.lin.bias, m.count
    w = nv.tensor(RNG.standard_normal((2, 2)).astype(np.float32), requires_grad=True)
    given = {"lin.weight": w, "count": nv.tensor([10.0, 20.0])}
    x = nv.tensor([[1.0, 2.0]])
    out = functional_call(m, given, (x,), {"scale": 2.0})
    (g,) = nv.autograd.grad(out.sum(), [w])
    nv.realize(out, g)
    np.testing.assert_allclose(out.numpy(), 2 * (x.numpy() @ w.numpy().T + bias.numpy())
                               + [11.0, 21.0], rtol=1e-6)
    np.testing.assert_allclose(g.numpy(), 2 * np.repeat(x.numpy(), 2, axis=0), rtol=1e-6)
    assert m.lin.weight is weight and m.count is count        # restored
    assert given["lin.weight"] is w                           # the rebound buffer comes back
    np.testing.assert_array_equal(given["count"].numpy(), [11.0, 21.0])
    np.testing.assert_array_equal(m.count.numpy(), [0.0, 0.0])
    # restored when forward raises, and with a non-tuple args
    with pytest.raises(ZeroDivisionError):
        functional_call(m, {"lin.bias": nv.zeros(2)}, x, {"fail": True})
    assert m.lin.bias is bias and m.lin.weight is weight
    # a key that names nothing is set as an attribute for the call only
    functional_call(m, {"lin.extra": nv.ones(1)}, x)
    assert not hasattr(m.lin, "extra")


def test_gradient_by_finite_differences():
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    x = nv.tensor(RNG.standard_normal((2, 3)))
    assert gradcheck(lambda w0, b1: functional_call(m, {"0.weight": w0, "2.bias": b1}, x),
                     [RNG.standard_normal((4, 3)), RNG.standard_normal(2)])


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(2, 2, bias=False)
        self.b = self.a                           # one submodule under two names
        self.head = nn.Linear(2, 2, bias=False)
        self.head.weight = self.a.weight          # and a tied parameter

    def forward(self, x):
        return self.head(self.b(x))


def test_tied_weights_and_strict_keys():
    m = Tied()
    weight = m.a.weight
    w = nv.tensor([[1.0, 2.0], [3.0, 4.0]])
    x = nv.tensor([[1.0, -1.0]])
    tied = functional_call(m, {"a.weight": w}, x)
    untied = functional_call(m, {"a.weight": w}, x, tie_weights=False)
    nv.realize(tied, untied, weight)
    wn = w.numpy()
    np.testing.assert_allclose(tied.numpy(), x.numpy() @ wn.T @ wn.T)
    # untied: b is a (same module) so it sees w, but head keeps the module's weight
    np.testing.assert_allclose(untied.numpy(), x.numpy() @ wn.T @ weight.numpy().T,
                               rtol=1e-6)
    assert m.a.weight is weight and m.b.weight is weight and m.head.weight is weight
    with pytest.raises(ValueError, match=r"multiple values for keys \['a.weight', "
                                         r"'b.weight', 'head.weight'\], which are tied"):
        functional_call(m, {"a.weight": w, "head.weight": w * 2}, x)
    functional_call(m, {"a.weight": w, "head.weight": w}, x)   # the same value is fine
    with pytest.raises(RuntimeError, match="reparametrizing for Linear:\n\tUnexpected "
                                           "key\\(s\\): 'foo'.\n\tMissing key\\(s\\): 'bias'"):
        functional_call(nn.Linear(2, 2), {"weight": w, "foo": w}, x, strict=True)
    functional_call(m, {"a.weight": w}, x, strict=True)        # tying fills the others


def test_dict_sequences_parametrizations_and_errors():
    lin = nn.Linear(2, 2)
    x = nv.tensor([[1.0, 0.0]])
    out = functional_call(lin, ({"weight": nv.eye(2)}, {"bias": nv.ones(2)}), x)
    np.testing.assert_array_equal(out.numpy(), [[2.0, 1.0]])
    with pytest.raises(ValueError, match=r"\['weight'\] appeared in multiple dictionaries"):
        functional_call(lin, ({"weight": nv.eye(2)}, {"weight": nv.eye(2)}), x)
    with pytest.raises(ValueError, match="to be a dict, or a list/tuple of dicts, but got int"):
        functional_call(lin, 5, x)
    with pytest.raises(ValueError, match="all elements .* to be dictionaries"):
        functional_call(lin, [{"weight": nv.eye(2)}, 3], x)
    with pytest.raises(TypeError, match="value for 'weight' is a int, not a Tensor"):
        functional_call(lin, {"weight": 3}, x)
    with pytest.raises(AttributeError, match="Linear has no attribute `a`"):
        functional_call(lin, {"a.weight": nv.eye(2)}, x)
    with pytest.raises(TypeError, match="expected an nv.nn.Module, got function"):
        functional_call(lambda v: v, {}, x)

    class Double(nn.Module):
        def forward(self, w):
            return w * 2

    parametrize.register_parametrization(lin, "weight", Double())
    out = functional_call(lin, {"parametrizations.weight.original": nv.eye(2),
                                "bias": nv.zeros(2)}, x)
    np.testing.assert_array_equal(out.numpy(), [[2.0, 0.0]])
    with pytest.raises(ValueError, match="'weight' is parametrized; pass .*"
                                         "'parametrizations.weight.original'"):
        functional_call(lin, {"weight": nv.eye(2)}, x)
