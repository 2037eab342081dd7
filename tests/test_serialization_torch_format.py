"""nv.load of PyTorch checkpoints (torch.save's zip format), without torch.

CI has no torch, so the files are written here by ``torch_file``, which mirrors what
torch.save does (checked byte for byte against real torch.save output in the tests at
the end, which run only where torch is installed):

- the object is pickled (protocol 2) with the same reductions torch's objects have: a
  tensor is ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
  requires_grad, OrderedDict())`` (``_v3`` with a trailing dtype for dtypes kept in an
  untyped storage), a Parameter ``torch._utils._rebuild_parameter(tensor,
  requires_grad, OrderedDict())``; torch's globals are written as pickle GLOBAL opcodes
  (``Global``), so nothing of torch is imported;
- a storage is not pickled but named by the persistent id ``("storage",
  torch.FloatStorage, key, location, numel)``, keys "0", "1"... in order of first use;
- the zip holds ``<prefix>/data.pkl``, ``.format_version``, ``.storage_alignment``,
  ``byteorder``, ``data/<key>`` (each storage's raw bytes), ``version`` and
  ``.data/serialization_id``, stored uncompressed, in torch's order.
"""
import collections
import functools
import io
import pickle
import random
import struct
import warnings
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import nova as nv
import nova.nn as nn
from nova.runtime.cuda_runtime import unavailable_reason, use_backend
from nova.tensor.creation import NarrowIntegerWarning
from tests.runtime.emulated_cuda import EmulatorBackend

# ----------------------------------------------------------------------------- writer


class Global:
    """A global of torch (or anything) by name, pickled as ``GLOBAL 'module name'``
    exactly as pickle writes torch's own functions, storage classes and dtypes."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):              # pickle wants reduce functions callable
        raise AssertionError("a stand-in, never called")


@functools.lru_cache(maxsize=None)
def G(module, name):
    """One object per global, so the pickle memoizes repeats as torch's pickles do."""
    return Global(module, name)


STORAGE_CLASS = {np.dtype(np.float32): "FloatStorage", np.dtype(np.float64): "DoubleStorage",
                 np.dtype(np.float16): "HalfStorage", np.dtype(np.int64): "LongStorage",
                 np.dtype(np.int32): "IntStorage", np.dtype(np.int16): "ShortStorage",
                 np.dtype(np.int8): "CharStorage", np.dtype(np.uint8): "ByteStorage",
                 np.dtype(np.bool_): "BoolStorage", np.dtype(nv.bfloat16.np): "BFloat16Storage",
                 np.dtype(np.complex64): "ComplexFloatStorage",
                 np.dtype(np.complex128): "ComplexDoubleStorage"}


class Storage:
    """A torch storage: ``values`` (1-D) saved as ``data/<key>``. ``untyped``: a
    ``torch.storage.UntypedStorage`` counting bytes, as torch writes uint16/32/64."""

    def __init__(self, values, location="cpu", untyped=False, kind=None, numel=None):
        self.values = np.ascontiguousarray(values).reshape(-1)
        self.location, self.untyped = location, untyped
        self.kind = kind or ("UntypedStorage" if untyped else STORAGE_CLASS[self.values.dtype])
        nbytes = self.values.nbytes
        self.numel = numel if numel is not None else (
            nbytes if untyped else self.values.size)

    def pid(self, key):
        module = "torch.storage" if self.untyped else "torch"
        return ("storage", G(module, self.kind), key, self.location, self.numel)


class T:
    """A torch tensor: a view (offset, size, stride in elements) of a Storage."""

    def __init__(self, storage, offset, size, stride, requires_grad=False, dtype=None,
                 metadata=None):
        self.args = (storage, offset, tuple(size), tuple(stride), requires_grad, OrderedDict())
        self.dtype, self.metadata = dtype, metadata

    def __reduce__(self):
        args = self.args
        if self.dtype is not None:
            args += (G("torch", self.dtype),)
        if self.metadata is not None:
            args += (self.metadata,)
        return (G("torch._utils", "_rebuild_tensor_v3" if self.dtype else "_rebuild_tensor_v2"),
                args)


def tensor(values, **kw):
    """A T owning a storage of its own: a contiguous tensor as torch saves one."""
    arr = np.asarray(values)
    size = arr.shape
    stride = tuple(int(s) // arr.itemsize for s in np.empty(size, arr.dtype).strides)
    return T(Storage(arr), 0, size, stride, **kw)


class P:
    """A torch.nn.Parameter around a T."""

    def __init__(self, data, requires_grad=True):
        self.data, self.requires_grad = data, requires_grad

    def __reduce__(self):
        return (G("torch._utils", "_rebuild_parameter"),
                (self.data, self.requires_grad, OrderedDict()))


class Call:
    """Any reduction ``func(*args)`` (a torch.Size, a forbidden global...)."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return (self.func, self.args)


class _Pickler(pickle._Pickler):    # the pure-Python pickler: its dispatch can be extended
    dispatch = dict(pickle._Pickler.dispatch)

    def __init__(self, file, protocol):
        super().__init__(file, protocol)
        self.storages = {}                   # key -> Storage, in order of first use
        self.keys = {}

    def save_global_stand_in(self, obj):
        if self.proto >= 4:
            self.save(obj.module)
            self.save(obj.name)
            self.write(pickle.STACK_GLOBAL)
        else:
            self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
        self.memoize(obj)

    dispatch[Global] = save_global_stand_in

    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            key = self.keys.setdefault(id(obj), str(len(self.keys)))
            self.storages[key] = obj
            return obj.pid(key)
        return None


def pickled(obj, protocol=2):
    """``obj``'s data.pkl and its storages by key."""
    buf = io.BytesIO()
    pickler = _Pickler(buf, protocol)
    pickler.dump(obj)
    return buf.getvalue(), pickler.storages


def torch_file(obj, prefix="archive", byteorder="little", protocol=2, data_pkl=None,
               storages=None):
    """The bytes torch.save(obj) writes (``data_pkl``/``storages``: given instead)."""
    if data_pkl is None:
        data_pkl, storages = pickled(obj, protocol)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{prefix}/data.pkl", data_pkl)
        z.writestr(f"{prefix}/.format_version", "1")
        z.writestr(f"{prefix}/.storage_alignment", "64")
        if byteorder is not None:
            z.writestr(f"{prefix}/byteorder", byteorder)
        for key, s in (storages or {}).items():
            values = s.values.astype(s.values.dtype.newbyteorder(">")) \
                if byteorder == "big" else s.values
            z.writestr(f"{prefix}/data/{key}", values.tobytes())
        z.writestr(f"{prefix}/version", "3\n")
        z.writestr(f"{prefix}/.data/serialization_id", "0" * 40)
    return out.getvalue()


def load_bytes(blob, **kw):
    return nv.load(io.BytesIO(blob), **kw)


def _rejected(blob, **kw):
    """The CheckpointError message of loading ``blob`` (fails on anything else)."""
    with pytest.raises(nv.CheckpointError) as err:
        load_bytes(blob, **kw)
    assert "<file-like object>" in str(err.value)
    return str(err.value)


# ----------------------------------------------------------------------------- values


def test_a_state_dict_of_every_dtype_with_nesting_loads_from_paths_and_files(tmp_path):
    arrays = {"f32": np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5,
              "f64": np.array([np.pi, -0.0, np.inf], np.float64),
              "f16": np.array([1.5, 65504, np.nan], np.float16),
              "bf16": np.array([1.5, -2.0, 3e38], nv.bfloat16.np),
              "i32": np.array([-(2**31), 7], np.int32), "i64": np.array([2**62 + 1], np.int64),
              "mask": np.array([True, False, True]), "scalar": np.array(2.5, np.float32),
              "empty": np.zeros((0, 3), np.float32)}
    state = OrderedDict((k, tensor(a)) for k, a in arrays.items())
    obj = {"model": state, "step": 100, "lr": 0.1, "name": "run", "none": None,
           "flags": [True, False], "betas": (0.9, 0.95), "nested": {1: [(2, "x")]}}
    blob = torch_file(obj)
    path = tmp_path / "ck.pt"
    path.write_bytes(blob)
    with open(path, "rb") as f:
        from_file = nv.load(f)
    for back in (nv.load(path), load_bytes(blob), from_file):
        assert type(back["model"]) is OrderedDict and list(back["model"]) == list(arrays)
        for k, a in arrays.items():
            t = back["model"][k]
            assert type(t) is nv.Tensor and t.shape == a.shape
            assert t.dtype == nv.tensor(a).dtype and not t.requires_grad
            np.testing.assert_array_equal(t.numpy(), a)
        assert {k: v for k, v in back.items() if k != "model"} == {
            "step": 100, "lr": 0.1, "name": "run", "none": None, "flags": [True, False],
            "betas": (0.9, 0.95), "nested": {1: [(2, "x")]}}
        assert type(back["betas"]) is tuple and type(back["nested"]) is dict


def test_views_of_one_storage_each_get_their_values_and_tied_ones_are_one_tensor():
    values = np.arange(12, dtype=np.float32) * 1.5
    s = Storage(values)
    strided = np.lib.stride_tricks.as_strided

    def ref(offset, size, stride):
        return strided(values[offset:], size, [4 * x for x in stride])

    views = {"full": (0, (3, 4), (4, 1)), "t": (0, (4, 3), (1, 4)),          # transposed
             "slice": (5, (2, 2), (4, 1)), "every_other": (1, (3, 2), (4, 2)),
             "expand": (3, (2, 3), (0, 1)), "element": (11, (), ()),
             "row_of_one": (8, (1, 4), (99, 1)), "empty": (12, (0, 5), (5, 1))}
    obj = {k: T(s, *v) for k, v in views.items()}
    tied = T(s, 0, (3, 4), (4, 1))
    obj.update(tied_a=tied, tied_b=T(s, 0, (3, 4), (4, 1)), same_object=tied,
               other_grad=T(s, 0, (3, 4), (4, 1), requires_grad=True))
    back = load_bytes(torch_file(obj))
    for k, v in views.items():
        assert back[k].shape == v[1]
        np.testing.assert_array_equal(back[k].numpy(), ref(*v), err_msg=k)
    assert back["tied_a"] is back["tied_b"] is back["same_object"] is back["full"]
    assert back["other_grad"] is not back["full"] and back["other_grad"].requires_grad
    assert back["t"] is not back["full"]
    np.testing.assert_array_equal(back["other_grad"].numpy(), ref(0, (3, 4), (4, 1)))


def test_parameters_and_requires_grad():
    obj = OrderedDict(w=P(tensor(np.array([1.0, 2.0], np.float32))),
                      frozen=P(tensor(np.array([3], np.int64)), requires_grad=False),
                      leaf=tensor(np.array([4.0], np.float64), requires_grad=True))
    back = load_bytes(torch_file(obj))
    assert type(back["w"]) is nn.Parameter and back["w"].requires_grad
    assert type(back["frozen"]) is nn.Parameter and not back["frozen"].requires_grad
    assert type(back["leaf"]) is nv.Tensor and back["leaf"].requires_grad
    assert back["w"].numpy().tolist() == [1.0, 2.0] and back["frozen"].numpy().tolist() == [3]
    model = nn.Linear(2, 1)
    w = np.array([[0.5, -1.0]], np.float32)
    model.load_state_dict(load_bytes(torch_file(OrderedDict(
        weight=P(tensor(w)), bias=P(tensor(np.array([2.0], np.float32)))))))
    np.testing.assert_array_equal(model.weight.numpy(), w)


def test_small_integers_keep_their_dtype_wider_unsigned_widen_with_one_warning_per_dtype():
    """ByteStorage/CharStorage/ShortStorage (uint8 image buffers, int8 quantized
    weights) load as uint8/int8/int16, unwidened and silent; uint16/32/64, which Nova
    lacks, widen as nv.from_numpy does, with one warning per dtype."""
    u16 = np.array([0, 65535], np.uint16)
    u32 = np.array([2**32 - 1], np.uint32)
    u64 = np.array([2**63 - 1], np.uint64)
    obj = {"u8": tensor(np.array([0, 255], np.uint8)), "u8b": tensor(np.array([7], np.uint8)),
           "i8": tensor(np.array([-128, 127], np.int8)),
           "i16": tensor(np.array([-(2**15)], np.int16)),
           "u16": T(Storage(u16.view(np.uint8), untyped=True), 0, (2,), (1,), dtype="uint16"),
           "u16b": T(Storage(u16.view(np.uint8), untyped=True), 0, (1,), (1,), dtype="uint16"),
           "u32": T(Storage(u32.view(np.uint8), untyped=True), 0, (1,), (1,), dtype="uint32"),
           "u64": T(Storage(u64.view(np.uint8), untyped=True), 0, (1,), (1,), dtype="uint64")}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        back = load_bytes(torch_file(obj))
    narrow = [str(w.message) for w in caught if w.category is NarrowIntegerWarning]
    assert len(narrow) == 3 and "tensor 'u16' is torch.uint16" in narrow[0]
    assert "held exactly as int32, as nv.from_numpy does" in narrow[0]
    expected = {"u8": ([0, 255], nv.uint8), "u8b": ([7], nv.uint8),
                "i8": ([-128, 127], nv.int8), "i16": ([-(2**15)], nv.int16),
                "u16": ([0, 65535], nv.int32), "u16b": ([0], nv.int32),
                "u32": ([2**32 - 1], nv.int64), "u64": ([2**63 - 1], nv.int64)}
    assert {k: (t.numpy().tolist(), t.dtype) for k, t in back.items()} == expected
    assert back["u8"].numpy().dtype == np.uint8 and (back["u8"] + 1).tolist() == [1, 0]
    big = np.array([2**63], np.uint64).view(np.uint8)
    blob = torch_file({"x": T(Storage(big, untyped=True), 0, (1,), (1,), dtype="uint64")})
    assert "tensor 'x' holds uint64 values up to 9223372036854775808" in _rejected(blob)


def test_complex_tensors_load_as_complex_tensors():
    z = tensor(np.array([1 + 2j, -3j], np.complex64))
    w = tensor(np.array([[0.5 - 1j]], np.complex128))
    back = load_bytes(torch_file({"m": {"z": z, "w": w, "again": z}}))["m"]
    assert back["z"].dtype == nv.complex64 and back["w"].dtype == nv.complex128
    assert back["again"] is back["z"]
    np.testing.assert_array_equal(back["z"].numpy(), [1 + 2j, -3j])
    np.testing.assert_array_equal(back["w"].numpy(), [[0.5 - 1j]])


def test_dtypes_nova_lacks_are_named():
    f8 = T(Storage(np.zeros(2, np.uint8), untyped=True), 0, (2,), (1,), dtype="float8_e4m3fn")
    assert "has dtype torch.float8_e4m3fn" in _rejected(torch_file({"f8": f8}))


def test_torch_dtypes_sizes_and_devices_as_values():
    obj = {"dtype": G("torch", "bfloat16"), "shape": Call(G("torch", "Size"), (2, 3)),
           "device": Call(G("torch", "device"), "cuda", 0)}
    back = load_bytes(torch_file(obj))
    assert back["dtype"] is nv.bfloat16 and back["shape"] == nv.Size((2, 3))
    assert isinstance(back["shape"], nv.Size) and back["device"] == nv.device("cuda:0")
    assert load_bytes(torch_file({"d": G("torch", "uint8")}))["d"] is nv.uint8
    assert "'d' is the dtype torch.uint16, which Nova has no dtype" in _rejected(
        torch_file({"d": G("torch", "uint16")}))
    assert "is torch.device('mps',), which Nova cannot build" in _rejected(
        torch_file({"d": Call(G("torch", "device"), "mps")}))


def test_sets_complex_numbers_bytes_and_bytearrays_load_as_torchs_weights_only_does():
    """torch.load(weights_only=True) takes these builtins (a set of seen ids, a complex
    hyperparameter, raw bytes in a checkpoint's metadata); Nova refused them as
    globals. Protocol 2 pickles bytes as ``_codecs.encode(text, 'latin1')``. Their
    calls are built only from checked arguments."""
    obj = {"ids": {3, 1, "x"}, "empty": set(), "z": complex(1.5, -2.0), "b": b"\x00\xffab",
           "nothing": b"", "ba": bytearray(b"\x01\x02"),
           "nested": [{2.5}, (1j, b"k")], "w": tensor(np.ones(2)),
           # MultiStepLR's milestones in PyTorch's state dict (fuzz_serial: refused)
           "milestones": Call(G("collections", "Counter"), {30: 1, 80: 2})}
    for protocol in (2, 4, 5):       # (5 pickles a bytearray natively: it was refused)
        back = load_bytes(torch_file(obj, protocol=protocol))
        assert back["milestones"] == {30: 1, 80: 2}
        assert type(back["milestones"]) is collections.Counter
        assert back["ids"] == {3, 1, "x"} and back["empty"] == set()
        assert back["z"] == complex(1.5, -2.0) and type(back["z"]) is complex
        assert back["b"] == b"\x00\xffab" and back["nothing"] == b""
        assert back["ba"] == bytearray(b"\x01\x02") and type(back["ba"]) is bytearray
        assert back["nested"] == [{2.5}, (1j, b"k")]
        np.testing.assert_array_equal(back["w"].numpy(), np.ones(2))
    for bad, why in ((Call(G("builtins", "set"), "abc"), "expected one list of items"),
                     (Call(G("builtins", "complex"), "1+2j"), "expected a real and an "
                      "imaginary part"),
                     (Call(G("_codecs", "encode"), "x", "utf-16"), "expected a string and "
                      "'latin1'"),
                     (Call(G("builtins", "bytearray"), 5), "expected bytes"),
                     (Call(G("collections", "Counter"), {1: "x"}), "expected one dict of "
                      "integer counts")):
        assert why in _rejected(torch_file({"v": bad}))
    assert "__builtin__.frozenset, which Nova does not load" in _rejected(
        torch_file({"v": frozenset([1])}))


def test_big_endian_files_are_byteswapped():
    arrays = {"f32": np.array([1.5, -2.25], np.float32), "i64": np.array([1, -(2**40)]),
              "bf16": np.array([1.5, -3.0], nv.bfloat16.np), "b": np.array([True, False]),
              "u8": np.array([1, 200], np.uint8),
              # each part swapped (the whole value was: parts exchanged, and complex128
              # raised "data type 'u16' not understood"; fuzz_serial)
              "c64": np.array([1 + 2j, 3 - 4j], np.complex64),
              "c128": np.array([1.5 - 2.5j], np.complex128)}
    obj = {k: tensor(a) for k, a in arrays.items()}
    obj["c128_0d"] = tensor(np.array(0.5 + 8j, np.complex128))
    s = Storage(np.arange(6, dtype=np.float64))
    obj["view"] = T(s, 1, (2, 2), (1, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NarrowIntegerWarning)
        back = load_bytes(torch_file(obj, byteorder="big"))
    for k, a in arrays.items():
        np.testing.assert_array_equal(back[k].numpy().astype(a.dtype), a, err_msg=k)
    assert back["view"].numpy().tolist() == [[1.0, 4.0], [2.0, 5.0]]
    assert back["c128_0d"].shape == () and back["c128_0d"].item() == 0.5 + 8j


def test_other_prefixes_pickle_protocols_positions_and_files_without_byteorder():
    """torch before 2.0 named the prefix after the file; pickle_protocol=4 uses
    STACK_GLOBAL and frames."""
    obj = OrderedDict(w=tensor(np.array([1.0, 2.0], np.float32)),
                      p=P(tensor(np.array([3.0], np.float32))))
    shifted = io.BytesIO(b"prefix" + torch_file(obj))       # read from the current position
    shifted.seek(6)
    for f in (io.BytesIO(torch_file(obj, prefix="my_model")), shifted,
              io.BytesIO(torch_file(obj, protocol=4)), io.BytesIO(torch_file(obj, byteorder=None))):
        back = nv.load(f)
        assert back["w"].numpy().tolist() == [1.0, 2.0] and type(back["p"]) is nn.Parameter


def test_map_location_applies_to_saved_locations():
    obj = {"gpu": tensor(np.array([1.0, 2.0], np.float32)), "host": tensor(np.array([3]))}
    obj["gpu"].args[0].location = "cuda:0"
    blob = torch_file(obj)
    for where in ("cpu", nv.device("cpu"), {"cuda:0": "cpu"}):
        back = load_bytes(blob, map_location=where)
        assert back["gpu"].device == nv.device("cpu") and back["gpu"].numpy().tolist() == [1, 2]
    seen = []
    back = load_bytes(blob, map_location=lambda t, loc: seen.append(loc) or t)
    assert sorted(seen) == ["cpu", "cuda:0"] and back["gpu"].device.type == "cpu"
    if unavailable_reason() is not None:
        with pytest.raises(RuntimeError, match=r"tensor 'gpu' was saved on cuda:0, but CUDA "
                                               r"is not available.*map_location='cpu'"):
            load_bytes(blob)
    with use_backend(EmulatorBackend()):
        back = load_bytes(blob)
        assert back["gpu"].device == nv.device("cuda") and back["host"].device.type == "cpu"
    obj["gpu"].args[0].location = "mps"
    with pytest.raises(RuntimeError, match=r"tensor 'gpu' was saved on mps, but .*unknown "
                                           r"device type 'mps'.*map_location='cpu'"):
        load_bytes(torch_file(obj))
    assert load_bytes(torch_file(obj), map_location="cpu")["gpu"].device.type == "cpu"

# ----------------------------------------------------------------------------- faults


def test_forbidden_globals_are_refused_without_running_them(tmp_path):
    marker = tmp_path / "ran"
    attacks = {"os.system": Call(G("os", "system"), f"touch {marker}"),
               "builtins.eval": Call(G("builtins", "eval"), f"open({str(marker)!r}, 'w')"),
               "posix.system": Call(G("posix", "system"), f"touch {marker}"),
               "torch.nn.modules.linear.Linear": Call(G("torch.nn.modules.linear", "Linear")),
               "torch._utils._rebuild_sparse_tensor": Call(
                   G("torch._utils", "_rebuild_sparse_tensor"), 0),
               "numpy.core.multiarray._reconstruct": Call(
                   G("numpy.core.multiarray", "_reconstruct"), 0),
               "builtins.getattr": Call(G("builtins", "getattr"), 0, "x")}
    for name, attack in attacks.items():
        for obj in (attack, {"model": OrderedDict(w=tensor(np.ones(1))), "x": [attack]}):
            message = _rejected(torch_file(obj))
            assert f"refers to the Python global {name}, which Nova does not load" in message
    assert not marker.exists()
    # the same with the opcode torch never writes for globals: INST
    blob = torch_file(None, data_pkl=b"(S'touch " + str(marker).encode() + b"'\nios\nsystem\n.")
    assert "the Python global os.system" in _rejected(blob)
    assert not marker.exists()


def test_every_truncation_and_a_sample_of_bit_flips_are_caught():
    """Each damaged file raises CheckpointError or, where the flip hit bytes nothing
    reads (a timestamp), loads the very same values."""
    s = Storage(np.arange(6, dtype=np.float32))
    obj = OrderedDict(w=T(s, 0, (2, 3), (3, 1)), v=T(s, 1, (2,), (3,)),
                      b=tensor(np.array([True, False])), step=7)
    blob = torch_file(obj)
    expect = {"w": [[0, 1, 2], [3, 4, 5]], "v": [1, 4], "b": [True, False]}
    for n in range(len(blob)):
        _rejected(blob[:n])
    rng = random.Random(3)
    loaded = 0
    for bit in rng.sample(range(len(blob) * 8), 800):
        damaged = bytearray(blob)
        damaged[bit // 8] ^= 1 << (bit % 8)
        try:
            back = load_bytes(bytes(damaged))
        except nv.CheckpointError as e:
            assert "<file-like object>" in str(e)
            continue
        loaded += 1
        assert {k: back[k].numpy().tolist() for k in expect} == expect and back["step"] == 7
    assert 200 < loaded < 600          # zip has many bytes nothing reads: dates, versions


def test_storage_records_that_do_not_match_their_ids():
    def blob_with(record, numel=None):
        s = Storage(np.arange(4, dtype=np.float32), numel=numel)
        data_pkl, _ = pickled({"x": T(s, 0, (4,), (1,))})
        return torch_file(None, data_pkl=data_pkl,
                          storages={"0": Storage(record)} if record is not None else {})

    assert "has 12 bytes in storage '0', whose 4 float32 elements need 16" in _rejected(
        blob_with(np.arange(3, dtype=np.float32)))
    assert "has 20 bytes in storage '0'" in _rejected(blob_with(np.arange(5, dtype=np.float32)))
    assert "lacks the record 'archive/data/0' of storage '0'" in _rejected(blob_with(None))
    assert "16 bytes in storage '0', whose 1099511627776 float32 elements need" in _rejected(
        blob_with(np.arange(4, dtype=np.float32), numel=2**40))


@pytest.mark.parametrize("offset,size,stride,why", [
    (0, (5,), (1,), "indexes element 4 of storage '0', which holds 4 float32 elements"),
    (4, (1,), (1,), "indexes element 4"), (0, (2, 2), (1, 3), "indexes element 4"),
    (3, (2,), (0,), None), (2**70, (1,), (1,), "indexes element 1180591620717411303424"),
    (0, (2,), (-1,), "malformed view"), (-1, (1,), (1,), "malformed view"),
    (0, (2,), (1, 1), "malformed view"), (0, (2.0,), (1,), "malformed view"),
    (True, (1,), (1,), "malformed view"), (0, (1,) * 65, (1,) * 65, "malformed view"),
    (0, "ab", "ab", "malformed view"), (0, (2**40, 2**40), (0, 0), "too large for any array")])
def test_views_outside_their_storage_are_refused(offset, size, stride, why):
    s = Storage(np.arange(4, dtype=np.float32))
    t = T(s, 0, (1,), (1,))
    t.args = (s, offset, size, stride, False, OrderedDict())
    blob = torch_file({"x": t})
    if why is None:                           # stride 0 at the last element: in bounds
        assert load_bytes(blob)["x"].numpy().tolist() == [3.0, 3.0]
    else:
        message = _rejected(blob)
        assert message.startswith("load: <file-like object>: tensor 'x' ") and why in message


def _pkl(ops):
    """A data.pkl from raw pickle opcodes (protocol 2 header and STOP added)."""
    return b"\x80\x02" + ops + b"."


def test_malformed_pickles_are_refused():
    s = Storage(np.arange(2, dtype=np.float32))
    cycle = []
    cycle.append(cycle)
    deep = [1]
    for _ in range(150):
        deep = [deep]
    cases = {
        "contains itself (a cycle)": {"a": cycle},
        "nested more than 100 levels deep": deep,
        "is a bare storage, which Nova does not load": {"s": s},
        "tensor 'x' carries metadata {'neg': True}": {
            "x": T(s, 0, (2,), (1,), metadata={"neg": True})},
        "tensor 'x' is int64 and requires grad": {"x": tensor(np.array([1]),
                                                               requires_grad=True)},
        "tensor 'x' is bool but holds bytes other than 0 and 1": {
            "x": T(Storage(np.array([1, 2], np.uint8), kind="BoolStorage"), 0, (2,), (1,))},
        "Parameter 'p' holds a int with requires_grad=True": {"p": P(5)},
        "Parameter 'p' is int64 and requires grad": {"p": P(tensor(np.array([1])))},
        "tensor 'x' has requires_grad='yes', not a bool": {
            "x": tensor(np.ones(1), requires_grad="yes")},
        "is a frozenset, which Nova does not load": {"x": frozenset({1, 2})},
        "tensor 'x' has a str as its storage": {"x": T("0", 0, (1,), (1,))},
        "is the storage class FloatStorage": {"x": G("torch", "FloatStorage")},
        "is a function": {"x": G("torch._utils", "_rebuild_tensor_v2")},
    }
    for why, obj in cases.items():
        message = _rejected(torch_file(obj, protocol=4 if "frozenset" in why else 2))
        assert why in message, (why, message)
    storages = {"0": s}
    build_on_tensor = (b"ctorch._utils\n_rebuild_tensor_v2\n((U\x07storagectorch\nFloatStorage\n"
                       b"U\x010U\x03cpuK\x02tQK\x00K\x02\x85K\x01\x85\x89}tR}b")
    raw = {"damaged data.pkl (UnpicklingError": b"\x80\x02\xff",
           "damaged data.pkl (EOFError": b"\x80\x02}",
           "BUILD on a TensorRef": _pkl(build_on_tensor),
           "persistent id is 'storage0'": _pkl(b"U\x08storage0Q"),
           "malformed storage record ('storage', 1, '0', 'cpu', 2)": _pkl(
               b"(U\x07storageK\x01U\x010U\x03cpuK\x02tQ"),
           "storage '0' is described as 2 float32 on cpu and as 3 float32": _pkl(
               b"((U\x07storagectorch\nFloatStorage\nU\x010U\x03cpuK\x02tQ"
               b"(U\x07storagectorch\nFloatStorage\nU\x010U\x03cpuK\x03tQl"),
           "damaged data.pkl (TypeError": _pkl(b"ctorch._utils\n_rebuild_tensor_v2\n)R")}
    for why, data_pkl in raw.items():
        message = _rejected(torch_file(None, data_pkl=data_pkl, storages=storages))
        assert why in message, (why, message)


def test_archives_that_are_not_torch_checkpoints(tmp_path):
    ok = torch_file({"w": tensor(np.ones(2, np.float32))})
    legacy = b"\x80\x02\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02M\xe9\x03."
    assert "PyTorch's legacy format (torch.save before 1.6" in _rejected(legacy)
    assert "torch.save(torch.load(old, weights_only=True), new)" in _rejected(legacy)
    path = tmp_path / "legacy.pt"
    path.write_bytes(legacy)
    with pytest.raises(nv.CheckpointError, match=f"{path} is in PyTorch's legacy format"):
        nv.load(path)

    def archive(records, method=zipfile.ZIP_STORED):
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", method) as z:
            for name, data in records:
                z.writestr(name, data)
        return out.getvalue()

    pkl, storages = pickled({"w": tensor(np.ones(2, np.float32))})
    data = storages["0"].values.tobytes()
    assert "has 0 '<prefix>/data.pkl' records, expected one" in _rejected(
        archive([("a/other.pkl", b"")]))
    assert "has 2 '<prefix>/data.pkl' records" in _rejected(
        archive([("a/data.pkl", pkl), ("b/data.pkl", pkl)]))
    assert "is a TorchScript archive (torch.jit.save)" in _rejected(
        archive([("m/data.pkl", pkl), ("m/constants.pkl", b""), ("m/code/m.py", b"")]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # zipfile: "Duplicate name"
        assert "holds two records of the same name" in _rejected(
            archive([("a/data.pkl", pkl), ("a/data/0", data), ("a/data/0", data)]))
    assert "compressed with method 12" in _rejected(
        archive([("a/data.pkl", pkl), ("a/data/0", data)], zipfile.ZIP_BZIP2))
    back = load_bytes(archive([("a/data.pkl", pkl), ("a/data/0", data)], zipfile.ZIP_DEFLATED))
    assert back["w"].numpy().tolist() == [1.0, 1.0]
    assert "byteorder record b'middle'" in _rejected(
        torch_file({"w": tensor(np.ones(2, np.float32))}, byteorder="middle"))
    assert "truncated or damaged zip archive" in _rejected(ok[:40])


def test_a_record_claiming_more_bytes_than_the_file_has_is_refused_before_reading():
    pkl, storages = pickled({"w": T(Storage(np.ones(2, np.float32), numel=2**29), 0, (2,), (1,))})
    blob = bytearray(torch_file(None, data_pkl=pkl, storages=storages))
    name = blob.find(b"archive/data/0", blob.find(b"PK\x01\x02"))   # in the central directory
    entry = blob.rfind(b"PK\x01\x02", 0, name)
    struct.pack_into("<II", blob, entry + 20, 2**31, 2**31)    # compressed and real size
    message = _rejected(bytes(blob))
    assert "record 'archive/data/0' claims 2147483648 bytes" in message

# ----------------------------------------------------------------------------- real torch


def test_real_torch_save_outputs_load_to_the_same_values(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)

    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(5, 3)
            self.norm = torch.nn.LayerNorm(3)
            self.head = torch.nn.Linear(3, 5, bias=False)
            self.head.weight = self.emb.weight

    model = Tied().to(torch.bfloat16)
    base = torch.arange(24, dtype=torch.float64).reshape(4, 6)
    obj = {"model": model.state_dict(), "view": base.t()[1:, ::2], "p":
           torch.nn.Parameter(torch.randn(2, 2)), "step": torch.tensor(3.0),
           "ids": torch.tensor([1, -2]), "opt": {"lr": 0.1, "betas": (0.9, 0.99)}}
    path = tmp_path / "ck.pt"
    torch.save(obj, path)
    back = nv.load(path)
    state = back["model"]
    assert list(state) == list(obj["model"]) and type(state) is OrderedDict
    assert state["emb.weight"] is state["head.weight"] and state["emb.weight"].dtype == nv.bfloat16
    for k, t in obj["model"].items():
        np.testing.assert_array_equal(state[k].numpy().astype(np.float32), t.float().numpy())
    np.testing.assert_array_equal(back["view"].numpy(), obj["view"].numpy())
    assert type(back["p"]) is nn.Parameter and back["p"].requires_grad
    np.testing.assert_array_equal(back["p"].numpy(), obj["p"].detach().numpy())
    assert back["step"].numpy().tolist() == 3.0 and back["ids"].numpy().tolist() == [1, -2]
    assert back["opt"] == {"lr": 0.1, "betas": (0.9, 0.99)}
    legacy = tmp_path / "legacy.pt"
    torch.save(obj, legacy, _use_new_zipfile_serialization=False)
    with pytest.raises(nv.CheckpointError, match="legacy format"):
        nv.load(legacy)


def test_the_writer_here_matches_torch_save_byte_for_byte():
    torch = pytest.importorskip("torch")
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    s = Storage(w)
    mine = OrderedDict(w=T(s, 0, (2, 3), (3, 1)), wt=T(s, 0, (3, 2), (1, 3)),
                       p=P(tensor(np.array([1.0], np.float32))),
                       h=tensor(np.array([1.5], nv.bfloat16.np)), n=[1, 2.5, None, "x"])
    tw = torch.from_numpy(w.copy())
    theirs = OrderedDict(w=tw, wt=tw.t(), p=torch.nn.Parameter(torch.tensor([1.0])),
                         h=torch.tensor([1.5], dtype=torch.bfloat16), n=[1, 2.5, None, "x"])
    buf = io.BytesIO()
    torch.save(theirs, buf)
    with zipfile.ZipFile(buf) as z:
        assert z.read("archive/data.pkl") == pickled(mine)[0]
        records = [i.filename for i in z.infolist()]
    with zipfile.ZipFile(io.BytesIO(torch_file(mine))) as z:
        assert [i.filename for i in z.infolist()] == records


def test_a_state_dicts_module_versions_come_back_as_its_metadata():
    """``_metadata`` (module versions ``load_state_dict`` reads) survives the load; an
    OrderedDict with any other attribute is refused."""
    state = OrderedDict(w=tensor(np.ones(2, np.float32)))
    state._metadata = OrderedDict([("", {"version": 1}), ("bn", {"version": 2})])
    back = load_bytes(torch_file(state))
    assert back._metadata == {"": {"version": 1}, "bn": {"version": 2}}
    odd = OrderedDict(w=tensor(np.ones(2, np.float32)))
    odd.hook = "x"
    assert "attributes ['hook']" in _rejected(torch_file(odd))


def test_a_global_registered_with_add_safe_globals_is_still_refused_naming_it():
    """Nova records ``add_safe_globals`` (torch.load(weights_only=True) would build the
    registered class) but its reader builds only its own objects: the refusal says so."""
    import argparse
    obj = {"model": OrderedDict(w=tensor(np.ones(2, np.float32))),
           "args": Call(G("argparse", "Namespace"))}
    assert "add_safe_globals" not in _rejected(torch_file(obj))
    with nv.serialization.safe_globals([argparse.Namespace]):
        message = _rejected(torch_file(obj))
    assert "refers to the Python global argparse.Namespace" in message
    assert "registered with nv.serialization.add_safe_globals" in message
    with nv.serialization.safe_globals([(dict, "argparse.Namespace")]):   # by full path
        assert "registered" in _rejected(torch_file(obj))


def test_a_data_pkl_claiming_more_bytes_than_it_has_is_a_checkpoint_error():
    """BINBYTES8/BYTEARRAY8 of 2**41 bytes: the unpickler allocates before it reads, and
    its MemoryError escaped (fuzz_serial); the claim is checked against the pickle."""
    for opcode in (b"\x8e", b"\x96"):             # BINBYTES8, BYTEARRAY8 (protocol 4, 5)
        blob = torch_file(None, data_pkl=b"\x80\x05" + opcode + struct.pack("<Q", 2 ** 41) + b".",
                          storages={})
        message = _rejected(blob)
        assert "damaged data.pkl" in message and "2199023255552 bytes" in message
