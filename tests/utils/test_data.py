"""nova.utils.data against PyTorch's semantics: datasets, samplers, collation and the
loader (without torch installed the same expectations are spelled out; with it, the
deterministic cases are compared with torch.utils.data directly)."""
import collections

import numpy as np
import pytest

import nova as nv
from nova.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset,
                             IterableDataset, RandomSampler, SequentialSampler, Subset,
                             SubsetRandomSampler, TensorDataset, default_collate,
                             random_split)


def _xy(n=10):
    x = nv.tensor(np.arange(2 * n, dtype=np.float32).reshape(n, 2))
    y = nv.tensor(np.arange(n, dtype=np.int64) * 10)
    return x, y


def test_tensor_dataset_items_and_errors():
    x, y = _xy()
    ds = TensorDataset(x, y)
    assert len(ds) == 10
    xi, yi = ds[3]
    assert xi.numpy().tolist() == [6.0, 7.0] and int(yi) == 30
    with pytest.raises(ValueError, match=r"size mismatch.*\[10, 9\]"):
        TensorDataset(x, y[:9])
    with pytest.raises(TypeError, match="argument 1 is a ndarray"):
        TensorDataset(x, np.zeros(10))


def test_sequential_batches_keep_order_dtypes_and_a_short_last_batch():
    x, y = _xy()
    batches = list(DataLoader(TensorDataset(x, y), batch_size=4))
    assert [b[1].numpy().tolist() for b in batches] == [[0, 10, 20, 30], [40, 50, 60, 70],
                                                         [80, 90]]
    assert all(isinstance(b, list) and len(b) == 2 for b in batches)   # as torch: a list
    assert batches[0][0].dtype == nv.float32 and batches[0][1].dtype == nv.int64
    assert batches[2][0].numpy().tolist() == [[16.0, 17.0], [18.0, 19.0]]
    dropped = DataLoader(TensorDataset(x, y), batch_size=4, drop_last=True)
    assert len(dropped) == 2 and [len(b[1]) for b in dropped] == [4, 4]
    assert len(DataLoader(TensorDataset(x, y), batch_size=4)) == 3


def test_loading_a_tensor_dataset_compiles_nothing(fresh_cache):
    x, y = _xy(64)
    nv.realize(x, y)
    nv.debug.reset_cache()
    for _ in range(2):
        for xb, yb in DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True):
            assert xb.node.realized and xb.shape == (16, 2)
    assert nv.debug.cache_stats().misses == 0


def test_a_subset_of_a_tensor_dataset_batches_in_one_gather_like_its_samples(fresh_cache):
    x, y = _xy(20)
    ds = TensorDataset(x * 1.0, y)              # pending tensors are realized once, here
    train, _ = random_split(ds, [0.75, 0.25])
    nv.debug.reset_cache()
    fast = list(DataLoader(train, batch_size=4))
    slow = list(DataLoader(train, batch_size=4, collate_fn=default_collate))  # per sample
    assert nv.debug.cache_stats().misses == 0
    assert [[t.numpy().tolist() for t in b] for b in fast] == \
        [[t.numpy().tolist() for t in b] for b in slow]
    assert [[t.dtype for t in b] for b in fast] == [[t.dtype for t in b] for b in slow]


def test_shuffle_is_a_new_permutation_each_epoch_and_reproducible_by_seed():
    x, y = _xy(50)
    loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)

    def epoch():
        return [v // 10 for b in loader for v in b[1].numpy().tolist()]
    nv.manual_seed(123)
    first, second = epoch(), epoch()
    assert sorted(first) == sorted(second) == list(range(50))
    assert first != second and first != list(range(50))
    nv.manual_seed(123)
    assert epoch() == first
    g = nv.Generator(7)                       # an own generator: independent of the default
    own = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True, generator=g)
    a = [int(v) for b in own for v in b[1].numpy()]
    g.manual_seed(7)
    nv.manual_seed(999)
    assert [int(v) for b in own for v in b[1].numpy()] == a


def test_randperm_is_the_argsort_of_a_float64_draw_and_compiles_nothing(fresh_cache):
    nv.manual_seed(5)
    p = nv.randperm(100)
    assert p.dtype == nv.int64 and sorted(p.numpy().tolist()) == list(range(100))
    assert nv.debug.cache_stats().misses == 0
    nv.manual_seed(5)
    u = nv.rand(100, dtype=nv.float64).numpy()
    assert p.numpy().tolist() == np.argsort(u, kind="stable").tolist()
    assert nv.randperm(0).shape == (0,) and nv.randperm(4, dtype=nv.int32).dtype == nv.int32
    with pytest.raises(ValueError, match="non-negative int"):
        nv.randperm(-1)


def test_random_sampler_with_replacement_and_num_samples():
    ds = list(range(5))
    nv.manual_seed(1)
    draws = list(RandomSampler(ds, replacement=True, num_samples=200))
    assert len(draws) == 200 and set(draws) == set(range(5))
    counts = collections.Counter(draws)
    assert min(counts.values()) > 20                     # roughly uniform
    longer = list(RandomSampler(ds, num_samples=12))     # without replacement: epochs
    assert len(longer) == 12 and sorted(longer[:5]) == list(range(5))
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        RandomSampler(ds, num_samples=0)
    sub = list(SubsetRandomSampler([10, 20, 30]))
    assert sorted(sub) == [10, 20, 30]


def test_random_split_lengths_fractions_and_disjointness():
    ds = list(range(10))
    parts = random_split(ds, [3, 7])
    assert [len(p) for p in parts] == [3, 7]
    assert sorted(parts[0].indices + parts[1].indices) == list(range(10))
    frac = random_split(list(range(11)), [0.5, 0.3, 0.2])
    assert [len(p) for p in frac] == [6, 3, 2]          # floor 5, 3, 2; +1 to the first
    nv.manual_seed(4)
    a = random_split(ds, [5, 5])[0].indices
    nv.manual_seed(4)
    assert random_split(ds, [5, 5])[0].indices == a
    with pytest.raises(ValueError, match="does not equal the length"):
        random_split(ds, [3, 3])


def test_default_collate_follows_torch():
    Point = collections.namedtuple("Point", "x y")
    batch = [{"a": 1, "b": 2.5, "c": "s", "d": np.ones(3, np.float32), "e": Point(1, 2.0),
              "f": [1, 2], "g": True}] * 2
    out = default_collate(batch)
    assert out["a"].dtype == nv.int64 and out["a"].numpy().tolist() == [1, 1]
    assert out["b"].dtype == nv.float64 and out["c"] == ["s", "s"]
    assert out["d"].shape == (2, 3) and out["d"].dtype == nv.float32
    assert isinstance(out["e"], Point) and out["e"].y.dtype == nv.float64
    assert isinstance(out["f"], list) and out["f"][1].numpy().tolist() == [2, 2]
    assert out["g"].dtype == nv.bool
    pairs = default_collate([(1, "s"), (2, "t")])     # strings keep the batch's tuple
    assert pairs[1] == ("s", "t") and default_collate(["a", "b"]) == ["a", "b"]
    stacked = default_collate([nv.tensor([1.0, 2.0]), nv.tensor([3.0, 4.0])])
    assert stacked.shape == (2, 2) and stacked.numpy().tolist() == [[1, 2], [3, 4]]
    pending = default_collate([nv.tensor([1.0]) * 2, nv.tensor([3.0]) * 2])   # not realized
    assert pending.numpy().tolist() == [[2.0], [6.0]]
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([nv.zeros(2), nv.zeros(3)])
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [1]])
    with pytest.raises(TypeError, match="found object"):
        default_collate([object()])


def test_map_style_custom_dataset_collate_fn_and_batch_sampler():
    class Squares(Dataset):
        def __len__(self):
            return 7

        def __getitem__(self, i):
            return i, float(i * i)
    got = [(i.numpy().tolist(), s.numpy().tolist()) for i, s in DataLoader(Squares(), 3)]
    assert got == [([0, 1, 2], [0.0, 1.0, 4.0]), ([3, 4, 5], [9.0, 16.0, 25.0]),
                   ([6], [36.0])]
    assert list(DataLoader(Squares(), batch_size=2, collate_fn=lambda b: len(b))) == \
        [2, 2, 2, 1]
    sampler = BatchSampler(SequentialSampler(range(5)), 2, drop_last=False)
    assert list(sampler) == [[0, 1], [2, 3], [4]] and len(sampler) == 3
    by_batches = DataLoader(Squares(), batch_sampler=[[6, 0], [3]])
    assert [b[0].numpy().tolist() for b in by_batches] == [[6, 0], [3]]
    single = list(DataLoader(Squares(), batch_size=None))       # no auto-batching:
    assert len(single) == 7 and single[2] == [2, 4.0]     # default_convert, as PyTorch's


def test_iterable_datasets_batch_as_they_stream():
    class Stream(IterableDataset):
        def __iter__(self):
            return iter(np.arange(5, dtype=np.int64))
    assert [b.numpy().tolist() for b in DataLoader(Stream(), batch_size=2)] == \
        [[0, 1], [2, 3], [4]]
    assert [b.numpy().tolist() for b in DataLoader(Stream(), batch_size=2, drop_last=True)] \
        == [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match="unspecified shuffle"):
        DataLoader(Stream(), shuffle=True)


def test_subset_and_concat_index_like_torch():
    a, b = list(range(3)), list(range(10, 14))
    cat = ConcatDataset([a, b])
    assert len(cat) == 7 and [cat[i] for i in range(7)] == [0, 1, 2, 10, 11, 12, 13]
    assert cat[-1] == 13 and cat[-7] == 0
    with pytest.raises(IndexError):
        cat[7]
    with pytest.raises(ValueError, match="absolute value of index -8 should not exceed"):
        cat[-8]                                  # PyTorch's ValueError
    assert cat.cumulative_sizes == [3, 7] and type(cat.cumulative_sizes[0]) is int
    sub = Subset(b, [3, 0])
    assert len(sub) == 2 and (sub[0], sub[1]) == (13, 10)


def test_argument_checks_name_what_is_wrong():
    ds = list(range(4))
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        DataLoader(ds, sampler=SequentialSampler(ds), shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        DataLoader(ds, batch_sampler=[[0]], batch_size=2)
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        DataLoader(ds, batch_size=0)
    with pytest.raises(ValueError, match="mutually exclusive with drop_last"):
        DataLoader(ds, batch_size=None, drop_last=True)
    with pytest.raises(ValueError, match="num_workers"):
        DataLoader(ds, num_workers=-1)
    with pytest.raises(ValueError, match="prefetch_factor and persistent_workers need"):
        DataLoader(ds, prefetch_factor=2)
    with pytest.raises(ValueError, match="prefetch_factor should be a positive integer"):
        DataLoader(ds, num_workers=1, prefetch_factor=0)
    with pytest.raises(ValueError, match="timeout option should be non-negative"):
        DataLoader(ds, timeout=-1)


def test_deterministic_loading_matches_torch():
    torch = pytest.importorskip("torch")
    from torch.utils import data as tdata
    samples = [{"x": np.full(2, i, np.float32), "n": i, "f": i / 2, "t": (i, [i, -i])}
               for i in range(7)]
    ours = list(DataLoader(samples, batch_size=3))
    theirs = list(tdata.DataLoader(samples, batch_size=3))

    def plain(v):
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return (np.asarray(v.numpy()).tolist(), str(v.dtype).split(".")[-1])
    assert [plain(b) for b in ours] == [plain(b) for b in theirs]
    for n, fracs in ((11, [0.5, 0.3, 0.2]), (10, [0.25, 0.75]), (7, [0.1, 0.1, 0.8])):
        assert [len(p) for p in random_split(list(range(n)), fracs)] == \
            [len(p) for p in tdata.random_split(list(range(n)), fracs)]
    assert torch is not None


def test_batches_follow_in_place_changes_and_subclass_items():
    """Regressions: the one-gather batch path re-reads a tensor changed in place, and is
    not taken for a subclass with its own __getitem__ or for tensors needing grad."""
    x = nv.arange(6.0).reshape(3, 2)
    ds = TensorDataset(x, nv.arange(3))
    assert next(iter(DataLoader(ds, batch_size=3)))[0].numpy().tolist() == \
        [[0, 1], [2, 3], [4, 5]]
    x.mul_(10)
    assert next(iter(DataLoader(ds, batch_size=3)))[0].numpy().tolist() == \
        [[0, 10], [20, 30], [40, 50]]

    class Plus(TensorDataset):
        def __getitem__(self, i):
            a, b = super().__getitem__(i)
            return a + 1000, b
    plus = Plus(nv.zeros(2, 2), nv.arange(2))
    assert next(iter(DataLoader(plus, batch_size=2)))[0].numpy().tolist() == [[1000] * 2] * 2
    assert next(iter(DataLoader(Subset(plus, [1]), batch_size=1)))[0].numpy().tolist() == \
        [[1000, 1000]]
    w = nv.ones(3).requires_grad_()
    (wb,) = next(iter(DataLoader(TensorDataset(w.unsqueeze(1) * 2), batch_size=3)))
    assert wb.requires_grad                     # stacked in the graph, as torch.stack is
    wb.sum().backward()
    assert w.grad.numpy().tolist() == [2, 2, 2]
    od = default_collate([collections.OrderedDict(a=1)] * 2)
    assert type(od) is collections.OrderedDict
    assert nv.randperm(np.int64(4)).shape == (4,)


def test_a_host_random_draw_inside_nv_compile_runs_recorded_with_the_same_draws():
    """A replay would skip a host draw (randperm, a shuffling loader): such a function
    runs recorded every call, so the generator advances exactly as without nv.compile."""
    from nova.runtime.cache import RecompileWarning
    w = nv.zeros(3)

    def f(x):
        nv.randperm(8)
        w.add_(x)
        return w

    def offsets(fn):
        nv.manual_seed(0)
        w.zero_()
        for _ in range(5):
            fn(nv.ones(3)).numpy()
        return nv.default_generator.get_state()
    eager = offsets(f)
    with pytest.warns(RecompileWarning, match="draws random numbers on the host"):
        compiled = offsets(nv.compile(f))
    assert compiled == eager == (0, 5)


def test_the_loaders_arguments_are_pytorchs_in_pytorchs_order():
    import inspect
    torch_data = pytest.importorskip("torch.utils.data")
    ours = list(inspect.signature(DataLoader.__init__).parameters)
    assert ours == list(inspect.signature(torch_data.DataLoader.__init__).parameters)
