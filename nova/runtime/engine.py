"""Which engine realizes steps (``cpu``, compiled, the default; or ``interp``) and how
much the backward recomputes (remat mode).

Both are per thread, like grad mode: ``contextvars`` hold them, so ``nv.engine("interp")``
or ``nv.set_remat(...)`` in one thread leaves steps realized by other threads alone. A
thread starts with the process defaults, ``NOVA_ENGINE`` and ``NOVA_REMAT`` (``cpu`` and
``default`` when unset)."""
from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from nova import config
from nova.runtime.executable import ENGINES

_DEFAULT_ENGINE = config.ENGINE.get()
if _DEFAULT_ENGINE not in ENGINES:
    raise ValueError(f"NOVA_ENGINE={_DEFAULT_ENGINE!r} is not an engine; valid: {ENGINES}")
_engine: contextvars.ContextVar[str] = contextvars.ContextVar("nova_engine",
                                                              default=_DEFAULT_ENGINE)


def get_engine() -> str:
    return _engine.get()


def set_engine(name: str) -> None:
    """``nv.set_engine("cpu" | "interp" | "mlir")``: the engine for this thread's later
    realizations (``mlir``: upstream MLIR's linalg pipeline, the ``mlir`` extra)."""
    if name not in ENGINES:
        raise ValueError(f"set_engine: unknown engine {name!r}; valid engines are {ENGINES}")
    if name == "mlir":
        from nova.runtime.mlir_engine import unavailable_reason
        why = unavailable_reason()
        if why is not None:
            raise RuntimeError(f"set_engine: the mlir engine cannot run here: {why}")
    _engine.set(name)


@contextlib.contextmanager
def engine(name: str) -> Iterator[None]:
    """Temporarily realize with another engine: ``with nv.engine("interp"): ...``."""
    prev = get_engine()
    set_engine(name)
    try:
        yield
    finally:
        set_engine(prev)


_remat: contextvars.ContextVar[str] = contextvars.ContextVar(
    "nova_remat", default=config.REMAT.get())


def get_remat() -> str:
    return _remat.get()


def set_remat(mode: str) -> None:
    """``nv.set_remat("off" | "default" | "aggressive")``: how much of the forward the
    backward recomputes instead of keeping (see nova.compiler.passes.remat), for this
    thread. A step compiled under another mode compiles again."""
    from nova.compiler.passes.remat import MODES
    if mode not in MODES:
        raise ValueError(f"set_remat: unknown mode {mode!r}; valid modes are {MODES}")
    _remat.set(mode)
