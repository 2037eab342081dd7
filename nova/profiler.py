"""``torch.profiler``'s surface over Nova's kernel timings: ``profile``,
``record_function``, ``schedule``, ``tensorboard_trace_handler``, ``ProfilerActivity``.

What PyTorch reports per ATen op, Nova reports per compiled kernel: a step runs as
kernels (fusion puts many ops in one), each timed by the native driver
(``nv.debug.profile``'s clock readings), and named ``nova_k_<hash>: <strategy>``.
``record_function`` ranges are host time on the thread that opened them. Because
tensors are lazy, a range around tensor code measures its recording; the kernels run
where a value is needed (``loss.item()``, ``nv.realize``, the optimizer's step
boundary) and count toward the ranges open then. Only the thread that entered the
profiler is observed (Nova's profile collector is per thread); the kernels run on
the cpu engine (``nv.engine("interp")`` and GPU steps give ranges only).

``record_shapes``, ``profile_memory``, ``with_stack``, ``with_flops`` and
``with_modules`` are accepted for portability and record nothing more: events carry
no input shapes, memory or stacks (``key_averages(group_by_input_shape=True)`` then
groups by name, as PyTorch's does without ``record_shapes``).
"""
from __future__ import annotations

import contextlib
import contextvars
import enum
import gzip
import json
import os
import socket
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from nova.runtime.cpu_engine import PROFILE, TimedRuns


class ProfilerActivity(enum.Enum):
    """The device groups a profile collects (``CPU``: Nova's kernels and ranges)."""
    CPU = 0
    XPU = 1
    MTIA = 2
    CUDA = 3
    HPU = 4
    PrivateUse1 = 5


class ProfilerAction(enum.Enum):
    """What the profiler does during a step, as ``schedule`` returns it."""
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def supported_activities() -> set[ProfilerActivity]:
    """The activities Nova records: CPU (its kernels are host code)."""
    return {ProfilerActivity.CPU}


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0) -> Callable[[int], ProfilerAction]:
    """``torch.profiler.schedule``: skip ``skip_first`` steps, then cycle through
    ``wait`` idle, ``warmup`` and ``active`` recorded steps (the last of a cycle saves:
    ``on_trace_ready``), ``repeat`` times (0: until the profile ends)."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError(
            f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), "
            f"warmup={warmup} (need >= 0), active={active} (need > 0), repeat={repeat} "
            f"(need >= 0), skip_first={skip_first} (need >= 0).")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results",
                      stacklevel=2)
    cycle = wait + warmup + active

    def schedule_fn(step: int) -> ProfilerAction:
        if step < 0:
            raise AssertionError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:
            step += wait
        if repeat > 0 and step / cycle >= repeat:
            return ProfilerAction.NONE
        at = step % cycle
        if at < wait:
            return ProfilerAction.NONE
        if at < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if at < cycle - 1 else ProfilerAction.RECORD_AND_SAVE
    return schedule_fn


def _always_record(_: int) -> ProfilerAction:
    return ProfilerAction.RECORD


# ------------------------------------------------------------------------------ events

@dataclass
class FunctionEvent:
    """One range or kernel run: times in microseconds, as PyTorch's events."""
    name: str
    start_ns: int
    end_ns: int
    thread: int
    is_user_annotation: bool        # a ``record_function`` range (else a kernel run)
    description: str = ""           # a kernel's schedule (``KernelPlan.describe``)
    self_cpu_time_total: float = 0.0
    cpu_children: list[FunctionEvent] = field(default_factory=list, repr=False)

    key = property(lambda self: self.name)
    count = property(lambda self: 1)
    cpu_time_total = property(lambda self: (self.end_ns - self.start_ns) / 1e3)
    cpu_time = cpu_time_total
    device_time_total = property(lambda self: 0.0)
    self_device_time_total = device_time_total
    input_shapes = property(lambda self: [])

    @property
    def time_range(self) -> tuple[float, float]:
        """(start, end) in microseconds of the monotonic clock."""
        return self.start_ns / 1e3, self.end_ns / 1e3


@dataclass
class FunctionEventAvg:
    """The events of one name, summed (``key_averages``)."""
    key: str
    count: int = 0
    cpu_time_total: float = 0.0
    self_cpu_time_total: float = 0.0
    is_user_annotation: bool = False
    device_time_total: float = 0.0
    self_device_time_total: float = 0.0
    input_shapes: list = field(default_factory=list)

    @property
    def cpu_time(self) -> float:
        """Microseconds per call."""
        return self.cpu_time_total / max(self.count, 1)

    def add(self, event: FunctionEvent | FunctionEventAvg) -> FunctionEventAvg:
        self.count += event.count
        self.cpu_time_total += event.cpu_time_total
        self.self_cpu_time_total += event.self_cpu_time_total
        self.is_user_annotation = event.is_user_annotation
        return self


_SORT_KEYS = ("cpu_time", "cpu_time_total", "self_cpu_time_total", "count",
              "device_time", "device_time_total", "self_device_time_total", "cuda_time",
              "cuda_time_total", "self_cuda_time_total")


def _us(v: float) -> str:
    if v >= 1e6:
        return f"{v / 1e6:.3f}s"
    if v >= 1e3:
        return f"{v / 1e3:.3f}ms"
    return f"{v:.3f}us"


class EventList(list):
    """A list of events or averages with PyTorch's ``table``, ``total_average``,
    ``key_averages`` and ``export_chrome_trace``."""

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        groups: dict[str, FunctionEventAvg] = {}
        for e in self:
            groups.setdefault(e.key, FunctionEventAvg(e.key)).add(e)
        return EventList(groups.values())

    def total_average(self) -> FunctionEventAvg:
        total = FunctionEventAvg("Total")
        for e in self:
            total.add(e)
        return total

    def table(self, sort_by: str | None = None, row_limit: int = 100,
              max_src_column_width: int = 75, max_name_column_width: int = 55,
              max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False, time_unit: str | None = None) -> str:
        """PyTorch's table: name, self and total CPU time (and their shares of the
        whole self time), time per call and calls; ``sort_by`` one of PyTorch's keys
        (device times are 0: Nova's kernels are host code)."""
        rows = list(self)
        if sort_by is not None:
            if sort_by not in _SORT_KEYS:
                raise ValueError(f"table: sort_by must be one of {_SORT_KEYS}, got "
                                 f"{sort_by!r}")
            attr = {"cuda_time": "device_time_total", "device_time": "device_time_total",
                    "cuda_time_total": "device_time_total",
                    "self_cuda_time_total": "self_device_time_total"}.get(sort_by, sort_by)
            rows.sort(key=lambda e: getattr(e, attr), reverse=True)
        if row_limit is not None and row_limit > 0:
            rows = rows[:row_limit]
        self_total = sum(e.self_cpu_time_total for e in self) or 1.0
        width = min(max([len(e.key) for e in rows] + [4]), max_name_column_width)
        heads = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg",
                 "# of Calls"]
        rule = "-" * width + "  " + "  ".join("-" * 12 for _ in heads) + "  "
        lines = [] if header is None else [header]
        lines += [rule, f"{'Name':>{width}s}  " + "  ".join(f"{h:>12s}" for h in heads) + "  ",
                  rule]
        for e in rows:
            name = e.key if len(e.key) <= width else e.key[:width - 3] + "..."
            cells = [f"{100 * e.self_cpu_time_total / self_total:.2f}%",
                     _us(e.self_cpu_time_total),
                     f"{100 * e.cpu_time_total / self_total:.2f}%", _us(e.cpu_time_total),
                     _us(e.cpu_time), str(e.count)]
            lines.append(f"{name:>{width}s}  " + "  ".join(f"{c:>12s}" for c in cells) + "  ")
        lines += [rule, f"Self CPU time total: {_us(sum(e.self_cpu_time_total for e in self))}"]
        return "\n".join(lines) + "\n"

    def export_chrome_trace(self, path: str) -> None:
        _write_chrome_trace(path, [e for e in self if isinstance(e, FunctionEvent)])

    def __str__(self) -> str:
        return self.table()


def _write_chrome_trace(path: str, events: list[FunctionEvent]) -> None:
    """The Chrome trace event format (``chrome://tracing``, Perfetto, TensorBoard's
    profiler plugin): one complete (``"X"``) event per range and kernel run."""
    pid = os.getpid()
    trace = {"traceEvents": [
        {"ph": "X", "cat": "user_annotation" if e.is_user_annotation else "kernel",
         "name": e.name, "pid": pid, "tid": e.thread, "ts": e.start_ns / 1e3,
         "dur": (e.end_ns - e.start_ns) / 1e3,
         "args": {"schedule": e.description} if e.description else {}}
        for e in sorted(events, key=lambda e: e.start_ns)],
        "displayTimeUnit": "ms"}
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt") as f:
        json.dump(trace, f)


def _attribute_self_times(events: list[FunctionEvent]) -> None:
    """Each event's children (the events inside its time range on its thread, not
    inside a child of its) and self time (its time less its children's), as
    PyTorch's ``self_cpu_time_total``; kernel runs count on the thread that ran the
    step."""
    by_thread: dict[int, list[FunctionEvent]] = {}
    for e in events:
        by_thread.setdefault(e.thread, []).append(e)
    for evs in by_thread.values():
        # parents before children: earlier start first, the longer of equal starts first
        evs.sort(key=lambda e: (e.start_ns, -e.end_ns))
        open_: list[FunctionEvent] = []
        for e in evs:
            e.cpu_children = []
            while open_ and open_[-1].end_ns <= e.start_ns:
                open_.pop()
            if open_ and e.end_ns <= open_[-1].end_ns:
                open_[-1].cpu_children.append(e)
            open_.append(e)
    for e in events:
        e.self_cpu_time_total = max(
            0.0, e.cpu_time_total - sum(c.cpu_time_total for c in e.cpu_children))


# ------------------------------------------------------------------------ the profiler

# The profiles collecting on this thread (innermost last): ``record_function`` adds
# its range to each.
_ACTIVE: contextvars.ContextVar[tuple[profile, ...]] = contextvars.ContextVar(
    "nova_profilers", default=())


class record_function(contextlib.ContextDecorator):
    """``torch.profiler.record_function(name)``: a named range in every profile
    collecting on this thread (a context manager or a decorator); nothing otherwise."""

    def __init__(self, name: str, args: str | None = None):
        if not isinstance(name, str):
            raise TypeError(f"record_function: name must be a str, got {type(name).__name__}")
        self.name = name
        self.args = args
        self._start: int | None = None

    def __enter__(self) -> record_function:
        self._start = time.monotonic_ns()
        return self

    def __exit__(self, *exc: Any) -> bool:
        end = time.monotonic_ns()
        if self._start is not None:
            for prof in _ACTIVE.get():
                prof._add_range(self.name, self._start, end)
        self._start = None
        return False


class profile:
    """``torch.profiler.profile``: collects Nova's kernel runs and ``record_function``
    ranges on this thread between ``start()``/``stop()`` (or inside ``with``), by
    ``schedule`` when given (``step()`` advances it; ``on_trace_ready(prof)`` runs at
    the end of each active cycle). See the module docstring for what is recorded."""

    def __init__(self, *, activities: Iterable[ProfilerActivity] | None = None,
                 schedule: Callable[[int], ProfilerAction] | None = None,
                 on_trace_ready: Callable[[profile], Any] | None = None,
                 record_shapes: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, experimental_config: Any = None,
                 execution_trace_observer: Any = None, acc_events: bool = False,
                 use_cuda: bool | None = None, custom_trace_id_callback: Any = None):
        acts = set(activities) if activities is not None else supported_activities()
        for a in acts:
            if not isinstance(a, ProfilerActivity):
                raise TypeError(f"profile: activities must be ProfilerActivity members, "
                                f"got {a!r}")
        self.activities = acts
        self.record_steps = schedule is not None
        self.schedule = schedule if schedule is not None else _always_record
        self.on_trace_ready = on_trace_ready
        self.record_shapes, self.profile_memory = record_shapes, profile_memory
        self.with_stack, self.with_flops, self.with_modules = with_stack, with_flops, \
            with_modules
        self.acc_events = acc_events
        self.step_num = 0
        self.current_action = self.schedule(0)
        self._events: list[FunctionEvent] = []
        self._collecting = False
        self._runs: TimedRuns | None = None
        self._tokens: list[tuple[contextvars.Token, contextvars.Token]] = []
        self._step_range: record_function | None = None
        self._thread = threading.get_ident()

    # -- the state machine (PyTorch's action map, without its device-stop states)

    def _prepare(self) -> None:
        if not self.acc_events:
            self._events = []

    def _start_trace(self) -> None:
        if self._collecting:
            return
        self._collecting = True
        self._runs = TimedRuns()
        self._tokens.append((PROFILE.set(self._runs), _ACTIVE.set(_ACTIVE.get() + (self,))))

    def _stop_trace(self) -> None:
        if not self._collecting:
            return
        self._collecting = False
        profile_token, active_token = self._tokens.pop()
        _ACTIVE.reset(active_token)
        PROFILE.reset(profile_token)
        runs, self._runs = self._runs, None
        for (name, text, seconds), start in zip(runs, runs.starts):
            key = text.split(" loops=", 1)[0]      # "nova_k_<hash>: matmul/tiled"
            self._events.append(FunctionEvent(key, start, start + int(seconds * 1e9),
                                              self._thread, False, text))

    def _trace_ready(self) -> None:
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def _transit(self, prev: ProfilerAction, now: ProfilerAction | None) -> None:
        A = ProfilerAction
        recording = (A.RECORD, A.RECORD_AND_SAVE)
        if prev == A.NONE:
            if now in (A.WARMUP, *recording):
                self._prepare()
            if now in recording:
                self._start_trace()
        elif prev == A.WARMUP:
            if now in recording:
                self._start_trace()
            elif now != A.WARMUP:         # NONE (a bad schedule) or the end
                if now == A.NONE:
                    warnings.warn("Incorrect schedule: WARMUP followed by NONE")
        elif prev == A.RECORD:
            if now in (A.NONE, A.WARMUP):
                warnings.warn(f"Incorrect schedule: RECORD followed by {now.name}")
                self._stop_trace()
            elif now is None:
                self._stop_trace()
                self._trace_ready()
        elif prev == A.RECORD_AND_SAVE:
            self._stop_trace()
            self._trace_ready()
            if now in (A.WARMUP, *recording):
                self._prepare()
            if now in recording:
                self._start_trace()

    def start(self) -> None:
        self._transit(ProfilerAction.NONE, self.current_action)
        if self.record_steps:
            self._open_step_range()

    def stop(self) -> None:
        self._close_step_range()
        self._transit(self.current_action, None)

    def step(self) -> None:
        """The next step begins: advance the schedule."""
        self._close_step_range()
        prev = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit(prev, self.current_action)
        if self.record_steps:
            self._open_step_range()

    def _open_step_range(self) -> None:
        self._step_range = record_function(f"ProfilerStep#{self.step_num}").__enter__()

    def _close_step_range(self) -> None:
        if self._step_range is not None:
            self._step_range.__exit__(None, None, None)
            self._step_range = None

    def _add_range(self, name: str, start: int, end: int) -> None:
        self._events.append(FunctionEvent(name, start, end, threading.get_ident(), True))

    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.stop()
        return False

    # -- results

    def events(self) -> EventList:
        """Every range and kernel run collected (in the last active cycle, or all of
        them with ``acc_events=True``), with children and self times."""
        _attribute_self_times(self._events)
        return EventList(self._events)

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        """The events summed by name (``.table(sort_by=..., row_limit=...)``)."""
        return self.events().key_averages(group_by_input_shape, group_by_stack_n,
                                          group_by_overload_name)

    def export_chrome_trace(self, path: str, use_python_export: bool = False) -> None:
        """Write the events as a Chrome trace (``.json``, or gzipped ``.json.gz``)."""
        _write_chrome_trace(path, self.events())


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None,
                              use_gzip: bool = False, use_python_export: bool = False
                              ) -> Callable[[profile], None]:
    """``torch.profiler.tensorboard_trace_handler``: an ``on_trace_ready`` writing each
    cycle's trace to ``dir_name/<worker>.<ns>.pt.trace.json[.gz]``."""
    def handler_fn(prof: profile) -> None:
        nonlocal worker_name
        try:
            os.makedirs(dir_name, exist_ok=True)
        except OSError as e:
            raise RuntimeError("Can't create directory: " + dir_name) from e
        if not worker_name:
            worker_name = f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker_name}.{time.time_ns()}.pt.trace.json" + (".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, name))
    return handler_fn


__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "ProfilerAction",
           "ProfilerActivity", "profile", "record_function", "schedule",
           "supported_activities", "tensorboard_trace_handler"]
