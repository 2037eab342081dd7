"""Device memory and kernel launches for ``device="cuda"``, behind one small interface.

Everything the cuda engine and the tensor front end need from a GPU goes through a
:class:`DeviceBackend`: allocate and view device arrays (``xp``, an array module with
numpy's ``empty``/slicing/``view``/``reshape``), copy to and from the host, load a
step's generated kernels, launch them in order on one stream, and read their error
flags back with one synchronization. :class:`CupyBackend` is the real one (CuPy's
memory pool, CUDA modules loaded from NVRTC cubins). Tests install another with
:func:`use_backend` (the CPU emulator of generated kernels, numpy arrays standing in for
device memory), so the whole engine — compilation, arena views, donation, error flags,
ordering — runs without a GPU.

CuPy is imported only inside functions: ``import nova`` never loads it, and a machine
without it answers :func:`unavailable_reason` with what is missing.
"""
from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from nova.runtime.debug_dir import debug_subdirectory, write_debug_file
from nova.core.graph import storage_dtype


class CudaUnavailable(RuntimeError):
    """``device="cuda"`` was asked for where no CUDA backend can run."""


class CudaCompileError(RuntimeError):
    """A kernel of a CUDA step did not compile; the message names the kernel and the
    file its source was written to."""


class DeviceBackend(ABC):
    """What the cuda engine needs from a device. Arrays are contiguous, in storage
    dtypes (``storage_dtype``), and owned by whoever allocated them."""

    name: str
    xp: Any                       # array module for device arrays (cupy, or numpy in tests)
    oom_errors: tuple[type[BaseException], ...] = (MemoryError,)

    @abstractmethod
    def spec(self) -> Any:
        """The device's ``CudaSpec`` (drives the configurator and the NVRTC arch)."""

    def key(self) -> str:
        """Identity of compiled code for this backend: part of every CUDA step's
        structural key, so executables never cross backends or architectures."""
        return f"{self.name}:{self.spec().arch}"

    @abstractmethod
    def upload(self, host: np.ndarray) -> Any:
        """A new device array holding a copy of ``host`` (already in storage dtype)."""

    @abstractmethod
    def download(self, buffer: Any) -> np.ndarray:
        """A host copy of a device array (in its storage dtype)."""

    @abstractmethod
    def is_device_array(self, x: Any) -> bool:
        """Whether ``x`` is one of this backend's device arrays."""

    @abstractmethod
    def load(self, kernels: Sequence[tuple[Any, Any]]) -> list[Any]:
        """Compile and load ``(CudaKernel, KernelPlan)`` pairs; one handle per kernel.
        Raises :class:`CudaCompileError` naming the kernel that failed."""

    @abstractmethod
    def launch(self, handle: Any, args: Sequence[Any]) -> None:
        """Enqueue one kernel on ``args`` (inputs..., out[, scratch]), in order."""

    @abstractmethod
    def flag_reader(self, handles: Sequence[Any]) -> Callable[[], list[int]]:
        """A function returning the error flags of ``handles`` (waiting for the step to
        finish: the step's one synchronization) and clearing those that were set."""

    def synchronize(self) -> None:
        """Wait for all enqueued work."""

    # CUDA graphs (``nova.runtime.launch_graph``): a step's launches captured once.
    supports_graphs: bool = False

    @abstractmethod
    def address(self, x: Any) -> int:
        """The device address of array ``x``'s first element."""

    @abstractmethod
    def copy(self, dst: Any, src: Any) -> None:
        """Enqueue a copy of device array ``src`` into ``dst`` (same size), in order."""

    @abstractmethod
    def capture(self, body: Callable[[], None]) -> Any:
        """Record the launches ``body`` makes into a graph without running them; the
        graph's ``launch()`` enqueues them all, in order, on the addresses they were
        given. Raises where capture is unavailable."""


class CupyBackend(DeviceBackend):
    """The GPU: arrays from CuPy's memory pool, kernels loaded from NVRTC cubins
    (disk-cached by ``nova.runtime.nvrtc``) with ``cuModuleLoadData``, launched on the
    current stream. A kernel shared by several steps is loaded once.

    Why not ``cupy.RawModule(path=...)``: it loads the file lazily, at the first
    ``get_function``, so a cubin written to a temporary file and removed after the
    constructor was gone by then (CUDA_ERROR_FILE_NOT_FOUND on the first GPU run), and
    it memoizes modules by path for the life of the process."""

    name = "cupy"

    def __init__(self) -> None:
        import cupy
        self.cupy = cupy
        self.xp = cupy
        self.oom_errors = (MemoryError, cupy.cuda.memory.OutOfMemoryError)
        self._spec = None
        self._modules: dict[tuple[str, str], tuple[Any, Any, Any]] = {}
        self._gather = None
        self._capture_stream = None

    def spec(self) -> Any:
        if self._spec is None:
            from nova.compiler.targets.cuda.device import from_device
            self._spec = from_device()
        return self._spec

    def upload(self, host: np.ndarray) -> Any:
        return self.cupy.asarray(np.ascontiguousarray(host))

    def download(self, buffer: Any) -> np.ndarray:
        return self.cupy.asnumpy(buffer)

    def is_device_array(self, x: Any) -> bool:
        return isinstance(x, self.cupy.ndarray)

    def _module(self, source: str, name: str, entry: str) -> Any:
        """A loaded ``cupy.cuda.function.Module`` for ``source`` (NVRTC -> cubin ->
        cuModuleLoadData; unloaded when the module object goes)."""
        from nova.runtime import nvrtc
        arch = self.spec().arch
        try:
            compiled = nvrtc.compile(source, arch, name=f"{name}.cu", entry=entry)
        except nvrtc.NvrtcError as e:
            path = dump_failed_source(name, arch, source)
            raise CudaCompileError(f"cuda: kernel {name} did not compile for {arch}; its "
                                   f"source is in {path}\n{e}") from None
        module = self.cupy.cuda.function.Module()
        module.load(bytes(compiled.cubin))
        return module

    def load(self, kernels: Sequence[tuple[Any, Any]]) -> list[Any]:
        handles = []
        spec = self.spec()
        for k, _plan in kernels:
            key = (k.digest, spec.arch)
            if key not in self._modules:
                module = self._module(k.source, k.name, k.entry)
                fn = module.get_function(k.entry)   # (keeps the module loaded)
                if k.shared_bytes > spec.smem_per_block:   # opt in beyond 48 KiB
                    driver = self.cupy.cuda.driver
                    driver.funcSetAttribute(
                        fn.ptr, driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        k.shared_bytes)
                flag = module.get_global_var("nova_error_flag")   # its device address
                self.cupy.cuda.runtime.memset(flag, 0, 4)
                self._modules[key] = (module, fn, flag)
            module, fn, flag = self._modules[key]
            handles.append((k, fn, flag))
        return handles

    def launch(self, handle: Any, args: Sequence[Any]) -> None:
        k, fn, _ = handle
        fn(k.grid, k.block, tuple(args), shared_mem=k.shared_bytes)

    def flag_reader(self, handles: Sequence[Any]) -> Callable[[], list[int]]:
        """Gather every module's ``nova_error_flag`` with one tiny kernel into one array,
        then one device-to-host copy (which waits for the step)."""
        cupy = self.cupy
        if not handles:
            return lambda: []
        if self._gather is None:
            self._gather = self._module(FLAG_GATHER_SOURCE, "nova_gather_flags",
                                        "nova_gather_flags").get_function("nova_gather_flags")
        ptrs = cupy.asarray(np.array([h[2] for h in handles], dtype=np.uint64))
        out = cupy.zeros(len(handles), dtype=cupy.int32)
        n = np.int32(len(handles))
        gather = self._gather

        def read() -> list[int]:
            gather((1, 1, 1), (256, 1, 1), (ptrs, n, out))
            return [int(v) for v in out.get()]
        return read

    def synchronize(self) -> None:
        self.cupy.cuda.runtime.deviceSynchronize()

    supports_graphs = True

    def address(self, x: Any) -> int:
        return x.data.ptr

    def copy(self, dst: Any, src: Any) -> None:
        dst.data.copy_from_device_async(src.data, src.nbytes)   # the current stream

    def capture(self, body: Callable[[], None]) -> Any:
        """Stream capture on a stream of its own (the legacy default stream cannot be
        captured); the graph is launched on the current stream, after the work queued
        there before it."""
        if self._capture_stream is None:
            self._capture_stream = self.cupy.cuda.Stream(non_blocking=True)
        stream = self._capture_stream
        with stream:
            stream.begin_capture()
            try:
                body()
            finally:
                graph = stream.end_capture()
        graph.upload()
        return graph


# Reads every kernel module's ``nova_error_flag`` (through a device array of their
# addresses) into one array and clears the flags that were set.
FLAG_GATHER_SOURCE = r"""
extern "C" __global__ void nova_gather_flags(int* const* flags, int n, int* out) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    out[i] = *flags[i];
    if (out[i]) *flags[i] = 0;
  }
}
"""


def dump_failed_source(name: str, arch: str, source: str) -> str:
    """Write a kernel that failed to compile where a person can read it (the debug
    directory's ``cuda-failed``; see ``debug_dir``)."""
    return write_debug_file(debug_subdirectory("cuda-failed"), f"{name}.{arch}.cu", source)


_installed: list[DeviceBackend] = []     # test backends, innermost last
_default: dict[str, Any] = {}            # "backend" / "reason", probed once
# Called once with the GPU's backend when ``backend()`` creates it, before its first
# allocation (``nv.cuda`` starts its peak-memory tracking there).
on_create: list[Callable[[DeviceBackend], None]] = []


def unavailable_reason() -> str | None:
    """Why ``device="cuda"`` cannot run here (None when it can): CuPy missing, or no
    GPU/driver. Probed once; a backend installed by :func:`use_backend` always runs."""
    if _installed:
        return None
    if "reason" not in _default:
        _default["reason"] = _probe()
    return _default["reason"]


def _probe() -> str | None:
    try:
        import cupy
    except ImportError as e:
        return f"cupy is not installed ({e}); pip install 'nova-dl[cuda]'"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:   # the CUDA runtime raises its own error types
        return f"no GPU: the CUDA runtime reports {type(e).__name__}: {e}"
    if n == 0:
        return "no GPU: the CUDA driver reports no devices"
    return None


def is_available() -> bool:
    """``nv.cuda.is_available()``: whether ``device="cuda"`` works here."""
    return unavailable_reason() is None


def backend() -> DeviceBackend:
    """The active backend: the innermost installed test backend, else the GPU's."""
    if _installed:
        return _installed[-1]
    reason = unavailable_reason()
    if reason is not None:
        raise CudaUnavailable(f"CUDA is not available: {reason}")
    if "backend" not in _default:
        created = CupyBackend()
        for hook in on_create:
            hook(created)
        _default["backend"] = created
    return _default["backend"]


@contextlib.contextmanager
def use_backend(b: DeviceBackend) -> Iterator[DeviceBackend]:
    """Run ``device="cuda"`` on ``b`` inside the block (tests: the CPU emulator). Device
    tensors made inside belong to ``b``; do not use them after the block."""
    _installed.append(b)
    try:
        yield b
    finally:
        _installed.remove(b)


def to_device(host: np.ndarray) -> Any:
    """Upload a host array of a Nova dtype, as its storage type."""
    host = np.ascontiguousarray(host)
    return backend().upload(host.view(storage_dtype(host.dtype)))


def to_host(buffer: Any, np_dtype: Any) -> np.ndarray:
    """A host copy of a device buffer, as the Nova dtype's numpy type."""
    return backend().download(buffer).view(np.dtype(np_dtype))
