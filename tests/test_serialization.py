"""nv.save / nv.load: round trips, real tensor names readable by the safetensors library,
files of other tools and of the old format, file objects, map_location, atomic writes and
clear errors. Hostile and damaged files are in test_checkpoint_faults.py; PyTorch's own
format in test_serialization_torch_format.py."""
import hashlib
import io
import json
import os
import pickle
import struct
import subprocess
import sys

import numpy as np
import pytest
import safetensors.numpy as safetensors_numpy

import nova as nv
import nova.nn as nn
from nova.runtime.cuda_runtime import unavailable_reason, use_backend
from nova.tensor.creation import NarrowIntegerWarning
from tests.runtime.emulated_cuda import EmulatorBackend


def _payload():
    return {"model": {"w": nv.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)),
                      "h": nv.tensor([1.5, -2.0], dtype=nv.bfloat16),
                      "ids": nv.tensor([1, 2, 3]), "mask": nv.tensor([True, False]),
                      "scalar": nv.tensor(2.5, dtype=nv.float16),
                      "empty": nv.zeros(0, 3, dtype=nv.int32)},
            "opt": {"state": {0: {"step": 3, "m": nv.zeros(2, dtype=nv.float64)}},
                    "param_groups": [{"lr": 0.1, "betas": (0.9, 0.95), "params": [0]}]},
            "rng": [2**62 + 1, 7], "key": {(1, "a"): "tuple keys", None: float("inf")},
            "note": None}


def _header(path):
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8:8 + n]), blob[8 + n:]


def test_round_trip_restores_values_dtypes_and_structure(tmp_path):
    path = tmp_path / "ck.safetensors"
    original = _payload()
    nv.save(original, path)
    back = nv.load(path)
    assert list(back) == list(original) and back["note"] is None
    for k, t in original["model"].items():
        assert back["model"][k].dtype == t.dtype and back["model"][k].shape == t.shape
        np.testing.assert_array_equal(back["model"][k].numpy(), t.numpy())
    assert back["opt"]["state"][0]["step"] == 3 and 0 in back["opt"]["state"]
    assert back["opt"]["param_groups"][0]["betas"] == (0.9, 0.95)
    assert back["rng"] == [2**62 + 1, 7] and back["key"] == {(1, "a"): "tuple keys",
                                                            None: float("inf")}
    assert [p.name for p in tmp_path.iterdir()] == ["ck.safetensors"]  # no temp files left


def test_a_state_dict_is_stored_under_its_real_names(tmp_path):
    path = tmp_path / "ck.safetensors"
    nv.save({"w": nv.ones(2, 2)}, path)
    header, data = _header(path)
    assert header["w"] == {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}
    assert np.frombuffer(data, np.float32).tolist() == [1.0] * 4
    assert all(isinstance(v, str) for v in header["__metadata__"].values())


def test_the_safetensors_library_reads_a_saved_state_dict(tmp_path):
    nv.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2))
    path = tmp_path / "model.safetensors"
    nv.save(model.state_dict(), path)
    arrays = safetensors_numpy.load_file(str(path))
    state = model.state_dict()
    assert sorted(arrays) == sorted(state)
    for name, t in state.items():
        assert arrays[name].dtype == t.numpy().dtype
        np.testing.assert_array_equal(arrays[name], t.numpy())
    fresh = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2))
    fresh.load_state_dict(nv.load(path))
    np.testing.assert_array_equal(fresh[2].weight.numpy(), model[2].weight.numpy())


def test_nested_checkpoints_get_dotted_names_that_never_collide(tmp_path):
    model = nn.Linear(2, 2)
    obj = {"model": model.state_dict(), "opt": {"state": {0: {"exp_avg": nv.ones(2)}}},
           "a.b": nv.tensor([1.0]), "a": {"b": nv.tensor([2.0])}, "__metadata__": nv.ones(1),
           "seq": [nv.tensor([3.0]), (nv.tensor([4.0]),)], "step": 3}
    path = tmp_path / "ck.safetensors"
    nv.save(obj, path)
    names = list(safetensors_numpy.load_file(str(path)))
    assert names[:4] == ["model.weight", "model.bias", "opt.state.0.exp_avg", "a.b"]
    assert set(names[4:]) == {"a.b#1", "__metadata__#1", "seq.0", "seq.1.0"}
    back = nv.load(path)
    assert back["a.b"].tolist() == [1.0] and back["a"]["b"].tolist() == [2.0]
    assert back["seq"][1][0].tolist() == [4.0] and back["step"] == 3


@pytest.mark.parametrize("metadata", [None, {"format": "pt"}])
def test_files_written_by_the_safetensors_library_load_as_a_flat_dict(tmp_path, metadata):
    arrays = {"layer.1.bias": np.array([1.0, -2.0], np.float32),
              "emb": np.arange(6, dtype=np.int64).reshape(3, 2), "flag": np.array([True]),
              "zero_d": np.array(0.5, np.float64), "empty": np.zeros((0, 4), np.float16),
              "img": np.array([[0, 128, 255]], np.uint8), "i8": np.array([-128, 127], np.int8),
              "i16": np.array([-(2**15), 2**15 - 1], np.int16)}
    path = tmp_path / "foreign.safetensors"
    safetensors_numpy.save_file(arrays, str(path), metadata=metadata)
    back = nv.load(path)
    assert sorted(back) == sorted(arrays)
    for name, a in arrays.items():
        assert back[name].shape == a.shape and back[name].dtype == nv.tensor(a).dtype
        np.testing.assert_array_equal(back[name].numpy(), a)


def test_unsigned_dtypes_nova_lacks_load_widened(tmp_path):
    """(tests/test_serialization_foreign.py: every such dtype, C64, the refusals)"""
    path = tmp_path / "u16.safetensors"
    safetensors_numpy.save_file({"img": np.array([0, 65535], np.uint16)}, str(path))
    with pytest.warns(NarrowIntegerWarning, match=r"tensor 'img' is safetensors U16"):
        back = nv.load(path)
    assert back["img"].dtype == nv.int32 and back["img"].tolist() == [0, 65535]


def test_small_integer_tensors_round_trip_with_their_dtype(tmp_path):
    """uint8/int8/int16 are saved as safetensors U8/I8/I16 (which the safetensors library
    reads back as numpy's narrow types) and load with their dtype and values."""
    obj = {"img": nv.tensor([[0, 128, 255]], dtype=nv.uint8),
           "q": nv.tensor([-128, 0, 127], dtype=nv.int8),
           "s": nv.tensor([-(2**15), 2**15 - 1], dtype=nv.int16)}
    path = tmp_path / "small.safetensors"
    nv.save(obj, path)
    back = nv.load(path)
    for name, t in obj.items():
        assert back[name].dtype == t.dtype and back[name].tolist() == t.tolist()
    raw = safetensors_numpy.load_file(str(path))
    assert {k: v.dtype for k, v in raw.items()} == {
        "img": np.uint8, "q": np.int8, "s": np.int16}


def _old_format_file(path, data_byte_flip=False):
    """A file as the previous nova/serialization.py wrote it: t0..tN names, the
    structure and a SHA-256 of the tensor bytes only in __metadata__ 'format' 1."""
    w = np.arange(4, dtype=np.float32).reshape(2, 2)
    ids = np.array([5, 6], np.int64)
    raw = [w.tobytes(), ids.tobytes()]
    structure = {"__dict__": [["model", {"__dict__": [["w", {"__tensor__": "t0"}],
                                                      ["ids", {"__tensor__": "t1"}]]}],
                              ["step", 100], ["betas", {"__tuple__": [0.9, 0.95]}]]}
    header = {"t0": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
              "t1": {"dtype": "I64", "shape": [2], "data_offsets": [16, 32]},
              "__metadata__": {"format": "nova-checkpoint-1", "structure": json.dumps(structure),
                               "sha256": hashlib.sha256(b"".join(raw)).hexdigest()}}
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    data = bytearray(b"".join(raw))
    if data_byte_flip:
        data[3] ^= 1
    path.write_bytes(struct.pack("<Q", len(head)) + head + bytes(data))
    return w, ids


def test_files_of_the_previous_format_still_load_with_a_warning(tmp_path):
    path = tmp_path / "old.safetensors"
    w, ids = _old_format_file(path)
    with pytest.warns(UserWarning, match="old nova-checkpoint-1 format"):
        back = nv.load(path)
    assert back["step"] == 100 and back["betas"] == (0.9, 0.95)
    np.testing.assert_array_equal(back["model"]["w"].numpy(), w)
    np.testing.assert_array_equal(back["model"]["ids"].numpy(), ids)
    _old_format_file(path, data_byte_flip=True)
    with pytest.warns(UserWarning), pytest.raises(nv.CheckpointError, match="checksum"):
        nv.load(path)


def test_edits_of_the_header_that_keep_it_valid_json_are_caught(tmp_path):
    """The old checksum covered only the tensor bytes: these loaded without error."""
    path = tmp_path / "ck.safetensors"
    nv.save({"model": {"a": nv.ones(2), "b": nv.zeros(2)}, "step": 100}, path)
    blob = path.read_bytes()
    edits = {"step": (b'[\\"step\\",100]', b'[\\"step\\",500]'),
             "rename": (b'"model.a":{', b'"model.c":{'),
             "dtype": (b'"F32"', b'"I32"'),
             "swap": (b'\\"model.a\\"}],[\\"b\\",{\\"__tensor__\\":\\"model.b\\"',
                      b'\\"model.b\\"}],[\\"b\\",{\\"__tensor__\\":\\"model.a\\"')}
    for what, (old, new) in edits.items():
        assert blob.count(old) >= 1, what
        bad = tmp_path / f"{what}.safetensors"
        bad.write_bytes(blob.replace(old, new, 1))
        with pytest.raises(nv.CheckpointError, match="header does not match its checksum"):
            nv.load(bad)


def test_truncated_corrupted_and_foreign_files_raise_naming_the_file(tmp_path):
    path = tmp_path / "ck.safetensors"
    nv.save(_payload(), path)
    blob = path.read_bytes()
    cases = {
        "truncated": blob[:-5],
        "flipped": blob[:-3] + bytes([blob[-3] ^ 0xFF]) + blob[-2:],
        "header": blob[:8] + b"[" + blob[9:],
        "tiny": blob[:4],
        "foreign": b"not a checkpoint at all, just text",
    }
    messages = {}
    for name, data in cases.items():
        bad = tmp_path / f"{name}.safetensors"
        bad.write_bytes(data)
        with pytest.raises(nv.CheckpointError) as err:
            nv.load(bad)
        assert str(bad) in str(err.value)
        messages[name] = str(err.value)
    assert "truncated" in messages["truncated"] and "checksum" in messages["flipped"]
    assert "truncated" in messages["tiny"]
    # A file that cannot be opened raises open()'s OSError, as torch.load does
    # (resume-if-exists code catches FileNotFoundError); it is no CheckpointError.
    with pytest.raises(FileNotFoundError, match="missing.safetensors"):
        nv.load(tmp_path / "missing.safetensors")


def test_save_and_load_through_file_objects_as_torch_does(tmp_path):
    path = tmp_path / "ck.safetensors"
    nv.save(_payload(), path)
    blob = path.read_bytes()
    buf = io.BytesIO()
    nv.save(_payload(), buf)
    assert buf.getvalue() == blob                 # the same file, checksums included
    with open(tmp_path / "f.safetensors", "wb") as f:
        nv.save(_payload(), f)
    assert (tmp_path / "f.safetensors").read_bytes() == blob
    read, write = os.pipe()                       # a write needs no seeking
    with open(write, "wb") as f:
        nv.save({"w": nv.ones(2)}, f)
    with open(read, "rb") as f:
        piped = f.read()
    assert safetensors_numpy.load(piped)["w"].tolist() == [1.0, 1.0]
    with open(path, "rb") as f:
        from_file = nv.load(f)
    shifted = io.BytesIO(b"prefix" + blob)        # read from the current position
    shifted.seek(6)
    for back in (nv.load(io.BytesIO(blob)), from_file, nv.load(shifted)):
        assert back["opt"]["param_groups"][0]["betas"] == (0.9, 0.95)
        np.testing.assert_array_equal(back["model"]["w"].numpy(),
                                      np.arange(6, dtype=np.float32).reshape(2, 3))
        assert back["model"]["h"].dtype == nv.bfloat16


def test_file_objects_get_the_same_checks_and_are_named_in_errors(tmp_path):
    buf = io.BytesIO()
    nv.save(_payload(), buf)
    blob = buf.getvalue()
    flipped = blob[:-3] + bytes([blob[-3] ^ 0xFF]) + blob[-2:]
    for bad, why in ((blob[:-5], "truncated"), (blob[:4], "truncated"), (flipped, "checksum"),
                     (b"", "truncated"), (b"PK\x03\x04 not a zip", "damaged zip")):
        with pytest.raises(nv.CheckpointError, match=f"<file-like object>.*{why}"):
            nv.load(io.BytesIO(bad))
    with pytest.raises(nv.CheckpointError, match="<file-like object> has no bytes after its "
                                                 f"position {len(blob)}; .* seek\\(0\\) first"):
        nv.load(buf)                              # just written: at its end
    path = tmp_path / "bad.safetensors"
    path.write_bytes(blob[:-5])
    with open(path, "rb") as f, pytest.raises(nv.CheckpointError,
                                              match=f"load: {path} is truncated"):
        nv.load(f)


def test_file_arguments_torch_rejects_are_rejected(tmp_path):
    path = tmp_path / "ck.safetensors"
    with open(path, "w") as f, pytest.raises(TypeError, match=r"f is a text file; open it in "
                                                               r"binary mode \('wb'\)"):
        nv.save({"w": nv.ones(1)}, f)
    nv.save({"w": nv.ones(1)}, path)
    with open(path) as f, pytest.raises(TypeError, match=r"binary mode \('rb'\)"):
        nv.load(f)
    with pytest.raises(TypeError, match="save: f must be a path .* or a binary file object "
                                        r"with write\(\), got int"):
        nv.save({"w": nv.ones(1)}, 3)
    with pytest.raises(TypeError, match=r"load: f must be a path .*with read\(\), got list"):
        nv.load([])
    read, write = os.pipe()
    os.write(write, path.read_bytes())
    os.close(write)
    with open(read, "rb") as f, pytest.raises(io.UnsupportedOperation, match="must be "
                                              "seekable: read it into an io.BytesIO first"):
        nv.load(f)
    back = nv.load(path, map_location="cpu", weights_only=True, mmap=False)
    assert back["w"].tolist() == [1.0]
    with pytest.raises(TypeError, match="load: weights_only must be a bool or None, got str"):
        nv.load(path, weights_only="yes")


def test_map_location_places_tensors_as_torch_load_does(tmp_path):
    path = tmp_path / "ck.safetensors"
    with use_backend(EmulatorBackend()):
        nv.save({"gpu": nv.tensor([1.0, 2.0], device="cuda"), "host": nv.tensor([3])}, path)
        back = nv.load(path)                                   # where they were saved
        assert back["gpu"].device == nv.device("cuda") and back["host"].device == nv.device("cpu")
        for where in ("cuda", "cuda:0", nv.device("cuda")):
            assert {t.device.type for t in nv.load(path, map_location=where).values()} == {"cuda"}
        moved = nv.load(path, map_location={"cpu": "cuda"})
        assert moved["host"].device == nv.device("cuda") and moved["gpu"].device.type == "cuda"
        seen = []
        back = nv.load(path, map_location=lambda t, loc: seen.append(loc) or
                       (t.cuda() if loc == "cpu" else None))
        assert sorted(seen) == ["cpu", "cuda:0"] and back["host"].device.type == "cuda"
        assert back["gpu"].numpy().tolist() == [1.0, 2.0]
    # Without a GPU (no backend installed, no CuPy here) a CUDA tensor needs a map.
    for where in ("cpu", nv.device("cpu"), {"cuda:0": "cpu"}, {"cuda": "cpu"}):
        back = nv.load(path, map_location=where)
        assert back["gpu"].device == nv.device("cpu") and back["gpu"].tolist() == [1.0, 2.0]
    if unavailable_reason() is not None:
        with pytest.raises(RuntimeError, match=r"tensor 'gpu' was saved on cuda:0, but CUDA is "
                                               r"not available.*map_location='cpu'"):
            nv.load(path)


def test_bad_map_locations_are_rejected_before_reading(tmp_path):
    missing = tmp_path / "missing.safetensors"
    with pytest.raises(TypeError, match="map_location must be None, a device string, an "
                                        "nv.device, a dict or a callable, got int"):
        nv.load(missing, map_location=0)
    with pytest.raises(ValueError, match="unknown device type 'tpu'"):
        nv.load(missing, map_location="tpu")
    with pytest.raises(TypeError, match="dict entries must be device strings"):
        nv.load(missing, map_location={"cpu": 1})
    path = tmp_path / "ck.safetensors"
    nv.save({"w": nv.ones(1)}, path)
    with pytest.raises(TypeError, match="map_location returned a ndarray for .*tensor 'w'"):
        nv.load(path, map_location=lambda t, loc: t.numpy())


def test_unsupported_objects_are_rejected_before_writing(tmp_path):
    with pytest.raises(TypeError, match="save: cannot store a set"):
        nv.save({"x": {1, 2}}, tmp_path / "x")
    with pytest.raises(TypeError, match="save: cannot store a dict key of type Tensor"):
        nv.save({nv.ones(1): 1}, tmp_path / "x")
    deep = nv.ones(1)
    for _ in range(101):
        deep = [deep]
    with pytest.raises(ValueError, match="nested more than 100 levels"):
        nv.save(deep, tmp_path / "x")
    assert not list(tmp_path.iterdir())


def test_saved_files_get_the_usual_permissions(tmp_path):
    """The old writer used mkstemp, whose 0600 mode the renamed checkpoint kept."""
    umask = os.umask(0o022)
    os.umask(umask)
    nv.save({"w": nv.ones(1)}, tmp_path / "ck.safetensors")
    assert (tmp_path / "ck.safetensors").stat().st_mode & 0o777 == 0o666 & ~umask


def test_save_removes_temp_files_of_dead_writers_only(tmp_path):
    path = tmp_path / "ck.safetensors"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = __import__("socket").gethostname()
    stale = tmp_path / f".ck.safetensors.nova-tmp.{host}.{dead.pid}.abcd1234"
    live = tmp_path / f".ck.safetensors.nova-tmp.{host}.{os.getppid()}.abcd1234"
    remote = tmp_path / f".ck.safetensors.nova-tmp.other-host.{dead.pid}.abcd1234"
    other_target = tmp_path / f".other.safetensors.nova-tmp.{host}.{dead.pid}.abcd1234"
    for p in (stale, live, remote, other_target):
        p.write_bytes(b"partial")
    nv.save({"w": nv.ones(1)}, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [path.name, live.name, remote.name, other_target.name])


def test_module_checkpoint_mismatch_errors(tmp_path):
    path = tmp_path / "m.safetensors"
    nv.save(nn.Linear(3, 2).state_dict(), path)
    with pytest.raises(nn.StateDictError, match=r"size mismatch for weight: checkpoint \(2, 3\) "
                                                r"vs model \(4, 3\)"):
        nn.Linear(3, 4).load_state_dict(nv.load(path))


def test_a_state_dicts_module_versions_survive_a_round_trip(tmp_path):
    m = nv.nn.Sequential(nv.nn.Linear(2, 2), nv.nn.BatchNorm1d(2))
    nv.save({"model": m.state_dict(), "plain": {"a": 1}}, tmp_path / "ck")
    back = nv.load(tmp_path / "ck")
    assert back["model"]._metadata == {"": {"version": 1}, "0": {"version": 1},
                                       "1": {"version": 2}}
    assert not hasattr(back["plain"], "_metadata")
    m.load_state_dict(back["model"])


def test_save_accepts_torch_saves_pickle_arguments_and_writes_its_own_format(tmp_path):
    obj = {"w": nv.arange(4.0), "step": 3}
    plain = tmp_path / "plain.pt"
    nv.save(obj, plain)
    for kw in ({"pickle_protocol": 4}, {"_use_new_zipfile_serialization": False},
               {"pickle_module": pickle, "pickle_protocol": 2,
                "_disable_byteorder_record": True}):
        path = tmp_path / "ck.pt"
        nv.save(obj, path, **kw)
        back = nv.load(path)
        assert back["step"] == 3 and back["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
        assert path.read_bytes()[8:].startswith(b"{")      # safetensors, never a pickle
    buffer = io.BytesIO()
    nv.save(obj, buffer, pickle, 4)                      # torch's positional order
    assert buffer.getvalue() == plain.read_bytes()
    with pytest.raises(TypeError, match="pickle_protocol must be an int"):
        nv.save(obj, tmp_path / "x.pt", pickle_protocol="4")


def test_load_of_a_file_that_cannot_be_opened_raises_torchs_oserror(tmp_path):
    # torch.load('/missing.pt') raises FileNotFoundError, a directory IsADirectoryError:
    # resume-if-exists code catches them, and an OSError is no CheckpointError
    missing = tmp_path / "missing.pt"
    with pytest.raises(FileNotFoundError, match=r"\[Errno 2\] No such file or directory"):
        nv.load(missing)
    with pytest.raises(FileNotFoundError):
        nv.load(str(missing), map_location="cpu", weights_only=True)
    with pytest.raises(IsADirectoryError):
        nv.load(tmp_path)
    assert not issubclass(FileNotFoundError, nv.CheckpointError)
    if os.geteuid() != 0:                                # root reads a mode-000 file
        locked = tmp_path / "locked.pt"
        nv.save({"a": 1}, locked)
        locked.chmod(0)
        with pytest.raises(PermissionError):
            nv.load(locked)


def test_safe_globals_are_checked_recorded_and_restored():
    import argparse
    import collections
    from nova import serialization

    serialization.clear_safe_globals()
    try:
        serialization.add_safe_globals([argparse.Namespace, (dict, "my.Dict")])
        serialization.add_safe_globals([argparse.Namespace])        # once only
        assert serialization.get_safe_globals() == [argparse.Namespace, (dict, "my.Dict")]
        with serialization.safe_globals([collections.Counter, argparse.Namespace]) as ctx:
            assert ctx is None
            assert serialization.get_safe_globals() == [
                argparse.Namespace, (dict, "my.Dict"), collections.Counter]
        assert serialization.get_safe_globals() == [argparse.Namespace, (dict, "my.Dict")]
        for bad, error, match in (([(dict,)], ValueError, "tuple of length 2"),
                                  ([(dict, 3)], TypeError, "str of callable full path"),
                                  ([5], TypeError, "function or class"),
                                  (5, TypeError, "not iterable")):
            with pytest.raises(error, match=match):
                serialization.add_safe_globals(bad)
        assert len(serialization.get_safe_globals()) == 2
        serialization.clear_safe_globals()
        assert serialization.get_safe_globals() == []
    finally:
        serialization.clear_safe_globals()


def test_containers_and_scalars_keep_their_type_or_raise(tmp_path):
    """A subclass was stored as its base and loaded as another type (fuzz_serial):
    ``Counter`` and ``bytearray`` now round-trip, the subclasses a file cannot rebuild
    (a namedtuple, a ``defaultdict``, an ``IntEnum``) raise ``TypeError`` naming them."""
    import collections
    import enum
    obj = {"counts": collections.Counter({30: 1, 80: 2}), "raw": bytearray(b"\x00\xff"),
           "od": collections.OrderedDict(b=1, a=2), "b": b"xy", "t": (1, [2.5, None])}
    path = tmp_path / "c.nova"
    nv.save(obj, path)
    back = nv.load(path)
    assert back == obj
    assert {k: type(v) for k, v in back.items()} == {k: type(v) for k, v in obj.items()}
    Pair = collections.namedtuple("Pair", "lr wd")

    class Mode(enum.IntEnum):
        A = 1
    for bad, name in ((collections.defaultdict(list), "defaultdict"), (Pair(0.1, 0.0), "Pair"),
                      (Mode.A, "Mode"), ({Mode.A: 1}, "dict key of type Mode")):
        with pytest.raises(TypeError, match=f"save: cannot store a {name}"):
            nv.save({"x": bad}, tmp_path / "bad.nova")
