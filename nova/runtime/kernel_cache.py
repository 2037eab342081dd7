"""Compiled kernels: LLVM compilation, a per-kernel in-memory cache and a disk cache.

Kernels are cached one by one under their structural name (a hash of the fused region
and its schedule), so a kernel shared by two step functions compiles once. Object code
persists in ``~/.cache/nova`` (``NOVA_CACHE_DIR`` overrides, ``NOVA_CACHE=0`` disables)
in a directory keyed by the format version, the LLVM version and the host CPU, since
object code is specific to all three. Each file carries a SHA-256 of its payload;
a corrupted or truncated entry is deleted and recompiled, never loaded. Writes are
atomic (temporary file + rename).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import llvmlite.binding as llvm
from llvmlite import ir

from nova.compiler.codegen.llvm import module_for
from nova.compiler.lowering.plan import FORMAT_VERSION, KernelPlan

KernelFn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int64,
                            ctypes.c_int64)
_MAGIC = b"NOVAOBJ1"


class CompileError(RuntimeError):
    """LLVM rejected a generated kernel; the message names the kernel and a file with
    its IR."""


@dataclass
class KernelStats:
    compiled: int = 0       # kernels compiled by LLVM
    disk_hits: int = 0      # kernels loaded from the disk cache
    memory_hits: int = 0    # kernels found already loaded in this process
    corrupted: int = 0      # disk entries rejected by their checksum


class _Jit:
    """The process's LLVM target machine and MCJIT engine (created on first use)."""

    def __init__(self) -> None:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        self.cpu = llvm.get_host_cpu_name()
        self.features = llvm.get_host_cpu_features().flatten()
        target = llvm.Target.from_default_triple()
        self.tm = target.create_target_machine(cpu=self.cpu, features=self.features, opt=3,
                                               reloc="default", codemodel="jitdefault", jit=True)
        self.triple = llvm.get_process_triple()
        self.data_layout = str(self.tm.target_data)
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), self.tm)
        self.lock = threading.Lock()

    def run_o3(self, mod: llvm.ModuleRef) -> None:
        """LLVM's O3 pipeline for the host, loop and SLP vectorizers on, in place."""
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pb = llvm.create_pass_builder(self.tm, pto)
        pb.getModulePassManager().run(mod, pb)

    def load(self, module: ir.Module, names: Sequence[str]) -> dict[str, int]:
        """Compile ``module`` (runtime support code, not a kernel: small, built once per
        process, never cached on disk) at O3 and return the addresses of ``names``."""
        mod = llvm.parse_assembly(str(module))
        mod.verify()
        self.run_o3(mod)
        with self.lock:
            self.engine.add_module(mod)
            self.engine.finalize_object()
            addresses = {name: self.engine.get_function_address(name) for name in names}
        missing = [name for name, addr in addresses.items() if not addr]
        if missing:
            raise CompileError(f"{module.name}: symbols {missing} not found after loading")
        return addresses

    def host_key(self) -> str:
        raw = f"{FORMAT_VERSION}|{llvm.llvm_version_info}|{self.cpu}|{self.features}"
        return hashlib.sha256(raw.encode()).hexdigest()[:16]


def _cache_dir(jit: _Jit) -> str | None:
    if os.environ.get("NOVA_CACHE", "1") == "0":
        return None
    root = os.environ.get("NOVA_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache",
                                                            "nova")
    return os.path.join(root, f"kernels-{jit.host_key()}")


def _debug_dir() -> str:
    return os.environ.get("NOVA_DEBUG_DIR") or os.path.join(tempfile.gettempdir(), "nova-debug")


class KernelCache:
    """Name -> callable kernel, compiling or loading object code as needed."""

    def __init__(self) -> None:
        self._jit: _Jit | None = None
        self._loaded: dict[str, KernelFn] = {}
        self.stats = KernelStats()

    @property
    def jit(self) -> _Jit:
        if self._jit is None:
            self._jit = _Jit()
        return self._jit

    def llvm_ir(self, plan: KernelPlan) -> str:
        jit = self.jit
        return str(module_for(plan, jit.triple, jit.data_layout))

    def optimized(self, plan: KernelPlan) -> llvm.ModuleRef:
        """The kernel's LLVM module after verification and the O3 pipeline for the host."""
        jit = self.jit
        text = str(module_for(plan, jit.triple, jit.data_layout))
        try:
            mod = llvm.parse_assembly(text)
            mod.verify()
        except RuntimeError as e:
            os.makedirs(_debug_dir(), exist_ok=True)
            path = os.path.join(_debug_dir(), f"{plan.name}.ll")
            with open(path, "w") as f:
                f.write(f"; {plan.describe()}\n; nova region:\n")
                f.write("".join(f"; {line}\n" for line in str(plan.fusion).splitlines()))
                f.write(text)
            raise CompileError(f"kernel {plan.name} ({plan.kind}) failed LLVM verification: "
                               f"{str(e).strip().splitlines()[0]}; IR written to {path}") from e
        jit.run_o3(mod)
        return mod

    def _compile(self, plan: KernelPlan) -> bytes:
        mod = self.optimized(plan)
        self.stats.compiled += 1
        return self.jit.tm.emit_object(mod)

    def _read_disk(self, path: str) -> bytes | None:
        try:
            with open(path, "rb") as f:
                blob = f.read()
        except OSError:
            return None
        if len(blob) < 40 or blob[:8] != _MAGIC or hashlib.sha256(blob[40:]).digest() != blob[8:40]:
            self.stats.corrupted += 1
            try:
                os.unlink(path)
            except OSError:
                pass
            return None
        return blob[40:]

    @staticmethod
    def _write_disk(path: str, obj: bytes) -> None:
        directory = os.path.dirname(path)
        try:
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC + hashlib.sha256(obj).digest() + obj)
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only or full cache directory only costs recompiles

    def get(self, plan: KernelPlan) -> KernelFn:
        fn = self._loaded.get(plan.name)
        if fn is not None:
            self.stats.memory_hits += 1
            return fn
        jit = self.jit
        directory = _cache_dir(jit)
        path = os.path.join(directory, plan.name + ".o") if directory else None
        obj = self._read_disk(path) if path else None
        if obj is not None:
            self.stats.disk_hits += 1
        else:
            obj = self._compile(plan)
            if path:
                self._write_disk(path, obj)
        with jit.lock:
            jit.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
            jit.engine.finalize_object()
            addr = jit.engine.get_function_address(plan.name)
        if not addr:
            raise CompileError(f"kernel {plan.name}: symbol not found after loading")
        fn = KernelFn(addr)
        self._loaded[plan.name] = fn
        return fn


KERNELS = KernelCache()
