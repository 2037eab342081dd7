"""The ``scan`` kernel body (``nova.cumsum``, ``nova.cumprod``): one pass per row.

Each thread takes whole rows (``[start, end)`` of the plan's ``(rows, N)`` loops) and
walks each row once, in order or from its end (``reverse``), carrying the running
value in a register: the element (fused producers included) is computed, combined
into the running value, and the prefix stored, rounded to the result type. Float
scans carry float64, so a float32 prefix is the float64 prefix rounded once (what
PyTorch's CPU kernels compute); integer scans carry their own type and wrap. The
dependence from one element to the next is the point of a scan, so the row loop is
not vectorized; rows run in parallel.
"""
from __future__ import annotations

from llvmlite import ir

from nova.compiler import dialect as nd
from nova.compiler.codegen.values import element_of
from nova.compiler.lowering.plan import contraction
from nova.compiler.targets.cpu.llvm_emit import _COMPUTE, Emitter, c64


def scan(e: Emitter) -> None:
    """The ``scan`` strategy (module docstring)."""
    b = e.b
    op = contraction(e.fusion)
    x = op.operands[0]
    reverse = bool(op.reverse.value.data)
    is_sum = isinstance(op, nd.CumsumOp)
    in_mlir = element_of(x)
    out_mlir = element_of(op.results[0])
    acc_mlir = "f64" if out_mlir in ("f16", "bf16", "f32", "f64") else out_mlir
    acc_ty = _COMPUTE[acc_mlir]
    x_shape = tuple(x.type.get_shape())
    n = x_shape[-1]
    if n == 0:
        return
    lead = x_shape[:-1]
    acc = e.entry_alloca(acc_ty)
    identity = e.const(0 if is_sum else 1, acc_mlir)
    assert e.root is op.results[0], "scan kernels have no epilogue (fusion never adds one)"

    def per_row(r: ir.Value) -> None:
        pre = e.delinearize(r, lead) if lead else []
        base = b.mul(r, c64(n))
        b.store(identity, acc)

        def step(k: ir.Value) -> None:
            j = b.sub(c64(n - 1), k) if reverse else k
            e.cache = {}
            v = e.emit(x, pre + [j])
            v = e.cast(v, in_mlir, acc_mlir) if v.type != acc_ty else v
            old = b.load(acc)
            if isinstance(acc_ty, ir.IntType):
                new = b.add(old, v) if is_sum else b.mul(old, v)
            else:
                new = b.fadd(old, v) if is_sum else b.fmul(old, v)
            b.store(new, acc)
            out = e.cast(new, acc_mlir, out_mlir) if acc_mlir != out_mlir else new
            e.store(out, e.out_ptr, b.add(base, j), out_mlir)
        e.loops.range(c64(0), c64(n), step, "scan")

    e.loops.range(e.fn.args[1], e.fn.args[2], per_row, "row")


__all__ = ["scan"]
