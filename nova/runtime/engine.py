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


_remat = {"mode": os.environ.get("NOVA_REMAT", "default")}


def get_remat() -> str:
    return _remat["mode"]


def set_remat(mode: str) -> None:
    """``nv.set_remat("off" | "default" | "aggressive")``: how much of the forward the
    backward recomputes instead of keeping (see nova.compiler.passes.remat). A step
    compiled under another mode compiles again."""
    from nova.compiler.passes.remat import MODES
    if mode not in MODES:
        raise ValueError(f"set_remat: unknown mode {mode!r}; valid modes are {MODES}")
    _remat["mode"] = mode
