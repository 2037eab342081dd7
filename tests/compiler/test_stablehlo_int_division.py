"""Integer division in ``nv.export.stablehlo`` at the quotients StableHLO leaves to the
implementation: the smallest integer over -1 (Nova's engines, as PyTorch, wrap it to
itself; LLVM's ``sdiv`` leaves it undefined and x86's ``idiv`` traps) and a zero divisor
(an error in Nova; the exported step divides by 1, as the CPU kernel does before it
fails the step).

The exported text is evaluated by a strict reading of StableHLO written here (integer
``divide`` and ``negate`` refuse those operands, ``add``/``subtract``/``multiply`` wrap),
so the test needs no StableHLO consumer and checks that the program itself says Nova's
rule; IREE, where installed, runs it too. References are Python integers.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import nova as nv
from tests.compiler.test_stablehlo import _check
from tests.compiler.test_int_division_traps import _trunc, _wrap

_DTYPES = {"i1": np.bool_, "i8": np.int8, "ui8": np.uint8, "i16": np.int16,
           "i32": np.int32, "i64": np.int64}
_LINE = re.compile(r'(%\w+) = "([\w.]+)"\(([^)]*)\)(?: \{(.*)\})? : \(.*\) -> tensor<(.*)>$')


def _elem(ttype: str) -> type:
    return _DTYPES[ttype.split("x")[-1]]


def _python(values: np.ndarray) -> list[int]:
    return [int(v) for v in values.ravel()]


def _divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Truncating integer division, refusing what StableHLO leaves undefined."""
    info = np.iinfo(x.dtype)
    out = []
    for a, b in zip(_python(x), _python(y)):
        if b == 0 or (info.min < 0 and a == info.min and b == -1):
            raise ArithmeticError(f"stablehlo.divide of {a} by {b} is not defined")
        q = abs(a) // abs(b)
        out.append(q if (a < 0) == (b < 0) else -q)
    return np.array(out, x.dtype).reshape(x.shape)


def _negate(x: np.ndarray) -> np.ndarray:
    info = np.iinfo(x.dtype)
    if info.min < 0 and (x == info.min).any():
        raise ArithmeticError("stablehlo.negate of the smallest integer overflows")
    return -x


def _constant(attrs: str, ttype: str) -> np.ndarray:
    lit = re.match(r"value = dense<([^>]*)>", attrs).group(1)
    shape = tuple(int(n) for n in ttype.split("x")[:-1])
    value = {"true": True, "false": False}.get(lit, lit)
    return np.full(shape, int(value), _elem(ttype))


_COMPARE = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
            "GT": np.greater, "GE": np.greater_equal}
_WRAPPING = {"stablehlo.add": np.add, "stablehlo.subtract": np.subtract,
             "stablehlo.multiply": np.multiply, "stablehlo.and": np.bitwise_and,
             "stablehlo.or": np.bitwise_or}


def _strict_run(text: str, args: list[np.ndarray]) -> list[np.ndarray]:
    """The integer elementwise StableHLO function of ``text`` on ``args``."""
    env = {f"%arg{k}": a for k, a in enumerate(args)}
    for line in text.splitlines()[2:]:
        line = line.strip()
        if line.startswith("return"):
            return [env[n.strip()] for n in line[len("return"):].split(":")[0].split(",")]
        name, op, operands, attrs, ttype = _LINE.match(line).groups()
        xs = [env[n.strip()] for n in operands.split(",") if n.strip()]
        with np.errstate(over="ignore"):
            if op == "stablehlo.constant":
                env[name] = _constant(attrs, ttype)
            elif op == "stablehlo.compare":
                env[name] = _COMPARE[re.search(r"direction (\w+)", attrs).group(1)](*xs)
            elif op == "stablehlo.select":
                env[name] = np.where(*xs)
            elif op == "stablehlo.convert":
                env[name] = xs[0].astype(_elem(ttype))
            elif op == "stablehlo.divide":
                env[name] = _divide(*xs)
            elif op == "stablehlo.negate":
                env[name] = _negate(*xs)
            else:
                env[name] = _WRAPPING[op](*xs).astype(_elem(ttype))
    raise AssertionError("no return in the exported text")


def _operands(bits: int) -> tuple[list[int], list[int]]:
    lo, hi = -2 ** (bits - 1), 2 ** (bits - 1) - 1
    return ([lo, 7, lo, -7, hi, 0, 5, lo + 1, -9, lo],
            [-1, 2, 3, -1, -1, -1, -3, -1, 4, 1])


def _steps(a: nv.Tensor, b: nv.Tensor) -> list[nv.Tensor]:
    return [a // b, a % b, nv.div(a, b, rounding_mode="trunc"), nv.fmod(a, b),
            nv.remainder(a, b), nv.div(a, b, rounding_mode="floor")]


@pytest.mark.parametrize("dtype,bits", [("int64", 64), ("int32", 32), ("int8", 8)])
def test_smallest_integer_over_minus_one_wraps_in_the_exported_program(dtype, bits):
    """Nova's values (its engines and Python's integers wrapped to the width): the
    quotient of the smallest integer by -1 is itself, its remainder 0."""
    a_list, b_list = _operands(bits)
    np_dtype = getattr(np, dtype)
    a = nv.tensor(np.array(a_list, np_dtype))
    b = nv.tensor(np.array(b_list, np_dtype))
    outs = _steps(a, b)
    floor = [_wrap(x // y, bits) for x, y in zip(a_list, b_list)]
    rem = [_wrap(x % y, bits) for x, y in zip(a_list, b_list)]
    trunc = [_wrap(_trunc(x, y), bits) for x, y in zip(a_list, b_list)]
    fmod = [_wrap(x - y * _trunc(x, y), bits) for x, y in zip(a_list, b_list)]
    want = [floor, rem, trunc, fmod, rem, floor]
    # (exported before the values are realized: a realized tensor is an argument)
    text, args = nv.export.stablehlo(*outs), nv.export.arguments(*outs)
    assert [a.tolist() for a in args] == [a_list, b_list]
    assert [g.tolist() for g in _strict_run(text, args)] == want
    assert [t.tolist() for t in outs] == want          # Nova's own engine


def test_a_zero_divisor_divides_by_one_in_the_exported_program():
    """Nova raises for it; the exported step cannot, and computes the CPU kernel's
    in-kernel quotient (the dividend) instead of an undefined one. Unsigned too."""
    for np_dtype in (np.int64, np.int16, np.uint8):
        a = nv.tensor(np.array([5, 7, 0, 3], np_dtype))
        b = nv.tensor(np.array([0, 0, 0, 2], np_dtype))
        q = nv.div(a, b, rounding_mode="trunc")
        args = nv.export.arguments(q)
        assert len(args) == 2
        (got,) = _strict_run(nv.export.stablehlo(q), args)
        assert got.dtype == np_dtype and got.tolist() == [5, 7, 0, 1]


def test_the_edge_quotients_through_iree():
    """IREE (skipped without it) computes the exported program as Nova's CPU engine."""
    outs = []
    for dtype, bits in (("int64", 64), ("int32", 32), ("int8", 8)):
        a_list, b_list = _operands(bits)
        outs += _steps(nv.tensor(np.array(a_list, getattr(np, dtype))),
                       nv.tensor(np.array(b_list, getattr(np, dtype))))
    _check(outs)
