"""F.triplet_margin_with_distance_loss, F.multilabel_margin_loss and their modules
(nova/nn/more_losses.py) against numpy formulas, every reduction, gradients by finite
differences, errors."""
import warnings

import numpy as np
import pytest

import nova as nv
import nova.nn as nn
import nova.nn.functional as F
from nova.autograd.gradcheck import gradcheck
from tests.helpers import assert_close

RNG = np.random.default_rng(0)
A, P, N = (RNG.standard_normal((4, 3)) for _ in range(3))
X = RNG.standard_normal((3, 5))
# class lists ended by -1 (the rest ignored); a repeated class counts twice
T = np.array([[3, 0, -1, 1, 2], [4, 4, 1, -1, -1], [-1, 2, 3, 0, 0]])


def _dist(u, v):
    return np.sqrt(((u - v + 1e-6) ** 2).sum(-1))


def _cos_dist(u, v):
    return 1 - (u * v).sum(-1) / np.maximum(np.linalg.norm(u, axis=-1) *
                                          np.linalg.norm(v, axis=-1), 1e-8)


def triplet_ref(a, p, n, dist, margin, swap):
    d_neg = dist(a, n)
    if swap:
        d_neg = np.minimum(d_neg, dist(p, n))
    return np.maximum(margin + dist(a, p) - d_neg, 0.0)


def multilabel_ref(x, t):
    out = np.zeros(len(x))
    for s, (row, labels) in enumerate(zip(x, t)):
        listed = []
        for j in labels:
            if j < 0:
                break
            listed.append(j)
        for j in listed:
            for i in range(len(row)):
                if i not in listed:
                    out[s] += max(0.0, 1 - (row[j] - row[i]))
    return out / x.shape[1]


def _reduced(loss, reduction):
    return {"none": loss, "sum": loss.sum(), "mean": loss.mean()}[reduction]


def test_values_every_reduction():
    a, p, n = nv.tensor(A), nv.tensor(P), nv.tensor(N)
    cos = lambda u, v: 1 - F.cosine_similarity(u, v)    # noqa: E731
    cases = []
    for r, swap in (("none", False), ("mean", True), ("sum", False)):
        cases.append((F.triplet_margin_with_distance_loss(a, p, n, margin=0.5, swap=swap,
                                                          reduction=r),
                      _reduced(triplet_ref(A, P, N, _dist, 0.5, swap), r)))
        cases.append((F.triplet_margin_with_distance_loss(a, p, n, distance_function=cos,
                                                          swap=not swap, reduction=r),
                      _reduced(triplet_ref(A, P, N, _cos_dist, 1.0, not swap), r)))
        cases.append((F.multilabel_margin_loss(nv.tensor(X), nv.tensor(T), reduction=r),
                      _reduced(multilabel_ref(X, T), r)))
    cases += [
        (nn.TripletMarginWithDistanceLoss(distance_function=nn.PairwiseDistance(p=1.0),
                                          margin=2.0)(a, p, n),
         triplet_ref(A, P, N, lambda u, v: np.abs(u - v + 1e-6).sum(-1), 2.0, False).mean()),
        (nn.TripletMarginWithDistanceLoss(reduction="none")(a[0], p[0], n[0]),
         triplet_ref(A[0], P[0], N[0], _dist, 1.0, False)),
        (nn.MultiLabelMarginLoss(reduction="none")(nv.tensor(X[1]), nv.tensor(T[1])),
         multilabel_ref(X[1:2], T[1:2])[0]),
        # int32 targets; a row whose first entry is -1 has no target and no loss
        (nn.MultiLabelMarginLoss()(nv.tensor(X[2:]), nv.tensor(T[2:].astype(np.int32))), 0.0),
    ]
    nv.realize(*[got for got, _ in cases])
    for got, want in cases:
        assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_gradients():
    a, p, n = A[:3, :2], P[:3, :2], N[:3, :2]
    targets = nv.tensor(np.array([[2, 0, -1, 3], [1, -1, 0, 0]]))
    x = RNG.standard_normal((2, 4))

    def losses(a_, p_, n_, x_):
        return (F.triplet_margin_with_distance_loss(a_, p_, n_, margin=1.5, swap=True,
                                                    reduction="none"),
                F.multilabel_margin_loss(x_, targets, reduction="none"))
    assert gradcheck(losses, [a, p, n, x])


def test_legacy_reduction_and_repr():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        loss = nn.MultiLabelMarginLoss(size_average=False)
    assert loss.reduction == "sum" and "reduction='sum'" in str(seen[0].message)
    assert repr(loss) == "MultiLabelMarginLoss()"      # as PyTorch: no arguments shown
    module = nn.TripletMarginWithDistanceLoss(swap=True)
    assert isinstance(module.distance_function, nn.PairwiseDistance)
    assert "distance_function" in dict(module.named_children())
    assert repr(module) == ("TripletMarginWithDistanceLoss(\n"
                            "  (distance_function): PairwiseDistance()\n)")


def test_errors():
    a, x = nv.ones(2, 3), nv.tensor(X)
    with pytest.raises(ValueError, match="'avg' is not a valid value for reduction"):
        F.triplet_margin_with_distance_loss(a, a, a, reduction="avg")
    with pytest.raises(ValueError, match="margin must be greater than 0, got 0"):
        F.triplet_margin_with_distance_loss(a, a, a, margin=0)
    with pytest.raises(ValueError, match="expected margin to be greater than 0, got -1"):
        nn.TripletMarginWithDistanceLoss(margin=-1)
    with pytest.raises(ValueError, match="same number of dims"):
        F.triplet_margin_with_distance_loss(a, a, nv.ones(3))
    with pytest.raises(ValueError, match=r"target values must lie in \[-1, 5\)"):
        F.multilabel_margin_loss(x, nv.tensor(np.where(T == 4, 5, T)))
    with pytest.raises(ValueError, match=r"target values must lie in \[-1, 5\).* got -2"):
        F.multilabel_margin_loss(x, nv.tensor(np.where(T == -1, -2, T)))
    with pytest.raises(ValueError, match="must have the input's shape"):
        F.multilabel_margin_loss(x, nv.tensor(T[:, :4]))
    with pytest.raises(TypeError, match="target must hold class indices"):
        F.multilabel_margin_loss(x, nv.tensor(T.astype(np.float64)))
    with pytest.raises(ValueError, match=r"expected a non-empty \(C,\) or \(N, C\) input"):
        F.multilabel_margin_loss(nv.ones(2, 0), nv.zeros(2, 0, dtype=nv.int64))
    with pytest.raises(ValueError, match="reduction must be 'mean', 'sum' or 'none'"):
        F.multilabel_margin_loss(x, nv.tensor(T), reduction="batchmean")
