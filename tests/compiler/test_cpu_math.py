"""The CPU emitter's float32 math (``Emitter._exp_f32`` and friends, inline polynomials
so loops vectorize) against float64: within 2 ulp of the correctly rounded result over
each function's whole range, and exact at the special values.

An ulp here is the spacing of float32 at the correctly rounded result (numpy's
``spacing``), so "2 ulp" is the usual libm accuracy statement. Subnormal results count
in units of the smallest subnormal.
"""
import re

import numpy as np
import pytest
import scipy.special as sp

import nova as nv
from tests.compiler.llvm_ir import elementwise_llvm, optimized

MAX_ULP = 2.0


def _log_uniform(rng, lo, hi, n):
    return np.exp(rng.uniform(np.log(lo), np.log(hi), n))


def _samples(rng, ranges):
    parts = []
    for lo, hi, kind in ranges:
        if kind == "log":
            parts.append(_log_uniform(rng, lo, hi, 40_000))
        elif kind == "-log":
            parts.append(-_log_uniform(rng, lo, hi, 40_000))
        else:
            parts.append(rng.uniform(lo, hi, 40_000))
    return np.concatenate(parts).astype(np.float32)


# op -> (nova function, float64 reference, sample ranges (lo, hi, "lin" | "log" | "-log"))
CASES = {
    "exp": (nv.exp, np.exp, [(-103, 88.7, "lin"), (-1, 1, "lin"), (1e-30, 1e-3, "log")]),
    "log": (nv.log, np.log, [(1e-45, 3e38, "log"), (0.5, 2.0, "lin"), (0.999, 1.001, "lin")]),
    "log1p": (nv.log1p, np.log1p, [(-0.9999, 10, "lin"), (1e-30, 1e30, "log"),
                                   (1e-30, 0.5, "-log")]),
    "expm1": (nv.expm1, np.expm1, [(-25, 88.7, "lin"), (-1, 1, "lin"), (1e-30, 0.7, "log"),
                                   (1e-30, 0.7, "-log")]),
    "tanh": (nv.tanh, np.tanh, [(-12, 12, "lin"), (-0.7, 0.7, "lin"), (1e-30, 0.5, "log")]),
    "erf": (nv.erf, sp.erf, [(-6, 6, "lin"), (-1.2, 1.2, "lin"), (1e-30, 1.0, "log"),
                             (0.99, 1.01, "lin"), (3.9, 3.95, "lin")]),
    # every magnitude: both sides of the float32 path's limit (2^18), the table's
    # reduction from 2^27 up, and around its edge
    "sin": (nv.sin, np.sin, [(-10, 10, "lin"), (1e-30, 3e38, "log"), (1e-30, 3e38, "-log"),
                             (2.6e5, 2.64e5, "lin"), (1.3e8, 1.4e8, "lin"),
                             (1e-4, 1e-3, "log")]),
    "cos": (nv.cos, np.cos, [(-10, 10, "lin"), (1e-30, 3e38, "log"), (1e-30, 3e38, "-log"),
                             (-2.64e5, -2.6e5, "lin"), (1.3e8, 1.4e8, "lin"),
                             (1.0, 2.0, "lin")]),
}

SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-40, -1e-40,
                    88.7, 89.0, -104.0, 3e38, -3.4028235e38, 2.0 ** 27, 2.0 ** 27 - 8,
                    2.0 ** 18, 2.0 ** 18 - 2.0 ** -6, 1.5707964, 3.1415927], dtype=np.float32)


def ulp_errors(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|got - ref| in float32 ulps of the correctly rounded ``ref`` (finite refs)."""
    with np.errstate(over="ignore"):
        spacing = np.spacing(np.abs(ref.astype(np.float32))).astype(np.float64)
    spacing = np.maximum(spacing, np.finfo(np.float32).smallest_subnormal)
    return np.abs(got.astype(np.float64) - ref) / spacing


@pytest.mark.parametrize("name", sorted(CASES))
def test_float32_math_is_within_2_ulp(name):
    fn, ref, ranges = CASES[name]
    x = _samples(np.random.default_rng(sorted(CASES).index(name)), ranges)
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float64))
    got = fn(nv.tensor(x)).numpy()
    finite = np.isfinite(want) & (np.abs(want) < np.finfo(np.float32).max)
    errors = ulp_errors(got[finite], want[finite])
    worst = int(np.argmax(errors))
    assert errors[worst] <= MAX_ULP, (
        f"{name}({x[finite][worst]!r}) = {got[finite][worst]!r}, float64 says "
        f"{want[finite][worst]!r}: {errors[worst]:.2f} ulp")


@pytest.mark.parametrize("name", sorted(CASES))
def test_float32_math_special_values_match_numpy(name):
    """Zeros (with their sign), infinities, NaN, subnormals, the overflow and underflow
    edges, and the domain's ends give what numpy's float32 gives."""
    _check_special(name, SPECIAL)


@pytest.mark.parametrize("name", sorted(CASES))
def test_float32_math_special_values_in_vector_lanes(name):
    """The same values scattered among ordinary ones, so that they share vectors with
    them in the vectorized loop (a short array runs the scalar loop only): a NaN or a
    huge argument in one lane (sin and cos's rare path) leaves the others exact."""
    rng = np.random.default_rng(5)
    x = np.concatenate([np.tile(SPECIAL, 8), rng.uniform(-3, 3, 4000).astype(np.float32)])
    _check_special(name, rng.permutation(x))


def _check_special(name: str, xs: np.ndarray) -> None:
    fn, _, _ = CASES[name]
    numpy_fn = sp.erf if name == "erf" else getattr(np, name)
    with np.errstate(all="ignore"):
        want = numpy_fn(xs).astype(np.float32)
        want64 = numpy_fn(xs.astype(np.float64))
    got = fn(nv.tensor(xs)).numpy()
    for x, g, w, w64 in zip(xs, got, want, want64):
        if np.isnan(w):
            assert np.isnan(g), f"{name}({x!r}) = {g!r}, want NaN"
        elif w == 0 or np.isinf(w):
            assert g == w and np.signbit(g) == np.signbit(w), f"{name}({x!r}) = {g!r}, want {w!r}"
        else:
            assert ulp_errors(np.array([g]), np.array([w64]))[0] <= MAX_ULP, \
                f"{name}({x!r}) = {g!r}, want {w64!r}"


@pytest.mark.parametrize("name", ["sin", "cos", "erf", "tanh", "log1p"])
def test_float32_math_loops_are_vectorized(name):
    """No libm call is left in the optimized kernel (a call keeps its loop scalar: sin
    ran at 13% of add's bandwidth while it was one) and the loop runs on vectors. sin
    and cos call their own scalar function for huge arguments only, off the vector
    loop's path (``test_trig_huge_path_is_a_branch_in_the_vector_loop``)."""
    x = nv.tensor(np.ones((64, 256), np.float32))
    (text,) = elementwise_llvm(getattr(nv, name)(x * 3.0))
    vectorized = optimized(text)
    assert "<16 x float>" in vectorized or "<8 x float>" in vectorized
    calls = set(re.findall(r"call [^@]*@\"?([\w.]+)", vectorized))
    own = {f"nova.trig.{name}_huge"} if name in ("sin", "cos") else set()
    assert all(c.startswith("llvm.") or c in own for c in calls), calls


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_trig_huge_path_is_a_branch_in_the_vector_loop(name):
    """The vectorizer calls the huge-argument path's masked vector variant at the
    loop's float32 width (``vector-function-abi-variant``: without it, LLVM would call
    the scalar function lane by lane, or, inlined, run its float64 code for every
    element); ``optimize`` then inlines the variant, so no call of it is left and the
    vector loop only tests the mask."""
    import llvmlite.binding as llvm

    from nova.runtime.compile_worker import run_pipeline, target_machine
    x = nv.tensor(np.ones((64, 256), np.float32))
    (text,) = elementwise_llvm(getattr(nv, name)(x * 3.0))
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    tm = target_machine(llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())
    module = llvm.parse_assembly(text)
    run_pipeline(tm, module)
    variant_calls = re.findall(rf'call <(\d+) x float> @"?nova\.trig\.{name}_huge\.m(\d+)',
                               str(module))
    assert variant_calls and all(lanes == m for lanes, m in variant_calls), variant_calls
    assert f"{name}_huge.m" not in "".join(
        line for line in optimized(text).splitlines() if "call" in line)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_trig_huge_arguments_inside_a_row_reduction(dtype):
    """sin and cos summed along rows (a reduction loop, vectorized with the rare path's
    masked call inside it) with huge, infinite and NaN arguments in some rows: the other
    rows' sums are those of the float64 reference, the rows with inf or NaN give NaN.
    bfloat16 is computed in float32, at the float32 width the variants exist for."""
    rng = np.random.default_rng(7)
    x = rng.uniform(-10, 10, (64, 300)).astype(np.float32)
    x[3, 7], x[10, 100], x[20, 5], x[30, 31], x[40, 299] = 1e30, np.nan, np.inf, 3e5, -7e8
    t = nv.tensor(x).to(getattr(nv, dtype))
    xs = t.float().numpy().astype(np.float64)
    bad = ~np.isfinite(xs).all(1)
    tolerance = 1e-5 if dtype == "float32" else 0.2      # bfloat16 rounds each sine
    for fn, ref in ((nv.sin, np.sin), (nv.cos, np.cos)):
        got = fn(t).sum(1).float().numpy()
        with np.errstate(invalid="ignore"):
            want = ref(xs).sum(1)
        assert np.isnan(got[bad]).all()
        np.testing.assert_allclose(got[~bad], want[~bad], atol=tolerance)
