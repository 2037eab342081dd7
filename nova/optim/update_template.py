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
:func:`template_key` runs its host side (step counts, scalars) and stamps them as one
``call`` node (``CallTemplate``), then rebinds the parameter and state handles to the
call's results as the in-place ops would have; the update just recorded is replaced by
its call too, so every step of a structure has the same key. Inlined for the compiler,
a call is the nodes the op front end records, in the same order: the step's IR is the
one recording every update as written gives.

Only what the key pins down is reused: an update whose recording reads anything
else (a value outside its slots, a state entry replaced instead of updated in place,
views) is not made a template, and is recorded as written every time.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from nova.tensor import autocast_state, grad_mode
from nova.tensor.tensor import Tensor
from nova.tensor.node_template import CallTemplate, capture_steps
from nova.tensor.trace import Node, _recording_backward, live_pending, next_seq

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
    if None in metas:
        return None
    return (group_index, baked, metas[0], metas[1], tuple(entries),
            autocast_state.LOWER.get())


def _state_tensors(state: dict[str, Any]) -> list[tuple[str, Tensor]]:
    return [(k, state[k]) for k in sorted(state) if isinstance(state[k], Tensor)]


# What ``UpdateTemplate.capture`` returns for an update it replaced by a call that no
# later update can reuse (the step that creates the state): record the next update of
# that key as written and capture it again.
ONE_OFF = "one-off"


class UpdateTemplate:
    """The nodes of one recorded update as a call (see module), with its scalars' names."""

    __slots__ = ("call", "scalar_names", "state_keys")

    def __init__(self, call: CallTemplate, scalar_names: list[str], state_keys: list[str]):
        self.call = call                # results: the parameter's, then each state entry's
        self.scalar_names = scalar_names
        self.state_keys = state_keys    # the tensor entries, sorted (the key pins them)

    @staticmethod
    def capture(record: Callable[[], list[tuple[str, Tensor]]], p: Tensor, grad: Tensor,
                state: dict[str, Any]) -> UpdateTemplate | str | None:
        """Run ``record`` (the update as written; it returns the (name, tensor) scalars
        its host side drew) and return its template; ``ONE_OFF`` if the update created
        state entries (a call, but no template); None if the recording read anything its
        slots do not cover or replaced or removed state entries. The
        update just recorded is replaced by its call (the handles rebound to the call's
        results) whenever it can be one -- with a template, and on the step that
        creates the state -- so every step has the structure of the stamped ones."""
        before = _state_tensors(state)
        keys_before = sorted(state)
        slots = [p._node, grad._node] + [t._node for _, t in before]
        first = next_seq()      # every node the update makes comes after
        drawn = record()
        after = _state_tensors(state)
        if p._view is not None or any(t._view is not None for _, t in after) or \
                any(t._grad_fn is not None for t in [p] + [t for _, t in after]):
            return None
        # The first step creates the state (zero buffers): its update becomes a call
        # too (reading the new buffers as slots), with the later steps' structure, but
        # no template -- its key, which state entries exist, is never seen again.
        kept = dict(before)
        if not set(keys_before) <= set(state) or any(
                k in kept and kept[k] is not t for k, t in after):
            return None     # a state entry removed or replaced: nothing to reuse
        reusable = sorted(state) == keys_before     # (no entry created)
        slots += [t._node for _, t in drawn]
        if len({id(n) for n in slots}) != len(slots):
            return None
        slot_of = {id(n): -1 - k for k, n in enumerate(slots)}
        finals = [p._node] + [t._node for _, t in after]
        adopted: list[Node] = []
        captured = capture_steps(finals, slot_of, first, len(slots), adopted)
        if captured is None or (reusable and adopted):
            return None     # a value from outside the update that is not a slot
        _, index, order = captured
        template = UpdateTemplate(CallTemplate(order, index, [index[id(n)] for n in finals]),
                                  [name for name, _ in drawn], [k for k, _ in after])
        template._rebind([p] + [t for _, t in after], slots + adopted, bump=False)
        return template if reusable else ONE_OFF

    def stamp(self, p: Tensor, grad: Tensor, state: dict[str, Any],
              drawn: list[tuple[str, Tensor]]) -> None:
        """Record the update of ``p`` from this template: the same nodes, reading this
        parameter's slots and this step's scalars (``drawn``, by the host side), and
        rebind ``p`` and its state tensors to the results, as ``copy_`` does."""
        names = [name for name, _ in drawn]
        if names != self.scalar_names:
            raise RuntimeError(
                f"optimizer update template: the host side drew scalars {names}, the "
                f"recorded update drew {self.scalar_names}; an optimizer's structure must "
                "follow only from its _baked hyperparameters and its state entries")
        targets = [p] + [state[k] for k in self.state_keys]
        slots = [t._node for t in targets]
        slots.insert(1, grad._node)
        slots += [t._node for _, t in drawn]
        self._rebind(targets, slots, bump=True)

    def _rebind(self, targets: list[Tensor], slots: list[Node], bump: bool) -> None:
        """Point ``targets`` (the parameter, then its state tensors) at the call's
        results over ``slots``; ``bump``: count it as the in-place write it stands for
        (a recorded update counted its own)."""
        live = live_pending.live
        for t, n in zip(targets, self.call.stamp(slots)):
            t._node = n
            t._grad_fn = None
            if bump:
                t._version += 1
            if n.buffer is None:
                live.add(t)
