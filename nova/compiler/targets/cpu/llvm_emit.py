"""The CPU implementation of ``codegen.scalar.ScalarEmitter``: scalar and index values as
``llvmlite`` instructions, and the CPU's op tables (``Emitter.ARITH``: one row per
elementwise op; ``Emitter.RULES``: comparisons and the Philox draw).

``Emitter`` also owns a kernel function's frame (its buffer pointers, the error slot,
entry-block allocas, loop metadata) that the kernel bodies in ``targets.cpu.llvm`` and the
GEMMs in ``targets.cpu.llvm_gemm`` build on. float16/bfloat16 values are computed in float32
and rounded after every op, matching the reference interpreter's per-op rounding;
int8/uint8/int16 values are computed in i32 (sign-, or for uint8 zero-extended on load)
and wrapped after every op (``Emitter.fit``): PyTorch's two's complement wrap-around.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

from llvmlite import ir
from xdsl.ir import Operation, SSAValue

from nova.compiler import dialect as nd
from nova.compiler.codegen.scalar import Arith, ScalarEmitter
from nova.compiler.codegen.values import COMPARE, element_of, shape_of
from nova.compiler.lowering.plan import KernelPlan
from nova.compiler.targets.cpu import llvm_trig
from nova.core import dtypes as dt
from nova.core import philox
from nova.core.shapes import numel

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
# LLVM's loop vectorizer treats a loop with fewer iterations than this as tiny (its
# ``vectorizer-min-trip-count`` default): no run-time checks, no scalar remainder.
TINY_TRIP_COUNT = 16
PTR = I8.as_pointer()

_STORAGE = {"f32": F32, "f64": F64, "f16": F16, "bf16": I16, "i32": I32, "i64": I64, "i1": I8,
            "i8": I8, "ui8": I8, "i16": I16}
_COMPUTE = {"f32": F32, "f64": F64, "f16": F32, "bf16": F32, "i32": I32, "i64": I64, "i1": I1,
            "i8": I32, "ui8": I32, "i16": I32}


def _numel(v: SSAValue) -> int:
    return numel(shape_of(v))


def _ints(a) -> tuple[int, ...]:
    return tuple(a.get_values())


def c64(n: int) -> ir.Constant:
    return ir.Constant(I64, n)


class Loops:
    """Counted loops with phi induction variables."""

    def __init__(self, b: ir.IRBuilder):
        self.b = b

    def range(self, lo: ir.Value, hi: ir.Value, body: Callable[[ir.Value], None],
              name: str = "i", md: ir.MDValue | None = None) -> None:
        """``for iv in [lo, hi): body(iv)``; ``md`` is attached to the back edge as the
        loop's ``llvm.loop`` metadata."""
        b = self.b
        pre = b.block
        head = b.append_basic_block(f"{name}.head")
        loop = b.append_basic_block(f"{name}.body")
        done = b.append_basic_block(f"{name}.done")
        b.branch(head)
        b.position_at_end(head)
        iv = b.phi(I64, name=name)
        iv.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", iv, hi), loop, done)
        b.position_at_end(loop)
        body(iv)
        nxt = b.add(iv, c64(1))
        iv.add_incoming(nxt, b.block)
        back = b.branch(head)
        if md is not None:
            back.set_metadata("llvm.loop", md)
        b.position_at_end(done)

    def nest(self, extents: Sequence[int], body: Callable[[list[ir.Value]], None],
             first: tuple[ir.Value, ir.Value] | None = None, at: int = 0,
             innermost_md: ir.MDValue | None = None,
             outer_md: ir.MDValue | None = None) -> None:
        """Nested loops over ``extents`` (row-major); ``first`` overrides the range of
        loop ``at`` (the outermost by default); ``innermost_md`` is the innermost loop's
        ``llvm.loop`` metadata, ``outer_md`` every other loop's."""
        idx: list[ir.Value] = []

        def level(d: int) -> None:
            if d == len(extents):
                body(list(idx))
                return
            lo, hi = first if (d == at and first is not None) else (c64(0), c64(extents[d]))

            def inner(iv: ir.Value) -> None:
                idx.append(iv)
                level(d + 1)
                idx.pop()
            self.range(lo, hi, inner, name=f"d{d}",
                       md=innermost_md if d == len(extents) - 1 else outer_md)
        level(0)


class _AccessGroup(ir.MDValue):
    """An access group: an empty *distinct* metadata node (LLVM asserts on a uniqued
    one), which llvmlite's ``add_metadata`` cannot make."""

    def __init__(self, module: ir.Module):
        super().__init__(module, [], name=str(len(module.metadata)))

    def descr(self, buf: list) -> None:
        buf += ("distinct !{}", "\n")


KERNEL_PARAMS: tuple[tuple[str, ir.Type], ...] = (("start", I64), ("end", I64))


class Frame:
    """One LLVM function under construction: its entry block (where ``entry_alloca``
    puts allocas, so they are promoted), a builder, counted loops, the releases run
    before it returns (``cleanup``) and its loop metadata. A kernel's ``Emitter`` is
    one; so is the shared GEMM driver (``llvm_gemm.GemmDriver``), which evaluates no
    region."""

    def __init__(self, module: ir.Module, fnty: ir.FunctionType, name: str,
                 arg_names: Sequence[str]):
        self.module = module
        self.fn = ir.Function(module, fnty, name=name)
        for arg, arg_name in zip(self.fn.args, arg_names):
            arg.name = arg_name
        self.entry = self.fn.append_basic_block("entry")
        self.b = ir.IRBuilder(self.entry)
        self.loops = Loops(self.b)
        self.cleanup: list[Callable[[], None]] = []
        # set by kernels whose iterations are independent (``parallel_accesses``): the
        # access group every buffer load and store is tagged with
        self.access_group: ir.MDValue | None = None

    def _hint(self, name: str, value: ir.Value | ir.MDValue | None = None) -> ir.MDValue:
        """One ``llvm.loop`` hint: ``!{!"name"}`` or ``!{!"name", value}``."""
        return self.module.add_metadata([ir.MetaDataString(self.module, name)]
                                        + ([value] if value is not None else []))

    def _loop_id(self, hints: list[ir.MDValue], tag: str) -> ir.MDValue:
        """A loop ID holding ``hints``: it refers to itself (and ``tag``, unique in the
        module, keeps llvmlite from handing back an existing node with the same hints)."""
        loop = self.module.add_metadata([*hints, ir.MetaDataString(self.module, tag)])
        loop.operands = (loop, *hints)
        return loop

    def not_unrolled(self, vectorize: bool = True) -> ir.MDValue:
        """``llvm.loop`` metadata keeping LLVM from unrolling a loop (and, unless
        ``vectorize``, from vectorizing it): for a GEMM tile's write-back, whose loops
        LLVM otherwise unrolls fully (and, for an edge tile's run-time trip counts,
        vectorizes with checks and remainder loops) at a third of a tiled GEMM's compile
        time -- measured in ``configurator``'s notes on compile time."""
        hints = [self._hint("llvm.loop.unroll.disable")]
        if not vectorize:
            hints.append(self._hint("llvm.loop.vectorize.enable", ir.Constant(ir.IntType(1), 0)))
        if self.access_group is not None:
            hints.append(self._hint("llvm.loop.parallel_accesses", self.access_group))
        return self._loop_id(hints, f"{self.fn.name}.loop{len(self.module.metadata)}")

    @contextlib.contextmanager
    def independent_iterations(self) -> Iterator[None]:
        """Inside: the loops made (``not_unrolled``, ``interleave``) are declared free of
        dependences between iterations, as ``parallel_accesses`` declares a whole
        kernel's, through a fresh access group that every buffer access emitted here
        carries (``tagged`` for the ones a kernel makes itself). For a loop whose
        iteration i reads an overlaid input only at the element it writes (a product's
        write-back through its epilogue, ``llvm_gemm.TiledKernel.epilogue_function``)."""
        saved = self.access_group
        self.access_group = _AccessGroup(self.module)
        try:
            yield
        finally:
            self.access_group = saved

    def tagged(self, inst: ir.Instruction) -> ir.Instruction:
        """``inst`` (a load or store) in the current access group, if there is one."""
        if self.access_group is not None:
            inst.set_metadata("llvm.access.group", self.access_group)
        return inst

    def parallel_accesses(self) -> None:
        """Declare the kernel's loops free of dependences between iterations through
        the buffers it reads and writes: an elementwise kernel writes element i of its
        output only, at iteration i, and reads an input that may share the output's
        memory (written in place, or donated) only at i (``step_memory.pointwise_inputs``
        decides which may). Every load and store of a buffer is tagged with one access
        group, which the loops' ``interleave`` metadata names. Without it the
        vectorizer checks at run time that the output does not overlap each input and
        runs the scalar loop when it does -- always, for a kernel written in place
        (measured 2.7-5x slower)."""
        self.access_group = _AccessGroup(self.module)

    def intrinsic(self, name: str, ty: ir.Type, n: int = 1) -> ir.Function:
        """``llvm.<name>.f32``/``.f64``/``.i<width>`` on ``n`` operands of type ``ty``,
        declared once."""
        suffix = f"i{ty.width}" if isinstance(ty, ir.IntType) else "f32" if ty == F32 else "f64"
        full = f"llvm.{name}.{suffix}"
        if full in self.module.globals:
            return self.module.globals[full]
        return ir.Function(self.module, ir.FunctionType(ty, [ty] * n), name=full)

    def call(self, name: str, *args: ir.Value) -> ir.Value:
        """An LLVM intrinsic (``llvm.<name>.f32``/``.f64``) on float operands."""
        return self.b.call(self.intrinsic(name, args[0].type, len(args)), list(args))

    # Polynomials use ``llvm.fmuladd`` (fused where the target has FMA, the same
    # rounding in every kernel of one machine).

    def _fma(self, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
        """a * b + c, fused where the target can."""
        return self.b.call(self.intrinsic("fmuladd", F32, 3), [a, b, c])

    def _poly(self, x: ir.Value, coeffs: Sequence[float]) -> ir.Value:
        """Horner evaluation of sum(coeffs[i] * x**i) in float32."""
        acc = ir.Constant(F32, coeffs[-1])
        for c in reversed(coeffs[:-1]):
            acc = self._fma(acc, x, ir.Constant(F32, c))
        return acc

    def entry_alloca(self, ty: ir.Type, size: int | None = None) -> ir.Value:
        """Allocas go in the entry block (so they are allocated once and promoted)."""
        b = self.b
        here = b.block
        b.position_at_start(self.entry)
        slot = b.alloca(ty, size=None if size is None else c64(size))
        b.position_at_end(here)
        return slot

    def finish(self, result: ir.Value) -> None:
        """Run the releases (``cleanup``) and return ``result``."""
        for release in self.cleanup:
            release()
        self.b.ret(result)


class Emitter(Frame, ScalarEmitter[ir.Value]):
    """Emits one function of a kernel: ``ScalarEmitter`` with llvmlite instructions.

    The kernel's entry point is ``i32 name(i8** bufs, i64 start, i64 end)`` (the
    default ``name`` and ``params``); a kernel may add internal functions that evaluate
    its region too (a tiled GEMM's epilogue and packing, ``llvm_gemm.TiledKernel``),
    each an Emitter with its own name and parameters after ``bufs``. Every one returns
    the error slot's value."""

    TARGET = "cpu"

    def __init__(self, module: ir.Module, plan: KernelPlan, name: str | None = None,
                 params: Sequence[tuple[str, ir.Type]] = KERNEL_PARAMS):
        ScalarEmitter.__init__(self, plan)
        fnty = ir.FunctionType(I32, [PTR.as_pointer()] + [ty for _, ty in params])
        Frame.__init__(self, module, fnty, name or plan.name,
                       ["bufs"] + [arg_name for arg_name, _ in params])
        if name is not None:
            self.fn.linkage = "internal"      # the object defines the kernel's name only
        n_args = len(plan.arg_types) + (1 if plan.scratch else 0)
        self.error = self.b.alloca(I32, name="error")
        self.b.store(ir.Constant(I32, 0), self.error)
        self.ptrs = []
        types = [t for _, t in plan.arg_types] + ([plan.scratch[1]] if plan.scratch else [])
        for i in range(n_args):
            raw = self.b.load(self.b.gep(self.fn.args[0], [c64(i)]))
            self.ptrs.append(self.b.bitcast(raw, _STORAGE[types[i].mlir].as_pointer()))
        self.out_ptr = self.ptrs[len(plan.arg_types) - 1]
        self.cache: dict = {}
        self.override: dict[int, Callable[[list[ir.Value]], ir.Value]] = {}

    def interleave(self, count: int, trip: int | None = None) -> ir.MDValue | None:
        """``llvm.loop`` metadata asking the loop vectorizer for ``count`` vectors in
        flight per iteration (None for 0: LLVM's own cost model decides) of the
        schedule's ``vector_width`` lanes (where set), and, once ``parallel_accesses``
        was called, saying that its iterations' buffer accesses are independent.

        ``trip``: the loop's iteration count where it is a constant. Below
        ``TINY_TRIP_COUNT`` nothing is asked of the vectorizer: LLVM does not vectorize
        such a loop with run-time checks, and a loop it was asked to vectorize and did
        not makes it print a remark on the user's terminal ("loop not vectorized:
        runtime pointer checks needed ... '#pragma clang loop vectorize(enable)'": a
        (10, 4) normal initialization did)."""
        hints = []
        tiny = trip is not None and trip < TINY_TRIP_COUNT
        if count > 0 and not tiny:
            hints.append(self._hint("llvm.loop.interleave.count", ir.Constant(I32, count)))
        if self.plan.schedule.vector_width > 0 and not tiny:
            hints.append(self._hint("llvm.loop.vectorize.width",
                                    ir.Constant(I32, self.plan.schedule.vector_width)))
        if self.access_group is not None:
            hints.append(self._hint("llvm.loop.parallel_accesses", self.access_group))
        return self._loop_id(hints, self.fn.name) if hints else None

    def finish_kernel(self) -> None:
        """Run the releases and return the error slot's value."""
        self.finish(self.b.load(self.error))

    # ------------------------------------------------------------ memory

    def linear(self, idx: Sequence[ir.Value], shape: Sequence[int]) -> ir.Value:
        """Row-major offset of a multi-index (the first index as is: a 1-D offset holds
        no extent, which a flat kernel's code must not)."""
        b = self.b
        if not idx:
            return c64(0)
        off = idx[0]
        for i, n in zip(idx[1:], shape[1:]):
            off = b.add(b.mul(off, c64(n)), i)
        return off

    def delinearize(self, flat: ir.Value, shape: Sequence[int]) -> list[ir.Value]:
        """Row-major multi-index of a linear offset."""
        b = self.b
        out: list[ir.Value] = []
        for n in reversed(shape):
            out.append(b.urem(flat, c64(n)))
            flat = b.udiv(flat, c64(n))
        return out[::-1]

    def store_root(self, flat: ir.Value) -> None:
        """Store the kernel output at linear offset ``flat`` (the root's own index space
        may differ from the loop's, e.g. a keepdim reshape of a reduction)."""
        shape, dtype = self.plan.out
        self.store(self.emit(self.root, self.delinearize(flat, shape)), self.out_ptr, flat,
                   dtype.mlir)

    def store_root_at(self, idx: list[ir.Value], shape: Sequence[int]) -> None:
        """``store_root`` at the multi-index ``idx`` of the loops' ``shape``: where that
        is the output's own shape the root is emitted at ``idx`` itself, with no
        delinearizing of the offset (LLVM keeps the division and remainder by each
        extent that are not powers of two: a layer norm's store pass over 768 columns
        ran a udiv/urem pair per element and stayed scalar)."""
        out_shape, dtype = self.plan.out
        flat = self.linear(idx, shape)
        if tuple(out_shape) != tuple(shape):
            self.store_root(flat)
            return
        self.store(self.emit(self.root, list(idx)), self.out_ptr, flat, dtype.mlir)

    def load(self, ptr: ir.Value, offset: ir.Value, mlir: str) -> ir.Value:
        return self.widen(self.tagged(self.b.load(self.b.gep(ptr, [offset]))), mlir)

    def widen(self, raw: ir.Value, mlir: str) -> ir.Value:
        b = self.b
        if mlir == "f16":
            return b.fpext(raw, F32)
        if mlir == "bf16":
            return b.bitcast(b.shl(b.zext(raw, I32), ir.Constant(I32, 16)), F32)
        if mlir == "i1":
            return b.icmp_unsigned("!=", raw, ir.Constant(I8, 0))
        if mlir == "ui8":
            return b.zext(raw, I32)
        if mlir in ("i8", "i16"):
            return b.sext(raw, I32)
        return raw

    def narrow(self, v: ir.Value, mlir: str) -> ir.Value:
        """Compute type to storage type (round to nearest even for the half types)."""
        b = self.b
        if mlir == "f16":
            return b.fptrunc(v, F16)
        if mlir == "bf16":
            bits = b.bitcast(v, I32)
            lsb = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
            rounded = b.lshr(b.add(bits, b.add(ir.Constant(I32, 0x7FFF), lsb)),
                             ir.Constant(I32, 16))
            is_nan = b.fcmp_unordered("uno", v, v)
            return b.trunc(b.select(is_nan, ir.Constant(I32, 0x7FC0), rounded), I16)
        if mlir == "i1":
            return b.zext(v, I8)
        if mlir in ("i8", "ui8", "i16"):
            return b.trunc(v, _STORAGE[mlir])
        return v

    def fit(self, v: ir.Value, mlir: str) -> ir.Value:
        if mlir in ("f16", "bf16", "i8", "ui8", "i16"):
            return self.widen(self.narrow(v, mlir), mlir)
        return v

    def store(self, v: ir.Value, ptr: ir.Value, offset: ir.Value, mlir: str) -> None:
        self.tagged(self.b.store(self.narrow(v, mlir), self.b.gep(ptr, [offset])))

    # ------------------------------------------------------------ helpers

    def fail_if(self, cond: ir.Value) -> None:
        b = self.b
        old = b.load(self.error)
        b.store(b.select(cond, ir.Constant(I32, 1), old), self.error)

    def libm(self, name: str, ty: ir.Type, arity: int = 1) -> ir.Function:
        full = name + ("f" if ty == F32 else "")
        if full in self.module.globals:
            return self.module.globals[full]
        fn = ir.Function(self.module, ir.FunctionType(ty, [ty] * arity), name=full)
        # Pure (errno is never read): lets LLVM hoist per-row calls out of inner loops.
        fn.attributes.add("nounwind")
        fn.attributes.add("readnone")
        return fn

    def const(self, value, mlir: str) -> ir.Constant:
        ty = _COMPUTE[mlir]
        if isinstance(ty, ir.IntType):
            return ir.Constant(ty, int(value) & 1 if ty.width == 1 else int(value))
        return ir.Constant(ty, float(value))

    def cast(self, v: ir.Value, src: str, dst: str) -> ir.Value:
        """Convert a computed value. Integers hold their exact value in their compute
        type, so widening sign-extends (a uint8's i32 is never negative) and an integer
        converts to float signed; a narrower integer type wraps (``fit``), so a float
        to int8/uint8/int16 truncates to i32 and then wraps, as C converts through int
        (a float beyond int32 is undefined there, as in LLVM's ``fptosi``)."""
        b = self.b
        s, d = _COMPUTE[src], _COMPUTE[dst]
        if dst == "i1":
            if isinstance(s, ir.IntType):
                return b.icmp_signed("!=", v, ir.Constant(s, 0)) if s != I1 else v
            return b.fcmp_unordered("!=", v, ir.Constant(s, 0.0))
        if src == "i1":
            return b.uitofp(v, d) if not isinstance(d, ir.IntType) else b.zext(v, d)
        if isinstance(s, ir.IntType) and isinstance(d, ir.IntType):
            if s.width != d.width:
                v = b.sext(v, d) if d.width > s.width else b.trunc(v, d)
            return self.fit(v, dst)
        if isinstance(s, ir.IntType):
            return self.fit(b.sitofp(v, d), dst)
        if isinstance(d, ir.IntType):
            return self.fit(b.fptosi(v, d), dst)
        if s == d:
            return self.fit(v, dst)
        return self.fit(b.fpext(v, d) if d == F64 else b.fptrunc(v, d), dst)

    def bitcast(self, v: ir.Value, src: str, dst: str) -> ir.Value:
        """The stored bits read as ``dst``. A half float is computed in f32 (already
        rounded to its type), an i16 in i32 (sign-extended): f16 goes through LLVM's
        half type, bf16 is the upper half of its f32's bits."""
        b = self.b
        if src in ("f16", "bf16") and dst in ("f16", "bf16"):
            return self.bitcast(self.bitcast(v, src, "i16"), "i16", dst)
        if src == "f16":
            return b.sext(b.bitcast(b.fptrunc(v, F16), I16), I32)
        if dst == "f16":
            return b.fpext(b.bitcast(b.trunc(v, I16), F16), F32)
        if src == "bf16":
            return b.ashr(b.bitcast(v, I32), ir.Constant(I32, 16))
        if dst == "bf16":
            return b.bitcast(b.shl(v, ir.Constant(I32, 16)), F32)
        return b.bitcast(v, _COMPUTE[dst])

    # ------------------------------------------------------------ ScalarEmitter's interface

    def index(self, n: int) -> ir.Value:
        return c64(n)

    def add(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.add(a, b)

    def sub(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.sub(a, b)

    def mul(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.mul(a, b)

    def div(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.sdiv(a, b)

    def rem(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.srem(a, b)

    def icmp(self, pred: str, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.icmp_signed(pred, a, b)

    def all_of(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.and_(a, b)

    def any_of(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.or_(a, b)

    def select(self, cond: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.select(cond, a, b)

    def bind(self, v: ir.Value, mlir: str, hint: str) -> ir.Value:
        return v

    def index_value(self, i: ir.Value) -> ir.Value:
        return i

    def load_argument(self, i: int, idx: list[ir.Value]) -> ir.Value:
        shape, dtype = self.plan.arg_types[i]
        return self.load(self.ptrs[i], self.linear(idx, shape), dtype.mlir)

    def _key(self, value: SSAValue, idx: list[ir.Value]) -> tuple:
        return id(value), tuple(id(i) for i in idx)

    def _lookup(self, key: tuple) -> ir.Value | None:
        return self.cache.get(key)

    def _remember(self, key: tuple, v: ir.Value) -> None:
        self.cache[key] = v

    def _overridden(self, value: SSAValue, idx: list[ir.Value]) -> tuple[ir.Value, bool] | None:
        fn = self.override.get(id(value))
        return None if fn is None else (fn(idx), True)

    def compare(self, op: Operation, idx: list[ir.Value]) -> ir.Value:
        b = self.b
        x, y = (self.emit(v, idx) for v in op.operands)
        a_mlir = element_of(op.operands[0])
        pred = COMPARE[op.direction.data]
        if isinstance(_COMPUTE[a_mlir], ir.IntType):
            if a_mlir == "i1":
                return b.icmp_unsigned(pred, x, y)
            return b.icmp_signed(pred, x, y)
        if pred == "!=":
            return b.fcmp_unordered(pred, x, y)
        return b.fcmp_ordered(pred, x, y)

    def call_libm(self, name: str, *xs: ir.Value) -> ir.Value:
        return self.b.call(self.libm(name, xs[0].type, len(xs)), list(xs))

    # Float32 math without libm calls, so loops containing it vectorize (a libm call
    # keeps a loop scalar: ``log`` ran at a third of ``add``'s bandwidth), on
    # ``Frame._fma`` and ``Frame._poly``. Each is within 2 ulp of the correctly rounded
    # result (tests/compiler/test_cpu_math.py measures them against float64 on samples,
    # ``tools/check_float32_math.py`` on every float32). The polynomials are minimax
    # fits of ``tools/fit_math.py``; their cost is counted by
    # ``tools/vector_loop_cost.py`` (instructions per 16 elements of the x86 loop).

    LOG2E = 1.4426950408889634
    # ln2 = LN2_HI + LN2_LO, LN2_HI with 16 significant bits: n LN2_HI is exact for
    # |n| < 256, so x - n LN2_HI is too (Cody and Waite's reduction)
    LN2_HI, LN2_LO = 0.693145751953125, 1.428606765330187e-06
    # exp(r) for |r| <= ln2/2, degree 6 (fit error 3.1e-9 relative)
    EXP_POLY = (1.0, 1.0, 0.4999999403953552, 0.1666652113199234, 0.04166838899254799,
                0.008368722163140774, 0.0013814570847898722)
    # Emitter-wide override of ``vector_ldexp`` (None: the host decides); tests set it
    # to compile the other path.
    VECTOR_LDEXP: bool | None = None

    def _exp_f32(self, x: ir.Value) -> ir.Value:
        """exp: Cody-Waite reduction x = n ln2 + r (``LN2_HI``/``LN2_LO``, by fused
        multiply-adds), |r| <= ln2/2, then ``EXP_POLY`` (degree 6, minimax: 3.1e-9
        relative, below float32 rounding; exhaustively 0.89 ulp at worst) and the scale
        2^n (``_times_pow2``: exact, subnormal results rounded once).

        The range needs no selects: x is first raised to -104 (exp(-104) rounds to 0,
        and so does the result), and n lowered to 128 (``_times_pow2``'s range), each
        one compare-and-pick (``_pick_min``/``_pick_max``, one vminps/vmaxps on x86);
        from x = 88.73 up, r grows with x and p 2^128 overflows to inf as exp does. NaN
        propagates through r (n, never NaN, gets 128)."""
        b = self.b
        f = lambda v: ir.Constant(F32, v)
        xc = self._pick_max(f(-104.0), x)
        n = self._pick_min(self.call("rint", b.fmul(xc, f(self.LOG2E))), f(128.0))
        r = self._fma(b.fneg(n), f(self.LN2_LO), self._fma(b.fneg(n), f(self.LN2_HI), xc))
        return self._times_pow2(self._poly(r, self.EXP_POLY), n)

    def vector_ldexp(self) -> bool:
        """Whether ``llvm.ldexp`` is one vector instruction here: AVX-512's vscalefps
        (after a vcvtdq2ps of the exponent). Elsewhere LLVM calls ``ldexpf`` lane by
        lane, which would keep the loop scalar."""
        if self.VECTOR_LDEXP is not None:
            return self.VECTOR_LDEXP
        from nova.compiler.targets.cpu.device import detect_cpu
        return detect_cpu().isa == "avx512"

    def _times_pow2(self, p: ir.Value, n: ir.Value) -> ir.Value:
        """p 2^n for p in [0.7, 1.42] and n an integral float in [-150, 128], exactly
        (one rounding where the result is subnormal, inf where it overflows): one
        ``llvm.ldexp`` where that is AVX-512's vscalefps (``vector_ldexp``; 3
        instructions with the conversions), else two factors 2^(n >> 1) and
        2^(n - (n >> 1)) built in the exponent bits (9 instructions: each factor is
        normal, and the product rounds once). Both give the same bits. (exp: 25.5 ->
        18.5 instructions per 16 elements in the AVX-512 loop, with the shorter
        polynomial.)"""
        b = self.b
        ni = b.fptosi(n, I32)
        if self.vector_ldexp():
            name = "llvm.ldexp.f32.i32"
            ldexp = self.module.globals.get(name) or ir.Function(
                self.module, ir.FunctionType(F32, [F32, I32]), name=name)
            return b.call(ldexp, [p, ni])
        half = b.ashr(ni, ir.Constant(I32, 1))
        scale = lambda k: b.bitcast(b.shl(b.add(k, ir.Constant(I32, 127)),
                                          ir.Constant(I32, 23)), F32)
        return b.fmul(b.fmul(p, scale(half)), scale(b.sub(ni, half)))

    def _pick_min(self, a: ir.Value, b_: ir.Value) -> ir.Value:
        """``a < b ? a : b``: the smaller, or b where either is NaN (x86's vminps)."""
        return self.b.select(self.b.fcmp_ordered("<", a, b_), a, b_)

    def _pick_max(self, a: ir.Value, b_: ir.Value) -> ir.Value:
        """``a > b ? a : b``: the larger, or b where either is NaN (x86's vmaxps)."""
        return self.b.select(self.b.fcmp_ordered(">", a, b_), a, b_)

    def _expm1_f32(self, x: ir.Value) -> ir.Value:
        """expm1: x = n ln2 + r as in ``_exp_f32``, but n = 0 for |x| < ln2 (so no
        cancellation where the result is small), and expm1(r) = r + r^2 P(r), the
        Taylor series to r^11 (|r| < ln2: next term < 1e-9 relative), with r added last
        (exact where tiny). Then 2^n expm1(r) + (2^n - 1) in one fused step (2^n - 1
        is exact for |n| <= 24; n stops at 127, so 2^n is finite, and from x = 88.73 up
        r >= ln2 makes the result overflow exactly where expm1 does). x < -20 gives -1
        (x is raised to -20 first); the sign is x's (expm1(x) < 0 exactly where x < 0),
        which keeps -0; NaN propagates through r (n, never NaN, gets 127)."""
        b = self.b
        f = lambda v: ir.Constant(F32, v)
        xc = self._pick_max(f(-20.0), x)
        n = self.call("rint", b.fmul(xc, f(self.LOG2E)))
        n = b.select(b.fcmp_ordered("<", self.call("fabs", xc), f(0.6931471805599453)),
                     f(0.0), n)
        n = self._pick_min(n, f(127.0))                   # |r| < ln2 still
        r = self._fma(b.fneg(n), f(self.LN2_LO), self._fma(b.fneg(n), f(self.LN2_HI), xc))
        p = self._poly(r, [1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040,
                           1.0 / 40320, 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800])
        em = self._fma(b.fmul(r, r), p, r)
        scale = b.bitcast(b.shl(b.add(b.fptosi(n, I32), ir.Constant(I32, 127)),
                                ir.Constant(I32, 23)), F32)
        return self.call("copysign", self._fma(scale, em, b.fsub(scale, f(1.0))), x)

    # log1p(f) = f + f^2 Q(f) for f in [-1/4, 1/2], degree 8 (fit error 4.8e-9 relative
    # to log1p(f))
    LOG1P_POLY = (-0.5, 0.3333345353603363, -0.25000056624412537, 0.19990593194961548,
                  -0.16647695004940033, 0.1448213905096054, -0.13163110613822937,
                  0.10449782758951187, -0.0449163056910038)
    THREE_QUARTERS_BITS = 0x3F400000    # float32 0.75

    def _log_f32(self, x: ir.Value) -> ir.Value:
        """log: x = 2^e m with m in [3/4, 3/2) (subnormals scaled by 2^23 first),
        f = m - 1 exact, log(x) = e ln2 + log1p(f) (``_log1p_reduced``). The exponent
        comes offset by 3/4's bits: k = bits(x) - bits(3/4), e = k >> 23 (arithmetic)
        and m = bits (k & 0x7FFFFF) + bits(3/4), so m lands in [3/4, 3/2) with no
        compare and select on m. No division (31.5 -> 30.5 instructions per 16
        elements; exhaustively 0.92 ulp at worst, against 0.95). 0 gives -inf, negatives
        NaN, inf inf."""
        b = self.b
        f = lambda v: ir.Constant(F32, v)
        i32 = lambda v: ir.Constant(I32, v)
        tiny = b.fcmp_ordered("<", x, f(2.0 ** -126))
        xs = b.select(tiny, b.fmul(x, f(2.0 ** 23)), x)
        k = b.sub(b.bitcast(xs, I32), i32(self.THREE_QUARTERS_BITS))
        e = b.sub(b.ashr(k, i32(23)), b.select(tiny, i32(23), i32(0)))
        fm = b.fsub(b.bitcast(b.add(b.and_(k, i32(0x7FFFFF)), i32(self.THREE_QUARTERS_BITS)),
                              F32), f(1.0))
        return self._log_specials(x, self._plus_e_ln2(e, self._log1p_reduced(fm)))

    def _log1p_f32(self, x: ir.Value) -> ir.Value:
        """log1p: u = 1 + x rounds, but only its exponent is used: 1 + x = 2^e (1 + f)
        with e from u's bits as in ``_log_f32`` and f = x 2^-e + (2^-e - 1), one fused
        multiply-add from x itself. For e <= 24 f is exact: x 2^-e and 2^-e - 1 are,
        and with 1 + x in [3/4, 3/2) 2^e the two are within a factor 2 of each other
        (Sterbenz), so f keeps what u lost in rounding, and is x itself where e = 0
        (x in [-1/4, 1/2)); beyond, 2^-e - 1 rounds, far below an ulp of e ln2. 2^-e
        is built in the exponent bits 4 times too large and then quartered, so it stays
        exact where it is subnormal (e up to 128, x near float32's largest). Then
        e ln2 + log1p(f) (``_log1p_reduced``): one polynomial, no division (the series
        of 2 atanh(f / (2 + f)) and the correction of u's rounding this replaces took
        41 instructions per 16 elements, now 31.5; exhaustively 1.27 ulp at worst, at
        x = 1/2 where the polynomial's Horner steps round most, against 1.08). The sign
        is x's (log1p(x) < 0 exactly where x < 0), which keeps -0. -1 gives -inf, below
        it NaN, inf inf."""
        b = self.b
        f = lambda v: ir.Constant(F32, v)
        i32 = lambda v: ir.Constant(I32, v)
        u = b.fadd(x, f(1.0))
        k = b.sub(b.bitcast(u, I32), i32(self.THREE_QUARTERS_BITS))
        quad = b.bitcast(b.sub(i32(0x40800000), b.and_(k, i32(-0x800000))), F32)
        s = b.fmul(quad, f(0.25))                                          # 2^-e
        red = self._fma(x, s, b.fsub(s, f(1.0)))
        y = self._log_specials(u, self._plus_e_ln2(b.ashr(k, i32(23)),
                                                   self._log1p_reduced(red)))
        return self.call("copysign", y, x)

    def _log1p_reduced(self, f: ir.Value) -> ir.Value:
        """log1p(f) for f in [-1/4, 1/2]: f + f^2 Q(f) (``LOG1P_POLY``,
        degree 8), f added last, so the rounding of f^2 Q (at most a fifth of the
        result) costs a fraction of an ulp."""
        return self._fma(self.b.fmul(f, f), self._poly(f, self.LOG1P_POLY), f)

    def _plus_e_ln2(self, e: ir.Value, y: ir.Value) -> ir.Value:
        """e ln2 + y for an integer e, in one fused multiply-add with ln2 rounded to
        float32: e (ln2 - float32(ln2)) is 1.9e-9 |e|, at most 0.07 ulp of the result
        (where e ln2 + y cancels most, e = -1 and y = 0.35). A second multiply-add for
        ln2's low part cost a sixteenth of log's time on Zen 4, whose loop is bound by
        its multiply-adds. (Without FMA hardware ``llvm.fmuladd`` rounds e ln2 first:
        up to half an ulp of e ln2 more.)"""
        return self._fma(self.b.sitofp(e, F32), ir.Constant(F32, 0.6931471805599453), y)

    def _log_specials(self, x: ir.Value, y: ir.Value) -> ir.Value:
        """log's values at the ends of its domain over ``y``: inf at inf, -inf at 0,
        NaN below 0 and at NaN."""
        b = self.b
        f = lambda v: ir.Constant(F32, v)
        y = b.select(b.fcmp_ordered("==", x, f(float("inf"))), x, y)
        y = b.select(b.fcmp_ordered("==", x, f(0.0)), f(float("-inf")), y)
        return b.select(b.fcmp_unordered("<", x, f(0.0)), f(float("nan")), y)

    def _blended_poly(self, first: ir.Value, t: ir.Value, a: Sequence[float],
                      b_: Sequence[float]) -> ir.Value:
        """Horner's rule in t for the coefficients ``a`` where ``first`` holds and
        ``b_`` elsewhere (equal lengths): one polynomial of two branches' arguments, its
        coefficients picked per lane (a vblendmps each, which does not compete with
        the multiply-adds: the loops of erf and tanh are bound by those)."""
        b = self.b
        pick = lambda i: b.select(first, ir.Constant(F32, a[i]), ir.Constant(F32, b_[i]))
        acc = pick(len(a) - 1)
        for i in range(len(a) - 2, -1, -1):
            acc = self._fma(acc, t, pick(i))
        return acc

    # erf(x)/x - 1 in x*x for |x| < ERF_SPLIT (fit error 1.4e-10 relative to erf), and
    # erfc(z)^(1/4) in z - ERF_TAIL_CENTER for ERF_SPLIT <= z <= ERF_ONE (fit error
    # 1.1e-8 in erf), both degree 7, by tools/fit_math.py. erf rounds to 1 in float32
    # from 3.9192 up; at ERF_ONE, where z is clamped, P^4 < 2^-25 (erfc(4) = 1.5e-8), so
    # 1 - P^4 is 1 exactly (and GELU's 1 + erf(x) exactly 0 far below 0).
    ERF_SPLIT = 1.1
    ERF_ONE = 4.0
    ERF_TAIL_CENTER = 2.0
    ERF_SMALL = (0.12837916612625122, -0.37612637877464294, 0.11283763498067856,
                 -0.026864301413297653, 0.005217899102717638, -0.0008439566590823233,
                 0.00010952760931104422, -8.802165211818647e-06)
    ERF_TAIL = (0.2615222632884979, -0.28886309266090393, 0.09913718700408936,
                0.006915651261806488, -0.012221504002809525, 0.0015121784526854753,
                0.0007215118384920061, -0.00017551284690853208)

    def _erf_f32(self, x: ir.Value) -> ir.Value:
        """erf: for |x| < 1.1, x + x P(x^2) (``ERF_SMALL``); otherwise 1 - P(z - 2)^4,
        z = |x| clamped at 4 (``ERF_TAIL``: erfc^(1/4) is close to exp(-z^2/4), far
        smoother than erf, which took degree 14 over [1, 3.92]), the last squaring
        fused into the subtraction, sign restored. P's rounding counts four times in
        erfc, a fraction of an ulp of erf from 1.1 up (erfc(1.1) = 0.12). Both are
        degree 7, evaluated as one polynomial (``_blended_poly``) of x^2 or z - 2:
        11 multiply-adds and multiplications per element, where the degree-14 tail
        beside the series took 24; exhaustively 1.37 ulp at worst, against 1.59. (Split
        at 1.2 with the tail in z, the series' Horner steps cancel more near the split:
        1.75 ulp there.) NaN propagates (the first branch)."""
        b = self.b
        f = lambda v: ir.Constant(F32, v)
        z = self.call("fabs", x)
        near = b.fcmp_unordered("<", z, f(self.ERF_SPLIT))
        t = b.select(near, b.fmul(x, x),
                     b.fsub(self._pick_min(z, f(self.ERF_ONE)), f(self.ERF_TAIL_CENTER)))
        p = self._blended_poly(near, t, self.ERF_SMALL, self.ERF_TAIL)
        p2 = b.fmul(p, p)
        tail = self.call("copysign", self._fma(b.fneg(p2), p2, f(1.0)), x)
        return b.select(near, self._fma(x, p, x), tail)

    # tanh(x) = x + x^3 P(x^2) for |x| < TANH_SPLIT (fit error 3.7e-9 relative), and
    # exp(2r) for |r| <= ln2/4 (fit error 9.2e-8 relative), both degree 5, by
    # tools/fit_math.py.
    TANH_SPLIT = 0.8
    TANH_ONE = 10.0     # tanh rounds to 1 in float32 from 9.0117 up
    TANH_SMALL = (-0.33333295583724976, 0.1333221197128296, -0.05385156720876694,
                  0.02130034565925598, -0.007405431941151619, 0.0015823806170374155)
    TANH_EXP = (1.0, 1.9999994039535522, 1.9999659061431885, 1.3334109783172607,
                0.6703681349754333, 0.26528915762901306)
    # 1.5 2^23 + 127: a float32 in [2^23, 2^24) whose low bits hold n + 127 once an
    # integer n (|n| < 2^22) is added to it, so its bits shifted left by 23 are 2^n
    SHIFTER = 12583039.0

    def _tanh_f32(self, x: ir.Value) -> ir.Value:
        """tanh: for |x| < 0.8, x + x^3 P(x^2) (``TANH_SMALL``); otherwise
        sign(x) (1 - 2 / (e^2z + 1)), z = |x| lowered to 10 (where tanh is 1 in
        float32). e^2z: 2z = n ln2 + 2r with n = rint(2z / ln2) by the shifter trick (one
        fused multiply-add leaves n + 127 in the low bits of k = 2z/ln2 + 1.5 2^23 + 127,
        so k << 23 is 2^n with no conversion), |r| <= ln2/4, e^2r = ``TANH_EXP``, and
        2^n e^2r + 1 in one fused step. From z = 0.8 up 2 / (e^2z + 1) < 0.34, so its
        rounding is a fraction of an ulp of tanh > 0.66. The two polynomials are one
        (``_blended_poly``, of x^2 or r): 12 multiply-adds and multiplications per
        element and a division, where the expm1(2z) / (expm1(2z) + 2) with a twice
        corrected quotient it replaces took 17 (exhaustively 1.38 ulp at worst, against
        1.61).
        Tiny x gives x, -0 gives -0; NaN propagates (the first branch)."""
        b = self.b
        f = lambda v: ir.Constant(F32, v)
        z = self.call("fabs", x)
        near = b.fcmp_unordered("<", z, f(self.TANH_SPLIT))
        zc = self._pick_min(z, f(self.TANH_ONE))
        k = self._fma(zc, f(2 * self.LOG2E), f(self.SHIFTER))
        n = b.fsub(k, f(self.SHIFTER))
        r = self._fma(b.fneg(n), f(self.LN2_LO / 2),
                      self._fma(b.fneg(n), f(self.LN2_HI / 2), zc))
        x2 = b.fmul(x, x)
        p = self._blended_poly(near, b.select(near, x2, r), self.TANH_SMALL, self.TANH_EXP)
        scale = b.bitcast(b.shl(b.bitcast(k, I32), ir.Constant(I32, 23)), F32)
        far = b.fsub(f(1.0), b.fdiv(f(2.0), self._fma(p, scale, f(1.0))))
        # the sign after the pick: x + x^3 P(x^2) is +0 at -0 (P(0) < 0)
        return self.call("copysign", b.select(near, self._fma(b.fmul(x, x2), p, x), far), x)

    def _ipow(self, x: ir.Value, y: ir.Value, ty: ir.IntType) -> ir.Value:
        """``x ** y`` by squaring, wrapping; 1 for ``y <= 0`` (``_int_pow`` handles y < 0)."""
        b = self.b
        acc_p, base_p, exp_p = (self.entry_alloca(ty) for _ in range(3))
        b.store(ir.Constant(ty, 1), acc_p)
        b.store(x, base_p)
        b.store(y, exp_p)
        head = b.append_basic_block("pow.head")
        body = b.append_basic_block("pow.body")
        done = b.append_basic_block("pow.done")
        b.branch(head)
        b.position_at_end(head)
        e = b.load(exp_p)
        b.cbranch(b.icmp_signed(">", e, ir.Constant(ty, 0)), body, done)
        b.position_at_end(body)
        odd = b.trunc(e, I1)
        acc = b.load(acc_p)
        base = b.load(base_p)
        b.store(b.select(odd, b.mul(acc, base), acc), acc_p)
        b.store(b.mul(base, base), base_p)
        b.store(b.ashr(e, ir.Constant(ty, 1)), exp_p)
        b.branch(head)
        b.position_at_end(done)
        return b.load(acc_p)

    def philox_uniform(self, op: Operation, idx: list[ir.Value]) -> ir.Value:
        """``nova.rng_uniform`` at ``idx``: the draw of its linear position."""
        return self.philox_draw(self.emit_vector_arg(op.operands[0]),
                                self.linear(idx, shape_of(op.results[0])),
                                element_of(op.results[0]))

    def philox_draw(self, key: list[ir.Value], i: ir.Value, mlir: str) -> ir.Value:
        """The uniform in [0, 1) of element type ``mlir`` ("f32", ...) at linear position ``i`` for the
        key (seed, offset): Philox4x32-10 of counter (i, offset) and key seed, as in
        nova/core/philox.py."""
        b = self.b
        seed, offset = key
        m32 = lambda v: b.trunc(v, I32)
        c = [m32(i), m32(b.lshr(i, c64(32))), m32(offset), m32(b.lshr(offset, c64(32)))]
        k0, k1 = m32(seed), m32(b.lshr(seed, c64(32)))
        for _ in range(philox.ROUNDS):
            p0 = b.mul(b.zext(c[0], I64), c64(philox.MULTIPLIERS[0]))
            p1 = b.mul(b.zext(c[2], I64), c64(philox.MULTIPLIERS[1]))
            hi0, lo0 = m32(b.lshr(p0, c64(32))), m32(p0)
            hi1, lo1 = m32(b.lshr(p1, c64(32))), m32(p1)
            c = [b.xor(b.xor(hi1, c[1]), k0), lo1, b.xor(b.xor(hi0, c[3]), k1), lo0]
            k0 = b.add(k0, ir.Constant(I32, philox.WEYL[0]))
            k1 = b.add(k1, ir.Constant(I32, philox.WEYL[1]))
        bits = philox.MANTISSA_BITS[dt.from_mlir(mlir).name]
        ty = _COMPUTE[mlir]
        if bits <= 32:
            r = b.lshr(b.zext(c[0], I64), c64(32 - bits))
        else:
            r = b.or_(b.shl(b.zext(c[0], I64), c64(bits - 32)),
                      b.lshr(b.zext(c[1], I64), c64(64 - bits)))
        return b.fmul(b.uitofp(r, ty), ir.Constant(ty, 2.0 ** -bits))

    def emit_vector_arg(self, value: SSAValue) -> list[ir.Value]:
        """The two i64 words of a ``tensor<2xi64>`` (the RNG key) as scalars."""
        return [self.emit(value, [c64(0)]), self.emit(value, [c64(1)])]



# ---------------------------------------------------------------- the op tables

def _checked_div(e: Emitter, mlir: str, x: ir.Value, y: ir.Value) -> ir.Value:
    """Integer division truncating toward zero; by zero the kernel fails (and divides by
    1: no trap). The divisor -1 divides by 1 and negates, wrapping as PyTorch does: the
    smallest integer over -1 overflows, which x86's idiv traps on (SIGFPE) and LLVM's
    sdiv leaves undefined."""
    b = e.b
    one = ir.Constant(y.type, 1)
    zero = b.icmp_signed("==", y, ir.Constant(y.type, 0))
    minus_one = b.icmp_signed("==", y, ir.Constant(y.type, -1))
    e.fail_if(zero)
    q = b.sdiv(x, b.select(b.or_(zero, minus_one), one, y))
    return b.select(minus_one, b.neg(q), q)


def _int_pow(e: Emitter, mlir: str, x: ir.Value, y: ir.Value) -> ir.Value:
    """Integer ``x ** y``; a negative ``y`` gives PyTorch's truncated ``1 / x ** -y``: 1
    for x = 1, +-1 for x = -1 (by the parity of y), 0 otherwise (x = 0 included)."""
    b = e.b
    one = ir.Constant(x.type, 1)
    p = e._ipow(x, y, x.type)
    unit = b.or_(b.icmp_signed("==", x, one), b.icmp_signed("==", x, ir.Constant(x.type, -1)))
    inverse = b.select(unit, b.select(b.trunc(y, I1), x, one), ir.Constant(x.type, 0))
    return b.select(b.icmp_signed("<", y, ir.Constant(y.type, 0)), inverse, p)


def _f32_or_libm(inline: Callable[[Emitter, ir.Value], ir.Value], name: str):
    """float32 through an inline polynomial (vectorizable); float64 through libm."""
    return lambda e, mlir, x: inline(e, x) if x.type == F32 else e.call_libm(name, x)


def _pick(pred: str):
    """Integer maximum / minimum as a compare and select."""
    return lambda e, mlir, x, y: e.b.select(e.b.icmp_signed(pred, x, y), x, y)


def _bit_instruction(name: str) -> Arith:
    """A bit operation: the same IRBuilder instruction on integers and on i1 (logical
    there)."""
    rule = lambda e, m, *xs: getattr(e.b, name)(*xs)   # noqa: E731
    return Arith(int=rule, bool=rule)


# Ops the CPU emitter evaluates its own way from the index.
Emitter.RULES = {
    nd.RngUniformOp: lambda e, op, idx: e.philox_uniform(op, idx),
    nd.CompareOp: lambda e, op, idx: e.compare(op, idx),
}

# Elementwise arithmetic: one row per op.
Emitter.ARITH = {
    nd.NegOp: Arith(float=lambda e, m, x: e.b.fneg(x), int=lambda e, m, x: e.b.neg(x)),
    nd.AbsOp: Arith(float=lambda e, m, x: e.call("fabs", x),
                    int=lambda e, m, x: e.b.select(
                        e.b.icmp_signed("<", x, ir.Constant(x.type, 0)), e.b.neg(x), x)),
    nd.ExpOp: Arith(float=_f32_or_libm(Emitter._exp_f32, "exp")),
    nd.LogOp: Arith(float=_f32_or_libm(Emitter._log_f32, "log")),
    nd.SqrtOp: Arith(float=lambda e, m, x: e.call("sqrt", x)),
    nd.RsqrtOp: Arith(float=lambda e, m, x: e.b.fdiv(ir.Constant(x.type, 1.0), e.call("sqrt", x))),
    nd.ReciprocalOp: Arith(float=lambda e, m, x: e.b.fdiv(ir.Constant(x.type, 1.0), x)),
    nd.SinOp: Arith(float=_f32_or_libm(llvm_trig.sin_f32, "sin")),
    nd.CosOp: Arith(float=_f32_or_libm(llvm_trig.cos_f32, "cos")),
    nd.TanhOp: Arith(float=_f32_or_libm(Emitter._tanh_f32, "tanh")),
    nd.ErfOp: Arith(float=_f32_or_libm(Emitter._erf_f32, "erf")),
    nd.Expm1Op: Arith(float=_f32_or_libm(Emitter._expm1_f32, "expm1")),
    nd.Log1pOp: Arith(float=_f32_or_libm(Emitter._log1p_f32, "log1p")),
    nd.FloorOp: Arith(float=lambda e, m, x: e.call("floor", x)),
    nd.CeilOp: Arith(float=lambda e, m, x: e.call("ceil", x)),
    nd.RoundOp: Arith(float=lambda e, m, x: e.call("roundeven", x)),
    nd.TruncOp: Arith(float=lambda e, m, x: e.call("trunc", x)),
    nd.AddOp: Arith(float=lambda e, m, x, y: e.b.fadd(x, y), int=lambda e, m, x, y: e.b.add(x, y),
                    bool=lambda e, m, x, y: e.b.or_(x, y)),
    nd.SubOp: Arith(float=lambda e, m, x, y: e.b.fsub(x, y), int=lambda e, m, x, y: e.b.sub(x, y)),
    nd.MulOp: Arith(float=lambda e, m, x, y: e.b.fmul(x, y), int=lambda e, m, x, y: e.b.mul(x, y),
                    bool=lambda e, m, x, y: e.b.and_(x, y)),
    nd.DivOp: Arith(float=lambda e, m, x, y: e.b.fdiv(x, y), int=_checked_div),
    # llvm.maximum/minimum/pow propagate NaN, as the interpreter does
    nd.MaximumOp: Arith(float=lambda e, m, x, y: e.call("maximum", x, y), int=_pick(">"),
                        bool=lambda e, m, x, y: e.b.or_(x, y)),
    nd.MinimumOp: Arith(float=lambda e, m, x, y: e.call("minimum", x, y), int=_pick("<"),
                        bool=lambda e, m, x, y: e.b.and_(x, y)),
    nd.PowOp: Arith(float=lambda e, m, x, y: e.call("pow", x, y),
                    int=_int_pow),
    nd.RemOp: Arith(float=lambda e, m, x, y: e.b.frem(x, y)),     # (libm's fmod: exact)
    nd.Atan2Op: Arith(float=lambda e, m, y, x: e.call_libm("atan2", y, x)),
    nd.AndOp: _bit_instruction("and_"),
    nd.OrOp: _bit_instruction("or_"),
    nd.XorOp: _bit_instruction("xor"),
    nd.NotOp: _bit_instruction("not_"),
}
