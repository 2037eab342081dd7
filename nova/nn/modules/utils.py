"""``torch.nn.modules.utils``: the argument helpers custom layers import
(``_pair(3) == (3, 3)``), and ``consume_prefix_in_state_dict_if_present``."""
from __future__ import annotations

import collections.abc
from collections.abc import Callable
from itertools import repeat
from typing import Any


def _ntuple(n: int, name: str = "parse") -> Callable[[Any], tuple]:
    """A parser giving an iterable as a tuple, and anything else repeated ``n`` times."""
    def parse(x: Any) -> tuple:
        if isinstance(x, collections.abc.Iterable):
            return tuple(x)
        return tuple(repeat(x, n))
    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t: tuple, n: int) -> tuple:
    """``t`` reversed, each element repeated ``n`` times: a conv's padding per dim as
    ``F.pad`` takes it (last dim first)."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size: list, defaults: list) -> list:
    """``out_size`` with each None taken from the matching trailing ``defaults``."""
    if isinstance(out_size, int):
        return out_size
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [v if v is not None else d for v, d in zip(out_size, defaults[-len(out_size):])]


def consume_prefix_in_state_dict_if_present(state_dict: dict[str, Any], prefix: str) -> None:
    """Strip ``prefix`` from every key of ``state_dict`` that starts with it, in place
    (a ``DataParallel`` checkpoint's ``module.``), and from its ``_metadata``."""
    for key in list(state_dict.keys()):
        if key.startswith(prefix):
            state_dict[key[len(prefix):]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        for key in list(metadata.keys()):
            if len(key) == 0:
                continue
            if key == prefix.replace(".", "") or key.startswith(prefix):
                metadata[key[len(prefix):]] = metadata.pop(key)


__all__ = ["consume_prefix_in_state_dict_if_present"]
