"""The CPU arena's pages: fresh anonymous memory without numpy's huge-page request
(whose compaction stalls made a step's first run ~0.4 s slower on a medium GPT)."""
import sys

import numpy as np
import pytest

from nova.compiler.irgen import build_module
from nova.compiler.passes import optimize
from nova.runtime.cpu_engine import CpuProgram
from nova.runtime.host_pages import fresh_pages
from nova.tensor.realize import pending_graph
import nova as nv


def _vm_flags(address: int) -> list[str]:
    """The ``VmFlags`` of the mapping holding ``address`` (Linux's /proc/self/smaps)."""
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(maxsplit=1)[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= address < hi
            elif inside and line.startswith("VmFlags:"):
                return line.split()[1:]
    raise AssertionError(f"no mapping holds {address:#x}")


def test_fresh_pages_are_zeroed_aligned_and_writable():
    pages = fresh_pages(3 * 4096 + 5)
    assert pages.dtype == np.uint8 and pages.shape == (3 * 4096 + 5,)
    assert pages.ctypes.data % 4096 == 0 and not pages.any()
    pages[:] = 7
    view = pages[4096:4112].view(np.float32)
    view[:] = 1.5
    assert pages[4096:4100].tobytes() == np.float32(1.5).tobytes()


def test_fresh_pages_refuse_sizes_the_system_cannot_map():
    with pytest.raises(MemoryError, match="cannot map"):
        fresh_pages(1 << 62)
    with pytest.raises(MemoryError, match="address space"):
        fresh_pages(1 << 70)
    with pytest.raises(ValueError, match="positive"):
        fresh_pages(0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")
def test_fresh_pages_ask_for_no_huge_pages_where_numpy_does():
    size = 16 << 20
    numpy_array, ours = np.empty(size, np.uint8), fresh_pages(size)
    middle = size // 2      # (numpy advises from the first page boundary past malloc's header)
    if "hg" not in _vm_flags(numpy_array.ctypes.data + middle):
        pytest.skip("this numpy does not request transparent huge pages")
    assert "hg" not in _vm_flags(ours.ctypes.data + middle)


def test_the_cpu_arena_is_fresh_pages(monkeypatch):
    import nova.runtime.cpu_engine as cpu_engine
    made = []

    def recording(nbytes):
        made.append(fresh_pages(nbytes))
        return made[-1]

    monkeypatch.setattr(cpu_engine, "fresh_pages", recording)
    rng = np.random.default_rng(0)
    a = nv.tensor(rng.standard_normal((64, 48)).astype(np.float32))
    b = nv.tensor(rng.standard_normal((48, 48)).astype(np.float32))
    graph = pending_graph(((a @ b).exp() * 2).sum(-1))
    program = CpuProgram(optimize(build_module(graph)))
    args = [np.array(x) for x in graph.arg_buffers]
    (got,) = program(args)
    np.testing.assert_allclose(got, (np.exp(args[0] @ args[1]) * 2).sum(-1), rtol=1e-4)
    arena = program._arena_buffer
    assert arena.nbytes == max(program.memory_plan.arena_bytes, 1)
    assert len(made) == 1 and arena is made[0]
