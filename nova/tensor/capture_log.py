"""What a call of an ``nv.compile`` d function did, as seen from inside Nova.

``nova.capture`` replays a function without running its Python. For that it must know,
from one recorded call, everything the call did besides its steps' kernels: which
steps it realized (and on which argument nodes), which host values it drew fresh
(random keys, the optimizer's runtime scalars), and which Python-side state of Nova's
own objects it changed (an optimizer's step count, a scheduler's epoch, gradients set
to None). Each of those places calls this module's hooks; they do nothing unless a
capture is active in this thread (``ACTIVE``, a ``ContextVar``: one ``get`` per call
otherwise). A value read back to the host while a capture is active (``item()``,
``numpy()``, ``print``) makes the call impossible to replay -- the Python that used
the value would not run again -- so the capture is refused, naming the user's line.
"""
from __future__ import annotations

import contextvars
import os
import traceback
from dataclasses import dataclass, field
from typing import Any

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class StepRecord:
    """One step realized during the call: its executable, argument nodes (identity
    only: donated ones were overwritten), output nodes, roles and engine."""

    exe: Any
    arg_nodes: list[Any]
    out_nodes: list[Any]
    roles: list[str]
    device: str


@dataclass
class CaptureLog:
    """Everything one recorded call did that a replay must redo (module doc)."""

    steps: list[StepRecord] = field(default_factory=list)
    # In call order: ("fresh", kind, owner, node, name) for a host value drawn fresh
    # (kind "rng": ``owner`` is the Generator; kind "scalar": the Optimizer, and the
    # scalar's name), or ("action", kind, owner, detail) for Python state changed
    # ("opt_step" with the updated (group, parameter) pairs, "zero_grad",
    # "sched_step", "manual_seed" with the seed).
    events: list[tuple] = field(default_factory=list)
    refused: str | None = None     # why this call cannot be replayed, if so
    # an optimizer step's realization was left to the end of the call (``end_of_step``)
    deferred_step: bool = False

    def refuse(self, reason: str) -> None:
        """Note the first reason this call cannot be replayed, with the user's line."""
        if self.refused is None:
            self.refused = f"{reason} (at {user_line()})"


ACTIVE: contextvars.ContextVar[CaptureLog | None] = contextvars.ContextVar(
    "nova_capture", default=None)


def user_line() -> str:
    """``file:line`` of the innermost frame outside the nova package."""
    for frame in reversed(traceback.extract_stack()):
        if not os.path.abspath(frame.filename).startswith(_PACKAGE_DIR):
            return f"{os.path.basename(frame.filename)}:{frame.lineno}"
    return "<nova>"


def fresh(kind: str, owner: Any, node: Any, name: str = "") -> None:
    """A host value drawn fresh for this call (a random key, a runtime scalar)."""
    log = ACTIVE.get()
    if log is not None:
        log.events.append(("fresh", kind, owner, node, name))


def action(kind: str, owner: Any, detail: Any = None) -> None:
    """Python-side state of a Nova object changed (replayed as the same call)."""
    log = ACTIVE.get()
    if log is not None:
        log.events.append(("action", kind, owner, detail))


def host_read(what: str) -> None:
    """A value is being read back to the host: a call doing so cannot be replayed."""
    log = ACTIVE.get()
    if log is not None:
        log.refuse(f"the function reads a tensor's value on the host ({what})")


def refuse(reason: str) -> None:
    """Anything else that a replay could not reproduce."""
    log = ACTIVE.get()
    if log is not None:
        log.refuse(reason)


def step(record: StepRecord) -> None:
    log = ACTIVE.get()
    if log is not None:
        log.steps.append(record)
