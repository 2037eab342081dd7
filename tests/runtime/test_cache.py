"""The structural-hash executable cache: one compile per structure, reasons per miss."""
import numpy as np
import pytest

import nova as nv
from nova.runtime.cache import RecompileWarning, explain_difference


def _step(x, w, lr):
    h = nv.relu(x @ w)
    return h.softmax(-1).sum(), w - lr * (x.T @ h)


def test_hundred_iterations_over_fresh_data_compile_once(fresh_cache):
    rng = np.random.default_rng(0)
    w = nv.tensor(rng.standard_normal((8, 8)).astype(np.float32))
    lr = nv.tensor(0.1)
    expected_w = w.numpy()
    nv.debug.reset_cache()
    for i in range(100):
        xb = rng.standard_normal((4, 8)).astype(np.float32)
        lr = nv.tensor(0.1 / (i + 1))       # a changing learning rate is a runtime input
        loss, w = _step(nv.tensor(xb), w, lr)
        loss.item()
        h = np.maximum(xb @ expected_w, 0)
        expected_w = expected_w - np.float32(0.1 / (i + 1)) * (xb.T @ h)
    stats = nv.debug.cache_stats()
    assert (stats.misses, stats.hits) == (1, 99)
    assert stats.miss_log[0].reason == "first compilation"
    np.testing.assert_allclose(w.numpy(), expected_w, rtol=1e-4, atol=1e-4)


def test_a_new_shape_misses_and_names_the_shape(fresh_cache):
    w = nv.zeros(8, 8)
    nv.realize(w)
    nv.debug.reset_cache()
    for batch in (4, 4, 6):
        loss, _ = _step(nv.tensor(np.zeros((batch, 8), np.float32)), w, nv.tensor(0.1))
        loss.item()
    stats = nv.debug.cache_stats()
    assert (stats.misses, stats.hits) == (2, 1)
    assert stats.miss_log[1].reason == "input 0 shape changed: (4, 8) -> (6, 8)"
    assert "test_cache.py" in stats.miss_log[1].site
    assert "input 0 shape changed" in str(stats)


def test_each_miss_reports_its_compile_seconds_and_kernels_compiled(fresh_cache, monkeypatch):
    """nv.debug.cache_stats() says what each compile cost: wall seconds of building
    the step, and how many kernels LLVM compiled for it (none on a kernel-cache hit)."""
    from nova.runtime import cache as cache_module
    counts = iter([10, 13, 13, 13])       # KERNELS.stats.compiled before/after each miss
    monkeypatch.setattr(cache_module, "_kernels_compiled", lambda: next(counts))
    x = nv.tensor(np.arange(6, dtype=np.float32))
    (x * 2.0 + 1.0).numpy()
    (x * 2.0 + 1.0).sum().numpy()
    first, second = nv.debug.cache_stats().miss_log
    assert (first.compiled, second.compiled) == (3, 0)
    assert first.seconds > 0 and second.seconds > 0
    text = str(nv.debug.cache_stats())
    assert ", 3 compiled, " in text and ", 0 compiled, " in text and " s]" in text


def test_the_compile_count_comes_from_the_kernel_cache():
    from nova.runtime.cache import _kernels_compiled
    from nova.runtime.kernel_cache import KERNELS
    before = _kernels_compiled()
    assert before == KERNELS.stats.compiled
    x = nv.tensor(np.arange(5, dtype=np.float32))
    fresh = float(np.random.default_rng().uniform(1, 2))    # a kernel nobody compiled
    (x * fresh).exp().numpy()
    assert _kernels_compiled() == before + 1 == KERNELS.stats.compiled


def test_miss_reasons_name_ops_attributes_and_dtypes():
    base = _key(lambda: nv.zeros(3).exp())
    assert explain_difference(_key(lambda: nv.zeros(3).log()), base) == \
        "value %1: op changed nova.exp -> nova.log"
    assert explain_difference(_key(lambda: nv.zeros(3, dtype=nv.float64).exp()), base) == \
        "value %0 (nova.constant): dtype changed float32 -> float64"
    assert "attributes changed" in explain_difference(_key(lambda: nv.full((3,), 2.0).exp()), base)
    assert explain_difference(base, None) == "first compilation"


def _key(make):
    from nova.tensor.realize import pending_graph
    return pending_graph(make()).key


def test_constants_differ_by_bits_not_equality():
    assert _key(lambda: nv.full((2,), float("nan"))) == _key(lambda: nv.full((2,), float("nan")))
    assert _key(lambda: nv.full((2,), 0.0)) != _key(lambda: nv.full((2,), -0.0))


def test_repeated_recompiles_at_one_site_warn(fresh_cache):
    with pytest.warns(RecompileWarning, match=r"has compiled 8 different step functions; latest "
                                              r"reason: input 0 shape changed"):
        for n in range(1, 10):
            (nv.zeros(n) + nv.tensor(np.ones(n, np.float32))).sum().item()


def test_shared_inputs_are_part_of_the_structure():
    a, b = nv.tensor([1.0]), nv.tensor([2.0])
    assert _key(lambda: a + a) != _key(lambda: a + b)


def test_a_compile_freezes_survivors_out_of_later_collections(monkeypatch):
    import gc

    import numpy as np

    import nova as nv
    gc.unfreeze()
    monkeypatch.setenv("NOVA_GC_FREEZE", "0")
    (nv.tensor(np.ones(3, np.float32)) * 3.5).sum().item()
    assert gc.get_freeze_count() == 0
    monkeypatch.setenv("NOVA_GC_FREEZE", "1")
    (nv.tensor(np.ones(3, np.float32)) * 4.5).sum().item()
    assert gc.get_freeze_count() > 0


def test_a_compile_raises_the_young_collection_threshold_never_lowers_it(monkeypatch):
    """A recorded step's trace objects die by reference counting before a collection
    would traverse them (``settle_garbage_collector``): the young generation's
    threshold is raised after a compile, unless collections are off or higher already."""
    import gc

    import numpy as np

    from nova.runtime.cache import YOUNG_GC_THRESHOLD
    saved = gc.get_threshold()
    try:
        def compile_new(c):
            (nv.tensor(np.ones(5, np.float32)) * c - 0.25).exp().sum().item()

        gc.set_threshold(700, 11, 12)
        monkeypatch.setenv("NOVA_GC_FREEZE", "0")
        compile_new(1.25)
        assert gc.get_threshold() == (700, 11, 12)
        monkeypatch.setenv("NOVA_GC_FREEZE", "1")
        compile_new(2.25)
        assert gc.get_threshold() == (YOUNG_GC_THRESHOLD, 11, 12)
        gc.set_threshold(YOUNG_GC_THRESHOLD * 2, 11, 12)
        compile_new(3.25)
        assert gc.get_threshold() == (YOUNG_GC_THRESHOLD * 2, 11, 12)
        gc.set_threshold(0, 11, 12)               # the user turned collections off
        compile_new(4.25)
        assert gc.get_threshold() == (0, 11, 12)
    finally:
        gc.set_threshold(*saved)
