"""``Module.state_dict``/``load_state_dict`` machinery as PyTorch's: extra state
(``get_extra_state``/``set_extra_state``), the per-module ``_load_from_state_dict``
(BatchNorm's fill-in of ``num_batches_tracked``, user overrides), ``_metadata``
versions, ``assign=True`` and the state-dict hooks. Each scenario runs on torch and on
Nova and the two results are compared. The interpreter runs these tiny loads."""
import numpy as np
import pytest

import nova as nv
import nova.nn as nn

torch = pytest.importorskip("torch")
LIBS = [torch, nv]


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def _both(scenario):
    """``scenario(L)`` for torch and for Nova; asserts the results agree and returns
    Nova's."""
    t, n = scenario(torch), scenario(nv)
    assert n == t
    return n


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


def test_extra_state_is_saved_and_restored():
    def scenario(L):
        Counter = _with_extra(L)
        outer = L.nn.Sequential(L.nn.Linear(1, 1), Counter())
        outer[1].steps = 9
        sd = outer.state_dict()
        fresh = L.nn.Sequential(L.nn.Linear(1, 1), Counter())
        result = fresh.load_state_dict(sd)
        plain = L.nn.Linear(1, 1)              # not overridden: no key
        return list(sd), sd["1._extra_state"], fresh[1].steps, str(result), \
            list(plain.state_dict())
    keys, extra, steps, result, plain = _both(scenario)
    assert keys == ["0.weight", "0.bias", "1._extra_state", "1.fc.weight", "1.fc.bias"]
    assert extra == {"steps": 9} and steps == 9 and plain == ["weight", "bias"]


def test_extra_state_missing_and_unexpected_keys():
    def scenario(L):
        Counter = _with_extra(L)
        c = Counter()
        sd = {k: v for k, v in c.state_dict().items() if k != "_extra_state"}
        r = c.load_state_dict(sd, strict=False)
        plain = L.nn.Linear(1, 1)
        sd2 = dict(plain.state_dict(), _extra_state={"x": 1})
        r2 = plain.load_state_dict(sd2, strict=False)
        return r.missing_keys, r.unexpected_keys, r2.missing_keys, r2.unexpected_keys
    assert _both(scenario) == (["_extra_state"], [], [], ["_extra_state"])
    Counter = _with_extra(nv)
    c = Counter()
    with pytest.raises(nn.StateDictError, match="missing keys: _extra_state"):
        c.load_state_dict({k: v for k, v in c.state_dict().items() if k != "_extra_state"})
    with pytest.raises(RuntimeError, match="get_extra_state"):
        nn.Linear(1, 1).get_extra_state()


# ---------------------------------------------------------------- BatchNorm, metadata

def test_batchnorm_checkpoint_without_num_batches_tracked():
    def scenario(L):
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
    strict, loose, kept, missing, values = _both(scenario)
    assert strict == "<All keys matched successfully>" and loose == [] and kept == 0
    assert missing == ["num_batches_tracked"]
    with pytest.raises(nn.StateDictError, match="missing keys: num_batches_tracked"):
        bn = nn.BatchNorm1d(2)
        sd = bn.state_dict()
        del sd["num_batches_tracked"]
        bn.load_state_dict(sd)


def test_state_dict_metadata_versions():
    def scenario(L):
        net = L.nn.Sequential(L.nn.Linear(2, 2), L.nn.Sequential(L.nn.BatchNorm1d(2)))
        sd = net.state_dict()
        into = {}
        net.state_dict(destination=into, prefix="m.")  # a plain dict gets no metadata
        return dict(sd._metadata), list(into)
    meta, keys = _both(scenario)
    assert meta == {"": {"version": 1}, "0": {"version": 1}, "1": {"version": 1},
                    "1.0": {"version": 2}}
    assert keys[0] == "m.0.weight"


def test_subclass_load_from_state_dict_override():
    """Ported code renames old keys in its own ``_load_from_state_dict``."""
    def scenario(L):
        class Renamed(L.nn.Linear):
            def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs):
                if prefix + "w" in state_dict:
                    state_dict[prefix + "weight"] = state_dict.pop(prefix + "w")
                super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                              missing_keys, unexpected_keys, error_msgs)
        net = L.nn.Sequential(Renamed(2, 1))
        r = net.load_state_dict({"0.w": L.ones(1, 2), "0.bias": L.zeros(1)})
        return str(r), net[0].weight.tolist()
    assert _both(scenario) == ("<All keys matched successfully>", [[1.0, 1.0]])


def test_size_mismatch_loads_the_rest_then_raises():
    def scenario(L):
        net = L.nn.Sequential(L.nn.Linear(2, 2), L.nn.Linear(2, 1))
        sd = {k: L.full(tuple(v.shape), 3.0) for k, v in net.state_dict().items()}
        sd["0.weight"] = L.zeros(3, 2)
        with pytest.raises(RuntimeError, match="size mismatch for 0.weight"):
            net.load_state_dict(sd)
        return net[1].weight.tolist()
    assert _both(scenario) == [[3.0, 3.0]]


# ---------------------------------------------------------------- assign

def test_load_assign_puts_the_given_tensors():
    def scenario(L):
        m = L.nn.BatchNorm1d(2).requires_grad_(False)
        m.weight.requires_grad_(True)
        w, b = L.full((2,), 2.0, dtype=L.float64), L.nn.Parameter(L.zeros(2))
        mean = L.ones(2)
        m.load_state_dict({"weight": w, "bias": b, "running_mean": mean,
                           "running_var": L.ones(2), "num_batches_tracked": L.tensor(4)},
                          assign=True)
        return (type(m.weight).__name__, str(m.weight.dtype).split(".")[-1],
                m.weight.requires_grad, m.bias is b, m.bias.requires_grad,
                m.running_mean is mean, m.num_batches_tracked.item())
    assert _both(scenario) == ("Parameter", "float64", True, True, False, True, 4)


# ---------------------------------------------------------------- hooks

def test_load_state_dict_hooks():
    def scenario(L):
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
        r2 = net.load_state_dict({"0.bias": L.ones(2)}, strict=False)
        return log, str(r), r2.missing_keys, net[0].bias.tolist()
    log, r, missing, bias = _both(scenario)
    assert log[0] == ("pre", "Linear", "0.", True) and log[1] == ("private", "0.", 5)
    assert log[2] == ("post", "Sequential", ["0.weight"]) and len(log) == 4
    assert r == "<All keys matched successfully>" and missing == ["0.weight"]
    net = nn.Linear(1, 1)
    net.register_load_state_dict_post_hook(lambda m, keys: keys)
    with pytest.raises(RuntimeError, match="must return None"):
        net.load_state_dict(net.state_dict())
    with pytest.raises(TypeError, match="hook must be callable"):
        net.register_load_state_dict_pre_hook(3)


def test_state_dict_hooks():
    def scenario(L):
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
        h.remove()
        plain = list(net.state_dict())
        net._register_state_dict_hook(lambda m, sd, prefix, meta: {"only": 1})
        replaced = dict(net.state_dict())
        net[0]._register_state_dict_hook(lambda m, sd, prefix, meta: {"ignored": 1})
        return log, list(sd), sd._metadata["0"], plain, replaced, \
            "ignored" not in list(net.state_dict())
    log, keys, meta, plain, replaced, child_ignored = _both(scenario)
    assert log[:2] == [("pre", "0.", True), ("post", "0.", ["0.bias", "0.weight"])]
    assert log[2:] == [("pre", "0.", False)] * 3      # the removed post-hook runs no more
    assert keys == ["0.weight", "0.bias", "0.note"] and meta == {"version": 1, "seen": True}
    assert plain == ["0.weight", "0.bias"] and replaced == {"only": 1} and child_ignored
    m = nn.Linear(1, 1)
    m.register_state_dict_post_hook(lambda *a: {})
    with pytest.raises(RuntimeError, match="post-hook .* must return None"):
        m.state_dict()
