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
