"""``nv.compile``: call a function once recorded, then replay its steps without Python.

Without it, every training step re-runs the model's Python: ~2,500 ops recorded,
the graph extracted and hashed, donation decided -- a quarter of a small GPT's step
(``benchmarks/bench_ops``). ``nv.compile(fn)`` (function, decorator or ``nn.Module``)
records the first calls as usual and, once two consecutive calls did the same thing,
replays later calls: it runs the steps the call realized (the same cached executables)
on the new inputs and writes the results where the recorded call left them, as
``torch.compile``'s CUDA graphs, ``jax.jit`` and tinygrad's ``TinyJit`` do.

**What a call is, seen from Nova** (``nova.tensor.capture_log``): the steps it realized;
the host values it drew fresh (random keys, the optimizer's runtime scalars: learning
rate, bias corrections); the Python-side state of Nova's objects it changed (optimizer
step counts, scheduler epochs, gradients set to None, generator seeds); and where its
results went. A result goes to a *place*: a tensor that existed before the call and was
updated in place (a parameter, an optimizer moment, a module buffer), or a slot of a
container that existed before the call (``p.grad``, a dict entry), or the return value.
A step argument comes from a place too, or from the call's inputs, a fresh host value,
or an earlier step of the same call; a gradient from before the call (another
function's ``backward``) is read from its ``.grad`` slot as the call begins. Places
are found once, by scanning the live objects (``gc``) before and after a recorded call.

**When it replays.** Call 1 is recorded; from call 2 on, a recorded call is compared
with the one before: same steps (structural keys), same places, same events. When they
agree, the next call replays. A replay is valid only while everything the recorded
call started from is unchanged, so each replay checks its guards first:

- the inputs' shapes, dtypes, devices and ``requires_grad``, Python arguments by value
  (objects by identity), grad mode, engine and remat mode; a complex input is guarded
  as one (its complex dtype) and read as its two real parts, which is all the steps
  see, and a complex result is rebuilt from its parts; how the tensor arguments share
  storage or values with each other (``f(x, x)`` and ``f(x, y)`` are two keys), and
  with the tensors the call reads or rebinds by itself (an argument that is also a
  global it writes);
- the global names and closure variables the function reads (and those of the plain
  functions it reads from them), by identity, numbers and strings by value;
- every module's Python settings (``training``, ``Dropout.p``, ``eps``: attributes
  holding numbers, strings, None or tuples of them);
- every place a step reads still holding a realized tensor of the captured shape,
  dtype, device and ``requires_grad``;
- every slot (a dict or list entry, a module's ``_parameters`` or ``_modules`` entry, a
  closure cell, an attribute of the user's object) that held a tensor the call read or
  rebound, a module, or an optimizer, scheduler or generator the call used, still
  holding that object (a complex tensor's parts: the complex tensor, pinned in turn
  where it is held, as a module's complex buffer);
- that no hook (a module's or a tensor's) was registered or removed since the call
  before ended;
- whether the ``.grad`` of each tensor the call's ``backward`` wrote, and of each
  parameter of the optimizers it stepped, was None (``backward`` adds to a gradient
  that is there, ``step()`` skips a parameter without one);
- and, as the optimizer's host step is replayed, its parameter groups (a group added
  or edited), each updated parameter's state dict (``load_state_dict``, ``opt.state =
  ...``, ``opt.state.clear()``) and the hyperparameters compiled in as constants.

A failed guard records that call again and says why (``nv.debug.cache_stats()``).

**What cannot be captured** and runs recorded every call, with one ``RecompileWarning``
naming the reason and the line: reading a value on the host inside the function
(``item()``, ``numpy()``, ``print``, ``bool(t)``: the Python using it would not run
again), results with autograd history a later ``backward`` could use (a replay gives
back values, not the graph), results stored in containers the call itself created, values
from numpy made inside the function (pass tensors instead), and calls that never
agree twice. What Nova cannot see is the user's Python state beyond the guards above:
a number or string reached through an object that is not a module (``cfg.scale``,
``self.lr`` of the user's class, an item of a global list or dict), and a global read by a
method rather than by a plain function, are baked in when the function is recorded, as with ``jax.jit`` -- make such a value
an argument, or a tensor. The Python a replay
skips does not run: a global or closure variable that the function itself rebinds
and reads (a counter) differs at every call, so such a function records every call.

**On a GPU** a replay runs the same way: the step's host arguments (random keys,
optimizer scalars) are uploaded per call, as realization uploads them, and the cuda
engine replays its kernels as one CUDA graph (``nova.runtime.launch_graph``).

**Exactness.** A replay runs the executables the recorded call ran, on the arguments it
would have passed, with the same donation decisions (a buffer is written over only if
no one else can read it), so its results are bit-identical to the recorded loop's.
Random keys are drawn from the same generators in the same order, and optimizer
scalars are recomputed by the optimizer's own host update. A replay runs with Ctrl-C
held back until its results are bound (its Python-side effects and its results then
land together); a kernel failure restores the Python-side state and runs the call
recorded, so it fails exactly as the uncompiled function would -- unless the replay
had already written over donated buffers (a parameter's update), when it can be neither
undone nor repeated: then the results it computed before the failure are kept (as
realization keeps them) and the others fail with its error.
"""
from __future__ import annotations

import contextlib
import dis
import functools
import gc
import inspect
import operator
import sys
import threading
import warnings
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter
from types import BuiltinFunctionType, CellType, FunctionType, MethodType
from typing import Any

import numpy as np

from nova import config
from nova.core import compiling, hooks
from nova.core import dtypes as dt
from nova.core.lru import LRU
from nova.runtime.cache import (CACHE, RecompileWarning, freeze, freezes,
                                settle_garbage_collector, settling_deferred)
from nova.runtime.engine import get_engine, get_remat
from nova.runtime.host_buffers import sole_device_owner, sole_host_owner, upload_packed
from nova.runtime.executable import overwrote_donated
from nova.runtime.program import salvage_of
from nova.runtime.interrupts import deferred_interrupt
from nova.tensor import autocast_state, grad_mode
from nova.tensor.capture_log import ACTIVE, CaptureLog
from nova.tensor.complex import ComplexTensor
from nova.tensor.device import get_default_device
from nova.tensor.realize import BASE_NODE_REFS, realize
from nova.tensor.tensor import Tensor
from nova.tensor.trace import Node, RealizationError

_node_of = attrgetter("_node")    # a tensor's current node, as the replay rebinds it
_grad_of = attrgetter("_grad")     # (``Tensor.grad``'s slot: the guard reads it per call)

MAX_RECORDED_CALLS = 6     # recorded calls that never agree twice: give up capturing
MAX_ENTRIES = 8            # guard keys kept per function (as torch.compile's cache size)


class CaptureError(RuntimeError):
    """``nv.compile(fn, fullgraph=True)``: ``fn`` cannot be replayed (the message says
    why and where)."""


# ---------------------------------------------------------------- places


@dataclass(frozen=True, slots=True)
class Place:
    """Where a value lives between calls: ``kind`` "tensor" (``owner`` is a tensor
    rebound in place), "item" (``owner[key]``, a dict or list), "attr"
    (``getattr(owner, key)``, a tensor's ``grad`` slot) or "cell" (a closure cell's
    contents)."""

    kind: str
    owner: Any
    key: Any = None

    def same(self, other: Place) -> bool:
        return (self.kind == other.kind and self.owner is other.owner
                and self.key == other.key)

    def read(self) -> Tensor | None:
        return _read(self.kind, self.owner, self.key)

    def describe(self) -> str:
        if self.kind == "tensor":
            return f"tensor {tuple(self.owner.shape)}"
        if self.kind == "attr":
            return f"{type(self.owner).__name__}.{self.key}"
        if self.kind == "cell":
            return "a closure cell"
        return f"{type(self.owner).__name__}[{self.key!r}]"


def _read(kind: str, owner: Any, key: Any) -> Any:
    """What a place (``Place``'s fields) holds now, or None."""
    if kind == "tensor":
        return owner
    if kind == "attr":
        return getattr(owner, key, None)
    if kind == "cell":
        try:
            return owner.cell_contents
        except ValueError:        # emptied (``del`` in the enclosing function)
            return None
    if isinstance(owner, dict):   # (dict.get: a defaultdict makes no entry)
        return dict.get(owner, key)
    try:
        return owner[key]
    except IndexError:
        return None


@contextlib.contextmanager
def _thawed() -> Iterator[None]:
    """The collector's frozen objects made visible for a while: the step cache freezes
    what survives a compile (``settle_garbage_collector``), and ``gc.get_objects`` and
    ``gc.get_referrers`` skip frozen objects."""
    gc.unfreeze()
    try:
        yield
    finally:
        if config.GC_FREEZE.get():
            freeze()


def _subclasses(cls: type) -> list[type]:
    out, stack = [], [cls]
    while stack:
        c = stack.pop()
        out.append(c)
        stack += c.__subclasses__()
    return out


def _instances(cls: type, collect: bool = False, frozen_at: int | None = None
               ) -> list[Any]:
    """Every live instance of ``cls`` or a subclass (frozen ones included), found as
    the objects referring to their class: an instance of a Python class visits its
    type, so one ``gc.get_referrers`` pass in C finds them (a Python loop over
    ``gc.get_objects()`` took ~10x longer in a heap of millions of objects).
    ``collect``: a full collection first, so cycles that died with the call (a
    gradient's graph) hold no result. When nothing was frozen since ``frozen_at`` (a
    ``cache.freezes()`` reading from before the call, which deferred its compiles'
    settling), the call's cycles are all unfrozen and collecting the unfrozen heap
    finds them; otherwise the whole heap is thawed and collected (~90 ms in a small
    GPT's process, against ~25)."""
    return _instances_of((cls,), collect, frozen_at)[0]


def _instances_of(bases: tuple[type, ...], collect: bool = False,
                  frozen_at: int | None = None) -> list[list[Any]]:
    """``_instances`` of each of ``bases``, from one scan of the heap (a scan costs as
    much as the process has objects: tens of milliseconds in a test suite's)."""
    kinds = [set(_subclasses(cls)) for cls in bases]
    frozen_since = frozen_at is None or freezes() != frozen_at
    if collect and not frozen_since:
        gc.collect()
    with _thawed():
        if collect and frozen_since:
            gc.collect()
        found = gc.get_referrers(*set().union(*kinds))
    return [[o for o in found if type(o) in k] for k in kinds]


def _slots_holding(targets: dict[int, Any], ignore: set[int], guarding: bool = False
                   ) -> tuple[dict[int, list[Place]], dict[int, list[str]]]:
    """For each target (by id): the container slots that hold it -- dict values
    (an object's ``__dict__`` is one), list items, a tensor's ``grad`` -- and what else
    holds it that a replay could not update (a tuple, a closure cell), by type name.
    ``ignore``: ids of the caller's own containers. Whether a container outlives the
    call is not asked here: a replay needs two consecutive calls to put their results
    in the same containers (``_Capture.agrees_with``), which one made per call fails.
    The targets are tensors, unless ``guarding``: then the slots are for guards only
    (never written by a replay), targets may be any objects (modules, optimizers),
    and the slots of dict and list subclasses (a module's ``_parameters`` and
    ``_modules``), closure cells and the attributes of the user's objects count too."""
    found: dict[int, list[Place]] = {k: [] for k in targets}
    elsewhere: dict[int, list[str]] = {k: [] for k in targets}
    if not targets:
        return found, elsewhere
    objects = list(targets.values())
    with _thawed():
        referrers = gc.get_referrers(*objects)
    for ref in referrers:
        if id(ref) in ignore or ref is objects:
            continue
        if isinstance(ref, tuple) and len(ref) == len(objects) and all(
                a is b for a, b in zip(ref, objects)):
            continue                       # the argument tuple of this very call
        if type(ref) is dict or (guarding and isinstance(ref, dict)):
            for key, value in ref.items():
                if id(value) in targets and value is targets[id(value)]:
                    found[id(value)].append(Place("item", ref, key))
        elif guarding and type(ref) is CellType:
            found[id(ref.cell_contents)].append(Place("cell", ref))
        elif guarding and type(ref) is ComplexTensor:      # a part (or the pair viewed)
            for key in _COMPLEX_SLOTS:
                value = getattr(ref, key)
                if id(value) in targets and value is targets[id(value)]:
                    found[id(value)].append(Place("attr", ref, key))
        elif type(ref) is list or (guarding and isinstance(ref, list)):
            for i, value in enumerate(ref):
                if id(value) in targets and value is targets[id(value)]:
                    found[id(value)].append(Place("item", ref, i))
        elif issubclass(type(ref), Tensor) and ref.grad is not None and \
                id(ref.grad) in targets and ref.grad is targets[id(ref.grad)]:
            found[id(ref.grad)].append(Place("attr", ref, "grad"))
        else:
            attrs = _instance_dict(ref) if guarding else None
            for o in gc.get_referents(ref):
                if id(o) in targets and o is targets[id(o)]:
                    elsewhere[id(o)].append(type(ref).__name__)
            for key, value in (attrs or {}).items():    # the user's object's attributes
                if id(value) in targets and value is targets[id(value)]:
                    found[id(value)].append(Place("item", attrs, key))
    return found, elsewhere


_COMPLEX_SLOTS = ("_re", "_im", "_real_view")    # a ``ComplexTensor``'s tensors


def _guard_slots(targets: dict[int, Any], ignore: set[int]) -> list[tuple[Place, Any]]:
    """(slot, object) for every slot holding one of ``targets`` (``_slots_holding``,
    guarding). A tensor held as a complex tensor's part (a complex buffer's) is pinned
    there, and that complex tensor where it is held in turn (a module's ``_buffers``),
    so replacing the complex buffer records the call again."""
    guards: list[tuple[Place, Any]] = []
    seen: set[int] = set()
    while targets:
        seen.update(targets)
        slots = _slots_holding(targets, ignore, guarding=True)[0]
        pairs: dict[int, Any] = {}
        for k, places in slots.items():
            guards += [(p, targets[k]) for p in places]
            pairs.update((id(p.owner), p.owner) for p in places
                         if p.kind == "attr" and type(p.owner) is ComplexTensor)
        targets = {k: z for k, z in pairs.items() if k not in seen}
    return guards


def _hidden_bases(post: list[Tensor], pre_ids: set[int], returned: list[Tensor]
                  ) -> set[int]:
    """Ids of the tensors the call made that are bases of views it made (``(t * 2)[:1]``
    returned: the product is held by the slice's ``_View`` alone), and of no view from
    before the call, not returned. A replay puts a plain tensor in a new view's place,
    so such a base is unreachable after it and needs no place of its own; a base that a
    view from before the call reads (``p.data = new[:2]``) is not one of them."""
    new_bases, old_bases = set(), set()
    for u in post:
        if u._view is not None:
            (old_bases if id(u) in pre_ids else new_bases).add(id(u._view.base))
    return new_bases - old_bases - pre_ids - {id(t) for t in returned}


def _instance_dict(obj: Any) -> dict | None:
    """``obj.__dict__`` where it has one, for an object of the user's (Nova's own hold
    what they hold for their own bookkeeping; not a class's, not a bound method's
    function's), else None."""
    if isinstance(obj, type) or type(obj).__module__.partition(".")[0] == "nova":
        return None
    try:
        d = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return None
    return d if type(d) is dict else None


# ---------------------------------------------------------------- names a function reads


_SCALARS = (bool, int, float, complex, str, bytes)   # guarded by value, not identity
_MISSING = object()


@functools.lru_cache(maxsize=256)
def _global_loads(code: Any) -> tuple[str, ...]:
    """The global names ``code`` reads (its nested functions', lambdas' and
    comprehensions' too), once each: its ``LOAD_GLOBAL``s, not its attribute names
    (``opt.step()`` reads no global ``step``)."""
    names: dict[str, None] = {}
    stack = [code]
    while stack:
        c = stack.pop()
        for ins in dis.get_instructions(c):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                names[ins.argval] = None
        stack += [k for k in c.co_consts if isinstance(k, type(code))]
    return tuple(names)


def _names_read(fn: Callable) -> list[tuple[str, Any, str, Any]]:
    """What ``fn``'s Python finds now under the global names its code reads and in its
    closure cells: (kind "global" or "cell", the globals dict or the cell, the name,
    the value). Plain functions found there (helpers outside Nova) are followed, so
    the names they read count too. The objects reached from these -- an attribute
    of a global object, an item of a global list -- are not: Nova's own objects among
    them are guarded where they are held (``_Recorder._analyse``)."""
    out: list[tuple[str, Any, str, Any]] = []
    seen: set[int] = set()
    f = getattr(fn, "__func__", fn)                   # a bound method's function
    while isinstance(f, functools.partial):
        f = getattr(f.func, "__func__", f.func)
    if not isinstance(f, FunctionType):                # a callable object
        f = getattr(type(f), "__call__", None)
    stack = [f] if isinstance(f, FunctionType) else []
    while stack:
        f = stack.pop()
        if id(f) in seen or (f.__module__ or "").partition(".")[0] == "nova":
            continue
        seen.add(id(f))
        g = f.__globals__
        found = [("global", g, name, g.get(name, _MISSING))
                 for name in _global_loads(f.__code__)]
        for name, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
            try:
                found.append(("cell", cell, name, cell.cell_contents))
            except ValueError:          # not assigned yet: the call raises NameError
                continue
        for entry in found:
            if entry[3] is _MISSING:
                continue                # a builtin
            out.append(entry)
            if isinstance(entry[3], FunctionType):
                stack.append(entry[3])
    return list({(id(o), name): (k, o, name, v) for k, o, name, v in out}.values())


def _settings(modules: list[Any]) -> list[tuple[Any, str, Any]]:
    """Each module's Python settings: its attributes holding a number, a string, None
    or a tuple of them (``training``, ``Dropout.p``, ``LayerNorm.eps``), which its
    ``forward`` reads as constants of the steps it records."""
    return [(m, k, v) for m in modules for k, v in vars(m).items() if _is_setting(v)]


# functions a module holds as settings (``self.act = F.relu``), guarded by identity
_FUNCTIONS = (FunctionType, BuiltinFunctionType, MethodType, functools.partial, type)


def _is_setting(value: Any) -> bool:
    return value is None or type(value) in _SCALARS or isinstance(value, _FUNCTIONS) or (
        type(value) is tuple and all(v is None or type(v) in _SCALARS for v in value))


def _pin_failed(place: Place, obj: Any) -> None:
    """Raise ``_Rerecord``: ``place`` no longer holds ``obj``."""
    if isinstance(obj, Tensor):
        raise _Rerecord(f"{place.describe()} holds another tensor object than when "
                        "captured")
    raise _Rerecord(f"{place.describe()} holds another object than the "
                    f"{type(obj).__name__} it held when captured")


def _place_failed(t: Any, place: Place, shape: tuple, dtype_name: str, device: str,
                  grad: bool) -> None:
    """Raise ``_Rerecord``: ``place`` holds ``t``, not a realized tensor of the captured
    shape, dtype name, device and ``requires_grad``."""
    where = place.describe()
    if not isinstance(t, Tensor):
        raise _Rerecord(f"{where} holds no tensor")
    n = t.node
    if n.buffer is None:
        raise _Rerecord(f"{where} holds a pending value (changed outside the function "
                        "since the last call)")
    if n.shape != shape or n.dtype.name != dtype_name or n.device != device:
        raise _Rerecord(f"{where} is now {n.shape} {n.dtype.name} on {n.device}, was "
                        f"{shape} {dtype_name} on {device}")
    raise _Rerecord(f"{where}: requires_grad changed {grad} -> {t._requires_grad}")


def _name_changed(kind: str, owner: Any, name: str, then: Any) -> str | None:
    """How the global or closure variable ``name`` (``_names_read``) changed since it
    held ``then``, or None: another object, or for a number or string another value."""
    if kind == "global":
        now = owner.get(name, _MISSING)
    else:
        try:
            now = owner.cell_contents
        except ValueError:
            now = _MISSING
    if now is then or (type(then) in _SCALARS and type(now) is type(then)
                       and now == then and repr(now) == repr(then)):
        return None
    what = "global" if kind == "global" else "closure variable"
    if now is _MISSING:
        return f"{what} {name} was deleted"
    if type(then) in _SCALARS and type(now) in _SCALARS:
        return f"{what} {name} changed {then!r} -> {now!r}"
    return f"{what} {name} changed (another {type(now).__name__} object)"


# ---------------------------------------------------------------- the captured call


@dataclass
class _Source:
    """Where step argument comes from in a replay: kind "input" (index into the
    call's tensor inputs), "fresh" (index into the fresh host values), "step" ((step,
    output) of this call), "place" (a Place)."""

    kind: str
    where: Any
    # a place's: the node's (shape, dtype name, device) at capture, and the
    # ``requires_grad`` of the tensor the call read there
    sig: tuple = ()


@dataclass
class _Result:
    """Where output j of step s goes: the places that held it after the call."""

    step: int
    output: int
    places: list[Place]


@dataclass
class _Capture:
    """One recorded call, analysed (``_analyse``)."""

    sources: list[list[_Source]] | None      # None: not resolvable (see unusable)
    results: list[_Result]
    events: list[tuple]                      # (kind, owner, detail/name) in order
    returned: Any                            # the return template (``_flatten``)
    exes: list[Any]                          # per step: its executable, roles, and
    roles: list[list[str]]                   # each output's (shape, dtype)
    out_meta: list[list[tuple]]
    versions: dict[int, tuple[Tensor, int]]  # id -> (tensor place, _version delta)
    guards: list[tuple[Place, Any]]          # slots that must still hold an object
    # (module, attribute, value) as the call began: every module's Python settings
    # (``_settings``: ``training``, ``Dropout.p``, ``eps``, ...)
    settings: list[tuple[Any, str, Any]]
    # (tensor, whether its ``grad`` was None when the call began), for the gradient
    # slots the call wrote and the parameters of the optimizers it stepped
    empty_grads: list[tuple[Tensor, bool]] = field(default_factory=list)
    # the global names and closure cells the function reads, as the call found them
    # (``_names_read``)
    names: list[tuple[str, Any, str, Any]] = field(default_factory=list)
    why: str | None = None        # why no call of this kind can be replayed
    unusable: str | None = None   # why this call cannot serve (the next may)
    # Per tensor of the return value: ("out", step, output), ("input", i), or
    # ("same", tensor) for a tensor that existed before the call.
    returns: list[tuple] = field(default_factory=list)
    # Each result's node, weakly (a strong reference would keep the next call from
    # donating it), with its places: where the next call's arguments come from.
    outputs: list[tuple[weakref.ref, list[Place]]] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)         # per step
    host_args: list[tuple[int, ...]] = field(default_factory=list)   # per step
    # per input, the id of the tensor whose storage it shows (``_storage``)
    input_storages: tuple[int, ...] = ()
    # (position, tensor) of the inputs the call also reached by itself -- the owner of
    # a place it wrote or read (an input's ``.grad`` that ``backward`` filled, a global
    # it updates): a replay writes there, so it is valid only for that very object
    pinned_inputs: tuple[tuple[int, Tensor], ...] = ()

    def agrees_with(self, other: _Capture) -> str | None:
        """Why this call and ``other`` (the one before) did not do the same thing."""
        # the same cached executable is the same step structure (the cache's key)
        if len(self.exes) != len(other.exes) or any(
                a is not b for a, b in zip(self.exes, other.exes)):
            return "the steps differ from the previous call's"
        if [(k, o) for k, o, _ in self.events] != [(k, o) for k, o, _ in other.events]:
            return "the host values and state changes differ from the previous call's"
        if len(self.results) != len(other.results):
            return "the results went to different places"
        for a, b in zip(self.results, other.results):
            if len(a.places) != len(b.places):
                return "the results went to different places"
            for p, q in zip(a.places, b.places):
                if not p.same(q):
                    why = f"a result went to {p.describe()}, the previous call's to " \
                          f"{q.describe()}"
                    if p.kind == q.kind and p.key == q.key and p.owner is not q.owner:
                        why += (" of another object (a tensor whose .grad or value "
                                "the call writes, an argument or a global, must be the "
                                "same object each call to replay)")
                    return why
        if [r[0] for r in self.returns] != [r[0] for r in other.returns] or any(
                a[0] == "same" and a[1] is not b[1] for a, b in zip(self.returns, other.returns)):
            return "it returned different things"
        return None


def _flatten(value: Any, out: list, containers: list[int]) -> Any:
    """The return value's template: tensors replaced by their index in ``out``, a
    complex tensor by its two parts' (a replay rebuilds it from them); the ids of its
    tuples, lists, dicts and complex tensors go to ``containers``."""
    if isinstance(value, Tensor):
        out.append(value)
        return ("tensor", len(out) - 1)
    if isinstance(value, ComplexTensor):
        containers.append(id(value))
        out += (value.real, value.imag)
        return ("complex", len(out) - 2)
    if isinstance(value, (tuple, list)):
        containers.append(id(value))
        return (type(value), [_flatten(v, out, containers) for v in value])
    if isinstance(value, dict):
        containers.append(id(value))
        return (dict, [(k, _flatten(v, out, containers)) for k, v in value.items()])
    if value is None or isinstance(value, (bool, int, float, str)):
        return ("const", value)
    raise TypeError(type(value).__name__)


def _build(template: Any, tensors: list[Tensor]) -> Any:
    kind, body = template
    if kind == "tensor":
        return tensors[body]
    if kind == "complex":   # (plain parts: a replay's results are no views)
        return ComplexTensor(tensors[body], tensors[body + 1])
    if kind == "const":
        return body
    if kind is dict:
        return {k: _build(v, tensors) for k, v in body}
    return kind(_build(v, tensors) for v in body)


@dataclass(slots=True)
class _Before:
    """What the recorder saw as the call began: the live tensors and, per tensor (by
    id), its ``_version`` and ``requires_grad``, whether it had a ``.grad``
    (``had_grad``) and whether it was one (``grad_of``: the gradient's id -> its
    tensor, None when two shared it); which tensors held each realized node (by the
    node's id); the live modules and their settings (``_settings``)."""

    tensors: list[Tensor]
    versions: dict[int, int] = field(default_factory=dict)
    flags: dict[int, bool] = field(default_factory=dict)
    had_grad: set[int] = field(default_factory=set)
    grad_of: dict[int, Tensor | None] = field(default_factory=dict)
    held: dict[int, list[Tensor]] = field(default_factory=dict)
    modules: list[Any] = field(default_factory=list)
    settings: list[tuple[Any, str, Any]] = field(default_factory=list)

    @classmethod
    def take(cls) -> _Before:
        from nova.nn.module import Module
        tensors, modules = _instances_of((Tensor, Module))
        before = cls(tensors)
        before.modules = modules
        before.settings = _settings(before.modules)
        for t in before.tensors:
            before.versions[id(t)] = t._version
            before.flags[id(t)] = t._requires_grad
            g = t.grad
            if g is not None:
                before.had_grad.add(id(t))
                before.grad_of[id(g)] = None if id(g) in before.grad_of else t
            if t._view is None and t._node.realized:
                before.held.setdefault(id(t._node), []).append(t)
        return before


class _Recorder:
    """Record one call with the capture hooks active, and analyse it."""

    def __init__(self, previous: _Capture | None):
        self.previous = previous

    def run(self, fn: Callable, args: tuple, kwargs: dict,
            inputs: list[Tensor]) -> tuple[Any, _Capture]:
        names = _names_read(fn)
        before = _Before.take()
        input_nodes = {id(t.node): i for i, t in enumerate(inputs)}
        log = CaptureLog()
        frozen_at = freezes()
        # The call's compiles settle the collector after the scan for its results, not
        # under it (``settling_deferred``), so that scan collects only the unfrozen heap;
        # and settle even when the call raises.
        deferred: list[bool] = []
        try:
            with settling_deferred() as deferred:
                token = ACTIVE.set(log)
                recording = compiling.RECORDING.set(log.refuse)   # is_compiling()
                try:
                    out = fn(*args, **kwargs)
                    realize()              # what the call left pending is part of it
                finally:
                    compiling.RECORDING.reset(recording)
                    ACTIVE.reset(token)
            capture = self._analyse(log, out, inputs, input_nodes, before, frozen_at)
            capture.names = names
        finally:
            if deferred:
                settle_garbage_collector()
        return out, capture

    def _analyse(self, log: CaptureLog, out: Any, inputs: list[Tensor],
                 input_nodes: dict[int, int], before: _Before,
                 frozen_at: int | None = None) -> _Capture:
        pre_tensors, versions, held_before = before.tensors, before.versions, before.held
        flags, grad_of = before.flags, before.grad_of
        returned: list[Tensor] = []
        containers: list[int] = []          # ids of the return value's own containers
        try:
            template = _flatten(out, returned, containers)
        except TypeError as e:
            template, log.refused = None, log.refused or (
                f"it returns a {e} (a compiled function returns tensors, complex "
                "tensors, Python constants, None, and tuples, lists or dicts of them)")
        steps = log.steps
        events = [(e[1], e[2], e[4] if e[0] == "fresh" else e[3]) for e in log.events]
        capture = _Capture(None, [], events, template,
                           [s.exe for s in steps], [s.roles for s in steps],
                           [[(n.shape, n.dtype) for n in s.out_nodes] for s in steps],
                           {}, [], before.settings)
        if log.refused:
            capture.why = log.refused
            return capture
        capture.devices = [s.device for s in steps]
        # A GPU step's device-less arguments (random keys, optimizer scalars) are host
        # arrays, uploaded for each run as realization uploads them.
        capture.host_args = [tuple(a for a, n in enumerate(s.arg_nodes) if n.device is None)
                             if s.device != "cpu" else () for s in steps]
        # Results: which tensors hold each output node now, and where those are.
        out_index = {id(n): (s, j) for s, st in enumerate(steps)
                     for j, n in enumerate(st.out_nodes)}
        post = _instances(Tensor, collect=True, frozen_at=frozen_at)
        pre_ids = {id(t) for t in pre_tensors}
        holders: dict[tuple[int, int], list[Tensor]] = {}
        for t in post:
            # A tensor from before the call that is a view re-derives itself from its
            # base (a place of its own); a new view (a gradient reshaped from a sum, say)
            # is a result like any other, and a replay puts a plain tensor in its place.
            if id(t._node) in out_index and (t._view is None or id(t) not in pre_ids):
                holders.setdefault(out_index[id(t._node)], []).append(t)
        new = {id(t): t for ts in holders.values() for t in ts if id(t) not in pre_ids}
        ignore = {id(returned), id(post), id(pre_tensors), id(log.steps), id(log.events),
                  id(holders), id(new), *map(id, holders.values()), *containers}
        slots, elsewhere = _slots_holding(new, ignore)
        hidden = _hidden_bases(post, pre_ids, returned)
        results = []
        for (s, j), ts in sorted(holders.items()):
            places = []
            for t in ts:
                if id(t) in pre_ids:
                    places.append(Place("tensor", t))
                    capture.versions[id(t)] = (t, t._version - versions[id(t)])
                    continue
                if id(t) in hidden and not slots[id(t)] and \
                        set(elsewhere[id(t)]) == {"_View"}:
                    continue     # reachable only through new views, which replay plain
                if elsewhere[id(t)]:
                    capture.unusable = (
                        f"a result ({tuple(t.shape)}, {t.dtype.name}) is kept where a replay "
                        f"cannot put it (in a {', '.join(sorted(set(elsewhere[id(t)])))} "
                        "the call itself created, or that cannot be assigned)")
                    return capture
                if slots[id(t)] and (type(t) is not Tensor or t._requires_grad):
                    capture.unusable = f"a result is kept as a new {type(t).__name__} object"
                    return capture
                places += slots[id(t)]
            results.append(_Result(s, j, places))
        input_ids = {id(t): i for i, t in enumerate(inputs)}
        capture.input_storages = tuple([id(_storage(t)) for t in inputs])
        for t in returned:
            fn = t._grad_fn
            if fn is not None and not fn.released:
                # a graph the caller may still differentiate: a replay runs no Python,
                # so it could give back only the values, silently cut from autograd
                capture.why = (
                    f"it returns a tensor ({tuple(t.shape)}, {t.dtype.name}) with autograd "
                    "history a later backward could use, which a replay cannot rebuild "
                    "(run the backward inside the function, or call it under no_grad)")
                return capture
            if t._view is not None and id(t) not in pre_ids and \
                    id(_storage(t)) in pre_ids:
                # a new view of a tensor from before the call (``w.detach()[0]``): the
                # caller's view follows later writes to that tensor, a replay's result
                # would be a copy of the value at the time
                capture.why = (
                    f"it returns a view ({tuple(t.shape)}, {t.dtype.name}) of a tensor from "
                    "before the call, which a replay cannot rebuild (return a .clone() "
                    "to let it replay)")
                return capture
            if id(t) in input_ids:
                capture.returns.append(("input", input_ids[id(t)]))
            elif id(t) in pre_ids:
                capture.returns.append(("same", t))
            elif id(t._node) in out_index:
                capture.returns.append(("out", *out_index[id(t._node)]))
            else:
                capture.unusable = ("it returns a tensor no step of the call computed (made "
                               "from host data inside the function)")
                return capture
        capture.results = results
        capture.outputs = [(weakref.ref(steps[r.step].out_nodes[r.output]), r.places)
                           for r in results]
        # Containers that held the parameters: a replay checks they still do.
        pre_by_id = {id(t): t for t in pre_tensors}
        tensor_places = {id(p.owner): p.owner for r in results for p in r.places
                         if p.kind == "tensor"}
        # Sources of every step argument.
        fresh = [e[3] for e in log.events if e[0] == "fresh"]
        fresh_index = {id(n): i for i, n in enumerate(fresh)}
        prev_places: dict[int, list[Place]] = {}
        if self.previous is not None:
            for ref, places in self.previous.outputs:
                node = ref()
                if node is not None:
                    prev_places[id(node)] = places
        sources: list[list[_Source]] = []
        post_ids = {id(t) for t in post}
        read_from: dict[int, Tensor] = {}
        held: list[Tensor] = []
        for s, st in enumerate(steps):
            srcs = []
            for node in st.arg_nodes:
                sig = (node.shape, node.dtype.name, node.device)
                if id(node) in input_nodes:
                    srcs.append(_Source("input", input_nodes[id(node)], sig))
                    continue
                if id(node) in fresh_index:
                    srcs.append(_Source("fresh", fresh_index[id(node)], sig))
                    continue
                if id(node) in out_index and out_index[id(node)][0] < s:
                    srcs.append(_Source("step", out_index[id(node)], sig))
                    continue
                # the tensors from before the call that held the value as it began
                held = [t for t in held_before.get(id(node), ()) if id(t) in post_ids]
                if id(node) in prev_places and prev_places[id(node)]:
                    place = prev_places[id(node)][0]
                    read = place.owner if place.kind == "tensor" else next(iter(held), None)
                    grad = read is not None and flags.get(id(read), read._requires_grad)
                    srcs.append(_Source("place", place, (*sig, grad)))
                elif not held:
                    capture.unusable = (
                        f"step argument {node.shape} {node.dtype.name} is a value the "
                        "call made on the host (from numpy or a realized tensor's "
                        "data): pass it as an argument")
                    return capture
                else:
                    # A gradient from before the call (another function's backward
                    # left it) is read from its ``.grad`` slot, which the next call
                    # finds holding the next gradient; anything else from the tensor
                    # itself, whose containers are guarded below.
                    holder = next((t for t in held if grad_of.get(id(t)) is not None),
                                  held[0])
                    owner = grad_of.get(id(holder))
                    place = Place("attr", owner, "grad") if owner is not None else \
                        Place("tensor", holder)
                    srcs.append(_Source("place", place, (*sig, flags[id(holder)])))
                    if owner is None:
                        read_from[id(holder)] = holder
            sources.append(srcs)
        capture.sources = sources
        # Guard where every tensor read or rebound is held (a parameter replaced by
        # another object between calls would otherwise be missed), and where every
        # module and the call's optimizers, schedulers and generators are held (a layer
        # replaced, ``trainer.opt = SGD(...)``): each slot must hold the same object.
        watched = {**tensor_places, **read_from}
        watched = {k: t for k, t in watched.items() if k in pre_by_id}
        targets = {**watched, **{id(m): m for m in before.modules},
                   **{id(e[1]): e[1] for e in capture.events}}
        mine = {id(held_before), id(pre_by_id), id(tensor_places), id(read_from),
                id(watched), id(targets), id(held), id(grad_of), id(before.modules),
                *map(id, held_before.values())}
        capture.guards += _guard_slots(targets, ignore | mine)
        # Whether each gradient slot the call wrote, or an optimizer it stepped could
        # read, was empty when the call began: ``backward`` accumulates into a gradient
        # that is there and ``step`` updates only parameters that have one.
        grad_slots = {id(p.owner): p.owner for r in results for p in r.places
                      if p.kind == "attr" and p.key == "grad"}
        for kind, owner, _ in capture.events:
            if kind == "opt_step":
                grad_slots.update((id(p), p) for g in owner.param_groups
                                  for p in g["params"])
        capture.empty_grads = [(t, k not in before.had_grad) for k, t in grad_slots.items()
                               if k in pre_by_id]
        owners = {id(p.owner) for r in results for p in r.places}
        owners.update(id(p.owner) for p, _ in capture.guards)
        owners.update(id(src.where.owner) for srcs in sources for src in srcs
                      if src.kind == "place")
        capture.pinned_inputs = tuple((i, t) for i, t in enumerate(inputs)
                                      if id(t) in owners or id(_storage(t)) in owners)
        return capture


# ---------------------------------------------------------------- replay


class _Replay:
    """A capture that agreed with the call before it: replays the call.

    A replay's Python is the whole per-call cost of ``nv.compile`` (its kernels run in
    one native call), so what every call walks -- guards, argument sources, donation
    counts, result places -- is flattened into tuples once, here, and each replay runs
    one tight loop over each (``bench_ops``' per-step overhead)."""

    def __init__(self, capture: _Capture, fn_name: str):
        self.c = capture
        self.name = fn_name
        self.exes, self.roles, self.out_meta = capture.exes, capture.roles, capture.out_meta
        c = capture
        # The guards, each kind flattened so that a replay checks it in one pass in C
        # (``map``): a replay's guard check is most of its Python.
        self._globals = [(g, name, v) for kind, g, name, v in c.names if kind == "global"]
        self._cells = [(cell, name, v) for kind, cell, name, v in c.names if kind == "cell"]
        self._settings = (tuple(m.__dict__ for m, _, _ in c.settings),
                          tuple(k for _, k, _ in c.settings),
                          tuple(v for _, _, v in c.settings))
        items = [(p, t) for p, t in c.guards if p.kind == "item"]
        in_dicts = [(p, t) for p, t in items if isinstance(p.owner, dict)]
        in_lists = [(p, t) for p, t in items if not isinstance(p.owner, dict)]
        self._pins = [(tuple(p.owner for p, _ in pins), tuple(p.key for p, _ in pins),
                       tuple(t for _, t in pins), tuple(p for p, _ in pins))
                      for pins in (in_dicts, in_lists)]
        self._other_pins = [(p.kind, p.owner, p.key, t, p) for p, t in c.guards
                            if p.kind != "item"]
        self._grads_set = tuple(t for t, empty in c.empty_grads if not empty)
        self._grads_none = tuple(t for t, empty in c.empty_grads if empty)
        # A place read as (kind, owner, key); one a guard pins (a container that must
        # still hold the captured tensor object) is read as that tensor, since the
        # guards are checked first.
        pinned = {(p.kind, id(p.owner), p.key): t for p, t in c.guards}

        def read_as(place: Place) -> tuple[str, Any, Any]:
            t = pinned.get((place.kind, id(place.owner), place.key))
            return ("tensor", t, None) if isinstance(t, Tensor) else \
                (place.kind, place.owner, place.key)
        # Each place a step argument is read from, once, with the signature it must
        # have: the tensors themselves (``_tensors``: a tensor rebound in place, or one
        # a guard pins), then the slots read as above (``_slots``). The guards read them
        # all as the call begins (``_checked``), before its events run: a
        # ``zero_grad()`` in the call empties a ``.grad`` slot that it read as it began.
        places: dict[tuple, tuple] = {}
        for srcs in c.sources:
            for src in srcs:
                if src.kind == "place":
                    read = read_as(src.where)
                    places.setdefault((read[0], id(read[1]), read[2]),
                                      (*read, *src.sig, src.where))
        self._tensors = [(owner, *rest) for kind, owner, _, *rest in places.values()
                         if kind == "tensor"]
        self._slots = [p for p in places.values() if p[0] != "tensor"]
        at = {k: i for i, k in enumerate([k for k in places if k[0] == "tensor"]
                                         + [k for k in places if k[0] != "tensor"])}
        # Per step, per argument: (kind, where); a place's ``where`` is its index in
        # the tensors ``_checked`` returns (``_tensors``', then ``_slots``').
        self._plans = []
        for srcs in c.sources:
            plan = []
            for src in srcs:
                if src.kind != "place":
                    plan.append((src.kind, src.where))
                    continue
                read = read_as(src.where)
                plan.append(("place", at[(read[0], id(read[1]), read[2])]))
            self._plans.append(plan)
        # The tensors a replay rebinds (one entry per place: a tensor twice, counts twice).
        self._rebinding = tuple(p.owner for r in c.results for p in r.places
                                if p.kind == "tensor")
        # The storages of the tensors the call reads or rebinds by place (a global, a
        # parameter, an argument it writes in place), and per argument whether it
        # showed one of them: a replay's arguments must show them alike
        # (``check_inputs``).
        self._own = frozenset(id(_storage(t)) for t in
                              [t for t, *_ in self._tensors] + list(self._rebinding))
        self._input_own = tuple([s in self._own for s in c.input_storages])
        # Per result: where it comes from, its type, the tensors rebound to it (with
        # their ``_version`` deltas) and its container places.
        self._binds = []
        for r in c.results:
            shape, dtype = c.out_meta[r.step][r.output]
            rebound = [(p.owner, c.versions[id(p.owner)][1]) for p in r.places
                       if p.kind == "tensor"]
            slots = [(p.kind, p.owner, p.key) for p in r.places if p.kind != "tensor"]
            self._binds.append((r.step, r.output, shape, dtype, rebound, slots))

    def _checked(self) -> list[Tensor]:
        """The tensors the step arguments are read from (``_tensors``, then what
        ``_slots`` hold) as the call begins; raises ``_Rerecord`` saying which guard
        failed."""
        for g, name, then in self._globals:
            if g.get(name, _MISSING) is not then:
                why = _name_changed("global", g, name, then)
                if why is not None:
                    raise _Rerecord(why)
        for cell, name, then in self._cells:
            why = _name_changed("cell", cell, name, then)    # (a cell may be emptied)
            if why is not None:
                raise _Rerecord(why)
        dicts, keys, values = self._settings
        if not all(map(operator.is_, map(dict.get, dicts, keys), values)):
            for module, name, then in self.c.settings:       # (equal new values pass)
                now = module.__dict__.get(name, _MISSING)
                if now is then or (type(now) is type(then) and now == then
                                   and repr(now) == repr(then)):
                    continue
                if name == "training":
                    raise _Rerecord(f"{type(module).__name__}.training changed to {now} "
                                    "(train()/eval())")
                raise _Rerecord(f"{type(module).__name__}.{name} changed {then!r} -> "
                                f"{'(deleted)' if now is _MISSING else repr(now)}")
        for (owners, keys, objs, places), get in zip(self._pins,
                                                     (dict.get, operator.getitem)):
            try:
                same = all(map(operator.is_, map(get, owners, keys), objs))
            except IndexError:                  # a pinned list got shorter
                same = False
            if not same:
                i = next(i for i, (o, k, t) in enumerate(zip(owners, keys, objs))
                         if _read("item", o, k) is not t)
                _pin_failed(places[i], objs[i])
        for kind, owner, key, obj, place in self._other_pins:
            if _read(kind, owner, key) is not obj:
                _pin_failed(place, obj)
        if any(map(operator.is_, map(_grad_of, self._grads_set), repeat(None))) or \
                any(map(operator.is_not, map(_grad_of, self._grads_none), repeat(None))):
            empty = set(map(id, self._grads_none))
            t = next(t for t in self._grads_set + self._grads_none
                     if (t.grad is None) != (id(t) in empty))
            raise _Rerecord(f"the .grad of a tensor {tuple(t.shape)} is "
                            f"{'None' if t.grad is None else 'set'}, was "
                            f"{'set' if t.grad is None else 'None'} when captured")
        held: list[Tensor] = []
        append = held.append
        for t, shape, dtype_name, device, grad, place in self._tensors:
            n = t.node
            if n.buffer is None or n.shape != shape or n.dtype.name != dtype_name or \
                    n.device != device or t._requires_grad != grad:
                _place_failed(t, place, shape, dtype_name, device, grad)
            append(t)
        for kind, owner, key, shape, dtype_name, device, grad, place in self._slots:
            t = _read(kind, owner, key)
            n = t.node if isinstance(t, Tensor) else None
            if n is None or n.buffer is None or n.shape != shape or \
                    n.dtype.name != dtype_name or n.device != device or \
                    t._requires_grad != grad:
                _place_failed(t, place, shape, dtype_name, device, grad)
            append(t)
        return held

    def check_inputs(self, inputs: list[Tensor]) -> None:
        """Raise ``_Rerecord`` unless each argument shows the storage of a tensor the
        call reads or rebinds by place exactly when the recorded call's did: an
        argument that is also a global the function writes (``h(G)`` after ``h(x)``),
        or no longer is, was recorded as one value or as two, and a replay would
        give one of them a stale value."""
        own = self._own
        if own and tuple([id(_storage(t)) in own for t in inputs]) != self._input_own:
            raise _Rerecord("an argument is (a view of) a tensor the function also reads "
                            "or writes by itself where the recorded call's was not, or "
                            "the other way round")
        for i, t in self.c.pinned_inputs:
            if inputs[i] is not t:
                raise _Rerecord(f"input {i} is another tensor than the one whose .grad "
                                "or value the recorded call wrote (a replay would write "
                                "into the old one)")

    def run(self, inputs: list[Tensor]) -> Any:
        """Replay the call on ``inputs``. Raises ``_Rerecord`` when a guard fails, or
        after undoing the Python-side state when the call must run recorded instead."""
        c = self.c
        held = self._checked()
        with deferred_interrupt():
            undo = _snapshot(c.events)
            try:
                fresh = _redo_events(c.events)
            except _Rerecord:
                undo()
                raise
            results: list[list[Any]] = []
            overwritten = False      # some donated buffer holds a result by now
            for s, exe in enumerate(self.exes):
                nodes = self._arguments(self._plans[s], inputs, fresh, results, held)
                buffers = [n.buffer if isinstance(n, Node) else n for n in nodes]
                host = c.host_args[s]
                if host:
                    for a, b in zip(host, upload_packed([buffers[a] for a in host])):
                        buffers[a] = b
                donated = self._donated(exe, nodes, buffers, c.devices[s], host)
                del nodes
                try:
                    results.append(exe.run(buffers, donated, self.roles[s]))
                except Exception as e:
                    if overwritten or (donated and overwrote_donated(e)):
                        self._bind_failed(results, s, e)
                        raise RealizationError(
                            f"nv.compile({self.name}): a replayed step failed after it had "
                            f"begun overwriting donated buffers; the results it computed "
                            f"before the failure are kept, the others fail: {e}") from e
                    undo()        # nothing was written: the call runs recorded instead
                    raise _Rerecord(f"a kernel failed ({type(e).__name__}); "
                                    "recorded to report it") from e
                overwritten = overwritten or bool(donated)
            return self._bind(results, inputs)

    @staticmethod
    def _arguments(plan: list[tuple[str, Any]], inputs: list[Tensor], fresh: list[Any],
                   results: list[list[Any]], held: list[Tensor]) -> list[Any]:
        """A step's argument nodes (or fresh host arrays), in order, from its plan."""
        nodes: list[Any] = []
        append = nodes.append
        for kind, where in plan:
            if kind == "place":
                append(held[where].node)
            elif kind == "input":
                append(inputs[where].node)
            elif kind == "fresh":
                append(fresh[where])
            else:
                append(results[where[0]][where[1]])
        return nodes

    def _bind_failed(self, results: list[list[Any]], failed: int, e: Exception) -> None:
        """Step ``failed`` raised ``e`` after the replay had written over donated
        buffers, so the call can neither be undone nor run recorded. Each result place
        gets what the replay computed -- a result of an earlier step, or one the failed
        step finished before the failure and that does not depend on it (its
        ``Salvage``: a parameter's update, as realization keeps it) -- and every other
        place fails with ``e`` (its old value may be gone)."""
        salvage = salvage_of(e)
        kept = salvage.results if salvage is not None else {}
        message = f"{type(e).__name__}: {e}"
        devices = self.c.devices
        for s, j, shape, dtype, rebound, slots in self._binds:
            if s < failed or (s == failed and j in kept):
                node = _result_node(results[s][j] if s < failed else kept[j], shape, dtype,
                                    devices[s])
            else:
                node = Node("error", (), {"message": message}, shape, dtype)
            for t, delta in rebound:
                t._node, t._grad_fn = node, None
                t._version += delta
            for kind, owner, key in slots:
                if kind == "attr":
                    setattr(owner, key, Tensor._wrap(node))
                else:
                    owner[key] = Tensor._wrap(node)

    def _donated(self, exe: Any, nodes: list[Any], buffers: list[Any], device: str,
                 host: tuple[int, ...]) -> frozenset[int]:
        """The arguments a replay may write over: those the uncompiled call would have
        donated -- read from a tensor this replay rebinds, referenced by nothing else
        (no other tensor, no pending node), owning their memory alone (never a host
        argument of a GPU step: its upload is this run's)."""
        cands = exe.donation_candidates
        if not cands:
            return frozenset()
        on_host = device == "cpu"
        owns = sole_host_owner if on_host else sole_device_owner   # (called directly:
        # a wrapper's frame would hold one more reference to the buffer)
        rebound = Counter(map(id, map(_node_of, self._rebinding)))
        uses = Counter(map(id, nodes))
        ok = set()
        refs = sys.getrefcount
        for a in cands:
            n = nodes[a]
            k = id(n)
            if k not in rebound or not isinstance(n, Node) or a in host:
                continue
            # beyond: the tensors rebinding it, its entries in ``nodes``, ``n`` here
            if refs(n) - BASE_NODE_REFS - uses[k] - rebound[k] == 0 and \
                    (not on_host or isinstance(buffers[a], np.ndarray)) and owns(buffers[a]):
                ok.add(a)       # (its node and ``buffers`` hold the buffer)
        return frozenset(ok)

    def _bind(self, results: list[list[Any]], inputs: list[Tensor]) -> Any:
        """Every result to its places (one new node per result, shared by them, as
        the recorded call's tensors shared it), then the return value."""
        c = self.c
        nodes: dict[tuple[int, int], Node] = {}
        made: dict[tuple[int, int], Tensor] = {}    # new tensors, for container places
        devices = c.devices
        for s, j, shape, dtype, rebound, slots in self._binds:
            node = nodes[(s, j)] = _result_node(results[s][j], shape, dtype, devices[s])
            for t, delta in rebound:
                t._node, t._grad_fn = node, None
                t._version += delta
            if slots:
                made[(s, j)] = t = Tensor._wrap(node)
                for kind, owner, key in slots:
                    if kind == "attr":
                        setattr(owner, key, t)
                    else:
                        owner[key] = t
        tensors = []
        for ret in c.returns:
            if ret[0] == "same":
                tensors.append(ret[1])
            elif ret[0] == "input":
                tensors.append(inputs[ret[1]])
            else:
                where = (ret[1], ret[2])
                t = made.get(where)
                if t is None:
                    node = nodes.get(where)
                    if node is None:      # returned only: no place holds it
                        shape, dtype = self.out_meta[ret[1]][ret[2]]
                        node = nodes[where] = _result_node(results[ret[1]][ret[2]], shape,
                                                           dtype, devices[ret[1]])
                    t = made[where] = Tensor._wrap(node)
                tensors.append(t)
        return _build(c.returned, tensors)


def _result_node(result: Any, shape: tuple[int, ...], dtype: Any, device: str) -> Node:
    """A step result as its node, on the step's device: a host result as a read-only
    view, a device result as the engine made it (as realization binds them)."""
    if device == "cpu":
        return Node("buffer", (), {}, shape, dtype, _read_only(result), "cpu")
    return Node("buffer", (), {}, shape, dtype, result, device)


def _read_only(result: np.ndarray) -> np.ndarray:
    """A step result as a node holds it: a read-only view. A result written over a
    donated argument already is one (a fresh reshape of that argument's read-only
    view: same memory, same owner), so only a fresh array needs a new view."""
    if result.flags.writeable:
        result = result.view()
        result.flags.writeable = False
    return result


class _Rerecord(Exception):
    """This call must run recorded (the reason is the message)."""


def _snapshot(events: list[tuple]) -> Callable[[], None]:
    """Undo for the Python-side state a replay's events change."""
    saved: list[Callable[[], None]] = []
    seen: set[int] = set()
    for kind, owner, _ in events:
        if id(owner) in seen:
            continue
        seen.add(id(owner))
        if kind in ("rng", "manual_seed"):
            state = owner.get_state()
            saved.append(lambda o=owner, s=state: o.set_state(s))
        elif kind in ("scalar", "opt_step", "zero_grad"):
            saved.append(owner._host_snapshot())
        elif kind == "sched_step":
            state = dict(owner.__dict__)
            saved.append(lambda o=owner, s=state: (o.__dict__.clear(), o.__dict__.update(s)))

    def undo() -> None:
        for restore in reversed(saved):
            restore()
    return undo


def _redo_events(events: list[tuple]) -> list[np.ndarray]:
    """Run the recorded call's events again (Python state only) and return the fresh
    host values in the order the call drew them."""
    fresh: list[np.ndarray] = []
    pending_scalars: list[tuple[str, np.ndarray]] = []
    for kind, owner, detail in events:
        if kind == "rng":
            fresh.append(owner._next_key_array())
        elif kind == "scalar":
            if not pending_scalars:
                raise _Rerecord("an optimizer scalar came before its optimizer's step")
            name, value = pending_scalars.pop(0)
            if name != detail:
                raise _Rerecord(f"the optimizer's runtime scalars changed ({name} where "
                                f"{detail} was)")
            fresh.append(value)
        elif kind == "opt_step":
            if pending_scalars:
                raise _Rerecord("the optimizer's runtime scalars changed")
            pending_scalars = [(n, np.array(v, dtype=d.np))
                               for n, v, d in owner._host_step(detail)]
        elif kind == "zero_grad":
            owner.zero_grad(set_to_none=True)
        elif kind == "sched_step":
            owner.step()
        elif kind == "manual_seed":
            owner.manual_seed(detail)
    if pending_scalars:
        raise _Rerecord("the optimizer's runtime scalars changed (more of them)")
    return fresh


# ---------------------------------------------------------------- the wrapper


def _storage(t: Tensor) -> Tensor:
    """The tensor whose storage ``t`` shows: ``t``, or the root of its views."""
    v = t._view
    while v is not None and isinstance(v.base, Tensor):
        t, v = v.base, v.base._view
    return t


def _aliasing(inputs: list[Tensor], groups: list[int]) -> tuple[int, ...] | None:
    """Which input tensors of different arguments share storage or a value (a view of
    another, the same tensor twice, two handles of one node): per input, the index of
    the first input of another argument it shares with (``groups``: each input's
    argument; a complex argument's two parts may view one real tensor). A recorded
    call reads each shared value once, and derives a view from what the call wrote
    into its base, so a call whose inputs share differently (``f(x, x)`` recorded,
    ``f(x, y)`` called) is another guard key; None when none share (the common case,
    one tuple less to compare)."""
    if len(inputs) < 2:
        return None
    first: dict[int, tuple[int, int]] = {}
    out = []
    for i, (t, group) in enumerate(zip(inputs, groups)):
        j = i
        for k in (id(_storage(t)), id(t._node)):
            seen = first.setdefault(k, (i, group))
            if seen[1] != group:
                j = min(j, seen[0])
        out.append(j)
    return None if out == list(range(len(inputs))) else tuple(out)


@dataclass
class _Entry:
    """Per guard key: the latest capture, the replay, or why it cannot replay."""

    calls: int = 0
    capture: _Capture | None = None
    replay: _Replay | None = None
    refused: str | None = None
    tries: int = 0
    hooks_at: int = -1      # ``hooks.generation()`` as this key's last call ended
    # the arguments the key holds by identity (``("id", id(v))``), as weak references
    # where they allow one: an id is an address, which a later object can take
    held: tuple = ()


def _held(objects: list[Any]) -> tuple:
    """References to ``objects`` for ``_Entry.held``: weak where possible, else strong
    (which keeps the address from being reused while the entry lives)."""
    refs = []
    for v in objects:
        try:
            refs.append(weakref.ref(v))
        except TypeError:
            refs.append(lambda v=v: v)
    return tuple(refs)


def _still_held(refs: tuple, objects: list[Any]) -> bool:
    """Whether ``objects`` are the very ones ``refs`` were taken of (an argument that
    died and whose address another object took has a dead reference)."""
    return len(refs) == len(objects) and all(r() is v for r, v in zip(refs, objects))


class CompiledFunction:
    """``nv.compile(fn)``: see the module docstring."""

    def __init__(self, fn: Callable, fullgraph: bool = False):
        self.fn = fn
        self.fullgraph = fullgraph
        self.name = getattr(fn, "__qualname__", repr(fn))
        functools.update_wrapper(self, fn)
        # Per guard key, least recently used first; bounded (each holds its steps'
        # executables and the places it writes), with one warning when a function keeps
        # being called with new shapes or Python arguments.
        self._entries: LRU[_Entry] = LRU()
        self._keys_seen = 0
        self._last_key: tuple | None = None
        self._lock = threading.RLock()
        self.replays = 0
        self.recorded = 0

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """As a method decorator: bind like a function."""
        return self if obj is None else functools.partial(self, obj)

    def _guard(self, args: tuple, kwargs: dict) -> tuple[tuple, list[Tensor], list[Any]]:
        """The guard key of a call (tensors by shape, dtype, device and requires_grad,
        Python scalars by value -- floats by their bits, so -0.0 is not 0.0 -- other
        objects by identity, and the ambient modes recording reads), its tensor
        inputs, and the objects the key holds by identity."""
        inputs: list[Tensor] = []
        groups: list[int] = []          # per input, its argument (``_aliasing``)
        held: list[Any] = []

        def key(v: Any) -> Any:
            if isinstance(v, Tensor):
                groups.append(len(inputs))
                inputs.append(v)
                n = v.node
                return ("T", n.shape, n.dtype.name, n.device, v._requires_grad)
            if isinstance(v, ComplexTensor):
                # Its two real parts are inputs (the steps read them, not the pair):
                # guarded as one complex input, its dtype the complex one.
                re, im = v.real, v.imag
                groups.extend((len(inputs), len(inputs)))
                inputs.extend((re, im))
                n = re.node
                return ("C", n.shape, v.dtype.name, n.device,
                        (re._requires_grad, im._requires_grad))
            if isinstance(v, float):
                return (type(v), float.hex(v))
            if isinstance(v, complex):
                return (type(v), float.hex(v.real), float.hex(v.imag))
            if v is None or isinstance(v, (bool, int, str, bytes)):
                return (type(v), v)
            if isinstance(v, (tuple, list)):
                return (type(v), tuple(key(x) for x in v))
            if isinstance(v, dict):
                return (dict, tuple((k, key(x)) for k, x in v.items()))
            held.append(v)
            if isinstance(v, np.ndarray):
                return ("np", id(v))
            return ("id", id(v))
        # (the default dtype decides what integer inputs and factories compute in,
        # autocast what the matmuls do, the default device where factories put theirs)
        k = (key(args), key(kwargs), grad_mode.STATE.enabled, get_engine(), get_remat(),
             _aliasing(inputs, groups), dt.DEFAULT_FLOAT.name,
             autocast_state.LOWER.get(), get_default_device())
        return k, inputs, held

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if ACTIVE.get() is not None:         # inside another capture: just run
            return self.fn(*args, **kwargs)
        key, inputs, held = self._guard(args, kwargs)
        pending = [t for t in inputs if not t.node.realized]
        if pending:     # an input is an argument of the steps, never their inline work
            realize(*pending)
            # keyed again: a pending tensor's device is None until it is realized (a
            # call with one recorded again after a call with a realized one, "device
            # changed cpu -> None")
            key, inputs, held = self._guard(args, kwargs)
        # One call at a time: a call's capture, comparison and replay are this
        # function's state (two threads sharing one model race anyway).
        with self._lock:
            entry = self._entry(key, held)
            self._last_key = key
            if entry.replay is not None:
                try:
                    if hooks.generation() != entry.hooks_at:
                        raise _Rerecord("a hook was registered or removed since the "
                                        "last call")
                    entry.replay.check_inputs(inputs)
                    out = entry.replay.run(inputs)
                    self.replays += 1
                    CACHE.stats.replays += 1
                    entry.hooks_at = hooks.generation()
                    return out
                except _Rerecord as e:
                    why = str(e)
                _note(self.name, f"re-recorded: {why}")
                entry.replay, entry.capture, entry.tries = None, None, 0
            if entry.refused is not None:
                return self.fn(*args, **kwargs)
            return self._record(entry, args, kwargs, inputs)

    def _entry(self, key: tuple, held: list[Any]) -> _Entry:
        """The entry of guard ``key`` (made, and the reason noted, if new). An entry
        whose identity-keyed arguments are not ``held`` -- one died and another object
        took its address -- is made anew: its steps read the dead one."""
        entry = self._entries.get(key)
        if entry is not None:
            if _still_held(entry.held, held):
                return entry
            _note(self.name, "re-recorded: an argument is another object at the address "
                             "of the one the call was recorded with")
            entry = self._entries[key] = _Entry(held=_held(held))
            return entry
        self._keys_seen += 1
        if self._keys_seen > 1:
            why = _explain_key(key, self._last_key, self.fn)
            _note(self.name, f"re-recorded: {why}")
            if self._keys_seen == MAX_ENTRIES:
                warnings.warn(f"nv.compile({self.name}) has been called with "
                              f"{MAX_ENTRIES} different input shapes, dtypes or Python "
                              f"arguments (latest: {why}); each records its own steps. "
                              "Values that change every call should be tensors.",
                              RecompileWarning, stacklevel=4)
        entry = self._entries[key] = _Entry(held=_held(held))
        if len(self._entries) > MAX_ENTRIES:
            self._entries.pop_oldest()
        return entry

    def _record(self, entry: _Entry, args: tuple, kwargs: dict, inputs: list[Tensor]) -> Any:
        self.recorded += 1
        entry.calls += 1
        entry.tries += 1
        out, capture = _Recorder(entry.capture).run(self.fn, args, kwargs, inputs)
        entry.hooks_at = hooks.generation()
        if capture.why is not None:
            if self.fullgraph:
                raise CaptureError(f"nv.compile({self.name}, fullgraph=True): cannot replay: "
                                   f"{capture.why}")
            entry.refused = capture.why
            entry.capture = None
            _note(self.name, f"runs recorded every call: {capture.why}")
            warnings.warn(f"nv.compile({self.name}): cannot replay, runs recorded every "
                          f"call: {capture.why}", RecompileWarning, stacklevel=3)
            return out
        previous, entry.capture = entry.capture, capture
        why = capture.unusable
        if why is None and previous is not None:
            why = capture.agrees_with(previous)
            if why is None:
                entry.replay = _Replay(capture, self.name)
                return out
        if why is not None:
            _note(self.name, f"recorded again: {why}")
        if why is not None and entry.tries >= MAX_RECORDED_CALLS:
            if self.fullgraph:
                raise CaptureError(f"nv.compile({self.name}, fullgraph=True): {why}")
            entry.refused = f"{MAX_RECORDED_CALLS} recorded calls never agreed: {why}"
            _note(self.name, f"runs recorded every call: {entry.refused}")
            warnings.warn(f"nv.compile({self.name}): {entry.refused}",
                          RecompileWarning, stacklevel=3)
        return out


def _explain_key(new: tuple, old: tuple | None, fn: Callable) -> str:
    """Why guard key ``new`` differs from ``old`` (the previous call's), in words."""
    if old is None:
        return "first call"
    for k, what in ((2, "grad mode"), (3, "engine"), (4, "remat mode"),
                    (6, "the default dtype"), (7, "autocast"), (8, "the default device")):
        if new[k] != old[k]:
            return f"{what} changed {old[k]} -> {new[k]}"
    if new[5] != old[5]:
        return (f"the tensor arguments share storage differently (per input, the first "
                f"input it shares with: {old[5]} -> {new[5]}; None: none share)")
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    (_, new_args), (_, old_args) = new[0], old[0]
    tensor_index = 0
    for i, (a, b) in enumerate(zip(new_args, old_args)):
        name = names[i] if i < len(names) else str(i)
        if a[0] in ("T", "C") and b[0] in ("T", "C"):
            if a[0] != b[0]:
                return (f"input {tensor_index} changed from a "
                        f"{'complex' if b[0] == 'C' else 'real'} tensor to a "
                        f"{'complex' if a[0] == 'C' else 'real'} one (argument {name})")
            for j, what in ((1, "shape"), (2, "dtype"), (3, "device"), (4, "requires_grad")):
                if a[j] != b[j]:
                    return (f"input {tensor_index} {what} changed {b[j]} -> {a[j]} "
                            f"(argument {name})")
            tensor_index += 2 if a[0] == "C" else 1   # (a complex input is two)
        elif a != b:
            return f"argument {name} changed {_shown(b)} -> {_shown(a)}"
    if len(new_args) != len(old_args):
        return f"number of arguments changed {len(old_args)} -> {len(new_args)}"
    return "keyword arguments changed"


def _shown(key: Any) -> str:
    """A guard-key part as the user wrote it (a Python value, or what an object is)."""
    kind, value = key[0], key[1]
    if kind == "id":
        return "another object"
    if kind in ("T", "C"):
        return f"a {'complex ' if kind == 'C' else ''}tensor {value}"
    if kind is float or (isinstance(kind, type) and issubclass(kind, float)):
        return repr(float.fromhex(value))                     # (keyed by its bits)
    if kind is complex:
        return repr(complex(float.fromhex(value), float.fromhex(key[2])))
    return repr(value) if not isinstance(value, tuple) else "another value"


def _note(name: str, message: str) -> None:
    CACHE.stats.compile_log.append(f"nv.compile({name}): {message}")


class CompiledModule:
    """``nv.compile(module)``: the module, whose calls without gradient recording
    (evaluation, generation) are replayed like a compiled function's.

    A forward that records for autograd cannot skip its Python: the backward is
    derived from what it records. Such calls run the module as it is (the training
    step is compiled and cached as a whole when the optimizer realizes it; compile
    the training-step function to replay that). ``_orig_mod`` is the module, as with
    ``torch.compile``; every other attribute is the module's, so ``state_dict()``,
    ``parameters()`` and ``train()`` are its own (the keys carry no ``_orig_mod.``
    prefix: loading them back needs no renaming)."""

    def __init__(self, module: Any, fullgraph: bool = False):
        object.__setattr__(self, "_orig_mod", module)
        object.__setattr__(self, "_replayed", CompiledFunction(module.__call__, fullgraph))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if grad_mode.STATE.enabled:
            return self._orig_mod(*args, **kwargs)
        return self._replayed(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._orig_mod, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._orig_mod, name, value)

    def __repr__(self) -> str:
        return f"CompiledModule({self._orig_mod!r})"


def compile(model: Callable | None = None, *, fullgraph: bool = False, mode: str | None = None,
            dynamic: bool | None = None, backend: str | None = None,
            options: dict | None = None, name: str | None = None, disable: bool = False,
            recompile_limit: int | None = None, isolate_recompiles: bool = False,
            shapes_spec: Any = None) -> Any:
    """Compile ``model`` (a function, or an ``nn.Module``) so later calls replay its steps
    without running its Python (module docstring); usable as ``@nv.compile`` or
    ``@nv.compile(fullgraph=True)``.

    ``fullgraph=True`` raises ``CaptureError`` where a function cannot be replayed
    (instead of warning once and running it recorded every call). ``disable=True``
    returns ``model`` itself, as ``torch.compile``'s no-op for testing. ``mode``,
    ``dynamic``, ``backend``, ``options`` (a dict of backend options), ``name``,
    ``recompile_limit``, ``isolate_recompiles`` and ``shapes_spec`` are accepted for
    code written for ``torch.compile``: Nova has one compiler and one mode, with no
    options, and a new shape records a new step (there is no limit to fall back at)."""
    if backend not in (None, "inductor", "nova"):
        raise ValueError(f"nv.compile: backend {backend!r} is not available; Nova compiles "
                         "with its own compiler (backend=None)")
    if mode not in (None, "default", "reduce-overhead", "max-autotune",
                    "max-autotune-no-cudagraphs"):
        raise ValueError(f"nv.compile: unknown mode {mode!r}")
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"nv.compile: options must be a dict, got {type(options).__name__}")
    if recompile_limit is not None and (not isinstance(recompile_limit, int)
                                        or isinstance(recompile_limit, bool)):
        raise TypeError(f"nv.compile: recompile_limit must be an int or None, got "
                        f"{type(recompile_limit).__name__}")
    if model is None:
        return lambda f: compile(f, fullgraph=fullgraph, disable=disable)
    if disable:
        return model
    from nova.nn.module import Module
    if isinstance(model, Module):
        return CompiledModule(model, fullgraph)
    if not callable(model):
        raise TypeError(f"nv.compile: expected a function or an nn.Module, got "
                        f"{type(model).__name__}")
    return CompiledFunction(model, fullgraph)
