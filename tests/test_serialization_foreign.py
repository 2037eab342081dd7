"""``nv.load`` of safetensors files holding dtypes Nova holds as another dtype: U16,
U32 and U64 widen as ``nv.from_numpy`` and torch.save files widen them (U64 values past
int64 refused naming the tensor), C64 loads as a complex64 tensor. The files are written
by hand (8-byte little-endian header length, JSON header, raw bytes), as another tool
would, so the tests need no safetensors package; one also reads the library's own."""
from __future__ import annotations

import json
import struct
import warnings

import numpy as np
import pytest

import nova as nv
from nova.tensor.creation import NarrowIntegerWarning


def _write(path, tensors: dict[str, tuple[str, np.ndarray]]) -> None:
    """A safetensors file of ``name -> (dtype code, little-endian array)``."""
    header, blobs, offset = {}, [], 0
    for name, (code, arr) in tensors.items():
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": code, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def test_unsigned_integer_tensors_load_widened_with_exact_values(tmp_path):
    u16 = np.array([0, 1, 65535], "<u2")
    u32 = np.array([[0, 2**31, 2**32 - 1]], "<u4")
    u64 = np.array([0, 2**62, 2**63 - 1], "<u8")
    path = tmp_path / "unsigned.safetensors"
    _write(path, {"u16": ("U16", u16), "u32": ("U32", u32), "u64": ("U64", u64),
                  "u32b": ("U32", np.array([7], "<u4")), "none": ("U64", np.zeros(0, "<u8"))})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        back = nv.load(path)
    assert list(back) == ["u16", "u32", "u64", "u32b", "none"]
    for name, dtype, want in (("u16", nv.int32, u16), ("u32", nv.int64, u32),
                              ("u64", nv.int64, u64), ("u32b", nv.int64, [7]),
                              ("none", nv.int64, np.zeros(0))):
        assert back[name].dtype == dtype
        assert back[name].numpy().tolist() == np.asarray(want).tolist()
    messages = [str(w.message) for w in seen if w.category is NarrowIntegerWarning]
    assert len(messages) == 3          # one per dtype, naming its first tensor
    assert any("tensor 'u16' is safetensors U16" in m and "int32" in m for m in messages)
    assert any("tensor 'u32' is safetensors U32" in m and "int64" in m for m in messages)
    assert any("tensor 'u64' is safetensors U64" in m for m in messages)


def test_uint64_values_past_int64_are_refused_naming_the_tensor(tmp_path):
    """Not wrapped to negatives (``nova.serialization_torch`` refuses them alike)."""
    path = tmp_path / "big.safetensors"
    _write(path, {"ok": ("U64", np.array([1], "<u8")),
                  "ids": ("U64", np.array([5, 2**64 - 1], "<u8"))})
    with pytest.raises(nv.CheckpointError, match=r"big\.safetensors: tensor 'ids' holds "
                       r"U64 values up to 18446744073709551615, which do not fit int64"):
        nv.load(path)
    _write(path, {"edge": ("U64", np.array([2**63], "<u8"))})     # int64 max + 1
    with pytest.raises(nv.CheckpointError, match=r"tensor 'edge' holds U64 values up to "
                                                 r"9223372036854775808"):
        nv.load(path)


def test_a_complex64_tensor_loads_as_a_complex_tensor(tmp_path):
    z = np.array([[1 + 2j, -0.5j], [3.25, -1 - 1j]], "<c8")
    path = tmp_path / "c64.safetensors"
    _write(path, {"freqs": ("C64", z), "w": ("F32", np.ones(2, "<f4"))})
    back = nv.load(path)
    assert back["freqs"].is_complex() and back["freqs"].dtype == nv.complex64
    assert back["freqs"].shape == (2, 2)
    np.testing.assert_array_equal(back["freqs"].numpy(), z)
    np.testing.assert_array_equal(back["freqs"].real.numpy(), z.real)
    assert back["w"].tolist() == [1.0, 1.0]
    # saved again by Nova (as view_as_real pairs flagged complex) it comes back the same
    again = tmp_path / "again.safetensors"
    nv.save(back, again)
    np.testing.assert_array_equal(nv.load(again)["freqs"].numpy(), z)


def test_foreign_dtypes_load_with_map_location(tmp_path):
    path = tmp_path / "mapped.safetensors"
    _write(path, {"z": ("C64", np.array([1j], "<c8")), "u": ("U16", np.array([9], "<u2"))})
    seen = []

    def where(t, location):
        seen.append((t.dtype, location))
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NarrowIntegerWarning)
        back = nv.load(path, map_location=where)
    assert back["z"].numpy().tolist() == [1j] and back["u"].tolist() == [9]
    assert seen == [(nv.float32, "cpu"), (nv.float32, "cpu"), (nv.int32, "cpu")]


def test_a_foreign_tensors_byte_count_is_its_stored_dtypes(tmp_path):
    """A U32 tensor's bytes are 4 per element in the file, whatever it widens to."""
    path = tmp_path / "short.safetensors"
    _write(path, {"u": ("U32", np.array([1, 2], "<u4"))})
    raw = bytearray(path.read_bytes())
    raw[8:8 + 64] = raw[8:8 + 64].replace(b"[0, 8]", b"[0, 4]")
    path.write_bytes(bytes(raw[:-4]))
    with pytest.raises(nv.CheckpointError, match=r"tensor 'u' \(U32 \[2\]\) needs 8 bytes"):
        nv.load(path)


def test_dtypes_nova_has_no_equivalent_for_are_still_named(tmp_path):
    path = tmp_path / "f8.safetensors"
    _write(path, {"q": ("F8_E4M3", np.zeros(4, np.uint8))})
    with pytest.raises(nv.CheckpointError, match=r"tensor 'q' has dtype 'F8_E4M3' \(a "
                                                 r"safetensors dtype Nova has no dtype for\)"
                                                 r".*'C64'.*'U16'"):
        nv.load(path)


def test_files_of_the_safetensors_library_with_complex_and_unsigned_tensors(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    arrays = {"z": np.array([1 - 1j, 2.5j], np.complex64),
              "u": np.array([[3, 65535]], np.uint16), "v": np.array([2**40], np.uint64)}
    path = tmp_path / "lib.safetensors"
    safetensors_numpy.save_file(arrays, str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NarrowIntegerWarning)
        back = nv.load(path)
    assert back["z"].dtype == nv.complex64
    np.testing.assert_array_equal(back["z"].numpy(), arrays["z"])
    assert back["u"].dtype == nv.int32 and back["u"].tolist() == [[3, 65535]]
    assert back["v"].dtype == nv.int64 and back["v"].tolist() == [2**40]
