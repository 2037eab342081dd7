"""float32 ``sin`` and ``cos`` as straight-line code, so loops containing them vectorize.

A libm call keeps its loop scalar (``sin`` ran at 13% of ``add``'s bandwidth). Here every
float32 argument, however large, is reduced without a branch:

- ``x = n (pi/2) + r`` with ``|r| <= pi/4`` (a little more where ``n`` rounds), computed
  in float64. Below ``2^27`` the argument is itself the float64 ``A`` (``B = 0``).
  From ``2^27`` up, ``x = m 2^s`` (``m`` the 24-bit significand) is first replaced by
  ``m (2^s mod 2 pi)``, which has the same sine and cosine: ``2^s mod 2 pi`` comes from a
  101-entry table (``TWO_POW_MOD_2PI``, one entry per exponent, computed below from pi
  to 600 bits with integers) split into a 29-bit head, so that ``A = m head`` is exact,
  and a float64 tail, ``B = m tail``.
- Cody-Waite in three parts: ``r = ((A - n P1) - n P2) + (B - n P3)``, ``P1`` and ``P2``
  26-bit pieces of pi/2 (``n < 2^27``, so both products are exact and the first two
  differences cancel exactly), ``P3`` the rest: pi/2 to ~105 bits. ``r`` is rounded to
  float32 with its remainder ``r_lo`` kept for a first-order correction.
- Taylor polynomials on ``|r| <= pi/4`` in float32: ``sin r = r + r^3 S(r^2)`` to r^9
  (next term < 3e-9 relative) and ``cos r = 1 + r^2 C(r^2)`` to r^10, combined by the
  quadrant ``n mod 4``.

Tiny arguments return ``x`` for sine (so -0.0 and subnormals are exact); infinities
and NaN give NaN. ``tests/compiler/test_cpu_math.py`` checks both within 2 ulp of the
correctly rounded result against float64, huge arguments included.
"""
from __future__ import annotations

from fractions import Fraction

from llvmlite import ir

F32, F64, I32, I64 = ir.FloatType(), ir.DoubleType(), ir.IntType(32), ir.IntType(64)

FIRST_BIG_EXPONENT = 154         # biased exponent of 2^27: from here on, the table
LAST_EXPONENT = 254              # the largest finite float32's
TABLE_ROWS = LAST_EXPONENT - FIRST_BIG_EXPONENT + 1
BIG = 2.0 ** 27
TINY = 2.0 ** -12                # sin x rounds to x below this (x^2 / 6 < half an ulp)
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


def _tables() -> tuple[list[float], list[float], tuple[float, float, float]]:
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
    return heads, tails, (p1, p2, p3)


TWO_POW_MOD_2PI_HEAD, TWO_POW_MOD_2PI_TAIL, PIO2_PARTS = _tables()


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


def _reduce(e, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(r, r_lo, quadrant) of |x|: |x| = n pi/2 + r + r_lo, quadrant = n mod 4 (i32)."""
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


def _sin_cos_of_reduced(e, r: ir.Value, r_lo: ir.Value) -> tuple[ir.Value, ir.Value]:
    b = e.b
    r2 = b.fmul(r, r)
    s = b.fadd(r, e._fma(b.fmul(r, r2), e._poly(r2, SIN_TAYLOR), r_lo))
    c = b.fsub(e._fma(r2, e._poly(r2, COS_TAYLOR), ir.Constant(F32, 1.0)), b.fmul(r, r_lo))
    return s, c


def _finish(e, x: ir.Value, value: ir.Value) -> ir.Value:
    """NaN for infinities and NaN."""
    b = e.b
    finite = b.fcmp_ordered("<", e.call("fabs", x), ir.Constant(F32, float("inf")))
    return b.select(finite, value, ir.Constant(F32, float("nan")))


def _quadrant_value(e, x: ir.Value, sine: bool) -> tuple[ir.Value, ir.Value]:
    """(value, q): sin(|x|) or cos(|x|) up to its sign, by the quadrant q of |x| -- the
    reduced sine where q is even and cosine where odd for sin, the other way for cos --
    and q itself, which sets the sign."""
    b = e.b
    r, r_lo, q = _reduce(e, x)
    s, c = _sin_cos_of_reduced(e, r, r_lo)
    odd = b.icmp_unsigned("!=", b.and_(q, ir.Constant(I32, 1)), ir.Constant(I32, 0))
    return (b.select(odd, c, s) if sine else b.select(odd, s, c)), q


def _flip_sign(e, v: ir.Value, sign_bit: ir.Value) -> ir.Value:
    b = e.b
    return b.bitcast(b.xor(b.bitcast(v, I32), sign_bit), F32)


def sin_f32(e, x: ir.Value) -> ir.Value:
    """sin: by quadrant q of |x|, (s, c, -s, -c)[q], with the sign of x (sin is odd)."""
    b = e.b
    i32 = lambda v: ir.Constant(I32, v)
    v, q = _quadrant_value(e, x, sine=True)
    sign = b.xor(b.shl(b.and_(q, i32(2)), i32(30)), b.and_(b.bitcast(x, I32),
                                                         i32(-0x80000000)))
    tiny = b.fcmp_ordered("<", e.call("fabs", x), ir.Constant(F32, TINY))
    return _finish(e, x, b.select(tiny, x, _flip_sign(e, v, sign)))


def cos_f32(e, x: ir.Value) -> ir.Value:
    """cos: by quadrant q of |x|, (c, -s, -c, s)[q] (cos is even)."""
    b = e.b
    i32 = lambda v: ir.Constant(I32, v)
    v, q = _quadrant_value(e, x, sine=False)
    sign = b.shl(b.and_(b.add(q, i32(1)), i32(2)), i32(30))
    return _finish(e, x, _flip_sign(e, v, sign))
