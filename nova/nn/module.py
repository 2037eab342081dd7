"""``nv.nn.Module``: parameters, buffers and children, PyTorch-style.

Attribute assignment registers Parameters, Modules and ``nn.Buffer``s; ``register_buffer``
registers non-trainable state. ``state_dict``/``load_state_dict`` use dotted names as in PyTorch.
"""
from __future__ import annotations

import contextvars
import functools
import warnings
import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from nova.autograd.function import Function
from nova.autograd.grad_mode import is_grad_enabled, no_grad
from nova.nn.more_modules import Buffer
from nova.nn.parameter import ComplexParameter, Parameter
from nova.tensor.device import check_device
from nova.tensor.device import device as Device
from nova.core.dtypes import bfloat16, float16, float32, float64, promote_types
from nova.tensor.complex import ComplexTensor, view_as_complex
from nova.tensor.tensor import Tensor, clear_grad

# What a buffer may hold: a tensor, real or complex (LLaMA's rotary ``freqs_cis``).
_BUFFER_TYPES = (Tensor, ComplexTensor)
from nova.core.hooks import RemovableHandle


class StateDictError(RuntimeError):
    """``load_state_dict`` found missing, unexpected or mis-shaped entries."""


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` returns, as in PyTorch: a named pair that still unpacks
    as ``missing, unexpected = ...``, shown as ``<All keys matched successfully>`` when
    both lists are empty."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


_EXTRA_STATE_KEY_SUFFIX = "_extra_state"
# During ``state_dict()``: (tensor id, view) -> (tensor, its detached alias), so a tensor
# registered under two names (tied weights) is one object in the result, as it is one
# storage in PyTorch's: ``nv.save`` stores it once and ``load_state_dict(assign=True)``
# ties it again
_DETACHED: contextvars.ContextVar[dict[tuple[int, Any], tuple[Any, Any]] | None] = \
    contextvars.ContextVar("nova_state_dict_detached", default=None)


def _detached(t: Any, then: Callable[[Any], Any] | None = None) -> Any:
    """``t.detach()`` (``then`` of it), the same object for ``t`` throughout one
    ``state_dict()`` call."""
    memo = _DETACHED.get()
    key = (id(t), then)
    got = memo.get(key) if memo is not None else None
    if got is None:
        alias = t.detach()
        got = (t, alias if then is None else then(alias))
        if memo is not None:
            memo[key] = got
    return got[1]


# During ``load_state_dict(assign=True)``: checkpoint tensor id -> (tensor, the Parameter
# made of it), so entries that are one tensor become one Parameter (``_load_entry``)
_ASSIGNED: contextvars.ContextVar[dict[int, tuple[Any, Any]] | None] = \
    contextvars.ContextVar("nova_load_assigned", default=None)


class _HookResultError(RuntimeError, AssertionError):
    """A load_state_dict post-hook returned a value: PyTorch raises AssertionError,
    Nova's errors are RuntimeErrors; this is both."""


def _hooks(module: Module, table: str) -> list[Any]:
    """The entries of ``module``'s hook ``table`` (none until one is registered), as a
    list, so a hook may add or remove hooks while they run."""
    return list((getattr(module, table) or {}).values())


def _callable(hook: Any, kind: str) -> Callable:
    if not callable(hook):
        raise TypeError(f"register_{kind.replace(' ', '_')}_hook: hook must be callable, "
                        f"got {type(hook).__name__}")
    return hook


# ---------------------------------------------------------------- global hooks
#
# ``torch.nn.modules.module``'s hooks common to every module, by handle id. They run
# before each module's own hooks of the same kind. Their handles are ``RemovableHandle``s,
# so registering or removing one changes ``nova.core.hooks.generation()`` and an
# ``nv.compile`` step records again instead of replaying without it.
_global_forward_pre_hooks: OrderedDict[int, tuple[Callable, bool]] = OrderedDict()
_global_forward_hooks: OrderedDict[int, tuple[Callable, bool, bool]] = OrderedDict()
_global_backward_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
_global_backward_hooks: OrderedDict[int, Callable] = OrderedDict()
_global_buffer_registration_hooks: OrderedDict[int, Callable] = OrderedDict()
_global_module_registration_hooks: OrderedDict[int, Callable] = OrderedDict()
_global_parameter_registration_hooks: OrderedDict[int, Callable] = OrderedDict()


def _add_global_hook(table: OrderedDict, entry: Any) -> RemovableHandle:
    handle = RemovableHandle(lambda hook_id: table.pop(hook_id, None))
    table[handle.id] = entry
    return handle


def _global_callable(hook: Any, op: str) -> Callable:
    if not callable(hook):
        raise TypeError(f"{op}: hook must be callable, got {type(hook).__name__}")
    return hook


def register_module_forward_pre_hook(hook: Callable) -> RemovableHandle:
    """Call ``hook(module, args)`` before the ``forward`` of every module, before the
    module's own pre-hooks; a returned value replaces the positional arguments (a
    non-tuple is one argument), as a module's own pre-hook's does."""
    return _add_global_hook(_global_forward_pre_hooks,
                            (_global_callable(hook, "register_module_forward_pre_hook"),
                             False))


def register_module_forward_hook(hook: Callable, *, with_kwargs: bool = False,
                                 always_call: bool = False) -> RemovableHandle:
    """Call ``hook(module, args, output)`` (``hook(module, args, kwargs, output)`` with
    ``with_kwargs``) after the ``forward`` of every module, before the module's own
    forward hooks; a returned value replaces the output. ``always_call`` hooks also run
    when ``forward`` raises."""
    return _add_global_hook(_global_forward_hooks,
                            (_global_callable(hook, "register_module_forward_hook"),
                             bool(with_kwargs), bool(always_call)))


def register_module_full_backward_pre_hook(hook: Callable) -> RemovableHandle:
    """``Module.register_full_backward_pre_hook`` for every module, run before each
    module's own."""
    return _add_global_hook(_global_backward_pre_hooks,
                            _global_callable(hook, "register_module_full_backward_pre_hook"))


def register_module_full_backward_hook(hook: Callable) -> RemovableHandle:
    """``Module.register_full_backward_hook`` for every module, run before each
    module's own."""
    return _add_global_hook(_global_backward_hooks,
                            _global_callable(hook, "register_module_full_backward_hook"))


def register_module_backward_hook(hook: Callable) -> RemovableHandle:
    """Refused, as ``Module.register_backward_hook`` is (its ``grad_input`` follows
    PyTorch's internal autograd nodes): use ``register_module_full_backward_hook``."""
    raise NotImplementedError(
        "register_module_backward_hook: the deprecated non-full backward hook (its "
        "grad_input follows PyTorch's internal autograd nodes) is not provided; use "
        "register_module_full_backward_hook(hook), whose grad_input has one gradient per "
        "positional input")


def register_module_buffer_registration_hook(hook: Callable) -> RemovableHandle:
    """Call ``hook(module, name, buffer)`` whenever any module registers a buffer
    (``register_buffer``, assigning an ``nn.Buffer`` or to a buffer's name); a returned
    value is registered instead."""
    return _add_global_hook(_global_buffer_registration_hooks, _global_callable(
        hook, "register_module_buffer_registration_hook"))


def register_module_module_registration_hook(hook: Callable) -> RemovableHandle:
    """Call ``hook(module, name, submodule)`` whenever any module registers a child
    (``add_module``/``register_module``, assigning a Module or None to a child's name);
    a returned value is registered instead."""
    return _add_global_hook(_global_module_registration_hooks, _global_callable(
        hook, "register_module_module_registration_hook"))


def register_module_parameter_registration_hook(hook: Callable) -> RemovableHandle:
    """Call ``hook(module, name, param)`` whenever any module registers a parameter
    that is not None (``register_parameter``, assigning a Parameter); a returned value
    is registered instead."""
    return _add_global_hook(_global_parameter_registration_hooks, _global_callable(
        hook, "register_module_parameter_registration_hook"))


def _registered(table: OrderedDict, module: Module, name: str, value: Any) -> Any:
    """``value`` after the global registration hooks of ``table`` (each may replace
    it)."""
    for hook in list(table.values()):
        out = hook(module, name, value)
        if out is not None:
            value = out
    return value



def _parse_module_to(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """``Module.to``'s (device, dtype) from PyTorch's signatures: ``(device, dtype,
    non_blocking, copy)``, ``(dtype, non_blocking, copy)``, ``(tensor, non_blocking,
    copy)``, each with a keyword ``memory_format`` (checked, then ignored)."""
    from nova.core.memory_format import check_memory_format
    kwargs = dict(kwargs)
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    check_memory_format("Module.to", kwargs.pop("memory_format", None))
    kwargs.pop("non_blocking", None)
    kwargs.pop("copy", None)
    if kwargs:
        raise TypeError(f"Module.to: unexpected arguments {sorted(kwargs)}")
    flags = [a for a in args if isinstance(a, bool)]
    if len(flags) > 2:
        raise TypeError(f"Module.to: at most two positional flags (non_blocking, copy), "
                        f"got {len(flags)}")
    for a in (a for a in args if not isinstance(a, bool)):
        if isinstance(a, (Tensor, ComplexTensor)):
            dtype, device = a.dtype, a.device
        elif isinstance(a, (str, Device, int)):
            device = a
        else:
            dtype = a
    return device, dtype

class Module:
    """Base class of every layer and model."""

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    # ------------------------------------------------------------ registration

    def __setattr__(self, name: str, value: Any) -> None:
        """PyTorch's rules: a Parameter registers as a parameter, a Module as a child,
        an ``nn.Buffer`` as a buffer (persistent as it says); a registered parameter
        (child) name takes only a Parameter (Module) or None, a registered buffer name a
        Tensor or None; anything else is a plain attribute.
        A name assigned again keeps its place in ``named_parameters``/``state_dict``
        order (tying ``b.weight = a.weight`` leaves ``b``'s order alone)."""
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}: call super().__init__() before "
                                 "assigning attributes")
        if isinstance(value, ComplexParameter):
            self._remove_entry(name, keep="_parameters")
            self.register_parameter(name, value._pair)
            self.__dict__.setdefault("_complex_parameters", {})[name] = value
        elif isinstance(value, Parameter):
            self._remove_entry(name, keep="_parameters")
            self.register_parameter(name, value)
        elif name in self._parameters:
            self._parameters[name] = self._assignable(name, value, None, "parameter",
                                                      "nn.Parameter")
        elif isinstance(value, Module):
            self._remove_entry(name, keep="_modules")
            self._modules[name] = _registered(_global_module_registration_hooks, self, name,
                                              value)
        elif name in self._modules:
            self._modules[name] = _registered(
                _global_module_registration_hooks, self, name,
                self._assignable(name, value, None, "child module", "nn.Module"))
        elif isinstance(value, Buffer):
            self.register_buffer(name, value, value.persistent)
        elif name in self._buffers:
            self._buffers[name] = _registered(
                _global_buffer_registration_hooks, self, name,
                self._assignable(name, value, _BUFFER_TYPES, "buffer", "Tensor"))
        else:
            object.__setattr__(self, name, value)

    def _assignable(self, name: str, value: Any, allowed: Any, kind: str,
                    expected: str) -> Any:
        """``value`` if it may replace the registered ``kind`` ``name`` -- None, or an
        instance of ``allowed`` -- else PyTorch's TypeError."""
        if value is not None and (allowed is None or not isinstance(value, allowed)):
            raise TypeError(f"{type(self).__name__}: cannot assign '{type(value).__name__}' "
                            f"as {kind} '{name}' ({expected} or None expected)")
        return value

    def _remove_entry(self, name: str, keep: str) -> None:
        """Forget ``name`` everywhere but in the table ``keep`` (where assigning keeps
        its place), before it is registered there."""
        self.__dict__.pop(name, None)
        for table in ("_parameters", "_buffers", "_modules"):
            if table != keep:
                self.__dict__[table].pop(name, None)
        self._non_persistent_buffers_set.discard(name)
        self.__dict__.get("_complex_parameters", {}).pop(name, None)

    def _complex_parameter(self, name: str) -> ComplexParameter | None:
        """The complex parameter registered as ``name`` (its real pair is the entry in
        ``_parameters``), or None."""
        table = self.__dict__.get("_complex_parameters")
        found = table.get(name) if table else None      # (no dict made per lookup)
        if found is not None and self.__dict__["_parameters"].get(name) is found._pair:
            return found
        return None

    def __getattr__(self, name: str) -> Any:
        complex_param = self._complex_parameter(name)
        if complex_param is not None:
            return complex_param
        for table in ("_parameters", "_buffers", "_modules"):
            d = self.__dict__.get(table)
            if d is not None and name in d:
                return d[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        self.__dict__.get("_complex_parameters", {}).pop(name, None)
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def _check_new_name(self, op: str, kind: str, name: Any, table: dict) -> None:
        """PyTorch's checks on a name being registered as a ``kind`` in ``table``: a
        non-empty string without '.', not already another attribute."""
        if not isinstance(name, str):
            raise TypeError(f"{op}: {kind} name should be a string, got {type(name).__name__}")
        if "." in name or not name:
            raise KeyError(f"{op}: {kind} name must be a non-empty string without '.', "
                           f"got {name!r}")
        if name not in table and hasattr(self, name):
            raise KeyError(f"{op}: attribute '{name}' already exists")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Register ``param`` (or None: a declared, absent parameter) as ``name``; a
        name already registered keeps its place in the order."""
        # the name first, then the value (PyTorch's order: KeyError before TypeError)
        self._check_new_name("register_parameter", "parameter", name, self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: cannot assign '{type(param).__name__}' "
                            f"object to parameter '{name}' (nn.Parameter or None required)")
        if param is not None:
            param = _registered(_global_parameter_registration_hooks, self, name, param)
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Register ``tensor`` (or None) as buffer ``name``: module state that is not
        trained, in ``state_dict`` unless ``persistent=False``."""
        self._check_new_name("register_buffer", "buffer", name, self._buffers)
        if tensor is not None and not isinstance(tensor, _BUFFER_TYPES):
            raise TypeError(f"register_buffer: cannot assign '{type(tensor).__name__}' "
                            f"object to buffer '{name}' (Tensor or None required)")
        self._buffers[name] = _registered(_global_buffer_registration_hooks, self, name, tensor)
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Register ``module`` (or None) as child ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module: {type(module).__name__} is not a Module subclass")
        self._check_new_name("add_module", "module", name, self._modules)
        self._modules[name] = _registered(_global_module_registration_hooks, self, name, module)

    register_module = add_module

    def get_submodule(self, target: str) -> Module:
        """The module at dotted path ``target`` (``""``: this one), as PyTorch's."""
        module: Module = self
        for part in target.split(".") if target else ():
            child = module._modules.get(part)
            if child is None:
                raise AttributeError(f"{type(module).__name__} has no attribute `{part}` "
                                     f"(looking up {target!r})")
            module = child
        return module

    def set_submodule(self, target: str, module: Module, strict: bool = False) -> None:
        """Put ``module`` at dotted path ``target`` (PyTorch 2.x's ``set_submodule``): the
        parent (``target`` without its last name) must exist; the last name may be a new
        child unless ``strict``, else it must be a child already. AttributeError when a
        name on the path is missing or is not a module; ValueError for an empty
        ``target`` or a ``module`` that is not an ``nn.Module``."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent_path, _, name = target.rpartition(".")
        parent = self.get_submodule(parent_path)
        if strict and not hasattr(parent, name):
            raise AttributeError(f"{type(parent).__name__} has no attribute `{name}`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError(f"`{name}` is not an nn.Module")
        setattr(parent, name, module)

    def get_parameter(self, target: str) -> Parameter:
        return self._get_entry(target, "_parameters", "parameter")

    def get_buffer(self, target: str) -> Tensor:
        return self._get_entry(target, "_buffers", "buffer")

    def _get_entry(self, target: str, table: str, kind: str) -> Tensor:
        """The ``kind`` at dotted path ``target``: its module's ``table`` entry."""
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        found = getattr(module, table).get(name)
        if found is None:
            raise AttributeError(f"{type(module).__name__} has no {kind} `{name}` "
                                 f"(looking up {target!r})")
        return found

    # ------------------------------------------------------------ traversal

    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """Every module below (this one first) with its dotted name; a module reachable
        by several names once, unless ``remove_duplicate=False`` (PyTorch's order of
        arguments; a string first argument is taken as the prefix, as Nova's was)."""
        if isinstance(memo, str):
            memo, prefix = None, memo
        memo = set() if memo is None else memo
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, f"{prefix}.{name}" if prefix else name,
                                           remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """The direct children by name; a child registered under several names once,
        under its first (as PyTorch's)."""
        memo: set[Module] = set()
        for name, m in self._modules.items():
            if m is not None and m not in memo:
                memo.add(m)
                yield name, m

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        seen: set[int] = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for mname, m in mods:
            for name, p in m._parameters.items():
                if p is None or (remove_duplicate and id(p) in seen):
                    continue
                seen.add(id(p))
                yield (f"{mname}.{name}" if mname else name), p

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        seen: set[int] = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for mname, m in mods:
            for name, b in m._buffers.items():
                if b is None or (remove_duplicate and id(b) in seen):
                    continue
                seen.add(id(b))
                yield (f"{mname}.{name}" if mname else name), b

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ------------------------------------------------------------ modes and helpers

    def train(self, mode: bool = True) -> Module:
        """Set this module's ``training`` flag, then call ``train(mode)`` on each child,
        as PyTorch does: a child that overrides ``train`` (a backbone keeping its frozen
        batch norms in evaluation) is asked, not bypassed."""
        if not isinstance(mode, bool):
            raise ValueError(f"{type(self).__name__}.train: training mode is expected to be "
                             f"boolean, got {type(mode).__name__}")
        object.__setattr__(self, "training", mode)
        for m in self.children():
            m.train(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the parameters' gradients; then a step an optimizer left waiting runs
        (``Optimizer.zero_grad``)."""
        for p in self.parameters():
            clear_grad(p, set_to_none)
        from nova.tensor.realize import realize_deferred
        realize_deferred()

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def apply(self, fn: Callable[[Module], None]) -> Module:
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def to(self, *args: Any, **kwargs: Any) -> Module:
        """``to(device)`` and/or ``to(dtype)``: converts parameters and buffers (and
        existing gradients) in place, keeping their identity and ``requires_grad``, so
        an optimizer built before or after sees the same tensors. Move a model before
        building its optimizer's state (the first ``step``). As PyTorch's, it also
        takes ``to(tensor)`` (its dtype and device), ``non_blocking`` (and ``copy``) flags,
        and a ``memory_format``, which has nothing to do: Nova tensors have no strides."""
        device, dtype = _parse_module_to(args, kwargs)
        target_device = check_device(device, "Module.to") if device is not None else None
        target = None
        if dtype is not None:
            from nova.core.dtypes import get_dtype
            target = get_dtype(dtype)
            if not target.is_floating_point:
                raise TypeError(f"Module.to: dtype must be floating point, got {target.name}")

        def convert(t: Tensor) -> Tensor:
            if target_device is not None and t.device.type != target_device.type:
                t = t.detach().to(target_device)
            if target is not None and t.dtype.is_floating_point and t.dtype != target:
                t = t.detach().to(target)
            return t
        return self._apply(convert)

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> Module:
        """``fn`` applied to every parameter, buffer and existing gradient, the children's
        first, each child through its own ``_apply`` -- so a module that overrides it to
        convert tensors it keeps as plain attributes (``self.cache = fn(self.cache)``
        after ``super()._apply(fn)``) is asked by ``to``, ``half``, ``cuda``..., as in
        PyTorch. The result replaces the tensor's value in place (``t.data = ...``), so
        parameters and buffers keep their identity (PyTorch keeps a parameter's and puts
        a new buffer tensor in the module); ``fn`` returning its argument changes
        nothing."""
        if recurse:
            for m in self.children():
                m._apply(fn)
        with no_grad():
            for table in (self._parameters, self._buffers):
                for t in table.values():
                    if t is None:
                        continue
                    new = fn(t)
                    if new is not t:
                        t.data = new
                    if t.grad is not None:
                        g = fn(t.grad)
                        if g is not t.grad:
                            t.grad = g.detach()
        return self

    def cpu(self) -> Module:
        return self.to("cpu")

    def cuda(self, device: Any = None) -> Module:
        return self.to("cuda" if device is None else device)

    def double(self) -> Module:
        return self.to(float64)

    def float(self) -> Module:
        return self.to(float32)

    def half(self) -> Module:
        return self.to(float16)

    def bfloat16(self) -> Module:
        return self.to(bfloat16)

    def type(self, dst_type: Any) -> Module:
        """Cast every parameter and buffer, integer ones too (``BatchNorm``'s
        ``num_batches_tracked``), to ``dst_type``, a dtype or a legacy type
        (``nv.DoubleTensor``), in place (PyTorch's ``Module.type``; ``to(dtype)``
        casts only the floating ones)."""
        return self._apply(lambda t: t.detach().type(dst_type))

    def to_empty(self, *, device: Any, recurse: bool = True) -> Module:
        """Give every parameter and buffer (this module's own with ``recurse=False``),
        and every existing gradient, a new value of its shape and dtype on ``device``
        (None: where it is), keeping the tensors' identity and ``requires_grad``
        (PyTorch's ``to_empty``). PyTorch leaves the new storage uninitialized, for a
        model built on its ``meta`` device whose weights are then loaded or
        initialized; Nova has no ``meta`` device (``device="meta"`` raises) and no
        uninitialized memory, so the values are zeros."""
        from nova.tensor.creation import zeros
        try:
            target = check_device(device, "Module.to_empty") if device is not None else None
        except ValueError as e:
            raise ValueError(f"Module.to_empty: {e} (Nova has no meta device: build the "
                             "module on the CPU or the GPU)") from None
        modules = self.modules() if recurse else (self,)
        for m in modules:
            for table in (m._parameters, m._buffers):
                for t in table.values():
                    if t is None:
                        continue
                    where = target if target is not None else t.device
                    t.data = zeros(*t.shape, dtype=t.dtype, device=where)
                    if t.grad is not None:
                        t.grad = zeros(*t.shape, dtype=t.grad.dtype, device=where)
        return self

    def share_memory(self) -> Module:
        """``share_memory_()`` of every parameter and buffer; returns the module
        (PyTorch's ``share_memory``). Nova's values are immutable and a forked process
        reads them as they were at the fork, so this changes nothing: unlike PyTorch's,
        an in-place update made in another process is not seen by this one (no
        Hogwild-style training across processes; ``Tensor.share_memory_``)."""
        for t in (*self.parameters(), *self.buffers()):
            t.share_memory_()
        return self

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    # ------------------------------------------------------------ state

    # The layout version of this module's own state_dict entries, saved in the
    # ``_metadata`` of every ``state_dict()`` and read back by ``_load_from_state_dict``
    # (BatchNorm's is 2: ``num_batches_tracked`` arrived then), as PyTorch's.
    _version: int = 1

    def get_extra_state(self) -> Any:
        """Override (with ``set_extra_state``) to save any object besides the tensors:
        ``state_dict`` then holds it under ``<prefix>_extra_state``. Never called on a
        module that does not override it."""
        raise RuntimeError(f"{type(self).__name__}.get_extra_state: reached Module's own "
                           "get_extra_state, which state_dict never calls; override it "
                           "together with set_extra_state")

    def set_extra_state(self, state: Any) -> None:
        """Override (with ``get_extra_state``) to restore what ``get_extra_state``
        returned: ``load_state_dict`` passes the ``<prefix>_extra_state`` entry."""
        raise RuntimeError(f"{type(self).__name__}.set_extra_state: reached Module's own "
                           "set_extra_state, which load_state_dict never calls; override it "
                           "together with get_extra_state")

    def _has_extra_state(self, method: str) -> bool:
        """Whether the class overrides ``method`` (``get_extra_state`` or
        ``set_extra_state``): only then is ``_extra_state`` a key, as in PyTorch."""
        return getattr(type(self), method, None) is not getattr(Module, method)

    def state_dict(self, *, destination: dict | None = None, prefix: str = "",
                   keep_vars: bool = False) -> OrderedDict:
        """Parameters and persistent buffers by dotted name, ``prefix`` put before each
        (``prefix="model."``), and ``<prefix>_extra_state`` for a module overriding
        ``get_extra_state``. Every name counts: a module or tensor registered under
        two names is saved under both, as PyTorch's, so checkpoints load either way.
        Values are ``detach()``ed aliases (they follow later in-place updates, outside
        autograd), the registered tensors themselves with ``keep_vars=True``. Entries
        go into ``destination`` when given (and it is returned). A new dict carries
        PyTorch's ``_metadata`` (``{module_path: {"version": ...}}``), which
        ``load_state_dict`` reads. Each module runs its state-dict pre-hooks, saves
        its own entries (``_save_to_state_dict``), its children's, then its post-hooks.
        Keyword-only: PyTorch's deprecated positional form took ``destination`` first."""
        outermost = _DETACHED.get() is None
        token = _DETACHED.set({}) if outermost else None
        try:
            return self._state_dict(destination, prefix, keep_vars)
        finally:
            if token is not None:
                _DETACHED.reset(token)

    def _state_dict(self, destination: dict | None, prefix: str, keep_vars: bool
                    ) -> OrderedDict:
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = {"version": self._version}
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in _hooks(self, "_state_dict_pre_hooks"):
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, child in self._modules.items():
            if child is not None:
                child.state_dict(destination=destination, prefix=f"{prefix}{name}.",
                                 keep_vars=keep_vars)
        for hook, public in _hooks(self, "_state_dict_hooks"):
            result = hook(self, destination, prefix, local_metadata)
            if public and result is not None:
                raise RuntimeError(f"{type(self).__name__}: state_dict post-hook "
                                   f"{_hook_name(hook)!r} must return None (modify the "
                                   "state_dict in place)")
            if result is not None:      # (the private form: kept by the root call only)
                destination = result
        return destination

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        """This module's own entries (not its children's) into ``destination``; a
        subclass may override it, as in PyTorch."""
        for name, p in self._parameters.items():
            if p is not None:
                complex_param = self._complex_parameter(name)
                if complex_param is not None:       # the complex value, as PyTorch's
                    destination[prefix + name] = complex_param if keep_vars else \
                        _detached(p, view_as_complex)
                    continue
                destination[prefix + name] = p if keep_vars else _detached(p)
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else _detached(b)
        if self._has_extra_state("get_extra_state"):
            destination[prefix + _EXTRA_STATE_KEY_SUFFIX] = self.get_extra_state()

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        assign: bool = False) -> _IncompatibleKeys:
        """Load ``state_dict`` into this module and its children, as PyTorch's: each
        module's ``_load_from_state_dict`` (its load pre-hooks, then its parameters,
        persistent buffers and extra state) gets the entries under its prefix and its
        ``_metadata`` entry, then its children load, then its load post-hooks run with
        the keys found so far. Values copy in under no_grad; with ``assign=True`` they
        replace the module's tensors instead (their dtype and device kept; a parameter
        stays a Parameter with the module's ``requires_grad``), so build the optimizer
        after. Arrays (numpy) and numbers are taken as tensors (PyTorch refuses them).
        Missing and unexpected keys raise ``StateDictError`` when ``strict``; mis-shaped
        entries and errors that hooks report always do, after every other entry
        loaded. Returns the named pair ``(missing_keys, unexpected_keys)``."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"load_state_dict: expected state_dict to be dict-like, got "
                            f"{type(state_dict).__name__}")
        missing: list[str] = []
        unexpected: list[str] = []
        errors: list[str] = []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)     # (hooks may edit this copy)
        if metadata is not None:
            state_dict._metadata = metadata

        def load(module: Module, local_state: dict, prefix: str) -> None:
            local_metadata = dict(metadata.get(prefix[:-1], {})) if metadata is not None \
                else {}
            if assign:
                local_metadata["assign_to_params_buffers"] = True
            module._load_from_state_dict(local_state, prefix, local_metadata, True,
                                         missing, unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = f"{prefix}{name}."
                    load(child, {k: v for k, v in local_state.items()
                                 if k.startswith(child_prefix)}, child_prefix)
            incompatible = _IncompatibleKeys(missing, unexpected)
            for hook in _hooks(module, "_load_state_dict_post_hooks"):
                if hook(module, incompatible) is not None:
                    raise _HookResultError(
                        f"{type(module).__name__}: load_state_dict post-hook "
                        f"{_hook_name(hook)!r} returned a value; it must return None and "
                        "edit incompatible_keys.missing_keys/unexpected_keys in place")

        token = _ASSIGNED.set({} if assign else None)
        try:
            load(self, state_dict, "")
        finally:
            _ASSIGNED.reset(token)
        problems = []
        if strict and missing:
            problems.append("missing keys: " + ", ".join(missing))
        if strict and unexpected:
            problems.append("unexpected keys: " + ", ".join(unexpected))
        problems += errors
        if problems:
            raise StateDictError(f"load_state_dict for {type(self).__name__}: "
                                 + " | ".join(problems))
        return _IncompatibleKeys(missing, unexpected)

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str,
                              local_metadata: dict[str, Any], strict: bool,
                              missing_keys: list[str], unexpected_keys: list[str],
                              error_msgs: list[str]) -> None:
        """Load this module's own entries (not its children's) from ``state_dict``
        (the entries under ``prefix``, a copy a subclass may edit before calling this,
        as BatchNorm does for old checkpoints), PyTorch's per-module step: the load
        pre-hooks run, then each parameter and persistent buffer loads, then the
        extra state; with ``strict`` what is absent goes to ``missing_keys`` and what
        no parameter, buffer or child claims to ``unexpected_keys``. Problems go to
        ``error_msgs``, raised together by ``load_state_dict``. ``local_metadata`` is
        this module's ``_metadata`` entry (``version``), with
        ``assign_to_params_buffers`` for ``assign=True``."""
        for hook, with_module in _hooks(self, "_load_state_dict_pre_hooks"):
            args = (state_dict, prefix, local_metadata, strict, missing_keys,
                    unexpected_keys, error_msgs)
            hook(self, *args) if with_module else hook(*args)
        local_state = {name: t if (c := self._complex_parameter(name)) is None else c
                       for name, t in self._parameters.items() if t is not None}
        local_state.update((name, t) for name, t in self._buffers.items()
                           if t is not None and name not in self._non_persistent_buffers_set)
        assign = bool(local_metadata.get("assign_to_params_buffers", False))
        for name, target in local_state.items():
            key = prefix + name
            if key in state_dict:
                self._load_entry(name, key, target, state_dict[key], assign, error_msgs)
            elif strict:
                missing_keys.append(key)
        extra_key = prefix + _EXTRA_STATE_KEY_SUFFIX
        if self._has_extra_state("set_extra_state"):
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        elif strict and extra_key in state_dict:
            unexpected_keys.append(extra_key)
        if strict:
            for key in state_dict:
                if not key.startswith(prefix) or key == extra_key:
                    continue
                head, dotted, _ = key[len(prefix):].partition(".")
                if head not in (self._modules if dotted else local_state):
                    unexpected_keys.append(key)

    def _load_entry(self, name: str, key: str, target: Tensor, value: Any, assign: bool,
                    error_msgs: list[str]) -> None:
        """Copy (``assign``: put) checkpoint ``value`` into this module's parameter or
        buffer ``name`` (``target``), or say in ``error_msgs`` why not."""
        if isinstance(value, ComplexTensor) != isinstance(target, ComplexTensor):
            error_msgs.append(f"dtype mismatch for {key}: checkpoint {value.dtype} vs model "
                              f"{target.dtype} (complex and real tensors do not copy)")
            return
        if not isinstance(value, _BUFFER_TYPES):
            from nova.tensor.creation import tensor
            try:
                value = tensor(value)
            except (TypeError, ValueError) as e:
                error_msgs.append(f'while copying the parameter named "{key}": expected a '
                                  f"Tensor (or an array) from the checkpoint, got "
                                  f"{type(value).__name__} ({e})")
                return
        shape = target.shape        # (a lazy module's uninitialized tensor raises here)
        if len(shape) == 0 and value.shape == (1,):     # PyTorch 0.3 saved scalars so
            value = value[0]
        if value.shape != shape:
            error_msgs.append(f"size mismatch for {key}: checkpoint {value.shape} vs "
                              f"model {shape}")
            return
        with no_grad():
            if not assign:
                target.copy_(value)
                return
            if isinstance(target, ComplexParameter) or \
                    (isinstance(target, Parameter) and not isinstance(value, Parameter)):
                # one Parameter per checkpoint tensor: entries that are one object (tied
                # weights, stored once) stay one Parameter, as PyTorch's share storage
                memo = _ASSIGNED.get()
                made = memo.get(id(value)) if memo is not None else None
                if made is None:
                    made = (value, Parameter(value.detach(), requires_grad=target.requires_grad))
                    if memo is not None:
                        memo[id(value)] = made
                value = made[1]
            elif isinstance(target, Parameter):
                value.requires_grad_(target.requires_grad)
            setattr(self, name, value)

    # ------------------------------------------------------------ state-dict hooks

    def register_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Call ``hook(module, prefix, keep_vars)`` as ``state_dict`` begins on this
        module (before its entries are saved)."""
        return self._add_hook("_state_dict_pre_hooks", _callable(hook, "state_dict pre"),
                              False)

    def register_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """Call ``hook(module, state_dict, prefix, local_metadata)`` once this module's
        entries and its children's are in ``state_dict``; it may edit ``state_dict``
        (and ``local_metadata``) in place and must return None."""
        return self._add_hook("_state_dict_hooks",
                              (_callable(hook, "state_dict post"), True), False)

    def _register_state_dict_hook(self, hook: Callable) -> RemovableHandle:
        """PyTorch's private form of ``register_state_dict_post_hook``: a returned dict
        replaces the result, when this module is the one ``state_dict`` was called on."""
        return self._add_hook("_state_dict_hooks",
                              (_callable(hook, "state_dict post"), False), False)

    def register_load_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Call ``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` as this module's ``_load_from_state_dict``
        begins; it may edit ``state_dict`` (this module's copy) and the lists."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def _register_load_state_dict_pre_hook(self, hook: Callable,
                                           with_module: bool = False) -> RemovableHandle:
        """PyTorch's private form: without ``with_module`` the hook is not passed the
        module (``hook(state_dict, prefix, ...)``)."""
        return self._add_hook("_load_state_dict_pre_hooks",
                              (_callable(hook, "load_state_dict pre"), bool(with_module)),
                              False)

    def register_load_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """Call ``hook(module, incompatible_keys)`` once this module and its children
        have loaded; it may edit ``incompatible_keys.missing_keys`` and
        ``.unexpected_keys`` in place (which ``strict`` then judges) and must return
        None."""
        return self._add_hook("_load_state_dict_post_hooks",
                              _callable(hook, "load_state_dict post"), False)

    # ------------------------------------------------------------ calling, printing

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    # Forward hooks by handle id: (hook, with_kwargs[, always_call]); full backward
    # hooks and pre-hooks by handle id: the hook. None until one is registered (class
    # attributes), so a call without hooks checks four attributes.
    _forward_pre_hooks: OrderedDict | None = None
    _forward_hooks: OrderedDict | None = None
    _backward_hooks: OrderedDict | None = None
    _backward_pre_hooks: OrderedDict | None = None
    # State-dict hooks by handle id, None until one is registered: pre-hooks, the hook;
    # post-hooks, (hook, registered through the public API); load pre-hooks, (hook,
    # with_module); load post-hooks, the hook.
    _state_dict_pre_hooks: OrderedDict | None = None
    _state_dict_hooks: OrderedDict | None = None
    _load_state_dict_pre_hooks: OrderedDict | None = None
    _load_state_dict_post_hooks: OrderedDict | None = None

    # ``compile()``'s compiled call (None: not compiled in place).
    _compiled_call_impl: _CompiledCall | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._compiled_call_impl is not None and not is_grad_enabled():
            return self._compiled_call_impl.run(self, args, kwargs)
        return self._call_impl(*args, **kwargs)

    def _call_impl(self, *args: Any, **kwargs: Any) -> Any:
        """The call without ``compile()``'s replay: ``forward`` between the hooks (what
        the compiled call records)."""
        if self._forward_pre_hooks or self._forward_hooks or self._backward_hooks or \
                self._backward_pre_hooks or _global_forward_pre_hooks or \
                _global_forward_hooks or _global_backward_hooks or _global_backward_pre_hooks:
            return self._call_with_hooks(args, kwargs)
        return self.forward(*args, **kwargs)

    def compile(self, *args: Any, **kwargs: Any) -> None:
        """Compile this module's calls in place (PyTorch's ``Module.compile``): the
        arguments are ``nv.compile``'s, which compiles ``_call_impl`` (``forward``
        between the hooks). As ``nv.compile(module)``'s calls, those made without
        gradient recording (evaluation, generation) replay; a call that records for
        autograd runs the module as it is (its backward is derived from what it
        records; compile the training-step function to replay training). A copy or
        unpickled module compiles its own call on first use."""
        object.__setattr__(self, "_compiled_call_impl", _CompiledCall(self, args, kwargs))

    def _call_with_hooks(self, args: tuple, kwargs: dict) -> Any:
        """``forward`` between its hooks, with PyTorch's rules: a pre-hook may return new
        positional arguments (a non-tuple is one argument), or with ``with_kwargs`` a
        pair (args, kwargs); a forward hook may return a new output. Hooks run in
        registration order (``prepend=True`` puts one first), the global ones
        (``register_module_forward_hook`` and kin) before the module's own;
        ``always_call`` hooks also run, with the output None, when forward raises."""
        for hook, with_kwargs in [*_global_forward_pre_hooks.values(),
                                  *(self._forward_pre_hooks or {}).values()]:
            if with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError(
                            f"{type(self).__name__}: a forward pre-hook with with_kwargs=True "
                            f"must return None or an (args, kwargs) pair, got "
                            f"{type(result).__name__}")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        backward = None
        full = [*_global_backward_hooks.values(), *(self._backward_hooks or {}).values()]
        pre = [*_global_backward_pre_hooks.values(), *(self._backward_pre_hooks or {}).values()]
        if (full or pre) and is_grad_enabled():
            backward = _BackwardHooks(self, full, pre)
            args = backward.wrap_inputs(args)
        hooks = [*_global_forward_hooks.values(), *(self._forward_hooks or {}).values()]
        try:
            output = self.forward(*args, **kwargs)
        except Exception:
            for hook, with_kwargs, always_call in hooks:
                if always_call:
                    hook(self, args, kwargs, None) if with_kwargs else hook(self, args, None)
            raise
        if backward is not None:
            backward.check_inputs_unwritten()
        for hook, with_kwargs, _ in hooks:
            result = hook(self, args, kwargs, output) if with_kwargs else \
                hook(self, args, output)
            if result is not None:
                output = result
        return output if backward is None else backward.wrap_output(output)

    def _add_hook(self, table: str, entry: Any, prepend: bool) -> RemovableHandle:
        hooks = self.__dict__.get(table)
        if hooks is None:
            hooks = OrderedDict()
            object.__setattr__(self, table, hooks)
        handle = RemovableHandle(lambda hook_id: hooks.pop(hook_id, None))
        hooks[handle.id] = entry
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """Call ``hook(module, args)`` (``hook(module, args, kwargs)`` with
        ``with_kwargs``) before every ``forward``; see ``_call_with_hooks``."""
        if not callable(hook):
            raise TypeError(f"register_forward_pre_hook: hook must be callable, got "
                            f"{type(hook).__name__}")
        return self._add_hook("_forward_pre_hooks", (hook, with_kwargs), prepend)

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False,
                              with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """Call ``hook(module, args, output)`` (``hook(module, args, kwargs, output)``
        with ``with_kwargs``) after every ``forward``; see ``_call_with_hooks``. Inside
        ``nv.compile`` a hook runs only while calls are recorded, as any Python."""
        if not callable(hook):
            raise TypeError(f"register_forward_hook: hook must be callable, got "
                            f"{type(hook).__name__}")
        return self._add_hook("_forward_hooks", (hook, with_kwargs, always_call), prepend)

    def register_full_backward_hook(self, hook: Callable,
                                    prepend: bool = False) -> RemovableHandle:
        """Call ``hook(module, grad_input, grad_output)`` once the backward of each later
        call has the gradients of its positional tensor inputs (PyTorch's rules):
        ``grad_output`` holds the gradients of the outputs (a Tensor or the tensors of a
        tuple), ``grad_input`` those of the positional arguments, ``None`` where an
        argument is not a tensor or does not require grad (PyTorch passes zeros for a
        tensor that does not when another does), and where an output is not a tensor,
        does not require grad or got no gradient in this pass. A returned tuple
        (one entry per positional argument, shapes kept) replaces ``grad_input``: it is
        what flows on to the layers before. When no input requires grad the hook runs
        with the output gradients (``grad_input`` all None, with PyTorch's warning) and
        must return None. ``forward`` sees its tensor inputs through an identity, which
        it must not modify in place (an error, as in PyTorch); each call's hooks run
        once per backward pass, with that call's gradients. The backward runs them as
        Python, so an ``nv.compile`` call through such a module records every time
        (with a warning), as with ``nv.autograd.Function``."""
        if not callable(hook):
            raise TypeError(f"register_full_backward_hook: hook must be callable, got "
                            f"{type(hook).__name__}")
        return self._add_hook("_backward_hooks", hook, prepend)

    def register_full_backward_pre_hook(self, hook: Callable,
                                        prepend: bool = False) -> RemovableHandle:
        """Call ``hook(module, grad_output)`` when the backward of each later call has
        its outputs' gradients, before they flow into the module (``grad_output`` as for
        ``register_full_backward_hook``). A returned tuple of one gradient per output (a
        Tensor for a single one) replaces ``grad_output``, for the layers inside and
        for the full backward hooks."""
        if not callable(hook):
            raise TypeError(f"register_full_backward_pre_hook: hook must be callable, got "
                            f"{type(hook).__name__}")
        return self._add_hook("_backward_pre_hooks", hook, prepend)

    def register_backward_hook(self, hook: Callable) -> RemovableHandle:
        """Refused: PyTorch's deprecated form hooks the last autograd node of
        ``forward``, so its ``grad_input`` is laid out as PyTorch's kernels happen to
        be (a Linear's has three entries); Nova's nodes differ, so an alias would hand
        such a hook silently different tuples. Use ``register_full_backward_hook``."""
        raise NotImplementedError(
            f"{type(self).__name__}.register_backward_hook: the deprecated non-full "
            "backward hook (its grad_input follows PyTorch's internal autograd nodes) is "
            "not provided; use register_full_backward_hook(hook), whose grad_input has "
            "one gradient per positional input")

    def extra_repr(self) -> str:
        """The module's own settings for ``repr``: one line, or several separated by
        newlines (each then printed on its own line). Empty by default."""
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        """PyTorch's layout: ``Name(extra)`` on one line when ``extra_repr`` is a single
        line and there are no children; otherwise every extra line and every child
        ``(name): repr`` on its own line, indented two spaces (children's inner lines
        by two more), then ``)`` on a line of its own."""
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): {_addindent(repr(m), 2)}"
                       for name, m in self._modules.items()]
        lines = extra_lines + child_lines
        body = ""
        if len(extra_lines) == 1 and not child_lines:
            body = extra_lines[0]
        elif lines:
            body = "\n  " + "\n  ".join(lines) + "\n"
        return f"{self._get_name()}({body})"


def _addindent(text: str, spaces: int) -> str:
    """Indent every line of ``text`` but the first by ``spaces`` (a child's repr placed
    after its ``(name): `` prefix)."""
    first, *rest = text.split("\n")
    return "\n".join([first] + [" " * spaces + line for line in rest])


class _CompiledCall:
    """``Module.compile()``'s compiled call: ``nv.compile`` of its module's
    ``_call_impl``. A shallow copy of the module shares this object and a deep copy or
    an unpickled module gets one with the options only; either compiles a call of its
    own on first use rather than running the original module's."""

    def __init__(self, module: Module | None, args: tuple, kwargs: dict[str, Any]):
        self.args, self.kwargs = args, kwargs
        self._owner: weakref.ref | None = None
        self._fn: Callable | None = None
        if module is not None:
            # ``nova.compile`` (nova/capture.py) imports nn.module for its isinstance
            # check: reached through the package at call time, after both are loaded.
            import nova
            self._fn = nova.compile(module._call_impl, *args, **kwargs)
            self._owner = weakref.ref(module)

    def run(self, module: Module, args: tuple, kwargs: dict[str, Any]) -> Any:
        if self._owner is None or self._owner() is not module:
            own = _CompiledCall(module, self.args, self.kwargs)
            object.__setattr__(module, "_compiled_call_impl", own)
            return own._fn(*args, **kwargs)
        return self._fn(*args, **kwargs)

    def __reduce__(self) -> tuple:
        return (_CompiledCall, (None, self.args, self.kwargs))

    def __deepcopy__(self, memo: dict) -> _CompiledCall:
        return _CompiledCall(None, self.args, dict(self.kwargs))


class _BackwardHookFunction(Function):
    """The identity on some tensors, whose backward hands their gradients (together,
    as one autograd node sees them) to ``on_grads``, which returns those to pass on."""

    @staticmethod
    def forward(ctx: Any, on_grads: Callable[[tuple], tuple], *tensors: Tensor) -> tuple:
        ctx.on_grads = on_grads
        return tensors

    @staticmethod
    def backward(ctx: Any, *grads: Tensor) -> tuple:
        return (None, *ctx.on_grads(grads))


def _identity(tensors: list[Tensor], on_grads: Callable[[tuple], tuple]) -> tuple:
    """``tensors`` through one ``_BackwardHookFunction``. Tensors of several dtypes pass
    in the dtype they promote to (a Function packs its outputs into one tensor), and
    ``on_grads`` sees and returns gradients in the tensors' own dtypes: each round trip
    is exact, a wider float holding every value of a narrower one."""
    dtypes = [t.dtype for t in tensors]
    if len(set(dtypes)) == 1:
        return _BackwardHookFunction.apply(on_grads, *tensors)
    wide = functools.reduce(promote_types, dtypes)

    def on_wide(grads: tuple) -> tuple:
        return on_grads(tuple(g.to(d) for g, d in zip(grads, dtypes)))
    views = _BackwardHookFunction.apply(on_wide, *(t.to(wide) for t in tensors))
    return tuple(v.to(d) for v, d in zip(views, dtypes))


def _hook_name(hook: Callable) -> str:
    return getattr(hook, "__name__", repr(hook))


class _BackwardHooks:
    """One call's full backward hooks and pre-hooks (PyTorch's ``BackwardHook``).

    The tensor inputs that require grad enter ``forward`` through one identity node,
    and the tensor outputs that require grad leave through another. In the backward the
    output node runs first (everything the caller did with the outputs feeds it): it
    gets the output gradients together, runs the pre-hooks and keeps the result; the
    input node runs after the whole of the module's backward and gets the input
    gradients together: it runs the full hooks with those and the kept output
    gradients, and passes on what they return. A pass that reaches the inputs without
    going through the outputs runs no hook, as in PyTorch."""

    def __init__(self, module: Module, hooks: list[Callable], pre_hooks: list[Callable]):
        self.module = module
        self.hooks = hooks
        self.pre_hooks = pre_hooks
        self.n_inputs = 0
        # positions of the inputs wrapped (None: none requires grad), their shapes and
        # the views forward got, with their versions then
        self.input_index: list[int] | None = None
        self.input_shapes: list[tuple[int, ...]] = []
        self.views: list[tuple[Tensor, int]] = []
        self.n_outputs = 0
        self.output_index: list[int] = []
        self.output_shapes: list[tuple[int, ...]] = []
        # per wrapped output, whether this pass has given it a gradient (the output node
        # gets zeros for one that got none, which the hooks must see as None)
        self.reached: list[bool] = []
        self.grad_outputs: tuple | None = None

    def wrap_inputs(self, args: tuple) -> tuple:
        """``args`` with the tensors that require grad replaced by identity views."""
        self.n_inputs = len(args)
        index = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        if not index or not self.hooks:
            return args
        self.input_index = index
        self.input_shapes = [args[i].shape for i in index]
        views = _identity([args[i] for i in index], self._on_grad_inputs)
        self.views = [(v, v._version) for v in views]
        out = list(args)
        for i, v in zip(index, views):
            out[i] = v
        return tuple(out)

    def check_inputs_unwritten(self) -> None:
        """An in-place write by ``forward`` into an input view would not reach the
        caller's tensor (and would bypass the input node): refused, as PyTorch does."""
        for k, (view, version) in enumerate(self.views):
            if view._version != version:
                raise RuntimeError(
                    f"{type(self.module).__name__}: forward modified its input "
                    f"{self.input_index[k]} in place, which a module with full backward "
                    "hooks may not do (its forward sees its inputs through an identity, "
                    "as in PyTorch); compute out of place (inplace=False) or clone the "
                    "input first")
        self.views = []

    def wrap_output(self, output: Any) -> Any:
        """``output`` (a Tensor or a tuple) with the tensors that require grad replaced
        by identity views."""
        single = isinstance(output, Tensor)
        if not single and not isinstance(output, tuple):
            warnings.warn(f"{type(self.module).__name__}: for backward hooks to be called, "
                          "module output should be a Tensor or a tuple of Tensors but "
                          f"received {type(output).__name__}", stacklevel=4)
            return output
        outs = (output,) if single else output
        self.n_outputs = len(outs)
        index = [k for k, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
        if not index:
            return output
        self.output_index = index
        self.output_shapes = [outs[k].shape for k in index]
        self.reached = [len(index) == 1] * len(index)
        views = _identity([outs[k] for k in index], self._on_grad_outputs)
        if len(index) > 1:
            for j, v in enumerate(views):
                v.register_hook(functools.partial(self._reach, j))
        new = list(outs)
        for k, v in zip(index, views):
            new[k] = v
        if single:
            return new[0]
        return tuple(new) if type(output) is tuple else type(output)(*new)

    def _reach(self, j: int, grad: Tensor) -> None:
        self.reached[j] = True

    def _on_grad_outputs(self, grads: tuple) -> tuple:
        go: tuple = self._spread(self.n_outputs, self.output_index,
                                 [g if hit else None for g, hit in zip(grads, self.reached)])
        if len(self.output_index) > 1:
            self.reached = [False] * len(self.output_index)
        for hook in self.pre_hooks:
            result = hook(self.module, go)
            if result is not None:
                result = (result,) if isinstance(result, Tensor) else result
                go = self._replacement(hook, "pre-hook", "grad_output", result, self.n_outputs)
        if self.hooks and self.input_index is None:
            warnings.warn(f"{type(self.module).__name__}: full backward hook is firing when "
                          "gradients are computed with respect to module outputs since no "
                          "inputs require gradients", stacklevel=2)
            gi = (None,) * self.n_inputs
            for hook in self.hooks:
                result = hook(self.module, gi, go)
                if result is not None and not (isinstance(result, tuple) and
                                               all(r is None for r in result)):
                    raise RuntimeError(
                        f"{type(self.module).__name__}: backward hook {_hook_name(hook)!r} "
                        "returned gradients, but no input of this call requires gradient: "
                        "it should return None or None for all gradients")
        elif self.hooks:
            self.grad_outputs = go
        return self._gather(go, self.output_index, self.output_shapes, "pre-hook",
                            "output")

    def _on_grad_inputs(self, grads: tuple) -> tuple:
        if self.grad_outputs is None:
            return grads
        gi = self._spread(self.n_inputs, self.input_index, list(grads))
        for hook in self.hooks:
            result = hook(self.module, gi, self.grad_outputs)
            if result is not None:
                gi = self._replacement(hook, "hook", "grad_input", result, self.n_inputs)
        self.grad_outputs = None
        return self._gather(gi, self.input_index, self.input_shapes, "hook", "input")

    @staticmethod
    def _spread(n: int, index: list[int], values: list[Any]) -> tuple:
        """``n`` entries: ``values`` at positions ``index``, None elsewhere."""
        out: list[Any] = [None] * n
        for k, v in zip(index, values):
            out[k] = v
        return tuple(out)

    def _replacement(self, hook: Callable, kind: str, what: str, result: Any,
                     n: int) -> tuple:
        if not isinstance(result, (tuple, list)):
            raise TypeError(f"{type(self.module).__name__}: backward {kind} "
                            f"{_hook_name(hook)!r} must return None or a tuple of {n} "
                            f"gradients (its {what}), got {type(result).__name__}")
        if len(result) != n:
            raise RuntimeError(f"{type(self.module).__name__}: backward {kind} "
                               f"{_hook_name(hook)!r} returned an invalid number of {what}, "
                               f"got {len(result)}, but expected {n}")
        return tuple(result)

    def _gather(self, grads: tuple, index: list[int], shapes: list[tuple[int, ...]],
                kind: str, what: str) -> tuple:
        """The entries of ``grads`` at ``index``, each None or a tensor of its shape."""
        out = []
        for k, shape in zip(index, shapes):
            g = grads[k]
            if g is not None and (not isinstance(g, Tensor) or g.shape != shape):
                raise RuntimeError(
                    f"{type(self.module).__name__}: a backward {kind} replaced the gradient "
                    f"of {what} {k} (shape {shape}) with "
                    f"{getattr(g, 'shape', type(g).__name__)}; a replacement must be None "
                    "or a tensor of the same shape")
            out.append(g)
        return tuple(out)
