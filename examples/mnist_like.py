"""A small CNN on scikit-learn's 8x8 handwritten digits, written as PyTorch code with
the imports changed: two convolutions with batch norm, max pooling, a linear head,
Adam, a DataLoader, and a compiled training step.

Run: pip install -e ".[examples]" && python examples/mnist_like.py

The digits (1,797 images, 10 classes) ship inside scikit-learn; a seeded split keeps
20% for testing. Batches have one shape (``drop_last=True``) and the test set is
evaluated in one batch, so the run compiles one training step and one evaluation
step, then replays them.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import nova as nv
import nova.nn as nn
import nova.nn.functional as F
from nova.utils.data import DataLoader, TensorDataset


def load_digits(seed: int = 0) -> tuple[np.ndarray, ...]:
    """Images scaled to [0, 1] as (N, 1, 8, 8) float32, labels int64; a seeded 80/20
    split."""
    try:
        from sklearn.datasets import load_digits as sk_load_digits
    except ImportError as e:
        raise SystemExit(f"mnist_like: the digits come with scikit-learn ({e}); "
                         "pip install -e \".[examples]\"") from None
    digits = sk_load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    cut = int(0.8 * len(labels))
    train, test = order[:cut], order[cut:]
    return images[train], labels[train], images[test], labels[test]


class DigitsCNN(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(32 * 2 * 2, classes)

    def forward(self, x: nv.Tensor) -> nv.Tensor:
        return self.head(self.features(x).flatten(1))


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    nv.manual_seed(args.seed)
    x_train, y_train, x_test, y_test = load_digits(args.seed)
    loader = DataLoader(TensorDataset(nv.tensor(x_train), nv.tensor(y_train)),
                        batch_size=args.batch_size, shuffle=True, drop_last=True)
    model = DigitsCNN()
    opt = nv.optim.Adam(model.parameters(), lr=args.lr)

    @nv.compile
    def train_step(x: nv.Tensor, y: nv.Tensor) -> nv.Tensor:
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    @nv.compile
    def predict(x: nv.Tensor) -> nv.Tensor:
        return model(x).argmax(-1)

    test_x, test_y = nv.tensor(x_test), y_test
    start = time.perf_counter()
    accuracy = 0.0
    for epoch in range(args.epochs):
        model.train()
        losses = [train_step(x, y) for x, y in loader]
        model.eval()
        with nv.no_grad():
            accuracy = float((predict(test_x).numpy() == test_y).mean())
        print(f"epoch {epoch + 1:2d}: train loss {np.mean([float(l) for l in losses]):.4f}, "
              f"test accuracy {accuracy:.2%} ({time.perf_counter() - start:.1f} s)")
    stats = nv.debug.cache_stats()
    print(f"done: test accuracy {accuracy:.2%}; {stats.misses} compiles, "
          f"{train_step.replays} replayed training steps")
    return accuracy


if __name__ == "__main__":
    main()
