"""``nv.testing`` (``nova/testing.py``): ``assert_close`` with torch.testing's rules and
messages, and ``make_tensor``. The expected messages are torch 2.13's (the last tests
compare with torch itself where it is installed)."""
import math
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import nova as nv
from nova.testing import assert_close, make_tensor

T = nv.tensor


def _message(actual, expected, error=AssertionError, **kw):
    with pytest.raises(error) as info:
        assert_close(actual, expected, **kw)
    return str(info.value)


def test_close_inputs_pass_with_the_default_tolerances_by_dtype():
    assert_close(T([1.0, 2.0]), T([1.0, 2.0 + 2e-6]))                   # float32: 1.3e-6, 1e-5
    assert_close(T([1.0], dtype=nv.float16), T([1.0009765625], dtype=nv.float16))
    assert_close(T([1.0], dtype=nv.bfloat16), T([1.0078125], dtype=nv.bfloat16))
    assert_close(T([1.0], dtype=nv.float64), T([1.0 + 5e-8], dtype=nv.float64))
    assert_close(T([1, 2]), T([1, 2]))
    assert_close(T([True]), T([True]))
    assert_close(T([math.inf, -math.inf]), T([math.inf, -math.inf]))
    assert_close(T([math.nan, 1.0]), T([math.nan, 1.0]), equal_nan=True)
    assert_close(1.0, 1.0 + 1e-9)
    assert_close(1.0, 1, check_dtype=False)
    assert_close(np.float32(2.0), 2.0)                                   # numpy numbers
    assert_close(None, None)
    assert_close(nv.view_as_complex(T([[1.0, 2.0]])), nv.view_as_complex(T([[1.0, 2.0]])))
    assert_close(np.array([1.0, 2.0]), np.array([1.0, 2.0]))             # compared as tensors
    assert_close([T([1.0]), (2, {"a": T(3.0)})], [T([1.0]), (2, {"a": T(3.0)})])
    assert_close(OrderedDict(w=T([1.0])), {"w": T([1.0])})               # any mappings
    assert_close(nv.nn.Parameter(T([1.0, 2.0])), T([1.0, 2.0]))
    assert_close(T([1.0, 2.0]), T([1.0, 2.0], dtype=nv.float64), check_dtype=False)
    assert_close(T([1.0, 2.5]), T([1.0, 2.0]), rtol=0.0, atol=0.5)


def test_a_mismatch_names_the_count_and_the_greatest_differences():
    assert _message(T([1.0, 4.0, 5.0]), T([1.0, 2.0, 3.0])) == (
        "Tensor-likes are not close!\n\n"
        "Mismatched elements: 2 / 3 (66.7%)\n"
        "Greatest absolute difference: 2.0 at index (1,) (up to 1e-05 allowed)\n"
        "Greatest relative difference: 1.0 at index (1,) (up to 1.3e-06 allowed)")
    assert _message(T([[1.0, 2.0], [3.0, 4.0]]), T([[1.0, 2.0], [3.0, 4.1]])) == (
        "Tensor-likes are not close!\n\n"
        "Mismatched elements: 1 / 4 (25.0%)\n"
        "Greatest absolute difference: 0.09999990463256836 at index (1, 1) "
        "(up to 1e-05 allowed)\n"
        "Greatest relative difference: 0.024390220642089844 at index (1, 1) "
        "(up to 1.3e-06 allowed)")
    # integers compare for equality; their relative difference is float32's
    assert _message(T([1, 2, 3]), T([1, 5, 3])) == (
        "Tensor-likes are not equal!\n\n"
        "Mismatched elements: 1 / 3 (33.3%)\n"
        "Greatest absolute difference: 3 at index (1,)\n"
        "Greatest relative difference: 0.6000000238418579 at index (1,)")
    # bfloat16 differences are bfloat16's
    assert _message(T([1.0, 2.0], dtype=nv.bfloat16), T([1.0, 2.05], dtype=nv.bfloat16)) == (
        "Tensor-likes are not close!\n\n"
        "Mismatched elements: 1 / 2 (50.0%)\n"
        "Greatest absolute difference: 0.046875 at index (1,) (up to 1e-05 allowed)\n"
        "Greatest relative difference: 0.02294921875 at index (1,) (up to 0.016 allowed)")
    # zero-dim tensors and Python numbers: scalars
    assert _message(T(math.nan), T(math.nan)) == (
        "Scalars are not close!\n\nExpected nan but got nan.\n"
        "Absolute difference: nan (up to 1e-05 allowed)\n"
        "Relative difference: nan (up to 1.3e-06 allowed)")
    assert _message(T([0.0, 2.0]), T([0.0, 0.0])).endswith(
        "Greatest relative difference: inf at index (1,) (up to 1.3e-06 allowed)")
    assert "Mismatched elements: 1 / 2 (50.0%)" in _message(T([1.0, math.inf]),
                                                           T([1.0, -math.inf]))


def test_attribute_checks_come_first_and_can_be_turned_off():
    assert _message(T([1.0, 2.0]), T([1.0, 2.0], dtype=nv.float64)) == (
        "The values for attribute 'dtype' do not match: nova.float32 != nova.float64.")
    assert _message(T([1.0, 2.0]), T([1.0, 2.0, 3.0])) == (
        "The values for attribute 'shape' do not match: nova.Size([2]) != nova.Size([3]).")
    assert _message(nv.view_as_complex(T([[1.0, 2.0]])), T([1.0])) == (
        "The values for attribute 'dtype' do not match: nova.complex64 != nova.float32.")
    assert _message(T([1.0, 2.0]), T([1, 3]), check_dtype=False).startswith(
        "Tensor-likes are not close!\n\nMismatched elements: 1 / 2 (50.0%)")
    assert_close(T([1.0, 2.0], dtype=nv.float16), T([1.0, 2.0], dtype=nv.bfloat16),
                 check_dtype=False)


def test_numbers_sequences_and_mappings_report_where_they_failed():
    assert _message(1.0, 1) == ("The (d)types do not match: <class 'float'> != "
                                "<class 'int'>.")
    assert _message({"a": [T([1.0]), 2]}, {"a": [T([1.5]), 2]}).endswith(
        "\n\nThe failure occurred for item ['a'][0]")
    assert _message([1, 2], [1, 2, 3]) == "The length of the sequences mismatch: 2 != 3"
    assert _message({"a": 1}, {"b": 1}) == (
        "The keys of the mappings do not match:\nMissing keys in the actual mapping: "
        "['b']\nAdditional keys in the actual mapping: ['a']")
    assert _message(None, 1) == "None mismatch: None is not 1"
    assert _message(True, False) == "Booleans mismatch: True is not False"
    assert _message(complex(1, 2), complex(1, 2.1)).startswith(
        "Scalars are not close!\n\nExpected (1+2.1j) but got (1+2j).")


def test_msg_replaces_or_edits_the_message():
    a, e = T([1.0, 4.0, 5.0]), T([1.0, 2.0, 3.0])
    assert _message(a, e, msg="custom") == "custom"
    edited = _message((T([1.0]), a), (T([1.0]), e), msg=lambda m: f"Header\n\n{m}\n\nFooter")
    assert edited.startswith("Header\n\nTensor-likes are not close!")
    assert edited.endswith("The failure occurred for item [1]\n\nFooter")


def test_unrelated_inputs_and_half_given_tolerances_are_refused():
    assert _message(T([1.0]), 1.0, TypeError) == (
        "No comparison pair was able to handle inputs of type "
        "<class 'nova.tensor.tensor.Tensor'> and <class 'float'>.")
    assert "No comparison pair" in _message(T([1.0]), np.array([1.0], np.float32), TypeError)
    assert "No comparison pair" in _message("a", "a", TypeError)
    assert "No comparison pair" in _message(nv.nn.Parameter(T([1.0])), T([1.0]), TypeError,
                                            allow_subclasses=False)
    assert _message(T([1.0]), T([1.0]), ValueError, rtol=0.1) == (
        "Both 'rtol' and 'atol' must be either specified or omitted, but got no atol.")
    assert _message(T([1.0]), T([1.0]), ValueError, atol=0.1).endswith("got no rtol.")


def test_make_tensor_draws_in_pytorchs_ranges():
    nv.manual_seed(0)
    x = make_tensor(64, 8, dtype=nv.float32, device="cpu")
    assert x.shape == (64, 8) and x.dtype is nv.float32 and not x.requires_grad
    values = x.numpy()
    assert values.min() >= -9 and values.max() < 9 and values.std() > 3
    assert make_tensor((3, 2), dtype=nv.float64, device="cpu", low=0, high=1).shape == (3, 2)
    ints = make_tensor(1000, dtype=nv.int64, device="cpu").numpy()
    assert ints.min() >= -9 and ints.max() <= 9
    assert make_tensor(500, dtype=nv.uint8, device="cpu").numpy().max() <= 9
    assert set(make_tensor(500, dtype=nv.bool, device="cpu").numpy().tolist()) == {False, True}
    small = make_tensor(500, dtype=nv.int8, device="cpu", low=-1000, high=1000).numpy()
    assert small.min() >= -128 and small.max() <= 127          # clamped to the dtype
    nonzero = make_tensor(2000, dtype=nv.int32, device="cpu", low=-1, high=1,
                          exclude_zero=True).numpy()
    assert set(nonzero.tolist()) == {-1, 1}
    z = make_tensor(2, 3, dtype=nv.complex64, device="cpu")
    assert z.dtype == nv.complex64 and z.shape == (2, 3)
    leaf = make_tensor(4, dtype=nv.float16, device="cpu", requires_grad=True)
    assert leaf.requires_grad and leaf.is_leaf
    nc = make_tensor(3, 4, dtype=nv.float32, device="cpu", noncontiguous=True)
    assert nc.shape == (3, 4)


def test_make_tensor_refuses_what_pytorchs_refuses():
    for kw, error, match in (
            (dict(dtype=nv.int64, requires_grad=True), ValueError, "not supported for boolean"),
            (dict(dtype=nv.float32, low=2, high=1), ValueError, "`low` must be less than"),
            (dict(dtype=nv.float32, low=math.nan), ValueError, "cannot be NaN"),
            (dict(dtype=nv.uint8, low=300, high=400), ValueError, "only supports"),
            (dict(dtype=nv.float32, noncontiguous=True, memory_format=nv.contiguous_format),
             ValueError, "mutually exclusive"),
            (dict(dtype="float32"), TypeError, "not supported by nova.testing.make_tensor")):
        with pytest.raises(error, match=match):
            make_tensor(3, device="cpu", **kw)
    with pytest.warns(FutureWarning, match="low==high"):
        constant = make_tensor(3, dtype=nv.float32, device="cpu", low=2.0, high=2.0)
    assert constant.tolist() == [2.0, 2.0, 2.0]


# ----------------------------------------------------------------- against torch itself


def _cases(m):
    t = m.tensor
    c = m.view_as_complex
    return [
        (t([1., 4., 5.]), t([1., 2., 3.]), {}),
        (t(float("nan")), t(float("nan")), {}),
        (t(float("nan")), t(float("nan")), {"equal_nan": True}),
        (t([1, 2, 3]), t([1, 5, 3]), {}),
        (t([1., 2.]), t([1., 2.], dtype=m.float64), {}),
        (t([1., 2.]), t([1., 2.], dtype=m.float64), {"check_dtype": False}),
        (1.0, 1, {}), (1.0, 1, {"check_dtype": False}), (1.0, 1.0 + 1e-8, {}),
        ({"a": [t([1.0]), 2]}, {"a": [t([1.5]), 2]}, {}),
        (t([1., 4., 5.]), t([1., 2., 3.]), {"msg": "custom"}),
        (t([1., 2.]), t([1., 2.]), {"atol": 0.1}),
        (t([1., 2.], dtype=m.bfloat16), t([1., 2.05], dtype=m.bfloat16), {}),
        (t([1., 2.], dtype=m.float16), t([1., 2.002], dtype=m.float16), {}),
        (t([[1., 2.], [3., 4.]]), t([[1., 2.], [3., 4.1]]), {}),
        (t([1., float("inf")]), t([1., -float("inf")]), {}),
        (t([0., 1.]), t([1e-6, 1.]), {}), (t([0., 1.]), t([1e-4, 1.]), {}),
        (t([0., 2.]), t([0., 0.]), {}),
        (t([1., 2.]), t([1.1, 2.]), {"rtol": 0.2, "atol": 0.0}),
        (t([True, False]), t([True, True]), {}),
        ([1, 2], [1, 2, 3], {}), ({"a": 1}, {"b": 1}, {}), (None, 1, {}), (True, False, {}),
        (np.array([1., 2.], np.float32), np.array([1., 3.], np.float32), {}),
        (t([1., 2.]), np.array([1., 2.], np.float32), {}), ("a", "a", {}),
        (t([1, 2], dtype=m.uint8), t([3, 2], dtype=m.uint8), {}),
        (t([1., 2.]), t([1, 3]), {"check_dtype": False}),
        (t(1.5), t(2.5), {}), (t([1e10, 2.]), t([1.1e10, 2.]), {}),
        (t([1., 2.], dtype=m.float64), t([1. + 1e-6, 2.], dtype=m.float64), {}),
        (m.zeros(2, 3), m.zeros(3, 2), {}),
        ((t([1.]), t([2.])), (t([1.]), t([3.])), {"msg": lambda s: s + "!"}),
        (t([1, 2]), t([1, 4]), {"rtol": 0.5, "atol": 0.5}),
        (t([1, 2]), t([1, 5]), {"rtol": 0.5, "atol": 0.5}),
        (t([float("nan"), 1.]), t([1., 1.]), {}), (t(3), t(4), {}),
        (c(t([[1., 2.], [3., 4.]])), c(t([[1., 2.], [3., 4.5]])), {}),
        (c(t([[1., 2.]])), t([1.]), {}),
        (m.arange(12.).reshape(3, 4), m.arange(12.).reshape(3, 4) * 1.5, {}),
        (t([1., 2.1], dtype=m.float16), t([1., 2.], dtype=m.bfloat16), {"check_dtype": False}),
        (m.nn.Parameter(t([1., 2.])), t([1., 2.]), {"allow_subclasses": False}),
        (m.Size([1, 2]), m.Size([1, 3]), {}), (complex(1, 2), complex(1, 2.1), {}),
    ]


def _outcomes(m, check):
    out = []
    for actual, expected, kw in _cases(m):
        try:
            check(actual, expected, **kw)
            out.append("OK")
        except Exception as e:              # noqa: BLE001 (the outcome is the point)
            out.append(f"{type(e).__name__}: {e}")
    return out


def test_every_outcome_and_message_is_torchs():
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = _outcomes(nv, assert_close)
        theirs = _outcomes(torch, torch.testing.assert_close)
    for mine, torchs in zip(ours, theirs):
        mine = mine.replace("nova.", "torch.").replace("torch.tensor.tensor.Tensor",
                                                        "torch.Tensor")
        assert mine == torchs
