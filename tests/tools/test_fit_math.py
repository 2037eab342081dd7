"""``tools/fit_math.py`` reproduces every polynomial of the CPU emitter's float32 math
(``Emitter.EXP_POLY`` and the others), so their docstrings' provenance holds."""
import importlib.util
from pathlib import Path

import pytest

from nova.compiler.targets.cpu.llvm_emit import Emitter

TOOL = Path(__file__).resolve().parents[2] / "tools" / "fit_math.py"


def _tool():
    spec = importlib.util.spec_from_file_location("fit_math", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_emitters_coefficients_are_the_tools_fits():
    tool = _tool()
    fits = {"EXP_POLY": tool.fit_exp(), "TANH_SMALL": tool.fit_tanh_small(Emitter.TANH_SPLIT),
            "TANH_EXP": tool.fit_tanh_exp(), "ERF_SMALL": tool.fit_erf_small(Emitter.ERF_SPLIT),
            "ERF_TAIL": tool.fit_erf_tail(Emitter.ERF_SPLIT, Emitter.ERF_ONE,
                                          Emitter.ERF_TAIL_CENTER),
            "LOG1P_POLY": tool.fit_log1p()}
    for name, (coefficients, error) in fits.items():
        assert tuple(coefficients) == getattr(Emitter, name), name
        assert error < 1e-7, (name, error)


def test_minimax_fits_within_its_reported_error():
    """The fitter itself, on a small case: exp on [0, 1] at degree 5 is within 2e-6 (the
    minimax error is 1.1e-6), and its coefficients (rounded to float32) evaluate to
    within that of exp."""
    import numpy as np
    tool = _tool()
    x = np.linspace(0, 1, 2001)
    coefficients, error = tool.minimax(x, np.exp(x), 5, iterations=50)
    got = np.polynomial.polynomial.polyval(x, coefficients)
    assert error < 2e-6
    assert np.abs(got - np.exp(x)).max() < 2 * error + 1e-7   # float32-rounded coefficients
