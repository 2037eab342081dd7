"""LLVM's optimizer in a child process: kernels are optimized and emitted there.

Why a process: llvmlite 0.50 leaks native memory on every run of the new pass manager
(``LLVMPY_CreatePassBuilder`` allocates a ``PassInstrumentationCallbacks`` that nothing
frees, and each run registers more callbacks into it): measured 80-170 KB per kernel
compiled at O3, none of it returned by ``malloc_trim`` -- 270 MB over the 1,600 kernels
of a small MLP trained at 60 batch sizes, most of the process's growth. Nothing on the
Python side can release it, so the pipeline runs where the memory can be given back:
a worker process (started on the first compile) that parses, verifies, runs O3 and
emits the object, and is replaced by a fresh one once its resident size passes
``NOVA_COMPILE_WORKER_MB`` (default 256). The object code is the same bytes the
in-process pipeline emits (same LLVM, the same target machine settings, checked at
start-up).

This module imports only the standard library and llvmlite, so the worker starts in a
fraction of a second; it runs as ``__main__`` (``serve``). Protocol on the worker's
stdin/stdout, one frame per message: ``<IQ`` (header and body lengths), a JSON header,
the body. The parent sends a hello (the CPU and features its target machine uses) and
the worker answers with its versions and host; then each request is a kernel's name and
IR text, answered with the object (or the verifier's message) and the worker's RSS.

``NOVA_COMPILE_WORKER=0`` compiles in the calling process instead (and leaks as above).
"""
from __future__ import annotations

import atexit
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import weakref
from collections.abc import Mapping
from typing import IO, Any

import llvmlite
import llvmlite.binding as llvm

_FRAME = struct.Struct("<IQ")
# Run this file as __main__ without putting its directory (nova/runtime, whose module
# names could shadow others) or the current directory on sys.path.
_BOOT = "import sys, runpy; del sys.path[0]; runpy.run_path(sys.argv[1], run_name='__main__')"


class WorkerUnavailable(RuntimeError):
    """The worker could not be started, or its LLVM is not the parent's."""


class WorkerDied(RuntimeError):
    """The worker ended (or answered out of step) while compiling a kernel, twice."""


class InvalidModule(RuntimeError):
    """LLVM's parser or verifier rejected the IR; the message is LLVM's."""


# ----------------------------------------------------------------- shared with the parent

def target_machine(cpu: str, features: str) -> llvm.TargetMachine:
    """The host's JIT target machine at O3 (the parent's and the worker's are the same)."""
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=cpu, features=vector_tuning(features), opt=3,
                                        reloc="default", codemodel="jitdefault", jit=True)


def vector_tuning(features: str) -> str:
    """The host's feature string, with LLVM's preference for 256-bit vectors on AVX-512
    CPUs turned off (``-prefer-256-bit``), so the loop and SLP vectorizers may use the
    full 512-bit registers Nova's own code (the GEMM and attention tiles) uses.

    LLVM tunes every Intel AVX-512 core to prefer 256 bits (against the clock drop of
    heavy 512-bit code on Skylake-SP), and so vectorized every elementwise, row and
    attention-softmax loop at 8 float32 lanes. Measured on the 2-core AVX-512 bench VM
    (each in a fresh process, empty caches, interleaved, two rounds): the medium GPT's
    kernels per training step 742 -> 686 ms (attention forward 64 -> 46 ms, backward
    84 -> 64, elementwise 75 -> 72); ``bench_ops --only-unary`` ``add`` 9.3-10.2 ->
    11.2-11.5 GB/s and exp 65-74% -> 88-91% of it, tanh 60-61% -> 76-78%, erf 74-82% ->
    85%, sigmoid 60-78% -> 84%. LLVM's cost model still picks the width per loop."""
    if "+avx512f" in features.split(","):
        return features + ",-prefer-256-bit"
    return features


def optimize(tm: llvm.TargetMachine, mod: llvm.ModuleRef, speed_level: int = 3,
             vectorize: bool = True) -> None:
    """LLVM's O``speed_level`` pipeline for the host, in place (the level per kernel:
    ``configurator.llvm_speed_level``), with the loop and SLP vectorizers unless
    ``vectorize`` is False (code whose vectors are all explicit: the GEMM driver), then
    ``inline_vector_variants``."""
    pb = run_pipeline(tm, mod, speed_level, vectorize)
    inline_vector_variants(mod, pb)


def run_pipeline(tm: llvm.TargetMachine, mod: llvm.ModuleRef, speed_level: int = 3,
                 vectorize: bool = True) -> llvm.PassBuilder:
    """``optimize``'s LLVM pipeline alone; returns its pass builder."""
    pto = llvm.create_pipeline_tuning_options(speed_level=speed_level)
    pto.loop_vectorization = vectorize
    pto.slp_vectorization = vectorize
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return pb


def inline_vector_variants(mod: llvm.ModuleRef, pb: llvm.PassBuilder) -> None:
    """Inline what the pipeline left ``alwaysinline``: the functions only the loop
    vectorizer calls -- vector variants (``llvm_trig``) -- as the pipeline inlines
    before it vectorizes. A variant's early return on an all-false mask then becomes a
    branch in the vector loop, off which the rare path's calls spill nothing (called,
    the variant made the loop save and reload its registers around every call: sin at
    65% of add's bandwidth, against 84% inlined)."""
    if any(_always_inline(fn) for fn in mod.functions):
        late = llvm.create_new_module_pass_manager()
        late.add_always_inliner_pass()
        late.add_simplify_cfg_pass()
        late.run(mod, pb)


def _always_inline(fn: llvm.ValueRef) -> bool:
    return not fn.is_declaration and any(b"alwaysinline" in a.split() for a in fn.attributes)


def host_identity() -> dict[str, Any]:
    """What the object code depends on besides the IR and the CPU/features asked for."""
    return {"llvmlite": llvmlite.__version__, "llvm": list(llvm.llvm_version_info),
            "triple": llvm.get_process_triple()}


def send(stream: IO[bytes], header: Mapping[str, Any], body: bytes = b"") -> None:
    raw = json.dumps(header).encode()
    stream.write(_FRAME.pack(len(raw), len(body)) + raw + body)
    stream.flush()


def receive(stream: IO[bytes]) -> tuple[dict[str, Any], bytes]:
    """One frame; EOFError if the stream ends before it is whole."""
    prefix = _read_exactly(stream, _FRAME.size)
    header_len, body_len = _FRAME.unpack(prefix)
    header = json.loads(_read_exactly(stream, header_len))
    return header, _read_exactly(stream, body_len)


def _read_exactly(stream: IO[bytes], n: int) -> bytes:
    data = stream.read(n) if n else b""
    if len(data) != n:
        raise EOFError(f"stream ended after {len(data)} of {n} bytes")
    return data


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0   # no /proc: the worker is then never recycled for size


# ----------------------------------------------------------------- the worker

def serve() -> None:
    """The worker's loop: until stdin ends, compile each kernel it is sent. A parent
    that has gone (its process ended while a kernel compiled here: a reply meets a
    closed pipe) ends the worker quietly, as the end of stdin does."""
    try:
        _serve()
    except BrokenPipeError:
        return


def _serve() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the parent's to handle
    requests = sys.stdin.buffer
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)                                   # stray output cannot corrupt a frame
    hello, _ = receive(requests)
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    tm = target_machine(hello["cpu"], hello["features"])
    send(replies, {**host_identity(), "cpu": llvm.get_host_cpu_name(),
                   "features": llvm.get_host_cpu_features().flatten(), "pid": os.getpid()})
    while True:
        try:
            header, body = receive(requests)
        except EOFError:
            return
        reply = {"seq": header["seq"], "name": header["name"]}
        try:
            mod = llvm.parse_assembly(body.decode())
            mod.verify()
        except RuntimeError as e:
            send(replies, {**reply, "invalid": str(e)})
            continue
        optimize(tm, mod, int(header.get("level", 3)), bool(header.get("vectorize", True)))
        obj = tm.emit_object(mod)
        send(replies, {**reply, "rss": _rss_bytes()}, obj)


# ----------------------------------------------------------------- the parent's side

def _limit_from_environment() -> int:
    from nova import config   # (here: the worker itself must not import Nova)
    return int(config.COMPILE_WORKER_MB.get() * 2**20)


class CompileWorker:
    """The parent's handle on one worker at a time (module doc). Thread-safe; after a
    fork the child starts its own worker instead of talking to the parent's."""

    def __init__(self, cpu: str, features: str, limit_bytes: int | None = None) -> None:
        self.cpu, self.features = cpu, features
        self.limit_bytes = _limit_from_environment() if limit_bytes is None else limit_bytes
        self.starts = 0            # workers started by this process
        self.pid: int | None = None
        self._proc: subprocess.Popen | None = None
        self._owner = os.getpid()
        self._seq = 0
        self._lock = threading.Lock()
        _INSTANCES.add(self)

    def compile(self, name: str, text: str, level: int = 3, vectorize: bool = True) -> bytes:
        """The object code of the kernel ``name`` whose IR is ``text``, optimized at
        O``level`` (``vectorize``: with LLVM's vectorizers, see ``optimize``). Raises
        InvalidModule (LLVM rejected it), WorkerUnavailable (no worker could be
        started) or WorkerDied (a fresh worker ended on it too)."""
        with self._lock:
            ended = ""
            for _ in range(2):       # a worker killed from outside is replaced once
                if self._proc is None or self._owner != os.getpid():
                    self._start()
                try:
                    return self._exchange(name, text, level, vectorize)
                except (EOFError, OSError, ValueError) as e:
                    ended = f"{self._exit_status()}; {e}"
            raise WorkerDied(f"the LLVM compile worker ended twice while compiling {name} "
                             f"({ended})")

    def start(self) -> None:
        """Start the worker process now, if it is not running (a compile starts it
        otherwise): ~0.08 s, which a caller that knows compiles will follow can overlap
        with its own work. Raises WorkerUnavailable as ``compile`` would."""
        with self._lock:
            if self._proc is None or self._owner != os.getpid():
                self._start()

    def _exchange(self, name: str, text: str, level: int, vectorize: bool = True) -> bytes:
        self._seq += 1
        proc = self._proc
        try:
            send(proc.stdin, {"seq": self._seq, "name": name, "level": level,
                              "vectorize": vectorize}, text.encode())
            header, obj = receive(proc.stdout)
        except BaseException as e:
            if not isinstance(e, (EOFError, OSError, ValueError)):
                self._stop(kill=True)    # interrupted mid-exchange: the stream is unusable
            raise
        if header.get("seq") != self._seq or header.get("name") != name:
            self._stop(kill=True)
            raise ValueError(f"answer out of step: {header.get('name')!r}, "
                             f"#{header.get('seq')}")
        if "invalid" in header:
            raise InvalidModule(header["invalid"])
        if header.get("rss", 0) > self.limit_bytes:
            self._stop()             # the next compile starts a fresh one
        return obj

    def _start(self) -> None:
        if self._owner != os.getpid():     # forked: the worker and its pipes are the parent's
            self._forget()
            self._owner = os.getpid()
        try:
            proc = subprocess.Popen([sys.executable, "-c", _BOOT, os.path.abspath(__file__)],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        except OSError as e:
            raise WorkerUnavailable(f"cannot start {sys.executable}: {e}") from e
        self._proc = proc
        try:
            send(proc.stdin, {"cpu": self.cpu, "features": self.features})
            answer, _ = receive(proc.stdout)
        except (EOFError, OSError, ValueError) as e:
            status = self._exit_status()
            raise WorkerUnavailable(f"the worker did not start ({status}; {e})") from e
        except BaseException:
            self._stop(kill=True)
            raise
        expected = {**host_identity(), "cpu": self.cpu, "features": self.features}
        differs = {k: (answer.get(k), v) for k, v in expected.items() if answer.get(k) != v}
        if differs:
            self._stop(kill=True)
            raise WorkerUnavailable(f"the worker's LLVM differs from this process's "
                                    f"(worker, here): {differs}")
        self.pid = answer.get("pid")
        self.starts += 1

    def _exit_status(self) -> str:
        """Stop the current worker and say how it ended."""
        proc = self._proc
        self._stop(kill=True)
        if proc is None or proc.returncode is None:
            return "no exit status"
        if proc.returncode < 0:
            try:
                return f"killed by {signal.Signals(-proc.returncode).name}"
            except ValueError:
                return f"killed by signal {-proc.returncode}"
        return f"exit status {proc.returncode}"

    def _stop(self, kill: bool = False) -> None:
        """End the worker: close its stdin (it exits at the end of input) or kill it."""
        proc, self._proc, self.pid = self._proc, None, None
        if proc is None:
            return
        if kill:
            proc.kill()
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _forget(self) -> None:
        """In a forked child: drop the parent's worker without ending it."""
        proc, self._proc, self.pid = self._proc, None, None
        if proc is not None:
            for stream in (proc.stdin, proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
            proc.returncode = 0       # not ours to wait for

    def close(self, block: bool = True) -> None:
        """End this process's worker; with ``block=False``, only if no compile is under
        way (one is left to see the end of its input when this process ends)."""
        if not self._lock.acquire(blocking=block):
            return
        try:
            if self._owner == os.getpid():
                self._stop()
            else:
                self._forget()
        finally:
            self._lock.release()


_INSTANCES: weakref.WeakSet[CompileWorker] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A fork may happen while another thread holds a worker's lock; the child's copy of
    that thread does not exist, so the child gets fresh locks."""
    for worker in list(_INSTANCES):
        worker._lock = threading.Lock()


def _close_all() -> None:
    """At exit: end the workers that are idle (a compile in a daemon thread is not
    waited for)."""
    for worker in list(_INSTANCES):
        worker.close(block=False)


if __name__ == "__main__":
    serve()
else:
    atexit.register(_close_all)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
