"""Holding Ctrl-C back while the runtime is in a state it cannot be abandoned in.

Python raises ``KeyboardInterrupt`` between any two bytecodes of the main thread. Most
of a realization can be abandoned there: nothing is bound until the step has run, so
the pending values are simply computed by the next realization. Two places cannot:

- a step that has begun writing results over *donated* buffers (an optimizer update
  over the old parameters): abandoned half-way, the old values are gone and the new
  ones not all written, and re-running it would read overwritten inputs;
- the worker pool between handing chunks out and collecting them
  (``nova.runtime.threads``), which must drain before its next job.

``deferred_interrupt()`` covers such a region: a signal whose handler is Python code
(SIGINT's ``default_int_handler``, and any other the program installed: a SIGALRM
handler raising ``TimeoutError`` is the common timeout idiom) that arrives inside is
recorded and re-delivered, to that handler, once the region is left -- so the user's
Ctrl-C still interrupts, one step boundary later. (Holding back SIGINT alone let an
exception from another handler land between a donating step's run and its binding:
the next realization ran the step again over the overwritten buffers, applying an
update twice.) Deferral needs the main thread (only it runs Python signal handlers,
and only it may install them); elsewhere the region runs as is, which is safe because
no signal handler raises there.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

# Every signal a handler can be installed for (SIGKILL and SIGSTOP cannot have one).
_SIGNALS = tuple(sorted(set(signal.valid_signals())
                        - {getattr(signal, "SIGKILL", None), getattr(signal, "SIGSTOP", None)}))


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Run the body with the Python-level signal handlers held back; a signal received
    meanwhile is re-raised (through its handler) on exit, once per signal number."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    getsignal = signal.getsignal
    held = {}
    for signum in _SIGNALS:
        handler = getsignal(signum)
        if callable(handler):     # (None: installed outside Python; SIG_DFL/SIG_IGN: ints)
            held[signum] = handler
    if not held:
        yield
        return
    received: list[int] = []

    def record(signum: int, frame: object) -> None:
        received.append(signum)
    for signum in held:
        signal.signal(signum, record)
    try:
        yield
    finally:
        for signum, handler in held.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(received):
            signal.raise_signal(signum)   # delivered now, to its handler


def raised_by_signal_handler(e: BaseException) -> bool:
    """Whether ``e`` was raised by a Python signal handler (its traceback passes through
    the code of a handler installed now): an asynchronous exception, the program's own
    (a SIGALRM timeout's), never a failure of the step it interrupted. Realization must
    let it through rather than treat it as a step that failed and retry in parts, which
    swallowed it. Only asked on the failure path."""
    codes = set()
    for signum in _SIGNALS:
        handler = signal.getsignal(signum)
        code = getattr(handler, "__code__", None)
        if code is not None:
            codes.add(code)
    if not codes:
        return False
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code in codes:
            return True
        tb = tb.tb_next
    return False
