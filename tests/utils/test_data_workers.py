"""DataLoader worker processes (``num_workers > 0``): the same batches as one process, in
the sampler's order, loaded elsewhere; iterable datasets sharded with get_worker_info;
seeds; and the faults -- an exception, a worker that dies, a timeout, an early break --
each ending in a clear error or a clean shutdown, never a hang."""
import gc
import multiprocessing
import os
import time

import numpy as np
import pytest

import nova as nv
from nova.utils.data import (DataLoader, Dataset, IterableDataset, TensorDataset,
                             get_worker_info)


def _xy(n=20):
    return TensorDataset(nv.tensor(np.arange(2 * n, dtype=np.float32).reshape(n, 2)),
                         nv.tensor(np.arange(n, dtype=np.int64)))


def _plain(value):
    """A batch as Python values (tensors as lists), to compare loaders' batches."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value.tolist() if hasattr(value, "tolist") else value


def _values(batches):
    return [_plain(b) for b in batches]


class Where(Dataset):
    """Each sample says which process and worker loaded it."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = get_worker_info()
        return np.array([i, os.getpid(), -1 if info is None else info.id])


@pytest.mark.parametrize("workers", [1, 3])
def test_the_batches_are_those_of_one_process_in_the_samplers_order(workers):
    ds = _xy()
    for kwargs in (dict(batch_size=3, shuffle=True), dict(batch_size=4, drop_last=True),
                   dict(batch_size=None),
                   dict(batch_size=2, collate_fn=lambda b: [int(s[1]) for s in b])):
        def load(n):
            gen = nv.Generator().manual_seed(5)
            return _values(DataLoader(ds, num_workers=n, generator=gen, **kwargs))
        assert load(workers) == load(0), kwargs


def test_each_batch_is_loaded_in_a_worker_process_round_robin():
    assert get_worker_info() is None
    rows = [b.tolist() for b in DataLoader(Where(), batch_size=2, num_workers=2)]
    assert [r[0] for b in rows for r in b] == list(range(8))
    pids = {r[1] for b in rows for r in b}
    assert os.getpid() not in pids and len(pids) == 2
    assert [b[0][2] for b in rows] == [0, 1, 0, 1]


class Shards(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        return iter(range(info.id, self.n, info.num_workers))


def test_an_iterable_dataset_is_sharded_by_get_worker_info():
    batches = [b.tolist() for b in DataLoader(Shards(11), batch_size=2, num_workers=3)]
    assert sorted(x for b in batches for x in b) == list(range(11))
    assert batches[:3] == [[0, 3], [1, 4], [2, 5]]          # one batch per worker in turn
    assert _values(DataLoader(Shards(4), batch_size=None, num_workers=2)) \
        == [0, 1, 2, 3]


class Failing(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        if i == 3:
            raise KeyError(f"sample {i} is missing")
        return i


def test_an_exception_in_a_worker_is_raised_with_its_traceback():
    with pytest.raises(RuntimeError, match=r"(?s)Caught KeyError in DataLoader worker "
                                           r"process \d\..*__getitem__.*sample 3 is missing"):
        list(DataLoader(Failing(), batch_size=1, num_workers=2))


class Dying(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        if i == 2:
            os._exit(7)          # a crash, the OOM killer: no exception to send back
        return i


def test_a_worker_that_dies_is_an_error_not_a_hang():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"DataLoader worker \d \(pid \d+\) exited "
                                           r"unexpectedly with exit code 7"):
        list(DataLoader(Dying(), batch_size=1, num_workers=2))
    assert time.monotonic() - start < 30
    assert multiprocessing.active_children() == []


class Slow(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        time.sleep(60 if i == 1 else 0)
        return i


def test_a_timeout_ends_the_wait():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="timed out after 0.5 seconds"):
        list(DataLoader(Slow(), batch_size=1, num_workers=1, timeout=0.5))
    assert time.monotonic() - start < 30
    assert multiprocessing.active_children() == []


class Draws(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return np.array([float(nv.rand(())), get_worker_info().id, get_worker_info().seed])


def test_workers_are_seeded_per_worker_and_epoch_reproducibly():
    seen = []
    loader = DataLoader(Draws(), batch_size=1, num_workers=2,
                        worker_init_fn=lambda w: seen.append(w))
    first = [b.tolist()[0] for b in loader]
    second = [b.tolist()[0] for b in loader]
    assert first[0][2] + 1 == first[1][2]                  # base seed + worker id
    assert first[0][0] != first[1][0]                      # the workers draw differently
    assert {r[2] for r in first}.isdisjoint({r[2] for r in second})   # a new epoch
    again = [b.tolist()[0] for b in DataLoader(Draws(), batch_size=1, num_workers=2)]
    assert again == first                                  # reproducible
    assert seen == []                 # worker_init_fn ran in the workers, not here


def test_worker_init_fn_runs_in_each_worker_before_loading():
    class Inited(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return np.array([i, os.environ.get("NOVA_TEST_WORKER", "unset") == "set"])

    def init(worker_id):
        os.environ["NOVA_TEST_WORKER"] = "set"
    rows = [b.tolist()[0] for b in DataLoader(Inited(), batch_size=1, num_workers=2,
                                              worker_init_fn=init)]
    assert all(r[1] == 1 for r in rows) and "NOVA_TEST_WORKER" not in os.environ


def test_persistent_workers_serve_every_epoch_and_an_early_break_ends_them():
    loader = DataLoader(Where(), batch_size=2, num_workers=2, persistent_workers=True)
    pids = [{r[1] for b in loader for r in b.tolist()} for _ in range(2)]
    assert pids[0] == pids[1] and len(pids[0]) == 2
    for batch in loader:             # stop early: the in-flight batches must not leak
        break                        # into the next epoch
    assert [r[0] for b in loader for r in b.tolist()] == list(range(8))
    del loader, batch
    gc.collect()
    deadline = time.monotonic() + 10
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert multiprocessing.active_children() == []


def test_persistent_workers_drop_the_batches_an_early_break_left_in_flight():
    def epochs(workers):
        loader = DataLoader(Where(), batch_size=1, shuffle=True, num_workers=workers,
                            persistent_workers=workers > 0, timeout=10 if workers else 0,
                            generator=nv.Generator().manual_seed(3))
        for _ in loader:
            break                    # 4 batches of this epoch are in flight
        return [[b.tolist()[0][0] for b in loader] for _ in range(2)]
    assert epochs(2) == epochs(0)


def test_samples_of_pending_tensors_arrive_realized():
    # without auto-batching a sample is (x[i], y[i]): lazy views, which the queue's
    # feeder thread could not pickle (it dropped them and the loader waited forever)
    ds = _xy(6)
    assert _values(DataLoader(ds, batch_size=None, num_workers=2)) == \
        _values(DataLoader(ds, batch_size=None))
    lazy = [b * 2 for b in DataLoader(ds, batch_size=None, num_workers=1,
                                      collate_fn=lambda s: s[1] + 1)]   # computed there
    assert [t.item() for t in lazy] == [2 * (i + 1) for i in range(6)]


class Unpicklable(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return (lambda: i) if i == 2 else i


def test_a_batch_that_cannot_be_pickled_is_the_workers_error_not_a_hang():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"(?s)Caught (AttributeError|PicklingError) in "
                                           r"DataLoader worker process 0.*could not be "
                                           r"pickled"):
        list(DataLoader(Unpicklable(), batch_size=None, num_workers=1))
    assert time.monotonic() - start < 30
    assert multiprocessing.active_children() == []


def test_an_early_break_shuts_the_workers_down():
    it = iter(DataLoader(_xy(), batch_size=1, num_workers=2))
    next(it)
    it.close()
    assert multiprocessing.active_children() == []


def _first_column(batch):
    """A collate function a spawned worker can import (lambdas do not pickle)."""
    return [int(sample[1]) for sample in batch]


def test_a_spawn_context_loads_the_same_batches():
    # spawn (the default on macOS and Windows) sends the loader to each worker pickled:
    # its dataset, sampler, generator and collate function
    ds = _xy(12)
    gen = lambda: nv.Generator().manual_seed(7)   # noqa: E731
    for kwargs in (dict(batch_size=5, shuffle=True), dict(batch_size=3, collate_fn=_first_column)):
        spawned = DataLoader(ds, num_workers=2, multiprocessing_context="spawn",
                             generator=gen(), **kwargs)
        assert _values(spawned) == _values(DataLoader(ds, generator=gen(), **kwargs)), kwargs
    ctx = multiprocessing.get_context("spawn")
    assert DataLoader(ds, num_workers=1, multiprocessing_context=ctx).multiprocessing_context \
        is ctx


def test_multiprocessing_context_is_checked_as_pytorch_checks_it():
    ds = _xy(4)
    with pytest.raises(ValueError, match="can only be used with multi-process loading"):
        DataLoader(ds, multiprocessing_context="spawn")
    with pytest.raises(ValueError, match="valid start method in .*'spawn'.*but got 'thread'"):
        DataLoader(ds, num_workers=1, multiprocessing_context="thread")
    with pytest.raises(TypeError, match="valid context object"):
        DataLoader(ds, num_workers=1, multiprocessing_context=3)
    # PyTorch's keyword-only extras are accepted; in_order=False may keep the order
    assert _values(DataLoader(ds, num_workers=1, in_order=False, pin_memory_device="")) \
        == _values(DataLoader(ds))


def test_a_generator_pickles_as_its_state():
    import copy
    import pickle
    g = nv.Generator().manual_seed(11)
    nv.rand((2,), generator=g)
    for copied in (pickle.loads(pickle.dumps(g)), copy.deepcopy(g)):
        assert copied.get_state() == g.get_state()
        np.testing.assert_array_equal(nv.rand((3,), generator=copied).numpy(),
                                      nv.rand((3,), generator=copy.deepcopy(g)).numpy())


class Uneven(IterableDataset):
    """Worker 0 is done at once; worker 1 takes its time over each sample."""

    def __iter__(self):
        if get_worker_info().id == 0:
            yield from range(2)
        else:
            for i in range(100, 103):
                time.sleep(0.4)
                yield i


def test_a_worker_that_finished_its_stream_is_not_taken_for_dead(monkeypatch):
    from nova.utils import data_workers
    monkeypatch.setattr(data_workers, "LIVENESS_POLL_S", 0.1)   # several checks per sample
    got = [int(b) for b in DataLoader(Uneven(), batch_size=None, num_workers=2)]
    assert got == [0, 100, 1, 101, 102]


class Endless(IterableDataset):
    def __init__(self, produced):
        self.produced = produced

    def __iter__(self):
        while True:
            with self.produced.get_lock():
                self.produced.value += 1
            yield np.zeros(1024, np.float32)


def test_an_iterable_worker_stays_within_prefetch_of_the_consumer():
    produced = multiprocessing.get_context("fork").Value("i", 0)
    it = iter(DataLoader(Endless(produced), batch_size=None, num_workers=1,
                         prefetch_factor=2, multiprocessing_context="fork"))
    next(it)
    time.sleep(1.0)                  # unbounded, it would make thousands by now
    assert produced.value <= 1 + 2 + 1
    start = time.monotonic()
    it.close()
    assert time.monotonic() - start < 3 and multiprocessing.active_children() == []


def test_two_live_iterators_of_a_persistent_loader_each_get_every_batch():
    loader = DataLoader(list(range(8)), batch_size=2, num_workers=2, persistent_workers=True,
                        timeout=10)          # a regression fails instead of hanging
    pairs = [(a.tolist(), b.tolist()) for a, b in zip(loader, loader)]
    assert pairs == [([0, 1], [0, 1]), ([2, 3], [2, 3]), ([4, 5], [4, 5]), ([6, 7], [6, 7])]
    assert _values(loader) == [[0, 1], [2, 3], [4, 5], [6, 7]]      # the pool lives on


class NumpyDraws(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        import random
        return np.array([np.random.randint(1 << 30), random.randrange(1 << 30)])


def test_numpy_and_python_generators_are_seeded_per_worker_and_epoch():
    def epochs():
        loader = DataLoader(NumpyDraws(), batch_size=1, num_workers=2,
                            generator=nv.Generator().manual_seed(4))
        return [[tuple(b.tolist()[0]) for b in loader] for _ in range(2)]
    first, second = epochs()
    assert first[0] != first[1]          # workers 0 and 1 draw differently
    assert set(first).isdisjoint(second)  # so does the next epoch
    assert epochs() == [first, second]    # and a run with the same seed repeats them


ORPHAN = """
import multiprocessing, time
from nova.utils.data import DataLoader
it = iter(DataLoader(list(range(100)), batch_size=1, num_workers=2))
next(it)
print(" ".join(str(p.pid) for p in multiprocessing.active_children()), flush=True)
time.sleep(60)
"""


def _running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")
def test_workers_end_when_the_main_process_is_killed():
    import signal
    import subprocess
    import sys
    main = subprocess.Popen([sys.executable, "-c", ORPHAN], stdout=subprocess.PIPE,
                            text=True)
    try:
        pids = [int(p) for p in main.stdout.readline().split()]
    finally:
        main.send_signal(signal.SIGKILL)
        main.wait()
    assert len(pids) == 2
    deadline = time.monotonic() + 10
    while any(_running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_running(p) for p in pids)
