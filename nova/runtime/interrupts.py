"""Holding Ctrl-C back while the runtime is in a state it cannot be abandoned in.

Python raises ``KeyboardInterrupt`` between any two bytecodes of the main thread. Most
of a realization can be abandoned there: nothing is bound until the step has run, so
the pending values are simply computed by the next realization. Two places cannot:

- a step that has begun writing results over *donated* buffers (an optimizer update
  over the old parameters): abandoned half-way, the old values are gone and the new
  ones not all written, and re-running it would read overwritten inputs;
- the worker pool between handing chunks out and collecting them
  (``nova.runtime.threads``), which must drain before its next job.

``deferred_interrupt()`` covers such a region: a SIGINT that arrives inside is recorded
and re-delivered, to whatever handler was installed before, once the region is left —
so the user's Ctrl-C still interrupts, one step boundary later. Deferral needs the main
thread (only it runs Python signal handlers, and only it may install them); elsewhere
the region runs as is, which is safe because no ``KeyboardInterrupt`` is raised there.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Run the body with SIGINT held back; a SIGINT received meanwhile is re-raised
    (through the previous handler) on exit."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is None:          # a handler installed outside Python: leave it alone
        yield
        return
    received: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received:
            signal.raise_signal(signal.SIGINT)   # delivered now, to ``previous``
