"""Run a command under a memory cap that the kernel enforces: a cgroup of its own.

The paper's memory experiment asks which batch each framework can still train at when
both get the same memory. A cap enforced from outside -- the cgroup memory controller,
the mechanism containers use -- treats both alike: everything the process and its
children (Nova's compile workers) keep resident counts, and going over it gets the
process killed by the kernel's OOM killer, as on a machine that is simply full.
``RLIMIT_AS`` would not do: it caps address space, which both frameworks reserve far
beyond what they touch.

Needs a writable cgroup memory controller (root, or a delegated cgroup): version 1
(``/sys/fs/cgroup/memory``) or version 2 with the ``memory`` controller enabled for
children. Where there is none, ``cap_support()`` says why and nothing is capped.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

_V1 = Path("/sys/fs/cgroup/memory")


@dataclass
class CappedRun:
    returncode: int
    stdout: str
    stderr: str
    oom_killed: bool        # the kernel killed it for going over the cap
    peak_bytes: int | None  # the group's peak usage, where the kernel reports it
    seconds: float


def _v2_root() -> Path | None:
    """The cgroup-v2 directory this process may create memory-capped children in."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in mounts:
        parts = line.split()
        if len(parts) > 2 and parts[2] == "cgroup2":
            root = Path(parts[1])
            try:
                if "memory" in (root / "cgroup.subtree_control").read_text().split():
                    return root
            except OSError:
                continue
    return None


def cap_support() -> str | None:
    """None if caps can be enforced here, else why not."""
    if _V1.is_dir() and os.access(_V1, os.W_OK):
        return None
    if _v2_root() is not None and os.access(_v2_root(), os.W_OK):
        return None
    return ("no writable cgroup memory controller (needs root or a delegated cgroup: "
            "/sys/fs/cgroup/memory, or cgroup v2 with the memory controller enabled)")


class _Group:
    """A fresh memory cgroup with a limit; removed by ``close``."""

    def __init__(self, cap_bytes: int):
        why = cap_support()
        if why is not None:
            raise RuntimeError(f"memory cap: {why}")
        self.v1 = _V1.is_dir() and os.access(_V1, os.W_OK)
        base = _V1 if self.v1 else _v2_root()
        self.path = base / f"nova-bench-{os.getpid()}-{time.monotonic_ns()}"
        self.path.mkdir()
        if self.v1:
            (self.path / "memory.limit_in_bytes").write_text(str(cap_bytes))
            swap = self.path / "memory.memsw.limit_in_bytes"
            if swap.exists():                      # no escaping the cap into swap
                swap.write_text(str(cap_bytes))
        else:
            (self.path / "memory.max").write_text(str(cap_bytes))
            if (self.path / "memory.swap.max").exists():
                (self.path / "memory.swap.max").write_text("0")

    def enter(self) -> None:
        """Move the calling process into the group (a child's ``preexec_fn``)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def peak(self) -> int | None:
        name = "memory.max_usage_in_bytes" if self.v1 else "memory.peak"
        try:
            return int((self.path / name).read_text())
        except (OSError, ValueError):
            return None

    def oom_kills(self) -> int:
        name = "memory.oom_control" if self.v1 else "memory.events"
        try:
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def close(self) -> None:
        for _ in range(50):          # the group empties once its processes are reaped
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)


def run_capped(cmd: list[str], cap_bytes: int, timeout: float, cwd: str | None = None,
               env: dict[str, str] | None = None) -> CappedRun:
    """Run ``cmd`` (and whatever it starts) with at most ``cap_bytes`` of memory."""
    group = _Group(cap_bytes)
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, preexec_fn=group.enter,
                                start_new_session=True)
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        seconds = time.perf_counter() - t0
        try:                          # children it left behind (compile workers)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        # the group's counter where the kernel keeps one; else a SIGKILL we did not send
        oom = group.oom_kills() > 0 or (proc.returncode == -signal.SIGKILL and not timed_out)
        return CappedRun(proc.returncode, out, err, oom, group.peak(), seconds)
    finally:
        group.close()
