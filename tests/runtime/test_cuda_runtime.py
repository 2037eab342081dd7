"""``CupyBackend`` against a stand-in for CuPy's module API, on machines without a GPU.

The first run on a real GPU (an H200, CuPy 14.2) failed every engine step with
CUDA_ERROR_FILE_NOT_FOUND: the backend wrote each cubin to a temporary file, built a
``cupy.RawModule(path=...)`` and removed the file, but RawModule loads lazily at the
first ``get_function``. The stand-in here loads only from bytes that exist at the call
(``cuModuleLoadData``), records the driver calls, and so checks what the backend hands
the driver: the cubin's bytes, the opt-in for more than 48 KiB of shared memory, the
error flag zeroed at its device address -- and that each kernel loads once."""
from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import numpy as np
import pytest

from nova.compiler.targets.cuda.device import SM90
from nova.runtime import nvrtc


@dataclass
class _Kernel:
    source: str
    name: str
    entry: str
    digest: str
    shared_bytes: int


class _Driver:
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

    def __init__(self, log):
        self.log = log

    def funcSetAttribute(self, ptr, attribute, value):
        self.log.append(("funcSetAttribute", ptr, attribute, value))


def _fake_cupy(log):
    class Function:
        def __init__(self, module, name):
            self.module, self.name = module, name
            self.ptr = hash((module.cubin, name)) & 0xFFFF_FFFF

    class Module:
        def __init__(self):
            self.cubin = None

        def load(self, cubin):
            assert isinstance(cubin, bytes)
            self.cubin = cubin
            log.append(("load", cubin))

        def load_file(self, path):      # what RawModule(path=) would come to
            raise AssertionError("kernels load from bytes, never from a file")

        def get_function(self, name):
            assert self.cubin is not None, "get_function before the module was loaded"
            return Function(self, name)

        def get_global_var(self, name):
            assert self.cubin is not None
            return 0x7000 + len(log)

    runtime = types.SimpleNamespace(
        memset=lambda ptr, value, n: log.append(("memset", ptr, value, n)))
    cuda = types.SimpleNamespace(function=types.SimpleNamespace(Module=Module),
                                 driver=_Driver(log), runtime=runtime,
                                 memory=types.SimpleNamespace(OutOfMemoryError=MemoryError))
    return types.SimpleNamespace(cuda=cuda, ndarray=np.ndarray)


def test_kernels_load_from_the_cubin_bytes_once_with_their_shared_memory_opt_in(monkeypatch):
    from nova.runtime.cuda_runtime import CupyBackend

    log = []
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(log))
    compiled = []

    def fake_compile(source, arch, name="kernel.cu", entry=None, **_):
        cubin = f"cubin of {name} for {arch}".encode()
        compiled.append(name)
        return types.SimpleNamespace(cubin=bytearray(cubin))    # any bytes-like

    monkeypatch.setattr(nvrtc, "compile", fake_compile)
    be = CupyBackend()
    be._spec = SM90
    small = _Kernel("src a", "nova_k_a", "nova_k_a", "da", 1024)
    big = _Kernel("src b", "nova_k_b", "nova_k_b", "db", SM90.smem_per_block + 16384)
    handles = be.load([(small, None), (big, None), (small, None)])

    assert compiled == ["nova_k_a.cu", "nova_k_b.cu"]     # the repeated kernel loads once
    loads = [e[1] for e in log if e[0] == "load"]
    assert loads == [b"cubin of nova_k_a.cu for sm_90", b"cubin of nova_k_b.cu for sm_90"]
    (k0, f0, flag0), (k1, f1, flag1), (k2, f2, flag2) = handles
    assert (k0, k1, k2) == (small, big, small) and f2 is f0 and flag2 == flag0
    assert f0.name == "nova_k_a" and f1.name == "nova_k_b"
    # only the kernel past 48 KiB opts in, with its own size
    assert [e for e in log if e[0] == "funcSetAttribute"] == [
        ("funcSetAttribute", f1.ptr, 8, big.shared_bytes)]
    # each module's error flag zeroed at the address the flag reader gathers from
    assert [e[1:] for e in log if e[0] == "memset"] == [(flag0, 0, 4), (flag1, 0, 4)]
    assert isinstance(flag0, int) and flag0 != flag1


def test_a_kernel_that_does_not_compile_names_itself_and_leaves_its_source(monkeypatch,
                                                                          tmp_path):
    from nova.runtime.cuda_runtime import CudaCompileError, CupyBackend

    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy([]))
    monkeypatch.setenv("NOVA_DEBUG_DIR", str(tmp_path))

    def failing(source, arch, name="kernel.cu", entry=None, **_):
        raise nvrtc.NvrtcError(f"{name}(3): error: expected a ';'")

    monkeypatch.setattr(nvrtc, "compile", failing)
    be = CupyBackend()
    be._spec = SM90
    with pytest.raises(CudaCompileError,
                       match=r"kernel nova_k_bad did not compile for sm_90") as info:
        be.load([(_Kernel("int x", "nova_k_bad", "nova_k_bad", "dx", 0), None)])
    path = str(info.value).split("its source is in ")[1].split("\n")[0]
    assert open(path).read() == "int x"
