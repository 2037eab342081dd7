"""PyTorch's NumPy-style keyword aliases: ``axis=`` for ``dim=``, ``keepdims=`` for
``keepdim=``.

PyTorch's argument parser accepts them for every function and method with a ``dim`` or
``keepdim`` parameter (``x.sum(axis=-1)``, ``torch.cat(ts, axis=1)``, ``x.mean(1,
keepdims=True)``), and ported code uses them (Spinning Up's SAC sums log-probs with
``.sum(axis=-1)``). Nova's functions name their parameters as PyTorch documents them;
``install`` wraps, once at import, each public function of a namespace and each method
of ``Tensor`` that has such a parameter (and no ``axis``/``keepdims`` of its own), so
that the alias is renamed before the call. Giving both a name and its alias is
PyTorch's TypeError. A call without keyword arguments pays one truth test. The
wrapper's ``__signature__`` lists the aliases (keyword-only), so ``inspect.signature``
shows every keyword it takes.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

ALIASES = (("axis", "dim"), ("keepdims", "keepdim"))


def _renames(fn: Callable) -> tuple[tuple[str, str], ...]:
    """The (alias, name) pairs ``fn`` takes: its parameters named ``dim``/``keepdim``
    whose alias it does not already take."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return ()
    return tuple((alias, name) for alias, name in ALIASES
                 if name in params and alias not in params)


def _aliased(fn: Callable, renames: tuple[tuple[str, str], ...], what: str) -> Callable:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if kwargs:
            for alias, name in renames:
                if alias in kwargs:
                    if name in kwargs:
                        raise TypeError(f"{what}() got both '{name}' and its alias "
                                        f"'{alias}'")
                    kwargs[name] = kwargs.pop(alias)
        return fn(*args, **kwargs)
    call.__nova_aliases__ = True
    call.__signature__ = _signature(fn, renames)
    return call


def _signature(fn: Callable, renames: tuple[tuple[str, str], ...]) -> inspect.Signature:
    """``fn``'s signature with the aliases it now takes as keyword-only parameters (so
    ``inspect.signature`` and ``help`` show every keyword the wrapper accepts)."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    tail = [p for p in params if p.kind is p.VAR_KEYWORD]
    head = [p for p in params if p.kind is not p.VAR_KEYWORD]
    extra = [inspect.Parameter(alias, inspect.Parameter.KEYWORD_ONLY,
                               default=sig.parameters[name].default)
             for alias, name in renames]
    return sig.replace(parameters=head + extra + tail)


def _wrap(obj: Any, what: str) -> Any:
    """``obj`` wrapped if it is a plain function with a parameter to alias, else None."""
    if not inspect.isfunction(obj) or getattr(obj, "__nova_aliases__", False):
        return None
    renames = _renames(obj)
    return _aliased(obj, renames, what) if renames else None


# id(function) -> its wrapper (None: nothing to alias), shared by every namespace so
# that a function exported under several names and modules (``nv.softmax`` and
# ``nv.special.softmax``, ``nv.cosine_similarity`` and ``F.cosine_similarity``) stays
# one object (each entry keeps its function, so the id is never reused).
_DONE: dict[int, tuple[Any, Any]] = {}


def install(namespace: dict[str, Any]) -> None:
    """Alias the keyword arguments of ``namespace``'s public functions (one function
    exported under several names or in several namespaces gets one wrapper)."""
    done = _DONE
    for name, obj in list(namespace.items()):
        if name.startswith("__") or not callable(obj):
            continue
        if getattr(obj, "__nova_aliases__", False):
            continue
        key = id(obj)
        if key not in done:
            done[key] = (obj, _wrap(obj, name))
        if done[key][1] is not None:
            namespace[name] = done[key][1]


def install_methods(cls: type) -> None:
    """Alias the keyword arguments of ``cls``'s methods (``Tensor.sum(axis=...)``)."""
    for name, obj in list(vars(cls).items()):
        if name.startswith("__"):
            continue
        wrapped = _wrap(obj, name)
        if wrapped is not None:
            setattr(cls, name, wrapped)


__all__ = ["ALIASES", "install", "install_methods"]
