"""Record a parameter's update once, stamp its nodes after: the optimizer's recording cost.

A recorded (not ``nv.compile``d) training step records every parameter's update op by
op: AdamW's is ~22 nodes through the whole op front end (argument checks, promotion,
broadcasting, a Tensor per value), ~1,150 nodes and ~8 ms of a small GPT's step. Yet
every parameter with the same shapes, dtypes, devices and compiled-in hyperparameters
records the same nodes, step after step; only the values they read differ.

So the first such update is recorded as written and its nodes are kept as an
:class:`UpdateTemplate`: steps whose inputs are earlier steps or *slots*
(``nova.tensor.node_template``) -- the parameter's and its state tensors' nodes before
the update, the gradient's, and the runtime scalars the host side drew
(``Optimizer._scalar``), by position. A later update with the same
:func:`template_key` runs its host side (step counts, scalars) and stamps the nodes
directly, then rebinds the parameter and state handles to the stamped results as the
in-place ops would have. The nodes are the ones the op front end records, in the same
order, so the step's structural key -- and its executable -- are the same.

Only what the key pins down is reused: an update whose recording reads anything
else (a value outside its slots, a state entry replaced instead of updated in place,
views) is not made a template, and is recorded as written every time.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from nova.tensor import autocast_state, grad_mode
from nova.tensor.tensor import Tensor
from nova.tensor.node_template import Step, capture_steps, resolve, stamp_steps
from nova.tensor.trace import _recording_backward, live_pending, next_seq

def _meta(t: Tensor) -> tuple | None:
    """What of a tensor the recorded update's structure may depend on; None for a view
    (whose node is derived from its base on access: not a plain slot)."""
    if t._view is not None:
        return None
    n = t._node
    return (n.shape, n.dtype.name, n.device)


def template_key(group_index: int, baked: Hashable, p: Tensor, grad: Tensor,
                 state: dict[str, Any]) -> tuple | None:
    """Everything the recorded update of ``p`` may depend on besides its slots' values:
    the group and its compiled-in hyperparameters (``baked``, hashable), the shapes,
    dtypes and devices of the parameter, its gradient and its tensor state, which state
    entries exist, and the modes recording reads. None when it cannot be a template."""
    if grad_mode.STATE.enabled or _recording_backward.get():
        return None
    metas = [_meta(p), _meta(grad)]
    entries = []
    for k in sorted(state):
        v = state[k]
        if isinstance(v, Tensor):
            m = _meta(v)
            metas.append(m)
            entries.append((k, m))
        else:
            entries.append((k, None))
    if any(m is None for m in metas):
        return None
    return (group_index, baked, metas[0], metas[1], tuple(entries),
            autocast_state.LOWER.get())


def _state_tensors(state: dict[str, Any]) -> list[tuple[str, Tensor]]:
    return [(k, state[k]) for k in sorted(state) if isinstance(state[k], Tensor)]


class UpdateTemplate:
    """The nodes of one recorded update, with its slots and its results (see module)."""

    __slots__ = ("steps", "scalar_names", "results")

    def __init__(self, steps: list[Step], scalar_names: tuple[str, ...],
                 results: tuple[int, ...]):
        self.steps = steps
        self.scalar_names = scalar_names
        self.results = results      # the parameter's, then each tensor state entry's

    @staticmethod
    def capture(record: Callable[[], list[tuple[str, Tensor]]], p: Tensor, grad: Tensor,
                state: dict[str, Any]) -> UpdateTemplate | None:
        """Run ``record`` (the update as written; it returns the (name, tensor) scalars
        its host side drew) and return its template, or None if the recording read
        anything its slots do not cover or changed which state entries exist."""
        before = _state_tensors(state)
        keys_before = sorted(state)
        slots = [p._node, grad._node] + [t._node for _, t in before]
        first = next_seq()      # every node the update makes comes after
        drawn = record()
        after = _state_tensors(state)
        if sorted(state) != keys_before or p._view is not None or \
                any(a is not b for (_, a), (_, b) in zip(after, before)):
            return None     # state replaced or extended (the first step): not a template
        slots += [t._node for _, t in drawn]
        if len({id(n) for n in slots}) != len(slots):
            return None
        slot_of = {id(n): -1 - k for k, n in enumerate(slots)}
        finals = [p._node] + [t._node for _, t in before]
        if any(t._grad_fn is not None for t in [p] + [t for _, t in before]):
            return None
        captured = capture_steps(finals, slot_of, first, len(slots))
        if captured is None:
            return None     # a value from outside the update that is not a slot
        steps, index, _ = captured
        return UpdateTemplate(steps, tuple(name for name, _ in drawn),
                              tuple([index[id(n)] for n in finals]))

    def stamp(self, p: Tensor, grad: Tensor, state: dict[str, Any],
              drawn: list[tuple[str, Tensor]]) -> None:
        """Record the update of ``p`` from this template: the same nodes, reading this
        parameter's slots and this step's scalars (``drawn``, by the host side), and
        rebind ``p`` and its state tensors to the results, as ``copy_`` does."""
        names = tuple(name for name, _ in drawn)
        if names != self.scalar_names:
            raise RuntimeError(
                f"optimizer update template: the host side drew scalars {names}, the "
                f"recorded update drew {self.scalar_names}; an optimizer's structure must "
                "follow only from its _baked hyperparameters and its state entries")
        targets = [p] + [t for _, t in _state_tensors(state)]
        slots = [p._node, grad._node] + [t._node for t in targets[1:]] + \
            [t._node for _, t in drawn]
        made = stamp_steps(self.steps, slots)
        live = live_pending.live
        for t, r in zip(targets, self.results):
            t._node = resolve(r, made, slots)
            t._grad_fn = None
            t._version += 1
            if t._node.buffer is None:
                live.add(t)
