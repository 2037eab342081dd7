"""Where debug files go (``NOVA_DEBUG=1`` dumps, IR of a kernel LLVM rejected, CUDA C
that NVRTC rejected, ``nv.debug.dump``): one place, created safely.

A fixed name under ``$TMPDIR`` (the old ``/tmp/nova-debug``) is predictable: another user
can create it first, or plant a symbolic link there, and Nova would write through it.
So without ``NOVA_DEBUG_DIR`` each process makes a fresh private directory
(``tempfile.mkdtemp``: an unpredictable name, mode 0700, created atomically). A
directory the user names (``NOVA_DEBUG_DIR``, ``nv.debug.dump(directory)``) is created
0700 if missing; if it exists it must be a real directory, not a symbolic link, and be
owned by the user, else :class:`UnsafeDirectoryError`. Files are written by
``atomic_write`` (a link planted at a file's path is replaced, never followed), and
subdirectories are checked the same way as the directory itself.
"""
from __future__ import annotations

import os
import stat
import tempfile
import threading

from nova import config
from nova.runtime.disk_cache import atomic_write

_private: list[str] = []      # this process's mkdtemp directory, once made
_lock = threading.Lock()


class UnsafeDirectoryError(ValueError):
    """A debug directory Nova was told to use is a symbolic link, not a directory, or
    owned by another user; Nova refuses to write there."""


def debug_directory(path: str | None = None) -> str:
    """The directory debug files go into: ``path`` if given (``nv.debug.dump``), else
    ``$NOVA_DEBUG_DIR``, else this process's private temporary directory (printed by the
    callers that write into it). Created if missing; refused if unsafe."""
    if path is not None:
        return _checked(os.fspath(path), "debug directory")
    named = config.DEBUG_DIR.get()
    if named:
        return _checked(named, "NOVA_DEBUG_DIR")
    with _lock:
        if not _private or _problem(_private[0], "") is not None:   # gone or replaced
            _private[:] = [tempfile.mkdtemp(prefix="nova-debug-")]
        return _private[0]


def debug_subdirectory(name: str | None = None, path: str | None = None) -> str:
    """A subdirectory of :func:`debug_directory`: named ``name`` (checked like its
    parent), or, without a name, a fresh one (``step-XXXX``) no other writer can own."""
    root = debug_directory(path)
    if name is None:
        return tempfile.mkdtemp(prefix="step-", dir=root)
    return _checked(os.path.join(root, name), "debug directory")


def write_debug_file(directory: str, name: str, text: str) -> str:
    """Write ``text`` to ``directory/name`` (atomically, never through a link); the path."""
    path = os.path.join(directory, name)
    atomic_write(path, text.encode(), mode=0o644)
    return path


def _checked(path: str, what: str) -> str:
    """``path`` as a directory that is safe to write into, created 0700 if missing."""
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    problem = _problem(path, what)
    if problem is not None:
        raise UnsafeDirectoryError(problem)
    return path


def _problem(path: str, what: str) -> str | None:
    """Why ``path`` is not a real directory of this user's (None when it is)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return f"{what} {path!r} does not exist"
    if stat.S_ISLNK(st.st_mode):
        return (f"{what} {path!r} is a symbolic link (to {os.readlink(path)!r}); Nova "
                f"writes debug files only into a real directory, so name the target "
                f"itself or remove the link")
    if not stat.S_ISDIR(st.st_mode):
        return f"{what} {path!r} exists and is not a directory; name a directory (it is " \
               f"created if missing)"
    if st.st_uid != os.geteuid():
        return (f"{what} {path!r} is owned by uid {st.st_uid}, not by you (uid "
                f"{os.geteuid()}); another user could read or replace what Nova writes "
                f"there, so name a directory of your own")
    return None
