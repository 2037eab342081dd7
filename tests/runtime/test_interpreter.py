"""The reference interpreter on hand-written nova IR: op meanings at their edges."""
import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.parser import Parser

from nova.compiler.dialect import Nova
from nova.runtime.executable import Executable
from nova.runtime.interpreter import InterpreterError
from nova.core.philox import philox4x32


def _run(text: str, *args):
    ctx = Context()
    for d in (builtin.Builtin, func.Func, Nova):
        ctx.load_dialect(d)
    module = Parser(ctx, text).parse_module()
    module.verify()
    return Executable(module).run([np.asarray(a) for a in args])


def test_integer_division_truncates_and_pad_interleaves():
    out = _run("""
    func.func @step(%a: tensor<4xi64>, %b: tensor<4xi64>, %p: tensor<2xf32>) -> (tensor<4xi64>, tensor<6xf32>) {
      %q = nova.div %a, %b : tensor<4xi64>
      %z = nova.constant -1.0 : f32 : tensor<f32>
      %r = nova.pad %p, %z low = [1] high = [2] interior = [1] : tensor<2xf32>, tensor<f32> -> tensor<6xf32>
      func.return %q, %r : tensor<4xi64>, tensor<6xf32>
    }""", np.array([7, -7, 7, -7]), np.array([2, 2, -2, -2]), np.array([5, 6], np.float32))
    assert out[0].tolist() == [3, -3, -3, 3]
    assert out[1].tolist() == [-1, 5, -1, 6, -1, -1]


def test_scatter_add_accumulates_duplicates_and_gather_checks_bounds():
    text = """
    func.func @step(%x: tensor<3xf32>, %i: tensor<4xi64>, %s: tensor<4xf32>) -> (tensor<3xf32>, tensor<4xf32>) {
      %r = nova.scatter_add %x[%i], %s dim = 0 : i64 : tensor<3xf32>, tensor<4xi64>, tensor<4xf32> -> tensor<3xf32>
      %g = nova.gather %x[%i] dim = 0 : i64 : tensor<3xf32>, tensor<4xi64> -> tensor<4xf32>
      func.return %r, %g : tensor<3xf32>, tensor<4xf32>
    }"""
    x, s = np.array([1, 2, 3], np.float32), np.ones(4, np.float32)
    r, g = _run(text, x, np.array([0, 2, 2, 0]), s)
    assert r.tolist() == [3, 2, 5] and g.tolist() == [1, 3, 3, 1]
    with pytest.raises(InterpreterError, match=r"nova.scatter_add: index values must lie in "
                                               r"\[0, 3\), got range \[0, 3\] \(value %3\)"):
        _run(text, x, np.array([0, 3, 1, 1]), s)


def test_rng_uniform_is_philox_of_index_and_offset():
    seed, offset = 7, 3
    (u,) = _run("""
    func.func @step(%k: tensor<2xi64>) -> tensor<5xf32> {
      %u = nova.rng_uniform %k : tensor<2xi64> -> tensor<5xf32>
      func.return %u : tensor<5xf32>
    }""", np.array([seed, offset]))
    i = np.arange(5, dtype=np.uint64)
    words = philox4x32((i, np.zeros(5, np.uint64), np.full(5, offset, np.uint64),
                        np.zeros(5, np.uint64)), (seed, 0))
    np.testing.assert_array_equal(u, (words[0] >> np.uint64(8)).astype(np.float32) * 2.0**-24)


def test_philox_known_answer_vectors():
    """Random123's published test vectors for philox4x32-10."""
    def run(counter, key):
        return [int(w[0]) for w in philox4x32(tuple(np.array([c], np.uint64) for c in counter), key)]
    assert run((0, 0, 0, 0), (0, 0)) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    assert run((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF)) == [
        0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]
    assert run((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0)) == [
        0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]


def test_half_precision_accumulates_in_float32():
    x = np.full(4096, 0.1, dtype=np.float16)
    (s,) = _run("""
    func.func @step(%x: tensor<4096xf16>) -> tensor<f16> {
      %s = nova.reduce_sum %x axes = [0] : tensor<4096xf16> -> tensor<f16>
      func.return %s : tensor<f16>
    }""", x)
    assert s.dtype == np.float16 and abs(float(s) - 409.5) < 0.5
