"""What `import nova` loads: the heavy libraries only some steps need are imported when
first used, so a script (or a warm start, whose steps come from the disk cache) does
not pay for them."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _modules_after_import() -> set[str]:
    code = "import sys, nova; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": ROOT}).stdout
    return set(out.split())


def test_import_nova_does_not_import_scipy():
    """scipy.special (the interpreter's erf) took ~0.2 s of a ~0.6 s import; it loads
    on first use."""
    loaded = _modules_after_import()
    assert "nova" in loaded
    assert not {m for m in loaded if m == "scipy" or m.startswith("scipy.")}


def test_a_training_step_does_not_import_scipy():
    """The remat pass's minimum cut is plain Python (``passes.min_cut``): scipy.sparse's
    import (~0.2 s) was the largest cost of the optimizer on a cold first step."""
    code = ("import sys, numpy as np, nova as nv\n"
            "w = nv.tensor(np.ones((64, 256), np.float32), requires_grad=True)\n"
            "x = nv.tensor(np.ones((128, 64), np.float32))\n"
            "(nv.tanh(x @ w) ** 2).sum().backward()\n"
            "nv.realize(w.grad)\n"
            "print(' '.join(m for m in sys.modules if m.startswith('scipy')))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": ROOT}).stdout
    assert out.split() == []


def test_the_lazily_imported_parts_still_work():
    import numpy as np

    import nova as nv
    with nv.engine("interp"):
        x = nv.tensor(np.array([-1.0, 0.0, 0.5], np.float32))
        np.testing.assert_allclose(nv.erf(x).numpy(), [-0.8427008, 0.0, 0.5204999],
                                   rtol=1e-6)
    w = nv.tensor(np.ones((3, 3), np.float32), requires_grad=True)
    loss = (nv.tanh(nv.tensor(np.ones((2, 3), np.float32)) @ w) ** 2).sum()
    loss.backward()
    expected = 2 * np.tanh(3.0) * (1 - np.tanh(3.0) ** 2) * 2
    np.testing.assert_allclose(w.grad.numpy(), np.full((3, 3), expected), rtol=1e-5)
