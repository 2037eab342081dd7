"""The optimizer base: parameter groups, state, ``state_dict``, and the step boundary.

``step()`` records the update of every parameter (and its state) under no_grad, then
realizes: the forward, the backward and the update run as one compiled function.
Hyperparameters that change during training (the learning rate, SGD's and RMSprop's
momentum, Adam's betas, and per-step values derived from the step count such as Adam's
bias corrections) enter the step as 0-d tensors, i.e. runtime inputs, so a schedule
(``OneCycleLR`` cycles the momentum too) never causes a recompile.

The other hyperparameters (``eps``, L2 ``weight_decay``, ``nesterov``, ...) are written
into the compiled step as constants: changing one recompiles (the constant is part of
the cache key). An ``nv.compile`` replay runs the recorded executables without
recording, so each recorded ``step()`` notes those values (``_baked``), its parameter
groups and its parameters' state dicts (``StepEvent``), and a replay that finds one
changed (``add_param_group``, ``load_state_dict``, the state reset) is recorded again
instead of running a stale constant or updating state that is no longer this
optimizer's.
"""
from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, NoReturn

import numpy as np

from nova.autograd.grad_mode import no_grad
from nova.core import dtypes as dt
from nova.optim._checks import KERNEL_FLAGS
from nova.tensor import capture_log
from nova.tensor.creation import tensor
from nova.tensor.realize import end_of_step, mark_role, realize, realize_deferred
from nova.tensor.tensor import Tensor, clear_grad
from nova.tensor.trace import buffer_node, live_pending
from nova.optim.update_template import ONE_OFF, UpdateTemplate, template_key


def runtime_scalar(value: float, dtype: dt.DType = dt.float32) -> Tensor:
    """A 0-d tensor holding ``value``: a step input, never a baked constant. A host
    value without a device, so it serves a step on any device (a CUDA step uploads all
    such values of a step in one copy)."""
    return Tensor._wrap(buffer_node(np.array(value, dtype=dtype.np), dtype, None))


def scalar_dtype(p: Tensor) -> dt.DType:
    """The dtype of the runtime scalars updating ``p``: float64 for a float64 parameter
    (its hyperparameters at full precision, as PyTorch's Python floats: in float32 an
    SGD step of a float64 parameter was 1e-8 off), float32 for the others (PyTorch's
    kernels compute float32 and the half types in float32)."""
    return dt.float64 if p.dtype == dt.float64 else dt.float32


def zeros_state(p: Tensor) -> Tensor:
    """Optimizer state starts as a realized zero buffer on ``p``'s device, so the first
    step has the same structure as every later one (one compile)."""
    return tensor(np.zeros(p.shape, dtype=p.dtype.np), dtype=p.dtype,
                  device=p.device if p.node.device == "cuda" else None)


class StepEvent(NamedTuple):
    """What a recorded ``step()`` tells ``nv.compile``'s replay (the "opt_step" event):
    the (group index, parameter) pairs it updated, per updated group the
    hyperparameters it compiled in as constants (``Optimizer._baked``), the groups it
    went through (each group, its ``params`` list and their contents) and each updated
    parameter's state dict. The replay checks all are unchanged before running the
    recorded executables (``_host_step``)."""

    updated: list[tuple[int, Tensor]]
    baked: dict[int, dict[str, Any]]
    groups: list[tuple[dict[str, Any], list[Tensor], tuple[Tensor, ...]]]
    states: list[dict[str, Any]]         # per updated parameter, once the step recorded


class Optimizer:
    """Base class: subclasses implement ``_update(group, p, grad, state)`` (and its
    host side ``_host_update``), and list in ``_runtime_hparams`` the group entries
    that reach the step only through ``_scalar`` (runtime inputs)."""

    # Group entries that enter the step only as runtime scalars; every other entry of
    # ``defaults`` is taken to be compiled in as a constant (``_baked``).
    _runtime_hparams: frozenset[str] = frozenset({"lr"})
    # Per-parameter state entries kept on the host as Python numbers (PyTorch keeps
    # them as 0-d tensors: ``load_state_dict`` of a PyTorch checkpoint converts them).
    _host_state: frozenset[str] = frozenset({"step"})
    # The dtype of the runtime scalars being drawn: the updated parameter's
    # (``scalar_dtype``), set before each update and each replayed host update.
    _scalar_dtype: dt.DType = dt.float32

    # Whether this class's ``_update`` may be recorded once per structure and stamped
    # after (``update_template``): its recorded nodes follow only from ``_baked``, the
    # state entries and the tensors' shapes, dtypes and devices. Read from the class
    # that defines the ``_update`` in use, so a subclass overriding it records as written.
    _stamp_updates: bool = False

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]):
        self.defaults = defaults
        self.param_groups: list[dict[str, Any]] = []
        self.state: dict[Tensor, dict[str, Any]] = {}
        self._scalars: dict[tuple[str, float], Tensor] = {}   # this step's, see _scalar
        self._collecting: list[tuple[str, float]] | None = None  # see _host_step
        self._drawn: list[tuple[str, Tensor]] | None = None  # see _update_param
        self._templates: dict[tuple, UpdateTemplate | str | None] = {}
        owner = next(c for c in type(self).__mro__ if "_update" in c.__dict__)
        self._stamps = bool(owner.__dict__.get("_stamp_updates", False))
        groups = list(params)
        if not groups:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)
        realize(*[p for g in self.param_groups for p in g["params"]])

    def add_param_group(self, group: dict[str, Any]) -> None:
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"{type(self).__name__}: can only optimize Tensors, got "
                                f"{type(p).__name__}")
            if not p.is_leaf:
                raise ValueError(f"{type(self).__name__}: can't optimize a non-leaf Tensor")
            if id(p) in seen:
                raise ValueError(f"{type(self).__name__}: some parameters appear in more than "
                                 "one parameter group")
            seen.add(id(p))
        filled = {**self.defaults, **group, "params": params}
        for k, v in filled.items():
            if k != "params" and v is _REQUIRED:
                raise ValueError(f"{type(self).__name__}: parameter group didn't specify {k}")
        self.param_groups.append(filled)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients; then the step that ``step()`` left waiting runs, without
        them as results (``realize.end_of_step``)."""
        if set_to_none:     # (zeros instead are values a step computes: nothing to redo)
            capture_log.action("zero_grad", self)
        for g in self.param_groups:
            for p in g["params"]:
                clear_grad(p, set_to_none)
        realize_deferred()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Record the update of every parameter with a gradient; the step then runs at
        the next ``zero_grad()``, read or ``step()`` (inside a call ``nv.compile``
        records, at the end of the call: ``end_of_step``)."""
        if live_pending.deferred is not None and capture_log.ACTIVE.get() is None:
            # the last step never ran (no zero_grad(), no read): with what was recorded
            # since -- the gradients it accumulated into -- as one step, as it was before
            realize()
        loss = None
        if closure is not None:
            from nova.autograd.grad_mode import enable_grad
            with enable_grad():
                loss = closure()
        self._name_buffers()
        self._scalars = {}
        updated = [(gi, p) for gi, group in enumerate(self.param_groups)
                   for p in group["params"] if p.grad is not None]
        baked = {gi: self._baked(self.param_groups[gi]) for gi in {gi for gi, _ in updated}}
        event = StepEvent(updated, baked, [(g, g["params"], tuple(g["params"]))
                                           for g in self.param_groups], [])
        capture_log.action("opt_step", self, event)
        keys = {gi: self._baked_key(b) for gi, b in baked.items()}
        with no_grad():
            for gi, p in updated:
                self._update_param(gi, keys[gi], p)
        event.states.extend(self.state[p] for _, p in updated)
        end_of_step()
        return loss

    def _baked_key(self, baked: dict[str, Any]) -> tuple | None:
        """A group's compiled-in hyperparameters as a template key part (None when one
        is unhashable: no templates for that group)."""
        if not self._stamps:
            return None
        key = tuple(sorted(baked.items()))
        try:
            hash(key)
        except TypeError:
            return None
        return key

    def _update_param(self, gi: int, baked: tuple | None, p: Tensor) -> None:
        """Record the update of ``p``: stamped from the template of an earlier update
        with the same structure if there is one, else as ``_update`` writes it (kept
        as that structure's template when it can be one). ``baked``: the group's
        ``_baked_key`` (None: no template)."""
        group, grad, state = self.param_groups[gi], p.grad, self.state.setdefault(p, {})
        self._scalar_dtype = scalar_dtype(p)
        key = None if baked is None else template_key(gi, baked, p, grad, state)
        if key is None:
            self._update(group, p, grad, state)
            return
        template = self._templates.get(key, False)
        self._drawn = []
        try:
            if isinstance(template, UpdateTemplate):
                self._host_update(group, state)
                template.stamp(p, grad, state, self._drawn)
            elif template is False or template is ONE_OFF:
                self._templates[key] = UpdateTemplate.capture(
                    lambda: self._update(group, p, grad, state) or self._drawn,
                    p, grad, state)
            else:                    # this structure cannot be stamped
                self._update(group, p, grad, state)
        finally:
            self._drawn = None

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor,
                state: dict[str, Any]) -> None:
        """Record the update of ``p`` (and its state). The host-side part -- step counts
        and the runtime scalars derived from them and from the group's hyperparameters
        -- is ``_host_update``, which ``_update`` calls and ``nv.compile`` replays alone."""
        raise NotImplementedError

    def _host_update(self, group: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        """Advance ``state``'s host-side counters for one step and return the step's
        runtime scalars by name (``_scalar``); no tensor is touched. What a replayed
        step redoes in Python (``nova.capture``)."""
        return {}

    def _scalar(self, name: str, value: float) -> Tensor | None:
        """``runtime_scalar(value)`` in the dtype of the parameter being updated
        (``scalar_dtype``), shared by every parameter of this step that needs the
        same quantity (``name``) with the same value: one step input instead of one per
        parameter (a GPT step had ~100 of them), and fewer nodes to record and hash.
        While ``_host_step`` replays, it only collects the distinct (name, value) pairs."""
        key = (name, float(value), self._scalar_dtype)
        if self._collecting is not None:
            if key not in self._scalars:
                self._scalars[key] = None
                self._collecting.append(key)
            return None
        t = self._scalars.get(key)
        if t is None:
            t = self._scalars[key] = runtime_scalar(value, self._scalar_dtype)
            capture_log.fresh("scalar", self, t.node, name)
        if self._drawn is not None:
            self._drawn.append((name, t))
        return t

    def _baked(self, group: dict[str, Any]) -> dict[str, Any]:
        """The values of ``group`` that this optimizer's recorded step holds as
        constants or that decide its structure: a replay of the step is only exact
        while they are unchanged. By default every hyperparameter of ``defaults``
        except ``_runtime_hparams``; subclasses add structural facts (``momentum != 0``)."""
        return {k: group[k] for k in self.defaults
                if k not in self._runtime_hparams and k not in KERNEL_FLAGS and k in group}

    def _host_step(self, event: StepEvent) -> list[tuple[str, float]]:
        """The host side of a recorded ``step()`` (``event``): every ``_host_update``,
        and the distinct runtime scalars in the order the recorded step drew them
        (``nv.compile``'s replay). The call runs recorded instead where the recorded
        step is no longer what ``step()`` would do: its parameter groups changed
        (``_replay_changes``), or a parameter's state dict is another one
        (``load_state_dict`` and ``self.state = ...`` replace them,
        ``self.state.clear()`` drops them: the replay would update the old state)."""
        why = self._replay_changes(event)
        if why is not None:
            _record_instead(f"{type(self).__name__}: {why}")
        self._scalars, self._collecting = {}, []
        states = self.state
        try:
            for (gi, p), state in zip(event.updated, event.states):
                if states.get(p) is not state:
                    _record_instead(f"{type(self).__name__}: a parameter's state is another "
                                    "dict than when the step was recorded (load_state_dict, "
                                    "or the state reset)")
                self._scalar_dtype = scalar_dtype(p)
                self._host_update(self.param_groups[gi], state)
            return self._collecting
        finally:
            self._scalars, self._collecting = {}, None

    def _replay_changes(self, event: StepEvent) -> str | None:
        """What changed since the recorded ``step()`` (``event``) in its parameter
        groups, or None: a group added (``add_param_group``) or replaced, a group's
        ``params`` edited, or a hyperparameter the step compiled in as a constant."""
        groups = self.param_groups
        if len(groups) != len(event.groups) or not all(
                g is groups[i] and g["params"] is params and len(params) == len(ps)
                and all(map(operator.is_, params, ps))
                for i, (g, params, ps) in enumerate(event.groups)):
            return ("its parameter groups changed since the step was recorded "
                    "(add_param_group, or a group's params)")
        for gi, then in event.baked.items():
            now = self._baked(groups[gi])
            if now != then:
                changed = ", ".join(f"{k} {then.get(k)!r} -> {now.get(k)!r}"
                                    for k in sorted(set(then) | set(now))
                                    if then.get(k) != now.get(k))
                return (f"parameter group {gi} changed {changed}, compiled into the "
                        "recorded step as a constant")
        return None

    def _host_snapshot(self) -> Callable[[], None]:
        """Undo for what ``_host_step`` and ``zero_grad`` change: the groups'
        hyperparameters, the states' host values, the gradients."""
        groups = [dict(g) for g in self.param_groups]
        states = {id(p): (s, {k: v for k, v in s.items() if not isinstance(v, Tensor)})
                  for p, s in self.state.items()}
        grads = [(p, p.grad) for g in self.param_groups for p in g["params"]]

        def undo() -> None:
            for g, saved in zip(self.param_groups, groups):
                g.update(saved)
            for s, saved in states.values():
                s.update(saved)
            for p, grad in grads:
                p.grad = grad
        return undo

    def _name_buffers(self) -> None:
        """Tell the memory report which step inputs are parameters and optimizer state."""
        for group in self.param_groups:
            for p in group["params"]:
                mark_role(p, "parameter")
                for v in self.state.get(p, {}).values():
                    if isinstance(v, Tensor):
                        mark_role(v, "optimizer state")

    # ------------------------------------------------------------ state dicts

    def state_dict(self) -> dict[str, Any]:
        """PyTorch's layout: state by parameter index, groups with parameter indices."""
        index: dict[int, int] = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            packed["params"] = []
            for p in g["params"]:
                index.setdefault(id(p), len(index))
                packed["params"].append(index[id(p)])
            groups.append(packed)
        state = {}
        for g in self.param_groups:
            for p in g["params"]:
                if p in self.state:
                    state[index[id(p)]] = {k: (v.detach() if isinstance(v, Tensor) else v)
                                           for k, v in self.state[p].items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        name = type(self).__name__
        groups = state_dict.get("param_groups")
        if not isinstance(groups, list) or "state" not in state_dict:
            raise ValueError(f"{name}.load_state_dict: expected keys 'state' and 'param_groups'")
        if len(groups) != len(self.param_groups):
            raise ValueError(f"{name}.load_state_dict: checkpoint has {len(groups)} parameter "
                             f"groups, the optimizer has {len(self.param_groups)}")
        by_index: dict[int, Tensor] = {}
        for k, (saved, mine) in enumerate(zip(groups, self.param_groups)):
            if len(saved["params"]) != len(mine["params"]):
                raise ValueError(f"{name}.load_state_dict: group {k} has {len(saved['params'])} "
                                 f"parameters in the checkpoint, {len(mine['params'])} here")
            for i, p in zip(saved["params"], mine["params"]):
                by_index[int(i)] = p
        new_state: dict[Tensor, dict[str, Any]] = {}
        for i, entries in state_dict["state"].items():
            p = by_index.get(int(i))
            if p is None:
                raise ValueError(f"{name}.load_state_dict: state for unknown parameter {i}")
            restored = {}
            for k, v in entries.items():
                if k in self._host_state and isinstance(v, Tensor):
                    if v.numel() != 1:
                        raise ValueError(f"{name}.load_state_dict: state {k!r} of parameter "
                                         f"{i} must be a number, got a tensor of shape "
                                         f"{tuple(v.shape)}")
                    v = int(v.item()) if k == "step" else float(v.item())
                elif isinstance(v, Tensor):
                    if v.shape != p.shape:
                        raise ValueError(f"{name}.load_state_dict: state {k!r} of parameter {i} "
                                         f"has shape {v.shape}, the parameter has {p.shape}")
                    v = v.to(p.device, p.dtype)   # state lives with its parameter
                restored[k] = v
            new_state[p] = restored
        for saved, mine in zip(groups, self.param_groups):
            mine.update({k: v for k, v in saved.items() if k != "params"})
        self.state = new_state

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(g.items()) if k != "params"]
        return "\n".join(lines + [")"])


def _record_instead(why: str) -> NoReturn:
    """Make the ``nv.compile`` replay running ``_host_step`` record the call instead."""
    from nova.capture import _Rerecord   # (only a replay calls _host_step)
    raise _Rerecord(why)


class _Required:
    def __repr__(self) -> str:
        return "<required parameter>"


_REQUIRED = _Required()
required = _REQUIRED
