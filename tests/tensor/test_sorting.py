"""sort, argsort, topk, msort and multinomial against PyTorch: values, positions (the
sort is stable, so ties are compared exactly against PyTorch's stable order), NaN
placement, integer and half keys, every dim, gradients through the values, and the
errors a bad argument gets. The kernel is ``nova.argsort`` (CPU: a merge sort per row,
``targets.cpu.llvm_sort``); its IR and the interpreter's meaning are checked too."""
import re

import numpy as np
import pytest

import nova as nv
from nova.compiler.pipeline import compile_step, front
from nova.compiler.targets import get_target
from nova.tensor.realize import pending_graph

torch = pytest.importorskip("torch")


def _keys(shape, seed=0, nan=True):
    """Few distinct values (many ties), some NaN, a -0.0 among the zeros."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-2, 3, size=shape).astype(np.float32)
    if nan:
        a[rng.random(shape) < 0.15] = np.nan
    a[a == 0] = np.where(rng.random(a[a == 0].shape) < 0.5, -0.0, 0.0)
    return a


CASES = [((7,), -1), ((3, 9), 1), ((3, 9), 0), ((4, 5, 6), 1), ((2, 1000), -1),
         ((5, 1), -1), ((1, 2, 33), 2)]


@pytest.mark.parametrize("engine", ["cpu", "interp"])
@pytest.mark.parametrize("shape,dim", CASES)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_matches_torchs_stable_sort(engine, shape, dim, descending):
    a = _keys(shape, seed=len(shape) + dim)
    ref = torch.sort(torch.from_numpy(a), dim=dim, descending=descending, stable=True)
    with nv.engine(engine):
        got = nv.sort(nv.tensor(a), dim=dim, descending=descending)
        order = nv.tensor(a).argsort(dim=dim, descending=descending)
        np.testing.assert_array_equal(got.indices.numpy(), ref.indices.numpy())
        np.testing.assert_array_equal(order.numpy(), ref.indices.numpy())
        np.testing.assert_array_equal(got.values.numpy(), ref.values.numpy())
    assert got.indices.dtype == nv.int64


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64, np.bool_])
def test_sort_keys_of_other_dtypes(dtype):
    rng = np.random.default_rng(1)
    a = rng.integers(-(2 ** 40), 2 ** 40, size=(3, 50)).astype(dtype)
    if dtype == np.int64:
        a[0, :3] = [np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0]
    for descending in (False, True):
        ref = torch.sort(torch.from_numpy(a), dim=-1, descending=descending, stable=True)
        got = nv.sort(nv.tensor(a), descending=descending)
        np.testing.assert_array_equal(got.indices.numpy(), ref.indices.numpy())
        np.testing.assert_array_equal(got.values.numpy(), ref.values.numpy())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_keys_sort_as_their_values(dtype):
    a = np.random.default_rng(2).standard_normal((4, 40)).astype(np.float32)
    t = torch.from_numpy(a).to(getattr(torch, dtype))
    ref = torch.sort(t, descending=True, stable=True)
    got = nv.sort(nv.tensor(a).to(getattr(nv, dtype)), descending=True)
    np.testing.assert_array_equal(got.indices.numpy(), ref.indices.numpy())


def test_topk_largest_and_smallest_against_torch():
    x = np.random.default_rng(3).standard_normal((4, 50304)).astype(np.float32)
    for largest in (True, False):
        v, i = nv.topk(nv.tensor(x), 7, largest=largest)
        rv, ri = torch.topk(torch.from_numpy(x), 7, largest=largest)
        np.testing.assert_array_equal(i.numpy(), ri.numpy())
        np.testing.assert_array_equal(v.numpy(), rv.numpy())
    v, i = nv.tensor(x[:, :30]).topk(3, dim=0)
    rv, ri = torch.from_numpy(x[:, :30]).topk(3, dim=0)
    np.testing.assert_array_equal(i.numpy(), ri.numpy())
    assert nv.topk(nv.tensor(x[:, :5]), 0).values.shape == (4, 0)


def test_topk_prefers_nan_and_then_the_first_of_equal_values():
    a = np.array([[1.0, np.nan, 3.0, 3.0, 2.0, 3.0]], np.float32)
    v, i = nv.topk(nv.tensor(a), 3)
    np.testing.assert_array_equal(i.numpy(), [[1, 2, 3]])
    assert np.isnan(v.numpy()[0, 0])


def test_gradients_flow_through_the_values():
    a = np.random.default_rng(4).standard_normal((3, 8)).astype(np.float32)
    w = np.random.default_rng(5).standard_normal((3, 3)).astype(np.float32)
    x = nv.tensor(a, requires_grad=True)
    (nv.topk(x, 3).values * nv.tensor(w)).sum().backward()
    s = nv.sort(x, dim=0, descending=True).values
    (s * s).sum().backward()
    tx = torch.tensor(a, requires_grad=True)
    (torch.topk(tx, 3).values * torch.from_numpy(w)).sum().backward()
    ts = torch.sort(tx, dim=0, descending=True).values
    (ts * ts).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


def test_msort_and_zero_dim_inputs():
    a = _keys((5, 3), nan=False)
    np.testing.assert_array_equal(nv.msort(nv.tensor(a)).numpy(),
                                  torch.msort(torch.from_numpy(a)).numpy())
    s = nv.sort(nv.tensor(2.5))
    assert s.values.shape == () and s.indices.shape == () and int(s.indices) == 0
    assert nv.topk(nv.tensor(2.5), 1).values.item() == 2.5


def test_bad_arguments_are_refused_with_the_op_and_shape():
    x = nv.tensor(np.zeros((2, 5), np.float32))
    with pytest.raises(ValueError, match=r"topk: k=6 must be an int in \[0, 5\].*\(2, 5\)"):
        nv.topk(x, 6)
    with pytest.raises(IndexError, match="argsort"):
        nv.argsort(x, dim=2)
    with pytest.raises(TypeError, match="sort: expected a Tensor"):
        nv.sort([3, 1])


def test_the_argsort_kernel_is_a_merge_sort_over_rows_with_a_scratch():
    """Input IR: one ``nova.argsort``; output: a ``sort`` plan parallel over rows, no
    plan scratch (a call's keys and spare indices are its own heap buffers: memory per
    thread, not per row), and ceil(log2 N) merge passes in the LLVM IR."""
    x = nv.tensor(np.zeros((6, 100), np.float32))
    module = front(pending_graph(nv.argsort(x * 2.0, descending=True)))
    text = str(module)
    assert "nova.argsort" in text and "descending = 1" in text
    step = compile_step(module, "cpu")
    (plan,) = [p for p in step.plans if p.kind == "sort"]
    assert plan.schedule.strategy == "sort" and plan.schedule.loops == (6, 100)
    assert plan.schedule.parallel_dim == 0
    assert plan.scratch is None
    # the producer (x * 2) fused into the kernel: computed once per key
    assert any(type(op).__name__ == "MulOp" for op in plan.fusion.body.block.ops)
    llvm = get_target("cpu").emit(plan)
    assert sorted(set(int(n) for n in re.findall(r"pass(\d+)\.head", llvm))) \
        == list(range(7))


def test_the_sort_kernel_on_a_cuda_spec_is_a_block_per_row():
    from nova.compiler.targets.cuda.codegen import generate
    from nova.compiler.targets.cuda.device import SM80
    x = nv.tensor(np.zeros((6, 100), np.float32))
    step = compile_step(front(pending_graph(nv.argsort(x))), "cuda")
    (plan,) = [p for p in step.plans if p.kind == "sort"]
    kernel = generate(plan, SM80)
    assert kernel.config.strategy == "block_sort" and kernel.block == (32, 1, 1)
    assert kernel.grid[0] == 6 and "scratch" in kernel.arg_order
    # scratch per block of the grid (N spare indices and N keys each), not per row
    scheduled = get_target("cuda", spec=SM80).schedule(plan)
    assert scheduled.scratch == ((6 * 2 * 100,), nv.int64)
    rows = [p for p in compile_step(front(pending_graph(
        nv.argsort(nv.tensor(np.zeros((5000, 8), np.float32))))), "cuda").plans
        if p.kind == "sort"][0]
    big = get_target("cuda", spec=SM80).schedule(rows)
    assert big.scratch[0][0] == generate(big, SM80).grid[0] * 2 * 8 < 5000 * 2 * 8


def test_multinomial_frequencies_follow_the_weights():
    nv.manual_seed(0)
    w = nv.tensor([[1.0, 2.0, 7.0, 0.0], [0.0, 0.0, 1.0, 1.0]])
    draws = nv.multinomial(w, 20000, replacement=True).numpy()
    assert draws.shape == (2, 20000) and draws.dtype == np.int64
    freq = np.stack([np.bincount(r, minlength=4) / r.size for r in draws])
    np.testing.assert_allclose(freq[0], [0.1, 0.2, 0.7, 0.0], atol=0.015)
    np.testing.assert_allclose(freq[1], [0.0, 0.0, 0.5, 0.5], atol=0.015)
    assert freq[0, 3] == 0 and freq[1, :2].sum() == 0


def test_multinomial_without_replacement_draws_distinct_categories():
    nv.manual_seed(1)
    w = nv.tensor(np.ones((500, 6), np.float32) * np.array([8, 4, 2, 1, 1, 0], np.float32))
    s = nv.multinomial(w, 5).numpy()
    assert all(len(set(r)) == 5 and 5 not in r for r in s)
    first = np.bincount(s[:, 0], minlength=6) / 500
    np.testing.assert_allclose(first, [0.5, 0.25, 0.125, 0.0625, 0.0625, 0], atol=0.06)
    one = nv.tensor([0.2, 0.8]).multinomial(1)
    assert one.shape == (1,)


def test_multinomial_is_reproducible_and_compiles_once_in_a_loop():
    w = nv.tensor([0.3, 0.3, 0.4])
    nv.manual_seed(7)
    a = [int(nv.multinomial(w, 1)) for _ in range(5)]
    nv.manual_seed(7)
    b = [int(nv.multinomial(w, 1)) for _ in range(5)]
    assert a == b
    stats = nv.debug.cache_stats()
    assert stats.hits >= 8


def test_multinomial_refuses_invalid_weights_known_on_the_host():
    """PyTorch's CPU checks: a negative, infinite or NaN weight, or a row of zeros --
    these drew the bad category every time (its log was NaN, the argmax's pick)."""
    cases = [([1.0, -1.0, 2.0], "entry < 0"), ([1.0, np.nan, 2.0], "infinity or NaN"),
             ([1.0, np.inf], "infinity or NaN"), ([[1.0, 1.0], [0.0, 0.0]], "sum of "
                                                                           "probabilities <= 0")]
    for weights, match in cases:
        with pytest.raises(RuntimeError, match=f"multinomial: invalid multinomial "
                                               f"distribution \\(.*{match}"):
            nv.multinomial(nv.tensor(weights), 2, replacement=True)
    assert nv.multinomial(nv.tensor([0.0, 1.0, 0.0]), 3, replacement=True).tolist() == [1] * 3
    computed = nv.tensor([1.0, 2.0]) - 3.0          # not read back: no host check
    assert nv.multinomial(computed, 1).shape == (1,)


def test_multinomial_refuses_bad_arguments():
    with pytest.raises(ValueError, match="cannot draw 3 samples without replacement from 2"):
        nv.multinomial(nv.tensor([0.5, 0.5]), 3)
    with pytest.raises(ValueError, match="1-D or 2-D float"):
        nv.multinomial(nv.tensor([[[1.0]]]), 1)
    with pytest.raises(ValueError, match="num_samples must be a positive int"):
        nv.multinomial(nv.tensor([1.0]), 0)
