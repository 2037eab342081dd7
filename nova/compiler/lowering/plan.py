"""Kernel plans: the loop structure of each fused kernel, made explicit.

A plan fixes what the code generator emits: the iteration space, the loop order, which
dimension is split across threads (``parallel_dim``, always outermost), the loop that
the vectorizer should see innermost, the reduction strategy, and the buffers the kernel
reads and writes. Plans are plain data and print in ``nv.debug.dump_ir(stage="fused")``.

A plan is built target-neutral (``plan_kernel``: what the fused IR and its operands'
layouts decide) and then scheduled by a target (``nova.compiler.targets``), which
attaches what its device decides and renames the plan after it: the CPU target adds the
``unroll`` counts, the ``tiled`` GEMM blocking with ``shared_b`` and the memory/compute
``bound`` from the host's ``CpuSpec``; the CUDA target keeps the neutral plan (its launch
geometry comes from the ``CudaSpec`` at emission). Only the CPU's strategies below carry
``unroll``, ``tiled`` and ``shared_b``.

Strategies:
- ``elementwise``: loops over the output shape in row-major order; parallel over dim 0;
  the innermost loop is interleaved ``unroll`` times (``configurator.elementwise_unroll``).
- ``reduce`` with ``row`` strategy (reduced axes are a suffix of the input): one register
  accumulator per output element, epilogue applied in place; parallel over dim 0; the
  reduction loop is interleaved ``unroll`` times (independent partial accumulators).
- ``reduce`` with ``column`` strategy (a kept axis is innermost, e.g. a bias gradient
  summing over the batch): accumulate into a scratch row, vectorized over the kept axis;
  parallel over the first kept axis.
- ``rows``: per row, one pass per reduction (each reading the earlier ones as row
  scalars), then a pass writing the output; parallel over dim 0.
- ``matmul`` with ``tiled`` strategy (float32): BLIS-blocked, packed A and B, a register
  tile per micro-kernel; parallel over MR-row (split "m") or NR-column (split "n")
  micro-panels of all batches. Blocking and its derivation: ``configurator.gemm_tile``.
  With ``shared_b`` (an unbatched product split "m", CPU only) the threads pack one B
  panel together: the scratch buffer holds the team header (``targets.cpu.pool``) and two
  alternating KC x NC panels.
- ``matmul`` otherwise: one output row at a time, parallel over (batch, M). ``ikj`` order (a row of
  B is contiguous in j) accumulates an N-wide row; ``dot`` order (B is transposed, so
  contiguous in k) takes dot products. The epilogue runs over the finished row.
- ``scatter``: copy, then apply the updates serially in index order (duplicates must not
  race, and the last write of ``nova.scatter`` must be the last in order).
- ``attention`` / ``attention_grad`` (``nova.attention`` and its gradient): parallel over
  the batch index (all leading dims); per batch, blocks of BR queries against blocks of
  BC keys (on the CPU ``blocks``, from its configurator's ``attention_blocks``; a GPU
  block per query or key block, from ``targets.cuda.configurator.attention_config``),
  the scores only ever one block (``targets.cpu.llvm_attention``,
  ``targets.cuda.attention``). ``loops`` = (batch, L, S, E).
- ``sort`` (``nova.argsort``): parallel over rows (all leading dims), a stable merge sort
  of each row by one CPU thread (a GPU block). ``loops`` = (rows, N). The N keys and N
  spare indices a row needs are per thread (CPU: heap buffers per call) or per block
  (CUDA: the scratch the CUDA target sizes from its grid), never per row.
- ``scan`` (``nova.cumsum``, ``nova.cumprod``): parallel over rows (all leading dims),
  each row one sequential pass carrying the running value (float64 for floats), in
  order or (``reverse``) from the end. ``loops`` = (rows, N).
"""
from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass, field, replace

from xdsl.dialects import func
from xdsl.dialects.builtin import (DenseArrayBase, FloatAttr, IntegerAttr, ModuleOp,
                                   StringAttr, UnitAttr)
from xdsl.ir import Attribute, Block, Operation, SSAValue, TypeAttribute

from nova.compiler import dialect as nd
from nova.compiler.targets import Target, resolve
from nova.core import dtypes as dt

FORMAT_VERSION = 15  # bump when generated code (or the naming of kernels) changes meaning

# The team header that starts a ``shared_b`` GEMM's scratch buffer: i64 words, the
# barrier counter on a 64-byte line of its own (protocol: ``nova.compiler.targets.cpu.pool``).
TEAM_MEMBERS, TEAM_ARRIVED, TEAM_BARRIER = 0, 1, 8
TEAM_WORDS = 16
TEAM_CLOSED = 1 << 32      # in TEAM_ARRIVED, over the count of chunks that joined
TEAM_JOIN_SPINS = 4096     # pause steps a member waits for the others before closing


@dataclass(frozen=True)
class Schedule:
    loops: tuple[int, ...]          # iteration space of the main loop nest
    parallel_dim: int | None        # split across threads (None: one thread)
    strategy: str                   # elementwise | row | column | tiled | ikj | dot |
                                    # scatter | attention | attention_grad | sort |
                                    # collective
    reduced: tuple[int, ...] = ()   # reduced dims of ``loops`` (reductions)
    vector_dim: int | None = None   # innermost, unit-stride loop given to the vectorizer
    tile: tuple[int, int, int] | None = None   # matmul (MR, NR, NC), ``tiled`` only
    kc: int = 0                     # ``tiled``: K block (the B micro-panel KC x NR in L1)
    mc: int = 0                     # ``tiled``: M block (the packed A block MC x KC in L2)
    split: str = ""                 # ``tiled``: "m" or "n", what the parallel dim splits
    shared_b: bool = False          # ``tiled``: the threads pack one B panel together
    b_in_place: bool = False        # ``tiled``: B's rows are read where they are, unpacked
    unroll: int = 0                 # interleave count of the vectorized innermost loop
                                    # (0: LLVM's own choice)
    vector_width: int = 0           # lanes of that loop (0: LLVM's own choice)
    bound: str = ""                 # "memory" or "compute", by arithmetic intensity
    blocks: tuple[int, int] = ()    # attention: (BR queries, BC keys) per score block
    derivation: str = ""            # how the configurator chose the tile
    flat: bool = False              # ``elementwise``: one loop over the output's elements
                                    # in linear order, the code the same for every size
                                    # (``lowering.flat``; CPU only)

    @property
    def parallel_extent(self) -> int:
        return 1 if self.parallel_dim is None else self.loops[self.parallel_dim]

    def code_identity(self) -> Schedule:
        """What of the schedule a kernel's code depends on, as its name and cache entry
        record it: everything, except a flat kernel's element count, which reaches its
        code only as the launch range."""
        return replace(self, loops=(-1,)) if self.flat else self


@dataclass
class KernelPlan:
    name: str
    kind: str
    fusion: nd.FusionOp
    schedule: Schedule
    arg_types: list[tuple[tuple[int, ...], dt.DType]]   # inputs, then the output
    scratch: tuple[tuple[int, ...], dt.DType] | None = None
    # The fusion's structure (``body_key``), which the name digests: built once per
    # kernel, however often a target renames the plan.
    body: str = field(default="", repr=False, compare=False)

    @property
    def out(self) -> tuple[tuple[int, ...], dt.DType]:
        return self.arg_types[-1]

    def with_schedule(self, schedule: Schedule,
                      scratch: tuple[tuple[int, ...], dt.DType] | None) -> KernelPlan:
        """This plan with a target's schedule and scratch, named after them."""
        return replace(self, name=kernel_name(schedule, self.body or body_key(self.fusion)),
                       schedule=schedule, scratch=scratch)

    def describe(self) -> str:
        s = self.schedule
        what = f"{self.kind}/{s.strategy}"
        if self.kind == "collective":           # which half of the pair, and how
            op = contraction(self.fusion)
            what += f" {op.name.removeprefix('nova.')}({op.reduction.data})"
        return (f"{self.name}: {what} loops={list(s.loops)} "
                f"parallel_dim={s.parallel_dim} (extent {s.parallel_extent}) "
                f"reduced={list(s.reduced)} vector_dim={s.vector_dim}"
                + (f" {s.bound}-bound" if s.bound else "")
                + (" flat" if s.flat else "")
                + (f" unroll={s.unroll}" if s.unroll else "")
                + (f" vector_width={s.vector_width}" if s.vector_width else "")
                + (f" tile={s.tile[0]}x{s.tile[1]} KC={s.kc} MC={s.mc} NC={s.tile[2]}"
                   f" split={s.split}" + (" shared_b" if s.shared_b else "")
                   + f" [{s.derivation}]" if s.tile and not s.blocks else "")
                + (f" blocks={s.blocks[0]}x{s.blocks[1]} tile={s.tile[0]}x{s.tile[1]}"
                   f" [{s.derivation}]" if s.blocks else ""))


def _shape(v: SSAValue) -> tuple[int, ...]:
    return tuple(v.type.get_shape())


def _dtype(v: SSAValue) -> dt.DType:
    return dt.from_mlir(nd.element_name(v.type.element_type))


def accumulator_dtype(red: Operation) -> dt.DType:
    """What a reduction accumulates in: float sums in float64 (close to numpy's pairwise
    summation), float maxima in float32/float64 compute precision, integers as is."""
    out = _dtype(red.results[0])
    if out.is_floating_point:
        if isinstance(red, nd.ReduceSumOp) or out == dt.float64:
            return dt.float64
        return dt.float32
    return out


def reductions(fusion: nd.FusionOp) -> list[Operation]:
    """The reductions of a ``rows`` kernel, in execution order."""
    return [op for op in fusion.body.block.ops if nd.kernel_root_kind(op) == "reduce"]


def contraction(fusion: nd.FusionOp) -> Operation | None:
    """The op a kernel is built around (a ``KernelRoot``: reduction, matmul, scatter),
    None in an elementwise kernel."""
    for op in fusion.body.block.ops:
        if nd.kernel_root_kind(op) is not None:
            return op
    return None


def unit_stride_in(value: SSAValue, dim: int) -> bool | None:
    """Whether reading ``value`` along ``dim`` walks a buffer with unit stride, following
    movement ops back to a block argument (None when it is computed, not a view)."""
    viewed = nd.viewed_dim(value, dim)
    if viewed is None:
        return False
    source, dim = viewed
    if isinstance(source.owner, Operation):
        return None
    return dim == len(_shape(source)) - 1


def _structure(fusion: nd.FusionOp) -> tuple[Schedule, tuple | None]:
    """The kernel's loop structure and scratch buffer, the same for every target: what
    its fused IR and its operands' layouts decide (iteration space, strategy, reduced
    axes, the parallel and vector dims), none of what a device's spec decides."""
    kind = fusion.kind.data
    out_shape = _shape(fusion.outputs[0])
    op = contraction(fusion)
    if kind == "rows":
        red = reductions(fusion)[0]
        x_shape = _shape(red.operands[0])
        axes = tuple(red.axes.get_values())
        return Schedule(x_shape, 0 if len(axes) < len(x_shape) else None, "rows", axes,
                        vector_dim=len(x_shape) - 1), None
    if kind == "attention":
        q, k = _shape(op.operands[0]), _shape(op.operands[1])
        batch = 1
        for d in q[:-2]:
            batch *= d
        strategy = "attention" if isinstance(op, nd.AttentionOp) else "attention_grad"
        return Schedule((batch, q[-2], k[-2], q[-1]), 0, strategy, vector_dim=3), None
    if kind == "collective":     # one call of the communication library, one thread
        return Schedule((_numel(out_shape),), None, "collective"), None
    if kind in ("sort", "scan"):
        x_shape = _shape(op.operands[0])
        rows = _numel(x_shape[:-1])
        return Schedule((rows, x_shape[-1]), 0, kind), None
    if kind == "elementwise" or op is None:
        return Schedule(out_shape, 0 if out_shape else None, "elementwise",
                        vector_dim=len(out_shape) - 1 if out_shape else None), None
    if kind == "reduce":
        x_shape = _shape(op.operands[0])
        axes = tuple(op.axes.get_values())
        kept = [d for d in range(len(x_shape)) if d not in axes]
        scratch_dtype = accumulator_dtype(op)
        if not kept or axes == tuple(range(len(kept), len(x_shape))):
            return Schedule(x_shape, 0 if kept else None, "row", axes,
                            vector_dim=len(x_shape) - 1), None
        return (Schedule(x_shape, kept[0], "column", axes, vector_dim=len(x_shape) - 1),
                (_shape(op.results[0]), scratch_dtype))
    if kind == "matmul":
        rows, n, k = gemm_extents(op)
        b = op.operands[1]
        dot = unit_stride_in(b, len(_shape(b)) - 2) is True and \
            unit_stride_in(b, len(_shape(b)) - 1) is not True
        loops = (rows, n, k)     # (batch*M, N, K)
        return Schedule(loops, 0, "dot" if dot else "ikj", vector_dim=2 if dot else 1), None
    return Schedule(out_shape, None, "scatter"), None


def gemm_extents(matmul: Operation) -> tuple[int, int, int]:
    """(batch x M, N, K) of a ``nova.matmul``."""
    a_shape = _shape(matmul.operands[0])
    rows = 1
    for s in a_shape[:-1]:
        rows *= s
    return rows, _shape(matmul.operands[1])[-1], a_shape[-1]


def cost(fusion: nd.FusionOp) -> tuple[float, float]:
    """(FLOPs, bytes moved): each op counts one FLOP per element (a matmul 2 M N K);
    bytes are the kernel's inputs read once and its output written once."""
    flops = 0.0
    for op in fusion.body.block.ops:
        if isinstance(op, (nd.AttentionOp, nd.AttentionGradOp)):
            q, k, v = (_shape(x) for x in op.operands[:3])
            products = 2 if isinstance(op, nd.AttentionOp) else 5
            flops += products * _numel(q[:-2]) * q[-2] * k[-2] * (q[-1] + v[-1])
        elif nd.kernel_root_kind(op) == "matmul":
            a = _shape(op.operands[0])
            flops += 2.0 * _numel(a) * _shape(op.operands[1])[-1]
        elif op.results:
            flops += _numel(op.results[0])
    nbytes = sum(_numel(v) * _dtype(v).itemsize for v in (*fusion.inputs, fusion.outputs[0]))
    return flops, float(nbytes)


def _numel(v: SSAValue | tuple) -> int:
    shape = v if isinstance(v, tuple) else _shape(v)
    n = 1
    for d in shape:
        n *= d
    return n


def kernel_name(schedule: Schedule, body: str) -> str:
    """A kernel's name: a digest of the plan format, the schedule and the fused body's
    structure (``body_key``), so kernels share a name when they have the same code
    (the CPU kernel cache and the CUDA sources are keyed by it)."""
    digest = hashlib.sha256(
        f"v{FORMAT_VERSION}|{schedule.code_identity()}|{body}".encode()).hexdigest()
    return f"nova_k_{digest[:20]}"


# Attributes whose printed text is a pure function of their value under ``==`` (no
# floats, whose -0.0 == 0.0), printed once per process: a step's kernels share a few
# hundred types and index arrays. Bounded; cleared when full.
_CACHEABLE = (TypeAttribute, IntegerAttr, StringAttr, UnitAttr, DenseArrayBase)
_TEXT: dict[Attribute, str] = {}
_TEXT_LIMIT = 20_000


def _attr_text(attr: Attribute) -> str:
    if isinstance(attr, FloatAttr):      # exact: the value's hex digits
        return f"float {attr.value.data.hex()} : {_attr_text(attr.type)}"
    if not isinstance(attr, _CACHEABLE):
        return str(attr)
    text = _TEXT.get(attr)
    if text is None:
        if len(_TEXT) >= _TEXT_LIMIT:
            _TEXT.clear()
        text = _TEXT[attr] = str(attr)
    return text


def _dataflow_order(b: Block) -> list[Operation]:
    """The ops of ``b`` in a canonical order: depth first from the terminator's
    operands, each op after its operands (taken in operand order), then any op nothing
    reaches in block order. Regions that compute the same graph in another op order
    (fusion clones shared constants in wherever it meets them) list the same."""
    order: list[Operation] = []
    placed: set[Operation] = set()
    stack: list[tuple[Operation, int]] = [(b.last_op, 0)] if b.last_op is not None else []
    while stack:
        op, i = stack.pop()
        if op in placed:
            continue
        operands = op.operands
        while i < len(operands):
            owner = operands[i].owner
            i += 1
            if isinstance(owner, Operation) and owner.parent is b and owner not in placed:
                stack += [(op, i), (owner, 0)]
                break
        else:
            placed.add(op)
            order.append(op)
    terminator = order.pop() if order else None
    order += [op for op in b.ops if op not in placed]
    return order + ([terminator] if terminator is not None else [])


def body_key(fusion: nd.FusionOp, symbolic: Collection[SSAValue] = (),
             aliases: Collection[Operation] = ()) -> str:
    """The structure of a kernel as text: its kind, and per op of its region (in
    ``_dataflow_order``) the op's name, its operands (numbered in that order: block
    arguments, then results), its result types, properties and attributes, nested
    regions in braces. Equal keys mean the same computation, so the same code; it is
    what ``str(fusion)`` would say, without the printer (printing a GPT step's ~400
    kernels took ~1 s of a cold step) and without depending on the op order.

    For a flat kernel's key (``lowering.flat``, which drops reshapes and makes the
    values shaped like the output 1-D): the types of the values in ``symbolic`` print
    their shape as ``?``, and an op in ``aliases`` prints nothing, its result standing
    for its operand."""
    numbers: dict[SSAValue, int] = {}
    count = 0
    parts = [fusion.kind.data]

    def number(v: SSAValue) -> None:
        nonlocal count
        numbers[v] = count
        count += 1

    def type_text(v: SSAValue) -> str:
        if v in symbolic:
            return f"tensor<?x{_attr_text(v.type.element_type)}>"
        return _attr_text(v.type)

    def block(b: Block) -> None:
        parts.append("{")
        for a in b.args:
            number(a)
            parts.append(type_text(a))
        for op in _dataflow_order(b):
            if op in aliases:
                numbers[op.results[0]] = numbers[op.operands[0]]
                continue
            parts.append(f"{op.name}({','.join(str(numbers[o]) for o in op.operands)})")
            for r in op.results:
                number(r)
                parts.append(type_text(r))
            parts.extend(f"{k}={_attr_text(v)}" for k, v in sorted(op.properties.items()))
            parts.extend(f"@{k}={_attr_text(v)}" for k, v in sorted(op.attributes.items()))
            for region in op.regions:
                for inner in region.blocks:
                    block(inner)
        parts.append("}")
    for inner in fusion.body.blocks:
        block(inner)
    return "\n".join(parts)


def plan_kernel(fusion: nd.FusionOp) -> KernelPlan:
    """The target-neutral plan of one ``nova.fusion`` kernel: its loop structure, operand
    and result types, and scratch buffer; a target attaches its own schedule
    (``Target.schedule``)."""
    schedule, scratch = _structure(fusion)
    args = [(_shape(v), _dtype(v)) for v in fusion.inputs] + [
        (_shape(fusion.outputs[0]), _dtype(fusion.outputs[0]))]
    body = body_key(fusion)
    return KernelPlan(kernel_name(schedule, body), fusion.kind.data, fusion, schedule,
                      args, scratch, body)


def plan_kernels(module: ModuleOp, target: Target | str = "cpu") -> list[KernelPlan]:
    """A plan per ``nova.fusion`` op of the fused step function, in execution order,
    scheduled by ``target`` (a ``Target`` or its name: "cpu" or "cuda")."""
    target = resolve(target, "plan_kernels")
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    return [target.schedule(plan_kernel(op)) for op in fn.body.block.ops
            if isinstance(op, nd.FusionOp)]
