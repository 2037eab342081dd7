"""RMSprop, Adagrad and the ExponentialLR, MultiStepLR and CosineAnnealingWarmRestarts
schedules against PyTorch's: parameters after several steps on the same gradients, the
schedule's rates epoch by epoch. Adam's kernel-choice flags are accepted."""
import numpy as np
import pytest

import nova as nv

torch = pytest.importorskip("torch")

P0 = np.array([[0.5, -1.0, 2.0], [0.1, 0.0, -0.3]], np.float32)
GRADS = [np.random.default_rng(k).standard_normal(P0.shape).astype(np.float32)
         for k in range(5)]


def _trajectories(nova_opt, torch_opt, **kw):
    p = nv.nn.Parameter(nv.tensor(P0.copy()))
    q = torch.nn.Parameter(torch.from_numpy(P0.copy()))
    a, b = nova_opt([p], **kw), torch_opt([q], **kw)
    for g in GRADS:
        (p * nv.tensor(g)).sum().backward()
        (q * torch.from_numpy(g)).sum().backward()
        a.step()
        b.step()
        a.zero_grad()
        b.zero_grad()
        np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kw", [dict(lr=1e-2), dict(lr=1e-2, momentum=0.9),
                                dict(lr=1e-2, centered=True, weight_decay=0.1),
                                dict(lr=3e-3, alpha=0.9, momentum=0.5, centered=True,
                                     maximize=True)])
def test_rmsprop_matches_pytorch(kw):
    _trajectories(nv.optim.RMSprop, torch.optim.RMSprop, **kw)


@pytest.mark.parametrize("kw", [dict(lr=1e-1), dict(lr=1e-1, lr_decay=0.3),
                                dict(lr=5e-2, weight_decay=0.2, initial_accumulator_value=0.5)])
def test_adagrad_matches_pytorch(kw):
    _trajectories(nv.optim.Adagrad, torch.optim.Adagrad, **kw)


def test_adam_accepts_pytorchs_kernel_flags_and_refuses_other_algorithms():
    p = nv.nn.Parameter(nv.ones(2))
    nv.optim.AdamW([p], lr=1e-3, fused=True, foreach=False, capturable=True)
    with pytest.raises(NotImplementedError, match="differentiable"):
        nv.optim.Adam([p], differentiable=True)


@pytest.mark.parametrize("name,kw", [
    ("ExponentialLR", dict(gamma=0.8)),
    ("MultiStepLR", dict(milestones=[2, 5, 5, 9], gamma=0.5)),
    ("CosineAnnealingWarmRestarts", dict(T_0=3, eta_min=0.01)),
    ("CosineAnnealingWarmRestarts", dict(T_0=2, T_mult=3, eta_min=0.0)),
])
def test_schedules_match_pytorch(name, kw):
    a = nv.optim.SGD([nv.nn.Parameter(nv.ones(1))], lr=0.5)
    b = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.5)
    sa = getattr(nv.optim.lr_scheduler, name)(a, **kw)
    sb = getattr(torch.optim.lr_scheduler, name)(b, **kw)
    for _ in range(30):
        np.testing.assert_allclose(sa.get_last_lr(), sb.get_last_lr(), rtol=1e-9)
        b.step()
        sa.step()
        sb.step()
