"""``nova.utils.data`` as PyTorch's package: the submodule paths scripts import from
(``.dataset``, ``.sampler``, ``.distributed``, ``.dataloader``, ``._utils.collate``,
``._utils.worker``), and ``default_collate``'s dtypes, which are ``torch.tensor``'s
inference (a float among ints makes a float32 batch, not a truncated int64 one)."""
import collections
import importlib
import pickle

import numpy as np
import pytest

import nova as nv
import nova.utils.data as data
from nova.utils.data import default_collate, default_convert

# (batch, dtype, values): what torch.utils.data.default_collate gives (torch 2.x)
COLLATE_CASES = [
    ([1, 2.5], nv.float32, [1.0, 2.5]),
    ([2, 0.5, True], nv.float32, [2.0, 0.5, 1.0]),
    ([True, 2], nv.int64, [1, 2]),
    ([True, False], nv.bool, [True, False]),
    ([1, 2], nv.int64, [1, 2]),
    ([1.0, 2], nv.float64, [1.0, 2.0]),               # a float first: float64
    ([1.0, np.float32(2)], nv.float64, [1.0, 2.0]),
    ([1, np.float64(2.5)], nv.float64, [1.0, 2.5]),   # an int first: torch.tensor's rule
    ([1, np.float32(2.5)], nv.float32, [1.0, 2.5]),
    ([np.int64(1), 2.5], nv.float32, [1.0, 2.5]),     # numpy first: torch.as_tensor's rule
    ([np.float64(1.0), 2], nv.float64, [1.0, 2.0]),
    ([np.float32(1), np.float32(2)], nv.float32, [1.0, 2.0]),
    ([np.float16(1), np.float32(2)], nv.float32, [1.0, 2.0]),
    ([np.int32(1), np.int32(2)], nv.int32, [1, 2]),
    ([np.int32(1), 2], nv.int64, [1, 2]),
    ([np.uint8(1), np.int8(2)], nv.int16, [1, 2]),
    ([np.int64(1), np.float32(2.5)], nv.float32, [1.0, 2.5]),
]


@pytest.mark.parametrize("batch,dtype,values", COLLATE_CASES)
def test_default_collate_infers_pytorchs_dtype_for_numbers(batch, dtype, values):
    out = default_collate(batch)
    assert out.dtype == dtype and out.tolist() == pytest.approx(values)


def test_a_float_target_among_ints_is_not_truncated():
    out = default_collate([{"x": nv.ones(2), "y": 0}, {"x": nv.zeros(2), "y": 0.7}])
    assert out["y"].dtype == nv.float32
    np.testing.assert_allclose(out["y"].numpy(), [0.0, 0.7], rtol=1e-6)
    pairs = default_collate([(1, 2), (2.5, 3)])             # a tuple field too
    assert pairs[0].dtype == nv.float32 and pairs[0].tolist() == [1.0, 2.5]


def test_mixed_tensor_and_array_dtypes_promote_as_torch_stack():
    t = default_collate([nv.tensor([1]), nv.tensor([2.5])])
    assert t.dtype == nv.float32 and t.tolist() == [[1.0], [2.5]]
    a = default_collate([np.array([1]), np.array([2.5], np.float32)])
    assert a.dtype == nv.float32 and a.tolist() == [[1.0], [2.5]]   # numpy would say f64
    same = default_collate([np.array([1], np.int32), np.array([2], np.uint8)])
    assert same.dtype == nv.int32
    with pytest.raises(RuntimeError, match=r"equal size, but got \[2\] at entry 0 and "
                                           r"\[3\] at entry 1"):
        default_collate([np.zeros(2), np.zeros(3)])
    with pytest.raises(TypeError, match="expected Tensor as element 1"):
        default_collate([nv.zeros(2), 3])
    with pytest.raises(TypeError, match="found <U1"):
        default_collate([np.array(["a"]), np.array(["b"])])


def test_default_convert_keeps_numpy_dtypes_and_passes_numbers_through():
    f = default_convert(np.float32(2.5))
    assert f.dtype == nv.float32 and f.shape == () and f.item() == 2.5
    assert default_convert(np.int64(3)).dtype == nv.int64
    assert default_convert(3) == 3 and default_convert(2.5) == 2.5
    assert default_convert((np.float64(1), "s"))[0].dtype == nv.float64
    assert default_convert(np.array(["a"])).dtype.kind == "U"     # strings stay arrays


def test_collate_with_a_collate_fn_map_extends_default_collate():
    """PyTorch's documented extension: ``collate`` with one's own entries added to
    ``default_collate_fn_map`` (an exact type first, then isinstance in order)."""
    from nova.utils.data._utils.collate import (collate, collate_tensor_fn,
                                                default_collate_fn_map)

    class Box:
        def __init__(self, v):
            self.v = v

    def collate_box(batch, *, collate_fn_map=None):
        return sum(b.v for b in batch)
    fn_map = {**default_collate_fn_map, Box: collate_box}
    out = collate([{"b": Box(2), "n": 1}, {"b": Box(3), "n": 2}], collate_fn_map=fn_map)
    assert out["b"] == 5 and out["n"].tolist() == [1, 2]
    with pytest.raises(TypeError, match="found Box"):
        default_collate([Box(1)])
    assert collate_tensor_fn([nv.ones(2), nv.zeros(2)]).tolist() == [[1, 1], [0, 0]]


def test_collated_containers_keep_their_type_as_pytorchs():
    class Tagged(list):
        tag = "kept"

    out = default_collate([Tagged([1, 2]), Tagged([3, 4])])
    assert type(out) is Tagged and [t.tolist() for t in out] == [[1, 3], [2, 4]]
    assert type(default_collate([(1, 2), (3, 4)])) is list      # a tuple becomes a list
    od = default_collate([collections.OrderedDict(b=1, a=2)] * 2)
    assert type(od) is collections.OrderedDict and list(od) == ["b", "a"]


# PyTorch's submodules of torch.utils.data and (some of) the names each holds
SUBMODULE_NAMES = {
    "dataset": ["ChainDataset", "ConcatDataset", "Dataset", "IterableDataset",
                "StackDataset", "Subset", "TensorDataset", "random_split"],
    "sampler": ["BatchSampler", "RandomSampler", "Sampler", "SequentialSampler",
                "SubsetRandomSampler", "WeightedRandomSampler"],
    "distributed": ["DistributedSampler"],
    "dataloader": ["DataLoader", "default_collate", "default_convert", "get_worker_info"],
    "_utils.collate": ["collate", "collate_float_fn", "collate_int_fn",
                       "collate_numpy_array_fn", "collate_numpy_scalar_fn",
                       "collate_str_fn", "collate_tensor_fn", "default_collate",
                       "default_collate_err_msg_format", "default_collate_fn_map",
                       "default_convert"],
    "_utils.worker": ["WorkerInfo", "get_worker_info"],
}


@pytest.mark.parametrize("sub", sorted(SUBMODULE_NAMES))
def test_pytorchs_submodule_paths_import_the_same_objects(sub):
    module = importlib.import_module(f"nova.utils.data.{sub}")
    for name in SUBMODULE_NAMES[sub]:
        obj = getattr(module, name)
        if hasattr(data, name):
            assert obj is getattr(data, name), (sub, name)
    if hasattr(module, "__all__"):
        assert set(module.__all__) <= set(dir(module))


def test_the_from_imports_of_ddp_and_older_scripts():
    from nova.utils.data._utils.collate import default_collate as dc
    from nova.utils.data.dataloader import DataLoader, default_collate
    from nova.utils.data.dataset import Dataset, TensorDataset
    from nova.utils.data.distributed import DistributedSampler
    from nova.utils.data.sampler import BatchSampler, RandomSampler
    assert dc is default_collate is data.default_collate and DataLoader is data.DataLoader
    assert issubclass(TensorDataset, Dataset) and issubclass(RandomSampler, data.Sampler)
    ds = TensorDataset(nv.arange(8))
    sampler = DistributedSampler(ds, num_replicas=2, rank=1, shuffle=False)
    assert list(sampler) == [1, 3, 5, 7]
    assert list(BatchSampler(sampler, 3, False)) == [[1, 3, 5], [7]]
    assert data._utils.collate.default_collate is dc and data.dataloader.DataLoader is DataLoader


def test_classes_pickle_by_their_module_path():
    """Spawned DataLoader workers receive the loader pickled: every class must be found
    where its ``__module__`` says."""
    ds = data.TensorDataset(nv.arange(6).float())
    loader = data.DataLoader(ds, batch_size=2, sampler=data.SequentialSampler(ds))
    for obj in (ds, loader, loader.sampler, loader.batch_sampler):
        cls = type(obj)
        assert getattr(importlib.import_module(cls.__module__), cls.__name__) is cls
    assert getattr(importlib.import_module(default_collate.__module__),
                   "default_collate") is default_collate
    again = pickle.loads(pickle.dumps(loader))
    assert [b[0].tolist() for b in again] == [[0, 1], [2, 3], [4, 5]]


def test_pytorchs_submodules_hold_these_names():
    torch_data = pytest.importorskip("torch.utils.data")
    for sub, names in SUBMODULE_NAMES.items():
        theirs = importlib.import_module(f"{torch_data.__name__}.{sub}")
        assert all(hasattr(theirs, n) for n in names), sub
        mine = importlib.import_module(f"nova.utils.data.{sub}")
        assert set(getattr(theirs, "__all__", [])) <= set(dir(mine)), sub


@pytest.mark.parametrize("batch,dtype,values", COLLATE_CASES)
def test_default_collate_matches_torch(batch, dtype, values):
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate as torch_collate
    want = torch_collate(batch)
    got = default_collate(batch)
    assert str(want.dtype).removeprefix("torch.") == got.dtype.name
    assert want.tolist() == got.tolist()
    assert torch is not None
