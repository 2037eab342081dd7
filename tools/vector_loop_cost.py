"""Instructions per 16 elements in the vector loop of each unary float32 op's kernel, as
this host's LLVM emits it: the cost of the op's math, free of the timing noise of a
shared machine (``bench_ops --only-unary`` times the same kernels).

Run: ``python tools/vector_loop_cost.py [op ...]`` (the ops of ``bench_ops``' unary
table by default; x86-64 hosts: it reads their assembly). Per op: the elements one iteration of the main vector loop handles,
its instructions per 16 elements, and how many of them touch the stack (spills and
reloads) or divide. The main loop is the innermost loop with the largest element step;
its rarely taken branches (sin and cos's huge-argument path) lie outside it.
"""
from __future__ import annotations

import re
import sys
import tempfile
import warnings
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


def kernel_assembly(fn) -> list[str]:
    """The host assembly of the kernel computing ``fn`` on a million float32."""
    with tempfile.TemporaryDirectory() as tmp:
        nv.debug.dump(tmp, fn(nv.from_numpy(np.ones(1 << 20, np.float32))))
        text = (Path(tmp) / "step.ll").read_text()
    tm = target_machine(llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())
    module = llvm.parse_assembly(text)
    optimize(tm, module)
    return tm.emit_assembly(module).splitlines()


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


def main(names: list[str]) -> None:
    warnings.simplefilter("ignore")
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    print(f"{'op':10s} {'elements/iter':>13s} {'instr/16':>9s} {'stack/16':>9s} {'div/16':>7s}")
    for name in names:
        step, body = main_loop(kernel_assembly(OPS[name]))
        per16 = 16 / step
        stack = sum("rsp" in a for a in body)
        divides = sum("div" in a.split()[0] for a in body)
        print(f"{name:10s} {step:13d} {len(body) * per16:9.1f} {stack * per16:9.1f} "
              f"{divides * per16:7.1f}")


if __name__ == "__main__":
    main(sys.argv[1:] or list(OPS))
