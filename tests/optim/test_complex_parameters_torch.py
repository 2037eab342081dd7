"""Complex parameters against PyTorch's optimizers on complex parameters (which PyTorch
updates as real pairs, as Nova's ``ComplexParameter`` does): five steps of each, the
same weights and data, equal to float32 rounding. Needs torch (skipped without)."""
import numpy as np
import pytest

import nova as nv

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name,kw", [("Adam", {}), ("AdamW", {"weight_decay": 0.1}),
                                     ("SGD", {"momentum": 0.9}), ("RMSprop", {})])
def test_optimizers_update_complex_parameters_as_pytorchs(name, kw):
    rng = np.random.default_rng(0)
    w0 = (rng.standard_normal((4, 3)) + 1j * rng.standard_normal((4, 3))).astype(np.complex64)
    x0 = (rng.standard_normal((5, 4)) + 1j * rng.standard_normal((5, 4))).astype(np.complex64)
    tw = torch.nn.Parameter(torch.tensor(w0))
    topt = getattr(torch.optim, name)([tw], lr=0.05, **kw)
    nw = nv.nn.Parameter(nv.tensor(w0))
    nopt = getattr(nv.optim, name)([nw], lr=0.05, **kw)
    tx, nx = torch.tensor(x0), nv.tensor(x0)
    for _ in range(5):
        topt.zero_grad()
        (tx @ tw).abs().pow(2).sum().backward()
        topt.step()
        nopt.zero_grad()
        (nx @ nw).abs().pow(2).sum().backward()
        nopt.step()
    np.testing.assert_allclose(nw.numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-6)
