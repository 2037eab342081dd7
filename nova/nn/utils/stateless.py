"""``torch.nn.utils.stateless``: ``functional_call``, PyTorch 1.x's home of what is now
``torch.func.functional_call``, kept with PyTorch's deprecation warning.

The implementation lives here (``_functional_call``, as in PyTorch, whose
``torch.func.functional_call`` is this module's function): the given tensors are put
into the module's parameter and buffer tables for the call and the originals put back
afterwards, even when the call raises, so the output is differentiable with respect to
the given tensors and the module is unchanged.
"""
from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from nova.nn.module import Module
from nova.nn.utils.parametrize import is_parametrized
from nova.tensor.tensor import Tensor

_MISSING = object()     # the module had no attribute of that name before the call


def _named_tensors(module: Module) -> Iterator[tuple[str, Tensor]]:
    """Every parameter and buffer under every dotted name that reaches it: a tied tensor
    or a submodule registered twice appears once per name (PyTorch's
    ``remove_duplicate=False``)."""
    def walk(m: Module, prefix: str, path: frozenset) -> Iterator[tuple[str, Tensor]]:
        for table in (m._parameters, m._buffers):
            for name, t in table.items():
                if t is not None:
                    yield prefix + name, t
        for name, child in m._modules.items():
            if child is not None and id(child) not in path:
                yield from walk(child, f"{prefix}{name}.", path | {id(child)})
    yield from walk(module, "", frozenset({id(module)}))


def _untie(module: Module, given: dict[str, Tensor]) -> dict[str, Tensor]:
    """``given`` plus, for every given name of a tied tensor, the tensor's other names
    with the same value; two different values for one tied tensor are an error."""
    names_of: dict[int, list[str]] = {}
    for name, t in _named_tensors(module):
        names_of.setdefault(id(t), []).append(name)
    untied = dict(given)
    for names in names_of.values():
        if len(names) < 2:
            continue
        values = {id(given[n]): given[n] for n in names if n in given}
        if len(values) > 1:
            raise ValueError(f"functional_call got multiple values for keys {sorted(names)}, "
                             "which are tied. Consider using tie_weights=False")
        for value in values.values():
            untied.update({n: value for n in names})
    return untied


def _check_strict(module: Module, keys: Sequence[str]) -> None:
    valid = {name for name, _ in _named_tensors(module)}
    missing, unexpected = sorted(valid - set(keys)), sorted(set(keys) - valid)
    errors = []
    if unexpected:
        errors.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
    if missing:
        errors.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
    if errors:
        raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\t"
                           + "\n\t".join(errors))


def _swap(module: Module, path: str, value: Any) -> Any:
    """Put ``value`` at dotted ``path`` and return what was there (``_MISSING`` if
    nothing); ``value`` ``_MISSING`` removes the attribute again."""
    prefix, _, name = path.rpartition(".")
    owner = module.get_submodule(prefix)
    if not name:
        raise KeyError(f"functional_call: tensor name can't be empty (got key {path!r})")
    for table in (owner._parameters, owner._buffers):
        if name in table:
            old = table[name]
            table[name] = value
            return old
    if is_parametrized(owner, name):
        raise ValueError(f"functional_call: '{path}' is parametrized; pass its original "
                         f"tensor(s) instead, e.g. "
                         f"'{prefix + '.' if prefix else ''}parametrizations.{name}.original'")
    old = getattr(owner, name, _MISSING)
    if old is not _MISSING and old is not None and not isinstance(old, Tensor):
        raise TypeError(f"functional_call: attribute `{path}` of {type(owner).__name__} is "
                        f"a {type(old).__name__}, not a Tensor")
    if value is _MISSING:
        delattr(owner, name)
    else:
        setattr(owner, name, value)
    return old


def _merge(dicts: Any) -> dict[str, Tensor]:
    if isinstance(dicts, dict):
        return dicts
    if not isinstance(dicts, Sequence) or isinstance(dicts, str):
        raise ValueError(f"functional_call: expected parameter_and_buffer_dicts to be a "
                         f"dict, or a list/tuple of dicts, but got {type(dicts).__name__}")
    if not all(isinstance(d, dict) for d in dicts):
        raise ValueError("functional_call: expected all elements of "
                         "parameter_and_buffer_dicts to be dictionaries")
    merged: dict[str, Tensor] = {}
    repeated = []
    for d in dicts:
        for k, v in d.items():
            if k in merged and k not in repeated:
                repeated.append(k)
            merged[k] = v
    if repeated:
        raise ValueError(f"functional_call: {repeated} appeared in multiple dictionaries; "
                         "behavior of functional call is ambiguous")
    return merged


def _functional_call(module: Module,
                    parameter_and_buffer_dicts: dict[str, Tensor] | Sequence[dict[str, Tensor]],
                    args: Any = None, kwargs: dict[str, Any] | None = None, *,
                    tie_weights: bool = True, strict: bool = False) -> Any:
    """``module(*args, **kwargs)`` with the tensors named (by ``state_dict`` names) in
    ``parameter_and_buffer_dicts`` (a dict, or a sequence of dicts with distinct keys)
    used in place of the module's parameters and buffers. ``args`` that is not a
    tuple is one positional argument.

    ``tie_weights``: a tensor tied under several names takes the given value under all
    of them (different values for one tied tensor raise ``ValueError``). ``strict``:
    the keys must name exactly the module's parameters and buffers (``RuntimeError``
    otherwise). A key that names nothing is set as an attribute for the call. A
    parametrized tensor is given through its originals
    (``parametrizations.<name>.original``); its parametrized name raises
    ``ValueError``. If the call rebinds a substituted tensor (``self.buf = ...``),
    the given dict receives the new value, as in PyTorch. The module's own tensors are
    restored afterwards, even if the call raises."""
    if not isinstance(module, Module):
        raise TypeError(f"functional_call: expected an nv.nn.Module, got "
                        f"{type(module).__name__}")
    given = _merge(parameter_and_buffer_dicts)
    for k, v in given.items():
        if v is not None and not isinstance(v, Tensor):
            raise TypeError(f"functional_call: the value for {k!r} is a {type(v).__name__}, "
                            "not a Tensor")
    untied = _untie(module, given) if tie_weights else given
    if strict:
        _check_strict(module, list(untied))
    args = () if args is None else args if isinstance(args, tuple) else (args,)
    swapped: list[tuple[str, Any]] = []
    try:
        for path, value in untied.items():
            swapped.append((path, _swap(module, path, value)))
        return module(*args, **(kwargs or {}))
    finally:
        # Last in, first out: a submodule reachable under two names is swapped twice,
        # and only the reverse order puts its own tensor back.
        final = {path: _swap(module, path, old) for path, old in reversed(swapped)}
        given.update({k: final[k] for k in given if k in final})


_DEPRECATION = ("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 "
                "and will be removed in a future version of PyTorch. Please use "
                "`torch.func.functional_call` instead which is a drop-in replacement.")


def functional_call(module: Module, parameters_and_buffers: dict[str, Tensor],
                    args: Any = None, kwargs: dict[str, Any] | None = None, *,
                    tie_weights: bool = True, strict: bool = False) -> Any:
    """``nv.func.functional_call`` (see ``_functional_call``), with PyTorch's
    ``FutureWarning`` that this name is deprecated (its text names ``torch.func``, as
    PyTorch's: ``nv.func.functional_call`` is Nova's drop-in replacement)."""
    warnings.warn(_DEPRECATION, FutureWarning, stacklevel=2)
    return _functional_call(module, parameters_and_buffers, args, kwargs,
                            tie_weights=tie_weights, strict=strict)


__all__ = ["functional_call"]
