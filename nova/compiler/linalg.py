"""A step in upstream MLIR's own dialects: linalg, tensor, arith, math and scf on tensors.

What the ``mlir`` engine (``nova.runtime.mlir_engine``) compiles with upstream MLIR's
pass pipeline and JIT: a reference engine built on an independent compiler, so the
CPU engine's code generation can be checked against it op by op. One lowering per op
class (``LOWERINGS``), each computing what the interpreter (``nova.runtime.interpreter``)
defines:

- booleans are stored as i8 (0 or 1; i1 buffers trip the bindings' assertions) and
  computed as i1; float16/bfloat16 are stored as themselves and computed in float32,
  rounded per op; int8/uint8/int16 are stored as signless i8/i16 (arith knows no ui8)
  and computed in i32, sign- or (uint8) zero-extended on load and truncated on store,
  so every op's result wraps as the interpreter's does; scans accumulate floats in
  float64.
- elementwise ops, broadcasts, iota, gathers and Philox draws are ``linalg.generic``;
  reductions ``linalg.reduce``; products a generic contraction; scatters, sorts and the
  inverse of a sort's permutation ``scf.for`` loops over ``tensor.insert`` (updates in
  row-major order: the last duplicate wins, sums in order).
- what Nova raises on at run time -- an index out of range, an integer division by
  zero, an integer to a negative power -- sets the function's extra last result, a
  0-d i8 flag; indices are clamped first, so no access leaves its buffer. The engine
  then runs the step in the interpreter, which raises the precise error.

The fused attention ops and collectives have no lowering (the engine runs the
composite, and refuses a step with collectives, naming the op).
"""
from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp
from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue

from nova.compiler import dialect as nd
from nova.core import philox

FLOATS = ("f16", "bf16", "f32", "f64")
HALF = ("f16", "bf16")
NARROW = {"i8": "i8", "ui8": "i8", "i16": "i16"}     # element -> signless storage type


class LinalgLoweringError(ValueError):
    """The step holds an op the mlir engine cannot run (the message names it)."""


def storage(elem: str) -> str:
    """How a buffer of ``elem`` is held: booleans as i8, uint8 as (signless) i8."""
    return "i8" if elem == "i1" else NARROW.get(elem, elem)


def compute(elem: str) -> str:
    """The type a scalar of ``elem`` is computed in."""
    return "f32" if elem in HALF else ("i32" if elem in NARROW else elem)


def ttype(shape: Sequence[int], elem: str) -> str:
    return f"tensor<{''.join(f'{n}x' for n in shape)}{storage(elem)}>"


def _literal(value: float | int | bool, elem: str) -> str:
    if elem == "i1":
        return "true" if value else "false"
    if elem == "f32":
        return "0x" + struct.pack(">f", float(value)).hex().upper()
    if elem == "f64":
        return "0x" + struct.pack(">d", float(value)).hex().upper()
    if elem == "f16":
        return "0x" + np.array(value, np.float16).view(np.uint16).item().to_bytes(2, "big").hex().upper()
    if elem == "bf16":
        import ml_dtypes
        return "0x" + np.array(value, ml_dtypes.bfloat16).view(np.uint16).item().to_bytes(
            2, "big").hex().upper()
    if elem in NARROW:          # the signless storage's two's complement value
        bits = 8 if NARROW[elem] == "i8" else 16
        v = int(value) % (1 << bits)
        return str(v - (1 << bits) if v >= 1 << (bits - 1) else v)
    return str(int(value))


def _dims(n: int) -> str:
    return ", ".join(f"d{k}" for k in range(n))


def _map(n: int, exprs: Sequence[str]) -> str:
    return f"affine_map<({_dims(n)}) -> ({', '.join(exprs)})>"


class Scalars:
    """Scalar code inside a region (a generic's body, a loop's): SSA lines and the
    conversions between storage and compute types."""

    def __init__(self, writer: Writer, indent: str):
        self.w = writer
        self.lines: list[str] = []
        self.indent = indent

    def fresh(self) -> str:
        return self.w.fresh()

    def line(self, text: str) -> str:
        r = self.fresh()
        self.lines.append(f"{self.indent}{r} = {text}")
        return r

    def delinearize(self, flat: str, shape: Sequence[int]) -> list[str]:
        """The coordinates (indices) of row-major position ``flat`` in ``shape``."""
        if len(shape) <= 1:
            return [flat]
        r = self.fresh()
        self.lines.append(f"{self.indent}{r}:{len(shape)} = affine.delinearize_index {flat} "
                          f"into ({', '.join(map(str, shape))}) : "
                          + ", ".join(["index"] * len(shape)))
        return [f"{r}#{k}" for k in range(len(shape))]

    def const(self, value: float | int | bool, elem: str) -> str:
        """A constant of ``elem``'s compute type (i32 for the narrow integers)."""
        if elem == "index":
            return self.line(f"arith.constant {int(value)} : index")
        if elem == "i1":
            return self.line(f"arith.constant {'true' if value else 'false'}")
        if elem in NARROW:
            return self.line(f"arith.constant {int(value)} : i32")
        return self.line(f"arith.constant {_literal(value, elem)} : {elem}")

    def load(self, v: str, elem: str) -> str:
        """A stored scalar as computed: i8 -> i1, half -> f32, i8/i16 -> i32 (uint8
        zero-extended)."""
        if elem == "i1":
            return self.line(f"arith.trunci {v} : i8 to i1")
        if elem in HALF:
            return self.line(f"arith.extf {v} : {elem} to f32")
        if elem in NARROW:
            ext = "extui" if elem == "ui8" else "extsi"
            return self.line(f"arith.{ext} {v} : {NARROW[elem]} to i32")
        return v

    def store(self, v: str, elem: str) -> str:
        """A computed scalar as stored (the narrow integers wrap)."""
        if elem == "i1":
            return self.line(f"arith.extui {v} : i1 to i8")
        if elem in HALF:
            return self.line(f"arith.truncf {v} : f32 to {elem}")
        if elem in NARROW:
            return self.line(f"arith.trunci {v} : i32 to {NARROW[elem]}")
        return v

    def binary(self, op: str, a: str, b: str, ty: str) -> str:
        return self.line(f"{op} {a}, {b} : {ty}")

    def unary(self, op: str, a: str, ty: str) -> str:
        return self.line(f"{op} {a} : {ty}")

    def select(self, c: str, a: str, b: str, ty: str) -> str:
        return self.line(f"arith.select {c}, {a}, {b} : {ty}")

    def cmp(self, pred: str, a: str, b: str, ty: str) -> str:
        kind = "cmpf" if ty in FLOATS else "cmpi"
        return self.line(f"arith.{kind} {pred}, {a}, {b} : {ty}")

    def index_of(self, v: str, elem: str) -> str:
        return self.line(f"arith.index_cast {v} : {elem} to index")

    def clamp_index(self, i: str, size: int) -> tuple[str, str]:
        """``i`` (index) clamped to [0, size), and whether it was out (i1); ``size`` 0
        clamps to 0, which its callers never read."""
        if size == 0:
            return self.const(0, "index"), self.const(True, "i1")
        zero, top = self.const(0, "index"), self.const(size - 1, "index")
        low = self.cmp("slt", i, zero, "index")
        high = self.cmp("sgt", i, top, "index")
        bad = self.binary("arith.ori", low, high, "i1")
        clamped = self.select(low, zero, self.select(high, top, i, "index"), "index")
        return clamped, bad


class Writer:
    """The function's body: SSA names, and the shapes of ops the lowerings compose."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[SSAValue, str] = {}
        self.count = 0
        self.flags: list[str] = []       # 0-d i8 tensors: 1 where a check failed
        self.indent = "    "

    def fresh(self) -> str:
        self.count += 1
        return f"%v{self.count}"

    def of(self, v: SSAValue) -> str:
        return self.names[v]

    def line(self, text: str) -> str:
        r = self.fresh()
        self.lines.append(f"{self.indent}{r} = {text}")
        return r

    def empty(self, shape: Sequence[int], elem: str) -> str:
        return self.line(f"tensor.empty() : {ttype(shape, elem)}")

    def filled(self, value: float | int | bool, shape: Sequence[int], elem: str) -> str:
        s = self.line(f"arith.constant {_literal(value, elem)} : {storage(elem)}") \
            if elem != "i1" else self.line(f"arith.constant {1 if value else 0} : i8")
        return self.line(f"linalg.fill ins({s} : {storage(elem)}) outs({self.empty(shape, elem)} : "
                         f"{ttype(shape, elem)}) -> {ttype(shape, elem)}")

    def generic(self, inputs: Sequence[tuple[str, Sequence[int], str, str]],
                shape: Sequence[int], out_elem: str,
                body: Callable[[Scalars, list[str]], str],
                iterators: Sequence[str] | None = None, out_map: str | None = None,
                init: str | None = None) -> str:
        """``linalg.generic`` over ``shape`` (or the iteration space of ``iterators``):
        ``inputs`` are (name, shape, element, indexing map); ``body(scalars, args)``
        returns the computed result (in ``compute(out_elem)``), stored as the output."""
        n = len(iterators) if iterators is not None else len(shape)
        iterators = iterators or ["parallel"] * n
        out_map = out_map or _map(n, [f"d{k}" for k in range(n)])
        maps = [m for _, _, _, m in inputs] + [out_map]
        out_t = ttype(shape, out_elem)
        init = init or self.empty(shape, out_elem)
        ins = ", ".join(a for a, _, _, _ in inputs)
        in_types = ", ".join(ttype(s, e) for _, s, e, _ in inputs)
        r = self.fresh()
        sc = Scalars(self, self.indent + "  ")
        args = [self.fresh().replace("%v", "%a") for _ in inputs]
        out_arg = self.fresh().replace("%v", "%a")
        result = sc.store(body(sc, args + [out_arg]), out_elem)
        head = (f"{self.indent}{r} = linalg.generic {{indexing_maps = [{', '.join(maps)}], "
                f"iterator_types = [{', '.join(repr(i).replace(chr(39), chr(34)) for i in iterators)}]}}"
                + (f" ins({ins} : {in_types})" if inputs else "")
                + f" outs({init} : {out_t}) {{")
        params = [f"{a}: {storage(e)}" for a, (_, _, e, _) in zip(args, inputs)] + \
            [f"{out_arg}: {storage(out_elem)}"]
        self.lines += [head, f"{self.indent}^bb0({', '.join(params)}):", *sc.lines,
                       f"{self.indent}  linalg.yield {result} : {storage(out_elem)}",
                       f"{self.indent}}} -> {out_t}"]
        return r

    def elementwise(self, values: Sequence[tuple[str, str]], shape: Sequence[int],
                    out_elem: str, body: Callable[[Scalars, list[str]], str]) -> str:
        """An elementwise generic over same-shaped (name, element) inputs; ``body``
        gets them loaded (computed types)."""
        ident = _map(len(shape), [f"d{k}" for k in range(len(shape))])
        elems = [e for _, e in values]

        def wrapped(sc: Scalars, args: list[str]) -> str:
            return body(sc, [sc.load(a, e) for a, e in zip(args, elems)])
        return self.generic([(v, shape, e, ident) for v, e in values], shape, out_elem, wrapped)

    def flag(self, bad: str, shape: Sequence[int]) -> None:
        """Record a check: ``bad`` is an i8 tensor of ``shape``, 1 where it failed."""
        if shape:
            zero = self.filled(0, (), "i1")
            sc = Scalars(self, self.indent + "  ")
            a, b = "%fa", "%fb"
            r = self.fresh()
            m = sc.binary("arith.maxui", a, b, "i8")
            self.lines += [f"{self.indent}{r} = linalg.reduce ins({bad} : {ttype(shape, 'i1')}) "
                           f"outs({zero} : {ttype((), 'i1')}) dimensions = "
                           f"[{', '.join(str(k) for k in range(len(shape)))}]",
                           f"{self.indent}  ({a}: i8, {b}: i8) {{", *sc.lines,
                           f"{self.indent}    linalg.yield {m} : i8", f"{self.indent}  }}"]
            bad = r
        self.flags.append(bad)


def _elem(v: SSAValue) -> str:
    return nd.element_name(v.type.element_type)


def _shape(v: SSAValue) -> tuple[int, ...]:
    return nd.shape_of(v)


def _ints(a) -> tuple[int, ...]:
    return tuple(a.get_values())


def _ident(n: int) -> str:
    return _map(n, [f"d{k}" for k in range(n)])


# ---------------------------------------------------------------- elementwise

Lowering = Callable[[Writer, Operation], str]
Arith = Callable[[Scalars, list[str], str], str]     # (scalars, computed args, type) -> value


def _arith(floats: Arith | None = None, ints: Arith | None = None,
           bools: Arith | None = None, check: Callable | None = None) -> Lowering:
    """An elementwise op by the kind of its result's element type."""
    def lower(w: Writer, op: Operation) -> str:
        out = _elem(op.results[0])
        shape = _shape(op.results[0])
        values = [(w.of(v), _elem(v)) for v in op.operands]
        kind = floats if out in FLOATS else (bools if out == "i1" else ints)
        if kind is None:
            raise LinalgLoweringError(f"mlir engine: {op.name} is not defined on {out}")
        ty = compute(out)
        r = w.elementwise(values, shape, out, lambda sc, xs: kind(sc, xs, ty))
        if check is not None and out not in FLOATS and out != "i1":
            bad = w.elementwise(values, shape, "i1", lambda sc, xs: check(sc, xs, ty))
            w.flag(bad, shape)
        return r
    return lower


def _op(name: str) -> Arith:
    return lambda sc, xs, ty: sc.line(f"{name} {', '.join(xs)} : {ty}")


def _neg_int(sc: Scalars, xs: list[str], ty: str) -> str:
    return sc.binary("arith.subi", sc.const(0, ty), xs[0], ty)


def _abs_int(sc: Scalars, xs: list[str], ty: str) -> str:
    """(math.absi does not legalize in this pipeline.)"""
    neg = sc.cmp("slt", xs[0], sc.const(0, ty), ty)
    return sc.select(neg, _neg_int(sc, xs, ty), xs[0], ty)


def _not(sc: Scalars, xs: list[str], ty: str) -> str:
    """Bitwise complement: xor with all ones (``true`` on i1)."""
    return sc.binary("arith.xori", xs[0], sc.const(-1 if ty != "i1" else True, ty), ty)


def _reciprocal(sc: Scalars, xs: list[str], ty: str) -> str:
    return sc.binary("arith.divf", sc.const(1.0, ty), xs[0], ty)


def _rsqrt(sc: Scalars, xs: list[str], ty: str) -> str:
    return sc.binary("arith.divf", sc.const(1.0, ty), sc.unary("math.sqrt", xs[0], ty), ty)


def _div_by_zero(sc: Scalars, xs: list[str], ty: str) -> str:
    return sc.cmp("eq", xs[1], sc.const(0, ty), ty)


def _safe_divsi(sc: Scalars, xs: list[str], ty: str) -> str:
    """Truncating division; a zero divisor divides by 1 (the flag reports it). The
    divisor -1 divides by 1 and negates, wrapping as PyTorch does: arith.divsi leaves the
    smallest integer over -1 undefined (x86's idiv traps on it)."""
    one = sc.const(1, ty)
    zero = sc.cmp("eq", xs[1], sc.const(0, ty), ty)
    minus_one = sc.cmp("eq", xs[1], sc.const(-1, ty), ty)
    d = sc.select(sc.binary("arith.ori", zero, minus_one, "i1"), one, xs[1], ty)
    q = sc.binary("arith.divsi", xs[0], d, ty)
    return sc.select(minus_one, sc.binary("arith.subi", sc.const(0, ty), q, ty), q, ty)


def _safe_ipow(sc: Scalars, xs: list[str], ty: str) -> str:
    """Integer ``x ** y``; a negative ``y`` gives PyTorch's truncated ``1 / x ** -y``: 1
    for x = 1, +-1 for x = -1 (by the parity of y), 0 otherwise (x = 0 included)."""
    x, y = xs
    one, zero = sc.const(1, ty), sc.const(0, ty)
    neg = sc.cmp("slt", y, zero, ty)
    p = sc.line(f"math.ipowi {x}, {sc.select(neg, zero, y, ty)} : {ty}")
    unit = sc.binary("arith.ori", sc.cmp("eq", x, one, ty),
                     sc.cmp("eq", x, sc.const(-1, ty), ty), "i1")
    odd = sc.line(f"arith.trunci {y} : {ty} to i1")
    inverse = sc.select(unit, sc.select(odd, x, one, ty), zero, ty)
    return sc.select(neg, inverse, p, ty)


def _constant(w: Writer, op: nd.ConstantOp) -> str:
    attr = op.value
    value = attr.value.data if isinstance(attr, (FloatAttr, IntegerAttr)) else attr
    e = _elem(op.result)
    return w.filled(bool(value) if e == "i1" else value, _shape(op.result), e)


def _iota(w: Writer, op: nd.IotaOp) -> str:
    shape, e, d = _shape(op.result), _elem(op.result), op.dim.value.data

    def body(sc: Scalars, args: list[str]) -> str:
        i = sc.line(f"linalg.index {d} : index")
        if e in FLOATS:
            n = sc.line(f"arith.index_cast {i} : index to i64")
            return sc.line(f"arith.sitofp {n} : i64 to {compute(e)}")
        if e == "i1":
            n = sc.line(f"arith.index_cast {i} : index to i64")
            return sc.cmp("ne", n, sc.const(0, "i64"), "i64")
        return sc.line(f"arith.index_cast {i} : index to {compute(e)}")
    return w.generic([], shape, e, body)


def _cast(w: Writer, op: nd.CastOp) -> str:
    src, dst = _elem(op.input), _elem(op.result)

    def body(sc: Scalars, xs: list[str]) -> str:
        x, s, d = xs[0], compute(src), compute(dst)
        if dst == "i1":
            return sc.cmp("une" if s in FLOATS else "ne", x, sc.const(0, s), s)
        if src == "i1":
            return sc.line(f"arith.uitofp {x} : i1 to {d}") if d in FLOATS else \
                sc.line(f"arith.extui {x} : i1 to {d}")
        if s == d:
            return x
        if s in FLOATS and d in FLOATS:
            return sc.line(f"arith.{'extf' if _bits(s) < _bits(d) else 'truncf'} {x} : {s} to {d}")
        if s in FLOATS:
            return sc.line(f"arith.fptosi {x} : {s} to {d}")
        if d in FLOATS:
            return sc.line(f"arith.sitofp {x} : {s} to {d}")
        return sc.line(f"arith.{'extsi' if _bits(s) < _bits(d) else 'trunci'} {x} : {s} to {d}")
    return w.elementwise([(w.of(op.input), src)], _shape(op.input), dst, body)


def _bitcast(w: Writer, op: nd.BitcastOp) -> str:
    """The stored bits read as the result's type (``nd.BITCAST_PAIRS``). Half floats are
    computed in f32 and i16 in i32: f16 goes through MLIR's f16, bf16 is the upper half
    of its f32's bits."""
    src, dst = _elem(op.input), _elem(op.result)

    def bits(sc: Scalars, x: str, s: str, d: str) -> str:
        if s in ("f16", "bf16") and d in ("f16", "bf16"):
            return bits(sc, bits(sc, x, s, "i16"), "i16", d)
        if s == "f16":
            h = sc.line(f"arith.truncf {x} : f32 to f16")
            i = sc.line(f"arith.bitcast {h} : f16 to i16")
            return sc.line(f"arith.extsi {i} : i16 to i32")
        if d == "f16":
            i = sc.line(f"arith.trunci {x} : i32 to i16")
            h = sc.line(f"arith.bitcast {i} : i16 to f16")
            return sc.line(f"arith.extf {h} : f16 to f32")
        if s == "bf16":
            i = sc.line(f"arith.bitcast {x} : f32 to i32")
            return sc.line(f"arith.shrsi {i}, {sc.const(16, 'i32')} : i32")
        if d == "bf16":
            i = sc.line(f"arith.shli {x}, {sc.const(16, 'i32')} : i32")
            return sc.line(f"arith.bitcast {i} : i32 to f32")
        return sc.line(f"arith.bitcast {x} : {s} to {d}")

    return w.elementwise([(w.of(op.input), src)], _shape(op.input), dst,
                         lambda sc, xs: bits(sc, xs[0], src, dst))


def _bits(elem: str) -> int:
    return {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "i32": 32, "i64": 64, "i1": 1,
            "i8": 8, "ui8": 8, "i16": 16}[elem]


_FLOAT_PRED = {"lt": "olt", "le": "ole", "eq": "oeq", "ne": "une", "gt": "ogt", "ge": "oge"}
_SIGNED_PRED = {"lt": "slt", "le": "sle", "eq": "eq", "ne": "ne", "gt": "sgt", "ge": "sge"}
_UNSIGNED_PRED = {"lt": "ult", "le": "ule", "eq": "eq", "ne": "ne", "gt": "ugt", "ge": "uge"}


def _compare(w: Writer, op: nd.CompareOp) -> str:
    e = _elem(op.lhs)
    ty = compute(e)
    table = _FLOAT_PRED if e in FLOATS else (_UNSIGNED_PRED if e == "i1" else _SIGNED_PRED)
    pred = table[op.direction.data]
    return w.elementwise([(w.of(op.lhs), e), (w.of(op.rhs), e)], _shape(op.lhs), "i1",
                         lambda sc, xs: sc.cmp(pred, xs[0], xs[1], ty))


def _where(w: Writer, op: nd.WhereOp) -> str:
    e = _elem(op.result)
    return w.elementwise([(w.of(op.cond), "i1"), (w.of(op.on_true), e),
                          (w.of(op.on_false), e)], _shape(op.result), e,
                         lambda sc, xs: sc.select(xs[0], xs[1], xs[2], compute(e)))


# ---------------------------------------------------------------- movement


def _broadcast_in_dim(w: Writer, op: nd.BroadcastInDimOp) -> str:
    src, out, dims = _shape(op.input), _shape(op.result), _ints(op.dims)
    e = _elem(op.result)
    exprs = ["0" if src[k] == 1 and out[d] != 1 else f"d{d}" for k, d in enumerate(dims)]
    return w.generic([(w.of(op.input), src, e, _map(len(out), exprs))], out, e,
                     lambda sc, xs: sc.load(xs[0], e))


def _reshape(w: Writer, op: nd.ReshapeOp) -> str:
    src, dst, e = _shape(op.input), _shape(op.result), _elem(op.result)
    x = w.of(op.input)
    if src == dst:
        return x
    n = int(np.prod(src, dtype=np.int64))
    if len(src) <= 1:
        flat = x
    else:
        flat = w.line(f"tensor.collapse_shape {x} [[{', '.join(str(k) for k in range(len(src)))}]]"
                      f" : {ttype(src, e)} into {ttype((n,), e)}")
    fshape = src if len(src) <= 1 else (n,)
    if len(dst) == len(fshape) and tuple(dst) == tuple(fshape):
        return flat
    if len(fshape) == 0:          # 0-d -> all-ones shape
        return w.line(f"tensor.expand_shape {flat} [] output_shape [{', '.join(map(str, dst))}]"
                      f" : {ttype((), e)} into {ttype(dst, e)}")
    if len(dst) == 0:             # (1,) -> 0-d
        return w.line(f"tensor.collapse_shape {flat} [] : {ttype(fshape, e)} into {ttype((), e)}")
    return w.line(f"tensor.expand_shape {flat} [[{', '.join(str(k) for k in range(len(dst)))}]]"
                  f" output_shape [{', '.join(map(str, dst))}] : {ttype(fshape, e)} into "
                  f"{ttype(dst, e)}")


def _transpose(w: Writer, op: nd.TransposeOp) -> str:
    e, perm = _elem(op.result), _ints(op.perm)
    src, out = _shape(op.input), _shape(op.result)
    r = w.fresh()
    w.lines.append(f"{w.indent}{r} = linalg.transpose ins({w.of(op.input)} : {ttype(src, e)}) "
                   f"outs({w.empty(out, e)} : {ttype(out, e)}) permutation = "
                   f"[{', '.join(map(str, perm))}]")
    return r


def _slice(w: Writer, op: nd.SliceOp) -> str:
    """A strided window, each element read by ``tensor.extract`` at start + i stride: a
    new tensor, never a view (a strided view that reaches a copy -- a result, say --
    calls a runtime library the bindings do not ship, and a generic that only copied
    the view would be folded away)."""
    e, src, out = _elem(op.result), _shape(op.input), _shape(op.result)
    start, stride = _ints(op.start), _ints(op.stride)
    x = w.of(op.input)

    def body(sc: Scalars, args: list[str]) -> str:
        coords = []
        for d, (a, st) in enumerate(zip(start, stride)):
            i = sc.line(f"linalg.index {d} : index")
            coords.append(sc.binary("arith.addi", sc.binary("arith.muli", i, sc.const(st, "index"),
                                                            "index"), sc.const(a, "index"),
                                    "index"))
        return sc.load(sc.line(f"tensor.extract {x}[{', '.join(coords)}] : {ttype(src, e)}"), e)
    return w.generic([], out, e, body)


def _pad(w: Writer, op: nd.PadOp) -> str:
    """Each output element reads the input where it lands on one (low + k (interior+1))
    and the padding value elsewhere: a generic over the output with guarded reads."""
    e, out, src = _elem(op.result), _shape(op.result), _shape(op.input)
    lo, it = _ints(op.low), _ints(op.interior)
    pv = w.line(f"tensor.extract {w.of(op.padding_value)}[] : {ttype((), e)}")
    x = w.of(op.input)
    if 0 in src:                 # nothing of the input lands anywhere: all padding
        return w.generic([], out, e, lambda sc, args: sc.load(pv, e))

    def body(sc: Scalars, args: list[str]) -> str:
        inside = None
        coords = []
        for d, (l, i, n) in enumerate(zip(lo, it, src)):
            idx = sc.line(f"linalg.index {d} : index")
            rel = sc.binary("arith.subi", idx, sc.const(l, "index"), "index")
            step = sc.const(i + 1, "index")
            k = sc.line(f"arith.divsi {rel}, {step} : index")
            on = sc.cmp("eq", sc.line(f"arith.remsi {rel}, {step} : index"), sc.const(0, "index"),
                        "index")
            ok = sc.binary("arith.andi", on, sc.binary(
                "arith.andi", sc.cmp("sge", rel, sc.const(0, "index"), "index"),
                sc.cmp("slt", k, sc.const(n, "index"), "index"), "i1"), "i1")
            inside = ok if inside is None else sc.binary("arith.andi", inside, ok, "i1")
            coords.append(sc.select(ok, k, sc.const(0, "index"), "index"))
        value = sc.line(f"tensor.extract {x}[{', '.join(coords)}] : {ttype(src, e)}") if src \
            else sc.line(f"tensor.extract {x}[] : {ttype(src, e)}")
        if inside is None:
            return sc.load(value, e)
        return sc.select(inside, sc.load(value, e), sc.load(pv, e), compute(e))
    return w.generic([], out, e, body)


def _concat(w: Writer, op: nd.ConcatOp) -> str:
    """Each output element reads the input its coordinate along ``dim`` falls in."""
    e, out, d = _elem(op.result), _shape(op.result), op.dim.value.data
    parts = [(w.of(v), _shape(v)) for v in op.inputs]

    def body(sc: Scalars, args: list[str]) -> str:
        idx = [sc.line(f"linalg.index {k} : index") for k in range(len(out))]
        result = None
        start = 0
        offsets = []
        for name, shape in parts:
            offsets.append(start)
            start += shape[d]
        for (name, shape), off in zip(parts, offsets):    # the last part starting at or
            # before the coordinate holds it
            if shape[d] == 0:                 # (an empty part holds nothing to read)
                continue
            local = sc.binary("arith.subi", idx[d], sc.const(off, "index"), "index")
            inside = sc.cmp("sge", local, sc.const(0, "index"), "index")
            clamped = sc.select(inside, local, sc.const(0, "index"), "index")
            top = sc.cmp("slt", clamped, sc.const(shape[d], "index"), "index")
            clamped = sc.select(top, clamped, sc.const(shape[d] - 1, "index"), "index")
            coords = list(idx)
            coords[d] = clamped
            v = sc.load(sc.line(f"tensor.extract {name}[{', '.join(coords)}] : "
                                f"{ttype(shape, e)}"), e)
            result = v if result is None else sc.select(inside, v, result, compute(e))
        return result
    return w.generic([], out, e, body)


# ---------------------------------------------------------------- reductions, products


def _reduce(kind: str) -> Lowering:
    def lower(w: Writer, op: nd.ReduceOp) -> str:
        e = _elem(op.input)
        src, out, axes = _shape(op.input), _shape(op.results[0]), _ints(op.axes)
        ty = compute(e)
        x = w.of(op.input)
        if e in HALF:     # widen first: the sum runs in float32
            x = w.elementwise([(x, e)], src, "f32", lambda sc, xs: xs[0])
        acc = "f32" if e in HALF else e
        # (the combine runs on the stored type: i8 sums wrap as they should, and
        # uint8's i8 compares unsigned)
        if kind == "sum":
            init = False if e == "i1" else 0
            comb = "arith.ori" if e == "i1" else ("arith.addf" if ty in FLOATS else "arith.addi")
        else:
            unsigned = e in ("i1", "ui8")
            init = False if e == "i1" else (float("-inf") if ty in FLOATS else
                                            0 if unsigned else -(2 ** (_bits(e) - 1)))
            comb = "arith.maxui" if unsigned else ("arith.maximumf" if ty in FLOATS else
                                                   "arith.maxsi")
        start = w.filled(init, out, acc)
        r = w.fresh()
        st = storage(acc)
        w.lines += [f"{w.indent}{r} = linalg.reduce ins({x} : {ttype(src, acc)}) outs({start} : "
                    f"{ttype(out, acc)}) dimensions = [{', '.join(map(str, axes))}]",
                    f"{w.indent}  (%ri{r[2:]}: {st}, %ro{r[2:]}: {st}) {{",
                    f"{w.indent}    %rs{r[2:]} = {comb} %ri{r[2:]}, %ro{r[2:]} : {st}",
                    f"{w.indent}    linalg.yield %rs{r[2:]} : {st}", f"{w.indent}  }}"]
        if e in HALF:
            r = w.elementwise([(r, "f32")], out, e, lambda sc, xs: xs[0])
        return r
    return lower


def _matmul(w: Writer, op: nd.MatmulOp) -> str:
    """(..., M, K) @ (..., K, N) as a generic over (..., M, N, K): sums in float32
    for half floats, in order along K."""
    e = _elem(op.result)
    sa, sb, out = _shape(op.lhs), _shape(op.rhs), _shape(op.result)
    b = len(sa) - 2
    n = b + 3
    batch = [f"d{k}" for k in range(b)]
    m_, n_, k_ = f"d{b}", f"d{b + 1}", f"d{b + 2}"
    acc = "f32" if e in HALF else e
    ty = compute(e)
    start = w.filled(0, out, acc)

    def body(sc: Scalars, args: list[str]) -> str:
        x, y, total = sc.load(args[0], e), sc.load(args[1], e), sc.load(args[2], acc)
        if ty in FLOATS:
            return sc.binary("arith.addf", total, sc.binary("arith.mulf", x, y, ty), ty)
        return sc.binary("arith.addi", total, sc.binary("arith.muli", x, y, ty), ty)
    r = w.generic([(w.of(op.lhs), sa, e, _map(n, batch + [m_, k_])),
                   (w.of(op.rhs), sb, e, _map(n, batch + [k_, n_]))], out, acc, body,
                  iterators=["parallel"] * (b + 2) + ["reduction"],
                  out_map=_map(n, batch + [m_, n_]), init=start)
    if e in HALF:
        r = w.elementwise([(r, "f32")], out, e, lambda sc, xs: xs[0])
    return r


# ---------------------------------------------------------------- indexing


def _index_value(sc: Scalars, v: str, elem: str, size: int) -> tuple[str, str]:
    """A stored index as an ``index`` clamped into [0, size), and whether it was out."""
    return sc.clamp_index(sc.index_of(v, elem), size)


def _gather(w: Writer, op: nd.GatherOp) -> str:
    d, e = op.dim.value.data, _elem(op.input)
    ish, src = _shape(op.index), _shape(op.input)
    ie = _elem(op.index)
    x = w.of(op.input)
    ident = _ident(len(ish))

    def body(sc: Scalars, args: list[str]) -> str:
        if 0 in src:        # no element to read: every index is out of range (flagged)
            return sc.const(False if e == "i1" else 0, compute(e))
        coords = [sc.line(f"linalg.index {k} : index") for k in range(len(ish))]
        coords[d], _ = _index_value(sc, args[0], ie, src[d])
        return sc.load(sc.line(f"tensor.extract {x}[{', '.join(coords)}] : {ttype(src, e)}"), e)
    r = w.generic([(w.of(op.index), ish, ie, ident)], ish, e, body)

    def bad(sc: Scalars, args: list[str]) -> str:
        return _index_value(sc, args[0], ie, src[d])[1]
    w.flag(w.generic([(w.of(op.index), ish, ie, ident)], ish, "i1", bad), ish)
    return r


def _scatter(add: bool) -> Lowering:
    """Updates in row-major order of the index, in a loop (``scf.for`` over
    ``tensor.insert``): the last duplicate wins, or the sum runs in order (float32 for
    half floats)."""
    def lower(w: Writer, op: nd._ScatterLike) -> str:
        d, e = op.dim.value.data, _elem(op.input)
        ish, xsh = _shape(op.index), _shape(op.input)
        ie = _elem(op.index)
        acc = "f32" if (add and e in HALF) else e
        base = w.of(op.input)
        if acc != e:
            base = w.elementwise([(base, e)], xsh, acc, lambda sc, xs: xs[0])
        # (into an empty tensor nothing can be written: every index is out of range)
        total = int(np.prod(ish, dtype=np.int64)) if 0 not in xsh else 0

        def bad(sc2: Scalars, args: list[str]) -> str:
            return _index_value(sc2, args[0], ie, xsh[d])[1]
        if total == 0:                    # no update: the input as it is (cast back)
            r = base if acc == e else w.elementwise([(base, acc)], xsh, e,
                                                    lambda sc2, xs: xs[0])
            w.flag(w.generic([(w.of(op.index), ish, ie, _ident(len(ish)))], ish, "i1", bad),
                   ish)
            return r
        lo, hi, one = (w.line(f"arith.constant {v} : index") for v in (0, total, 1))
        r = w.fresh()
        it, t = "%i" + r[2:], "%t" + r[2:]
        sc = Scalars(w, w.indent + "  ")
        pos = sc.delinearize(it, ish)
        raw = sc.line(f"tensor.extract {w.of(op.index)}[{', '.join(pos)}] : {ttype(ish, ie)}")
        at, _ = _index_value(sc, raw, ie, xsh[d])
        target = list(pos)
        target[d] = at
        value = sc.line(f"tensor.extract {w.of(op.src)}[{', '.join(pos)}] : "
                        f"{ttype(ish, e)}")
        if add:
            old = sc.load(sc.line(f"tensor.extract {t}[{', '.join(target)}] : "
                                  f"{ttype(xsh, acc)}"), acc)
            ty = compute(acc)
            new = sc.load(value, e)
            if acc == "i1":
                summed = sc.binary("arith.ori", old, new, "i1")
            elif ty in FLOATS:
                summed = sc.binary("arith.addf", old, new, ty)
            else:
                summed = sc.binary("arith.addi", old, new, ty)
            value = sc.store(summed, acc)
        upd = sc.line(f"tensor.insert {value} into {t}[{', '.join(target)}] : {ttype(xsh, acc)}")
        w.lines += [f"{w.indent}{r} = scf.for {it} = {lo} to {hi} step {one} iter_args({t} = "
                    f"{base}) -> ({ttype(xsh, acc)}) {{", *sc.lines,
                    f"{w.indent}  scf.yield {upd} : {ttype(xsh, acc)}", f"{w.indent}}}"]
        if acc != e:
            r = w.elementwise([(r, acc)], xsh, e, lambda sc2, xs: xs[0])
        w.flag(w.generic([(w.of(op.index), ish, ie, _ident(len(ish)))], ish, "i1", bad), ish)
        return r
    return lower


def _wrap_index(w: Writer, op: nd.WrapIndexOp) -> str:
    e, shape, size = _elem(op.input), _shape(op.input), op.size.value.data

    def body(sc: Scalars, xs: list[str]) -> str:
        neg = sc.cmp("slt", xs[0], sc.const(0, e), e)
        return sc.select(neg, sc.binary("arith.addi", xs[0], sc.const(size, e), e), xs[0], e)

    def bad(sc: Scalars, xs: list[str]) -> str:
        return sc.binary("arith.ori", sc.cmp("slt", xs[0], sc.const(-size, e), e),
                         sc.cmp("sge", xs[0], sc.const(size, e), e), "i1")
    r = w.elementwise([(w.of(op.input), e)], shape, e, body)
    w.flag(w.elementwise([(w.of(op.input), e)], shape, "i1", bad), shape)
    return r


def _argsort(w: Writer, op: nd.ArgsortOp) -> str:
    """Stable, NaN last (descending: the interpreter's reverse of the reversed row).
    Each element's rank is how many elements of its row come before it (smaller, or
    equal and earlier), a generic over (..., i, j); a loop then writes each position
    at its rank."""
    e, shape = _elem(op.input), _shape(op.input)
    desc = bool(op.descending.value.data)
    r_ = len(shape)
    n = shape[-1]
    ty = compute(e)
    x = w.of(op.input)
    nd_ = r_ + 1
    pre = [f"d{k}" for k in range(r_ - 1)]
    i_, j_ = f"d{r_ - 1}", f"d{r_}"
    start = w.filled(0, shape, "i64")

    def body(sc: Scalars, args: list[str]) -> str:
        a, b = sc.load(args[0], e), sc.load(args[1], e)       # x[..., i], x[..., j]
        ii = sc.line(f"linalg.index {r_ - 1} : index")
        jj = sc.line(f"linalg.index {r_} : index")
        if desc:            # positions in the reversed row
            top = sc.const(n - 1, "index")
            ii, jj = sc.binary("arith.subi", top, ii, "index"), sc.binary("arith.subi", top, jj,
                                                                          "index")

        def before(u: str, v: str) -> str:
            if ty not in FLOATS:
                return sc.cmp("ult" if e == "i1" else "slt", u, v, ty)
            lt = sc.cmp("olt", u, v, ty)
            u_num = sc.cmp("ord", u, u, ty)
            v_nan = sc.cmp("uno", v, v, ty)
            return sc.binary("arith.ori", lt, sc.binary("arith.andi", u_num, v_nan, "i1"), "i1")
        ji, ij = before(b, a), before(a, b)      # j before i; i before j
        tie = sc.binary("arith.xori", sc.binary("arith.ori", ji, ij, "i1"),
                        sc.const(True, "i1"), "i1")
        earlier = sc.cmp("ult", jj, ii, "index")
        counts = sc.binary("arith.ori", ji, sc.binary("arith.andi", tie, earlier, "i1"), "i1")
        return sc.binary("arith.addi", args[2], sc.line(f"arith.extui {counts} : i1 to i64"),
                         "i64")
    ranks = w.generic([(x, shape, e, _map(nd_, pre + [i_])), (x, shape, e, _map(nd_, pre + [j_]))],
                      shape, "i64", body, iterators=["parallel"] * r_ + ["reduction"],
                      out_map=_map(nd_, pre + [i_]), init=start)
    total = int(np.prod(shape, dtype=np.int64))
    if total == 0:
        return w.empty(shape, "i64")
    lo, hi, one = (w.line(f"arith.constant {v} : index") for v in (0, total, 1))
    res = w.fresh()
    it, t = "%i" + res[2:], "%t" + res[2:]
    sc = Scalars(w, w.indent + "  ")
    pos = sc.delinearize(it, shape)
    rank = sc.index_of(sc.line(f"tensor.extract {ranks}[{', '.join(pos)}] : {ttype(shape, 'i64')}"),
                       "i64")
    if desc:     # element i's rank r is in the reversed row: it lands at n-1-r
        rank = sc.binary("arith.subi", sc.const(n - 1, "index"), rank, "index")
    value = sc.line(f"arith.index_cast {pos[-1]} : index to i64")
    target = pos[:-1] + [rank]
    upd = sc.line(f"tensor.insert {value} into {t}[{', '.join(target)}] : {ttype(shape, 'i64')}")
    w.lines += [f"{w.indent}{res} = scf.for {it} = {lo} to {hi} step {one} iter_args({t} = "
                f"{w.empty(shape, 'i64')}) -> ({ttype(shape, 'i64')}) {{", *sc.lines,
                f"{w.indent}  scf.yield {upd} : {ttype(shape, 'i64')}", f"{w.indent}}}"]
    return res


def _scan(kind: str) -> Lowering:
    """Prefix sums/products along the last axis, a generic over (..., i, j) summing
    j <= i in order (j >= i reversed); floats in float64, rounded once."""
    def lower(w: Writer, op: nd._ScanOp) -> str:
        e, out = _elem(op.input), _elem(op.result)
        shape = _shape(op.input)
        rev = bool(op.reverse.value.data)
        r_ = len(shape)
        acc = "f64" if out in FLOATS else out
        pre = [f"d{k}" for k in range(r_ - 1)]
        i_, j_ = f"d{r_ - 1}", f"d{r_}"
        start = w.filled(1 if kind == "prod" else 0, shape, acc)

        def body(sc: Scalars, args: list[str]) -> str:
            v = sc.load(args[0], e)
            if acc == "f64" and compute(e) == "f32":       # floats accumulate in f64
                v = sc.line(f"arith.extf {v} : f32 to f64")
            ii = sc.line(f"linalg.index {r_ - 1} : index")
            jj = sc.line(f"linalg.index {r_} : index")
            take = sc.cmp("uge" if rev else "ule", jj, ii, "index")
            cty = compute(acc)
            neutral = sc.const(1 if kind == "prod" else 0, acc)
            v = sc.select(take, v, neutral, cty)
            name = ("arith.mulf" if acc in FLOATS else "arith.muli") if kind == "prod" else \
                ("arith.addf" if acc in FLOATS else "arith.addi")
            return sc.binary(name, sc.load(args[1], acc), v, cty)
        r = w.generic([(w.of(op.input), shape, e, _map(r_ + 1, pre + [j_]))], shape, acc, body,
                      iterators=["parallel"] * r_ + ["reduction"],
                      out_map=_map(r_ + 1, pre + [i_]), init=start)
        if acc != out:
            r = w.elementwise([(r, acc)], shape, out,
                              lambda sc, xs: sc.line(f"arith.truncf {xs[0]} : f64 to "
                                                     f"{compute(out)}") if compute(out) != "f64"
                              else xs[0])
        return r
    return lower


def _rng_uniform(w: Writer, op: nd.RngUniformOp) -> str:
    """Philox4x32-10 (``nova.core.philox``) in i64 arithmetic (32-bit words in 64-bit
    lanes, so products and shifts are exact): element i of the flat result uses counter
    (i, offset) and key seed, ``key`` = (seed, offset)."""
    shape, out = _shape(op.result), _elem(op.result)
    key = w.of(op.key)
    zero, one = w.line("arith.constant 0 : index"), w.line("arith.constant 1 : index")
    seed = w.line(f"tensor.extract {key}[{zero}] : tensor<2xi64>")
    offset = w.line(f"tensor.extract {key}[{one}] : tensor<2xi64>")
    strides = [int(np.prod(shape[k + 1:], dtype=np.int64)) for k in range(len(shape))]

    def body(sc: Scalars, args: list[str]) -> str:
        ops = philox.NamedWordOps(lambda v: sc.const(v, "i64"),     # words < 2**32:
                                  lambda n, a, b: sc.binary(n, a, b, "i64"),   # exact
                                  _WORD_OPS)
        i = ops.const(0)
        for d, s in enumerate(strides):
            idx = sc.line(f"arith.index_cast {sc.line(f'linalg.index {d} : index')} : index to i64")
            i = ops.add(i, ops.mul(idx, ops.const(s)))
        words = philox.rounds([ops.low32(i), ops.shr(i, 32), ops.low32(offset),
                               ops.shr(offset, 32)], [ops.low32(seed), ops.shr(seed, 32)], ops)
        name = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64"}[out]
        word, bits = philox.mantissa(words, name, ops)
        u = sc.line(f"arith.uitofp {word} : i64 to f64")
        u = sc.binary("arith.mulf", u, sc.const(2.0 ** -bits, "f64"), "f64")
        return u if out == "f64" else sc.line(f"arith.truncf {u} : f64 to {compute(out)}")
    return w.generic([], shape, out, body)


# Philox's word ops (``philox.NamedWordOps``) as arith ops on i64 scalars
_WORD_OPS = {"mul": "arith.muli", "add": "arith.addi", "xor": "arith.xori", "or": "arith.ori",
             "shr": "arith.shrui", "shl": "arith.shli", "and": "arith.andi"}


def _refuse(why: str) -> Lowering:
    def lower(w: Writer, op: Operation) -> str:
        raise LinalgLoweringError(f"mlir engine: {op.name} {why}")
    return lower


LOWERINGS: dict[type[Operation], Lowering] = {
    nd.ConstantOp: _constant,
    nd.IotaOp: _iota,
    nd.RngUniformOp: _rng_uniform,
    nd.NegOp: _arith(_op("arith.negf"), _neg_int),
    nd.AbsOp: _arith(_op("math.absf"), _abs_int),
    nd.ExpOp: _arith(_op("math.exp")),
    nd.LogOp: _arith(_op("math.log")),
    nd.SqrtOp: _arith(_op("math.sqrt")),
    nd.RsqrtOp: _arith(_rsqrt),
    nd.ReciprocalOp: _arith(_reciprocal),
    nd.SinOp: _arith(_op("math.sin")),
    nd.CosOp: _arith(_op("math.cos")),
    nd.TanhOp: _arith(_op("math.tanh")),
    nd.ErfOp: _arith(_op("math.erf")),
    nd.Expm1Op: _arith(_op("math.expm1")),
    nd.Log1pOp: _arith(_op("math.log1p")),
    nd.FloorOp: _arith(_op("math.floor")),
    nd.CeilOp: _arith(_op("math.ceil")),
    nd.RoundOp: _arith(_op("math.roundeven")),
    nd.TruncOp: _arith(_op("math.trunc")),
    nd.CastOp: _cast,
    nd.BitcastOp: _bitcast,
    nd.AddOp: _arith(_op("arith.addf"), _op("arith.addi"), _op("arith.ori")),
    nd.SubOp: _arith(_op("arith.subf"), _op("arith.subi")),
    nd.MulOp: _arith(_op("arith.mulf"), _op("arith.muli"), _op("arith.andi")),
    nd.DivOp: _arith(_op("arith.divf"), _safe_divsi, check=_div_by_zero),
    nd.MaximumOp: _arith(_op("arith.maximumf"), _op("arith.maxsi"), _op("arith.ori")),
    nd.MinimumOp: _arith(_op("arith.minimumf"), _op("arith.minsi"), _op("arith.andi")),
    nd.PowOp: _arith(_op("math.powf"), _safe_ipow),
    nd.RemOp: _arith(_op("arith.remf")),
    nd.Atan2Op: _arith(_op("math.atan2")),
    nd.AndOp: _arith(None, _op("arith.andi"), _op("arith.andi")),
    nd.OrOp: _arith(None, _op("arith.ori"), _op("arith.ori")),
    nd.XorOp: _arith(None, _op("arith.xori"), _op("arith.xori")),
    nd.NotOp: _arith(None, _not, _not),
    nd.CompareOp: _compare,
    nd.WhereOp: _where,
    nd.BroadcastInDimOp: _broadcast_in_dim,
    nd.ReshapeOp: _reshape,
    nd.TransposeOp: _transpose,
    nd.SliceOp: _slice,
    nd.PadOp: _pad,
    nd.ConcatOp: _concat,
    nd.ReduceSumOp: _reduce("sum"),
    nd.ReduceMaxOp: _reduce("max"),
    nd.MatmulOp: _matmul,
    nd.GatherOp: _gather,
    nd.ScatterAddOp: _scatter(add=True),
    nd.ScatterOp: _scatter(add=False),
    nd.WrapIndexOp: _wrap_index,
    nd.ArgsortOp: _argsort,
    nd.CumsumOp: _scan("sum"),
    nd.CumprodOp: _scan("prod"),
    nd.AttentionOp: _refuse("is not lowered: the engine runs attention as its composite"),
    nd.AttentionGradOp: _refuse("is not lowered: the engine runs attention as its composite"),
    nd.AllReduceStartOp: _refuse("exchanges data with other processes; the mlir engine runs "
                                 "steps of one process"),
    nd.AllReduceWaitOp: _refuse("exchanges data with other processes; the mlir engine runs "
                                "steps of one process"),
}


def _storage_root(v: SSAValue) -> SSAValue:
    """The value whose storage ``v`` shares after bufferization: through reshapes (the
    only ops lowered to views, ``tensor.expand_shape``/``collapse_shape``) and casts
    between int8 and uint8 (both stored as i8: the copy they lower to folds away)."""
    while isinstance(v, OpResult) and (isinstance(v.op, nd.ReshapeOp) or _same_bits(v.op)):
        v = v.op.operands[0]
    return v


def _same_bits(op: Operation) -> bool:
    """A cast whose generic is an identity on the stored bits (i8 <-> ui8)."""
    return isinstance(op, nd.CastOp) and {_elem(op.input), _elem(op.result)} == {"i8", "ui8"}


def to_linalg(module: ModuleOp, name: str = "step") -> str:
    """``module``'s step function (nova stage, attention as its composite) as upstream
    MLIR text: function ``name`` with the step's arguments and results (booleans as
    i8), then a 0-d i8 flag, set when a run-time check failed."""
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    w = Writer()
    block = fn.body.block
    params = []
    for k, arg in enumerate(block.args):
        w.names[arg] = f"%arg{k}"
        params.append(f"%arg{k}: {ttype(_shape(arg), _elem(arg))} {{bufferization.writable = false}}")
    returned: list[tuple[str, str, Any]] = []
    for op in block.ops:
        if isinstance(op, func.ReturnOp):
            returned = [(w.of(v), ttype(_shape(v), _elem(v)), _storage_root(v))
                        for v in op.operands]
            continue
        lower = LOWERINGS.get(type(op))
        if lower is None:
            raise LinalgLoweringError(f"mlir engine: no lowering for {op.name}")
        w.names[op.results[0]] = lower(w, op)
    flag = w.filled(0, (), "i1")
    for f in w.flags:
        flag = w.elementwise([(flag, "i1"), (f, "i1")], (), "i1",
                             lambda sc, xs: sc.binary("arith.ori", xs[0], xs[1], "i1"))
    returned.append((flag, ttype((), "i1"), None))
    # A result that is an argument, or a reshape of one, or shares its storage with an
    # earlier result (returned twice, or a reshape of another result), is copied:
    # out-params must not alias (buffer-results-to-out-params crashed on a result and
    # its reshape returned together).
    seen: set[Any] = set()
    results = []
    for value, t, root in returned:
        if isinstance(root, BlockArgument) or (root is not None and root in seen):
            value = w.line(f"bufferization.alloc_tensor() copy({value}) : {t}")
        seen.add(root)
        results.append((value, t))
    head = (f"  func.func @{name}({', '.join(params)}) -> ({', '.join(t for _, t in results)}) "
            f"attributes {{llvm.emit_c_interface}} {{")
    tail = f"    return {', '.join(v for v, _ in results)} : {', '.join(t for _, t in results)}"
    return "\n".join(["module {", head, *w.lines, tail, "  }", "}"]) + "\n"
