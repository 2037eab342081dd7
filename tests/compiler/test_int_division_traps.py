"""Integer division and power at their edges on every engine, as PyTorch computes them:
the smallest integer over -1 wraps to itself (its remainder is 0) -- x86's ``idiv`` traps
on it, so a compiled kernel that divides by -1 directly kills the process with SIGFPE --
and an integer tensor to a negative integer tensor power is the truncated ``1 / x ** -y``
(1 for x = 1, +-1 for x = -1 by the parity of y, 0 otherwise). Each engine runs in a
subprocess, so that a trap fails the test instead of killing pytest. References are
written out with Python integers."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from nova.runtime.mlir_engine import unavailable_reason

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BITS = {"int64": 64, "int32": 32}


def _operands(bits: int) -> tuple[list[int], list[int]]:
    lo, hi = -2 ** (bits - 1), 2 ** (bits - 1) - 1
    a = [lo, 7, lo, -7, hi, 0, 5, lo + 1, -9, lo]
    b = [-1, 2, 3, -1, -1, -1, -3, -1, 4, 1]
    return a, b


POW_X = [2, 1, -1, -1, 0, 3, -2, 0, 5, -3]
POW_Y = [-1, -2, -3, -4, -1, 2, 3, 0, -7, 3]


def _wrap(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _trunc(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _ipow(x: int, y: int) -> int:
    if y >= 0:
        return x ** y
    return {1: 1, -1: -1 if y % 2 else 1}.get(x, 0)


def _expected(bits: int) -> dict[str, list[int]]:
    a, b = _operands(bits)
    rows = {"floordiv": [a_ // b_ for a_, b_ in zip(a, b)],
            "remainder": [a_ % b_ for a_, b_ in zip(a, b)],
            "trunc": [_trunc(a_, b_) for a_, b_ in zip(a, b)],
            "fmod": [a_ - b_ * _trunc(a_, b_) for a_, b_ in zip(a, b)],
            "pow": [_ipow(x, y) for x, y in zip(POW_X, POW_Y)]}
    return {k: [_wrap(v, bits) for v in vs] for k, vs in rows.items()}


def _run(source: str) -> dict:
    """``source`` run by a fresh interpreter in the repository root; its last line of
    output parsed as JSON. A signal (SIGFPE) or an error fails the test with its output."""
    r = subprocess.run([sys.executable, "-c", source], cwd=ROOT, capture_output=True,
                       text=True, timeout=240, check=False)
    assert r.returncode == 0, (f"exit status {r.returncode} (a negative status is the "
                               f"signal that killed it: -8 is SIGFPE)\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


_ENGINE_SCRIPT = """
import json, nova as nv
out = {{}}
with nv.engine({engine!r}):
    for dtype, (A, B) in {operands}.items():
        d = getattr(nv, dtype)
        a, b = nv.tensor(A, dtype=d) * 1, nv.tensor(B, dtype=d) * 1
        x, y = nv.tensor({x}, dtype=d) * 1, nv.tensor({y}, dtype=d) * 1
        out[dtype] = {{"floordiv": (a // b).tolist(), "remainder": (a % b).tolist(),
                      "trunc": nv.div(a, b, rounding_mode="trunc").tolist(),
                      "fmod": nv.fmod(a, b).tolist(), "pow": (x ** y).tolist(),
                      "floor_mode": nv.div(a, b, rounding_mode="floor").tolist(),
                      "remainder_fn": nv.remainder(a, b).tolist()}}
    try:
        (nv.tensor([-2**63, 4]) * 1 // (nv.tensor([-1, 0]) * 1)).tolist()
        out["by zero"] = "no error"
    except nv.RealizationError as e:
        out["by zero"] = str(e)
print(json.dumps(out))
"""

ENGINES = ["cpu", "interp"] + (["mlir"] if unavailable_reason() is None else [])


@pytest.mark.parametrize("engine", ENGINES)
def test_smallest_integer_over_minus_one_wraps_and_negative_powers(engine):
    """int64 and int32; a zero divisor is still the run-time error beside a -1."""
    operands = {dtype: _operands(bits) for dtype, bits in BITS.items()}
    got = _run(_ENGINE_SCRIPT.format(operands=operands, x=POW_X, y=POW_Y, engine=engine))
    assert "division by zero" in got.pop("by zero")
    for dtype, bits in BITS.items():
        want = _expected(bits)
        want["floor_mode"], want["remainder_fn"] = want["floordiv"], want["remainder"]
        assert got[dtype] == want, dtype


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (C++20)")
def test_cuda_kernels_wrap_on_the_emulator():
    """The generated CUDA kernels (their prelude's ``nv_idiv``/``nv_ipow``) on the CPU
    emulator: compiled for x86, a plain ``a / -1`` traps there as on the CPU engine."""
    a, b = _operands(64)
    got = _run(textwrap.dedent(f"""
        import json, numpy as np, nova as nv
        from nova.compiler.targets.cuda.codegen import generate
        from nova.compiler.targets.cuda.device import SM80
        from tests.compiler.cuda_cases import _graph, cases_of, from_storage, storage_view
        from tests.compiler.cuda_emulator import Emulator
        a, b = nv.tensor({a}), nv.tensor({b})
        x, y = nv.tensor({POW_X}), nv.tensor({POW_Y})
        outs = [nv.div(a, b, rounding_mode="trunc"), x ** y]
        got = []
        for t in outs:
            (case,) = cases_of(_graph(t))
            k = generate(case.plan, SM80)
            out = np.zeros_like(storage_view(case.expected))
            flag = Emulator([("_k", k, case.plan)]).run("_k", k, case.plan,
                                                        [storage_view(v) for v in case.inputs], out)
            got.append([flag, from_storage(out, case.expected).tolist()])
        print(json.dumps(got))
        """))
    want = _expected(64)
    assert got == [[0, want["trunc"]], [0, want["pow"]]]
