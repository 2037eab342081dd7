"""Every test here runs on both engines: the compiled ``cpu`` engine and the reference
interpreter (``interp``)."""
import pytest

import nova as nv
from nova.autograd import backward_template as bt


@pytest.fixture(autouse=True, params=["cpu", "interp"])
def engine(request):
    with nv.engine(request.param):
        yield request.param


@pytest.fixture
def stamps(monkeypatch):
    """How many backward passes were stamped from a template."""
    count = [0]
    stamp = bt.BackwardTemplate.stamp

    def counting(self, *args):
        count[0] += 1
        return stamp(self, *args)
    monkeypatch.setattr(bt.BackwardTemplate, "stamp", counting)
    return count
