"""The main job for now: a lazy computation, its nova IR, its values, and the cache.

Run: python examples/demo.py
"""
import numpy as np

import nova as nv


def main() -> None:
    nv.manual_seed(0)
    x = nv.randn(4, 8)
    w = nv.randn(8, 3) * 0.5
    b = nv.zeros(3)
    logits = x @ w + b
    probs = nv.softmax(logits, dim=-1)
    loss = -(probs.log() * nv.one_hot(nv.tensor([0, 2, 1, 0]), 3)).sum(-1).mean()

    print("== nova IR of the pending step (nothing has run yet) ==")
    print(nv.debug.dump_ir(probs, loss))
    print("\n== values ==")
    print("probs =", probs)
    print("loss  =", loss.item())

    print("\n== a loop over fresh data compiles once ==")
    rng = np.random.default_rng(0)
    for step in range(100):
        batch = nv.tensor(rng.standard_normal((4, 8)).astype(np.float32))
        out = nv.softmax(batch @ w + b, dim=-1).max(-1).values.sum()
        value = out.item()
    print(f"last value {value:.4f}")
    print(nv.debug.cache_stats())


if __name__ == "__main__":
    main()
