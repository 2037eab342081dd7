"""The ``mlir`` engine: a step lowered to upstream linalg on tensors
(``nova.compiler.linalg``) and compiled and run by upstream MLIR 22 (its Python
bindings: the ``mlir`` extra) -- a reference engine on an independent compiler.

``nv.set_engine("mlir")`` realizes CPU steps with it. The pipeline bufferizes the
function (arguments read-only, results written into caller-allocated buffers),
lowers linalg to loops and everything to LLVM, and the bindings' ``ExecutionEngine``
JITs it; a run passes each buffer as a memref descriptor. It is slow to compile and
unvectorized: it is there to check Nova's own code generation against, and as an
example of lowering the dialect to upstream MLIR.

A run-time check that failed (an index out of range, an integer division by zero; the
step's last result) makes the run fall back to the interpreter, which raises the
precise error Nova's other engines raise.
"""
from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from nova.compiler import dialect as nd
from nova.compiler.linalg import to_linalg
from nova.core import dtypes as dt

INSTALL = 'pip install -e ".[mlir]"'

# The prototype's pipeline (issue #26): elementwise fusion on tensors, bufferization with
# results as out-parameters, linalg to loops, then everything to LLVM. Integer powers
# become functions; libm takes the functions it has (math-to-llvm would write expm1 as
# exp(x) - 1 and log1p as log(1 + x), losing tiny arguments), LLVM intrinsics the rest
# (no math.rsqrt is emitted: libm has no rsqrtf). The results are copied into the
# out-parameters: ``hoist-static-allocs`` (writing into them directly) segfaults in
# upstream MLIR 22 when bufferization returns one buffer as two results (a step whose
# two outputs fused into one value, ``tests/runtime/test_mlir_engine.py``).
PIPELINE = ("builtin.module(func.func(linalg-fuse-elementwise-ops),"
            "one-shot-bufferize{bufferize-function-boundaries "
            "function-boundary-type-conversion=identity-layout-map},"
            "buffer-results-to-out-params{modify-public-functions},"
            "buffer-deallocation-pipeline,convert-bufferization-to-memref,"
            "func.func(convert-linalg-to-loops),convert-scf-to-cf,expand-strided-metadata,"
            "lower-affine,convert-math-to-funcs,convert-math-to-libm,convert-math-to-llvm,"
            "convert-to-llvm,reconcile-unrealized-casts)")

# LLVM's level for the JIT: at 2 the tiny GPT's training step took ~18 s to compile,
# at 0 ~1 s (its run is slower, which a reference engine can afford).
OPT_LEVEL = 0

_descriptor_types: dict[int, type] = {}      # rank -> ctypes memref descriptor struct
_descriptor_lock = threading.Lock()


def unavailable_reason() -> str | None:
    """Why the engine cannot run here (None when it can)."""
    try:
        import mlir.execution_engine  # noqa: F401
        import mlir.ir  # noqa: F401  (its import loads libLLVM: the check that matters)
    except ImportError as e:
        return f"upstream MLIR's Python bindings are not installed ({e}); {INSTALL}"
    return None


def _descriptor_type(rank: int) -> type:
    """MLIR's ranked memref descriptor for ``rank`` (made once per rank: the bindings'
    own helper makes a new ctypes class on every call, which is never freed)."""
    with _descriptor_lock:
        cls = _descriptor_types.get(rank)
        if cls is None:
            fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p),
                      ("offset", ctypes.c_longlong)]
            if rank:
                fields += [("sizes", ctypes.c_longlong * rank),
                           ("strides", ctypes.c_longlong * rank)]
            cls = type(f"MemRef{rank}D", (ctypes.Structure,), {"_fields_": fields})
            _descriptor_types[rank] = cls
        return cls


def _descriptor(a: np.ndarray) -> Any:
    d = _descriptor_type(a.ndim)()
    d.allocated = d.aligned = a.ctypes.data
    d.offset = 0
    if a.ndim:
        d.sizes[:] = a.shape
        d.strides[:] = [s // a.itemsize if a.itemsize else 0 for s in a.strides]
    return d


def _storage(np_dtype: np.dtype) -> np.dtype:
    """How a buffer is passed: booleans as int8 (the same bytes)."""
    return np.dtype(np.int8) if np_dtype == np.bool_ else np_dtype


class MlirProgram:
    """A compiled step: ``program(buffers) -> outputs`` (host arrays)."""

    def __init__(self, module: ModuleOp):
        why = unavailable_reason()
        if why is not None:
            raise RuntimeError(f"mlir engine: {why}")
        import mlir.execution_engine as ee
        import mlir.ir as ir
        import mlir.passmanager as pm
        self.module = module
        self.function = next(op for op in module.ops if isinstance(op, func.FuncOp))
        self.text = to_linalg(module)
        self.results = [(nd.shape_of(v), dt.from_mlir(nd.element_name(v.type.element_type)).np)
                        for v in self.function.body.block.last_op.operands]
        self._context = ir.Context()
        with self._context:
            try:
                parsed = ir.Module.parse(self.text)
                pm.PassManager.parse(PIPELINE).run(parsed.operation)
            except Exception as e:       # the bindings raise their own error types
                raise RuntimeError(f"mlir engine: upstream MLIR rejected the step: {e}") from e
            self._engine = ee.ExecutionEngine(parsed, opt_level=OPT_LEVEL)
        self._interpreted = None
        self._lock = threading.Lock()

    def __call__(self, buffers: Sequence[np.ndarray]) -> list[np.ndarray]:
        args = [np.ascontiguousarray(b).view(_storage(b.dtype)) for b in buffers]
        outs = [np.empty(shape, _storage(np.dtype(d))) for shape, d in self.results]
        flag = np.zeros((), np.int8)
        descriptors = [_descriptor(a) for a in args + outs + [flag]]
        pointers = [ctypes.pointer(ctypes.pointer(d)) for d in descriptors]
        with self._lock:
            self._engine.invoke("step", *pointers)
        if flag:
            return self._interpret(buffers)
        return [o.view(np.bool_) if np.dtype(d) == np.bool_ else o
                for o, (_, d) in zip(outs, self.results)]

    def _interpret(self, buffers: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The step in the interpreter, which raises the error the check found."""
        from nova.runtime.interpreter import compile_function
        if self._interpreted is None:
            self._interpreted = compile_function(self.function)
        out = self._interpreted(list(buffers))
        raise RuntimeError("mlir engine: a run-time check failed but the interpreter "
                           f"computed the step ({len(out)} results): a lowering's check is wrong")
