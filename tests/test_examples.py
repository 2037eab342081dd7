"""The examples run from one command and do what their docstrings say."""
import runpy
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_mnist_like_cnn_reaches_95_percent_and_compiles_once_per_shape(capsys, fresh_cache):
    pytest.importorskip("sklearn", reason="the digits ship with scikit-learn (the test extra)")
    module = runpy.run_path(str(EXAMPLES / "mnist_like.py"))
    accuracy = module["main"](["--epochs", "5"])      # the default 12 reach ~99%
    out = capsys.readouterr().out
    assert accuracy >= 0.95, out
    assert "epoch  5:" in out and "epoch  6:" not in out
    # one training step, one evaluation step, one for parameter initialization; every
    # later epoch replays
    assert "; 3 compiles," in out, out


def _load_port(backend, monkeypatch):
    """The nanoGPT port's namespace with ``torch`` bound to ``backend``."""
    monkeypatch.setenv("NANOGPT_PORT_BACKEND", backend)
    return runpy.run_path(str(EXAMPLES / "nanogpt_port.py"))


def test_nanogpt_port_trains_on_nova(capsys, monkeypatch, fresh_cache):
    port = _load_port("nova", monkeypatch)
    assert port["torch"].__name__ == "nova"
    losses = port["main"](["--max-iters", "12", "--eval-interval", "6", "--eval-iters", "2",
                           "--log-interval", "4", "--batch-size", "4", "--block-size", "32",
                           "--sample", "3"])
    out = capsys.readouterr().out
    assert "step 12: train loss" in out and "iter 8: loss" in out and "sample: 'def " in out
    assert losses["train"] < 5.0, out         # from ln(256) = 5.55 at the start


@pytest.mark.parametrize("flash", [True, False])
def test_nanogpt_port_matches_pytorch_step_by_step(monkeypatch, flash):
    """The same file on both libraries, from the same weights and batches: the losses of
    six AdamW steps (two parameter groups, warmup lr, gradient clipping) and the tokens
    a greedy generate produces."""
    pytest.importorskip("torch")
    import numpy as np
    theirs = _load_port("torch", monkeypatch)
    ours = _load_port("nova", monkeypatch)
    torch, nv = theirs["torch"], ours["torch"]
    torch.manual_seed(0)
    config = dict(block_size=16, n_layer=2, n_head=2, n_embd=32, flash=flash)
    model_t = theirs["GPT"](theirs["GPTConfig"](**config))
    model_n = ours["GPT"](ours["GPTConfig"](**config))
    model_n.load_state_dict({k: nv.tensor(v.detach().numpy())
                             for k, v in model_t.state_dict().items()})
    opts = [m.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cpu") for m in (model_t, model_n)]
    rng = np.random.default_rng(0)
    for step in range(6):
        batch = rng.integers(0, 256, (3, 17))
        losses = []
        for lib, model, opt in ((torch, model_t, opts[0]), (nv, model_n, opts[1])):
            for group in opt.param_groups:
                group["lr"] = 1e-3 * (step + 1) / 6
            x, y = lib.tensor(batch[:, :-1]), lib.tensor(batch[:, 1:])
            _, loss = model(x, y)
            loss.backward()
            lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.item())
        assert abs(losses[0] - losses[1]) < 1e-4 * abs(losses[0]), (step, losses)
    start = batch[:1, :4]
    tokens = [model.generate(lib.tensor(start), 3, top_k=1)[0].tolist()
              for lib, model in ((torch, model_t), (nv, model_n))]
    assert tokens[0] == tokens[1]
