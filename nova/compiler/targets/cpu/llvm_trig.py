"""float32 ``sin`` and ``cos`` as straight-line code, so loops containing them vectorize.

A libm call keeps its loop scalar (``sin`` ran at 13% of ``add``'s bandwidth). Two paths:

- **|x| < 2^18** (``FAST_LIMIT``), float32 throughout: ``n = rint(|x| 2/pi)`` and
  ``r = |x| - n pi/2`` by Cody-Waite with pi/2 in three float32 pieces (``PIO2_F32``)
  and fused multiply-adds (``llvm.fma``, fused on every target -- a libm call, correct
  but not vectorized, on one without FMA: the first step is exact, as ``n`` has at most
  18 bits and ``|x| - n P1`` fits a float32).
  ``python tools/check_float32_math.py sin cos`` finds every float32 within 1.54 ulp
  of the correctly rounded result. With this path forced further the error grew:
  1.67 ulp up to 2^19, 1.95 up to 2^20, 3.8 up to 2^22, where three pieces no longer
  hold enough of pi/2 for ``n`` -- hence the limit.
- **Larger |x|, infinities and NaN**: a scalar function of its own (``nova.trig.sin_huge``,
  ``cos_huge``), called under a branch that is almost never taken. It reduces in
  float64: ``x = n (pi/2) + r`` with ``|r| <= pi/4``; below ``2^27`` the argument is
  itself the float64 ``A`` (``B = 0``); from ``2^27`` up, ``x = m 2^s`` (``m`` the
  24-bit significand) is first replaced by ``m (2^s mod 2 pi)``, which has the same
  sine and cosine: ``2^s mod 2 pi`` comes from a 101-entry table (``TWO_POW_MOD_2PI``,
  one entry per exponent, computed below from pi to 600 bits with integers) split into
  a 29-bit head, so that ``A = m head`` is exact, and a float64 tail, ``B = m tail``.
  Cody-Waite in three parts: ``r = ((A - n P1) - n P2) + (B - n P3)``, ``P1`` and
  ``P2`` 26-bit pieces of pi/2 (``n < 2^27``, so both products are exact and the first
  two differences cancel exactly), ``P3`` the rest: pi/2 to ~105 bits. ``r`` is rounded
  to float32 with its remainder ``r_lo`` kept for a first-order correction.

  The loop vectorizer turns the guarded call into a call of a masked vector variant
  (declared through ``vector-function-abi-variant``; ``_vector_variant``), which
  returns at once when no lane is that large and otherwise evaluates the scalar
  function lane by lane; ``compile_worker.inline_vector_variants`` then inlines it, so
  the vector loop only tests the mask. Computing this path for every element,
  branch-free, as before (its float64 arithmetic and table gathers) held sin and cos
  at 35-40% of ``add``'s bandwidth.

Both paths end in Taylor polynomials on ``|r| <= pi/4`` in float32: ``sin r = r + r^3
S(r^2)`` to r^9 (next term < 3e-9 relative) and ``cos r = 1 + r^2 C(r^2)`` to r^10,
combined by the quadrant ``n mod 4``. Tiny arguments give ``x`` for sine (r is |x|, and
r + r^3 S rounds to r; -0.0 and subnormals included); infinities and NaN take the huge
path, which gives NaN. ``tests/compiler/test_cpu_math.py`` checks both within 2 ulp of
the correctly rounded result against float64, huge arguments and both sides of
``FAST_LIMIT`` included.
"""
from __future__ import annotations

import math
import struct
from fractions import Fraction

from llvmlite import ir

F32, F64, I32, I64 = ir.FloatType(), ir.DoubleType(), ir.IntType(32), ir.IntType(64)

FAST_LIMIT = 2.0 ** 18           # |x| below: the float32 reduction (see module docstring)
# float32 lanes of the vector variants: SSE/NEON, AVX2, AVX-512 (the configurator asks
# the vectorizer for the host's: ``configurator.float32_vector_width``)
VARIANT_LANES = (4, 8, 16)

FIRST_BIG_EXPONENT = 154         # biased exponent of 2^27: from here on, the table
LAST_EXPONENT = 254              # the largest finite float32's
TABLE_ROWS = LAST_EXPONENT - FIRST_BIG_EXPONENT + 1
BIG = 2.0 ** 27
SIN_TAYLOR = (-1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880)
COS_TAYLOR = (-1.0 / 2, 1.0 / 24, -1.0 / 720, 1.0 / 40320, -1.0 / 3628800)


def _pi_scaled(bits: int) -> int:
    """floor(pi 2^bits) (Machin's formula in integers, with guard bits)."""
    guard = bits + 16
    one = 1 << guard

    def atan_inv(k: int) -> int:          # atan(1/k) 2^guard, alternating series
        total, term, n, sign = 0, one // k, 1, 1
        while term:
            total += sign * (term // n)
            term //= k * k
            n += 2
            sign = -sign
        return total
    return (16 * atan_inv(5) - 4 * atan_inv(239)) >> 16


def _split(value: Fraction, head_bits: int) -> tuple[float, float]:
    """``value`` as a head with ``head_bits`` significant bits (truncated) and the
    float64 nearest the rest."""
    if value == 0:
        return 0.0, 0.0
    exponent = value.numerator.bit_length() - value.denominator.bit_length()
    scale = Fraction(2) ** (head_bits - 1 - exponent)
    head = Fraction(int(value * scale)) / scale
    assert float(head) == head
    return float(head), float(value - head)


def _tables() -> tuple[list[float], list[float], tuple[float, float, float],
                    tuple[float, float, float]]:
    precision = 600
    pi = Fraction(_pi_scaled(precision), 1 << precision)
    heads, tails = [], []
    for biased in range(FIRST_BIG_EXPONENT, LAST_EXPONENT + 1):
        s = biased - 150                  # x = m 2^s, m the 24-bit integer significand
        head, tail = _split(Fraction(2 ** s) % (2 * pi), 29)
        heads.append(head)
        tails.append(tail)
    half = pi / 2
    p1, _ = _split(half, 26)
    p2, _ = _split(half - Fraction(p1), 26)
    p3 = float(half - Fraction(p1) - Fraction(p2))
    pieces: list[float] = []
    rest = half
    for _ in range(3):                    # float32 pieces, each rounded to nearest
        piece = float(_to_float32(rest))
        pieces.append(piece)
        rest -= Fraction(piece)
    return heads, tails, (p1, p2, p3), (pieces[0], pieces[1], pieces[2])


def _to_float32(value: Fraction) -> float:
    return struct.unpack("f", struct.pack("f", float(value)))[0]


TWO_POW_MOD_2PI_HEAD, TWO_POW_MOD_2PI_TAIL, PIO2_PARTS, PIO2_F32 = _tables()


def _table(e, name: str, values: list[float]) -> ir.GlobalVariable:
    module = e.module
    if name in module.globals:
        return module.globals[name]
    ty = ir.ArrayType(F64, len(values))
    g = ir.GlobalVariable(module, ty, name=name)
    g.global_constant = True
    g.linkage = "internal"
    g.initializer = ir.Constant(ty, values)
    return g


def _reduce_fast(e, x: ir.Value) -> tuple[ir.Value, None, ir.Value]:
    """(r, None, quadrant) of |x| < ``FAST_LIMIT``, all in float32."""
    b = e.b
    f = lambda v: ir.Constant(F32, v)
    fma = e.intrinsic("fma", F32, 3)
    ax = e.call("fabs", x)
    n = e.call("rint", b.fmul(ax, f(2 / math.pi)))
    minus_n = b.fneg(n)
    r = ax
    for piece in PIO2_F32:
        r = b.call(fma, [minus_n, f(piece), r])
    return r, None, b.and_(b.fptosi(n, I32), ir.Constant(I32, 3))


def _reduce_huge(e, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(r, r_lo, quadrant) of any |x|: |x| = n pi/2 + r + r_lo, quadrant = n mod 4 (i32)."""
    b = e.b
    d = lambda v: ir.Constant(F64, v)
    i32 = lambda v: ir.Constant(I32, v)
    ax = e.call("fabs", x)
    bits = b.bitcast(ax, I32)
    exponent = b.lshr(bits, i32(23))
    significand = b.sitofp(b.or_(b.and_(bits, i32(0x7FFFFF)), i32(0x800000)), F64)
    row = b.sub(exponent, i32(FIRST_BIG_EXPONENT))
    row = b.select(b.icmp_signed("<", row, i32(0)), i32(0), row)
    row = b.select(b.icmp_signed(">", row, i32(TABLE_ROWS - 1)), i32(TABLE_ROWS - 1), row)
    row = b.sext(row, I64)
    zero = ir.Constant(I64, 0)
    head = b.load(b.gep(_table(e, "nova.trig.two_pow_mod_2pi.head", TWO_POW_MOD_2PI_HEAD),
                        [zero, row], inbounds=True))
    tail = b.load(b.gep(_table(e, "nova.trig.two_pow_mod_2pi.tail", TWO_POW_MOD_2PI_TAIL),
                        [zero, row], inbounds=True))
    big = b.fcmp_ordered(">=", ax, ir.Constant(F32, BIG))
    a = b.select(big, b.fmul(significand, head), b.fpext(ax, F64))
    lo = b.select(big, b.fmul(significand, tail), d(0.0))
    p1, p2, p3 = PIO2_PARTS
    n = e.call("rint", b.fmul(b.fadd(a, lo), d(0.6366197723675814)))
    r = b.fadd(b.fsub(b.fsub(a, b.fmul(n, d(p1))), b.fmul(n, d(p2))),
               b.fsub(lo, b.fmul(n, d(p3))))
    r32 = b.fptrunc(r, F32)
    r_lo = b.fptrunc(b.fsub(r, b.fpext(r32, F64)), F32)
    quadrant = b.and_(b.fptosi(n, I32), i32(3))
    return r32, r_lo, quadrant


def _sin_cos_of_reduced(e, r: ir.Value, r_lo: ir.Value | None) -> tuple[ir.Value, ir.Value]:
    b = e.b
    r2 = b.fmul(r, r)
    if r_lo is None:
        return (e._fma(b.fmul(r, r2), e._poly(r2, SIN_TAYLOR), r),
                e._fma(r2, e._poly(r2, COS_TAYLOR), ir.Constant(F32, 1.0)))
    s = b.fadd(r, e._fma(b.fmul(r, r2), e._poly(r2, SIN_TAYLOR), r_lo))
    c = b.fsub(e._fma(r2, e._poly(r2, COS_TAYLOR), ir.Constant(F32, 1.0)), b.fmul(r, r_lo))
    return s, c


def _of_abs(e, x: ir.Value, reduced: tuple, sine: bool) -> ir.Value:
    """sin|x| or cos|x| from ``reduced`` = (r, r_lo, q): by the quadrant q, the reduced
    sine where q is even and cosine where odd for sin (the other way for cos), negated
    in quadrants (2, 3) for sin and (1, 2) for cos."""
    b = e.b
    i32 = lambda v: ir.Constant(I32, v)
    r, r_lo, q = reduced
    s, c = _sin_cos_of_reduced(e, r, r_lo)
    odd = b.icmp_unsigned("!=", b.and_(q, i32(1)), i32(0))
    v = b.select(odd, c, s) if sine else b.select(odd, s, c)
    sign = b.shl(b.and_(q if sine else b.add(q, i32(1)), i32(2)), i32(30))
    return b.bitcast(b.xor(b.bitcast(v, I32), sign), F32)


def _huge_function(e, sine: bool) -> ir.Function:
    """``float nova.trig.{sin,cos}_huge(float x)``: sin|x| or cos|x| for any ``x``
    through the float64 reduction, with its masked vector variants (internal functions,
    kept until the vectorizer has had its chance to call them: ``keep_vector_variants``).
    """
    from nova.compiler.targets.cpu.llvm_emit import Frame   # (which imports this module)
    name = f"nova.trig.{'sin' if sine else 'cos'}_huge"
    module = e.module
    if name in module.globals:
        return module.globals[name]
    frame = Frame(module, ir.FunctionType(F32, [F32]), name, ["x"])
    fn = frame.fn
    fn.linkage = "internal"
    for attribute in ("noinline", "nounwind", "readnone"):
        fn.attributes.add(attribute)
    (x,) = fn.args
    frame.b.ret(_finish(frame, x, _of_abs(frame, x, _reduce_huge(frame, x), sine)))
    variants = [_vector_variant(module, fn, lanes) for lanes in VARIANT_LANES]
    mappings = ",".join(f"_ZGV_LLVM_M{lanes}v_{name}({v.name})"
                        for lanes, v in zip(VARIANT_LANES, variants))
    # llvmlite knows no string attributes: add LLVM's verbatim, past its name check
    set.add(fn.attributes, f'"vector-function-abi-variant"="{mappings}"')
    return fn


def _vector_variant(module: ir.Module, scalar: ir.Function, lanes: int) -> ir.Function:
    """``<lanes x float> (<lanes x float> x, <lanes x i1> mask)``: ``scalar`` of each
    lane, or, when no lane of ``mask`` is set (the common case: nothing is huge), at
    once a vector of zeros, which the caller does not read."""
    from nova.compiler.targets.cpu.llvm_emit import Frame   # (which imports this module)
    vec, mask_ty = ir.VectorType(F32, lanes), ir.VectorType(ir.IntType(1), lanes)
    frame = Frame(module, ir.FunctionType(vec, [vec, mask_ty]),
                  f"{scalar.name}.m{lanes}", ["x", "mask"])
    frame.fn.linkage = "internal"
    frame.fn.attributes.add("nounwind")
    frame.fn.attributes.add("alwaysinline")
    b = frame.b
    x, mask = frame.fn.args
    bits = b.bitcast(mask, ir.IntType(lanes))
    with b.if_then(b.icmp_unsigned("==", bits, ir.Constant(ir.IntType(lanes), 0)),
                   likely=True):
        b.ret(ir.Constant(vec, None))
    out = ir.Constant(vec, None)
    for lane in range(lanes):         # rare: a lane is huge; every lane, scalar
        i = ir.Constant(I32, lane)
        out = b.insert_element(out, b.call(scalar, [b.extract_element(x, i)]), i)
    b.ret(out)
    return frame.fn


def keep_vector_variants(module: ir.Module) -> None:
    """List the module's vector variants (its ``alwaysinline`` definitions: no code
    calls them until the loop vectorizer does) in ``llvm.compiler.used``, so that no
    pass before the vectorizer deletes them as unused. Called once the module is
    complete (``llvm.emit_kernel``)."""
    variants = [g for g in module.globals.values()
                if isinstance(g, ir.Function) and not g.is_declaration
                and "alwaysinline" in g.attributes]
    if not variants:
        return
    ptr = ir.IntType(8).as_pointer()
    ty = ir.ArrayType(ptr, len(variants))
    used = ir.GlobalVariable(module, ty, name="llvm.compiler.used")
    used.linkage = "appending"
    used.section = "llvm.metadata"
    used.initializer = ir.Constant(ty, [f.bitcast(ptr) for f in variants])


def _sin_or_cos(e, x: ir.Value, sine: bool) -> ir.Value:
    """sin|x| or cos|x|: the float32 path, or, where ``|x| >= FAST_LIMIT`` or x is NaN
    (infinities and NaN give NaN there), the huge function's value."""
    b = e.b
    fast = _of_abs(e, x, _reduce_fast(e, x), sine)
    huge = b.fcmp_unordered(">=", e.call("fabs", x), ir.Constant(F32, FAST_LIMIT))
    before = b.block
    with b.if_then(huge, likely=False):
        slow = b.call(_huge_function(e, sine), [x])
        taken = b.block
    value = b.phi(F32)
    value.add_incoming(fast, before)
    value.add_incoming(slow, taken)
    return value


def _finish(e, x: ir.Value, value: ir.Value) -> ir.Value:
    """NaN for infinities and NaN."""
    b = e.b
    finite = b.fcmp_ordered("<", e.call("fabs", x), ir.Constant(F32, float("inf")))
    return b.select(finite, value, ir.Constant(F32, float("nan")))


def sin_f32(e, x: ir.Value) -> ir.Value:
    """sin: sin|x| with the sign of x (sin is odd). Tiny x gives x itself: there r is
    |x| and r + r^3 S(r^2) rounds to r."""
    b = e.b
    v = _sin_or_cos(e, x, sine=True)
    return b.bitcast(b.xor(b.bitcast(v, I32), b.and_(b.bitcast(x, I32),
                                                     ir.Constant(I32, -0x80000000))), F32)


def cos_f32(e, x: ir.Value) -> ir.Value:
    """cos: cos|x| (cos is even)."""
    return _sin_or_cos(e, x, sine=False)
