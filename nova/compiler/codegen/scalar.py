"""The value of a fused region's SSA value at a multi-index, for every target at once.

Both code generators (LLVM IR for the CPU, CUDA C for the GPU) evaluate a ``nova.fusion``
region the same way: ``emit(value, idx)`` is the value of ``value`` at the multi-index
``idx``, computed by recursing through its producers. Movement ops never materialize:
they rewrite the index (broadcast drops dims, transpose permutes, reshape re-linearizes,
slice scales and offsets, pad and concat select, gather reads an index). Those rules, the
checks of gather and wrap_index, and the dispatch over ops are written here once, against
a small arithmetic interface (``index``, ``add``, ``icmp``, ``select``, ``bind``, ...)
that ``targets.cpu.llvm_emit.Emitter`` implements with ``llvmlite`` instructions and
``targets.cuda.emit.CEmitter`` with C expressions. What each target writes its own way —
an elementwise op's arithmetic, a comparison, a random draw — is its table, keyed by op
class (``RULES`` and ``ARITH``), so adding an elementwise primitive is one row per table.

Index values are i64 in both targets (CUDA may hold them as 32-bit unsigned variables
where a kernel has fewer than 2^32 elements; ``index_value`` widens one to i64 where it
becomes data). float16/bfloat16 values are computed in float32 and rounded after every
arithmetic op, matching the reference interpreter's per-op rounding; int8/uint8/int16
values are computed in int32 (loads sign- or zero-extend) and wrapped back to their type
after every op (``fit``), which gives the interpreter's (numpy's, PyTorch's) wrap-around:
an int32 value of such a type always holds the exact value of an element, so int32
comparisons, divisions and conversions are exact for it.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from xdsl.ir import BlockArgument, Operation, SSAValue

from nova.compiler import dialect as nd
from nova.compiler.codegen.values import element_of, shape_of
from nova.compiler.lowering.plan import KernelPlan
from nova.core.shapes import reshape_groups

V = TypeVar("V")   # a target's scalar value: an llvmlite ``ir.Value`` or a C expression

FLOATS = ("f32", "f64", "f16", "bf16")


def _ints(a) -> tuple[int, ...]:
    return tuple(a.get_values())


@dataclass(frozen=True)
class Arith:
    """How a target computes one elementwise op from its operands' values, per kind of
    element type: ``float`` (f16/bf16 in float32, rounded after), ``int`` (i32, i64; i8,
    ui8 and i16 in i32, wrapped after) and ``bool`` (i1). Each is ``rule(emitter, mlir,
    *args)``; None: not defined there (the verifier rejects such IR, so reaching it is a
    compiler bug and names the op)."""

    float: Callable[..., Any] | None = None
    int: Callable[..., Any] | None = None
    bool: Callable[..., Any] | None = None


OpRule = Callable[["ScalarEmitter", Operation, list], Any]


class ScalarEmitter(Generic[V]):
    """Evaluates one kernel's fused region at multi-indices; a target subclasses it.

    A subclass provides the arithmetic interface below (all on i64 index values unless
    a dtype is named), the value cache, ``load_argument`` (a block argument at an index),
    ``const``/``cast``/``fit`` (typed scalars), and two tables: ``RULES`` (op
    class -> ``rule(emitter, op, idx)``, for ops it evaluates its own way from the
    index) and ``ARITH`` (op class -> ``Arith``)."""

    TARGET: ClassVar[str]
    RULES: ClassVar[dict[type[Operation], OpRule]]
    ARITH: ClassVar[dict[type[Operation], Arith]]

    def __init__(self, plan: KernelPlan):
        self.plan = plan
        self.fusion = plan.fusion
        block = self.fusion.body.block
        self.arg_index = {id(a): i for i, a in enumerate(block.args)}
        self.root = block.last_op.operands[0]

    # ------------------------------------------------------------ the target's interface

    def index(self, n: int) -> V:
        """The i64 constant ``n``."""
        raise NotImplementedError

    def add(self, a: V, b: V) -> V:
        raise NotImplementedError

    def sub(self, a: V, b: V) -> V:
        raise NotImplementedError

    def mul(self, a: V, b: V) -> V:
        raise NotImplementedError

    def div(self, a: V, b: V) -> V:
        """Signed division, truncating (the divisor is a positive constant)."""
        raise NotImplementedError

    def rem(self, a: V, b: V) -> V:
        raise NotImplementedError

    def icmp(self, pred: str, a: V, b: V) -> V:
        """Signed comparison (``pred`` one of < <= > >= == !=), an i1 value."""
        raise NotImplementedError

    def all_of(self, a: V, b: V) -> V:
        raise NotImplementedError

    def any_of(self, a: V, b: V) -> V:
        raise NotImplementedError

    def select(self, cond: V, a: V, b: V) -> V:
        raise NotImplementedError

    def bind(self, v: V, mlir: str, hint: str) -> V:
        """``v`` computed once into a value of its own (a C variable named from
        ``hint``); LLVM values are already that."""
        raise NotImplementedError

    def fail_if(self, cond: V) -> None:
        """Make the kernel report an error (index out of range) where ``cond`` holds."""
        raise NotImplementedError

    def index_value(self, i: V) -> V:
        """A loop index as an i64 value of the region (``iota``)."""
        raise NotImplementedError

    def linear(self, idx: Sequence[V], shape: Sequence[int]) -> V:
        """Row-major offset of a multi-index."""
        raise NotImplementedError

    def delinearize(self, flat: V, shape: Sequence[int]) -> list[V]:
        """Row-major multi-index of an offset in ``[0, numel(shape))``."""
        raise NotImplementedError

    def const(self, value: float | int, mlir: str) -> V:
        raise NotImplementedError

    def cast(self, v: V, src: str, dst: str) -> V:
        raise NotImplementedError

    def bitcast(self, v: V, src: str, dst: str) -> V:
        """The stored bits of ``v`` (a ``src`` value, in its compute type) read as
        ``dst`` (``nd.BITCAST_PAIRS``), returned in ``dst``'s compute type."""
        raise NotImplementedError

    def fit(self, v: V, mlir: str) -> V:
        """A computed value as its storage type holds it, still in the compute type: a
        float32 value rounded to f16/bf16, an int32 value wrapped to i8/ui8/i16
        (truncated, then sign- or zero-extended); identity for other types."""
        raise NotImplementedError

    def load_argument(self, i: int, idx: list[V]) -> V:
        raise NotImplementedError

    def _key(self, value: SSAValue, idx: list[V]) -> Any:
        raise NotImplementedError

    def _lookup(self, key: Any) -> V | None:
        raise NotImplementedError

    def _remember(self, key: Any, v: V) -> None:
        raise NotImplementedError

    def _overridden(self, value: SSAValue, idx: list[V]) -> tuple[V, bool] | None:
        """A kernel body's own value for ``value`` (a reduction's total, a matmul's
        accumulator) and whether it may be cached; None if it has none."""
        raise NotImplementedError

    def name(self, v: V, mlir: str) -> V:
        """The result of an op as the emitter keeps it (a C variable unless trivial)."""
        return v

    # ------------------------------------------------------------ shared evaluation

    def fail(self, what: str) -> NotImplementedError:
        return NotImplementedError(f"{self.TARGET} codegen: kernel {self.plan.name} "
                                   f"({self.plan.kind}): {what}")

    def emit(self, value: SSAValue, idx: list[V]) -> V:
        """The value of ``value`` at ``idx``, computed once per index (per scope)."""
        key = self._key(value, idx)
        hit = self._lookup(key)
        if hit is not None:
            return hit
        special = self._overridden(value, idx)
        if special is not None:
            out, cacheable = special
            if not cacheable:
                return out
        elif isinstance(value, BlockArgument):
            out = self.name(self.load_argument(self.arg_index[id(value)], idx),
                            element_of(value))
        else:
            out = self.name(self._op(value.owner, idx), element_of(value))
        self._remember(key, out)
        return out

    def _op(self, op: Operation, idx: list[V]) -> V:
        rule = SHARED_RULES.get(type(op)) or self.RULES.get(type(op))
        if rule is not None:
            return rule(self, op, idx)
        mlir = element_of(op.results[0])
        arith = self.ARITH.get(type(op))
        kind = "bool" if mlir == "i1" else "float" if mlir in FLOATS else "int"
        fn = getattr(arith, kind) if arith is not None else None
        if fn is None:
            raise self.fail(f"no lowering for {op.name} on {mlir}")
        out = fn(self, mlir, *[self.emit(v, idx) for v in op.operands])
        return self.fit(out, mlir) if kind != "bool" else out

    # ------------------------------------------------------------ index rules

    def move(self, op: Operation, idx: list[V]) -> list[V]:
        """The operand index a movement op reads for result index ``idx``."""
        src = shape_of(op.operands[0])
        if isinstance(op, nd.BroadcastInDimOp):
            return [self.index(0) if src[i] == 1 else idx[d] for i, d in enumerate(_ints(op.dims))]
        if isinstance(op, nd.TransposeOp):
            perm = _ints(op.perm)
            out: list[V] = [self.index(0)] * len(perm)
            for i, p in enumerate(perm):
                out[p] = idx[i]
            return out
        if isinstance(op, nd.SliceOp):
            return [i if (a, s) == (0, 1) else self.add(self.index(a), self.mul(i, self.index(s)))
                    for i, a, s in zip(idx, _ints(op.start), _ints(op.stride))]
        assert isinstance(op, nd.ReshapeOp), op.name
        dst = shape_of(op.results[0])
        if [n for n in src if n != 1] == [n for n in dst if n != 1]:   # unit dims only
            real = iter([i for i, n in zip(idx, dst) if n != 1])
            return [self.index(0) if n == 1 else next(real) for n in src]
        if 0 in src or 0 in dst:
            return self.delinearize(self.linear(idx, dst), src)
        return self.regroup(idx, dst, src)

    def regroup(self, idx: list[V], dst: Sequence[int], src: Sequence[int]) -> list[V]:
        """The source multi-index of a reshape, per group of dims with equal element
        counts on both sides ((16, 128, 384) <- (2048, 384): {16, 128} <- {2048} and
        {384} <- {384}). A dim that is its own group passes its index through, and a
        group of one source dim needs no division, so the innermost (vectorized) loop
        index usually reaches the load untouched: re-linearizing the whole index would
        put a remainder on it and keep LLVM from vectorizing the loop."""
        out: list[V] = []
        groups, j, _ = reshape_groups(src, dst)
        for j0, j1, i0, i1 in groups:
            flat = idx[i0] if i1 - i0 == 1 else self.linear(idx[i0:i1], dst[i0:i1])
            out.extend([flat] if j1 - j0 == 1 else self.delinearize(flat, src[j0:j1]))
        return out + [self.index(0)] * (len(src) - j)    # trailing unit dims of the source

    def pad(self, op: nd.PadOp, idx: list[V]) -> V:
        src = shape_of(op.operands[0])
        valid = None
        in_idx = []
        for i, n, lo, it in zip(idx, src, _ints(op.low), _ints(op.interior)):
            t = self.bind(self.sub(i, self.index(lo)), "i64", "p")
            step = it + 1
            q = self.bind(self.div(t, self.index(step)), "i64", "q") if step != 1 else t
            ok = self.all_of(self.icmp(">=", t, self.index(0)), self.icmp("<", q, self.index(n)))
            if step != 1:
                ok = self.all_of(ok, self.icmp("==", self.rem(t, self.index(step)),
                                               self.index(0)))
            ok = self.bind(ok, "i1", "ok")
            valid = ok if valid is None else self.all_of(valid, ok)
            in_idx.append(self.select(ok, q, self.index(0)))
        inner = self.emit(op.operands[0], in_idx)
        if valid is None:
            return inner
        return self.select(valid, inner, self.emit(op.operands[1], []))

    def concat(self, op: nd.ConcatOp, idx: list[V]) -> V:
        d = op.dim.value.data
        result = None
        offset = 0
        for v in op.operands:
            n = shape_of(v)[d]
            local = self.bind(self.sub(idx[d], self.index(offset)), "i64", "c")
            inside = self.bind(self.all_of(self.icmp(">=", local, self.index(0)),
                                           self.icmp("<", local, self.index(n))), "i1", "in")
            sub = list(idx)
            sub[d] = self.select(inside, local, self.index(0))
            val = self.emit(v, sub)
            result = val if result is None else self.select(inside, val, result)
            offset += n
        return result

    def gather(self, op: nd.GatherOp, idx: list[V]) -> V:
        """``input`` at ``idx`` with coordinate ``dim`` read from ``index``; an index
        outside the dim fails the kernel and reads element 0 (no access strays)."""
        d = op.dim.value.data
        n = shape_of(op.operands[0])[d]
        raw = self.emit(op.operands[1], idx)
        j = self.bind(self.cast(raw, element_of(op.operands[1]), "i64"), "i64", "g")
        bad = self.bind(self.any_of(self.icmp("<", j, self.index(0)),
                                    self.icmp(">=", j, self.index(n))), "i1", "bad")
        self.fail_if(bad)
        sub = list(idx)
        sub[d] = self.select(bad, self.index(0), j)
        return self.emit(op.operands[0], sub)

    def wrap_index(self, op: nd.WrapIndexOp, idx: list[V]) -> V:
        """``i + size`` where ``i < 0``; outside ``[-size, size)`` the kernel fails and the
        value is 0, so the kernels reading it do not report the same error again."""
        mlir = element_of(op.results[0])
        size = op.size.value.data
        i = self.cast(self.emit(op.operands[0], idx), mlir, "i64")
        bad = self.bind(self.any_of(self.icmp("<", i, self.index(-size)),
                                    self.icmp(">=", i, self.index(size))), "i1", "bad")
        self.fail_if(bad)
        wrapped = self.select(self.icmp("<", i, self.index(0)), self.add(i, self.index(size)), i)
        return self.cast(self.select(bad, self.index(0), wrapped), "i64", mlir)


def _moved(e: ScalarEmitter, op: Operation, idx: list) -> Any:
    return e.emit(op.operands[0], e.move(op, idx))


# Ops every target evaluates through the interface alone: sources, movement, selection,
# conversion and the checked index ops.
SHARED_RULES: dict[type[Operation], OpRule] = {
    nd.ConstantOp: lambda e, op, idx: e.const(op.value.value.data, element_of(op.results[0])),
    nd.IotaOp: lambda e, op, idx: e.cast(e.index_value(idx[op.dim.value.data]), "i64",
                                         element_of(op.results[0])),
    nd.BroadcastInDimOp: _moved,
    nd.ReshapeOp: _moved,
    nd.TransposeOp: _moved,
    nd.SliceOp: _moved,
    nd.PadOp: lambda e, op, idx: e.pad(op, idx),
    nd.ConcatOp: lambda e, op, idx: e.concat(op, idx),
    nd.GatherOp: lambda e, op, idx: e.gather(op, idx),
    nd.WrapIndexOp: lambda e, op, idx: e.wrap_index(op, idx),
    nd.CastOp: lambda e, op, idx: e.cast(e.emit(op.input, idx), element_of(op.input),
                                         element_of(op.results[0])),
    nd.WhereOp: lambda e, op, idx: e.select(*[e.emit(v, idx) for v in op.operands]),
    nd.BitcastOp: lambda e, op, idx: e.bitcast(e.emit(op.input, idx), element_of(op.input),
                                               element_of(op.results[0])),
}


def missing_lowerings(emitter: type[ScalarEmitter]) -> list[str]:
    """Dialect ops a target's emitter cannot evaluate: neither shared, nor in its
    tables, nor kernel roots (which the target's kernel bodies lower, not the emitter)."""
    return sorted(name for name, op in nd.OPS_BY_NAME.items()
                  if op not in SHARED_RULES and op not in emitter.RULES
                  and op not in emitter.ARITH and not op.has_trait(nd.KernelRoot))
