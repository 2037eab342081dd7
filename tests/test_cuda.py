"""``nv.cuda`` (``nova/cuda/``): the submodules PyTorch code imports, and the memory,
random-state and initialization helpers scripts call unconditionally -- without CUDA
(PyTorch's CPU-only answers), on a stand-in CuPy whose memory pool the test controls
(the code path a GPU takes), on the CUDA emulator (a backend without a pool), and,
marked ``cuda``, on a real GPU."""
import importlib
import sys
import types

import numpy as np
import pytest

import nova as nv
from nova.runtime import cuda_runtime
from tests.runtime.emulated_cuda import EmulatorBackend


def test_the_submodules_import_as_pytorch_code_imports_them():
    from nova.cuda.amp import GradScaler, autocast, custom_bwd, custom_fwd
    import nova.backends.cuda
    import nova.backends.cudnn as cudnn
    from nova.cpu.amp import autocast as cpu_autocast

    # the same objects as attribute access, every time (the older nv.cuda.amp built new
    # classes per access, so isinstance against one of them failed)
    assert nv.cuda.amp.autocast is autocast and nv.cuda.amp.GradScaler is GradScaler
    assert nv.cuda.amp is importlib.import_module("nova.cuda.amp")
    assert (custom_fwd, custom_bwd) == (nv.cuda.amp.custom_fwd, nv.cuda.amp.custom_bwd)
    assert nv.cpu.amp.autocast is cpu_autocast
    assert nv.backends.cudnn is cudnn and nv.backends.cuda is nova.backends.cuda
    assert nv.cuda.memory is importlib.import_module("nova.cuda.memory")
    with pytest.warns(FutureWarning, match=r"nova.amp.GradScaler\('cuda'"):
        scaler = GradScaler(enabled=False)
    assert isinstance(scaler, nv.cuda.amp.GradScaler) and isinstance(scaler, nv.amp.GradScaler)
    with pytest.warns(FutureWarning, match=r"nova.amp.autocast\('cpu'"):
        with cpu_autocast():
            assert nv.is_autocast_enabled("cpu")
    # the legacy CUDA tensor types stay attributes
    assert nv.cuda.FloatTensor.dtype is nv.float32
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        nv.cuda.nope


def test_a_flag_set_through_the_submodule_reads_back_through_the_attribute():
    import nova.backends.cudnn as cudnn
    old = cudnn.benchmark, cudnn.deterministic
    try:
        cudnn.benchmark, cudnn.deterministic = True, True
        assert nv.backends.cudnn.benchmark and nv.backends.cudnn.deterministic
    finally:
        cudnn.benchmark, cudnn.deterministic = old
    assert not cudnn.is_available() and cudnn.version() is None


def test_out_of_memory_error_is_novas_under_torchs_names():
    assert nv.OutOfMemoryError is nv.cuda.OutOfMemoryError is nv.NovaOutOfMemoryError
    assert issubclass(nv.cuda.OutOfMemoryError, MemoryError)
    assert issubclass(nv.cuda.OutOfMemoryError, RuntimeError)


@pytest.fixture
def no_cuda(monkeypatch):
    """CUDA unavailable, whatever the machine has."""
    monkeypatch.setattr(cuda_runtime, "_default", {"reason": "no GPU (test)"})
    monkeypatch.setattr(cuda_runtime, "_installed", [])


def test_without_cuda_the_helpers_answer_as_pytorchs_cpu_build(no_cuda):
    # torch 2.13+cpu: memory queries 0, empty_cache a no-op, is_initialized False,
    # get_rng_state_all [], seed_all/set_rng_state_all silently nothing
    assert not nv.cuda.is_available() and not nv.cuda.is_initialized()
    for query in (nv.cuda.memory_allocated, nv.cuda.max_memory_allocated,
                  nv.cuda.memory_reserved, nv.cuda.max_memory_reserved):
        assert query() == 0 and query(0) == 0 and query("cuda:0") == 0
    assert nv.cuda.empty_cache() is None
    assert nv.cuda.reset_peak_memory_stats() is None   # (torch's CPU build: AttributeError)
    assert nv.cuda.get_rng_state_all() == []
    nv.manual_seed(3)
    before = nv.get_rng_state().tolist()
    nv.cuda.seed_all()
    nv.cuda.seed()
    nv.cuda.set_rng_state_all([nv.tensor([1, 2])])     # not even checked, as torch's
    assert nv.get_rng_state().tolist() == before        # the CPU's draws are untouched
    assert nv.version.cuda is None


class _FakePool:
    """CuPy's ``MemoryPool`` as the pool statistics see it: freed blocks stay cached
    (total = used + cached) until ``free_all_blocks``."""

    def __init__(self):
        self.used = self.cached = self.total = 0
        self.frees = 0

    def malloc(self, size):
        if self.cached >= size:
            self.cached -= size
        else:
            self.total += size
        self.used += size
        return _FakeMemory(self, size)

    def used_bytes(self):
        return self.used

    def total_bytes(self):
        return self.total

    def free_all_blocks(self):
        self.frees += 1
        self.total -= self.cached
        self.cached = 0


class _FakeMemory:
    def __init__(self, pool, size):
        self.pool, self.size = pool, size

    def free(self):
        self.pool.used -= self.size
        self.pool.cached += self.size


@pytest.fixture
def fake_cupy(monkeypatch):
    """A stand-in ``cupy`` module with one GPU and a controllable pool: Nova's CUDA
    backend is created on it as on a real GPU (nothing is launched)."""
    pool = _FakePool()
    state = {"allocator": pool.malloc}
    cupy = types.ModuleType("cupy")
    cupy.get_default_memory_pool = lambda: pool
    cupy.cuda = types.SimpleNamespace(
        get_allocator=lambda: state["allocator"],
        set_allocator=lambda fn=None: state.update(allocator=fn or pool.malloc),
        runtime=types.SimpleNamespace(getDeviceCount=lambda: 1,
                                      runtimeGetVersion=lambda: 13000),
        memory=types.SimpleNamespace(OutOfMemoryError=type("OutOfMemoryError",
                                                           (MemoryError,), {})))
    cupy.alloc = lambda size: state["allocator"](size)     # what cupy.empty calls
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(cuda_runtime, "_default", {})
    monkeypatch.setattr(cuda_runtime, "_installed", [])
    return cupy, pool


def test_with_cuda_the_memory_helpers_read_cupys_pool_and_its_peaks(fake_cupy):
    cupy, pool = fake_cupy
    assert nv.cuda.is_available() and not nv.cuda.is_initialized()
    pool.used = pool.total = 512                   # before Nova's first CUDA use...
    assert nv.cuda.memory_allocated() == 0         # ...nothing is reported, as torch's
    nv.cuda.empty_cache()
    assert pool.frees == 0

    cuda_runtime.backend()                         # the first CUDA use creates it
    assert nv.cuda.is_initialized()
    a = cupy.alloc(1000)                           # through Nova's peak-noting wrapper
    assert nv.cuda.memory_allocated() == 1512 == nv.cuda.memory_reserved()
    b = cupy.alloc(3000)
    b.free()                                       # cached by the pool, not released
    assert nv.cuda.memory_allocated() == 1512
    assert nv.cuda.max_memory_allocated() == 4512  # the peak, between two queries
    assert nv.cuda.memory_reserved() == nv.cuda.max_memory_reserved() == 4512

    nv.cuda.reset_peak_memory_stats()              # peaks restart from the current values
    assert nv.cuda.max_memory_allocated() == 1512
    assert nv.cuda.max_memory_reserved() == 4512
    nv.cuda.empty_cache()                          # free_all_blocks: reserved -> allocated
    assert pool.frees == 1
    assert nv.cuda.memory_reserved() == 1512 and nv.cuda.max_memory_reserved() == 4512
    c = cupy.alloc(100)
    assert nv.cuda.max_memory_allocated() == 1612 and nv.cuda.max_memory_reserved() == 4512
    a.free(), c.free()

    for ok in (0, "cuda", "cuda:0", nv.device("cuda"), nv.device("cuda", 0)):
        assert nv.cuda.memory_allocated(ok) == 512
    for bad, match in ((1, "cuda:0 only"), ("cuda:1", "cuda:0 only"),
                       ("cpu", "Expected a cuda device"), ("tpu", "invalid device")):
        with pytest.raises(ValueError, match=match):
            nv.cuda.max_memory_reserved(bad)
    assert nv.version.cuda == "13.0"


def test_with_cuda_the_rng_states_are_novas_one_generator(fake_cupy):
    nv.manual_seed(11)
    states = nv.cuda.get_rng_state_all()
    assert len(states) == 1 and states[0].tolist() == nv.get_rng_state().tolist()
    first = nv.rand(4).numpy()
    nv.cuda.set_rng_state_all(states)
    np.testing.assert_array_equal(nv.rand(4).numpy(), first)
    with pytest.raises(ValueError, match="set_rng_state"):
        nv.cuda.set_rng_state_all([nv.tensor([1.0])])
    nv.cuda.seed_all()                             # a fresh seed, shared with the CPU
    assert nv.initial_seed() != 11


def test_on_the_emulator_cuda_is_initialized_and_keeps_no_pool(monkeypatch):
    monkeypatch.setattr(cuda_runtime, "_installed", [])
    with cuda_runtime.use_backend(EmulatorBackend()):
        x = nv.ones(8, device="cuda") * 2
        assert x.sum().item() == 16.0
        assert nv.cuda.is_available() and nv.cuda.is_initialized()
        assert nv.cuda.memory_allocated() == 0 == nv.cuda.max_memory_reserved()
        nv.cuda.empty_cache()
        nv.cuda.reset_peak_memory_stats()


@pytest.mark.cuda
def test_on_a_gpu_the_memory_helpers_report_the_pool():
    nv.cuda.reset_peak_memory_stats()
    x = nv.ones(1 << 20, device="cuda") * 2        # 4 MiB
    assert x.sum().item() == float(1 << 21)
    assert nv.cuda.is_initialized()
    allocated = nv.cuda.memory_allocated()
    assert allocated >= 4 << 20
    assert nv.cuda.max_memory_allocated() >= allocated
    assert nv.cuda.memory_reserved() >= allocated
    del x
    nv.cuda.empty_cache()
    assert nv.cuda.memory_reserved() >= nv.cuda.memory_allocated()
    assert nv.cuda.max_memory_reserved() >= 4 << 20
    assert nv.version.cuda is not None and nv.version.cuda[0].isdigit()
