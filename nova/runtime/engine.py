"""Which engine realizes steps: ``cpu`` (compiled, the default) or ``interp``."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from nova.runtime.executable import ENGINES

_current = {"engine": os.environ.get("NOVA_ENGINE", "cpu")}
if _current["engine"] not in ENGINES:
    raise ValueError(f"NOVA_ENGINE={_current['engine']!r} is not an engine; valid: {ENGINES}")


def get_engine() -> str:
    return _current["engine"]


def set_engine(name: str) -> None:
    """``nv.set_engine("cpu" | "interp")``: the engine for later realizations."""
    if name not in ENGINES:
        raise ValueError(f"set_engine: unknown engine {name!r}; valid engines are {ENGINES}")
    _current["engine"] = name


@contextlib.contextmanager
def engine(name: str) -> Iterator[None]:
    """Temporarily realize with another engine: ``with nv.engine("interp"): ...``."""
    prev = get_engine()
    set_engine(name)
    try:
        yield
    finally:
        set_engine(prev)
