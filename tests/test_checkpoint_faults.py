"""Fault injection for nv.load / nv.save: every damaged or hostile file is rejected with
nv.CheckpointError (never another exception, never a silently different value), and a
writer killed with SIGKILL in the middle of nv.save leaves the old checkpoint intact and
its temporary file is removed by the next save.

Crafted files with valid checksums come from ``_nova_file``, written here from the
format's description (not by calling nova's writer), so the loader's structural checks
are tested behind its checksums too.
"""
import hashlib
import json
import os
import random
import signal
import struct
import subprocess
import sys

import numpy as np
import pytest

import nova as nv

ZERO = "0" * 64


def _checkpoint(path):
    """A small checkpoint with several dtypes, nesting and a step count."""
    nv.save({"model": {"w": nv.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)),
                       "b": nv.tensor([0.5, -1.0], dtype=nv.bfloat16),
                       "mask": nv.tensor([True, False, True])},
             "opt": {"state": {0: {"step": 100, "m": nv.tensor([1, 2], dtype=nv.int64)}},
                     "betas": (0.9, 0.95)}, "step": 100}, path)
    return path.read_bytes()


def _raw(header, data=b""):
    """A safetensors container: the header as given (bytes or a JSON-able object)."""
    head = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(head)) + head + data


def _nova_file(entries, structure, data, fmt="nova-checkpoint-2"):
    """A Nova checkpoint with correct checksums for any entries and structure text."""
    meta = {"nova.format": fmt, "nova.structure": structure,
            "nova.data_sha256": hashlib.sha256(data).hexdigest(), "nova.header_sha256": ZERO}
    head = json.dumps({"__metadata__": meta, **entries}, separators=(",", ":")).encode()
    blob = struct.pack("<Q", len(head)) + head
    digest = hashlib.sha256(blob).hexdigest()
    return blob.replace(ZERO.encode(), digest.encode(), 1) + data


def _rejected(tmp_path, blob, name="bad.safetensors"):
    """The CheckpointError message loading ``blob`` gives (fails on anything else)."""
    path = tmp_path / name
    path.write_bytes(blob)
    try:
        got = nv.load(path)
    except nv.CheckpointError as e:
        assert str(path) in str(e)
        return str(e)
    raise AssertionError(f"loaded without error: {got!r:.300}")


def _failures(tmp_path, blobs):
    """Loads each blob; the (index, outcome) of every one not rejected as it should be."""
    path = tmp_path / "case.safetensors"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    bad = []
    for i, blob in blobs:
        # In place, never truncating to 0: ext4 flushes a file truncated to 0 and
        # rewritten when it is closed (auto_da_alloc), 3 ms per case.
        os.pwrite(fd, blob, 0)
        os.ftruncate(fd, len(blob))
        try:
            got = nv.load(path)
            bad.append((i, f"loaded {got!r:.120}"))
        except nv.CheckpointError as e:
            if str(path) not in str(e):
                bad.append((i, f"message without the path: {e}"))
        except Exception as e:    # noqa: BLE001 -- any other type is the defect under test
            bad.append((i, f"{type(e).__name__}: {e}"))
    os.close(fd)
    return bad


def test_every_truncation_is_rejected(tmp_path):
    blob = _checkpoint(tmp_path / "ck.safetensors")
    assert _failures(tmp_path, [(n, blob[:n]) for n in range(len(blob))]) == []
    assert _failures(tmp_path, [(n, blob + b"\0" * n) for n in (1, 7, 8, 4096)]) == []


def test_every_bit_flip_in_the_header_and_a_sample_in_the_data_is_rejected(tmp_path):
    """The old checksum covered only the data: 60 of 1,200 header flips loaded."""
    blob = _checkpoint(tmp_path / "ck.safetensors")
    (n,) = struct.unpack("<Q", blob[:8])
    rng = random.Random(17)
    bits = list(range((8 + n) * 8))                               # all of the header
    bits += rng.sample(range((8 + n) * 8, len(blob) * 8), 300)    # a sample of the data
    flips = []
    for bit in bits:
        b = bytearray(blob)
        b[bit // 8] ^= 1 << (bit % 8)
        flips.append((bit, bytes(b)))
    assert _failures(tmp_path, flips) == []


def test_deep_nesting_and_huge_header_lengths(tmp_path):
    deep = b"[" * 200_000 + b"]" * 200_000
    assert "nests 200000 levels deep" in _rejected(tmp_path, _raw(deep))
    assert "nests" in _rejected(tmp_path, _raw({"a": {"shape": [[[[[1]]]]]}}))
    structure = "[" * 5000 + "]" * 5000
    assert "structure nests 5000 levels" in _rejected(tmp_path, _nova_file({}, structure, b""))
    for n in (2**64 - 1, 2**63, 100_000_001):
        assert "more than the 100000000 allowed" in _rejected(
            tmp_path, struct.pack("<Q", n) + b"{}")
    assert "truncated" in _rejected(tmp_path, struct.pack("<Q", 50) + b"{}")


@pytest.mark.parametrize("offsets,why", [
    ([0, 64], "truncated"), ([8, 24], "truncated"), ([-16, 0], "malformed data_offsets"),
    ([16, 0], "malformed data_offsets"), ([0.0, 16.0], "malformed data_offsets"),
    (["0", "16"], "malformed data_offsets"), ([False, 16], "malformed data_offsets"),
    ([0, 16, 32], "malformed data_offsets"), (None, "malformed data_offsets"),
    ([0, 2**70], "truncated")])
def test_bad_offsets(tmp_path, offsets, why):
    header = {"x": {"dtype": "F32", "shape": [4], "data_offsets": offsets}}
    assert why in _rejected(tmp_path, _raw(header, b"\0" * 16))


def test_overlapping_and_inconsistent_ranges(tmp_path):
    header = {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
              "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}
    assert "overlaps the previous tensor" in _rejected(tmp_path, _raw(header, b"\0" * 24))
    header = {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
              "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    assert "overlaps" in _rejected(tmp_path, _raw(header, b"\0" * 16))
    header = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
              "b": {"dtype": "F32", "shape": [1], "data_offsets": [12, 16]}}
    assert "tensor 'b' at bytes [12, 16) leaves a gap" in _rejected(tmp_path,
                                                                    _raw(header, b"\0" * 16))
    header = {"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}}
    assert "needs 12 bytes" in _rejected(tmp_path, _raw(header, b"\0" * 16))


@pytest.mark.parametrize("shape,why", [
    ([2**32, 2**32], "too large for any array"),       # 2**66 bytes: wraps int64
    ([2**31, 2**31, 4], "too large for any array"),
    ([10**30], "too large"), ([0, 2**62, 2**62], "too large"),
    ([2**20, 2**20], "needs 4398046511104 bytes, its data_offsets [0, 16) span 16"),
    ([-4], "malformed shape"), ([4.0], "malformed shape"), ([True], "malformed shape"),
    ("4", "malformed shape"), ([1] * 65, "malformed shape")])
def test_bad_shapes(tmp_path, shape, why):
    header = {"x": {"dtype": "F32", "shape": shape, "data_offsets": [0, 16]}}
    assert why in _rejected(tmp_path, _raw(header, b"\0" * 16))


@pytest.mark.parametrize("dtype", ["F33", "f32", "", 5, None, ["F32"], {"F32": 1},
                                   "F8_E4M3", "F4"])
def test_unknown_dtypes(tmp_path, dtype):
    header = {"x": {"dtype": dtype, "shape": [4], "data_offsets": [0, 16]}}
    assert "has dtype" in _rejected(tmp_path, _raw(header, b"\0" * 16))


@pytest.mark.parametrize("dtype,needs", [("U16", 8), ("U64", 32), ("C64", 32)])
def test_widened_dtypes_are_sized_as_stored(tmp_path, dtype, needs):
    """U16/U32/U64 load widened and C64 as complex, but a file's byte counts are checked
    in the dtype it stores: 4 elements of it in 16 bytes is a malformed file."""
    header = {"x": {"dtype": dtype, "shape": [4], "data_offsets": [0, 16]}}
    why = _rejected(tmp_path, _raw(header, b"\0" * 16))
    assert f"({dtype} [4]) needs {needs} bytes, its data_offsets [0, 16) span 16" in why


@pytest.mark.parametrize("header,why", [
    (b"[]", "not an object"), (b'"x"', "not an object"), (b"\xff\xfe{}", "not UTF-8"),
    (b"{", "bad header JSON"), (b'{"x": NaN}', "bad header JSON"),
    (b'{"a": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}, '
     b'"a": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}}', "duplicate key 'a'"),
    (b'{"a": [1, 2]}', "malformed entry"),
    (b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "x": 1}}', "malformed"),
    (b'{"__metadata__": {"n": 1}}', "__metadata__ must map strings to strings"),
    (b'{"__metadata__": []}', "__metadata__ must map"),
    (b'{"__metadata__": {"nova.format": "nova-checkpoint-2"}}', "Nova metadata lacks"),
    (b'{"__metadata__": {"format": "nova-checkpoint-1"}}', "old-format metadata lacks")])
def test_hostile_headers(tmp_path, header, why):
    assert why in _rejected(tmp_path, _raw(header, b"\0" * 4))


def test_a_newer_format_is_named(tmp_path):
    blob = _nova_file({}, "null", b"", fmt="nova-checkpoint-3")
    assert "has format 'nova-checkpoint-3'" in _rejected(tmp_path, blob)


def test_a_sparse_file_claiming_64_gib_is_rejected_without_reading_it(tmp_path):
    """The old loader read the whole file before looking at its header (MemoryError)."""
    size = 64 * 2**30
    small = {"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}
    huge = {"x": {"dtype": "F32", "shape": [2**34], "data_offsets": [0, 2**36]}}
    cases = {"extra bytes": (_raw(small, b"\0" * 16), size, "its tensors account for 16"),
             "claims 64 GiB": (_raw(huge), 0, "truncated"),
             # a Nova header consistent with the size, but damaged: its checksum fails
             "damaged": (_nova_file(huge, '{"__tensor__":"x"}', b"").replace(b'"F32"', b'"I32"'),
                         2**36, "header does not match")}
    for name, (head, data_size, why) in cases.items():
        path = tmp_path / f"{name}.safetensors"
        with open(path, "wb") as f:
            f.write(head)
            f.truncate(len(head) + data_size)
        with pytest.raises(nv.CheckpointError, match=why):
            nv.load(path)
        path.unlink()


def test_bool_bytes_other_than_0_and_1(tmp_path):
    header = {"m": {"dtype": "BOOL", "shape": [4], "data_offsets": [0, 4]}}
    assert "holds bytes other than 0 and 1" in _rejected(tmp_path, _raw(header, b"\0\1\2\0"))


@pytest.mark.parametrize("structure,why", [
    ('{"__tensor__":"y"}', "refers to a missing tensor 'y'"),
    ('[{"__tensor__":"x"},{"__tensor__":"x"}]', "refers to tensor 'x' twice"),
    ("[]", "tensors ['x'] are not referenced"),
    ('{"__tensor__":"x","device":"tpu:0"}', "unknown device 'tpu:0'"),
    ('{"__tensor__":["x"]}', "missing tensor"),
    ('[{"__tensor__":"x"},{"__dict__":[[[1],2]]}]', "unhashable dict key"),
    ('[{"__tensor__":"x"},{"__dict__":[[1,2,3]]}]', "malformed dict item"),
    ('[{"__tensor__":"x"},{"__dict__":5}]', "unknown entry"),
    ('[{"__tensor__":"x"},{"__set__":[]}]', "unknown entry"),
    ('[{"__tensor__":"x"}', "bad structure JSON"),
    ('[{"__tensor__":"x"},' + "1" * 5000 + "]", "bad structure JSON")])
def test_structures_that_pass_the_checksums_but_are_malformed(tmp_path, structure, why):
    entries = {"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    assert why in _rejected(tmp_path, _nova_file(entries, structure, b"\0" * 8))


def test_the_crafting_helper_writes_loadable_files(tmp_path):
    """Guards the tests above: their files fail for the reason named, not the helper."""
    entries = {"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    data = np.array([1.5, 2.5], "<f4").tobytes()
    path = tmp_path / "ok.safetensors"
    path.write_bytes(_nova_file(entries, '{"__tuple__":[{"__tensor__":"x"},3]}', data))
    x, three = nv.load(path)
    assert x.tolist() == [1.5, 2.5] and three == 3


_HANGING_WRITER = """
import os, sys, time
import numpy as np
import nova as nv

def hang(fd):                 # the data is written; stop before the rename
    print("writing", flush=True)
    time.sleep(600)

os.fsync = hang
nv.save({"w": nv.tensor(np.full(1000, 2.0, np.float32))}, sys.argv[1])
"""


def _hanging_writer(path):
    proc = subprocess.Popen([sys.executable, "-c", _HANGING_WRITER, str(path)],
                            stdout=subprocess.PIPE, text=True,
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return proc


def _temps(directory):
    return sorted(p.name for p in directory.iterdir() if ".nova-tmp." in p.name)


def test_kill_9_during_save_keeps_the_old_file_and_the_next_save_cleans_up(tmp_path):
    path = tmp_path / "ck.safetensors"
    nv.save({"w": nv.ones(3)}, path)
    killed, live = _hanging_writer(path), _hanging_writer(path)
    try:
        for proc in (killed, live):
            assert proc.stdout.readline() == "writing\n"
        assert len(_temps(tmp_path)) == 2
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert nv.load(path)["w"].tolist() == [1.0, 1.0, 1.0]    # the old checkpoint
        nv.save({"w": nv.zeros(3)}, path)
        left = _temps(tmp_path)
        assert len(left) == 1 and f".{live.pid}." in left[0]    # the live writer's stays
        assert nv.load(path)["w"].tolist() == [0.0, 0.0, 0.0]
    finally:
        live.send_signal(signal.SIGKILL)
        live.wait()
        killed.wait()
    nv.save({"w": nv.zeros(3)}, path)
    assert _temps(tmp_path) == [] and [p.name for p in tmp_path.iterdir()] == [path.name]
