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


def _neighbours(points, ulps: int = 300) -> np.ndarray:
    """Every float32 within ``ulps`` of each point (and of its negative), the point's
    own bits included: the edges where a formula hands over to the next."""
    bits = np.abs(np.array(points, np.float32)).view(np.int32)
    near = (bits[:, None] + np.arange(-ulps, ulps + 1, dtype=np.int32)).ravel()
    x = near[(near >= 0) & (near < 0x7F800000)].view(np.float32)
    return np.concatenate([x, -x])


def _edges() -> dict[str, list[float]]:
    """Per op, where its float32 code changes formula or range (the constants are the
    emitter's own), and where its result leaves the normal range."""
    from nova.compiler.targets.cpu.llvm_emit import Emitter as E
    ln2 = float(np.log(2.0))
    return {
        "exp": [-104.0, -103.28, -87.34, -0.5 * ln2, 0.5 * ln2, 1.5 * ln2, 88.72, 2.0 ** -24],
        "log": [2.0 ** -126, 2.0 ** -149, 0.75, 1.0, 1.5, 3.4e38],
        "log1p": [1.0, 0.25, 0.5, 2.0, 2.0 ** 24, 2.0 ** 25, 1.2e38, 1.71e38, 2.41e38, 3.4e38,
                  2.0 ** -24],
        "tanh": [E.TANH_SPLIT, ln2 / 4, 3 * ln2 / 4, 0.03, 9.0117, E.TANH_ONE, 2.0 ** -12],
        "erf": [E.ERF_SPLIT, E.ERF_ONE, 3.9192, 1.0, 2.0 ** -12],
    }


@pytest.mark.parametrize("name", ["exp", "log", "log1p", "tanh", "erf"])
def test_float32_math_at_its_edges(name):
    """Within 2 ulp on every float32 near the points where the code changes formula
    (erf's split between its series and 1 - P^4, tanh's between its series and
    1 - 2 / (e^2x + 1) and the steps of its reduction, log1p's exponent 0 and the
    exponents 127 and 128 whose 2^-e is subnormal) or where the result leaves the
    normal range, on both signs: the exhaustive sweep of ``tools/check_float32_math.py``
    in the places where an edge case would hide."""
    fn, ref, _ = CASES[name]
    x = _neighbours(_edges()[name])
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float64))
    got = fn(nv.tensor(x)).numpy()
    finite = np.isfinite(want) & (np.abs(want) < np.finfo(np.float32).max)
    errors = ulp_errors(got[finite], want[finite])
    worst = int(np.argmax(errors))
    assert errors[worst] <= MAX_ULP, (
        f"{name}({x[finite][worst]!r}) = {got[finite][worst]!r}, float64 says "
        f"{want[finite][worst]!r}: {errors[worst]:.2f} ulp")
    with np.errstate(over="ignore"):
        overflowed = want[~finite & ~np.isnan(want)].astype(np.float32)
    assert np.array_equal(got[~finite & ~np.isnan(want)], overflowed)


@pytest.mark.parametrize("name", ["exp", "log", "log1p", "erf"])
def test_float32_math_loops_do_not_divide(name):
    """exp, log, log1p and erf are polynomials and bit operations only: no division in
    the optimized loop (log and log1p divided once per element for the series of
    atanh; their polynomial is faster on Zen 4, L2-resident: log1p 5.4 ns per 16
    elements against 6.2 with that series)."""
    x = nv.tensor(np.ones((64, 256), np.float32))
    (text,) = elementwise_llvm(getattr(nv, name)(x * 3.0))
    assert "fdiv" not in optimized(text)


def _run_kernel(text: str, x: np.ndarray) -> np.ndarray:
    """The elementwise kernel ``text`` (``i32 (i8** bufs, i64 start, i64 end)``, one
    float32 input and one output) compiled here, apart from the kernel cache, on x."""
    import ctypes

    import llvmlite.binding as llvm

    from nova.runtime.compile_worker import optimize, target_machine
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    tm = target_machine(llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())
    module = llvm.parse_assembly(text)
    optimize(tm, module)
    engine = llvm.create_mcjit_compiler(module, tm)
    engine.finalize_object()
    (name,) = [f.name for f in module.functions if not f.is_declaration
               and f.linkage == llvm.Linkage.external]
    kernel = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int64,
                              ctypes.c_int64)(engine.get_function_address(name))
    x = np.ascontiguousarray(x, np.float32)
    out = np.empty_like(x)
    assert kernel((ctypes.c_void_p * 2)(x.ctypes.data, out.ctypes.data), 0, x.size) == 0
    return out


@pytest.mark.parametrize("name", ["exp", "sigmoid"])
def test_exp_scale_is_the_same_with_and_without_ldexp(name, monkeypatch):
    """``Emitter._times_pow2`` multiplies by 2^n with AVX-512's vscalefps (through
    ``llvm.ldexp``) where the host has it and with two factors built in the exponent
    bits elsewhere; both are exact, so both kernels give the same bits, subnormal,
    overflowing and NaN results included. Each is compiled here from its own IR (the
    kernel cache keys kernels by the host, which picks one path)."""
    from nova.compiler.targets.cpu.llvm_emit import Emitter
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.uniform(-110, 90, 20000), SPECIAL,
                        _neighbours([87.34, 88.72, 103.28])]).astype(np.float32)
    fn = nv.exp if name == "exp" else nv.sigmoid
    results = {}
    for scalef in (True, False):
        monkeypatch.setattr(Emitter, "VECTOR_LDEXP", scalef)
        (text,) = elementwise_llvm(fn(nv.tensor(np.ones(4096, np.float32))))
        assert ("llvm.ldexp" in text) == scalef
        results[scalef] = _run_kernel(text, x)
    np.testing.assert_array_equal(results[True].view(np.int32), results[False].view(np.int32))
    if name == "exp":
        with np.errstate(all="ignore"):
            want = np.exp(x.astype(np.float64))
        finite = np.isfinite(want) & (want < np.finfo(np.float32).max)
        assert ulp_errors(results[False][finite], want[finite]).max() <= MAX_ULP


def test_erf_is_exactly_one_where_it_rounds_to_one():
    """erf rounds to 1 in float32 from 3.9192 up; the polynomial tail gives exactly +-1
    from 3.96 on (so GELU's 1 + erf(x / sqrt 2) is exactly 0 far below 0, and GELU
    there -0, as PyTorch's), and stays within half an ulp of 1 before."""
    x = np.concatenate([np.linspace(3.96, 50, 2000), [1e10, 3e38, np.inf]]).astype(np.float32)
    x = np.concatenate([x, -x])
    np.testing.assert_array_equal(nv.erf(nv.tensor(x)).numpy(), np.sign(x))
    near = np.linspace(3.9, 3.96, 2000, dtype=np.float32)
    assert np.abs(nv.erf(nv.tensor(near)).numpy().astype(np.float64) - 1).max() <= 2.0 ** -24
