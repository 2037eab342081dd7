"""``nv.nn.utils.prune`` (PyTorch's pruning API): masks against numpy written from
PyTorch's definitions, the reparametrization (``<name>_orig``, ``<name>_mask``, the
pre-hook), combined pruning, ``remove`` and the errors."""
import pickle

import numpy as np
import pytest

import nova as nv
import nova.nn as nn
import nova.nn.utils.prune as prune

RNG = np.random.default_rng(0)


def _linear(out_features=4, in_features=6):
    m = nn.Linear(in_features, out_features)
    w = RNG.permutation(out_features * in_features).reshape(out_features, in_features)
    with nv.no_grad():    # distinct magnitudes: no ties to break
        m.weight.copy_(nv.tensor(((w + 1) * np.where(w % 2, 1, -1) / 10).astype(np.float32)))
    return m


def _smallest_mask(values, k):
    mask = np.ones(values.size, np.float32)
    mask[np.argsort(np.abs(values).reshape(-1), kind="stable")[:k]] = 0
    return mask.reshape(values.shape)


def test_l1_unstructured_reparametrizes_and_masks_forward_and_gradient():
    m = _linear()
    w0 = m.weight.numpy().copy()
    weight = m.weight
    assert prune.l1_unstructured(m, "weight", amount=0.3) is m
    want = _smallest_mask(w0, round(0.3 * 24))            # 7 of 24
    np.testing.assert_array_equal(m.weight_mask.numpy(), want)
    assert m.weight_orig is weight and "weight" not in dict(m.named_parameters())
    assert list(m.state_dict()) == ["bias", "weight_orig", "weight_mask"]
    np.testing.assert_array_equal(m.weight.numpy(), w0 * want)
    x = RNG.standard_normal((3, 6)).astype(np.float32)
    y = m(nv.tensor(x))
    np.testing.assert_allclose(y.numpy(), x @ (w0 * want).T + m.bias.numpy(), rtol=1e-5,
                               atol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(m.weight_orig.grad.numpy(), np.tile(x.sum(0), (4, 1)) * want,
                               rtol=1e-5)
    nv.optim.SGD(m.parameters(), lr=0.1).step()      # orig trains where not pruned
    orig = m.weight_orig.numpy()
    assert (orig[want == 0] == w0[want == 0]).all() and (orig[want == 1] != w0[want == 1]).all()
    m(nv.tensor(x))                                   # the pre-hook recomputes the weight
    assert (m.weight.numpy()[want == 0] == 0).all() and prune.is_pruned(m)


def test_structured_pruning_removes_the_smallest_norm_channels():
    m = _linear()
    w0 = m.weight.numpy().copy()
    prune.ln_structured(m, "weight", amount=2, n=1, dim=1)      # columns by L1 norm
    norms = np.abs(w0).sum(0)
    want = np.ones_like(w0)
    want[:, np.argsort(norms, kind="stable")[:2]] = 0
    np.testing.assert_array_equal(m.weight_mask.numpy(), want)
    m2 = _linear()
    w2 = m2.weight.numpy().copy()
    prune.ln_structured(m2, "weight", amount=0.5, n=float("inf"), dim=0)
    want2 = np.ones_like(w2)
    want2[np.argsort(np.abs(w2).max(1), kind="stable")[:2]] = 0
    np.testing.assert_array_equal(m2.weight_mask.numpy(), want2)
    nv.manual_seed(3)
    m3 = _linear()
    prune.random_structured(m3, "weight", amount=1, dim=0)
    rows = m3.weight_mask.numpy().sum(1)
    assert sorted(rows.tolist()) == [0, 6, 6, 6]
    with pytest.raises(ValueError, match="multidimensional"):
        prune.ln_structured(nn.Linear(3, 2), "bias", 1, 2, 0)


def test_pruning_again_chooses_among_what_is_left():
    """The container's rule: a second unstructured pruning takes its amount of the
    entries still unpruned; a structured one of the channels not fully pruned."""
    m = _linear()
    w0 = m.weight.numpy().copy()
    prune.l1_unstructured(m, "weight", amount=0.5)           # 12 of 24
    prune.l1_unstructured(m, "weight", amount=0.5)           # 6 of the 12 left
    assert isinstance(m._forward_pre_hooks[next(iter(m._forward_pre_hooks))][0],
                      prune.PruningContainer)
    np.testing.assert_array_equal(m.weight_mask.numpy(), _smallest_mask(w0, 18))
    prune.ln_structured(m, "weight", amount=1, n=2, dim=0)   # 1 of the rows still alive
    mask = m.weight_mask.numpy()
    survivors = _smallest_mask(w0, 18)
    alive = np.nonzero(survivors.sum(1))[0]
    norms = np.sqrt((w0[alive] ** 2).sum(1))
    gone = alive[np.argsort(norms, kind="stable")[0]]
    want = survivors.copy()
    want[gone] = 0
    np.testing.assert_array_equal(mask, want)
    assert len(m._forward_pre_hooks) == 1


def test_random_unstructured_and_custom_and_identity():
    nv.manual_seed(0)
    m = _linear()
    prune.random_unstructured(m, "weight", amount=5)
    assert (m.weight_mask.numpy() == 0).sum() == 5
    nv.manual_seed(0)
    m2 = _linear()
    prune.random_unstructured(m2, "weight", amount=5)            # seeded: the same entries
    np.testing.assert_array_equal(m.weight_mask.numpy(), m2.weight_mask.numpy())
    m3 = _linear()
    given = (np.arange(4) % 2).astype(np.float32)
    prune.custom_from_mask(m3, "bias", nv.tensor(given))
    np.testing.assert_array_equal(m3.bias.numpy(), m3.bias_orig.numpy() * given)
    prune.identity(m3, "weight")
    np.testing.assert_array_equal(m3.weight_mask.numpy(), np.ones((4, 6)))
    t = nv.tensor([3.0, -1.0, 0.5, 2.0])
    np.testing.assert_array_equal(prune.L1Unstructured(amount=2).prune(t).numpy(),
                                  [3.0, 0.0, 0.0, 2.0])


def test_global_unstructured_ranks_every_parameter_together():
    a, b = _linear(4, 6), _linear(3, 4)
    with nv.no_grad():
        b.weight.mul_(0.01)                              # b's entries are all smaller
    wa, wb = a.weight.numpy().copy(), b.weight.numpy().copy()
    prune.global_unstructured([(a, "weight"), (b, "weight")], prune.L1Unstructured,
                              amount=14)
    both = _smallest_mask(np.concatenate([wa.reshape(-1), wb.reshape(-1)]), 14)
    np.testing.assert_array_equal(a.weight_mask.numpy(), both[:24].reshape(4, 6))
    np.testing.assert_array_equal(b.weight_mask.numpy(), both[24:].reshape(3, 4))
    assert b.weight_mask.numpy().sum() == 0 and a.weight_mask.numpy().sum() == 22
    with pytest.raises(TypeError, match="unstructured"):
        prune.global_unstructured([(a, "weight")], prune.LnStructured, amount=1, n=2)


def test_remove_makes_it_permanent_on_the_same_parameter():
    m = _linear()
    opt_param = m.weight
    prune.l1_unstructured(m, "weight", amount=10)
    masked = m.weight.numpy().copy()
    c = pickle.loads(pickle.dumps(m))
    assert prune.remove(m, "weight") is m
    assert m.weight is opt_param and isinstance(m.weight, nn.Parameter)
    np.testing.assert_array_equal(m.weight.numpy(), masked)
    assert list(m.state_dict()) == ["bias", "weight"] and not prune.is_pruned(m)   # (torch's)
    assert prune.is_pruned(c)                        # the copy keeps its own pruning
    np.testing.assert_array_equal(c.weight.numpy(), masked)
    with pytest.raises(ValueError, match="has to be pruned before"):
        prune.remove(m, "weight")


def test_bad_amounts_and_names_are_refused():
    m = _linear()
    for amount, err in ((-1, ValueError), (1.5, ValueError), ("x", TypeError),
                        (True, TypeError)):
        with pytest.raises(err, match="amount"):
            prune.l1_unstructured(m, "weight", amount)
    with pytest.raises(ValueError, match="smaller than the number of parameters"):
        prune.l1_unstructured(m, "weight", 25)
    with pytest.raises(AttributeError, match="has no parameter 'kernel'"):
        prune.l1_unstructured(m, "kernel", 1)
    with pytest.raises(ValueError, match="importance_scores of shape"):
        prune.l1_unstructured(m, "weight", 1, importance_scores=nv.ones(3))
    assert not prune.is_pruned(m)
