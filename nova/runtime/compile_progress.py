"""What a user sees while a step's kernels compile: nothing for a second, then progress.

A cold step compiles a hundred kernels or more (~10 s on 2 cores for the small GPT);
a silent pause that long looks like a hang. So once a batch has taken ``AFTER_SECONDS``,
``nova: compiling kernels 87/121 (2 workers, 4.2 s)`` goes to stderr -- rewritten in
place on a terminal, a new line at most every ``EVERY_SECONDS`` elsewhere (a log) --
and a last line says how long the batch took. Batches that finish sooner print nothing.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

AFTER_SECONDS = 1.0     # quiet this long, then report
EVERY_SECONDS = 2.0     # between lines when stderr is not a terminal


class CompileProgress:
    """Counts a batch's compiled kernels and reports as the module docstring says.
    ``done()`` may be called from any thread."""

    def __init__(self, total: int, workers: int, stream: TextIO | None = None,
                 clock=time.monotonic):
        self.total, self.workers = total, workers
        self.finished = 0
        self._stream = stream if stream is not None else sys.stderr
        self._clock = clock
        self._start = clock()
        self._shown_at: float | None = None      # when a line was last written
        self._lock = threading.Lock()
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())

    def done(self) -> None:
        """One kernel finished."""
        with self._lock:
            self.finished += 1
            now = self._clock()
            if now - self._start < AFTER_SECONDS:
                return
            if not self._tty and self._shown_at is not None and \
                    now - self._shown_at < EVERY_SECONDS and self.finished < self.total:
                return
            self._write(f"nova: compiling kernels {self.finished}/{self.total} "
                        f"({self.workers} worker{'s' * (self.workers != 1)}, "
                        f"{now - self._start:.1f} s)")
            self._shown_at = now

    def close(self) -> None:
        """The batch is over: end the progress line, if one was shown."""
        with self._lock:
            if self._shown_at is None:
                return
            self._write(f"nova: compiled {self.finished} kernels in "
                        f"{self._clock() - self._start:.1f} s", last=True)
            self._shown_at = None

    def _write(self, text: str, last: bool = False) -> None:
        try:
            if self._tty:
                self._stream.write("\r" + text + ("\n" if last else ""))
            else:
                self._stream.write(text + "\n")
            self._stream.flush()
        except (OSError, ValueError):   # a closed or broken stderr: progress is optional
            pass
