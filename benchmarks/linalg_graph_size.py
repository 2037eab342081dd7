"""How big nv.linalg's unrolled factorizations are: the nodes each records at n = 64 (and
for the spectral ones -- qr, eigh, svd -- at n = 8, 32 and 64), the kernels a first
realization compiles (cold cache: run with a fresh NOVA_CACHE_DIR), and for the
spectral ones the time of that first realization (recording, compiling and running)
against a replay of the cached step at n = 32.

    NOVA_CACHE_DIR=$(mktemp -d) python -m benchmarks.linalg_graph_size [--timed 8 32 64]
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

import numpy as np

import nova as nv


def recorded_nodes(t: nv.Tensor) -> int:
    """The pending nodes ``t`` depends on."""
    seen, stack = set(), [t.node]
    while stack:
        node = stack.pop()
        if id(node) not in seen and not node.realized:
            seen.add(id(node))
            stack.extend(node.inputs)
    return len(seen)


SPECTRAL: dict[str, Callable[[nv.Tensor], nv.Tensor]] = {
    "qr": lambda a: nv.linalg.qr(a).Q,
    "eigh": lambda a: nv.linalg.eigh(a).eigenvectors,
    "svd": lambda a: nv.linalg.svd(a).U,
}


def _symmetric(n: int, seed: int) -> nv.Tensor:
    x = np.random.default_rng(seed).normal(size=(n, n))
    a = nv.tensor(x + x.T)
    nv.realize(a)
    return a


def _last_compilation() -> str:
    return str(nv.debug.cache_stats()).splitlines()[-1].strip()


def spectral(sizes: Sequence[int] = (8, 32, 64), timed: Sequence[int] = (32,)) -> None:
    """Nodes recorded at each of ``sizes``; the first realization (time, kernels) and a
    replay at each of ``timed``."""
    for name, make in SPECTRAL.items() if sizes else ():
        counts = ", ".join(f"n={n}: {recorded_nodes(make(_symmetric(n, 0)))}" for n in sizes)
        print(f"{name:13s} {counts} nodes recorded")
    for n in timed:
        for name, make in SPECTRAL.items():
            nv.debug.reset_cache()
            start = time.perf_counter()
            nv.realize(make(_symmetric(n, 1)))
            first = time.perf_counter() - start
            stats = _last_compilation()
            again = _symmetric(n, 2)
            start = time.perf_counter()
            nv.realize(make(again))
            replay = time.perf_counter() - start
            print(f"{name:13s} n={n} first realization {first:.1f} s, replay {replay:.2f} s: "
                  f"{stats}")


def main(n: int = 64, sizes: Sequence[int] = (8, 32, 64), timed: Sequence[int] = (32,)) -> None:
    a = nv.tensor(np.eye(n) * 2.0)
    nv.realize(a)
    la = nv.linalg
    cases = {"cholesky_ex": lambda: la.cholesky_ex(a).L,
             "lu_factor_ex": lambda: la.lu_factor_ex(a).LU,
             "solve_ex": lambda: la.solve_ex(a, a).result,
             "inv_ex": lambda: la.inv_ex(a).inverse,
             "det": lambda: la.det(a)}
    for name, make in cases.items():
        print(f"{name:13s} n={n}: {recorded_nodes(make())} nodes recorded")
    nv.debug.reset_cache()
    for name in ("cholesky_ex", "inv_ex"):
        nv.realize(cases[name]())
        print(f"{name:13s} first realization: {_last_compilation()}")
    spectral(sizes, timed)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timed", type=int, nargs="*", default=[32],
                        help="sizes at which to time the spectral ones' first realization")
    main(timed=parser.parse_args().timed)
