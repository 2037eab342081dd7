"""Every test here runs on both engines: the compiled ``cpu`` engine and the reference
interpreter (``interp``)."""
import pytest

import nova as nv


@pytest.fixture(autouse=True, params=["cpu", "interp"])
def engine(request):
    with nv.engine(request.param):
        yield request.param
