"""IREE as a peer compiler of Nova's steps: a StableHLO module (``nv.export.stablehlo``)
compiled by ``iree-compile`` (a subprocess: IREE's compiler and upstream MLIR's Python
bindings cannot share a process) for the host CPU, and run with ``iree.runtime``.

Install with ``pip install -e ".[iree]"`` (``iree-base-compiler``, ``iree-base-runtime``).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence

import numpy as np

INSTALL = 'pip install -e ".[iree]"'

# llvm-cpu for this host; float64 kept (IREE narrows it to float32 by default)
FLAGS = ("--iree-input-type=stablehlo", "--iree-hal-target-device=local",
         "--iree-hal-local-target-device-backends=llvm-cpu",
         "--iree-llvmcpu-target-cpu=host", "--iree-input-demote-f64-to-f32=false")


def compiler() -> str | None:
    """The ``iree-compile`` command next to this Python, or on PATH; None without it."""
    here = os.path.join(os.path.dirname(sys.executable), "iree-compile")
    return here if os.path.exists(here) else shutil.which("iree-compile")


def unavailable_reason() -> str | None:
    """Why IREE cannot run here (None when it can)."""
    if compiler() is None:
        return f"iree-compile is not installed; {INSTALL}"
    import importlib.util
    try:
        found = importlib.util.find_spec("iree.runtime")
    except ImportError:
        found = None
    if found is None:        # (found, not imported: see ``run``)
        return f"iree.runtime is not installed; {INSTALL}"
    return None


def compile_module(text: str) -> bytes:
    """The VM flatbuffer of StableHLO ``text`` for this CPU; raises RuntimeError with
    IREE's diagnostics when it rejects the module (the text is kept in a file named
    in the message)."""
    command = compiler()
    if command is None:
        raise RuntimeError(f"iree-compile is not installed; {INSTALL}")
    work = tempfile.mkdtemp(prefix="nova-iree-")
    source, target = os.path.join(work, "step.mlir"), os.path.join(work, "step.vmfb")
    with open(source, "w") as f:
        f.write(text)
    done = subprocess.run([command, *FLAGS, source, "-o", target], capture_output=True,
                          text=True)
    if done.returncode != 0:
        errors = "\n".join(line for line in done.stderr.splitlines()
                           if not line.startswith("remark:"))
        raise RuntimeError(f"iree-compile rejected the module ({source}):\n{errors[:4000]}")
    with open(target, "rb") as f:
        data = f.read()
    shutil.rmtree(work, ignore_errors=True)
    return data


def load(vmfb: bytes, name: str = "main", threads: int | None = None
         ) -> Callable[..., list[np.ndarray]]:
    """Function ``name`` of a compiled module as ``f(*arrays) -> [arrays]``, on the
    ``local-task`` driver with ``threads`` worker threads (``local-sync``, one thread,
    when ``threads`` is 1 or None)."""
    import iree.runtime as rt
    if threads and threads > 1:
        rt.flags.parse_flags(f"--task_topology_max_group_count={threads}")
        config = rt.Config("local-task")
    else:
        config = rt.Config("local-sync")
    ctx = rt.SystemContext(config=config)
    ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb))
    fn = ctx.modules.module[name]

    def call(*arrays: np.ndarray) -> list[np.ndarray]:
        out = fn(*arrays)
        out = out if isinstance(out, (list, tuple)) else [out]
        return [np.asarray(o) for o in out]
    call.context = ctx      # (kept alive with the function)
    return call


def run(text: str, arguments: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Compile StableHLO ``text`` and run its ``main`` once on ``arguments``, in a
    subprocess (the runtime's bindings report leaked objects at exit, and a crash
    there would take the caller with it)."""
    work = tempfile.mkdtemp(prefix="nova-iree-run-")
    try:
        module, inputs, outputs = (os.path.join(work, n) for n in
                                   ("step.vmfb", "inputs.npz", "outputs.npz"))
        with open(module, "wb") as f:
            f.write(compile_module(text))
        np.savez(inputs, *arguments)
        done = subprocess.run([sys.executable, "-m", "benchmarks.peers.iree_module",
                               module, inputs, outputs], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                                  os.path.abspath(__file__)))))
        if done.returncode != 0 or not os.path.exists(outputs):
            raise RuntimeError(f"running the IREE module failed (exit {done.returncode}):\n"
                               f"{done.stderr[-4000:]}")
        with np.load(outputs) as data:
            return [_typed(data[f"arr_{k}"]) for k in range(len(data.files))]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _typed(a: np.ndarray) -> np.ndarray:
    """bfloat16 arrays as ml_dtypes' bfloat16 (numpy's files and IREE's runtime give
    them as raw 2-byte values)."""
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:
        import ml_dtypes
        return a.view(ml_dtypes.bfloat16)
    return a


def _main(module: str, inputs: str, outputs: str) -> None:
    with open(module, "rb") as f:
        fn = load(f.read())
    with np.load(inputs) as data:
        args = [_typed(data[f"arr_{k}"]) for k in range(len(data.files))]
    np.savez(outputs, *fn(*args))


if __name__ == "__main__":
    _main(*sys.argv[1:4])
