"""CUDA C expressions for the ops of a fused region: the CUDA twin of ``Emitter.emit`` in
``codegen/llvm.py``.

``CEmitter.emit(value, idx)`` returns the name of a C variable (or a literal) holding the
value of an SSA value of the fused region at a multi-index, appending the statements
that compute it. Indices are C expressions of type ``i64``. Movement ops never
materialize: they rewrite the index exactly as the CPU backend does (broadcast drops
dims, transpose permutes, reshape re-linearizes, slice scales and offsets, pad/concat
select). float16/bfloat16 compute in float and are rounded after every op.

Generated statements live in C scopes; ``scope()`` opens one and forgets, on leaving,
the values computed inside it, so a value is reused only where its variable is visible.
"""
from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from xdsl.ir import BlockArgument, Operation, SSAValue

from nova.compiler.codegen.values import COMPARE, FLOAT_MATH, element_of, shape_of
from nova.compiler.lowering.plan import KernelPlan
from nova.core.shapes import numel

STORAGE = {"f32": "float", "f64": "double", "f16": "unsigned short", "bf16": "unsigned short",
           "i32": "int", "i64": "i64", "i1": "unsigned char"}
COMPUTE = {"f32": "float", "f64": "double", "f16": "float", "bf16": "float", "i32": "int",
           "i64": "i64", "i1": "bool"}
FLOATS = ("f32", "f64", "f16", "bf16")
_UNARY_F = {**FLOAT_MATH, "abs": "fabs"}
_ARITH = {"add": "+", "sub": "-", "mul": "*"}


def _ints(a) -> tuple[int, ...]:
    return tuple(a.get_values())


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


class CEmitter:
    """Statements and expressions for one kernel."""

    def __init__(self, plan: KernelPlan):
        self.plan = plan
        self.fusion = plan.fusion
        block = self.fusion.body.block
        self.arg_index = {id(a): i for i, a in enumerate(block.args)}
        self.root = block.last_op.operands[0]
        self.lines: list[str] = []
        self.depth = 1
        self.counter = 0
        self.scopes: list[dict] = [{}]
        self.override: dict[int, str] = {}
        # Vectorized elementwise kernels: block arguments of the output's shape read at
        # exactly ``vector_idx`` come from a per-thread chunk ``va<i>[u]`` loaded with
        # one wide access (see ``codegen.cuda._elementwise``); ``vector_loads`` collects
        # the arguments read that way.
        self.vector_idx: tuple[str, ...] | None = None
        self.vector_args: set[int] = set()
        self.vector_loads: set[int] = set()

    # ------------------------------------------------------------ text

    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def fresh(self, ctype: str, expr: str, prefix: str = "v") -> str:
        name = f"{prefix}{self.counter}"
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
        return raw

    @staticmethod
    def narrow(v: str, mlir: str) -> str:
        if mlir == "f16":
            return f"nv_f16_store({v})"
        if mlir == "bf16":
            return f"nv_bf16_store({v})"
        if mlir == "i1":
            return f"(unsigned char)({v})"
        return v

    @staticmethod
    def round_half(v: str, mlir: str) -> str:
        if mlir in ("f16", "bf16"):
            return f"nv_{mlir}_round({v})"
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
        if src == dst:
            return v
        d = COMPUTE[dst]
        if dst == "i1":
            return f"({v} != 0)"
        if src == "i1":
            return self.round_half(f"(({d})({v} ? 1 : 0))", dst)
        if src in FLOATS and dst in FLOATS:
            if COMPUTE[src] == d:
                return self.round_half(v, dst)
            return self.round_half(f"(({d}){v})", dst)
        return self.round_half(f"(({d}){v})", dst)

    def emit(self, value: SSAValue, idx: list[str]) -> str:
        key = (id(value), tuple(idx))
        hit = self._lookup(key)
        if hit is not None:
            return hit
        if id(value) in self.override:
            return self.override[id(value)]
        mlir = element_of(value)
        if isinstance(value, BlockArgument):
            i = self.arg_index[id(value)]
            shape, dtype = self.plan.arg_types[i]
            if i in self.vector_args and tuple(idx) == self.vector_idx:
                self.vector_loads.add(i)
                expr = self.widen(f"va{i}[u]", dtype.mlir)
            else:
                expr = self.widen(f"{self.pointer(i)}[{self.linear(idx, shape)}]", dtype.mlir)
        else:
            expr = self._op(value.owner, idx)
        if _is_simple(expr):
            out = expr
        else:
            out = self.fresh(COMPUTE[mlir], expr)
        self.scopes[-1][key] = out
        return out

    def fail(self, what: str) -> NotImplementedError:
        return NotImplementedError(f"cuda codegen: kernel {self.plan.name} ({self.plan.kind}): "
                                   f"{what}")

    def _op(self, op: Operation, idx: list[str]) -> str:
        name = op.name.removeprefix("nova.")
        res = op.results[0]
        mlir = element_of(res)
        if name == "constant":
            v = op.value.value.data
            return float_literal(v, mlir) if mlir in FLOATS else int_literal(v, mlir)
        if name == "iota":
            return self.cast(f"((i64){idx[op.dim.value.data]})", "i64", mlir)
        if name == "rng_uniform":
            return self._philox_uniform(op, idx, mlir)
        if name in ("broadcast_in_dim", "reshape", "transpose", "slice"):
            return self.emit(op.operands[0], self._move(op, idx))
        if name == "pad":
            return self._pad(op, idx)
        if name == "concat":
            return self._concat(op, idx)
        if name == "gather":
            return self._gather(op, idx)
        args = [self.emit(v, idx) for v in op.operands]
        if name == "wrap_index":
            return self._wrap_index(op, args[0], mlir)
        if name == "cast":
            return self.cast(args[0], element_of(op.operands[0]), mlir)
        if name == "compare":
            return f"({args[0]} {COMPARE[op.direction.data]} {args[1]})"
        if name == "where":
            return f"({args[0]} ? {args[1]} : {args[2]})"
        out = self._arith(name, args, mlir)
        return self.round_half(out, mlir) if mlir in FLOATS else out

    def _arith(self, name: str, args: list[str], mlir: str) -> str:
        x = args[0]
        if mlir == "i1":
            if name in ("add", "maximum"):
                return f"({args[0]} || {args[1]})"
            if name in ("mul", "minimum"):
                return f"({args[0]} && {args[1]})"
        elif mlir in FLOATS:
            suffix = "" if mlir == "f64" else "f"
            one = "1.0" if mlir == "f64" else "1.0f"
            if name == "neg":
                return f"(-{x})"
            if name == "rsqrt":
                return f"({one} / sqrt{suffix}({x}))"
            if name == "reciprocal":
                return f"({one} / {x})"
            if name in _UNARY_F:
                return f"{_UNARY_F[name]}{suffix}({x})"
            if name in _ARITH:
                return f"({x} {_ARITH[name]} {args[1]})"
            if name == "div":
                return f"({x} / {args[1]})"
            if name in ("maximum", "minimum"):
                return f"nv_{name[:3]}({x}, {args[1]})"
            if name == "pow":
                return f"pow{suffix}({x}, {args[1]})"
        else:
            ctype = COMPUTE[mlir]
            if name == "neg":
                return f"(({ctype})(-{x}))"
            if name == "abs":
                return f"({x} < 0 ? ({ctype})(-{x}) : {x})"
            if name in _ARITH:
                return f"(({ctype})({x} {_ARITH[name]} {args[1]}))"
            if name in ("maximum", "minimum"):
                return f"nv_{name[:3]}({x}, {args[1]})"
            if name == "div":
                return f"nv_idiv<{ctype}>({x}, {args[1]})"
            if name == "pow":
                return f"nv_ipow<{ctype}>({x}, {args[1]})"
        raise self.fail(f"no lowering for nova.{name} on {mlir}")

    # ------------------------------------------------------------ index rewriting

    def _move(self, op: Operation, idx: list[str]) -> list[str]:
        name = op.name
        src = shape_of(op.operands[0])
        if name == "nova.broadcast_in_dim":
            return ["0" if src[i] == 1 else idx[d] for i, d in enumerate(_ints(op.dims))]
        if name == "nova.transpose":
            perm = _ints(op.perm)
            out = ["0"] * len(perm)
            for i, p in enumerate(perm):
                out[p] = idx[i]
            return out
        if name == "nova.slice":
            return [i if (a, s) == (0, 1) else f"({a}LL + {i} * {s}LL)"
                    for i, a, s in zip(idx, _ints(op.start), _ints(op.stride))]
        dst = shape_of(op.results[0])
        if [n for n in src if n != 1] == [n for n in dst if n != 1]:
            real = iter([i for i, n in zip(idx, dst) if n != 1])
            return ["0" if n == 1 else next(real) for n in src]
        return self.delinearize(self.linear(idx, dst), src)

    def _pad(self, op: Operation, idx: list[str]) -> str:
        src = shape_of(op.operands[0])
        conds: list[str] = []
        in_idx: list[str] = []
        for i, n, lo, it in zip(idx, src, _ints(op.low), _ints(op.interior)):
            t = self.fresh("i64", f"{i} - {lo}LL", "p")
            step = it + 1
            q = self.fresh("i64", f"{t} / {step}LL", "q") if step != 1 else t
            ok = f"({t} >= 0 && {q} < {n}LL" + (f" && {t} % {step}LL == 0)" if step != 1 else ")")
            okv = self.fresh("bool", ok, "ok")
            conds.append(okv)
            in_idx.append(f"({okv} ? {q} : 0LL)")
        valid = " && ".join(conds) or "true"
        inner = self.emit(op.operands[0], in_idx)
        fill = self.emit(op.operands[1], [])
        return f"(({valid}) ? {inner} : {fill})"

    def _concat(self, op: Operation, idx: list[str]) -> str:
        d = op.dim.value.data
        result = None
        offset = 0
        for v in op.operands:
            n = shape_of(v)[d]
            local = self.fresh("i64", f"{idx[d]} - {offset}LL", "c")
            inside = self.fresh("bool", f"({local} >= 0 && {local} < {n}LL)", "in")
            sub = list(idx)
            sub[d] = f"({inside} ? {local} : 0LL)"
            val = self.emit(v, sub)
            result = val if result is None else f"({inside} ? {val} : {result})"
            offset += n
        return result

    def _gather(self, op: Operation, idx: list[str]) -> str:
        d = op.dim.value.data
        n = shape_of(op.operands[0])[d]
        raw = self.emit(op.operands[1], idx)
        j = self.fresh("i64", f"(i64){raw}", "g")
        bad = self.fresh("bool", f"({j} < 0 || {j} >= {n}LL)", "bad")
        self.line(f"if ({bad}) nv_fail();")
        sub = list(idx)
        sub[d] = f"({bad} ? 0LL : {j})"
        return self.emit(op.operands[0], sub)

    def _wrap_index(self, op: Operation, i: str, mlir: str) -> str:
        """``i + size`` where ``i < 0``; outside ``[-size, size)`` the kernel fails and the
        value is 0, so the kernels reading it do not report the same error again."""
        size = op.size.value.data
        bad = self.fresh("bool", f"({i} < -{size}LL || {i} >= {size}LL)", "bad")
        self.line(f"if ({bad}) nv_fail();")
        return f"(({COMPUTE[mlir]})({bad} ? 0LL : {i} < 0 ? {i} + {size}LL : {i}))"

    def _philox_uniform(self, op: Operation, idx: list[str], mlir: str) -> str:
        seed = self.emit(op.operands[0], ["0"])
        offset = self.emit(op.operands[0], ["1"])
        i = self.linear(idx, shape_of(op.results[0]))
        w = self.fresh("nv_philox_out", f"nv_philox((u64)({i}), (u64){offset}, (u64){seed})",
                       "rng")
        bits = {"f16": 11, "bf16": 8, "f32": 24, "f64": 53}[mlir]
        ctype = COMPUTE[mlir]
        if bits <= 32:
            r = f"(u64)({w}.w0 >> {32 - bits})"
        else:
            r = f"((((u64){w}.w0) << {bits - 32}) | (((u64){w}.w1) >> {64 - bits}))"
        return f"(({ctype}){r} * ({ctype}){float(2.0 ** -bits).hex()})"


def _is_simple(expr: str) -> bool:
    """Literals and plain names need no variable of their own."""
    return expr.replace("_", "").isalnum() or expr in ("true", "false")
