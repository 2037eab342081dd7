"""CUDA graphs (``nova.runtime.launch_graph``): a step's launches captured once and
replayed give the plain launches' bits, never write over what a caller holds, and fall
back to plain launches when the addresses, the donations or the capture do not allow
one.

Every test runs on the CUDA emulator (``tests/runtime/emulated_cuda.py``, whose graphs
hold raw addresses as CUDA's do) and, marked ``cuda``, on a GPU through CuPy."""
from __future__ import annotations

import contextlib
import shutil

import numpy as np
import pytest

import nova as nv
from nova import config
from nova.runtime import cuda_runtime
from nova.runtime.cache import CACHE
from nova.runtime.cuda_runtime import use_backend
from nova.runtime.launch_graph import COUNTS, MAX_CAPTURES, LaunchGraph
from tests.runtime.emulated_cuda import EmulatorBackend

STEPS = 6


@pytest.fixture(params=["emulator", pytest.param("gpu", marks=pytest.mark.cuda)])
def device(request):
    """The cuda backend to run on: the emulator, or the GPU (``cuda`` tests)."""
    nv.debug.reset_cache()
    if request.param == "emulator":
        if shutil.which("g++") is None:
            pytest.skip("the CUDA emulator needs g++ (C++20)")
        scope = use_backend(EmulatorBackend())
    else:
        if not cuda_runtime.is_available():
            pytest.skip(f"no GPU: {cuda_runtime.unavailable_reason()}")
        scope = contextlib.nullcontext(cuda_runtime.backend())
    with scope as backend:
        yield backend
        with contextlib.suppress(Exception):
            nv.realize()
    nv.debug.reset_cache()


def _loop(steps: int = STEPS, keep: bool = False, swap_at: int | None = None):
    """A small MLP with dropout trained by AdamW on the device: (losses as read after
    the loop, final parameters, per-step donated-argument counts). ``keep`` holds each
    step's loss tensor and parameters until the end (reading them only then);
    ``swap_at`` gives the first layer's weight new memory before that step."""
    nv.manual_seed(0)
    model = nv.nn.Sequential(nv.nn.Linear(8, 32), nv.nn.GELU(), nv.nn.Dropout(0.1),
                             nv.nn.Linear(32, 3)).to("cuda")
    opt = nv.optim.AdamW(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    losses, kept, donated = [], [], []
    for i in range(steps):
        if i == swap_at:
            w = model[0].weight
            held = w.clone()            # (so the update cannot write over the old memory)
            with nv.no_grad():
                w.copy_(w * 1.0)        # the same values in a buffer of their own
            nv.realize(w)
            assert held.node.buffer is not w.node.buffer
            del held
        x = nv.tensor(rng.standard_normal((16, 8)).astype(np.float32), device="cuda")
        y = nv.tensor(rng.integers(0, 3, 16), device="cuda")
        loss = nv.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if keep:
            kept.append([p.clone() for p in model.parameters()])
        opt.step()
        opt.zero_grad()
        donated.append(len(CACHE.last.last_donated))
        losses.append(loss if keep else loss.item())
    if keep:
        losses = [t.item() for t in losses]
        for before, params in zip(kept, kept[1:]):   # what the caller held is intact
            assert any((a.numpy() != b.numpy()).any() for a, b in zip(before, params))
    return losses, [p.numpy() for p in model.parameters()], donated


def _plain(**kw):
    with config.CUDA_GRAPHS.overridden("0"):
        nv.debug.reset_cache()
        out = _loop(**kw)
    nv.debug.reset_cache()
    return out


def _assert_same(a, b) -> None:
    assert a[0] == b[0]
    for x, y in zip(a[1], b[1]):
        np.testing.assert_array_equal(x, y)


def test_a_training_loop_replays_one_graph_with_the_plain_launches_bits(device):
    want = _plain()
    assert COUNTS.captures == 0
    got = _loop()
    _assert_same(want, got)
    stats = nv.debug.cache_stats()
    # run 1 plain (it allocates the arena), run 2 captures, every run from 2 replays
    assert stats.graph_captures == 1 and stats.graph_replays == STEPS - 1
    assert "cuda graphs: 1 captured" in str(stats)
    # the graph writes the parameters and both moments over their old memory, as the
    # plain launches do
    assert got[2] == want[2] and got[2][-1] == 12
    graph = CACHE.last._program.graphs.graph
    assert graph.donated and len(graph.donated) == 12
    assert None in graph.addresses            # the batch is staged: new every step


def test_results_the_caller_still_holds_are_not_written_over(device):
    """Escaping results are copied out of the graph's own buffers: the loss tensors and
    parameters the caller holds (undonated, so their updates escape too) keep the
    values each step gave them."""
    want = _plain(keep=True)
    got = _loop(keep=True)
    _assert_same(want, got)
    assert got[2] == want[2]
    assert nv.debug.cache_stats().graph_replays >= 1


def test_an_argument_at_a_new_address_runs_plain_then_recaptures(device):
    want = _plain(swap_at=3)
    got = _loop(swap_at=3)
    _assert_same(want, got)
    stats = nv.debug.cache_stats()
    # the swapped weight's step runs plain; the next captures again with it in place
    assert stats.graph_captures == 2 and stats.graph_replays == STEPS - 2


def test_a_failed_capture_warns_once_and_runs_plain_launches(device, monkeypatch):
    want = _plain()

    def refuse(body):
        raise RuntimeError("stream capture is not supported here")
    monkeypatch.setattr(device, "capture", refuse)
    with pytest.warns(RuntimeWarning, match="without a CUDA graph: capturing its launches "
                                            "failed.*not supported here") as caught:
        got = _loop()
    assert len([w for w in caught if "CUDA graph" in str(w.message)]) == 1
    _assert_same(want, got)
    stats = nv.debug.cache_stats()
    assert stats.graph_replays == 0 and "not supported here" in stats.graph_without[0]


def test_an_index_error_in_a_replayed_graph_names_the_kernel_and_poisons_only_it(device):
    table = nv.tensor(np.arange(12, dtype=np.float32).reshape(4, 3), device="cuda")

    def lookup(rows):
        return (table[nv.tensor(np.array(rows), device="cuda")] * 2).sum()
    for _ in range(3):
        assert lookup([0, 3]).item() == 2 * (0 + 1 + 2 + 9 + 10 + 11)
    assert nv.debug.cache_stats().graph_replays >= 1
    replays = nv.debug.cache_stats().graph_replays
    bad = lookup([0, 7])
    with pytest.raises(nv.RealizationError, match=r"cuda: kernel \w+ \(\w+\) reported an "
                                                  "index out of range"):
        bad.item()
    assert nv.debug.cache_stats().graph_replays == replays + 1   # it ran as the graph
    assert lookup([1, 2]).item() == 2 * (3 + 4 + 5 + 6 + 7 + 8)   # the flag was cleared


def test_a_graph_fits_only_its_addresses_and_at_least_its_donations():
    g = LaunchGraph(None, (10, None, 30), {1: None}, frozenset({0}), [])
    assert g.fits([10, 99, 30], frozenset({0, 2}))
    assert not g.fits([11, 99, 30], frozenset({0}))      # a stable argument moved
    assert not g.fits([10, 99, 30], frozenset())         # its donation was withdrawn
    assert MAX_CAPTURES >= 2
