"""A CUDA step's launches captured once as a graph and replayed as one launch.

A step of a few hundred small kernels launched from Python costs a few microseconds of
host time per kernel; on a GPU that outruns the host, the step waits on its own
launches. A CUDA graph records the whole sequence once (stream capture) and replays it
with one ``cudaGraphLaunch`` -- what ``torch.compile(mode="reduce-overhead")`` and
``jax.jit`` do.

A graph bakes in every address it was captured with. The arena (intermediates and
scratch) is allocated once per program, so its addresses never move; what may move
between runs is the step's arguments and its escaping results. So:

- **Arguments** whose address was the same in the two runs before the capture (a
  parameter updated in place by donation, frozen weights) are read where they are:
  a replay requires each of them at its captured address. The others (a new batch
  every step, the optimizer's scalars uploaded per step) are *staged*: the graph reads
  a buffer of its own, and a replay copies the argument into it first (one
  device-to-device copy each, queued before the graph).
- **Results written over a donated argument** stay in that argument's memory, as in a
  plain run, if the argument is read in place; a replay requires the same arguments
  donated (at least those).
- **Escaping results** are written by the graph into buffers of its own and copied out
  into fresh arrays after each replay, so a tensor a caller still holds from an earlier
  step is never written over.

A run whose argument addresses or donations do not fit the graph runs as plain
launches; its addresses become the next capture's. After ``MAX_CAPTURES`` captures the
program stops capturing (its addresses never settle). A backend without graphs
(``DeviceBackend.supports_graphs``), ``NOVA_CUDA_GRAPHS=0``, a step with collectives
(their host calls cannot be captured) or a failed capture (a warning says why) run
plain launches. Replays compute the same bits as plain runs: the same kernels on the
same values in the same order.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_CAPTURES = 3


@dataclass
class GraphCounts:
    """What every program's graphs did since the last reset (``nv.debug.cache_stats``
    reports it): captures, replays, and why programs ran without a graph."""

    captures: int = 0
    replays: int = 0
    without: list[str] = field(default_factory=list)

    def reset(self) -> None:
        self.captures, self.replays, self.without = 0, 0, []


COUNTS = GraphCounts()


@dataclass
class LaunchGraph:
    """One captured step. Per argument, ``addresses[i]`` is the address the graph
    reads it at, or None when it is staged (read from ``staging[i]``)."""

    handle: Any                        # the backend's graph: ``handle.launch()``
    addresses: tuple[int | None, ...]
    staging: dict[int, Any]            # argument slot -> the buffer the graph reads
    donated: frozenset[int]            # arguments the graph writes results over
    # per output of the step: ("arg", slot), ("copy", buffer) or ("donated", slot, shape)
    outputs: list[tuple]

    def fits(self, addresses: Sequence[int], donated: frozenset[int]) -> bool:
        """Whether a run with these argument addresses and donations may replay."""
        if not self.donated <= donated:
            return False
        for captured, now in zip(self.addresses, addresses):
            if captured is not None and captured != now:
                return False
        return True


class GraphedRuns:
    """When a program captures its launches, and its replays (see the module
    docstring). ``launch_all(values, result_memory)`` is the program's launch sequence:
    it sets ``values[out] = result_memory(step)`` for each kernel and launches it."""

    def __init__(self, backend: Any, n_args: int, outputs: Sequence[int],
                 launch_all: Callable[[list[Any], Callable[[Any], Any]], None],
                 steps: Sequence[Any], views: Callable[[], dict[int, Any]],
                 empty: Callable[[tuple[int, ...], Any], Any], why_not: str | None):
        self.backend = backend
        self.n_args = n_args
        self.outputs = list(outputs)
        self._launch_all = launch_all
        self._steps = steps
        self._views = views
        self._empty = empty
        self.why_not = why_not        # why this program never captures, if it does not
        self.graph: LaunchGraph | None = None
        self.previous: list[int] | None = None    # the last plain run's addresses
        self.captures = 0
        self.replays = 0
        self.wrote_donated = False    # by the latest run (its results over donated memory)

    def run(self, values: list[Any], donated: frozenset[int]) -> list[Any] | None:
        """The step's outputs from a replay of its graph (capturing it first if this run
        is the one to), or None: the caller runs plain launches."""
        self.wrote_donated = False
        if self.why_not is not None:
            return None
        address = self.backend.address
        addresses = [address(v) for v in values[:self.n_args]]
        graph = self.graph
        if graph is None or not graph.fits(addresses, donated):
            # Capture only right after a plain run: its addresses, compared with this
            # run's, say which arguments stay put.
            if self.previous is None or self.captures >= MAX_CAPTURES:
                self.previous = addresses
                return None
            stable = [a if a == b else None for a, b in zip(addresses, self.previous)]
            self.previous = None
            graph = self._capture(values, donated, stable)
            if graph is None:
                return None
        return self._replay(graph, values)

    def _capture(self, values: list[Any], donated: frozenset[int],
                 stable: list[int | None]) -> LaunchGraph | None:
        """Capture the launch sequence (nothing runs) with every buffer it touches
        allocated beforehand: no allocation may happen inside a capture."""
        self.captures += 1
        COUNTS.captures += 1
        self.graph = None
        xp = self.backend.xp
        staging = {i: xp.empty_like(values[i]) for i, a in enumerate(stable) if a is None}
        in_place = frozenset(d for d in donated if stable[d] is not None)
        slots = list(values)
        for i, buffer in staging.items():
            slots[i] = buffer
        views = self._views()
        memory: dict[int, Any] = {}      # kernel output slot -> where the graph writes it
        for st in self._steps:
            view = views.get(st.out)
            if view is not None:
                memory[st.out] = view
            elif st.donate is not None and st.donate in in_place:
                memory[st.out] = slots[st.donate].reshape(st.shape)
            else:
                memory[st.out] = self._empty(st.shape, st.storage)
        outputs: list[tuple] = []
        by_slot = {st.out: st for st in self._steps}
        for o in self.outputs:
            st = by_slot.get(o)
            if st is None:
                outputs.append(("arg", o))
            elif st.donate is not None and st.donate in in_place and views.get(o) is None:
                outputs.append(("donated", st.donate, st.shape))
            else:
                outputs.append(("copy", memory[o]))
        try:
            handle = self.backend.capture(
                lambda: self._launch_all(slots, lambda st: memory[st.out]))
        except Exception as e:     # capture unavailable here: plain launches from now on
            self.why_not = f"capturing its launches failed ({type(e).__name__}: {e})"
            COUNTS.without.append(self.why_not)
            warnings.warn(f"nova: a CUDA step runs without a CUDA graph: {self.why_not}",
                          RuntimeWarning, stacklevel=2)
            return None
        self.graph = LaunchGraph(handle, tuple(stable), staging, in_place, outputs)
        return self.graph

    def _replay(self, graph: LaunchGraph, values: list[Any]) -> list[Any]:
        copy = self.backend.copy
        for i, buffer in graph.staging.items():
            copy(buffer, values[i])
        self.wrote_donated = bool(graph.donated)
        graph.handle.launch()
        self.replays += 1
        COUNTS.replays += 1
        out = []
        for o in graph.outputs:
            if o[0] == "arg":
                out.append(values[o[1]])
            elif o[0] == "donated":
                out.append(values[o[1]].reshape(o[2]))
            else:
                out.append(o[1].copy())
        return out
