"""``torch.autograd.profiler``: the legacy profiler API, over ``nova.profiler``.

``with nv.autograd.profiler.profile() as prof: ...`` then ``prof.key_averages().table()``,
``prof.function_events``, ``prof.export_chrome_trace(path)``; ``record_function``
marks ranges. What is recorded (Nova's kernels and ranges, on this thread) is
``nova.profiler``'s; see its docstring.
"""
from __future__ import annotations

from typing import Any

from nova.profiler import EventList, FunctionEvent, FunctionEventAvg, record_function
from nova.profiler import profile as _Profile


class profile:
    """``torch.autograd.profiler.profile(enabled=True, ...)``: collects while inside
    ``with``; ``enabled=False`` collects nothing (the block runs as without it)."""

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False,
                 use_device: str | None = None, record_shapes: bool = False,
                 with_flops: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_modules: bool = False,
                 use_kineto: bool = False, use_cpu: bool = True,
                 experimental_config: Any = None, acc_events: bool = False,
                 custom_trace_id_callback: Any = None, **unused: Any):
        self.enabled = enabled
        self._profile = _Profile(record_shapes=record_shapes, profile_memory=profile_memory,
                                 with_stack=with_stack, with_flops=with_flops,
                                 with_modules=with_modules, acc_events=acc_events)
        self._entered = False
        self.function_events: EventList | None = None

    def __enter__(self) -> profile:
        if self._entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        self._entered = True
        if self.enabled:
            self._profile.start()
        return self

    def __exit__(self, *exc: Any) -> bool:
        if self.enabled:
            self._profile.stop()
            self.function_events = self._profile.events()
        return False

    def _events(self) -> EventList:
        if self.function_events is None:
            raise RuntimeError("Profiler didn't finish running")
        return self.function_events

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        return self._events().key_averages(group_by_input_shape, group_by_stack_n,
                                           group_by_overload_name)

    def table(self, sort_by: str | None = None, row_limit: int = 100, **kwargs: Any) -> str:
        return self._events().table(sort_by=sort_by, row_limit=row_limit, **kwargs)

    def total_average(self) -> FunctionEventAvg:
        return self._events().total_average()

    @property
    def self_cpu_time_total(self) -> float:
        """Microseconds: the sum of every event's self time."""
        return sum(e.self_cpu_time_total for e in self._events())

    def export_chrome_trace(self, path: str) -> None:
        self._events().export_chrome_trace(path)

    def __str__(self) -> str:
        return self._events().table()


__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "profile", "record_function"]
