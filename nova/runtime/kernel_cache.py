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

Memory. LLVM's optimizer runs in a worker process (``nova.runtime.compile_worker``:
llvmlite leaks 80-170 KB of native memory per O3 run, which only a process exit gives
back). The kernels a step needs that are not loaded yet are loaded together into one
MCJIT engine of their own (a :class:`_Library`: its target machine, LLVM context and
code: ~40 KB plus 10-20 KB per kernel); each kernel is a :class:`Kernel` that holds its
library, the in-memory cache holds kernels only weakly, and the compiled steps that call
a kernel hold it strongly. So a library's code is unmapped when the last step using any
of its kernels is gone -- a step dropped by the step cache but still held elsewhere (the
latest executable, a thread running it) keeps its kernels -- and a kernel shared by two
steps stays while either lives (it may keep the rest of its library's code with it).
The runtime support code (``_Jit.load``: the thread pool and the step driver) lives as
long as the process; its object is cached on disk beside the kernels
(``support_<module>.o``, keyed by the host key and the module's text, validated and
healed like a kernel's entry). So does code that kernels call without containing it
(``targets.cpu.llvm.support_for``: the tiled GEMMs' shared driver): it is linked before
the first kernel calling it is loaded, its symbols made the process's, and when the disk
cache lacks it, it compiles in the same batch as the kernels (``_compile_all``) -- or
before, on a worker while the step's front end runs, when the engine foresees it
(``prefetch_support``: a step with float32 products will call the GEMM driver).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import queue
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any

import llvmlite
import llvmlite.binding as llvm
from llvmlite import ir

from nova import config
from nova.compiler.targets.cpu.configurator import llvm_speed_level
from nova.compiler.targets.cpu.device import usable_cores
from nova.compiler.targets.cpu.llvm import SupportModule, module_for, support_for
from nova.compiler.lowering.plan import FORMAT_VERSION, KernelPlan, body_key
from nova.runtime import elf
from nova.runtime.compile_worker import (CompileWorker, InvalidModule, WorkerDied,
                                         WorkerUnavailable, optimize, target_machine)
from nova.runtime.compile_progress import CompileProgress
from nova.runtime.debug_dir import debug_directory, write_debug_file
from nova.runtime.disk_cache import Lookup, read_entry, warn_once, write_entry

KernelFn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int64,
                            ctypes.c_int64)
ENTRY_KIND = "nova-cpu-object"
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # .../nova
_CODEGEN = os.path.join("compiler", "targets", "cpu", "llvm.py")

# Object formats this cache can validate, by the triple's architecture: ELF machine,
# class, little-endian, and the relocation types MCJIT resolves (type -> bytes patched).
_ELF_TARGETS: dict[str, tuple[int, int, bool, Mapping[int, int]]] = {
    "x86_64": (elf.EM_X86_64, 2, True, elf.X86_64_RELOCATIONS),
}


MAX_COMPILE_JOBS = 8   # default cap on compile workers (memory: see compile_workers)


class CompileWorkerWarning(RuntimeWarning):
    """No compile worker could be started: kernels compile in this process (correct
    results, but LLVM's leaked memory then stays in it)."""


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
    released: int = 0       # kernels whose code was unmapped (no live step used them)
    compile_seconds: float = 0.0   # wall time spent compiling (batches, all workers)
    support_compiled: int = 0  # runtime support modules (the thread pool) compiled by LLVM
    support_hits: int = 0      # ... and loaded from the disk cache


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


# Support modules linked (``_Jit.link``): name -> the engine holding their code. The
# symbols they define are the process's (``llvm.add_symbol``) and kernels loaded by any
# cache resolve them, so their code stays mapped until exit, whichever cache linked it.
_LINKED: dict[str, llvm.ExecutionEngine] = {}
_LINK_LOCK = threading.Lock()


class _Jit:
    """The process's LLVM target machine, its MCJIT engine for runtime support code, and
    the compile worker (created on first use)."""

    def __init__(self) -> None:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        self.cpu = llvm.get_host_cpu_name()
        self.features = llvm.get_host_cpu_features().flatten()
        self.tm = self.new_target_machine()
        self.triple = llvm.get_process_triple()
        self.data_layout = str(self.tm.target_data)
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""),
                                                 self.new_target_machine())
        self.lock = threading.Lock()
        self.worker = CompileWorker(self.cpu, self.features)
        self.workers = [self.worker]             # more join on a batch (compile_workers)
        self.worker_problem: str | None = None   # why kernels compile in-process, if so

    def compile_workers(self, wanted: int) -> list[CompileWorker]:
        """Up to ``wanted`` compile workers, started on first use: ``NOVA_COMPILE_JOBS``,
        by default one per usable core up to ``MAX_COMPILE_JOBS`` (each may grow to
        ``NOVA_COMPILE_WORKER_MB`` before it is replaced)."""
        jobs = config.COMPILE_JOBS.get() or min(usable_cores(), MAX_COMPILE_JOBS)
        count = max(1, min(wanted, jobs))
        while len(self.workers) < count:
            self.workers.append(CompileWorker(self.cpu, self.features))
        return self.workers[:count]

    def new_target_machine(self) -> llvm.TargetMachine:
        """A target machine for this host (an MCJIT engine owns the one it is given)."""
        return target_machine(self.cpu, self.features)

    def optimize(self, mod: llvm.ModuleRef, speed_level: int = 3, vectorize: bool = True
                 ) -> None:
        """LLVM's pipeline for the host (O3 unless told), vectorizers on unless told,
        in place."""
        optimize(self.tm, mod, speed_level, vectorize)

    def load(self, module: ir.Module, names: Sequence[str],
             stats: KernelStats | None = None) -> dict[str, int]:
        """Load ``module`` (runtime support code, not a kernel: the thread pool and the
        step driver, once per process) and return the addresses of ``names``. Its
        object is compiled at O3 once and kept in the disk cache next to the kernels
        (``support_object``): compiling it took 0.10-0.15 s of every process's first
        step, a fifth of a warm start."""
        return self.add_support(module.name, self.support_object(module, names, stats
                                                                 or KernelStats()), names)

    def add_support(self, name: str, obj: bytes, names: Sequence[str]) -> dict[str, int]:
        """Map support object ``obj`` (module ``name``) into the process's engine and
        return the addresses of ``names``."""
        with self.lock:
            self.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
            self.engine.finalize_object()
            addresses = {symbol: self.engine.get_function_address(symbol) for symbol in names}
        missing = [symbol for symbol, addr in addresses.items() if not addr]
        if missing:
            raise CompileError(f"{name}: symbols {missing} not found after loading")
        return addresses

    def support_entry(self, name: str, identity: str, names: Sequence[str]
                      ) -> tuple[str | None, dict[str, Any]]:
        """Where support module ``name`` (defining ``names``) is kept on disk
        (``support_<name>.o``; None without a disk cache) and its entry's header, keyed
        by the host key (which holds Nova's source fingerprint) and ``identity``: what
        else its IR is made from (``SupportModule.identity``), or the IR text itself."""
        directory = _cache_dir(self)
        path = os.path.join(directory, f"support_{name}.o") if directory else None
        key = hashlib.sha256(f"{self.host_key()}|support|{identity}".encode()).hexdigest()
        return path, {"kind": ENTRY_KIND, "key": key, "symbols": list(names)}

    def read_support(self, name: str, identity: str, names: Sequence[str],
                     stats: KernelStats) -> tuple[bytes | None, Lookup]:
        """Support module ``name``'s object from the disk cache (None when missing or
        unusable) and the lookup, counted in ``stats``."""
        path, header = self.support_entry(name, identity, names)
        if not path:
            return None, Lookup("missing")
        found = read_entry(path, header, self.object_validator(names, only_these=False))
        _count(stats, found, "support_hits")
        return found.payload, found

    def store_support(self, name: str, identity: str, names: Sequence[str], obj: bytes,
                      found: Lookup) -> None:
        """Keep a compiled support object on disk (unless its lookup said not to)."""
        path, header = self.support_entry(name, identity, names)
        if path and found.writable:
            write_entry(path, header, obj)

    def accept_support(self, support: SupportModule, identity: str, obj: bytes,
                       found: Lookup, stats: KernelStats) -> CompileError | None:
        """Link support module ``support``'s object, just compiled, and keep it on disk
        under ``identity`` (where its lookup ``found`` allows), counted in ``stats``; or
        the error naming the module when the object does not validate (nothing linked)."""
        if self.object_format() is not None:
            problem = self.object_validator(support.symbols, only_these=False)({}, obj)
            if problem is not None:
                return CompileError(f"support module {support.name}: the compile worker's "
                                    f"object failed validation: {problem}")
        stats.support_compiled += 1
        self.link(support, obj)
        self.store_support(support.name, identity, support.symbols, obj, found)
        return None

    def compile_here(self, text: str, level: int = 3, vectorize: bool = True) -> bytes:
        """Verify, optimize and emit ``text`` in this process."""
        mod = llvm.parse_assembly(text)
        mod.verify()
        self.optimize(mod, level, vectorize)
        return self.tm.emit_object(mod)

    def support_object(self, module: ir.Module, names: Sequence[str],
                       stats: KernelStats, vectorize: bool = True) -> bytes:
        """The object code of support module ``module`` defining ``names``: read from
        the disk cache (``support_entry``, validated as kernel objects are), else
        compiled at O3 in this process and stored. ``stats`` counts the hit, the
        compile, or a damaged entry."""
        text = str(module)
        obj, found = self.read_support(module.name, text, names, stats)
        if obj is None:
            obj = self.compile_here(text, vectorize=vectorize)
            stats.support_compiled += 1
            self.store_support(module.name, text, names, obj, found)
        return obj

    def link(self, support: SupportModule, obj: bytes) -> None:
        """Map a support module kernels call and make its symbols resolvable by every
        kernel loaded after, for the rest of the process (``_LINKED``)."""
        with _LINK_LOCK:
            if support.name in _LINKED:
                return
            for symbol, address in self.add_support(support.name, obj,
                                                    support.symbols).items():
                llvm.add_symbol(symbol, address)
            _LINKED[support.name] = self.engine

    @staticmethod
    def unlinked(plans: Sequence[KernelPlan]) -> list[SupportModule]:
        """The support modules ``plans`` call (``support_for``) not linked yet."""
        out: dict[str, SupportModule] = {}
        for plan in plans:
            for support in support_for(plan):
                if support.name not in _LINKED:
                    out.setdefault(support.name, support)
        return list(out.values())

    def link_support(self, plans: Sequence[KernelPlan], stats: KernelStats) -> None:
        """Link the support modules ``plans`` call, from the disk cache or compiled
        here (``support_object``)."""
        for support in self.unlinked(plans):
            module = support.build(self.triple, self.data_layout)
            self.link(support, self.support_object(module, support.symbols, stats,
                                                   support.vectorize))

    def object_validator(self, names: Sequence[str], only_these: bool = True,
                         promised: Collection[str] = ()
                         ) -> Callable[[Mapping[str, Any], bytes], str | None]:
        """Checks an intact entry's payload is an object MCJIT can load that defines
        ``names`` (``only_these``: and no other global symbol), every symbol it uses
        resolvable in this process or ``promised`` (defined by a support module that is
        linked before the object is loaded)."""
        machine, elf_class, little, relocations = self.object_format()

        def validate(header: Mapping[str, Any], obj: bytes) -> str | None:
            problem = elf.check_object(
                obj, machine=machine, file_type=elf.ET_REL, elf_class=elf_class,
                little=little, defines=tuple(names), only_these=only_these,
                resolves=lambda name: (name in promised
                                       or llvm.address_of_symbol(name) is not None),
                relocation_types=relocations)
            return None if problem is None else f"its object is unusable: {problem}"
        return validate

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
    root = config.cache_root()
    if root is None:
        return None
    if source_fingerprint() is None:
        warn_once("fingerprint", f"nova cache: the source of {_PACKAGE} cannot be read, so "
                                 f"cached kernels could be stale; the disk cache is off")
        return None
    if jit.object_format() is None:   # objects for this triple cannot be validated
        warn_once("format", f"nova cache: kernels compiled for {jit.triple} cannot be "
                            "validated when read back, so they are not cached on disk (every "
                            "process compiles them again)")
        return None
    return os.path.join(root, f"kernels-{jit.host_key()[:16]}")


def _count(stats: KernelStats, found: Lookup, hits: str) -> None:
    """Count a disk lookup's outcome: a hit in ``hits``, else a damaged, mismatched or
    bypassed entry (a miss is not counted)."""
    counter = {"hit": hits, "corrupted": "corrupted", "mismatch": "rejected",
               "bypassed": "bypassed"}.get(found.status)
    if counter is not None:
        setattr(stats, counter, getattr(stats, counter) + 1)


@dataclass(frozen=True)
class _SupportJob:
    """A support module to compile with a batch of kernels: its IR and how its disk
    lookup went (to store the object where the lookup allows)."""

    support: SupportModule
    text: str
    found: Lookup
    identity: str       # its disk-cache identity (``SupportModule.identity``)


# What may stop a prefetch that the batch needing the module meets again and reports
# (a worker that cannot start or dies, LLVM rejecting the module, a bad object, the
# disk); anything else a prefetch raises is raised to the caller (_await).
_REDONE_BY_THE_BATCH = (WorkerUnavailable, WorkerDied, InvalidModule, CompileError, OSError)


class _Prefetch:
    """A support module made ready in a background thread (``prefetch_support``): what
    it counted, and what stopped it (the batch that needs the module then compiles it
    itself, reporting its own failure)."""

    def __init__(self, support: SupportModule) -> None:
        self.support = support
        self.stats = KernelStats()
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None
        self.worker: CompileWorker | None = None   # the compile worker it holds, if any


def entry_key(jit: _Jit, plan: KernelPlan) -> str:
    """The full key of a kernel's entry: the host key and the kernel's whole structure
    (the file is named by ``plan.name``, which holds only 80 bits of it). The structure
    is ``body_key``'s text, which says what printing the fused op would say without the
    printer (printing the small GPT step's ~100 kernels took ~0.15 s of a warm start)."""
    raw = (f"{jit.host_key()}|{plan.name}|{plan.schedule.code_identity()}|"
           f"{plan.body or body_key(plan.fusion)}")
    return hashlib.sha256(raw.encode()).hexdigest()


class _Library:
    """The code of kernels loaded together: one MCJIT engine with its own target machine
    and LLVM context. Its code is unmapped when the library is garbage, i.e. when no
    :class:`Kernel` of it is referenced (module doc); never at interpreter exit, when a
    daemon thread could still be inside a kernel."""

    def __init__(self, jit: _Jit, objects: Mapping[str, bytes], stats: KernelStats) -> None:
        context = llvm.create_context()
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly("", context=context),
                                            jit.new_target_machine())
        for obj in objects.values():
            engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        engine.finalize_object()
        self.addresses = {name: engine.get_function_address(name) for name in objects}
        # The engine (which owns a module of the context) goes before the context.
        finalizer = weakref.finalize(self, _release, engine, context, stats, len(objects))
        finalizer.atexit = False


def _release(engine: llvm.ExecutionEngine, context: llvm.ContextRef, stats: KernelStats,
             kernels: int) -> None:
    engine.close()
    context.close()
    stats.released += kernels


class Kernel:
    """A loaded kernel: ``fn`` calls it, and holding the Kernel keeps its code mapped."""

    __slots__ = ("name", "fn", "address", "library", "__weakref__")

    def __init__(self, name: str, address: int, library: _Library) -> None:
        self.name, self.address, self.library = name, address, library
        self.fn = KernelFn(address)

    def __repr__(self) -> str:
        return f"Kernel({self.name} at {self.address:#x})"


class KernelCache:
    """Name -> loaded kernel, compiling or loading object code as needed. Kernels are
    held weakly: a kernel no live step uses is released (module doc)."""

    def __init__(self) -> None:
        self._jit: _Jit | None = None
        self._loaded: weakref.WeakValueDictionary[str, Kernel] = weakref.WeakValueDictionary()
        self._lock = threading.RLock()
        self.stats = KernelStats()
        self._prefetching: dict[str, _Prefetch] = {}     # by support module name
        self._prefetch_lock = threading.Lock()

    @property
    def jit(self) -> _Jit:
        if self._jit is None:
            self._jit = _Jit()
        return self._jit

    def loaded(self) -> list[str]:
        """The names of the kernels whose code is mapped now."""
        return sorted(self._loaded.keys())

    def llvm_ir(self, plan: KernelPlan) -> str:
        jit = self.jit
        return str(module_for(plan, jit.triple, jit.data_layout))

    def step_llvm_ir(self, plans: Sequence[KernelPlan]) -> str:
        """The LLVM IR of ``plans``' kernels, then of the support modules they call."""
        jit = self.jit
        support = {s.name: s for plan in plans for s in support_for(plan)}
        modules = [str(s.build(jit.triple, jit.data_layout)) for s in support.values()]
        return "\n".join([self.llvm_ir(plan) for plan in plans] + modules)

    def _write_ir(self, plan: KernelPlan, text: str) -> str:
        """Write a kernel's IR (and the nova region it came from) for a bug report."""
        region = "".join(f"; {line}\n" for line in str(plan.fusion).splitlines())
        return write_debug_file(debug_directory(), f"{plan.name}.ll",
                                f"; {plan.describe()}\n; nova region:\n{region}{text}")

    def _invalid(self, plan: KernelPlan, text: str, message: str) -> CompileError:
        return CompileError(f"kernel {plan.name} ({plan.kind}) failed LLVM verification: "
                            f"{message.strip().splitlines()[0]}; IR written to "
                            f"{self._write_ir(plan, text)}")

    def optimized(self, plan: KernelPlan) -> llvm.ModuleRef:
        """The kernel's LLVM module after verification and its pipeline for the host
        (``llvm_speed_level``), in this process (for inspection: the pipeline leaks, see compile_worker)."""
        jit = self.jit
        text = str(module_for(plan, jit.triple, jit.data_layout))
        try:
            mod = llvm.parse_assembly(text)
            mod.verify()
        except RuntimeError as e:
            raise self._invalid(plan, text, str(e)) from e
        jit.optimize(mod, llvm_speed_level(plan))
        return mod

    def _compile(self, plan: KernelPlan) -> bytes:
        """The kernel's object code, from the compile worker (or in this process when
        ``NOVA_COMPILE_WORKER=0`` or no worker can start: said once, as a warning)."""
        jit = self.jit
        if jit.worker_problem is None and config.COMPILE_WORKER.get():
            text = str(module_for(plan, jit.triple, jit.data_layout))
            try:
                reply: bytes | Exception = jit.worker.compile(plan.name, text,
                                                              llvm_speed_level(plan))
            except (InvalidModule, WorkerDied, WorkerUnavailable) as e:
                reply = e
            obj = self._accept(plan, text, reply)
            if obj is not None:
                return obj
        mod = self.optimized(plan)
        self.stats.compiled += 1
        return jit.tm.emit_object(mod)

    def _accept(self, plan: KernelPlan, text: str, reply: bytes | Exception) -> bytes | None:
        """A worker's ``reply`` for ``plan`` (its object, or what it raised) as checked
        object code; None when no worker can be started (the caller then compiles in
        this process); a ``CompileError`` naming the kernel when LLVM rejected it or
        the worker died on it."""
        jit = self.jit
        if isinstance(reply, InvalidModule):
            raise self._invalid(plan, text, str(reply)) from None
        if isinstance(reply, WorkerDied):
            raise CompileError(f"kernel {plan.name} ({plan.kind}): {reply}; IR written to "
                               f"{self._write_ir(plan, text)}") from None
        if isinstance(reply, WorkerUnavailable):
            if jit.worker_problem is None:
                jit.worker_problem = str(reply)
                warnings.warn(f"nova: kernels compile in this process, which keeps ~100-200 "
                              f"KB of LLVM memory per kernel (see compile_worker): {reply}",
                              CompileWorkerWarning, stacklevel=4)
            return None
        self._check_compiled(plan, reply)
        self.stats.compiled += 1
        return reply

    def _compile_all(self, plans: Sequence[KernelPlan], support: Sequence[_SupportJob] = (),
                     running: Sequence[_Prefetch] = ()
                     ) -> tuple[list[bytes], CompileError | None]:
        """The object code of ``plans`` (none of them cached), in order, and the first
        failure: the objects before it are returned (to be cached) with it. The
        ``support`` modules the plans call and the disk cache lacks compile in the same
        batch (first: the GEMM driver is the longest job) and are linked before any
        kernel's object is checked. Several jobs are spread over the compile workers
        (``_compile_parallel``); the user sees progress after a second
        (``CompileProgress``). ``running``: prefetches of support modules the plans
        call, still under way; several workers compile the kernels beside them (their
        objects are checked once the prefetches are done), one waits for them first."""
        jit = self.jit
        jobs = len(plans) + len(support)
        workers = jit.compile_workers(jobs) if (
            jobs > 1 and jit.worker_problem is None and config.COMPILE_WORKER.get()) else []
        progress = CompileProgress(jobs, max(len(workers), 1))
        start = time.perf_counter()
        try:
            if len(workers) > 1:
                return self._compile_parallel(plans, workers, progress, support, running)
            support = [*support, *self._after_prefetches(running)]
            for job in support:
                error = self._link_compiled(job, self._support_reply(job))
                if error is not None:
                    return [], error
                progress.done()
            out: list[bytes] = []
            for plan in plans:
                try:
                    out.append(self._compile(plan))
                except CompileError as e:
                    return out, e
                progress.done()
            return out, None
        finally:
            progress.close()
            self.stats.compile_seconds += time.perf_counter() - start

    def _support_reply(self, job: _SupportJob) -> bytes | Exception:
        """A support module compiled by the compile worker (what it raised, if it did),
        or here when there is no worker."""
        jit = self.jit
        if jit.worker_problem is None and config.COMPILE_WORKER.get():
            try:
                return jit.worker.compile(job.support.name, job.text, 3,
                                          job.support.vectorize)
            except (InvalidModule, WorkerDied, WorkerUnavailable) as e:
                return e
        return WorkerUnavailable("compile workers are off")

    def _link_compiled(self, job: _SupportJob, reply: bytes | BaseException
                       ) -> CompileError | None:
        """Link support module ``job`` from a worker's reply (compiling it here when no
        worker could) and keep it on disk; the error, naming the module, when LLVM
        rejected it or its object is unusable."""
        jit, support = self.jit, job.support
        if isinstance(reply, WorkerUnavailable):
            reply = jit.compile_here(job.text, vectorize=support.vectorize)
        if not isinstance(reply, bytes):
            if not isinstance(reply, (InvalidModule, WorkerDied)):
                raise reply
            path = write_debug_file(debug_directory(), f"{support.name}.ll", job.text)
            return CompileError(f"support module {support.name}: {str(reply).strip()}; "
                                f"IR written to {path}")
        return jit.accept_support(support, job.identity, reply, job.found, self.stats)

    def _compile_parallel(self, plans: Sequence[KernelPlan], workers: Sequence[CompileWorker],
                          progress: CompileProgress, support: Sequence[_SupportJob] = (),
                          running: Sequence[_Prefetch] = ()
                          ) -> tuple[list[bytes], CompileError | None]:
        """``_compile_all`` on several workers: this thread writes each kernel's IR and
        queues it (the support modules' first); a thread per worker sends it and waits
        for the object (the pipes release the GIL, so LLVM runs in every worker process
        at once while Python writes the next IR). A worker that a ``running`` prefetch
        holds takes jobs once that prefetch is done: the medium GPT's cold step waited
        0.38 s for the GEMM driver's compile with both workers and this thread idle
        before its kernels started. Replies are taken in plan order, so what is cached,
        and which failure is reported, is what a serial compile would give; the object
        code is the same bytes (same LLVM, same target machine)."""
        jit = self.jit
        tasks: queue.SimpleQueue = queue.SimpleQueue()
        replies: dict[int, bytes | BaseException] = {}
        held = {id(job.worker): job.thread for job in running if job.worker is not None}

        def serve(worker: CompileWorker) -> None:
            if id(worker) in held:
                held[id(worker)].join()
            while (task := tasks.get()) is not None:
                i, name, text, level, vectorize = task
                try:
                    replies[i] = worker.compile(name, text, level, vectorize)
                except BaseException as e:      # reported by the caller, in plan order
                    replies[i] = e
                progress.done()

        threads = [threading.Thread(target=serve, args=(w,), daemon=True,
                                    name=f"nova-compile-{k}") for k, w in enumerate(workers)]
        for t in threads:
            t.start()
        texts: list[str] = []
        queued = False
        try:
            for i, job in enumerate(support):
                tasks.put((i, job.support.name, job.text, 3, job.support.vectorize))
            for i, plan in enumerate(plans, len(support)):
                texts.append(str(module_for(plan, jit.triple, jit.data_layout)))
                tasks.put((i, plan.name, texts[-1], llvm_speed_level(plan), True))
            queued = True
        finally:
            if not queued:      # interrupted: compile nothing more than what is under way
                while True:
                    try:
                        tasks.get_nowait()
                    except queue.Empty:
                        break
            for _ in threads:
                tasks.put(None)
            for t in threads:
                t.join()
        for i, job in enumerate(support):
            error = self._link_compiled(job, replies[i])
            if error is not None:
                return [], error
        for job in self._after_prefetches(running):     # (a prefetch that failed: rare)
            error = self._link_compiled(job, self._support_reply(job))
            if error is not None:
                return [], error
        out: list[bytes] = []
        for i, plan in enumerate(plans):
            reply = replies[len(support) + i]
            if not isinstance(reply, (bytes, InvalidModule, WorkerDied, WorkerUnavailable)):
                raise reply
            try:
                obj = self._accept(plan, texts[i], reply)
                out.append(obj if obj is not None else self._compile(plan))
            except CompileError as e:
                return out, e
        return out, None

    def _check_compiled(self, plan: KernelPlan, obj: bytes) -> None:
        """The worker's object is validated like a disk entry before MCJIT maps it
        (after the support modules it calls are linked: a batch links them first)."""
        self.jit.link_support([plan], self.stats)
        if self.jit.object_format() is None:
            return
        problem = self._validator(plan)({}, obj)
        if problem is not None:
            raise CompileError(f"kernel {plan.name} ({plan.kind}): the compile worker's "
                               f"object failed validation: {problem}")

    def _validator(self, plan: KernelPlan, promised: Collection[str] = ()
                   ) -> Callable[[Mapping[str, Any], bytes], str | None]:
        """Checks an intact entry's payload is an object MCJIT can load for ``plan``
        (``promised``: symbols of support modules linked before it is loaded)."""
        return self.jit.object_validator((plan.name,), promised=promised)

    def _read_disk(self, plan: KernelPlan, path: str, key: str,
                   promised: Collection[str] = ()) -> Lookup:
        found = read_entry(path, {"kind": ENTRY_KIND, "key": key, "symbols": [plan.name]},
                           self._validator(plan, promised))
        _count(self.stats, found, "disk_hits")
        return found

    def prefetch_support(self, support: SupportModule) -> None:
        """Have ``support`` linked soon, in a background thread, while the caller goes on:
        from the disk cache, or, when the disk lacks it, compiled on a compile worker
        (the other workers started meanwhile). What a step's front end overlaps --
        building, optimizing, fusing and planning its IR, ~1.4 s of one core on a medium
        GPT while the other core idles -- with the GEMM driver's compile (~0.6 s, which
        otherwise took a worker for that long inside the step's batch of kernels) and
        the workers' start (~0.08 s each). A batch whose kernels call ``support``
        compiles them on the other workers meanwhile and waits for it before loading
        them (``_compile_parallel``); if the thread failed, the batch compiles the
        module as it would have, and reports what fails. Nothing happens when the module is
        linked or being prefetched already, or when compile workers are off."""
        jit = self.jit     # (made here: never by two threads)
        if support.name in _LINKED or jit.worker_problem is not None \
                or not config.COMPILE_WORKER.get():
            return
        with self._prefetch_lock:
            if support.name in self._prefetching:
                return
            job = self._prefetching[support.name] = _Prefetch(support)
        workers = jit.compile_workers(MAX_COMPILE_JOBS)
        job.worker = workers[0]
        job.thread = threading.Thread(target=self._prefetch, args=(support, workers, job),
                                      daemon=True, name=f"nova-prefetch-{support.name}")
        job.thread.start()

    def _prefetch(self, support: SupportModule, workers: Sequence[CompileWorker],
                  job: _Prefetch) -> None:
        """``prefetch_support``'s thread."""
        jit = self.jit
        try:
            identity = support.identity(jit.triple, jit.data_layout)
            obj, found = jit.read_support(support.name, identity, support.symbols, job.stats)
            if obj is None:
                text = str(support.build(jit.triple, jit.data_layout))
                starting = [threading.Thread(target=w.start, daemon=True,
                                             name="nova-worker-start") for w in workers[1:]]
                for t in starting:
                    t.start()
                obj = workers[0].compile(support.name, text, 3, support.vectorize)
                error = jit.accept_support(support, identity, obj, found, job.stats)
                if error is not None:
                    raise error
                for t in starting:
                    t.join()
            else:
                jit.link(support, obj)
        except BaseException as e:      # the batch compiles it and reports (docstring)
            job.error = e

    def _prefetches(self, plans: Sequence[KernelPlan]) -> list[_Prefetch]:
        """The prefetches of the support modules ``plans`` call, taken over by the
        caller (which awaits them: ``_await``)."""
        names = {s.name for plan in plans for s in support_for(plan)}
        with self._prefetch_lock:
            return [self._prefetching.pop(name) for name in sorted(names)
                    if name in self._prefetching]

    def _after_prefetches(self, running: Sequence[_Prefetch]) -> list[_SupportJob]:
        """Await ``running`` and return a job for each module a prefetch failed to
        link (found on disk meanwhile: linked, no job)."""
        self._await(running)
        jobs = [self._support_job(job.support) for job in running
                if job.support.name not in _LINKED]
        return [job for job in jobs if job is not None]

    def _await(self, jobs: Sequence[_Prefetch]) -> None:
        """Wait for prefetches ``jobs`` and count what each did in ``stats``."""
        for job in jobs:
            job.thread.join()
            for field in fields(KernelStats):
                setattr(self.stats, field.name,
                        getattr(self.stats, field.name) + getattr(job.stats, field.name))
            if job.error is not None and not isinstance(job.error, _REDONE_BY_THE_BATCH):
                raise job.error     # a bug in the prefetch itself: not to be hidden

    def _support_jobs(self, plans: Sequence[KernelPlan], skip: Collection[str] = ()
                      ) -> list[_SupportJob]:
        """Link the support modules ``plans`` call that the disk cache has (or that a
        prefetch made ready); the rest, to be compiled with the batch. Modules named in
        ``skip`` (prefetches still running, awaited by the batch) are left alone."""
        jobs = [self._support_job(support) for support in self.jit.unlinked(plans)
                if support.name not in skip]
        return [job for job in jobs if job is not None]

    def _support_job(self, support: SupportModule) -> _SupportJob | None:
        """Link ``support`` from the disk cache, or its job to compile (None: linked)."""
        jit = self.jit
        # found by what it is built from: building and printing the GEMM driver's IR
        # only to look it up took ~0.1 s of a warm first step
        identity = support.identity(jit.triple, jit.data_layout)
        obj, found = jit.read_support(support.name, identity, support.symbols, self.stats)
        if obj is None:
            return _SupportJob(support, str(support.build(jit.triple, jit.data_layout)),
                               found, identity)
        jit.link(support, obj)
        return None

    def _objects(self, plans: Sequence[KernelPlan]) -> dict[str, bytes]:
        """The object code of each plan: from the disk cache, else compiled (all the
        missing ones together, with the support modules they call, ``_compile_all``)
        and stored."""
        jit = self.jit
        prefetches = self._prefetches(plans)
        running = [job for job in prefetches if job.thread.is_alive()]
        self._await([job for job in prefetches if job not in running])   # (done already)
        support = self._support_jobs(plans, skip={job.support.name for job in running})
        promised = {symbol for job in [*support, *running] for symbol in job.support.symbols}
        directory = _cache_dir(jit)
        objects: dict[str, bytes] = {}
        missing: list[tuple[KernelPlan, str | None, str, Lookup]] = []
        for plan in plans:
            path = os.path.join(directory, plan.name + ".o") if directory else None
            key = entry_key(jit, plan) if path else ""
            found = self._read_disk(plan, path, key, promised) if path else Lookup("missing")
            if found.payload is not None:
                objects[plan.name] = found.payload
            else:
                missing.append((plan, path, key, found))
        compiled, error = self._compile_all([m[0] for m in missing], support, running)
        for (plan, path, key, found), obj in zip(missing, compiled):
            objects[plan.name] = obj
            if path and found.writable:
                write_entry(path, {"kind": ENTRY_KIND, "key": key, "symbols": [plan.name]},
                            obj)
        if error is not None:
            raise error
        return {plan.name: objects[plan.name] for plan in plans}

    def get_all(self, plans: Sequence[KernelPlan]) -> list[Kernel]:
        """The loaded kernel of each plan. Those not loaded yet are loaded together, into
        one new library; the caller holds the kernels for as long as it may call them."""
        with self._lock:
            found: dict[str, Kernel] = {}
            todo: dict[str, KernelPlan] = {}
            for plan in plans:
                kernel = found.get(plan.name) or self._loaded.get(plan.name)
                if kernel is not None or plan.name in todo:
                    self.stats.memory_hits += 1
                    if kernel is not None:
                        found[plan.name] = kernel
                    continue
                todo[plan.name] = plan
            objects = self._objects(list(todo.values())) if todo else {}
            if objects:
                library = _Library(self.jit, objects, self.stats)
                for name, address in library.addresses.items():
                    if not address:
                        raise CompileError(f"kernel {name}: symbol not found after loading")
                    found[name] = self._loaded[name] = Kernel(name, address, library)
            return [found[plan.name] for plan in plans]

    def get(self, plan: KernelPlan) -> Kernel:
        """The loaded kernel of ``plan`` (see get_all)."""
        return self.get_all([plan])[0]


KERNELS = KernelCache()
# The source hash is taken now, at import, as close as possible to the code this process
# actually runs: taken lazily, at the first compile, it would name source edited since.
source_fingerprint()
