"""Compiled kernels: LLVM compilation, a per-kernel in-memory cache and a disk cache.

Kernels are cached one by one under their structural name (a hash of the fused region
and its schedule), so a kernel shared by two step functions compiles once. Object code
persists in ``~/.cache/nova`` (``NOVA_CACHE_DIR`` overrides, ``NOVA_CACHE=0`` disables)
in a directory keyed by everything the object code depends on besides the kernel: the
format version, a hash of Nova's own source (:func:`source_fingerprint`: a change to
the code generator changes the key even when nobody bumps FORMAT_VERSION), llvmlite's
and LLVM's versions, the target triple, the host CPU and its features.

An entry (``nova.runtime.disk_cache``) names in its checksummed header the full key of
the kernel it holds and the symbol it defines; before MCJIT is given the object, it is
checked as an ELF relocatable for this triple that defines that one symbol, whose
external symbols resolve in this process and whose relocations MCJIT implements
(``nova.runtime.elf``). Anything else (truncated, bit-flipped, another kernel's entry,
a random payload under a good header, a link) is recompiled and the entry rewritten
atomically; a directory or FIFO at an entry path is reported once and bypassed. Hosts
whose objects are not ELF (or whose relocations ``nova.runtime.elf`` does not list)
keep no disk cache: nothing is loaded that could not be validated.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import llvmlite
import llvmlite.binding as llvm
from llvmlite import ir

from nova.compiler.codegen.llvm import module_for
from nova.compiler.lowering.plan import FORMAT_VERSION, KernelPlan
from nova.runtime import elf
from nova.runtime.debug_dir import debug_directory, write_debug_file
from nova.runtime.disk_cache import Lookup, read_entry, warn_once, write_entry

KernelFn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int64,
                            ctypes.c_int64)
ENTRY_KIND = "nova-cpu-object"
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # .../nova
_CODEGEN = os.path.join("compiler", "codegen", "llvm.py")

# Object formats this cache can validate, by the triple's architecture: ELF machine,
# class, little-endian, and the relocation types MCJIT resolves (type -> bytes patched).
_ELF_TARGETS: dict[str, tuple[int, int, bool, Mapping[int, int]]] = {
    "x86_64": (elf.EM_X86_64, 2, True, elf.X86_64_RELOCATIONS),
}


class CompileError(RuntimeError):
    """LLVM rejected a generated kernel; the message names the kernel and a file with
    its IR."""


@dataclass
class KernelStats:
    compiled: int = 0       # kernels compiled by LLVM
    disk_hits: int = 0      # kernels loaded from the disk cache
    memory_hits: int = 0    # kernels found already loaded in this process
    corrupted: int = 0      # disk entries that were not intact (checksum, truncation, link)
    rejected: int = 0       # intact entries holding another kernel or an invalid object
    bypassed: int = 0       # entry paths holding a directory, FIFO or other non-file


def package_sources(package: str = _PACKAGE) -> list[str]:
    """Every ``.py`` file of the Nova package, relative to it, sorted. All of them feed
    the key: the code generator, the lowering and configurator it reads, the dialect
    and dtype tables, the runtime's calling convention; which other module changes
    what a kernel computes is not worth guessing, and an edit costs one recompile."""
    out = []
    for directory, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        out += [os.path.relpath(os.path.join(directory, f), package) for f in files
                if f.endswith(".py")]
    return sorted(out)


def fingerprint(package: str, files: Sequence[str]) -> str:
    """SHA-256 over the names and bytes of ``files`` (relative to ``package``)."""
    h = hashlib.sha256()
    for name in files:
        with open(os.path.join(package, name), "rb") as f:
            data = f.read()
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


@lru_cache(maxsize=1)
def source_fingerprint() -> str | None:
    """The hash of Nova's source this process runs (once per process: a few ms), or
    None when the source cannot be read (a zip or bytecode-only install): then no disk
    cache is kept, since stale object code could not be told from current."""
    files = package_sources()
    if _CODEGEN not in files:
        return None
    try:
        return fingerprint(_PACKAGE, files)
    except OSError:
        return None


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
        """Everything an object depends on besides its kernel (see the module doc)."""
        raw = (f"{FORMAT_VERSION}|{source_fingerprint()}|llvmlite {llvmlite.__version__}|"
               f"{llvm.llvm_version_info}|{self.triple}|{self.cpu}|{self.features}")
        return hashlib.sha256(raw.encode()).hexdigest()

    def object_format(self) -> tuple[int, int, bool, Mapping[int, int]] | None:
        """How this host's objects are validated, or None when they cannot be."""
        arch, _, rest = self.triple.partition("-")
        return _ELF_TARGETS.get(arch) if "linux" in rest else None


def _cache_dir(jit: _Jit) -> str | None:
    if os.environ.get("NOVA_CACHE", "1") == "0":
        return None
    if source_fingerprint() is None:
        warn_once("fingerprint", f"nova cache: the source of {_PACKAGE} cannot be read, so "
                                 f"cached kernels could be stale; the disk cache is off")
        return None
    if jit.object_format() is None:
        return None   # objects for this triple cannot be validated (module doc)
    root = os.environ.get("NOVA_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache",
                                                            "nova")
    return os.path.join(root, f"kernels-{jit.host_key()[:16]}")


def entry_key(jit: _Jit, plan: KernelPlan) -> str:
    """The full key of a kernel's entry: the host key and the kernel's whole structure
    (the file is named by ``plan.name``, which holds only 80 bits of it)."""
    raw = f"{jit.host_key()}|{plan.name}|{plan.schedule}|{plan.fusion}"
    return hashlib.sha256(raw.encode()).hexdigest()


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
            region = "".join(f"; {line}\n" for line in str(plan.fusion).splitlines())
            path = write_debug_file(debug_directory(), f"{plan.name}.ll",
                                    f"; {plan.describe()}\n; nova region:\n{region}{text}")
            raise CompileError(f"kernel {plan.name} ({plan.kind}) failed LLVM verification: "
                               f"{str(e).strip().splitlines()[0]}; IR written to {path}") from e
        jit.run_o3(mod)
        return mod

    def _compile(self, plan: KernelPlan) -> bytes:
        mod = self.optimized(plan)
        self.stats.compiled += 1
        return self.jit.tm.emit_object(mod)

    def _validator(self, plan: KernelPlan) -> Callable[[Mapping[str, Any], bytes], str | None]:
        """Checks an intact entry's payload is an object MCJIT can load for ``plan``."""
        machine, elf_class, little, relocations = self.jit.object_format()

        def validate(header: Mapping[str, Any], obj: bytes) -> str | None:
            problem = elf.check_object(
                obj, machine=machine, file_type=elf.ET_REL, elf_class=elf_class,
                little=little, defines=(plan.name,), only_these=True,
                resolves=lambda name: llvm.address_of_symbol(name) is not None,
                relocation_types=relocations)
            return None if problem is None else f"its object is unusable: {problem}"
        return validate

    def _read_disk(self, plan: KernelPlan, path: str, key: str) -> Lookup:
        found = read_entry(path, {"kind": ENTRY_KIND, "key": key, "symbols": [plan.name]},
                           self._validator(plan))
        if found.status == "hit":
            self.stats.disk_hits += 1
        elif found.status == "corrupted":
            self.stats.corrupted += 1
        elif found.status == "mismatch":
            self.stats.rejected += 1
        elif found.status == "bypassed":
            self.stats.bypassed += 1
        return found

    def get(self, plan: KernelPlan) -> KernelFn:
        fn = self._loaded.get(plan.name)
        if fn is not None:
            self.stats.memory_hits += 1
            return fn
        jit = self.jit
        directory = _cache_dir(jit)
        path = os.path.join(directory, plan.name + ".o") if directory else None
        key = entry_key(jit, plan) if path else ""
        found = self._read_disk(plan, path, key) if path else Lookup("missing")
        obj = found.payload
        if obj is None:
            obj = self._compile(plan)
            if path and found.writable:
                write_entry(path, {"kind": ENTRY_KIND, "key": key, "symbols": [plan.name]},
                            obj)
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
