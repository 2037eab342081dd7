"""nv.save / nv.load: round trips, atomic writes, and clear errors for bad files."""
import json
import struct

import numpy as np
import pytest

import nova as nv
import nova.nn as nn


def _payload():
    return {"model": {"w": nv.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)),
                      "h": nv.tensor([1.5, -2.0], dtype=nv.bfloat16),
                      "ids": nv.tensor([1, 2, 3]), "mask": nv.tensor([True, False])},
            "opt": {"state": {0: {"step": 3, "m": nv.zeros(2, dtype=nv.float64)}},
                    "param_groups": [{"lr": 0.1, "betas": (0.9, 0.95), "params": [0]}]},
            "note": None}


def test_round_trip_restores_values_dtypes_and_structure(tmp_path):
    path = tmp_path / "ck.safetensors"
    original = _payload()
    nv.save(original, path)
    back = nv.load(path)
    assert set(back) == {"model", "opt", "note"} and back["note"] is None
    for k, t in original["model"].items():
        assert back["model"][k].dtype == t.dtype
        np.testing.assert_array_equal(back["model"][k].numpy(), t.numpy())
    assert back["opt"]["state"][0]["step"] == 3 and 0 in back["opt"]["state"]
    assert back["opt"]["param_groups"][0]["betas"] == (0.9, 0.95)
    assert [p.name for p in tmp_path.iterdir()] == ["ck.safetensors"]  # no temp files left


def test_file_is_a_standard_safetensors_container(tmp_path):
    path = tmp_path / "ck.safetensors"
    nv.save({"w": nv.ones(2, 2)}, path)
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    assert header["t0"] == {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}
    assert np.frombuffer(blob[8 + n:], np.float32).tolist() == [1.0] * 4


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
    with pytest.raises(nv.CheckpointError, match="cannot read"):
        nv.load(tmp_path / "missing.safetensors")


def test_unsupported_objects_are_rejected_before_writing(tmp_path):
    with pytest.raises(TypeError, match="save: cannot store a set"):
        nv.save({"x": {1, 2}}, tmp_path / "x")
    assert not list(tmp_path.iterdir())


def test_module_checkpoint_mismatch_errors(tmp_path):
    path = tmp_path / "m.safetensors"
    nv.save(nn.Linear(3, 2).state_dict(), path)
    with pytest.raises(nn.StateDictError, match=r"size mismatch for weight: checkpoint \(2, 3\) "
                                                r"vs model \(4, 3\)"):
        nn.Linear(3, 4).load_state_dict(nv.load(path))
