"""Instructions per 16 elements in the vector loop of each unary float32 op's kernel, as
this host's LLVM emits it: the cost of the op's math, free of the timing noise of a
shared machine (``bench_ops --only-unary`` times the same kernels).

Run: ``python tools/vector_loop_cost.py [op ...]`` (the ops of ``bench_ops``' unary
table by default; x86-64 hosts: it reads their assembly). Per op: the elements one
iteration of the main vector loop handles, its instructions per 16 elements, and how
many of them touch the stack (spills and reloads) or divide. The main loop is the
innermost loop with the largest element step; its rarely taken branches (sin and cos's
huge-argument path) lie outside it.

``--cpu NAME --features LIST`` compiles for another x86 CPU instead of the host, e.g.
``--cpu znver3 --features +avx2,+fma,+avx,+f16c`` for an AVX2 machine (without
``+avx512f`` the emitter's AVX-512-only code, ``Emitter.vector_ldexp``, is left out;
the kernels are still scheduled for the host's vector width).

``--time`` adds each kernel's time per 16 elements on an array that stays in L2 (the
least of 30 timings, ``least_times``): the math's throughput on this core, which the
count misses where instructions compete for different execution ports (on Zen 4 the
float32 math is bound by its multiply-adds; blends and integer operations beside them
cost little). Compare kernels within one run: on the 2-core VM a whole run's speed
drifts by up to a quarter from one run to the next. It runs the code here, so ``--cpu``
must name code this host can run.
"""
from __future__ import annotations

import argparse
import ctypes
import re
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np

import nova as nv
import nova.nn.functional as F
from nova.runtime.compile_worker import optimize, target_machine

OPS = {
    "add": lambda t: t + 1.0, "exp": nv.exp, "log": nv.log, "log1p": nv.log1p,
    "expm1": nv.expm1, "tanh": nv.tanh, "erf": nv.erf, "sigmoid": nv.sigmoid,
    "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "sin": nv.sin, "cos": nv.cos,
}
_LABEL = re.compile(r"^(\.LBB\d+_\d+):")
_JUMP = re.compile(r"^\s+j\w+\s+(\.LBB\d+_\d+)")
_STEP = re.compile(r"^\s+(?:addq\s+\$(\d+)|subq\s+\$-(\d+)), %r(?!sp)")


def kernel_module(fn, cpu: str | None = None, features: str | None = None
                  ) -> tuple[llvm.TargetMachine, llvm.ModuleRef]:
    """The optimized module of the kernel computing ``fn`` on a million float32, and the
    target machine it is for (the host, or ``cpu`` with ``features``)."""
    with tempfile.TemporaryDirectory() as tmp:
        nv.debug.dump(tmp, fn(nv.from_numpy(np.ones(1 << 20, np.float32))))
        text = (Path(tmp) / "step.ll").read_text()
    tm = target_machine(cpu or llvm.get_host_cpu_name(),
                        features if features is not None
                        else llvm.get_host_cpu_features().flatten())
    module = llvm.parse_assembly(text)
    optimize(tm, module)
    return tm, module


def kernel_assembly(fn, cpu: str | None = None, features: str | None = None) -> list[str]:
    """The assembly of the kernel computing ``fn`` (``kernel_module``)."""
    tm, module = kernel_module(fn, cpu, features)
    return tm.emit_assembly(module).splitlines()


def kernel_timer(fn, cpu: str | None = None, features: str | None = None,
                 elements: int = 1 << 14) -> Callable[[], float]:
    """The kernel computing ``fn`` (``kernel_module``) compiled here, apart from Nova's
    runtime (one thread, no dispatch), on ``elements`` float32 in [-3, 3] (64 KiB in
    and out at the default: in L2), as a function that calls it 20 times and returns
    the nanoseconds per 16 elements."""
    tm, module = kernel_module(fn, cpu, features)
    engine = llvm.create_mcjit_compiler(module, tm)
    engine.finalize_object()
    (name,) = [f.name for f in module.functions
               if not f.is_declaration and f.linkage == llvm.Linkage.external]
    kernel = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int64,
                              ctypes.c_int64)(engine.get_function_address(name))
    x = np.random.default_rng(0).uniform(-3, 3, elements).astype(np.float32)
    out = np.empty_like(x)
    bufs = (ctypes.c_void_p * 2)(x.ctypes.data, out.ctypes.data)

    def twenty_calls() -> float:
        start = time.perf_counter()
        for _ in range(20):
            kernel(bufs, 0, elements)
        return (time.perf_counter() - start) / 20 / elements * 16 * 1e9
    twenty_calls.keep = (engine, x, out)          # alive as long as the timer
    return twenty_calls


def least_times(timers: dict[str, Callable[[], float]], rounds: int = 30) -> dict[str, float]:
    """The least of ``rounds`` timings of each timer (``kernel_timer``), the timers taken
    in turn round by round after one warm-up round, so a change of clock or of the
    machine's other work falls on all of them alike. Other work on a shared machine
    only adds to a timing, so the least is the steadiest."""
    for timer in timers.values():
        timer()
    best = {name: float("inf") for name in timers}
    for _ in range(rounds):
        for name, timer in timers.items():
            best[name] = min(best[name], timer())
    return best


def main_loop(asm: list[str]) -> tuple[int, list[str]]:
    """(elements per iteration, instructions) of the loop with the largest step."""
    labels = {m.group(1): i for i, line in enumerate(asm) if (m := _LABEL.match(line))}
    loops = []
    for i, line in enumerate(asm):
        m = _JUMP.match(line)
        if m and labels.get(m.group(1), i) < i:
            body = [a for a in asm[labels[m.group(1)]:i + 1]
                    if a.startswith("\t") and not a.startswith("\t.")]
            steps = [int(s.group(1) or s.group(2)) for a in body if (s := _STEP.match(a))]
            if steps:
                loops.append((max(steps), -len(body), body))
    step, _, body = max(loops)
    return step, body


def main(names: list[str], cpu: str | None = None, features: str | None = None,
         timed: bool = False) -> None:
    from nova.compiler.targets.cpu.llvm_emit import Emitter
    warnings.simplefilter("ignore")
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    print(f"{'op':10s} {'elements/iter':>13s} {'instr/16':>9s} {'stack/16':>9s} {'div/16':>7s}"
          + (f" {'ns/16':>7s}" if timed else ""))
    host_ldexp = Emitter.VECTOR_LDEXP
    if features is not None and "+avx512f" not in features.split(","):
        Emitter.VECTOR_LDEXP = False
    try:
        rows = {}
        for name in names:
            step, body = main_loop(kernel_assembly(OPS[name], cpu, features))
            per16 = 16 / step
            stack = sum("rsp" in a for a in body)
            divides = sum("div" in a.split()[0] for a in body)
            rows[name] = (f"{name:10s} {step:13d} {len(body) * per16:9.1f} "
                          f"{stack * per16:9.1f} {divides * per16:7.1f}")
        if timed:
            ns = least_times({name: kernel_timer(OPS[name], cpu, features) for name in names})
            rows = {name: f"{row} {ns[name]:7.2f}" for name, row in rows.items()}
    finally:
        Emitter.VECTOR_LDEXP = host_ldexp
    print("\n".join(rows.values()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ops", nargs="*", help=f"of {', '.join(OPS)} (default: all)")
    parser.add_argument("--cpu", help="LLVM CPU name (default: the host's)")
    parser.add_argument("--features", help="LLVM feature list (default: the host's)")
    parser.add_argument("--time", action="store_true",
                        help="also time each kernel on an L2-resident array (ns per 16)")
    args = parser.parse_args()
    unknown = [op for op in args.ops if op not in OPS]
    if unknown:
        parser.error(f"unknown op {unknown[0]!r}: choose from {', '.join(OPS)}")
    main(args.ops or list(OPS), args.cpu, args.features, args.time)
