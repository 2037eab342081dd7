"""``Module.state_dict``/``load_state_dict`` machinery as PyTorch's: extra state
(``get_extra_state``/``set_extra_state``), the per-module ``_load_from_state_dict``
(BatchNorm's fill-in of ``num_batches_tracked``, user overrides), ``_metadata``
versions, ``assign=True`` and the state-dict hooks.

Each scenario is a function of the library (``L``: ``nova`` or ``torch``). The tests
run it on Nova and assert the expected keys, values, hook calls and missing/unexpected
keys directly (CI has no torch); ``test_scenario_matches_torch`` runs every scenario on
torch too, where it is installed, and compares. The interpreter runs these tiny
loads."""
import numpy as np
import pytest

import nova as nv
import nova.nn as nn


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def _values(sd):
    return {k: np.asarray(v.detach().numpy()).tolist() if hasattr(v, "shape") else v
            for k, v in sd.items()}


# ---------------------------------------------------------------- extra state

def _with_extra(L):
    class Counter(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.steps = 0
            self.fc = L.nn.Linear(1, 1)

        def get_extra_state(self):
            return {"steps": self.steps}

        def set_extra_state(self, state):
            self.steps = state["steps"]
    return Counter


def _extra_state_round_trip(L):
    Counter = _with_extra(L)
    outer = L.nn.Sequential(L.nn.Linear(1, 1), Counter())
    outer[1].steps = 9
    sd = outer.state_dict()
    fresh = L.nn.Sequential(L.nn.Linear(1, 1), Counter())
    result = fresh.load_state_dict(sd)
    plain = L.nn.Linear(1, 1)              # not overridden: no key
    return list(sd), sd["1._extra_state"], fresh[1].steps, str(result), \
        list(plain.state_dict())


def test_extra_state_is_saved_and_restored():
    keys, extra, steps, result, plain = _extra_state_round_trip(nv)
    assert keys == ["0.weight", "0.bias", "1._extra_state", "1.fc.weight", "1.fc.bias"]
    assert extra == {"steps": 9} and steps == 9 and plain == ["weight", "bias"]
    assert result == "<All keys matched successfully>"


def _extra_state_keys(L):
    Counter = _with_extra(L)
    c = Counter()
    sd = {k: v for k, v in c.state_dict().items() if k != "_extra_state"}
    r = c.load_state_dict(sd, strict=False)
    plain = L.nn.Linear(1, 1)
    sd2 = dict(plain.state_dict(), _extra_state={"x": 1})
    r2 = plain.load_state_dict(sd2, strict=False)
    return r.missing_keys, r.unexpected_keys, r2.missing_keys, r2.unexpected_keys


def test_extra_state_missing_and_unexpected_keys():
    assert _extra_state_keys(nv) == (["_extra_state"], [], [], ["_extra_state"])
    Counter = _with_extra(nv)
    c = Counter()
    with pytest.raises(nn.StateDictError, match="missing keys: _extra_state"):
        c.load_state_dict({k: v for k, v in c.state_dict().items() if k != "_extra_state"})
    with pytest.raises(RuntimeError, match="get_extra_state"):
        nn.Linear(1, 1).get_extra_state()


# ---------------------------------------------------------------- BatchNorm, metadata

def _batchnorm_without_num_batches_tracked(L):
    bn = L.nn.BatchNorm1d(2)
    bn(L.ones(3, 2) * L.arange(3.0).reshape(3, 1))
    sd = {k: v for k, v in bn.state_dict().items() if k != "num_batches_tracked"}
    fresh = L.nn.BatchNorm1d(2)
    strict = str(fresh.load_state_dict(sd))       # no _metadata: version unknown
    loose = fresh.load_state_dict(sd, strict=False)
    kept = fresh.num_batches_tracked.item()
    # a current (version 2) state_dict that lacks it is reported
    current = bn.state_dict()
    del current["num_batches_tracked"]
    r = fresh.load_state_dict(current, strict=False)
    return strict, loose.missing_keys, kept, r.missing_keys, \
        _values(fresh.state_dict())


def test_batchnorm_checkpoint_without_num_batches_tracked():
    strict, loose, kept, missing, values = _batchnorm_without_num_batches_tracked(nv)
    assert strict == "<All keys matched successfully>" and loose == [] and kept == 0
    assert missing == ["num_batches_tracked"]
    # the batch [[0, 0], [1, 1], [2, 2]]: mean 1, unbiased variance 1, momentum 0.1
    assert list(values) == ["weight", "bias", "running_mean", "running_var",
                            "num_batches_tracked"]
    np.testing.assert_allclose(values["running_mean"], [0.1, 0.1], rtol=1e-6)
    np.testing.assert_allclose(values["running_var"], [1.0, 1.0], rtol=1e-6)
    assert values["weight"] == [1.0, 1.0] and values["bias"] == [0.0, 0.0]
    assert values["num_batches_tracked"] == 0
    with pytest.raises(nn.StateDictError, match="missing keys: num_batches_tracked"):
        bn = nn.BatchNorm1d(2)
        sd = bn.state_dict()
        del sd["num_batches_tracked"]
        bn.load_state_dict(sd)


def _metadata_versions(L):
    net = L.nn.Sequential(L.nn.Linear(2, 2), L.nn.Sequential(L.nn.BatchNorm1d(2)))
    sd = net.state_dict()
    into = {}
    net.state_dict(destination=into, prefix="m.")  # a plain dict gets no metadata
    return dict(sd._metadata), list(into), hasattr(into, "_metadata")


def test_state_dict_metadata_versions():
    meta, keys, into_has_metadata = _metadata_versions(nv)
    assert meta == {"": {"version": 1}, "0": {"version": 1}, "1": {"version": 1},
                    "1.0": {"version": 2}}
    assert keys == ["m.0.weight", "m.0.bias", "m.1.0.weight", "m.1.0.bias",
                    "m.1.0.running_mean", "m.1.0.running_var", "m.1.0.num_batches_tracked"]
    assert not into_has_metadata


def _subclass_override(L):
    class Renamed(L.nn.Linear):
        def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                                  missing_keys, unexpected_keys, error_msgs):
            if prefix + "w" in state_dict:
                state_dict[prefix + "weight"] = state_dict.pop(prefix + "w")
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                          missing_keys, unexpected_keys, error_msgs)
    net = L.nn.Sequential(Renamed(2, 1))
    r = net.load_state_dict({"0.w": L.ones(1, 2), "0.bias": L.zeros(1)})
    return str(r), net[0].weight.tolist(), net[0].bias.tolist()


def test_subclass_load_from_state_dict_override():
    """Ported code renames old keys in its own ``_load_from_state_dict``."""
    assert _subclass_override(nv) == ("<All keys matched successfully>", [[1.0, 1.0]],
                                      [0.0])


def _size_mismatch(L):
    net = L.nn.Sequential(L.nn.Linear(2, 2), L.nn.Linear(2, 1))
    before = net[0].weight.tolist()
    sd = {k: L.full(tuple(v.shape), 3.0) for k, v in net.state_dict().items()}
    sd["0.weight"] = L.zeros(3, 2)
    with pytest.raises(RuntimeError, match="size mismatch for 0.weight"):
        net.load_state_dict(sd)
    return (net[0].weight.tolist() == before, net[0].bias.tolist(), net[1].weight.tolist(),
            net[1].bias.tolist())


def test_size_mismatch_loads_the_rest_then_raises():
    assert _size_mismatch(nv) == (True, [3.0, 3.0], [[3.0, 3.0]], [3.0])
    with pytest.raises(nn.StateDictError, match=r"checkpoint \(3, 2\) vs model \(2, 2\)"):
        nn.Linear(2, 2).load_state_dict({"weight": nv.zeros(3, 2), "bias": nv.zeros(2)})


# ---------------------------------------------------------------- assign

def _assign(L):
    m = L.nn.BatchNorm1d(2).requires_grad_(False)
    m.weight.requires_grad_(True)
    w, b = L.full((2,), 2.0, dtype=L.float64), L.nn.Parameter(L.zeros(2))
    mean = L.ones(2)
    m.load_state_dict({"weight": w, "bias": b, "running_mean": mean,
                       "running_var": L.ones(2), "num_batches_tracked": L.tensor(4)},
                      assign=True)
    return (type(m.weight).__name__, str(m.weight.dtype).split(".")[-1],
            m.weight.requires_grad, m.bias is b, m.bias.requires_grad,
            m.running_mean is mean, m.num_batches_tracked.item(), m.weight.tolist())


def test_load_assign_puts_the_given_tensors():
    """The given tensors become the module's (a tensor wrapped in a Parameter keeping
    the module's requires_grad, a Parameter as it is), their dtypes kept."""
    assert _assign(nv) == ("Parameter", "float64", True, True, False, True, 4, [2.0, 2.0])


# ---------------------------------------------------------------- hooks

def _load_hooks(L):
    log = []
    net = L.nn.Sequential(L.nn.Linear(2, 2))

    def pre(module, state_dict, prefix, local_metadata, strict, missing, unexpected,
            errors):
        log.append(("pre", type(module).__name__, prefix, strict))
        if prefix + "old_bias" in state_dict:
            state_dict[prefix + "bias"] = state_dict.pop(prefix + "old_bias")

    def post(module, incompatible):
        log.append(("post", type(module).__name__, list(incompatible.missing_keys)))
        incompatible.missing_keys.clear()
    h_pre = net[0].register_load_state_dict_pre_hook(pre)
    net[0]._register_load_state_dict_pre_hook(
        lambda sd, prefix, *rest: log.append(("private", prefix, len(rest))))
    h_post = net.register_load_state_dict_post_hook(post)
    r = net.load_state_dict({"0.old_bias": L.ones(2)})     # weight missing, cleared
    h_pre.remove(), h_post.remove()
    r2 = net.load_state_dict({"0.bias": L.full((2,), 2.0)}, strict=False)
    return log, str(r), r2.missing_keys, net[0].bias.tolist()


def test_load_state_dict_hooks():
    log, r, missing, bias = _load_hooks(nv)
    assert log == [("pre", "Linear", "0.", True), ("private", "0.", 5),
                   ("post", "Sequential", ["0.weight"]),
                   ("private", "0.", 5)]       # the removed hooks run no more
    assert r == "<All keys matched successfully>" and missing == ["0.weight"]
    assert bias == [2.0, 2.0]
    net = nn.Linear(1, 1)
    net.register_load_state_dict_post_hook(lambda m, keys: keys)
    with pytest.raises(RuntimeError, match="must return None"):
        net.load_state_dict(net.state_dict())
    with pytest.raises(TypeError, match="hook must be callable"):
        net.register_load_state_dict_pre_hook(3)


def _load_hook_arguments(L):
    """What each hook receives: the module itself, the (shared) state dict, the
    module's prefix and metadata, ``strict`` (always True here, as in PyTorch: the
    caller applies ``strict``), the lists being filled; pre-hooks run before the values
    are copied, post-hooks after."""
    net = L.nn.Sequential(L.nn.Linear(2, 1), L.nn.Linear(1, 1))
    sd = net.state_dict()
    sd["0.weight"] = L.full((1, 2), 5.0)
    sd["0.extra"] = L.zeros(1)
    del sd["1.bias"]
    seen = {}

    def pre(module, state_dict, prefix, local_metadata, strict, missing, unexpected,
            errors):
        seen["pre"] = (module is net[0], sorted(state_dict), prefix, dict(local_metadata),
                       strict, list(missing), list(unexpected), list(errors),
                       module.weight.tolist() == [[5.0, 5.0]])

    def post(module, incompatible):
        seen["post"] = (module is net[1], list(incompatible.missing_keys),
                        list(incompatible.unexpected_keys), net[0].weight.tolist())
    net[0].register_load_state_dict_pre_hook(pre)
    net[1].register_load_state_dict_post_hook(post)
    r = net.load_state_dict(sd, strict=False)
    return seen["pre"], seen["post"], r.missing_keys, r.unexpected_keys


def test_load_hook_arguments():
    pre, post, missing, unexpected = _load_hook_arguments(nv)
    # a child sees the entries under its prefix only
    assert pre == (True, ["0.bias", "0.extra", "0.weight"], "0.", {"version": 1}, True,
                   [], [], [], False)
    # a post-hook sees the keys of the whole load (here after net[1]'s own load)
    assert post == (True, ["1.bias"], ["0.extra"], [[5.0, 5.0]])
    assert missing == ["1.bias"] and unexpected == ["0.extra"]


def _state_dict_hooks(L):
    log = []
    net = L.nn.Sequential(L.nn.Linear(1, 1))
    net[0].register_state_dict_pre_hook(
        lambda m, prefix, keep_vars: log.append(("pre", prefix, keep_vars)))

    def post(module, sd, prefix, local_metadata):
        log.append(("post", prefix, sorted(sd)))
        sd[prefix + "note"] = 1
        local_metadata["seen"] = True
    h = net[0].register_state_dict_post_hook(post)
    sd = net.state_dict(keep_vars=True)
    kept = type(sd["0.weight"]).__name__
    h.remove()
    plain = list(net.state_dict())
    net._register_state_dict_hook(lambda m, sd, prefix, meta: {"only": 1})
    replaced = dict(net.state_dict())
    net[0]._register_state_dict_hook(lambda m, sd, prefix, meta: {"ignored": 1})
    return log, list(sd), sd._metadata["0"], plain, replaced, \
        "ignored" not in list(net.state_dict()), kept


def test_state_dict_hooks():
    log, keys, meta, plain, replaced, child_ignored, kept = _state_dict_hooks(nv)
    assert log[:2] == [("pre", "0.", True), ("post", "0.", ["0.bias", "0.weight"])]
    assert log[2:] == [("pre", "0.", False)] * 3      # the removed post-hook runs no more
    assert keys == ["0.weight", "0.bias", "0.note"] and meta == {"version": 1, "seen": True}
    assert plain == ["0.weight", "0.bias"] and replaced == {"only": 1} and child_ignored
    assert kept == "Parameter"                         # keep_vars=True: the parameter
    m = nn.Linear(1, 1)
    m.register_state_dict_post_hook(lambda *a: {})
    with pytest.raises(RuntimeError, match="post-hook .* must return None"):
        m.state_dict()


# ---------------------------------------------------------------- against torch

SCENARIOS = [_extra_state_round_trip, _extra_state_keys,
             _batchnorm_without_num_batches_tracked, _metadata_versions,
             _subclass_override, _size_mismatch, _assign, _load_hooks,
             _load_hook_arguments, _state_dict_hooks]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__.strip("_"))
def test_scenario_matches_torch(scenario):
    """Every scenario gives the same result on torch (where it is installed)."""
    torch = pytest.importorskip("torch")
    assert scenario(nv) == scenario(torch)
