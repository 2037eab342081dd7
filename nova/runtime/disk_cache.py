"""On-disk cache entries (CPU kernel objects, cubins): atomic writes, distrustful reads.

An entry is one file::

    b"NOVAENT2" | header length (u32, little-endian) | header (JSON) | SHA-256 | payload

The header names what the entry holds (its ``kind``, its full ``key``, the symbols it
defines, the payload's ``size``) and the SHA-256 covers header and payload, so a
truncated or bit-flipped entry fails the checksum and an intact entry copied under
another name fails the key comparison. Neither proves the payload is loadable, so the
caller validates it too (``nova.runtime.elf``) before anything maps it.

Reads never open anything but a regular file: a symbolic link is not followed (and is
replaced by the next write: a rename replaces the link, not its target), and a
directory, FIFO, socket or device at an entry path is reported once per process as a
:class:`CacheWarning` and bypassed (opening a FIFO would block, and a directory cannot
be renamed over). Writes go to a temporary file in the same directory, renamed over the
entry; the temporary file is removed whatever fails.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import tempfile
import threading
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

MAGIC = b"NOVAENT2"
_PREFIX = struct.Struct("<8sI")
_DIGEST = 32
MAX_ENTRY_BYTES = 1 << 30    # larger files are not read: no kernel or cubin comes close

_warned: set[str] = set()
_warned_lock = threading.Lock()


class CacheWarning(RuntimeWarning):
    """A cache path holds something Nova will not read or cannot write; the kernel is
    compiled instead (correct, only slower), and the message says what to remove."""


@dataclass(frozen=True)
class Lookup:
    """What reading an entry found. ``status`` is ``"hit"`` (``header``/``payload`` are
    valid), ``"missing"``, ``"corrupted"`` (not an intact entry: truncated, bit-flipped,
    a link), ``"mismatch"`` (intact, but it holds another key or an invalid payload) or
    ``"bypassed"`` (not a regular file; never written over). ``reason`` says why."""

    status: str
    reason: str = ""
    header: Mapping[str, Any] | None = None
    payload: bytes | None = None

    @property
    def writable(self) -> bool:
        return self.status != "bypassed"


def warn_once(key: str, message: str) -> None:
    """A CacheWarning for ``message``, the first time ``key`` is seen in this process."""
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, CacheWarning, stacklevel=3)


def read_entry(path: str, expect: Mapping[str, Any],
               validate: Callable[[Mapping[str, Any], bytes], str | None]) -> Lookup:
    """The entry at ``path`` if it is intact, every item of ``expect`` equals the
    header's, and ``validate(header, payload)`` returns None (else it returns the
    reason the payload is unusable)."""
    blob = _read_regular(path)
    if isinstance(blob, Lookup):
        return blob
    parsed = decode_entry(blob)
    if isinstance(parsed, str):
        return Lookup("corrupted", parsed)
    header, payload = parsed
    for name, value in expect.items():
        if header.get(name) != value:
            return Lookup("mismatch", f"its header's {name} is {header.get(name)!r}, "
                                      f"expected {value!r}")
    problem = validate(header, payload)
    if problem is not None:
        return Lookup("mismatch", problem)
    return Lookup("hit", header=header, payload=payload)


def _read_regular(path: str) -> bytes | Lookup:
    """The bytes of ``path`` if it is a regular file, without following a link or
    blocking on a FIFO; else the Lookup that says why not."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return Lookup("missing")
    except OSError as e:
        return _bypass(path, f"cannot be examined ({e.strerror})")
    if stat.S_ISLNK(st.st_mode):
        return Lookup("corrupted", "a symbolic link (not followed)")
    if not stat.S_ISREG(st.st_mode):
        return _bypass(path, f"is a {_kind(st.st_mode)}, not a cache file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return Lookup("missing")
    except OSError as e:
        return _bypass(path, f"cannot be opened ({e.strerror})")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):   # swapped between lstat and open
            return _bypass(path, f"is a {_kind(st.st_mode)}, not a cache file")
        if st.st_size > MAX_ENTRY_BYTES:
            return Lookup("corrupted", f"{st.st_size} bytes, more than any entry")
        chunks, size = [], 0
        while size <= st.st_size:
            chunk = os.read(fd, st.st_size + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    except OSError as e:
        return _bypass(path, f"cannot be read ({e.strerror})")
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"),
                       (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "special file"


def _bypass(path: str, why: str) -> Lookup:
    warn_once(path, f"nova cache: {path} {why}; it is bypassed (the kernel is compiled "
                    f"instead, every run, until it is removed)")
    return Lookup("bypassed", why)


def decode_entry(blob: bytes) -> tuple[dict[str, Any], bytes] | str:
    """The header and payload of an intact entry, or why it is not one."""
    if len(blob) < _PREFIX.size + _DIGEST:
        return f"truncated ({len(blob)} bytes)"
    magic, header_len = _PREFIX.unpack_from(blob)
    if magic != MAGIC:
        return f"not a cache entry of this format (magic {magic!r})"
    body = _PREFIX.size + header_len
    if body + _DIGEST > len(blob):
        return f"truncated (a {header_len}-byte header in {len(blob)} bytes)"
    header_bytes = blob[_PREFIX.size:body]
    digest, payload = blob[body:body + _DIGEST], blob[body + _DIGEST:]
    if hashlib.sha256(header_bytes + payload).digest() != digest:
        return "checksum mismatch (truncated or corrupted)"
    try:
        header = json.loads(header_bytes)
    except ValueError:
        return "header is not JSON"
    if not isinstance(header, dict) or header.get("size") != len(payload):
        return "header does not describe its payload"
    return header, payload


def encode_entry(header: Mapping[str, Any], payload: bytes) -> bytes:
    """The bytes of an entry holding ``payload`` under ``header`` (``size`` is added)."""
    header_bytes = json.dumps({**header, "size": len(payload)}, sort_keys=True).encode()
    return (_PREFIX.pack(MAGIC, len(header_bytes)) + header_bytes
            + hashlib.sha256(header_bytes + payload).digest() + payload)


def write_entry(path: str, header: Mapping[str, Any], payload: bytes) -> bool:
    """Write the entry atomically; False (with a one-time CacheWarning per directory)
    when the directory cannot take it: a read-only or full cache costs recompiles."""
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        atomic_write(path, encode_entry(header, payload))
        return True
    except OSError as e:
        warn_once(directory, f"nova cache: cannot write {path} ({e.strerror or e}); "
                             f"kernels will be compiled again next run")
        return False


def atomic_write(path: str, data: bytes, mode: int = 0o600) -> None:
    """Replace ``path`` by a file holding ``data``, all at once: readers see the old
    file or the new one, never part of one, and a link at ``path`` is replaced, not
    followed. Raises OSError; the temporary file never outlives the call."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
