"""Resuming from a PyTorch optimizer checkpoint: ``torch.save(opt.state_dict())`` read
by ``nv.load`` and loaded into the same Nova optimizer continues the same trajectory,
and ``param_groups`` hold the entries PyTorch's do (scripts and checkpoints read them).
The interpreter runs these tiny steps (the state handling is the optimizer's Python)."""
import io

import numpy as np
import pytest

import nova as nv
from tests.test_serialization_torch_format import load_bytes, tensor, torch_file

NAMES = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam",
         "RAdam", "ASGD", "Rprop"]
W0 = np.array([1.0, -2.0, 3.0])
G = np.array([0.5, 1.0, -1.5])


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def _kwargs(name):
    return {"lr": 0.1, **({"momentum": 0.9} if name == "SGD" else {}),
            **({"weight_decay": 0.1} if name in ("Adam", "AdamW") else {})}


@pytest.mark.parametrize("name", NAMES)
def test_a_torch_checkpoint_resumes_the_same_trajectory(name):
    torch = pytest.importorskip("torch")
    tp = torch.nn.Parameter(torch.tensor(W0))
    to = getattr(torch.optim, name)([tp], **_kwargs(name))
    for i in range(2):
        tp.grad = torch.tensor(G * (i + 1))
        to.step()
    buf = io.BytesIO()
    torch.save(to.state_dict(), buf)
    buf.seek(0)
    p = nv.nn.Parameter(nv.tensor(tp.detach().numpy()))
    o = getattr(nv.optim, name)([p], **_kwargs(name))
    o.load_state_dict(nv.load(buf))
    for i in range(2, 4):
        p.grad = nv.tensor(G * (i + 1))
        o.step()
        o.zero_grad()
        tp.grad = torch.tensor(G * (i + 1))
        to.step()
    # (PyTorch keeps NAdam's mu_product and ASGD's eta and mu as float32 tensors, Nova
    # as Python floats)
    np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(),
                               rtol=1e-8 if name in ("NAdam", "ASGD") else 1e-13)
    assert isinstance(o.state[p].get("step", 0), int)


@pytest.mark.parametrize("name", NAMES)
def test_param_groups_hold_pytorchs_entries(name):
    torch = pytest.importorskip("torch")
    t = getattr(torch.optim, name)([torch.nn.Parameter(torch.ones(2))], lr=0.1)
    n = getattr(nv.optim, name)([nv.nn.Parameter(nv.ones(2))], lr=0.1)
    assert n.param_groups[0].keys() == t.param_groups[0].keys()
    for k, v in t.param_groups[0].items():
        if k != "params":
            assert n.param_groups[0][k] == v, k


def test_kernel_flags_are_accepted_and_kept():
    p = nv.nn.Parameter(nv.ones(2))
    assert nv.optim.SGD([p], lr=0.1, foreach=True, fused=False).param_groups[0]["foreach"]
    assert nv.optim.Adagrad([p], fused=True).param_groups[0]["fused"]
    assert nv.optim.RMSprop([p], capturable=True).param_groups[0]["capturable"]
    with pytest.raises(NotImplementedError, match="SGD: differentiable=True"):
        nv.optim.SGD([p], lr=0.1, differentiable=True)


def test_decoupled_weight_decay_is_a_group_entry():
    """``Adam(decoupled_weight_decay=True)`` is AdamW (PyTorch 2.6+), and a group
    loaded from an AdamW checkpoint decays as AdamW does."""
    def run(make):
        p = nv.nn.Parameter(nv.tensor(W0))
        o = make(p)
        for i in range(3):
            p.grad = nv.tensor(G * (i + 1))
            o.step()
            o.zero_grad()
        return p.detach().numpy()
    want = run(lambda p: nv.optim.AdamW([p], lr=0.1, weight_decay=0.5))
    got = run(lambda p: nv.optim.Adam([p], lr=0.1, weight_decay=0.5,
                                      decoupled_weight_decay=True))
    np.testing.assert_array_equal(got, want)

    def loaded(p):
        o = nv.optim.Adam([p], lr=0.1, weight_decay=0.5)
        o.load_state_dict(nv.optim.AdamW([nv.nn.Parameter(nv.tensor(W0))], lr=0.1,
                                         weight_decay=0.5).state_dict())
        return o
    np.testing.assert_array_equal(run(loaded), want)
    plain = run(lambda p: nv.optim.Adam([p], lr=0.1, weight_decay=0.5))
    assert not np.allclose(plain, want)


def test_a_host_number_saved_as_a_tensor_of_several_values_is_refused():
    p = nv.nn.Parameter(nv.ones(3))
    o = nv.optim.Adam([p])
    sd = {"state": {0: {"step": nv.ones(3), "exp_avg": nv.zeros(3), "exp_avg_sq": nv.zeros(3)}},
          "param_groups": o.state_dict()["param_groups"]}
    with pytest.raises(ValueError, match="state 'step' of parameter 0 must be a number"):
        o.load_state_dict(sd)


def _steps(o, p, grads):
    for g in grads:
        p.grad = nv.tensor(g)
        o.step()
        o.zero_grad()


@pytest.mark.parametrize("name,host", [("Adam", ["step"]), ("NAdam", ["step", "mu_product"]),
                                       ("ASGD", ["step", "eta", "mu"])])
def test_host_numbers_saved_as_0d_tensors_resume_exactly(name, host):
    """PyTorch saves ``step`` (NAdam's ``mu_product``, ASGD's ``eta`` and ``mu``) as 0-d
    tensors: a file laid out as torch.save writes it (no torch needed) resumes the
    uninterrupted trajectory bit for bit when the numbers are exact in its dtype."""
    p = nv.nn.Parameter(nv.tensor(W0))
    o = getattr(nv.optim, name)([p], lr=0.1)
    _steps(o, p, [G, 2 * G])
    saved = o.state_dict()
    state = {k: tensor(np.array(v, np.float64)) if k in host else tensor(v.numpy())
             for k, v in saved["state"][0].items()}
    blob = torch_file({"state": {0: state}, "param_groups": saved["param_groups"]})
    q = nv.nn.Parameter(nv.tensor(p.detach().numpy()))
    resumed = getattr(nv.optim, name)([q], lr=0.1)
    resumed.load_state_dict(load_bytes(blob))
    assert all(type(resumed.state[q][k]) is type(o.state[p][k]) for k in host)
    _steps(o, p, [3 * G, 4 * G])
    _steps(resumed, q, [3 * G, 4 * G])
    np.testing.assert_array_equal(q.detach().numpy(), p.detach().numpy())


def test_param_groups_hold_the_kernel_flags_pytorch_2_13_keeps():
    p = nv.nn.Parameter(nv.ones(2))
    keys = {name: set(getattr(nv.optim, name)([p], lr=0.1).param_groups[0]) for name in NAMES}
    assert {"foreach", "fused", "differentiable"} <= keys["SGD"]
    assert {"foreach", "fused", "capturable", "differentiable",
            "decoupled_weight_decay"} <= keys["Adam"] & keys["AdamW"]
    assert {"foreach", "capturable", "differentiable"} <= keys["RMSprop"] & keys["Rprop"]
