"""Probe 11: PyTorch parity of checkpoints (Parameters, tying, OrderedDict, dtypes,
devices, sizes, bytes), parameter containers, ``nn.init``'s torch-private helpers and
deprecated aliases, and three small op fixes (block_diag promotion, bool % int, LSTM's
hx message)."""
from __future__ import annotations

import hashlib
import io
import json
import struct
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import nova as nv
from nova.checkpoint_common import CheckpointError

nn = nv.nn


def _roundtrip(obj):
    f = io.BytesIO()
    nv.save(obj, f)
    f.seek(0)
    return nv.load(f), f.getvalue()


def _header(raw: bytes) -> dict:
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n])


def _handmade(structure: object, tensors: dict[str, np.ndarray]) -> io.BytesIO:
    """A nova-checkpoint-2 file written by hand, as the module docstring specifies
    (what an older Nova wrote: no Parameter, tying or OrderedDict nodes)."""
    data, entries, offset = b"", {}, 0
    for name, arr in tensors.items():
        raw = np.ascontiguousarray(arr, arr.dtype.newbyteorder("<")).tobytes()
        code = {np.float32: "F32", np.int64: "I64"}[arr.dtype.type]
        entries[name] = {"dtype": code, "shape": list(arr.shape),
                         "data_offsets": [offset, offset + len(raw)]}
        data, offset = data + raw, offset + len(raw)
    meta = {"nova.format": "nova-checkpoint-2",
            "nova.structure": json.dumps(structure, separators=(",", ":")),
            "nova.data_sha256": hashlib.sha256(data).hexdigest(),
            "nova.header_sha256": "0" * 64}
    head = json.dumps({"__metadata__": meta, **entries}, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    head = struct.pack("<Q", len(head)) + head
    digest = hashlib.sha256(head).hexdigest()
    head = head.replace(b'"' + b"0" * 64 + b'"', b'"' + digest.encode() + b'"', 1)
    return io.BytesIO(head + data)


# ------------------------------------------------------------------ 1. checkpoints


def test_save_keeps_parameter_requires_grad_and_tying():
    p = nn.Parameter(nv.ones(2))
    frozen = nn.Parameter(nv.zeros(1), requires_grad=False)
    leaf = nv.tensor([1.0, 2.0]).requires_grad_()
    back, raw = _roundtrip({"p": p, "q": p, "frozen": frozen, "leaf": leaf,
                            "plain": nv.tensor([3.0])})
    assert type(back["p"]) is nn.Parameter and back["p"].requires_grad
    assert back["p"] is back["q"]                       # tying kept
    assert back["p"].numpy().tolist() == [1.0, 1.0]
    assert type(back["frozen"]) is nn.Parameter and not back["frozen"].requires_grad
    assert type(back["leaf"]) is not nn.Parameter and back["leaf"].requires_grad
    assert not back["plain"].requires_grad
    # the tied bytes are stored once, under the first name; still plain safetensors
    header = _header(raw)
    assert sorted(k for k in header if k != "__metadata__") == ["frozen", "leaf", "p", "plain"]


def test_tied_weights_of_a_module_stay_tied():
    a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    b.weight = a.weight
    back, _ = _roundtrip({"a": a.weight, "b": b.weight, "list": [a.weight, a.bias]})
    assert back["a"] is back["b"] is back["list"][0]
    np.testing.assert_array_equal(back["a"].numpy(), a.weight.numpy())


def test_save_keeps_ordereddict():
    obj = {"o": OrderedDict([("z", 1), ("a", nv.tensor([1.0]))]), "d": {"x": 1}}
    back, _ = _roundtrip(obj)
    assert type(back["o"]) is OrderedDict and list(back["o"]) == ["z", "a"]
    assert type(back["d"]) is dict


def test_state_dict_roundtrip_still_ordereddict_with_metadata():
    sd = nn.Linear(2, 3).state_dict()
    back, _ = _roundtrip(sd)
    assert type(back) is OrderedDict and list(back) == list(sd)


def test_old_style_file_still_loads():
    """A file without any of the new nodes (what Nova wrote before) loads as before."""
    f = _handmade({"__dict__": [["w", {"__tensor__": "w"}], ["n", 3],
                                ["t", {"__tuple__": [1, 2]}]]},
                  {"w": np.array([1.0, 2.0], np.float32)})
    back = nv.load(f)
    assert back["w"].numpy().tolist() == [1.0, 2.0] and not back["w"].requires_grad
    assert type(back["w"]) is not nn.Parameter and back["n"] == 3 and back["t"] == (1, 2)


@pytest.mark.parametrize("structure,message", [
    ([{"__tensor__": "w"}, {"__same__": "v"}], "refers back to 'v'"),
    ([{"__same__": "w"}, {"__tensor__": "w"}], "refers back to 'w'"),
    ([{"__tensor__": "w", "parameter": 1}], "non-bool"),
    ([{"__tensor__": "i", "requires_grad": True}, {"__tensor__": "w"}], "int64 tensor"),
    ([{"__tensor__": "w"}, {"__dtype__": "complex32"}], "malformed __dtype__"),
    ([{"__tensor__": "w"}, {"__bytes__": "xyz"}], "malformed __bytes__"),
    ([{"__tensor__": "w"}, {"__size__": [-1]}], "malformed __size__"),
    ([{"__tensor__": "w"}, {"__dict__": [], "ordered": 1}], "unknown entry"),
])
def test_malformed_new_nodes_are_rejected(structure, message):
    tensors = {"w": np.ones(1, np.float32), "i": np.ones(1, np.int64)}
    used = {n for n in tensors if f'"{n}"' in json.dumps(structure)}
    f = _handmade(structure, {n: a for n, a in tensors.items() if n in used})
    with pytest.raises(CheckpointError, match=message):
        nv.load(f)


def test_tied_file_readable_by_safetensors():
    st = pytest.importorskip("safetensors.numpy")
    p = nn.Parameter(nv.ones(2))
    _, raw = _roundtrip({"p": p, "q": p})
    out = st.load(raw)
    assert list(out) == ["p"] and out["p"].tolist() == [1.0, 1.0]


# ------------------------------------------------------------------ 2. more values


def test_save_dtype_device_size_bytes():
    obj = {"dtype": nv.float16, "b": nv.bfloat16, "dev": nv.device("cpu"),
           "size": nv.Size((2, 3)), "tup": (2, 3), "raw": b"\x00ab", "ba": bytearray(b"z")}
    back, _ = _roundtrip(obj)
    assert back["dtype"] is nv.float16 and back["b"] is nv.bfloat16
    assert back["dev"] == nv.device("cpu") and isinstance(back["dev"], nv.device)
    assert type(back["size"]) is nv.Size and back["size"] == (2, 3)
    assert type(back["tup"]) is tuple and back["tup"] == (2, 3)
    assert back["raw"] == b"\x00ab" and back["ba"] == b"z"


def test_save_refuses_unknown_objects():
    with pytest.raises(TypeError, match="save: cannot store a set"):
        nv.save({"s": {1}}, io.BytesIO())


# ------------------------------------------------------------------ 3. containers


def test_identity_ignores_arguments():
    m = nn.Identity(3, foo=4)
    assert m(nv.tensor([1.0, 2.0])).tolist() == [1.0, 2.0]
    assert list(m.parameters()) == []


def test_parameter_list_holds_other_objects():
    pl = nn.ParameterList([nv.ones(2)])
    pl.append("s")
    pl.extend([3.0, nv.zeros(1)])
    assert len(pl) == 4 and pl[1] == "s" and pl[2] == 3.0
    assert type(pl[0]) is nn.Parameter and type(pl[3]) is nn.Parameter
    assert [n for n, _ in pl.named_parameters()] == ["0", "3"]
    assert list(pl.state_dict()) == ["0", "3"]
    assert list(pl)[1] == "s" and pl[-1] is pl[3]
    assert "(1): Object of type: str" in repr(pl)
    pl[1] = nv.ones(3)
    # registered anew, so listed last (as torch's)
    assert type(pl[1]) is nn.Parameter and [n for n, _ in pl.named_parameters()] == \
        ["0", "3", "1"]


def test_parameter_dict_holds_other_objects():
    pd = nn.ParameterDict({"a": nv.ones(1)})
    pd["s"] = 3.0
    assert pd["s"] == 3.0 and list(pd.keys()) == ["a", "s"] and "s" in pd
    assert list(pd.state_dict()) == ["a"] and len(pd) == 2
    assert list(pd.values())[1] == 3.0 and "(s): Object of type: float" in repr(pd)
    assert pd.pop("s") == 3.0 and list(pd) == ["a"]
    with pytest.raises(KeyError):
        pd["s"]


def test_parameter_dict_dict_methods():
    pd = nn.ParameterDict(OrderedDict([("b", nv.ones(1)), ("a", nv.zeros(1))]))
    assert pd.setdefault("b", 7) is pd["b"]
    assert pd.setdefault("c", 5) == 5 and list(pd) == ["b", "a", "c"]
    assert pd.popitem() == ("c", 5) and list(pd) == ["b", "a"]
    fk = pd.fromkeys(["x", "y"], nv.ones(2))
    assert type(fk) is nn.ParameterDict and list(fk) == ["x", "y"]
    assert type(fk["x"]) is nn.Parameter and fk["x"] is not fk["y"]   # wrapped per key
    shared = nn.Parameter(nv.ones(2))
    fk = pd.fromkeys(["x", "y"], shared)
    assert fk["x"] is fk["y"] is shared
    c = pd.copy()
    assert type(c) is nn.ParameterDict and list(c) == ["b", "a"] and c["a"] is pd["a"]
    del c["a"]
    assert "a" in pd
    u = pd | OrderedDict([("z", 1), ("a", nv.full((1,), 4.0))])
    assert list(u) == ["b", "a", "z"] and u["z"] == 1 and u["a"].tolist() == [4.0]
    assert pd["a"].tolist() == [0.0] and "z" not in pd
    with pytest.raises(TypeError, match="cannot assign 'int' as parameter 'a'"):
        pd | {"a": 1}                  # a registered parameter takes only a Parameter
    r = {"q": 2} | pd                  # dict's | gives way to ParameterDict.__ror__
    assert type(r) is dict and list(r) == ["q", "b", "a"] and r["a"] is pd["a"]
    pd |= {"w": 2}
    assert list(pd) == ["b", "a", "w"]
    with pytest.raises(KeyError, match="empty"):
        nn.ParameterDict().popitem()


def test_sequential_multiplication():
    s = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    t = s * 2
    assert len(t) == 4 and t[0] is t[2] and t[1] is t[3] and len(s) == 2
    assert len(3 * s) == 6
    x = nv.tensor([[1.0, -2.0]])
    ref = s(s(x)).numpy()
    np.testing.assert_allclose(t(x).numpy(), ref, rtol=1e-6)
    s *= 2
    assert len(s) == 4 and s[0] is s[2]
    with pytest.raises(ValueError, match="Non-positive"):
        s * 0
    with pytest.raises(TypeError, match="unsupported operand"):
        s * 1.5


# ------------------------------------------------------------------ 4. nn.init


def test_init_private_fan_helpers():
    init = nn.init
    w = nv.zeros(3, 4, 5)
    assert init._calculate_fan_in_and_fan_out(w) == (20, 15)
    assert init._calculate_correct_fan(w, "fan_in") == 20
    assert init._calculate_correct_fan(w, "FAN_OUT") == 15
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(nv.zeros(3))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init._calculate_correct_fan(w, "fan_avg")


def test_init_no_grad_helpers():
    init = nn.init
    w = nn.Parameter(nv.zeros(200))
    init._no_grad_uniform_(w, -0.5, 0.5)
    v = w.numpy()
    assert v.min() >= -0.5 and v.max() <= 0.5 and v.std() > 0.1 and w.requires_grad
    init._no_grad_trunc_normal_(w, 0.0, 1.0, -0.1, 0.1)
    assert np.abs(w.numpy()).max() <= 0.1
    init._no_grad_normal_(w, 10.0, 0.01)
    assert abs(w.numpy().mean() - 10.0) < 0.01
    assert init._no_grad_fill_(w, 2.5).numpy().tolist() == [2.5] * 200
    assert init._no_grad_zero_(w).numpy().tolist() == [0.0] * 200


@pytest.mark.parametrize("name,args", [
    ("uniform", ()), ("normal", ()), ("constant", (0.5,)), ("xavier_uniform", ()),
    ("xavier_normal", ()), ("kaiming_uniform", ()), ("kaiming_normal", ()),
    ("orthogonal", ()), ("sparse", (0.5,)), ("eye", ())])
def test_init_deprecated_aliases(name, args):
    w = nv.zeros(4, 4)
    with pytest.warns(FutureWarning, match=f"nn.init.{name}` is now deprecated"):
        out = getattr(nn.init, name)(w, *args)
    assert out is w and np.abs(w.numpy()).sum() > 0


def test_init_dirac_alias():
    w = nv.zeros(2, 2, 3)
    with pytest.warns(FutureWarning, match="dirac_"):
        nn.init.dirac(w)
    expected = np.zeros((2, 2, 3), np.float32)
    expected[0, 0, 1] = expected[1, 1, 1] = 1
    np.testing.assert_array_equal(w.numpy(), expected)


def test_init_eye_still_works_after_alias():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        w = nn.init.eye_(nv.zeros(2, 3))
    np.testing.assert_array_equal(w.numpy(), np.eye(2, 3, dtype=np.float32))


# ------------------------------------------------------------------ 5. small op fixes


def test_block_diag_zero_dim_ranks_lower():
    out = nv.block_diag(nv.ones(2, 2), nv.tensor(3.0, dtype=nv.float64))
    assert out.dtype == nv.float32
    expected = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 3]], np.float32)
    np.testing.assert_array_equal(out.numpy(), expected)
    assert nv.block_diag(nv.ones(1, dtype=nv.float32),
                         nv.ones(1, dtype=nv.float64)).dtype == nv.float64


def test_bool_remainder_and_fmod_with_int():
    a, b = nv.tensor([True, False, True]), nv.tensor([1, 2, 3])
    out = a % b
    assert out.dtype == nv.int64 and out.tolist() == [0, 0, 1]
    assert nv.fmod(a, b).tolist() == [0, 0, 1] and nv.fmod(a, b).dtype == nv.int64
    assert nv.remainder(nv.tensor([5, -5]), nv.tensor([True, True])).tolist() == [0, 0]
    with pytest.raises(TypeError, match="two bool operands"):
        a % a


def test_lstm_hx_message_names_length():
    m = nn.LSTM(2, 3)
    with pytest.raises(TypeError, match="of length 1"):
        m(nv.ones(1, 1, 2), (nv.zeros(1, 1, 3),))
