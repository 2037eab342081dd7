"""``min_cut.sink_side``: the sink's side of the minimum cut nearest the sink, against
its definition on a hand-checked graph and against scipy's maximum flow (the residual
graph's nodes that reach the sink) on random graphs of the flow network's shape."""
import numpy as np
import pytest
from scipy.sparse import csr_array
from scipy.sparse.csgraph import breadth_first_order, maximum_flow

from nova.compiler.passes.min_cut import sink_side


def scipy_sink_side(n, edges, source, sink):
    rows, cols, caps = zip(*edges)
    graph = csr_array((np.array(caps, dtype=np.int32), (np.array(rows), np.array(cols))),
                      shape=(n, n))
    graph.sum_duplicates()
    residual = (graph - maximum_flow(graph, source, sink).flow).tocsr()
    residual.data = np.where(residual.data > 0, residual.data, 0)
    residual.eliminate_zeros()
    return set(breadth_first_order(residual.T.tocsr(), sink, directed=True,
                                   return_predecessors=False).tolist())


def test_the_cut_nearest_the_sink_of_a_tie():
    """s -> a -> b -> t with a -> b and b -> t both of capacity 2 (s -> a wider): both
    are minimum cuts; the one nearest the sink is b -> t, so only t is on its side.
    Widen b -> t and the cut moves to a -> b: b joins the sink's side."""
    s, a, b, t = range(4)
    assert sink_side(4, [(s, a, 5), (a, b, 2), (b, t, 2)], s, t) == {t}
    assert sink_side(4, [(s, a, 5), (a, b, 2), (b, t, 3)], s, t) == {b, t}
    assert sink_side(4, [(s, a, 5), (a, b, 1), (a, b, 1), (b, t, 3)], s, t) == {b, t}
    assert sink_side(4, [(s, a, 1)], s, t) == {t}                   # no path at all
    with pytest.raises(ValueError, match=r"edge \(0, 1\) has capacity -1 < 0"):
        sink_side(2, [(0, 1, -1)], 0, 1)


@pytest.mark.parametrize("seed", range(12))
def test_random_split_node_graphs_agree_with_scipy(seed):
    """Graphs like remat's: each value a split pair (in -> out, its keep cost or
    unbounded), unbounded edges from operands, from the source to some values and to
    the sink from others."""
    rng = np.random.default_rng(seed)
    values = int(rng.integers(5, 120))
    inf = 2**30
    source, sink = 2 * values, 2 * values + 1
    edges = []
    for i in range(values):
        edges.append((2 * i, 2 * i + 1, int(rng.choice([0, inf, *rng.integers(1, 50, 3)]))))
        if i < 3 or rng.random() < 0.3:
            edges.append((source, 2 * i, inf))
        for o in rng.choice(i, size=min(i, int(rng.integers(0, 3))), replace=False) if i else []:
            edges.append((2 * int(o) + 1, 2 * i, inf))
        if rng.random() < 0.25:
            edges.append((2 * i + 1, sink, inf))
    n = 2 * values + 2
    assert sink_side(n, edges, source, sink) == scipy_sink_side(n, edges, source, sink)


@pytest.mark.parametrize("seed", range(12))
def test_random_dense_graphs_agree_with_scipy(seed):
    """Arbitrary small digraphs with parallel edges, cycles and zero capacities, where
    blocking flows need dead ends retired and several phases."""
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(3, 30))
    edges = [(int(a), int(b), int(c)) for a, b, c in
             zip(rng.integers(0, n, 4 * n), rng.integers(0, n, 4 * n), rng.integers(0, 9, 4 * n))
             if a != b]
    assert sink_side(n, edges, 0, n - 1) == scipy_sink_side(n, edges, 0, n - 1)
