"""nova.utils.data: WeightedRandomSampler, ChainDataset (and ``+`` on streams),
StackDataset and default_convert, with PyTorch's semantics spelled out (the draws are
reimplemented here from the generator's uniforms, so the expected indices are exact)."""
import collections
import math

import numpy as np
import pytest

import nova as nv
from nova.tensor.random import host_uniform
from nova.utils.data import (ChainDataset, DataLoader, Dataset, IterableDataset,
                             StackDataset, TensorDataset, WeightedRandomSampler,
                             default_convert)

W = [1.0, 2.0, 0.0, 3.0, 4.0]


def _with_replacement(w, n, gen):
    """Inverse-CDF on one draw of ``n`` float64 uniforms."""
    w = np.asarray(w, np.float64) / max(w)
    cdf = np.cumsum(w)
    u = host_uniform(n, gen)
    return [min(int(np.searchsorted(cdf, x * cdf[-1], side="right")), 4) for x in u]


def _without_replacement(w, n, gen):
    """The ``n`` smallest exponential arrival times -log(1 - u_i) / w_i."""
    w = np.asarray(w, np.float64) / max(w)
    u = host_uniform(len(w), gen)
    arrival = [-math.log1p(-x) / wi if wi > 0 else math.inf for x, wi in zip(u, w)]
    return sorted(range(len(w)), key=lambda i: arrival[i])[:n]


def test_weighted_sampler_draws_exactly_the_reimplemented_indices():
    sampler = WeightedRandomSampler(W, 12, generator=nv.Generator(7))
    ref = nv.Generator(7)
    assert list(sampler) == _with_replacement(W, 12, ref)
    assert list(sampler) == _with_replacement(W, 12, ref)     # a new draw each epoch
    assert len(sampler) == 12
    no_rep = WeightedRandomSampler(nv.tensor(W), 4, replacement=False,
                                   generator=nv.Generator(3))
    ref = nv.Generator(3)
    first, second = list(no_rep), list(no_rep)
    assert first == _without_replacement(W, 4, ref) and second == _without_replacement(W, 4, ref)
    assert sorted(first) == [0, 1, 3, 4]          # all non-zero weights, each once
    # the default generator: reproducible under nv.manual_seed
    nv.manual_seed(11)
    a = list(WeightedRandomSampler(np.array(W), 6))
    nv.manual_seed(11)
    assert a == list(WeightedRandomSampler(W, 6)) == _with_replacement(W, 6, nv.Generator(11))
    # weights are kept as a float64 tensor; replacing them changes the next epoch
    assert sampler.weights.dtype == nv.float64 and sampler.weights.numpy().tolist() == W
    sampler.weights = [0.0, 0.0, 5.0, 0.0, 0.0]
    assert list(sampler) == [2] * 12


def test_weighted_sampler_frequencies_within_six_sigma():
    n = 20000
    counts = np.bincount(list(WeightedRandomSampler(W, n, generator=nv.Generator(0))),
                         minlength=5)
    p = np.array(W) / sum(W)
    assert counts[2] == 0
    assert np.all(np.abs(counts - n * p) <= 6 * np.sqrt(n * p * (1 - p)))
    # without replacement: the first pick is drawn by weight, the second among the rest
    sampler = WeightedRandomSampler(W, 2, replacement=False, generator=nv.Generator(1))
    epochs = 3000
    draws = [list(sampler) for _ in range(epochs)]
    assert all(a != b and 2 not in (a, b) for a, b in draws)
    first = np.bincount([a for a, _ in draws], minlength=5)
    assert np.all(np.abs(first - epochs * p) <= 6 * np.sqrt(epochs * p * (1 - p)))
    pair = sum(1 for d in draws if d == [4, 3])            # P = 4/10 * 3/6
    q = 0.4 * 0.5
    assert abs(pair - epochs * q) <= 6 * math.sqrt(epochs * q * (1 - q))


def test_weighted_sampler_errors():
    with pytest.raises(ValueError, match="num_samples should be a positive integer.*=0"):
        WeightedRandomSampler(W, 0)
    for bad in (2.0, True):
        with pytest.raises(ValueError, match="num_samples should be a positive integer"):
            WeightedRandomSampler(W, bad)
    with pytest.raises(ValueError, match="replacement should be a boolean.*=1"):
        WeightedRandomSampler(W, 2, replacement=1)
    with pytest.raises(ValueError, match=r"1d sequence.*shape \(1, 2\)"):
        WeightedRandomSampler([[1.0, 2.0]], 2)
    with pytest.raises(TypeError, match="weights should be a sequence of numbers, got list"):
        WeightedRandomSampler(["a", "b"], 2)
    # the weights are checked when drawn, as torch.multinomial does
    cases = [([1.0, -1.0], 2, True, r"entry < 0"),
             ([1.0, math.nan], 2, True, "infinity or NaN"),
             ([1.0, math.inf], 2, True, "infinity or NaN"),
             ([0.0, 0.0], 2, True, r"sum of probabilities <= 0"),
             ([], 1, True, "non-empty 1d"),
             ([1.0, 1.0], 3, False, r"n_sample > prob_dist.size\(-1\).*\(3 > 2\)"),
             ([1.0, 0.0, 0.0], 2, False, "not enough non-zero weights.*num_samples=2, 1 non")]
    for weights, n, replacement, message in cases:
        sampler = WeightedRandomSampler(weights, n, replacement=replacement)
        with pytest.raises(RuntimeError, match=message):
            list(sampler)
    assert list(WeightedRandomSampler([1.0, 0.0, 0.0], 1, replacement=False)) == [0]
    huge = WeightedRandomSampler([1e308, 1e308, 0.0], 50, generator=nv.Generator(0))
    assert set(huge) <= {0, 1}                     # a sum past float64's range still draws


def test_weighted_sampler_feeds_a_loader():
    x = nv.tensor(np.arange(5, dtype=np.int64) * 10)
    sampler = WeightedRandomSampler(W, 7, generator=nv.Generator(5))
    batches = [b[0].numpy().tolist() for b in DataLoader(TensorDataset(x), batch_size=3,
                                                         sampler=sampler)]
    want = [10 * i for i in _with_replacement(W, 7, nv.Generator(5))]
    assert batches == [want[:3], want[3:6], want[6:]]


class Count(IterableDataset):
    def __init__(self, start, stop):
        self.start, self.stop = start, stop

    def __iter__(self):
        return iter(range(self.start, self.stop))

    def __len__(self):
        return self.stop - self.start


class Endless(IterableDataset):
    def __iter__(self):
        return iter([7])


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        return i * i

    def __len__(self):
        return self.n


def test_chain_dataset_and_plus_on_streams():
    chain = ChainDataset([Count(0, 3), Count(10, 12)])
    assert list(chain) == [0, 1, 2, 10, 11] and list(chain) == [0, 1, 2, 10, 11]
    assert len(chain) == 5
    summed = Count(0, 2) + Count(5, 6) + Count(8, 9)
    assert isinstance(summed, ChainDataset) and list(summed) == [0, 1, 5, 8]
    assert len(summed) == 4
    batches = [b.numpy().tolist() for b in DataLoader(summed, batch_size=3)]
    assert batches == [[0, 1, 5], [8]]
    assert len(DataLoader(summed, batch_size=3)) == 2
    assert list(ChainDataset([])) == [] and len(ChainDataset([])) == 0
    with pytest.raises(TypeError, match="only supports IterableDataset, got a Squares at "
                                        "position 1"):
        list(ChainDataset([Count(0, 1), Squares(2)]))
    with pytest.raises(TypeError, match="only supports IterableDataset, got a list"):
        len(ChainDataset([[1, 2]]))
    with pytest.raises(TypeError):
        len(Count(0, 1) + Endless())               # a stream without a length
    assert list(Count(0, 1) + Endless()) == [0, 7]


def test_stack_dataset_tuples_dicts_and_length_checks():
    x = nv.tensor(np.arange(6, dtype=np.float32).reshape(3, 2))
    pairs = StackDataset(TensorDataset(x), Squares(3))
    (xi,), sq = pairs[2]
    assert xi.numpy().tolist() == [4.0, 5.0] and sq == 4 and len(pairs) == 3
    named = StackDataset(image=Squares(3), label=["a", "b", "c"])
    assert named[1] == {"image": 1, "label": "b"} and len(named) == 3
    batch = next(iter(DataLoader(named, batch_size=3)))
    assert batch["image"].numpy().tolist() == [0, 1, 4] and batch["label"] == ["a", "b", "c"]
    with pytest.raises(ValueError, match="size mismatch between datasets: 0: 3, 1: 2"):
        StackDataset(Squares(3), Squares(2))
    with pytest.raises(ValueError, match="size mismatch between datasets: a: 3, b: 4"):
        StackDataset(a=Squares(3), b=Squares(4))
    with pytest.raises(ValueError, match="both were given"):
        StackDataset(Squares(3), b=Squares(3))
    with pytest.raises(ValueError, match="at least one dataset"):
        StackDataset()


def test_default_convert_as_pytorch():
    Point = collections.namedtuple("Point", "x y")

    class Tagged(dict):
        tag = "kept"
    arr = default_convert(np.array([1, 2], dtype=np.int32))
    assert isinstance(arr, nv.Tensor) and arr.dtype == nv.int32 and arr.numpy().tolist() == [1, 2]
    scalar = default_convert(np.float64(2.5))
    assert scalar.dtype == nv.float64 and scalar.shape == () and scalar.item() == 2.5
    pair = default_convert((np.array([1.0], dtype=np.float32), 3, "s"))
    assert isinstance(pair, list) and pair[1:] == [3, "s"]       # a tuple becomes a list
    assert pair[0].dtype == nv.float32
    p = default_convert(Point(np.array(1), "a"))
    assert type(p) is Point and isinstance(p.x, nv.Tensor) and p.y == "a"
    d = Tagged(a=np.array([True]), b=[np.int64(4)])
    out = default_convert(d)
    assert type(out) is Tagged and out is not d and out.tag == "kept"
    assert out["a"].dtype == nv.bool and out["b"][0].item() == 4
    assert isinstance(d["a"], np.ndarray)                 # the input is left unchanged
    strings = np.array(["a", "b"])
    assert default_convert(strings) is strings and default_convert(np.str_("q")) == "q"
    assert default_convert(range(3)) == [0, 1, 2] and default_convert("abc") == "abc"
    t = nv.tensor([1.0])
    assert default_convert(t) is t and default_convert(None) is None
    # the loader's conversion without auto-batching
    single = list(DataLoader(StackDataset(Squares(2), Squares(2)), batch_size=None))
    assert single == [[0, 0], [1, 1]]


def test_structures_match_torch():
    torch_data = pytest.importorskip("torch.utils.data")

    class Stream(torch_data.IterableDataset):
        def __iter__(self):
            return iter(range(2))

    def shape(x):           # a value's structure, tensors as ("tensor", values)
        if hasattr(x, "numpy") and not isinstance(x, np.ndarray):
            return ("tensor", np.asarray(x.numpy()).tolist())
        if isinstance(x, dict):
            return (type(x).__name__, {k: shape(v) for k, v in x.items()})
        if isinstance(x, (list, tuple)):
            return (type(x).__name__, [shape(v) for v in x])
        return x if not isinstance(x, np.ndarray) else ("array", x.tolist())
    Point = collections.namedtuple("Point", "x y")
    for sample in [(np.array([1, 2]), 3), {"a": np.float32(2), "b": [np.int64(3), "s"]},
                   Point(np.array(1.5), ("q", np.array([True]))), range(2), np.array(["a"])]:
        assert shape(default_convert(sample)) == shape(torch_data.default_convert(sample))
    assert list(StackDataset(Squares(2), b"xy")) == list(torch_data.StackDataset(Squares(2),
                                                                                   b"xy"))
    assert list(Stream() + Stream()) == list(Count(0, 2) + Count(0, 2))
