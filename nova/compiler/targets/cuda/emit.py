"""CUDA C expressions for the ops of a fused region: ``codegen.scalar.ScalarEmitter``
with C text for values.

``CEmitter.emit(value, idx)`` returns the name of a C variable (or a literal) holding the
value of an SSA value of the fused region at a multi-index, appending the statements
that compute it. Indices are C expressions of type ``i64`` (or 32-bit unsigned variables
from ``delinearize``). The index rules (movement, pad, concat, gather) are the shared
ones; this module has the C arithmetic (``CEmitter.ARITH``, one row per op) and the
literals. float16/bfloat16 compute in float and are rounded after every op; int8/uint8/
int16 compute in int (C's promotion on load: sign- or zero-extended) and are wrapped
after every op (``fit``: a conversion to the narrow type and back).

Generated statements live in C scopes; ``scope()`` opens one and forgets, on leaving,
the values computed inside it, so a value is reused only where its variable is visible.
"""
from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from xdsl.ir import Operation, SSAValue

from nova.compiler import dialect as nd
from nova.compiler.codegen.scalar import FLOATS, Arith, ScalarEmitter
from nova.compiler.codegen.values import COMPARE, element_of, shape_of
from nova.compiler.lowering.plan import KernelPlan
from nova.core import dtypes as dt
from nova.core import philox
from nova.core.shapes import numel

STORAGE = {"f32": "float", "f64": "double", "f16": "unsigned short", "bf16": "unsigned short",
           "i32": "int", "i64": "i64", "i1": "unsigned char", "i8": "signed char",
           "ui8": "unsigned char", "i16": "short"}
COMPUTE = {"f32": "float", "f64": "double", "f16": "float", "bf16": "float", "i32": "int",
           "i64": "i64", "i1": "bool", "i8": "int", "ui8": "int", "i16": "int"}
NARROW = ("i8", "ui8", "i16")


def float_literal(value: float, mlir: str) -> str:
    """An exact C literal (hex float) of ``value`` in the compute type of ``mlir``."""
    ctype = COMPUTE[mlir]
    if math.isnan(value):
        return "__int_as_float(0x7fc00000)" if ctype == "float" else \
            "__longlong_as_double(0x7ff8000000000000LL)"
    if value in (float("inf"), float("-inf")):
        sign = "-" if value < 0 else ""
        return (f"{sign}__int_as_float(0x7f800000)" if ctype == "float" else
                f"{sign}__longlong_as_double(0x7ff0000000000000LL)")
    return f"(({ctype}){float(value).hex()})"


def int_literal(value: int, mlir: str) -> str:
    if mlir == "i1":
        return "true" if int(value) & 1 else "false"
    if mlir == "i64":
        return f"((i64){int(value)}LL)"
    return f"({int(value)})"


class CEmitter(ScalarEmitter[str]):
    """Statements and expressions for one kernel."""

    TARGET = "cuda"

    def __init__(self, plan: KernelPlan):
        super().__init__(plan)
        self.lines: list[str] = []
        self.depth = 1
        self.counter = 0
        self.scopes: list[dict] = [{}]
        self.override: dict[int, str] = {}
        # Vectorized elementwise kernels: block arguments of the output's shape read at
        # exactly ``vector_idx`` come from a per-thread chunk ``va<i>[u]`` loaded with
        # one wide access (see ``targets.cuda.codegen._elementwise``); ``vector_loads`` collects
        # the arguments read that way.
        self.vector_idx: tuple[str, ...] | None = None
        self.vector_args: set[int] = set()
        self.vector_loads: set[int] = set()

    # ------------------------------------------------------------ text

    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    # The kernel's parameters are ``in<k>`` and ``out``: a local named from such a hint
    # (``in`` for an in-range test) takes an underscore, or ``in3`` would shadow the
    # fourth input.
    PARAMETER_PREFIXES = ("in", "out")

    def fresh(self, ctype: str, expr: str, prefix: str = "v") -> str:
        sep = "_" if prefix in self.PARAMETER_PREFIXES else ""
        name = f"{prefix}{sep}{self.counter}"
        self.counter += 1
        self.line(f"const {ctype} {name} = {expr};")
        return name

    @contextmanager
    def scope(self, header: str = "") -> Iterator[None]:
        """``header { ... }``; values computed inside are forgotten at the brace."""
        self.line(f"{header} {{" if header else "{")
        self.depth += 1
        self.scopes.append({})
        try:
            yield
        finally:
            self.scopes.pop()
            self.depth -= 1
            self.line("}")

    def _lookup(self, key) -> str | None:
        for level in reversed(self.scopes):
            if key in level:
                return level[key]
        return None

    # ------------------------------------------------------------ indices

    @staticmethod
    def linear(idx: Sequence[str], shape: Sequence[int]) -> str:
        """Row-major offset of a multi-index (an i64 expression)."""
        off = "0"
        for i, n in zip(idx, shape):
            off = f"({i})" if off == "0" else f"({off} * {n}LL + {i})"
        return off

    def delinearize(self, flat: str, shape: Sequence[int]) -> list[str]:
        """Row-major multi-index of an offset (which lies in ``[0, numel(shape))``).

        Below 2^32 elements the divisions run in 32-bit unsigned arithmetic: division by
        a constant becomes a multiply-high, one instruction in 32 bits but an emulated
        sequence in 64, and these divisions are most of an elementwise kernel's work."""
        if not shape:
            return []
        narrow = numel(shape) < 2 ** 32
        ctype, suffix = ("unsigned", "u") if narrow else ("i64", "LL")
        out: list[str] = []
        rest = self.fresh(ctype, f"({ctype})({flat})", "f")
        for k, n in enumerate(reversed(shape)):
            if k == len(shape) - 1:
                out.append(rest)
            elif n == 1:
                out.append("0")
            else:
                out.append(self.fresh(ctype, f"{rest} % {n}{suffix}", "x"))
                rest = self.fresh(ctype, f"{rest} / {n}{suffix}", "f")
        return out[::-1]

    # ------------------------------------------------------------ memory

    def pointer(self, i: int) -> str:
        return f"in{i}"

    @staticmethod
    def widen(raw: str, mlir: str) -> str:
        if mlir == "f16":
            return f"nv_f16_load({raw})"
        if mlir == "bf16":
            return f"nv_bf16_load({raw})"
        if mlir == "i1":
            return f"({raw} != 0)"
        if mlir in NARROW:
            return f"((int){raw})"
        return raw

    @staticmethod
    def narrow(v: str, mlir: str) -> str:
        if mlir == "f16":
            return f"nv_f16_store({v})"
        if mlir == "bf16":
            return f"nv_bf16_store({v})"
        if mlir == "i1":
            return f"(unsigned char)({v})"
        if mlir in NARROW:
            return f"(({STORAGE[mlir]})({v}))"
        return v

    @staticmethod
    def fit(v: str, mlir: str) -> str:
        if mlir in ("f16", "bf16"):
            return f"nv_{mlir}_round({v})"
        if mlir in NARROW:
            return f"((int)({STORAGE[mlir]})({v}))"
        return v

    def store(self, v: str, ptr: str, offset: str, mlir: str) -> None:
        self.line(f"{ptr}[{offset}] = {self.narrow(v, mlir)};")

    def store_root(self, flat: str) -> None:
        """Store the kernel output at linear offset ``flat`` of the output buffer (the
        root's index space may differ from the loop's, e.g. a keepdim reshape)."""
        shape, dtype = self.plan.out
        off = self.fresh("i64", flat, "o")
        value = self.emit(self.root, self.delinearize(off, shape))
        self.store(value, "out", off, dtype.mlir)

    # ------------------------------------------------------------ values

    def cast(self, v: str, src: str, dst: str) -> str:
        """Convert a computed value: to a narrow integer through int, then wrapped
        (a float truncates to int first, as the CPU does); identity when ``src`` is
        ``dst``, except that a narrow integer is wrapped (an accumulator in int)."""
        if src == dst:
            return self.fit(v, dst) if dst in NARROW else v
        d = COMPUTE[dst]
        if dst == "i1":
            return f"({v} != 0)"
        if src == "i1":
            return self.fit(f"(({d})({v} ? 1 : 0))", dst)
        if src in FLOATS and dst in FLOATS:
            if COMPUTE[src] == d:
                return self.fit(v, dst)
            return self.fit(f"(({d}){v})", dst)
        if COMPUTE[src] == d:
            return self.fit(v, dst)
        return self.fit(f"(({d}){v})", dst)

    def bitcast(self, v: str, src: str, dst: str) -> str:
        """The stored bits read as ``dst``: CUDA's bit-reinterpreting intrinsics, a half
        float through its stored 16 bits (the prelude's store and load)."""
        if src in ("f16", "bf16") and dst in ("f16", "bf16"):
            return self.bitcast(self.bitcast(v, src, "i16"), "i16", dst)
        if src in ("f16", "bf16"):
            return f"((int)(short)nv_{src}_store({v}))"
        if dst in ("f16", "bf16"):
            return f"nv_{dst}_load((unsigned short)({v}))"
        return {("f32", "i32"): "__float_as_int", ("i32", "f32"): "__int_as_float",
                ("f64", "i64"): "__double_as_longlong",
                ("i64", "f64"): "__longlong_as_double"}[(src, dst)] + f"({v})"

    # ------------------------------------------------------------ ScalarEmitter's interface

    def index(self, n: int) -> str:
        return f"{n}LL" if n >= 0 else f"(-{-n}LL)"

    def add(self, a: str, b: str) -> str:
        return f"({a} + {b})"

    def sub(self, a: str, b: str) -> str:
        return f"({a} - {b})"

    def mul(self, a: str, b: str) -> str:
        return f"({a} * {b})"

    def div(self, a: str, b: str) -> str:
        return f"({a} / {b})"

    def rem(self, a: str, b: str) -> str:
        return f"({a} % {b})"

    def icmp(self, pred: str, a: str, b: str) -> str:
        return f"({a} {pred} {b})"

    def all_of(self, a: str, b: str) -> str:
        return f"({a} && {b})"

    def any_of(self, a: str, b: str) -> str:
        return f"({a} || {b})"

    def select(self, cond: str, a: str, b: str) -> str:
        return f"({cond} ? {a} : {b})"

    def bind(self, v: str, mlir: str, hint: str) -> str:
        return v if _is_simple(v) else self.fresh(COMPUTE[mlir], v, hint)

    def name(self, v: str, mlir: str) -> str:
        return v if _is_simple(v) else self.fresh(COMPUTE[mlir], v)

    def fail_if(self, cond: str) -> None:
        self.line(f"if ({cond}) nv_fail();")

    def index_value(self, i: str) -> str:
        return f"((i64){i})"

    def const(self, value: float | int, mlir: str) -> str:
        return float_literal(value, mlir) if mlir in FLOATS else int_literal(value, mlir)

    def load_argument(self, i: int, idx: list[str]) -> str:
        shape, dtype = self.plan.arg_types[i]
        if i in self.vector_args and tuple(idx) == self.vector_idx:
            self.vector_loads.add(i)
            return self.widen(f"va{i}[u]", dtype.mlir)
        return self.widen(f"{self.pointer(i)}[{self.linear(idx, shape)}]", dtype.mlir)

    def _key(self, value: SSAValue, idx: list[str]) -> tuple:
        return id(value), tuple(idx)

    def _remember(self, key: tuple, v: str) -> None:
        self.scopes[-1][key] = v

    def _overridden(self, value: SSAValue, idx: list[str]) -> tuple[str, bool] | None:
        # Not cached: a kernel body sets and clears overrides around the scopes it
        # opens, so a cached name could outlive the variable it names.
        name = self.override.get(id(value))
        return None if name is None else (name, False)

    def compare(self, op: Operation, idx: list[str]) -> str:
        x, y = (self.emit(v, idx) for v in op.operands)
        return f"({x} {COMPARE[op.direction.data]} {y})"

    def philox_uniform(self, op: Operation, idx: list[str]) -> str:
        mlir = element_of(op.results[0])
        seed = self.emit(op.operands[0], [self.index(0)])
        offset = self.emit(op.operands[0], [self.index(1)])
        return self.uniform_at(self.linear(idx, shape_of(op.results[0])), seed, offset, mlir)

    def uniform_at(self, i: str, seed: str, offset: str, mlir: str) -> str:
        """The uniform in [0, 1) of element type ``mlir`` at linear position ``i`` of a
        draw with key (``seed``, ``offset``): ``nova.rng_uniform``'s value there (Philox
        of counter (i, offset) and key seed, as ``nova/core/philox.py``)."""
        w = self.fresh("nv_philox_out", f"nv_philox((u64)({i}), (u64){offset}, (u64){seed})",
                       "rng")
        bits = philox.MANTISSA_BITS[dt.from_mlir(mlir).name]
        ctype = COMPUTE[mlir]
        if bits <= 32:
            r = f"(u64)({w}.w0 >> {32 - bits})"
        else:
            r = f"((((u64){w}.w0) << {bits - 32}) | (((u64){w}.w1) >> {64 - bits}))"
        return f"(({ctype}){r} * ({ctype}){float(2.0 ** -bits).hex()})"


def _is_simple(expr: str) -> bool:
    """Literals and plain names need no variable of their own."""
    return expr.replace("_", "").isalnum() or expr in ("true", "false")


# ---------------------------------------------------------------- the op tables

def _suffix(mlir: str) -> str:
    return "" if mlir == "f64" else "f"


def _one(mlir: str) -> str:
    return "1.0" if mlir == "f64" else "1.0f"


def _fcall(fn: str):
    """A CUDA math function (``expf`` for float, ``exp`` for double)."""
    return lambda e, mlir, *xs: f"{fn}{_suffix(mlir)}({', '.join(xs)})"


def _infix(sym: str):
    return lambda e, mlir, x, y: f"({x} {sym} {y})"


def _int_infix(sym: str):
    """Integer arithmetic, cast back to the operand type (C promotes narrower ints)."""
    return lambda e, mlir, x, y: f"(({COMPUTE[mlir]})({x} {sym} {y}))"


def _helper(fn: str, typed: bool = False):
    """A prelude helper: ``nv_max(x, y)``, or ``nv_idiv<int>(x, y)`` when ``typed``."""
    return lambda e, mlir, *xs: (f"{fn}<{COMPUTE[mlir]}>" if typed else fn) + \
        f"({', '.join(xs)})"


# Ops the CUDA emitter evaluates its own way from the index.
CEmitter.RULES = {
    nd.RngUniformOp: lambda e, op, idx: e.philox_uniform(op, idx),
    nd.CompareOp: lambda e, op, idx: e.compare(op, idx),
}

# Elementwise arithmetic: one row per op.
CEmitter.ARITH = {
    nd.NegOp: Arith(float=lambda e, m, x: f"(-{x})", int=lambda e, m, x: f"(({COMPUTE[m]})(-{x}))"),
    nd.AbsOp: Arith(float=_fcall("fabs"),
                    int=lambda e, m, x: f"({x} < 0 ? ({COMPUTE[m]})(-{x}) : {x})"),
    nd.ExpOp: Arith(float=_fcall("exp")),
    nd.LogOp: Arith(float=_fcall("log")),
    nd.SqrtOp: Arith(float=_fcall("sqrt")),
    nd.RsqrtOp: Arith(float=lambda e, m, x: f"({_one(m)} / sqrt{_suffix(m)}({x}))"),
    nd.ReciprocalOp: Arith(float=lambda e, m, x: f"({_one(m)} / {x})"),
    nd.SinOp: Arith(float=_fcall("sin")),
    nd.CosOp: Arith(float=_fcall("cos")),
    nd.TanhOp: Arith(float=_fcall("tanh")),
    nd.ErfOp: Arith(float=_fcall("erf")),
    nd.Expm1Op: Arith(float=_fcall("expm1")),
    nd.Log1pOp: Arith(float=_fcall("log1p")),
    nd.FloorOp: Arith(float=_fcall("floor")),
    nd.CeilOp: Arith(float=_fcall("ceil")),
    nd.RoundOp: Arith(float=_fcall("rint")),     # the default rounding mode: ties to even
    nd.TruncOp: Arith(float=_fcall("trunc")),
    nd.AddOp: Arith(float=_infix("+"), int=_int_infix("+"), bool=_infix("||")),
    nd.SubOp: Arith(float=_infix("-"), int=_int_infix("-")),
    nd.MulOp: Arith(float=_infix("*"), int=_int_infix("*"), bool=_infix("&&")),
    nd.DivOp: Arith(float=_infix("/"), int=_helper("nv_idiv", typed=True)),
    nd.MaximumOp: Arith(float=_helper("nv_max"), int=_helper("nv_max"), bool=_infix("||")),
    nd.MinimumOp: Arith(float=_helper("nv_min"), int=_helper("nv_min"), bool=_infix("&&")),
    nd.RemOp: Arith(float=_fcall("fmod")),
    nd.Atan2Op: Arith(float=_fcall("atan2")),
    nd.AndOp: Arith(int=_int_infix("&"), bool=_infix("&&")),
    nd.OrOp: Arith(int=_int_infix("|"), bool=_infix("||")),
    nd.XorOp: Arith(int=_int_infix("^"), bool=_infix("!=")),
    nd.NotOp: Arith(int=lambda e, mlir, x: f"(({COMPUTE[mlir]})(~{x}))",
                    bool=lambda e, mlir, x: f"(!{x})"),
    nd.PowOp: Arith(float=_fcall("pow"), int=_helper("nv_ipow", typed=True)),
}
