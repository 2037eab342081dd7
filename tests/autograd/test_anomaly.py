"""Anomaly mode (``nv.autograd.detect_anomaly``), as PyTorch's: a backward function
whose gradient holds a NaN raises, named, after a warning with the traceback of the
forward call that recorded it; off by default, with nothing installed. Python-level
logic: the interpreter engine only."""
import math
import warnings

import pytest

import nova as nv
from nova.autograd import anomaly_mode
from nova.tensor import function_template
from nova.tensor.tape import GradFn

NAN_ERROR = r"Function 'MulBackward0' returned nan values in its 0th output\."


@pytest.fixture(autouse=True)
def engine():
    with nv.engine("interp"):
        yield "interp"
    anomaly_mode.set_anomaly_enabled(False)     # (whatever a failing test left on)


def _zero_times_inf():
    """``sqrt`` at 0 has an infinite slope, and the ``* 0`` before it makes that a NaN
    in ``MulBackward`` (PyTorch's example; its ``MulBackward0``)."""
    x = nv.ones(3, requires_grad=True)
    return x, (x * 0).sqrt().sum()


def test_a_nan_gradient_raises_naming_its_backward_function_with_the_forward_stack():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match=NAN_ERROR):
            with nv.autograd.detect_anomaly():
                x, y = _zero_times_inf()
                y.backward()
    messages = [str(w.message) for w in caught]
    assert any(m.startswith("Anomaly Detection has been enabled") for m in messages)
    [stack] = [m for m in messages if m.startswith("Error detected in MulBackward")]
    assert "Traceback of forward call that caused the error" in stack
    assert "test_anomaly.py" in stack and "(x * 0).sqrt().sum()" in stack
    assert x.grad is None
    assert not nv.autograd.is_anomaly_enabled()


def test_without_anomaly_mode_or_with_check_nan_off_the_nan_goes_through():
    x, y = _zero_times_inf()
    y.backward()
    assert all(math.isnan(v) for v in x.grad.tolist())
    with pytest.warns(UserWarning, match="Anomaly Detection"):
        mode = nv.autograd.detect_anomaly(check_nan=False)
    with mode:
        assert nv.autograd.is_anomaly_enabled()
        assert not nv.autograd.is_anomaly_check_nan_enabled()
        x, y = _zero_times_inf()
        y.backward()
    assert all(math.isnan(v) for v in x.grad.tolist())
    assert nv.autograd.is_anomaly_check_nan_enabled()


def test_grad_and_custom_functions_are_checked_too():
    class F(nv.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")

    x = nv.ones(2, requires_grad=True)
    with pytest.warns(UserWarning), nv.autograd.detect_anomaly():
        with pytest.raises(RuntimeError, match=NAN_ERROR):
            nv.autograd.grad((x * 0).sqrt().sum(), x)
        with pytest.raises(RuntimeError,
                           match=r"Function 'FBackward' returned nan values in its 0th"):
            F.apply(x).sum().backward()
        inf = nv.zeros(2, requires_grad=True)
        inf.sqrt().sum().backward()         # an infinite gradient is no anomaly
        assert inf.grad.tolist() == [math.inf, math.inf]


def test_a_stamped_function_call_records_its_forward_stack():
    """A composite function's later calls are stamped from a template (no
    ``GradFn.__init__``); under anomaly mode they are recorded as written."""
    def attend(a):
        return nv.softmax(a, 0)

    x = nv.tensor([1.0, 2.0, 3.0], requires_grad=True)
    attend(x)
    attend(x)                    # (a template now exists)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="returned nan values"):
            with nv.autograd.detect_anomaly():
                y = attend(x)
                (y * nv.tensor([math.inf, 1.0, 1.0])).sum().backward()
    [stack] = [str(w.message) for w in caught if "Error detected" in str(w.message)]
    assert "y = attend(x)" in stack and "return nv.softmax(a, 0)" in stack


def test_set_detect_anomaly_as_a_call_a_context_and_detect_anomaly_as_a_decorator():
    assert not nv.autograd.is_anomaly_enabled()
    nv.autograd.set_detect_anomaly(True, check_nan=False)
    assert nv.autograd.is_anomaly_enabled() and not nv.autograd.is_anomaly_check_nan_enabled()
    nv.autograd.set_detect_anomaly(False)
    assert not nv.autograd.is_anomaly_enabled() and nv.autograd.is_anomaly_check_nan_enabled()
    with nv.autograd.set_detect_anomaly(True):
        assert nv.autograd.is_anomaly_enabled()
    assert not nv.autograd.is_anomaly_enabled()

    with pytest.warns(UserWarning, match="Anomaly Detection"):
        @nv.autograd.detect_anomaly()
        def step():
            x, y = _zero_times_inf()
            y.backward()

    with pytest.warns(UserWarning, match="Error detected in MulBackward"):
        with pytest.raises(RuntimeError, match=NAN_ERROR):
            step()
    assert not nv.autograd.is_anomaly_enabled()


def test_off_means_nothing_installed():
    """Zero overhead when off: ``GradFn`` and function templates are exactly as they
    were, before and after the mode was on."""
    init, key = GradFn.__init__, function_template.call_key
    with pytest.warns(UserWarning), nv.autograd.detect_anomaly():
        assert GradFn.__init__ is not init and function_template.call_key is not key
    assert GradFn.__init__ is init and function_template.call_key is key
