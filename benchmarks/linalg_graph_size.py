"""How big nv.linalg's unrolled factorizations are at n = 64: the nodes each records and
the kernels its first realization compiles (cold cache: run with a fresh NOVA_CACHE_DIR).

    NOVA_CACHE_DIR=$(mktemp -d) python -m benchmarks.linalg_graph_size
"""
from __future__ import annotations

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


def main(n: int = 64) -> None:
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
        print(f"{name:13s} first realization: "
              f"{str(nv.debug.cache_stats()).splitlines()[-1].strip()}")


if __name__ == "__main__":
    main()
