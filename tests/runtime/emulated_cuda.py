"""A test-only device backend: the cuda engine on the CPU.

``EmulatorBackend`` implements ``nova.runtime.cuda_runtime.DeviceBackend`` with numpy
arrays standing in for device memory and ``tests.compiler.cuda_emulator.Emulator``
executing the generated CUDA C (compiled by the host C++ compiler, every CUDA thread an
OS thread). Installed with ``cuda_runtime.use_backend``, it lets ``device="cuda"``
tensors, the cuda engine's compilation pipeline, arena views, donation, error flags and
launch order run in ordinary tests. Device arrays are writable numpy arrays; host
buffers bound to CPU tensors are read-only views, so an engine handed a host buffer
by mistake is caught by ``is_device_array``.
"""
from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from nova.compiler.targets.cuda.device import SM80, CudaSpec
from nova.runtime.cuda_runtime import DeviceBackend


class EmulatorBackend(DeviceBackend):
    """Kernels of one ``load`` call are built into one shared library (one compiler
    run per step structure, cached on disk under ``$NOVA_CACHE_DIR/cuda-emulator``)."""

    name = "emulator"
    xp = np

    def __init__(self, spec: CudaSpec = SM80):
        # Its own name keeps emulated executables apart from a real GPU's in the cache.
        self._spec = replace(spec, name=f"emulated {spec.name}")
        self.launches: list[str] = []          # kernel names, in launch order
        self.loads = 0                         # load() calls: steps compiled
        self.uploads = 0
        self._flags: dict[int, int] = {}
        self.captures = 0                      # graphs captured
        self.graph_launches = 0                # graph replays
        self.copies = 0                        # device-to-device copies (graph staging)
        self._recording: list | None = None

    def spec(self) -> CudaSpec:
        return self._spec

    def upload(self, host: np.ndarray) -> np.ndarray:
        self.uploads += 1
        return np.array(host, copy=True, order="C")

    def download(self, buffer: np.ndarray) -> np.ndarray:
        return np.array(buffer, copy=True)

    def is_device_array(self, x: Any) -> bool:
        return isinstance(x, np.ndarray) and x.flags.writeable

    def load(self, kernels: Sequence[tuple[Any, Any]]) -> list[Any]:
        from tests.compiler.cuda_emulator import Emulator

        self.loads += 1
        # Entry-point suffixes numbered per load: a program compiled again produces the
        # same library source, so the emulator's disk cache serves it.
        keyed = [(f"_e{i}", k, plan) for i, (k, plan) in enumerate(kernels)]
        emu = Emulator(keyed) if keyed else None
        return [(emu, key, k, plan) for key, k, plan in keyed]

    def launch(self, handle: Any, args: Sequence[np.ndarray]) -> None:
        if self._recording is not None:     # inside capture(): queued, not run
            # by address, as a CUDA graph holds them: no reference keeps an array alive
            # (or makes it look shared to donation's reference counts)
            self._recording.append((handle, [(self.address(a), a.shape, a.dtype)
                                             for a in args]))
            return
        self._execute(handle, args)

    def _execute(self, handle: Any, args: Sequence[np.ndarray]) -> None:
        emu, key, k, plan = handle
        n_in = len(plan.arg_types) - 1
        inputs, out = list(args[:n_in]), args[n_in]
        scratch = args[n_in + 1] if plan.scratch is not None else None
        for a in args:
            assert self.is_device_array(a) and a.flags.c_contiguous, (
                f"{k.name}: launched on a non-device or non-contiguous array")
        flag = emu.run(key, k, plan, inputs, out, scratch)
        self.launches.append(k.name)
        if flag:
            self._flags[id(handle)] = 1

    def flag_reader(self, handles: Sequence[Any]) -> Callable[[], list[int]]:
        ids = [id(h) for h in handles]
        keep = list(handles)     # ids stay valid while the reader lives

        def read() -> list[int]:
            assert keep is not None
            return [self._flags.pop(i, 0) for i in ids]
        return read

    supports_graphs = True

    def address(self, x: np.ndarray) -> int:
        return x.__array_interface__["data"][0]

    def copy(self, dst: np.ndarray, src: np.ndarray) -> None:
        assert self.is_device_array(dst) and dst.nbytes == src.nbytes
        self.copies += 1
        np.copyto(dst, src.reshape(dst.shape), casting="no")

    def capture(self, body: Callable[[], None]) -> EmulatedGraph:
        """Stream capture as CUDA does it: the launches ``body`` makes are recorded with
        the arrays (addresses) they were given and nothing runs until ``launch()``."""
        assert self._recording is None, "nested capture"
        self._recording = []
        try:
            body()
            recorded = self._recording
        finally:
            self._recording = None
        self.captures += 1
        return EmulatedGraph(self, recorded)


class EmulatedGraph:
    """A captured launch sequence: ``launch()`` runs every kernel, in order, on the
    memory at the addresses it was captured with."""

    def __init__(self, backend: EmulatorBackend, launches: list[tuple[Any, list]]):
        self.backend = backend
        self.launches = launches

    def launch(self) -> None:
        self.backend.graph_launches += 1
        for handle, args in self.launches:
            self.backend._execute(handle, [_at(*a) for a in args])


def _at(address: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The memory at ``address`` as a writable array: what a graph's kernel parameter
    points at (whatever lives there now)."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes == 0:
        return np.empty(shape, dtype)
    raw = (ctypes.c_byte * nbytes).from_address(address)
    return np.frombuffer(raw, dtype).reshape(shape)
