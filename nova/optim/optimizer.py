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

``state`` is PyTorch's ``defaultdict(dict)``: an optimizer written against PyTorch
(``state = self.state[p]; if len(state) == 0: ...``) runs unchanged, its own ``step()``
included, and its updates end the step as Nova's do (``end_of_step``). Nova's own
optimizers make no entry for a parameter they keep nothing for (SGD without momentum),
as PyTorch's do, so ``state_dict()`` lists what PyTorch's lists.

Hooks, PyTorch's: ``register_step_pre_hook`` / ``register_step_post_hook`` (and the
global ``register_optimizer_step_pre_hook`` / ``_post_hook``) run when ``step()`` is
called -- the pre-hooks before the update is recorded, the post-hooks after. The step
itself runs later (at the next ``zero_grad()`` or read), but whatever a post-hook reads
is realized first, so it sees the updated parameters, as in PyTorch. A call that
``nv.compile`` records with step hooks registered runs recorded every time (a replay
would skip the hooks' Python). ``register_state_dict_pre_hook`` / ``_post_hook`` and
``register_load_state_dict_pre_hook`` / ``_post_hook`` wrap ``state_dict()`` and
``load_state_dict()``; every registration returns a ``RemovableHandle``.
"""
from __future__ import annotations

import functools
import operator
import warnings
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, NoReturn

import numpy as np

from nova.autograd.grad_mode import no_grad
from nova.core import dtypes as dt
from nova.core.hooks import RemovableHandle
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


def state_scalar_np() -> type:
    """The numpy type of PyTorch's 0-d optimizer state (``_get_scalar_dtype``: ASGD's
    ``eta`` and ``mu``, NAdam's ``mu_product``): float32, float64 where the default
    dtype is float64. Nova keeps those values on the host as Python floats holding what
    such a tensor holds, so the updates computed from them are PyTorch's."""
    return np.float64 if dt.get_default_dtype() == dt.float64 else np.float32


def state_scalar(value: float) -> float:
    """``value`` stored in PyTorch's 0-d state tensor (``state_scalar_np``)."""
    return float(state_scalar_np()(value))


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
    # The dtype of the parameter being updated (or replayed): the half types follow
    # PyTorch's rounding per op (``nova.optim._half``).
    _param_dtype: dt.DType = dt.float32
    # Entries of a (PyTorch) state dict that ``load_state_dict`` drops: scratch space
    # the PyTorch optimizer keeps in its state and Nova's does not use.
    _scratch_state: frozenset[str] = frozenset()
    _in_step = False            # inside a hooked step() (see _hooked_step)
    _base_stepped = False       # Optimizer.step ran in the current step() call

    # Whether this class's ``_update`` may be recorded once per structure and stamped
    # after (``update_template``): its recorded nodes follow only from ``_baked``, the
    # state entries and the tensors' shapes, dtypes and devices. Read from the class
    # that defines the ``_update`` in use, so a subclass overriding it records as written.
    _stamp_updates: bool = False

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]):
        self.defaults = defaults
        self.param_groups: list[dict[str, Any]] = []
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self._optimizer_step_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
        self._optimizer_step_post_hooks: OrderedDict[int, Callable] = OrderedDict()
        self._optimizer_state_dict_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
        self._optimizer_state_dict_post_hooks: OrderedDict[int, Callable] = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
        self._optimizer_load_state_dict_post_hooks: OrderedDict[int, Callable] = OrderedDict()
        self._scalars: dict[tuple[str, float], Tensor] = {}   # this step's, see _scalar
        self._collecting: list[tuple[str, float]] | None = None  # see _host_step
        self._drawn: list[tuple[str, Tensor]] | None = None  # see _update_param
        self._templates: dict[tuple, UpdateTemplate | str | None] = {}
        owner = next(c for c in type(self).__mro__ if "_update" in c.__dict__)
        self._stamps = bool(owner.__dict__.get("_stamp_updates", False))
        _patch_step_function(type(self))
        if isinstance(params, Tensor):
            raise TypeError(f"{type(self).__name__}: params argument given to the optimizer "
                            "should be an iterable of Tensors or dicts, but got a Tensor")
        groups = list(params)
        if not groups:
            raise ValueError(f"{type(self).__name__}: optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)
        realize(*[p for g in self.param_groups for p in g["params"]])

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group, as PyTorch does: ``param_group`` itself becomes the group, its
        ``params`` made a list and each hyperparameter it leaves out set from
        ``defaults``. ``params`` may hold ``(name, tensor)`` pairs
        (``model.named_parameters()``): the names are kept as the group's
        ``param_names`` (and so in ``state_dict()``); every group has names or none
        does. A parameter may not be in two groups; one listed twice in the same group
        is warned about and stepped twice, as PyTorch does."""
        name = type(self).__name__
        if not isinstance(param_group, dict):
            raise TypeError(f"{name}: param_group must be a dict, but got "
                            f"{type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, (set, frozenset)):
            raise TypeError(f"{name}: optimizer parameters need to be organized in ordered "
                            "collections, but the ordering of tensors in sets will change "
                            "between runs. Please use a list instead.")
        params = [params] if isinstance(params, Tensor) else list(params)
        param_group["params"] = params = [
            p._pair if getattr(type(p), "__nova_complex_parameter__", False) else p
            for p in _take_names(name, param_group, params)]   # (a complex one: its pair)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"{name}: optimizer can only optimize Tensors, but one of "
                                f"the params is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError(f"{name}: can't optimize a non-leaf Tensor")
        for k, default in self.defaults.items():
            if default is _REQUIRED and k not in param_group:
                raise ValueError(f"{name}: parameter group didn't specify a value of "
                                 f"required optimization parameter {k}")
            param_group.setdefault(k, default)
        if len({id(p) for p in params}) != len(params):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; "
                          "in future, this will cause an error; see "
                          "github.com/pytorch/pytorch/issues/40967 for more information",
                          UserWarning, stacklevel=3)
        for g in self.param_groups:
            if ("param_names" in g) != ("param_names" in param_group):
                which = "with names" if "param_names" in param_group else "without names"
                raise ValueError(f"{name}: all optimizer param groups should be with/without "
                                 f"names. cannot add param group {which} to the optimizer")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError(f"{name}: some parameters appear in more than one parameter "
                             "group")
        self.param_groups.append(param_group)

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
        records, at the end of the call: ``end_of_step``). The step hooks run around
        this call (module docstring)."""
        self._base_stepped = True
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
        self._begin_step(updated)
        with no_grad():
            for gi, p in updated:
                self._update_param(gi, keys[gi], p)
        event.states.extend(self.state.get(p) for _, p in updated)
        end_of_step()
        return loss

    def _begin_step(self, updated: list[tuple[int, Tensor]]) -> None:
        """Called with the (group index, parameter) pairs about to be updated, before
        any is (and before a replayed host step): what a subclass decides from the
        state at the start of the step, as PyTorch's ``_init_group`` reads it before
        its updates (SGD: which momentum buffers are new)."""

    def _optimizer_step_code(self) -> None:
        """PyTorch's empty hook for profilers, called after every ``step()``."""

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
        ``_baked_key`` (None: no template). A parameter without state gets an entry in
        ``self.state`` only if the update keeps something (PyTorch's SGD without
        momentum keeps nothing)."""
        group, grad = self.param_groups[gi], p.grad
        state = self.state.get(p)
        if state is None:
            state = {}
        self._scalar_dtype = scalar_dtype(p)
        self._param_dtype = p.dtype
        try:
            self._record_update(gi, baked, group, p, grad, state)
        finally:
            if state and self.state.get(p) is not state:
                self.state[p] = state

    def _record_update(self, gi: int, baked: tuple | None, group: dict[str, Any],
                       p: Tensor, grad: Tensor, state: dict[str, Any]) -> None:
        """``_update_param``'s recording, by template or as written."""
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
            self._begin_step(event.updated)
            for (gi, p), state in zip(event.updated, event.states):
                self._scalar_dtype = scalar_dtype(p)
                self._param_dtype = p.dtype
                self._host_update(self.param_groups[gi], {} if state is None else state)
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
        grads = [(p, p.grad) for g in self.param_groups for p in g["params"]]
        # per state, its host values; a step count kept as a tensor (as PyTorch keeps
        # it) is counted in place by ``state["step"] += 1``: its value, not the dict
        # entry, is what to restore
        states, steps = [], []
        for s in self.state.values():
            states.append((s, {k: v for k, v in s.items() if not isinstance(v, Tensor)}))
            step = s.get("step")
            if isinstance(step, Tensor):
                steps.append((step, step._node, step._version))

        def undo() -> None:
            for g, saved in zip(self.param_groups, groups):
                g.update(saved)
            for s, saved in states:
                s.update(saved)
            for v, node, version in steps:
                v._node, v._version = node, version
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

    # ------------------------------------------------------------ hooks

    def register_step_pre_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """``hook(optimizer, args, kwargs) -> None or (new_args, new_kwargs)``, run
        before each ``step()`` (``args`` includes the optimizer, as PyTorch passes it)."""
        return _add_hook(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """``hook(optimizer, args, kwargs) -> None``, run after each ``step()``: what it
        reads is realized first, so it sees the updated parameters."""
        return _add_hook(self._optimizer_step_post_hooks, hook)

    def register_state_dict_pre_hook(self, hook: Callable[[Optimizer], None],
                                     prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer)``, run before ``state_dict()`` builds the dict."""
        return _add_hook(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook: Callable[..., dict[str, Any] | None],
                                      prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer, state_dict) -> state_dict or None``, run on the built dict
        (a returned dict replaces it)."""
        return _add_hook(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook: Callable[..., dict[str, Any] | None],
                                          prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer, state_dict) -> state_dict or None``, run before
        ``load_state_dict`` reads the (shallow-copied) dict; a returned dict is loaded
        instead."""
        return _add_hook(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook: Callable[[Optimizer], None],
                                           prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer)``, run once ``load_state_dict`` has loaded the state."""
        return _add_hook(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    # ------------------------------------------------------------ state dicts

    def state_dict(self) -> dict[str, Any]:
        """PyTorch's layout: state by parameter index, groups with parameter indices.
        The indices are PyTorch's: each group numbers its entries on from where the
        one before ended, and a parameter listed twice in a group takes the index of
        its last place. ``state`` lists the parameters with an entry in
        ``self.state``, in the order they got one, as PyTorch does."""
        for hook in list(self._optimizer_state_dict_pre_hooks.values()):
            hook(self)
        index: dict[int, int] = {}
        start = 0
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            index.update({id(p): i for i, p in enumerate(g["params"], start)
                          if id(p) not in index})
            packed["params"] = [index[id(p)] for p in g["params"]]
            start += len(packed["params"])
            groups.append(packed)
        state = {}
        for p, entries in self.state.items():
            if isinstance(p, Tensor):
                if id(p) not in index:
                    raise KeyError(f"{type(self).__name__}.state_dict: the state holds an "
                                   "entry for a tensor that is in no parameter group")
                key = index[id(p)]
            else:
                key = p
            state[key] = {k: (v.detach() if isinstance(v, Tensor) else v)
                          for k, v in entries.items()}
        out = {"state": state, "param_groups": groups}
        for hook in list(self._optimizer_state_dict_post_hooks.values()):
            result = hook(self, out)
            if result is not None:
                out = result
        return out

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load ``state_dict`` (PyTorch's layout, from ``state_dict()`` or a PyTorch
        checkpoint): the groups' hyperparameters and each parameter's state, tensors
        moved to the parameter's device and dtype, PyTorch's 0-d tensors of
        ``_host_state`` entries made numbers."""
        name = type(self).__name__
        state_dict = dict(state_dict) if isinstance(state_dict, dict) else state_dict
        for hook in list(self._optimizer_load_state_dict_pre_hooks.values()):
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        groups = state_dict.get("param_groups") if isinstance(state_dict, dict) else None
        if not isinstance(groups, list) or "state" not in state_dict:
            raise ValueError(f"{name}.load_state_dict: expected keys 'state' and 'param_groups'")
        if len(groups) != len(self.param_groups):
            raise ValueError(f"{name}.load_state_dict: loaded state dict has a different "
                             f"number of parameter groups (the checkpoint has {len(groups)} "
                             f"parameter groups, the optimizer has {len(self.param_groups)})")
        by_index: dict[int, Tensor] = {}
        for k, (saved, mine) in enumerate(zip(groups, self.param_groups)):
            if len(saved["params"]) != len(mine["params"]):
                raise ValueError(f"{name}.load_state_dict: loaded state dict contains a "
                                 "parameter group that doesn't match the size of optimizer's "
                                 f"group (group {k} has {len(saved['params'])} parameters in "
                                 f"the checkpoint, {len(mine['params'])} here)")
            for i, p in zip(saved["params"], mine["params"]):
                by_index[int(i)] = p
        new_state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        for i, entries in state_dict["state"].items():
            p = by_index.get(int(i))
            if p is None:
                raise ValueError(f"{name}.load_state_dict: state for unknown parameter {i}")
            new_state[p] = {k: self._restored(k, v, p, i) for k, v in entries.items()
                            if k not in self._scratch_state}
        for saved, mine in zip(groups, self.param_groups):
            mine.update({k: v for k, v in saved.items() if k != "params"})
        self.state = new_state
        for hook in list(self._optimizer_load_state_dict_post_hooks.values()):
            hook(self)

    def _restored(self, key: str, v: Any, p: Tensor, index: Any) -> Any:
        """A loaded state entry ``key`` of parameter ``p`` (``index`` in the dict): a
        ``_host_state`` 0-d tensor as a number, a tensor checked against ``p``'s shape
        and moved to its device and dtype, anything else as is."""
        name = type(self).__name__
        if key in self._host_state and isinstance(v, Tensor):
            if v.numel() != 1:
                raise ValueError(f"{name}.load_state_dict: state {key!r} of parameter "
                                 f"{index} must be a number, got a tensor of shape "
                                 f"{tuple(v.shape)}")
            return int(v.item()) if key == "step" else float(v.item())
        if isinstance(v, Tensor):
            if v.shape != p.shape:
                raise ValueError(f"{name}.load_state_dict: state {key!r} of parameter {index} "
                                 f"has shape {v.shape}, the parameter has {p.shape}")
            return v.to(p.device, p.dtype)   # state lives with its parameter
        return v

    def __deepcopy__(self, memo: dict[int, Any]) -> Optimizer:
        """A deep copy whose ``step`` steps the copy. A scheduler wraps ``step`` in an
        instance attribute holding the optimizer it wrapped (PyTorch's
        ``patch_track_step_called``); copied by reference, as functions are, it made
        ``copy.deepcopy(opt).step()`` update the original's parameters. The copy gets a
        wrapper of its own instead."""
        import copy
        cls = type(self)
        new = cls.__new__(cls)
        memo[id(self)] = new
        wrapped = getattr(self.__dict__.get("step"), "_wrapped_by_lr_sched", False)
        for key, value in self.__dict__.items():
            if not (key == "step" and wrapped):
                new.__dict__[key] = copy.deepcopy(value, memo)
        if wrapped:
            from nova.optim.lr_scheduler import _track_step_called
            _track_step_called(new)
        return new

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(g.items()) if k != "params"]
        return "\n".join(lines + [")"])


# The hooks every optimizer's step() runs (``register_optimizer_step_pre_hook``): the
# global pre-hooks before the optimizer's own, the global post-hooks after, as PyTorch.
_global_optimizer_pre_hooks: OrderedDict[int, Callable[..., Any]] = OrderedDict()
_global_optimizer_post_hooks: OrderedDict[int, Callable[..., Any]] = OrderedDict()


def register_optimizer_step_pre_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """``hook(optimizer, args, kwargs) -> None or (new_args, new_kwargs)``, run before
    every optimizer's ``step()``, ahead of the optimizer's own pre-hooks."""
    return _add_hook(_global_optimizer_pre_hooks, hook)


def register_optimizer_step_post_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """``hook(optimizer, args, kwargs) -> None``, run after every optimizer's
    ``step()``, after the optimizer's own post-hooks."""
    return _add_hook(_global_optimizer_post_hooks, hook)


def _add_hook(table: OrderedDict[int, Callable[..., Any]], hook: Callable[..., Any],
              prepend: bool = False) -> RemovableHandle:
    handle = RemovableHandle(lambda hook_id: table.pop(hook_id, None))
    table[handle.id] = hook
    if prepend:
        table.move_to_end(handle.id, last=False)
    return handle


def _patch_step_function(cls: type) -> None:
    """Wrap ``cls.step`` (once per class, as PyTorch patches it at an optimizer's
    construction) so that every ``step()`` -- Nova's, or one a subclass defines --
    runs the step hooks and ends the step (``_hooked_step``)."""
    if not getattr(cls.step, "_nova_hooked", False):
        cls.step = _hooked_step(cls.step)


def _hooked_step(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` (a ``step``) with the step hooks around it. A step of the subclass's
    own that does not go through ``Optimizer.step`` (an optimizer written against
    PyTorch, updating its parameters in place) ends the step as ``Optimizer.step``
    does (``end_of_step``): its updates run at the next ``zero_grad()`` or read, not
    chained into every later step. A step calling ``super().step()`` runs the hooks
    once."""
    @functools.wraps(func)
    def step(*args: Any, **kwargs: Any) -> Any:
        self = args[0]
        if self.__dict__.get("_in_step"):
            return func(*args, **kwargs)
        pre = [*_global_optimizer_pre_hooks.values(), *self._optimizer_step_pre_hooks.values()]
        post = [*self._optimizer_step_post_hooks.values(), *_global_optimizer_post_hooks.values()]
        if pre or post:
            capture_log.refuse(f"{type(self).__name__}.step() runs step hooks, Python that a "
                               "replay would skip")
        for hook in pre:
            result = hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(f"{func} must return None or a tuple of (new_args, "
                                       f"new_kwargs), but got {result}.")
                args, kwargs = result
        self._in_step, self._base_stepped = True, False
        try:
            out = func(*args, **kwargs)
        finally:
            self._in_step = False
        if not self._base_stepped:
            end_of_step()
        self._optimizer_step_code()
        for hook in post:
            hook(self, args, kwargs)
        return out
    step._nova_hooked = True    # type: ignore[attr-defined]
    return step


def _take_names(name: str, param_group: dict[str, Any], params: list[Any]) -> list[Any]:
    """``params`` without the names of its ``(name, tensor)`` pairs, which go to
    ``param_group["param_names"]`` (PyTorch's: all named or none)."""
    names = [q[0] for q in params if isinstance(q, tuple)]
    if names:
        if len(names) != len(params):
            raise ValueError(f"{name}: all optimizer params should be with/without names. "
                             "Some param names are missing")
        param_group["param_names"] = names
    return [q[1] if isinstance(q, tuple) else q for q in params]


def _record_instead(why: str) -> NoReturn:
    """Make the ``nv.compile`` replay running ``_host_step`` record the call instead."""
    from nova.capture import _Rerecord   # (only a replay calls _host_step)
    raise _Rerecord(why)


class _Required:
    def __repr__(self) -> str:
        return "<required parameter>"


_REQUIRED = _Required()
required = _REQUIRED
