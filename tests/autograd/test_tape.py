"""The tape below autograd: nova.tensor records GradFns and grad mode itself, and
reaches the backward engine only through the hook nova.autograd registers."""
import pytest

import nova as nv
from nova.autograd import engine, grad_mode as autograd_grad_mode, graph
from nova.tensor import grad_mode, tape


def test_autograd_reexports_the_tensor_level_objects():
    assert autograd_grad_mode.no_grad is grad_mode.no_grad is nv.no_grad
    assert autograd_grad_mode.enable_grad is nv.enable_grad
    assert autograd_grad_mode.STATE is grad_mode.STATE
    assert graph.GradFn is tape.GradFn and graph.alias_fn is tape.alias_fn


def test_importing_autograd_registered_the_engine():
    assert tape._backward is engine.backward
    x = nv.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]


def test_backward_without_a_registered_engine_says_so(monkeypatch):
    monkeypatch.setattr(tape, "_backward", None)
    x = nv.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="no backward engine is registered"):
        (x * 2).sum().backward()


def test_grad_mode_off_records_no_tape():
    x = nv.tensor([1.0], requires_grad=True)
    with nv.no_grad():
        assert (x * 2).grad_fn is None
    assert isinstance((x * 2).grad_fn, tape.GradFn)
