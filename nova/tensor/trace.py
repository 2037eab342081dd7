"""The trace: a thin lazy graph of primitive ops, the only form before the nova dialect.

Every op a user calls records one or more :class:`Node` s. A node is either *pending*
(an op over input nodes) or *realized* (it holds a buffer: a numpy array on ``cpu``, a
device array on ``cuda``). Every node carries its device: realized nodes where their
buffer lives, pending nodes the device of their inputs, and ``None`` for nodes that
follow their consumers (constants, iota, random keys), so ``x_cuda + 1.0`` needs no
device for the ``1.0``. Realization turns a set
of pending nodes into a :class:`PendingGraph`, a flat, canonically numbered description
that the compiler builds into the nova dialect. The graph's ``key`` is its structure
(ops, attributes, shapes, dtypes, wiring; never data), so a loop that repeats the same
computation on new data maps to the same key and replays a cached executable.
"""
from __future__ import annotations

import contextvars
import itertools
from itertools import chain
import operator
import threading
import weakref
from typing import Any

import numpy as np

from nova.core.dtypes import DType
from nova.core.graph import SIGNATURE_IDS, PendingGraph, signature_id, storage_dtype

_seq = itertools.count()


def next_seq() -> int:
    """A fresh creation number (what every new node takes: creation order is a valid
    topological order), for code that makes nodes without ``Node.__init__``."""
    return next(_seq)


def canonical_attr(value: Any) -> Any:
    """A hashable, exactly comparable form of an attribute value (floats by their bits,
    so NaN and -0.0 constants compare as equal to themselves and nothing else)."""
    if isinstance(value, float):
        return ("f", value.hex())
    if isinstance(value, (tuple, list)):
        if type(value) is tuple and all([type(v) is int for v in value]):
            return value       # dims, permutations, shapes: already exact
        return tuple([canonical_attr(v) for v in value])
    return value


# Per thread (a backward recorded in one thread must not mark another's forward ops).
_recording_backward: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "nova_recording_backward", default=False)


class recording_backward:
    """While active, recorded nodes are marked as part of the backward pass. The mark
    reaches the IR (``nova.backward``), where rematerialization and the memory report
    use it to tell saved activations from temporaries."""

    def __enter__(self) -> None:
        self._token = _recording_backward.set(True)

    def __exit__(self, *exc) -> None:
        _recording_backward.reset(self._token)


class RealizationError(RuntimeError):
    """A pending value could not be computed; the message names the failing op."""


class Node:
    """One value of the trace: a primitive op applied to inputs, or a realized buffer."""

    # ``role``: what the value is to the memory report (``realize.mark_role``); unset
    # on most nodes (read with a default)
    __slots__ = ("op", "inputs", "attrs", "shape", "dtype", "seq", "buffer", "sig",
                 "backward", "device", "role", "__weakref__")

    def __init__(self, op: str, inputs: tuple[Node, ...], attrs: dict[str, Any],
                 shape: tuple[int, ...], dtype: DType, buffer: Any = None,
                 device: str | None = "cpu"):
        self.op = op
        self.inputs = inputs
        self.attrs = attrs
        self.shape = shape
        self.dtype = dtype
        self.seq = next(_seq)  # creation order is a valid topological order
        self.buffer = buffer
        self.device = device   # "cpu", "cuda", or None: follows its consumers
        self.backward = buffer is None and _recording_backward.get()
        sig = (op, tuple([(k, canonical_attr(attrs[k])) for k in sorted(attrs)])
               if attrs else (), shape, dtype.name)
        if self.backward:
            sig += ("backward",)
        # interned (nova.core.graph.signature_id, inline on the hit path)
        sid = SIGNATURE_IDS.get(sig)
        self.sig = sid if sid is not None else signature_id(sig)

    @property
    def realized(self) -> bool:
        return self.buffer is not None

    def bind(self, buffer: Any, device: str = "cpu") -> None:
        """Turn this node into a realized buffer on ``device`` and drop the graph
        behind it. Device buffers hold the storage type (``storage_dtype``)."""
        bind_all((self,), (buffer,), device)

    def __repr__(self) -> str:
        state = "realized" if self.realized else "pending"
        return f"Node({self.op}, {self.shape}, {self.dtype.name}, {state})"


_NO_ATTRS: dict[str, Any] = {}       # (never written: a realized node's attributes)
# A realized node's interned signature by (shape, dtype); append-only, like the table.
_BUFFER_SIGNATURES: dict[tuple, int] = {}


def bind_all(nodes: Any, buffers: Any, device: str = "cpu") -> None:
    """``node.bind(buffer, device)`` for each pair, in one loop (a step binds ~300
    results: the method call was a third of the cost)."""
    sigs = _BUFFER_SIGNATURES
    for node, buffer in zip(nodes, buffers):
        shape, dtype = node.shape, node.dtype
        want = dtype.np if device == "cpu" else storage_dtype(dtype.np)
        assert tuple(buffer.shape) == shape and buffer.dtype == want, (
            f"{node.op}: engine produced {buffer.shape} {buffer.dtype} on {device}, "
            f"trace says {shape} {want}")
        node.buffer = buffer
        node.device = device
        node.op = "buffer"
        node.inputs = ()
        node.attrs = _NO_ATTRS
        node.backward = False
        sid = sigs.get((shape, dtype))
        node.sig = sid if sid is not None else _buffer_signature(shape, dtype)


def _buffer_signature(shape: tuple[int, ...], dtype: DType) -> int:
    sig = ("buffer", (), shape, dtype.name)
    sid = SIGNATURE_IDS.get(sig)
    sid = sid if sid is not None else signature_id(sig)
    _BUFFER_SIGNATURES[(shape, dtype)] = sid
    return sid


def buffer_node(array: np.ndarray, dtype: DType, device: str | None = "cpu") -> Node:
    """A realized host leaf holding ``array`` (made read-only: Nova values are
    immutable). ``device=None`` marks a small host value any device's step may read
    (a random key), uploaded by the step that uses it."""
    view = array.view()
    view.flags.writeable = False
    return Node("buffer", (), {}, tuple(int(d) for d in array.shape), dtype, view, device)


def device_buffer_node(buffer: Any, dtype: DType, device: str) -> Node:
    """A realized leaf holding a device buffer (its storage type; never shared)."""
    return Node("buffer", (), {}, tuple(int(d) for d in buffer.shape), dtype, buffer, device)


class _KeyedRef(weakref.ref):
    """A weak reference carrying its key, like ``weakref.KeyedRef`` but built by the C
    constructor (KeyedRef's ``__new__`` and ``__init__`` are Python frames, a third of a
    microsecond on every recorded op)."""

    __slots__ = ("key",)


class LiveSet:
    """A weak set of tensors keyed by identity (Tensor's ``==`` is elementwise, so
    ``weakref.WeakSet`` cannot hold them)."""

    def __init__(self) -> None:
        refs: dict[int, _KeyedRef] = {}

        def forget(r: _KeyedRef) -> None:   # one callback for all: no closure per add
            if refs.get(r.key) is r:    # (the id may already name a newer object)
                del refs[r.key]

        self._refs = refs
        self._forget = forget

    def add(self, obj: Any) -> None:
        key = id(obj)
        if key not in self._refs:
            ref = self._refs[key] = _KeyedRef(obj, self._forget)
            ref.key = key

    def discard(self, obj: Any) -> None:
        self._refs.pop(id(obj), None)

    def __iter__(self):
        return iter([o for r in list(self._refs.values()) if (o := r()) is not None])

    def __len__(self) -> int:
        return len(self._refs)


class ThreadLiveSets(threading.local):
    """The live set of the calling thread (``.live``, a ``LiveSet`` made for each thread
    on its first use: ``threading.local`` runs ``__init__`` once per thread).

    Why per thread: realization computes every pending value of the live set, and a
    thread must not run (or bind, or donate the buffers of) values another thread is
    still recording; a tensor handed to another thread is still computed there when
    that thread asks for it, or for anything that depends on it. Why ``threading.local``
    rather than a ``ContextVar``: every recorded op adds to the set, and
    ``live_pending.live.add`` is one C-level attribute lookup on that path."""

    def __init__(self) -> None:
        self.live = LiveSet()
        # Pending values the next realization computes even if no tensor holds them:
        # collectives (every rank issues its collectives whatever it keeps of them).
        self.required: list[Node] = []
        # The live set as an optimizer step left it, while that step waits to run
        # (``realize.end_of_step``): each tensor weakly, so what is dropped meanwhile
        # (the gradients ``zero_grad`` clears) is not computed as a result, with the
        # node it held then (dropped before the step runs: never a donation blocker).
        self.deferred: list[tuple[weakref.ref, Node]] | None = None

    def add(self, obj: Any) -> None:
        self.live.add(obj)

    def snapshot(self) -> list[tuple[weakref.ref, Node]]:
        """The live tensors now: a weak reference to each, with its node (strongly)."""
        return [(r, t._node if t._view is None else t.node)
                for r in list(self.live._refs.values()) if (t := r()) is not None]

    def discard(self, obj: Any) -> None:
        self.live.discard(obj)

    def __iter__(self):
        return iter(self.live)

    def __len__(self) -> int:
        return len(self.live)


# Tensors whose node is pending, per thread. Realization computes every pending node
# still held by a live tensor, so nothing pending is ever computed twice.
live_pending = ThreadLiveSets()


def extract(outputs: list[Node], device: str = "cpu", device_key: Any = None) -> PendingGraph:
    """Collect the pending subgraph behind ``outputs`` (deduplicated, in creation order).

    A step on another device than the CPU adds ``device_key`` (the device and its
    backend's identity) to the structural key, so a CPU step and a CUDA step of the same
    program never share an executable; CPU keys are unchanged."""
    # Nodes define no __eq__: as dict keys and set members they hash by identity.
    seen: set[Node] = set()
    order: list[Node] = []
    stack = [n for n in outputs if n.buffer is None]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        order.append(n)
        if n.op == "error":
            raise RealizationError(n.attrs["message"])
        for i in n.inputs:
            if i.buffer is None and i not in seen:
                stack.append(i)
    order.sort(key=_by_seq)
    index: dict[Node, int] = {}
    args: list[Node] = []
    for n in order:  # arguments numbered by first use, so the numbering is structural
        for i in n.inputs:
            if i.buffer is not None and i not in index:
                index[i] = len(args)
                args.append(i)
    for n in outputs:  # realized outputs pass an argument straight through
        if n.buffer is not None and n not in index:
            index[n] = len(args)
            args.append(n)
    for k, n in enumerate(order, len(args)):
        index[n] = k
    inputs = [n.inputs for n in order]
    arity = tuple(map(len, inputs))
    flat = tuple(map(index.__getitem__, chain.from_iterable(inputs)))
    out_ids = [index[n] for n in outputs]
    key = (tuple([a.sig for a in args]), tuple([n.sig for n in order]), arity, flat,
           tuple(out_ids))
    if device != "cpu":
        key = key + (("device", device_key),)
    return PendingGraph([(a.shape, a.dtype) for a in args], out_ids, key,
                        [a.buffer for a in args], args, order, flat, arity)


_by_seq = operator.attrgetter("seq")   # creation order, without a Python call per node
