"""``nv.save`` / ``nv.load``: checkpoints as standard safetensors files.

A file is a safetensors container: an 8-byte little-endian header length, a JSON header
naming every tensor's dtype, shape and byte range, then the raw little-endian tensor
bytes. Tensors are stored under their real dotted names (``model.wte.weight``,
``optimizer.state.0.exp_avg``), so other tools (``safetensors.numpy.load_file``, torch,
JAX) read a saved state dict as the same flat dict of arrays. Everything that is not a
tensor (nesting, ints such as step counts, tuples, hyperparameters, where each tensor
lived) is JSON kept as one string in the header's ``__metadata__``, which safetensors
restricts to str -> str.

Structure nodes: JSON scalars and lists stand for themselves; ``{"__tensor__": name}``
is a tensor (with ``"device"`` when not on the CPU, ``"requires_grad": true`` for a leaf
that requires grad, ``"parameter": true`` for an ``nn.Parameter``); ``{"__same__":
name}`` is the tensor already decoded under ``name`` again (tied weights: the bytes are
stored once and both places get the same object back, as with ``torch.save``);
``{"__tuple__": [...]}``, ``{"__size__": [...]}`` (``nv.Size``), ``{"__dict__": [[key,
value], ...]}`` (with ``"ordered": true`` for an ``OrderedDict``, ``"counter": true`` for a
``Counter``, or a ``"_metadata"`` node for a state dict, also an ``OrderedDict``),
``{"__dtype__": "float16"}``, ``{"__device__": "cuda:0"}``, ``{"__bytes__": hex}`` and
``{"__bytearray__": hex}``. Containers and scalars are stored by their exact type: a
subclass (a namedtuple, a ``defaultdict``, an ``IntEnum``) raises ``TypeError`` rather
than load as its base. Files written before the
identity, Parameter, dtype, device and bytes nodes existed hold none of them and load
as before.

Integrity: two SHA-256 digests, both in ``__metadata__``. ``nova.header_sha256`` covers
the length prefix and every byte of the header (computed with its own 64 hex digits
zeroed), so a flipped bit that renames a tensor, changes a dtype, a shape, an offset or
a step count is caught; ``nova.data_sha256`` covers the tensor bytes. The header is
bounded (100 MB, nesting depth) before it is parsed and verified before any offset is
trusted, and every offset and size is checked against the file's length before data is
read, so a damaged or hostile header is rejected after reading at most the header. Files
of other tools carry no digests: they get every structural check, not corruption
detection. Every failure is a :class:`CheckpointError` naming the file and what is
wrong. Tensors are read straight into their own arrays, so loading holds one copy of the
data (not the whole file plus copies).

Writes to a path go to a temporary file beside the target (its name carries the
writer's host and pid), fsynced and renamed into place, so a crash never leaves a
half-written checkpoint; the next save of the same target removes temporary files whose
writer is dead. ``save``/``load`` also take a binary file object, as torch's do: the
same bytes and checks, but a write to a file object is not atomic (nothing can rename it
into place), and it reads the tensors twice (the header's data digest comes first).

Other tools' dtypes: safetensors U16, U32 and U64 tensors (which ``save`` never
writes) load widened as ``nv.from_numpy`` and :mod:`nova.serialization_torch` widen
them -- U16 to int32, U32 and U64 to int64, values exact, one ``NarrowIntegerWarning``
per dtype -- and a U64 value past int64 is refused naming the tensor rather than wrapped.
A C64 tensor (``safetensors.numpy`` writes a complex64 array so) loads as a complex64
``ComplexTensor``; ``save`` writes complex tensors as their ``view_as_real`` float pairs
flagged ``"complex"`` in the structure, which other tools read as those pairs.
Float8/6/4 tensors are refused by name.

``load`` tells the formats apart by their first bytes: a zip archive is a PyTorch
checkpoint (``torch.save`` since 1.6), read without torch by
:mod:`nova.serialization_torch`; anything else must be safetensors.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import re
import secrets
import socket
import struct
import warnings
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, NamedTuple

import numpy as np

from nova.checkpoint_common import MAX_HEADER, MAX_NESTING, MAX_RANK, SAFE_GLOBALS, \
    CheckpointError, Placement
from nova.core import dtypes as dt
from nova.tensor.complex import ComplexTensor, view_as_complex, view_as_real
from nova.tensor.creation import NarrowIntegerWarning, from_numpy, tensor
from nova.tensor.device import check_device
from nova.tensor.device import device as Device
from nova.tensor.legacy import Size
from nova.tensor.realize import realize
from nova.tensor.tensor import Tensor

FORMAT = "nova-checkpoint-2"
LEGACY_FORMAT = "nova-checkpoint-1"   # t0..tN names; its checksum covers only the data
_FORMAT_KEY = "nova.format"
_STRUCTURE_KEY = "nova.structure"
_DATA_KEY = "nova.data_sha256"
_HEADER_KEY = "nova.header_sha256"
_NOVA_KEYS = (_FORMAT_KEY, _STRUCTURE_KEY, _DATA_KEY, _HEADER_KEY)
_ZERO_DIGEST = "0" * 64
_HEADER_DIGEST_FIELD = re.compile(rb'"nova\.header_sha256"\s*:\s*"([0-9a-f]{64})"')

_CODES = {dt.float32: "F32", dt.float64: "F64", dt.float16: "F16", dt.bfloat16: "BF16",
          dt.uint8: "U8", dt.int8: "I8", dt.int16: "I16", dt.int32: "I32", dt.int64: "I64",
          dt.bool_: "BOOL"}
_BY_CODE = {v: k for k, v in _CODES.items()}
# Standard safetensors dtypes Nova holds as another dtype (never written by ``save``):
# the unsigned integers widen as ``nv.from_numpy`` and ``nova.serialization_torch``
# widen them (exact values; uint64 past int64 refused), and C64 is a complex tensor.
_WIDER_CODES: dict[str, tuple[np.dtype, dt.DType | dt.ComplexDType]] = {
    "U16": (np.dtype("<u2"), dt.int32), "U32": (np.dtype("<u4"), dt.int64),
    "U64": (np.dtype("<u8"), dt.int64), "C64": (np.dtype("<c8"), dt.complex64)}
# Standard safetensors dtypes Nova has no dtype for (named as such in the error).
_FOREIGN_CODES = {"F8_E4M3", "F8_E5M2", "F6_E2M3", "F6_E3M2", "F4", "F8_E8M0"}
_HEADER_DEPTH = 3             # {name: {"shape": [..]}}: a safetensors header is this deep
_STRUCTURE_DEPTH = 3 * MAX_NESTING + 1   # a dict level is 3 JSON levels when encoded
_TMP_MARK = ".nova-tmp."
_ZIP_MAGIC = b"PK\x03\x04"             # a zip archive: torch.save since PyTorch 1.6
# torch.save(..., _use_new_zipfile_serialization=False) starts with this pickled number.
_TORCH_LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19"


# ----------------------------------------------------------------------------- save


def save(obj: Any, f: str | os.PathLike | BinaryIO, pickle_module: Any = None,
         pickle_protocol: int = 2, _use_new_zipfile_serialization: bool = True,
         _disable_byteorder_record: bool = False) -> None:
    """Write ``obj`` (a state dict, or nested dicts/lists/tuples of tensors, numbers,
    strings and None) to ``f`` as a safetensors file.

    ``pickle_module``, ``pickle_protocol`` (an int), ``_use_new_zipfile_serialization``
    and ``_disable_byteorder_record`` are ``torch.save``'s and accepted for code that
    passes them; they change nothing: Nova's format is always this one (no pickle, no
    zip; little-endian, as safetensors is), so ``_use_new_zipfile_serialization=False``
    does not write PyTorch's legacy format either.

    Tensors get their dotted path as name (a flat state dict keeps its keys exactly), so
    ``safetensors.numpy.load_file(path)`` returns them; ``nv.load`` restores the whole
    object, each tensor on the device it was saved from (see ``map_location``).

    ``f`` is a path or, as for ``torch.save``, a binary file object (``io.BytesIO``,
    ``open(path, "wb")``) written from its current position. A write to a path is
    atomic: readers see the old file or the complete new one. A write to a file object
    is not (a failure leaves a partial checkpoint there, which ``load`` rejects).
    """
    if not isinstance(pickle_protocol, int) or isinstance(pickle_protocol, bool):
        raise TypeError(f"save: pickle_protocol must be an int, got "
                        f"{type(pickle_protocol).__name__}")
    if not _is_path(f):
        _check_file_object(f, "save", "write")
    named: list[tuple[str, Tensor]] = []
    structure = _Encoder(named).encode(obj, "", 0)
    if named:
        realize(*[t for _, t in named])   # one step for everything still pending
    entries = _plan_entries(named)
    structure_json = json.dumps(structure, separators=(",", ":"))
    if _is_path(f):
        _save_to_path(os.fsdecode(f), named, entries, structure_json)
    else:
        _save_to_file_object(f, named, entries, structure_json)


def _is_path(f: Any) -> bool:
    return isinstance(f, (str, bytes, os.PathLike))


def _check_file_object(f: Any, op: str, method: str) -> None:
    """``f`` must be a binary file object with ``method`` (``read``/``write``)."""
    if isinstance(f, io.TextIOBase):
        raise TypeError(f"{op}: f is a text file; open it in binary mode "
                        f"('{'rb' if method == 'read' else 'wb'}'), as for torch.{op}")
    if not callable(getattr(f, method, None)):
        raise TypeError(f"{op}: f must be a path (str or os.PathLike) or a binary file "
                        f"object with {method}(), got {type(f).__name__}")


def _save_to_file_object(f: BinaryIO, named: list[tuple[str, Tensor]],
                         entries: dict[str, dict[str, Any]], structure_json: str) -> None:
    """The header, whose data digest needs every tensor's bytes, then the bytes: two
    passes over the tensors, so that ``f`` need not be seekable (a pipe, a socket)."""
    digest = hashlib.sha256()
    for raw in _tensor_bytes(named):
        digest.update(raw)
    head = _header_bytes(entries, structure_json, digest.hexdigest(), _ZERO_DIGEST)
    f.write(_with_header_digest(head))
    for raw in _tensor_bytes(named):
        f.write(raw)


def _save_to_path(path: str, named: list[tuple[str, Tensor]],
                  entries: dict[str, dict[str, Any]], structure_json: str) -> None:
    """Written beside ``path`` with placeholder digests, which are filled in once the
    data is written, fsynced, then renamed onto ``path``."""
    head = _header_bytes(entries, structure_json, _ZERO_DIGEST, _ZERO_DIGEST)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    _remove_stale_temps(path)
    tmp = _temp_path(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(head)                  # placeholder digests, rewritten below
            data_digest = _write_data(f, named)
            head = _header_bytes(entries, structure_json, data_digest, _ZERO_DIGEST)
            head = _with_header_digest(head)
            f.seek(0)
            f.write(head)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_directory(directory)


class _Encoder:
    """Turns an object into its JSON structure, collecting its tensors in ``named``.
    A tensor met twice (tied weights) is stored once and referenced by name after."""

    def __init__(self, named: list[tuple[str, Tensor]]):
        self.named = named
        self.used: set[str] = set()
        self.seen: dict[int, str] = {}       # id(tensor) -> its name in the file
        self.keep: list[Tensor] = []         # keeps ids unique while encoding

    def encode(self, obj: Any, where: str, depth: int) -> Any:
        """The JSON structure of ``obj``; tensors are replaced by references to their
        names (the dotted path of keys and indices leading to them) and collected."""
        if depth > MAX_NESTING:
            raise ValueError(f"save: containers nested more than {MAX_NESTING} levels "
                             f"deep (at {where!r}); checkpoints hold at most {MAX_NESTING}")
        if isinstance(obj, Tensor):
            return self.tensor(obj, where)
        if isinstance(obj, ComplexTensor):
            return self.complex(obj, where)
        # containers by their exact type: a subclass stored as its base came back as
        # another type (a namedtuple as a tuple, a defaultdict as a dict); it raises
        kind = type(obj)
        if kind in (dict, OrderedDict, Counter):
            return self.mapping(obj, where, depth)
        if kind is Size:
            return {"__size__": list(obj)}
        if kind is tuple:
            return {"__tuple__": [self.encode(v, _child(where, i), depth + 1)
                                  for i, v in enumerate(obj)]}
        if kind is list:
            return [self.encode(v, _child(where, i), depth + 1) for i, v in enumerate(obj)]
        if isinstance(obj, (dict, tuple, list)):
            base = next(b for b in (dict, tuple, list) if isinstance(obj, b))
            raise TypeError(f"save: cannot store a {kind.__name__} (at {where!r}), a "
                            f"{base.__name__} subclass: it would load as a plain "
                            f"{base.__name__}; store {base.__name__}(obj), or pickle it")
        return _encode_scalar(obj, where)

    def tensor(self, t: Tensor, where: str) -> dict[str, Any]:
        if id(t) in self.seen:
            return {"__same__": self.seen[id(t)]}
        name = _unique_name(where or "tensor", self.used)
        self.named.append((name, t))
        self.seen[id(t)] = name
        self.keep.append(t)
        ref: dict[str, Any] = {"__tensor__": name}
        location = _location(t.device)
        if location != "cpu":
            ref["device"] = location
        if _is_parameter(t):
            ref["parameter"] = True
        if t.requires_grad:
            ref["requires_grad"] = True
        return ref

    def complex(self, z: ComplexTensor, where: str) -> dict[str, Any]:
        """A complex tensor as its ``view_as_real`` pairs, flagged ``"complex"`` (a
        safetensors reader sees a float tensor with a last dimension of 2)."""
        if id(z) in self.seen:
            return {"__same__": self.seen[id(z)]}
        ref = self.tensor(view_as_real(z).detach(), where)
        if z.requires_grad:
            ref["requires_grad"] = True
        ref["complex"] = True
        self.seen[id(z)] = ref["__tensor__"]
        self.keep.append(z)
        return ref

    def mapping(self, obj: dict[Any, Any], where: str, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {"__dict__": [
            [_encode_key(k), self.encode(v, _child(where, k), depth + 1)]
            for k, v in obj.items()]}
        metadata = getattr(obj, "_metadata", None)     # a state_dict's module versions
        if isinstance(metadata, dict):
            out["_metadata"] = self.encode(metadata, _child(where, "_metadata"), depth + 1)
        elif isinstance(obj, OrderedDict):
            out["ordered"] = True
        elif isinstance(obj, Counter):
            out["counter"] = True
        return out


def _is_parameter(t: Tensor) -> bool:
    from nova.nn.parameter import Parameter   # nova.nn imports the tensor package first
    return isinstance(t, Parameter)


def _encode_scalar(obj: Any, where: str) -> Any:
    """A leaf value that is not a tensor or container: JSON as it is, or a tagged node
    for the values ``nv.load`` returns from torch files (dtypes, devices, bytes)."""
    if obj is None or type(obj) in (bool, int, float, str):
        return obj
    if isinstance(obj, (np.integer, np.floating, np.bool_)):
        return obj.item()
    if isinstance(obj, (bool, int, float, str)):      # an IntEnum, a str subclass
        raise TypeError(f"save: cannot store a {type(obj).__name__} (at {where!r}): it "
                        "would load as a plain number or string; store int(obj), "
                        "str(obj)..., or pickle it")
    if isinstance(obj, (dt.DType, dt.ComplexDType)):
        if _dtype_by_name(obj.name) is not obj:
            raise TypeError(f"save: cannot store the dtype {obj} (at {where!r}); "
                            f"checkpoints hold the dtypes {sorted(_DTYPE_NAMES)}")
        return {"__dtype__": obj.name}
    if isinstance(obj, Device):
        return {"__device__": str(obj)}
    if type(obj) is bytes:
        return {"__bytes__": obj.hex()}
    if type(obj) is bytearray:
        return {"__bytearray__": obj.hex()}
    hint = ""
    if hasattr(obj, "state_dict") and callable(obj.state_dict):
        hint = (f"; save its state_dict() (`nv.save(obj.state_dict(), path)`, loaded with "
                f"load_state_dict), or pickle the whole {type(obj).__name__}, which "
                "pickles as PyTorch's does")
    raise TypeError(f"save: cannot store a {type(obj).__name__} (at {where!r}); "
                    "checkpoints hold tensors, numbers, strings, bytes, None, dtypes, "
                    f"devices, and lists/tuples/dicts of them{hint}")


_DTYPE_NAMES = frozenset(d.name for d in _CODES)


def _dtype_by_name(name: Any) -> dt.DType | dt.ComplexDType | None:
    """The dtype called ``name`` (a real one, complex64 or complex128)."""
    if not isinstance(name, str):
        return None
    if name in ("complex64", "complex128"):
        return dt.get_complex_dtype(name)
    return dt.get_dtype(name) if name in _DTYPE_NAMES else None


def _encode_key(key: Any) -> Any:
    if key is None or type(key) in (bool, int, float, str):
        return key
    if isinstance(key, (np.integer, np.floating, np.bool_)):
        return key.item()
    if type(key) is tuple:
        return {"__tuple__": [_encode_key(k) for k in key]}
    raise TypeError(f"save: cannot store a dict key of type {type(key).__name__}; keys "
                    "must be str, int, float, bool, None or tuples of them")


def _child(where: str, key: Any) -> str:
    return f"{where}.{key}" if where else str(key)


def _unique_name(name: str, used: set[str]) -> str:
    """``name``, or ``name#1``, ``name#2``... when two paths spell the same string."""
    candidate, n = name, 0
    while candidate in used or candidate == "__metadata__":
        n += 1
        candidate = f"{name}#{n}"
    used.add(candidate)
    return candidate


def _location(d: Device) -> str:
    """A device as PyTorch names storage locations: ``cpu`` or ``cuda:0``."""
    return "cpu" if d.type == "cpu" else f"{d.type}:{d.index or 0}"


def _plan_entries(named: list[tuple[str, Tensor]]) -> dict[str, dict[str, Any]]:
    entries, offset = {}, 0
    for name, t in named:
        size = math.prod(t.shape) * t.dtype.itemsize
        entries[name] = {"dtype": _CODES[t.dtype], "shape": list(t.shape),
                         "data_offsets": [offset, offset + size]}
        offset += size
    return entries


def _header_bytes(entries: dict[str, Any], structure: str, data_digest: str,
                  header_digest: str) -> bytes:
    meta = {_FORMAT_KEY: FORMAT, _STRUCTURE_KEY: structure, _DATA_KEY: data_digest,
            _HEADER_KEY: header_digest}
    head = json.dumps({"__metadata__": meta, **entries}, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)   # safetensors aligns the data section to 8 bytes
    return struct.pack("<Q", len(head)) + head


def _with_header_digest(head: bytes) -> bytes:
    """``head`` (length prefix included, header digest zeroed) with its digest filled in."""
    digest = hashlib.sha256(head).hexdigest().encode()
    field = f'"{_HEADER_KEY}":"{_ZERO_DIGEST}"'.encode()
    return head.replace(field, f'"{_HEADER_KEY}":"'.encode() + digest + b'"', 1)


def _write_data(f: BinaryIO, named: list[tuple[str, Tensor]]) -> str:
    """Stream each tensor's bytes to ``f``; their SHA-256."""
    digest = hashlib.sha256()
    for raw in _tensor_bytes(named):
        f.write(raw)
        digest.update(raw)
    return digest.hexdigest()


def _tensor_bytes(named: list[tuple[str, Tensor]]) -> Iterator[memoryview]:
    """Each tensor's little-endian bytes, one host copy at a time."""
    for _, t in named:
        arr = np.ascontiguousarray(t.numpy(), dtype=t.dtype.np.newbyteorder("<"))
        yield arr.reshape(-1).view(np.uint8).data


def _temp_path(path: str) -> str:
    directory, stem = _temp_stem(path)
    return os.path.join(directory, f"{stem}{_host()}.{os.getpid()}.{secrets.token_hex(4)}")


def _temp_stem(path: str) -> tuple[str, str]:
    """The directory and the name prefix of ``path``'s temporary files (long names are
    shortened with a hash so the temporary name stays within 255 bytes)."""
    directory, base = os.path.split(os.path.abspath(path))
    if len(base) > 120:
        base = base[:100] + "~" + hashlib.sha256(base.encode()).hexdigest()[:12]
    return directory, f".{base}{_TMP_MARK}"


def _host() -> str:
    return socket.gethostname().replace(os.sep, "_") or "localhost"


def _remove_stale_temps(path: str) -> None:
    """Delete temporary files of ``path`` left by writers that died (kill -9, power
    loss) on this host. A temp file's name carries its writer's host and pid; a file
    whose writer is alive, on another host, or unparseable is left alone."""
    directory, stem = _temp_stem(path)
    host = _host()
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if not name.startswith(stem):
            continue
        parts = name[len(stem):].rsplit(".", 2)
        if len(parts) != 3 or parts[0] != host or not parts[1].isdigit():
            continue
        if not _alive(int(parts[1])):
            try:
                os.unlink(os.path.join(directory, name))
            except FileNotFoundError:
                pass                         # another saver removed it first


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True                          # exists, owned by someone else
    except OverflowError:
        return False                         # no such pid can exist
    return True


def _fsync_directory(directory: str) -> None:
    """Make the rename durable (a crash right after save keeps the new file)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass                                 # not supported for directories here
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------- load


class _Entry(NamedTuple):
    """A tensor of the header: ``dtype`` is what it loads as, ``stored`` the
    little-endian element type of its bytes (another for ``_WIDER_CODES``), ``code``
    the file's name for it."""
    name: str
    dtype: dt.DType | dt.ComplexDType
    shape: tuple[int, ...]
    begin: int
    end: int
    stored: np.dtype
    code: str



def load(f: str | os.PathLike | BinaryIO, map_location: Any = None,
         pickle_module: Any = None, *, weights_only: bool | None = None,
         mmap: bool | None = None) -> Any:
    """Read a checkpoint written by ``nv.save``, any safetensors file, or a PyTorch
    checkpoint written by ``torch.save`` (1.6 and later; torch is not needed).

    Returns what ``save`` was given; a safetensors file written by another tool comes
    back as a dict name -> tensor in file order. Files of the previous Nova format
    (``nova-checkpoint-1``) still load, with a warning: their checksum covers only the
    tensor bytes, so saving them again protects the header too. A PyTorch checkpoint
    comes back with its nesting (OrderedDicts included) and Nova tensors; see
    :mod:`nova.serialization_torch` for what it may hold.

    ``f`` is a path or, as for ``torch.load``, a seekable binary file object
    (``io.BytesIO``, ``open(path, "rb")``) read from its current position; messages
    name it by its ``name`` attribute, or as ``<file-like object>``.

    ``map_location`` follows ``torch.load``:

    - ``None``: each tensor on the device it was saved from (``cpu`` for files of
      other tools and old files); a CUDA tensor where CUDA is unavailable raises.
    - ``"cpu"``, ``"cuda"``, ``"cuda:0"`` or an ``nv.device``: every tensor there.
    - a dict from saved location to device, e.g. ``{"cuda:0": "cpu"}``; locations
      not in it stay where they were saved. Locations are spelled ``cpu``/``cuda:0``.
    - a callable ``f(tensor, location) -> Tensor | None``, given each tensor on the CPU
      and its saved location (``"cpu"`` or ``"cuda:0"``); None means the default.

    Anything else raises TypeError (ValueError for an unknown device name), before the
    file is read. A path that cannot be opened raises the ``OSError`` ``open`` raises
    (``FileNotFoundError``, ``PermissionError``, ``IsADirectoryError``), as
    ``torch.load`` does, so ``except FileNotFoundError`` around a resume works. Every
    problem with the file's contents raises :class:`CheckpointError` naming the file and
    what is wrong; nothing is returned unless every check passed.

    ``weights_only`` and ``mmap`` are accepted for ``torch.load`` calls: Nova always
    loads as ``weights_only=True`` does (``False`` enables nothing more), and reads the
    tensors into memory whatever ``mmap`` says. ``pickle_module`` is accepted as
    ``save`` accepts it, and changes nothing: Nova reads a PyTorch checkpoint's pickle
    with its own restricted reader, whatever unpickler the call names.
    """
    place = _placement(map_location)
    for flag, value in (("weights_only", weights_only), ("mmap", mmap)):
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"load: {flag} must be a bool or None, got "
                            f"{type(value).__name__}")
    with _source(f) as src:
        magic = _read_exact(src.f, min(src.size, 16))
        src.f.seek(src.base)
        if magic.startswith(_ZIP_MAGIC) and magic[8:9] != b"{":
            # (a safetensors header of 0x04034B50 bytes starts the same, then has "{")
            from nova.serialization_torch import load_torch   # it imports this module
            return load_torch(src.f, src.name, src.base + src.size, place)
        if magic.startswith(_TORCH_LEGACY_MAGIC):
            raise CheckpointError(
                f"load: {src.name} is in PyTorch's legacy format (torch.save before 1.6, "
                "or _use_new_zipfile_serialization=False), which Nova does not read; "
                "convert it with torch: torch.save(torch.load(old, weights_only=True), "
                "new) writes the zip format that nv.load reads")
        kind, structure, layout, arrays = _read_checked(src)
    if kind is None:
        return {name: _placed(place, f"{src.name}: tensor {name!r}", arr,
                              layout[name].dtype, "cpu")
                for name, arr in arrays.items()}
    return _Decoder(arrays, layout, place, src.name).run(structure)


class _Source(NamedTuple):
    """An open checkpoint: the stream, its name for messages, and where in the stream
    it starts and how many bytes follow."""
    f: BinaryIO
    name: str
    base: int
    size: int


@contextlib.contextmanager
def _source(f: Any) -> Iterator[_Source]:
    """``f`` opened (a path, closed again after) or taken as it is (a file object,
    left open at wherever reading stopped)."""
    if _is_path(f):
        path = os.fsdecode(f)
        stream = open(path, "rb")    # (its OSError propagates, as torch.load's does)
        with stream:
            yield _Source(stream, path, 0, os.fstat(stream.fileno()).st_size)
        return
    _check_file_object(f, "load", "read")
    name = getattr(f, "name", None)
    name = name if isinstance(name, str) else "<file-like object>"
    try:
        base = f.tell()
        f.seek(0, os.SEEK_END)
        end = f.tell()
        f.seek(base)
    except (AttributeError, OSError, ValueError) as e:
        raise io.UnsupportedOperation(
            f"load: cannot seek in {name} ({type(e).__name__}: {e}); as for torch.load, "
            "the file must be seekable: read it into an io.BytesIO first") from None
    if end <= base and base > 0:
        raise CheckpointError(f"load: {name} has no bytes after its position {base}; to "
                              "load what was just written to it, seek(0) first")
    yield _Source(f, name, base, end - base)


def _read_exact(f: BinaryIO, n: int) -> bytes:
    """``n`` bytes (fewer only at the end of the stream): a raw file object's ``read``
    may return less than asked."""
    parts, left = [], n
    while left:
        part = f.read(left)
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _read_checked(src: _Source) -> tuple[str | None, Any, dict[str, _Entry],
                                         dict[str, np.ndarray]]:
    """The file's kind (FORMAT, LEGACY_FORMAT or None: another tool's), its structure,
    tensor layout and tensor arrays in file order, after every check on the bytes: the
    header against its size limit, depth and checksum before its offsets are trusted,
    the offsets against the file's length before any data is read."""
    f, path, size = src.f, src.name, src.size
    raw = _read_header(f, path, size)
    header = _parse_json(raw[8:], path, "header", _HEADER_DEPTH, strict=True)
    if not isinstance(header, dict):
        raise CheckpointError(f"load: {path}: the header is a JSON "
                              f"{type(header).__name__}, not an object")
    meta = _metadata(header.pop("__metadata__", {}), path)
    kind = _kind(meta, path)
    if kind == FORMAT:
        _check_header_digest(raw, meta[_HEADER_KEY], path)
    layout = _layout(header, size - len(raw), path)
    structure = None
    if kind is not None:
        text = meta[_STRUCTURE_KEY if kind == FORMAT else "structure"]
        structure = _parse_json(text.encode(), path, "structure", _STRUCTURE_DEPTH,
                                strict=False)
    arrays, digest = _read_data(f, src.base + len(raw), layout, path)
    if kind is not None and digest != meta[_DATA_KEY if kind == FORMAT else "sha256"]:
        what = "tensor data" if kind == FORMAT else "tensor data (old format)"
        raise CheckpointError(f"load: {path} is corrupted: the {what} does not match its "
                              "checksum")
    _check_bools(arrays, path)
    _widen(arrays, layout, path)
    return kind, structure, layout, arrays


def _read_header(f: BinaryIO, path: str, size: int) -> bytes:
    """The length prefix and the header, after checking both against the file size."""
    if size < 8:
        raise CheckpointError(f"load: {path} is truncated ({size} bytes; no header)")
    (n,) = struct.unpack("<Q", _read_exact(f, 8))
    if n > MAX_HEADER:
        raise CheckpointError(f"load: {path} is corrupted or not a safetensors file: its "
                              f"header claims {n} bytes, more than the {MAX_HEADER} allowed")
    if 8 + n > size:
        raise CheckpointError(f"load: {path} is truncated: its header claims {n} bytes, "
                              f"the file has {size - 8} after the length")
    head = _read_exact(f, n)
    if len(head) != n:
        raise CheckpointError(f"load: {path} is truncated: it shrank while being read")
    return struct.pack("<Q", n) + head


def _parse_json(raw: bytes, path: str, what: str, max_depth: int, strict: bool) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CheckpointError(f"load: {path} is corrupted: its {what} is not UTF-8 "
                              f"(byte {e.start})") from None
    depth = _json_depth(raw)
    if depth > max_depth:
        raise CheckpointError(f"load: {path} is corrupted: its {what} nests {depth} levels "
                              f"deep, more than the {max_depth} allowed")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys,
                          parse_constant=_no_constant if strict else None)
    except ValueError as e:
        raise CheckpointError(f"load: {path} is corrupted or not a safetensors file: bad "
                              f"{what} JSON ({e})") from None


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NESTING_STEP = np.zeros(256, np.int8)
_NESTING_STEP[[ord("["), ord("{")]] = 1
_NESTING_STEP[[ord("]"), ord("}")]] = -1


def _json_depth(raw: bytes) -> int:
    """How deeply JSON text nests (string contents ignored), without parsing it: the
    parser recurses per level, so depth is bounded before it runs."""
    steps = _NESTING_STEP[np.frombuffer(_JSON_STRING.sub(b'""', raw), np.uint8)]
    deepest, carry = 0, 0
    for i in range(0, len(steps), 1 << 20):
        run = np.cumsum(steps[i:i + (1 << 20)], dtype=np.int64) + carry
        deepest, carry = max(deepest, int(run.max())), int(run[-1])
    return deepest


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"duplicate key {dup!r}")
    return out


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _metadata(meta: Any, path: str) -> dict[str, str]:
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise CheckpointError(f"load: {path}: __metadata__ must map strings to strings "
                              "(safetensors), got " + repr(meta)[:200])
    return meta


def _kind(meta: dict[str, str], path: str) -> str | None:
    """FORMAT, LEGACY_FORMAT, or None for a file written by another tool. A file with
    any Nova key must have all of them: one flipped bit changes at most one key."""
    if any(k in meta for k in _NOVA_KEYS):
        missing = [k for k in _NOVA_KEYS if k not in meta]
        if missing:
            raise CheckpointError(f"load: {path} is corrupted: its Nova metadata lacks "
                                  f"{missing}")
        if meta[_FORMAT_KEY] != FORMAT:
            raise CheckpointError(f"load: {path} has format {meta[_FORMAT_KEY]!r}; this "
                                  f"Nova reads {FORMAT!r} and {LEGACY_FORMAT!r}")
        return FORMAT
    if meta.get("format") == LEGACY_FORMAT:
        if "structure" not in meta or "sha256" not in meta:
            raise CheckpointError(f"load: {path} is corrupted: old-format metadata lacks "
                                  "'structure' or 'sha256'")
        warnings.warn(f"load: {path} is in the old {LEGACY_FORMAT} format, whose checksum "
                      "covers only the tensor bytes, not the header; nv.save it again to "
                      "protect the whole file", UserWarning, stacklevel=4)
        return LEGACY_FORMAT
    return None


def _check_header_digest(raw: bytes, claimed: str, path: str) -> None:
    fields = list(_HEADER_DIGEST_FIELD.finditer(raw))
    if len(fields) != 1 or fields[0].group(1).decode() != claimed:
        raise CheckpointError(f"load: {path} is corrupted: its header checksum field is "
                              "malformed")
    a, b = fields[0].span(1)
    blank = raw[:a] + _ZERO_DIGEST.encode() + raw[b:]
    if hashlib.sha256(blank).hexdigest() != claimed:
        raise CheckpointError(f"load: {path} is corrupted: the header does not match its "
                              "checksum")


def _layout(header: dict[str, Any], data_len: int, path: str) -> dict[str, _Entry]:
    """Every tensor entry checked, then the byte ranges: in bounds, and together tiling
    the data section exactly (no gaps, overlaps or trailing bytes), as safetensors
    requires."""
    entries = [_entry(name, e, data_len, path) for name, e in header.items()]
    expected = 0
    for e in sorted(entries, key=lambda e: (e.begin, e.end)):
        if e.begin != expected:
            how = "overlaps the previous tensor" if e.begin < expected else "leaves a gap"
            raise CheckpointError(f"load: {path} is corrupted: tensor {e.name!r} at bytes "
                                  f"[{e.begin}, {e.end}) {how} (expected it at {expected})")
        expected = e.end
    if expected != data_len:
        raise CheckpointError(f"load: {path} is corrupted: the file has {data_len} bytes "
                              f"after the header, its tensors account for {expected}")
    return {e.name: e for e in entries}


def _entry(name: str, e: Any, data_len: int, path: str) -> _Entry:
    where = f"load: {path}: tensor {name!r}"
    if not isinstance(e, dict) or set(e) != {"dtype", "shape", "data_offsets"}:
        raise CheckpointError(f"{where} has a malformed entry {e!r:.200}; expected "
                              "{'dtype', 'shape', 'data_offsets'}")
    code, shape, offsets = e["dtype"], e["shape"], e["data_offsets"]
    if not isinstance(code, str) or (code not in _BY_CODE and code not in _WIDER_CODES):
        why = ("a safetensors dtype Nova has no dtype for"
               if isinstance(code, str) and code in _FOREIGN_CODES else "unknown")
        raise CheckpointError(f"{where} has dtype {code!r:.40} ({why}); Nova reads "
                              f"{sorted([*_BY_CODE, *_WIDER_CODES])}")
    if code in _BY_CODE:
        dtype = _BY_CODE[code]
        stored = dtype.np.newbyteorder("<")
    else:
        stored, dtype = _WIDER_CODES[code]
    if (not isinstance(shape, list) or len(shape) > MAX_RANK
            or not all(type(s) is int and s >= 0 for s in shape)):
        raise CheckpointError(f"{where} has a malformed shape {shape!r:.200}; expected at "
                              f"most {MAX_RANK} non-negative integers")
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(type(o) is int for o in offsets) or not 0 <= offsets[0] <= offsets[1]):
        raise CheckpointError(f"{where} has malformed data_offsets {offsets!r:.200}; "
                              "expected [begin, end] with 0 <= begin <= end")
    begin, end = offsets
    if math.prod(s for s in shape if s) * stored.itemsize >= 2**62:
        raise CheckpointError(f"{where} has shape {shape!r:.200}, too large for any array")
    if end > data_len:
        raise CheckpointError(f"load: {path} is truncated: tensor {name!r} needs bytes up to "
                              f"{end}, the data section has {data_len}")
    size = math.prod(shape) * stored.itemsize
    if end - begin != size:
        raise CheckpointError(f"{where} ({code} {shape}) needs {size} bytes, its data_offsets "
                              f"[{begin}, {end}) span {end - begin}")
    return _Entry(name, dtype, tuple(shape), begin, end, stored, code)


def _read_data(f: BinaryIO, start: int, layout: dict[str, _Entry],
               path: str) -> tuple[dict[str, np.ndarray], str]:
    """Each tensor's bytes read straight into an array of its own, in file order (the
    tensor then wraps that array: one copy of the data in memory, never the whole file
    plus copies), and the SHA-256 of the data section."""
    digest = hashlib.sha256()
    arrays: dict[str, np.ndarray] = {}
    f.seek(start)
    readinto = getattr(f, "readinto", None) or (lambda view: _read_into(f, view))
    for e in sorted(layout.values(), key=lambda e: (e.begin, e.end)):
        arr = np.empty(e.shape, e.stored)
        raw = arr.reshape(-1).view(np.uint8)
        view = memoryview(raw)
        done = 0
        while done < len(view):
            got = readinto(view[done:])
            if not got:
                raise CheckpointError(f"load: {path} is truncated: it shrank while being "
                                      f"read (tensor {e.name!r})")
            done += got
        digest.update(raw)
        arrays[e.name] = arr
    return arrays, digest.hexdigest()


def _read_into(f: BinaryIO, view: memoryview) -> int:
    """``readinto`` for a file object that has only ``read``."""
    data = f.read(len(view))
    view[:len(data)] = data
    return len(data)


def _check_bools(arrays: dict[str, np.ndarray], path: str) -> None:
    """A BOOL byte other than 0 or 1 is not a bool (numpy would keep the raw byte)."""
    for name, arr in arrays.items():
        if arr.dtype == np.bool_ and arr.size and arr.reshape(-1).view(np.uint8).max() > 1:
            raise CheckpointError(f"load: {path} is corrupted: BOOL tensor {name!r} holds "
                                  "bytes other than 0 and 1")


def _widen(arrays: dict[str, np.ndarray], layout: dict[str, _Entry], path: str) -> None:
    """The unsigned integer tensors (U16, U32, U64) as the wider signed type Nova holds
    them in (``_WIDER_CODES``), as ``nv.from_numpy`` and ``torch.save`` files widen
    them: exact values, with one ``NarrowIntegerWarning`` per dtype; U64 values past
    int64 are refused naming the tensor (they would wrap to negatives)."""
    widened: dict[str, tuple[str, str]] = {}
    for name, arr in arrays.items():
        e = layout[name]
        if e.code not in _WIDER_CODES or e.dtype.is_complex:
            continue
        if e.code == "U64" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
            raise CheckpointError(f"load: {path}: tensor {name!r} holds U64 values up to "
                                  f"{int(arr.max())}, which do not fit int64, Nova's widest "
                                  "integer type")
        arrays[name] = arr.astype(e.dtype.np)
        widened.setdefault(e.code, (name, e.dtype.name))
    for code, (name, target) in widened.items():
        warnings.warn(f"load: {path}: tensor {name!r} is safetensors {code}, which Nova has "
                      f"no dtype for; its values (and those of the file's other {code} "
                      f"tensors) are held exactly as {target}, as nv.from_numpy does",
                      NarrowIntegerWarning, stacklevel=4)


def _placed(place: Placement, what: str, arr: np.ndarray, dtype: dt.DType | dt.ComplexDType,
            location: str) -> Tensor | ComplexTensor:
    """``place`` of a tensor's array; a complex one (a C64 tensor of another tool's
    file) as a ``ComplexTensor`` of its two parts, each placed as a real tensor."""
    if not dtype.is_complex:
        return place(what, arr, dtype, location)
    return ComplexTensor(*(place(what, np.array(part), dtype.real, location)
                           for part in (arr.real, arr.imag)))


_TENSOR_FIELDS = frozenset({"__tensor__", "device", "parameter", "requires_grad", "complex"})
_LEAF_NODES = frozenset({"__dtype__", "__device__", "__size__", "__bytes__", "__bytearray__"})
_HEX = re.compile(r"(?:[0-9a-f]{2})*")


class _Decoder:
    """Rebuilds the saved object from its JSON structure, validating every node: a file
    that passed its checksums but was written by something else still cannot make the
    loader crash or return a half-built object."""

    def __init__(self, arrays: dict[str, np.ndarray], layout: dict[str, _Entry],
                 place: Placement, path: str):
        self.arrays, self.layout, self.place, self.path = arrays, layout, place, path
        self.used: set[str] = set()
        self.tensors: dict[str, Tensor] = {}

    def run(self, structure: Any) -> Any:
        out = self.decode(structure, 0)
        unused = sorted(set(self.layout) - self.used)
        if unused:
            raise CheckpointError(f"load: {self.path} is corrupted: tensors {unused[:5]} are "
                                  "not referenced by its structure")
        return out

    def fail(self, what: str) -> CheckpointError:
        return CheckpointError(f"load: {self.path} is corrupted: its structure {what}")

    def decode(self, obj: Any, depth: int) -> Any:
        if depth > _STRUCTURE_DEPTH:
            raise self.fail(f"nests more than {_STRUCTURE_DEPTH} levels")
        if isinstance(obj, list):
            return [self.decode(v, depth + 1) for v in obj]
        if isinstance(obj, dict):
            if "__tensor__" in obj and set(obj) <= _TENSOR_FIELDS:
                return self.tensor(obj)
            if set(obj) == {"__same__"}:
                return self.same(obj["__same__"])
            if set(obj) == {"__tuple__"} and isinstance(obj["__tuple__"], list):
                return tuple(self.decode(v, depth + 1) for v in obj["__tuple__"])
            if set(obj) == {"__dict__"} and isinstance(obj["__dict__"], list):
                return self.mapping(obj["__dict__"], depth)
            if set(obj) == {"__dict__", "ordered"} and isinstance(obj["__dict__"], list) \
                    and obj["ordered"] is True:
                return OrderedDict(self.mapping(obj["__dict__"], depth))
            if set(obj) == {"__dict__", "counter"} and isinstance(obj["__dict__"], list) \
                    and obj["counter"] is True:
                return Counter(self.mapping(obj["__dict__"], depth))
            if len(obj) == 1 and next(iter(obj)) in _LEAF_NODES:
                return self.leaf(*next(iter(obj.items())))
            if set(obj) == {"__dict__", "_metadata"} and isinstance(obj["__dict__"], list):
                out = OrderedDict(self.mapping(obj["__dict__"], depth))
                metadata = self.decode(obj["_metadata"], depth + 1)
                if not isinstance(metadata, dict):
                    raise self.fail(f"has a _metadata that is a {type(metadata).__name__}, "
                                    "not a dict")
                out._metadata = metadata
                return out
            raise self.fail(f"has an unknown entry {sorted(obj)!r:.200}")
        return obj

    def mapping(self, pairs: list[Any], depth: int) -> dict[Any, Any]:
        out = {}
        for pair in pairs:
            if not isinstance(pair, list) or len(pair) != 2:
                raise self.fail(f"has a malformed dict item {pair!r:.200}")
            key = self.decode(pair[0], depth + 1)
            try:
                hash(key)
            except TypeError:
                raise self.fail(f"has an unhashable dict key {key!r:.200}") from None
            out[key] = self.decode(pair[1], depth + 1)
        return out

    def tensor(self, ref: dict[str, Any]) -> Tensor:
        name, location = ref["__tensor__"], ref.get("device", "cpu")
        if not isinstance(name, str) or name not in self.layout:
            raise self.fail(f"refers to a missing tensor {name!r:.200}")
        if name in self.used:
            raise self.fail(f"refers to tensor {name!r} twice")
        if location not in ("cpu", "cuda:0"):
            raise self.fail(f"puts tensor {name!r} on an unknown device {location!r:.40}")
        param, grad = ref.get("parameter", False), ref.get("requires_grad", False)
        cplx = ref.get("complex", False)
        if any(f is not True and f is not False for f in (param, grad, cplx)):
            raise self.fail(f"gives tensor {name!r} a non-bool parameter/requires_grad/"
                            f"complex flag ({param!r:.20}, {grad!r:.20}, {cplx!r:.20})")
        dtype = self.layout[name].dtype
        if cplx and (param or dtype not in (dt.float32, dt.float64) or
                     not self.layout[name].shape or self.layout[name].shape[-1] != 2):
            raise self.fail(f"marks tensor {name!r} complex, but it is not a float32/float64 "
                            "tensor with a last dimension of 2 (nor may it be a Parameter)")
        if param and dtype.is_complex:
            raise self.fail(f"makes the {dtype.name} tensor {name!r} a Parameter; a "
                            "Parameter is real")
        if grad and not (dtype.is_floating_point or dtype.is_complex):
            raise self.fail(f"makes the {dtype.name} tensor {name!r} require grad; only "
                            "floating-point and complex tensors can")
        self.used.add(name)
        out = _placed(self.place, f"{self.path}: tensor {name!r}", self.arrays[name], dtype,
                      location)
        if cplx:
            parts = view_as_complex(out)
            out = ComplexTensor(parts.real.detach(), parts.imag.detach())
            if grad:
                out.requires_grad_()
        elif param:
            from nova.nn.parameter import Parameter
            out = Parameter(out, requires_grad=grad)
        elif grad:
            out = out.requires_grad_()
        self.tensors[name] = out
        return out

    def same(self, name: Any) -> Tensor:
        """A tensor decoded earlier, again: tied weights share one object."""
        if not isinstance(name, str) or name not in self.tensors:
            raise self.fail(f"refers back to {name!r:.200}, which is not a tensor decoded "
                            "before it")
        return self.tensors[name]

    def leaf(self, tag: str, value: Any) -> Any:
        """A dtype, a device, an ``nv.Size`` or bytes."""
        if tag == "__dtype__" and _dtype_by_name(value) is not None:
            return _dtype_by_name(value)
        if tag == "__device__" and isinstance(value, str):
            try:
                return Device(value)
            except (ValueError, RuntimeError, TypeError):
                pass
        if tag == "__size__" and isinstance(value, list) and all(
                type(v) is int and v >= 0 for v in value):
            return Size(value)
        if tag == "__bytes__" and isinstance(value, str) and _HEX.fullmatch(value):
            return bytes.fromhex(value)
        if tag == "__bytearray__" and isinstance(value, str) and _HEX.fullmatch(value):
            return bytearray.fromhex(value)
        raise self.fail(f"has a malformed {tag} node {value!r:.200}")


def _placement(map_location: Any) -> Placement:
    """``map_location`` as a :data:`Placement`, validated before the file is opened."""
    if map_location is None:
        return _on_saved_device
    if isinstance(map_location, (str, Device)):
        target = check_device(map_location, "load")
        return lambda what, arr, dtype, location: _host_or_device(arr, dtype, target)
    if isinstance(map_location, dict):
        table = {_location_key(k): _location_key(v) for k, v in map_location.items()}
        return lambda what, arr, dtype, location: _on_saved_device(
            what, arr, dtype, table.get(location, location))
    if callable(map_location):
        return lambda what, arr, dtype, location: _by_callable(map_location, what, arr,
                                                               dtype, location)
    raise TypeError(f"load: map_location must be None, a device string, an nv.device, a "
                    f"dict or a callable, got {type(map_location).__name__}")


def _location_key(spec: Any) -> str:
    if not isinstance(spec, (str, Device)):
        raise TypeError(f"load: map_location dict entries must be device strings or "
                        f"nv.device, got {spec!r}")
    return _location(Device(spec))


def _on_saved_device(what: str, arr: np.ndarray, dtype: dt.DType, location: str) -> Tensor:
    try:
        target = check_device(location, "load")
    except (RuntimeError, ValueError) as e:     # no GPU; a device Nova lacks (mps)
        reason = str(e).removeprefix("load: ")
        raise RuntimeError(f"load: {what} was saved on {location}, but {reason}; pass "
                           "map_location='cpu' to load it on the CPU") from None
    return _host_or_device(arr, dtype, target)


def _host_or_device(arr: np.ndarray, dtype: dt.DType, target: Device) -> Tensor:
    """A tensor of ``arr`` (which nothing else references) on ``target``: on the CPU it
    wraps the array itself; a device gets a copy."""
    if target.type != "cpu":
        return tensor(arr, dtype=dtype, device=target)
    if arr.dtype != dtype.np:             # a big-endian host
        arr = arr.astype(dtype.np)
    return from_numpy(arr)


def _by_callable(fn: Callable[[Tensor, str], Any], what: str, arr: np.ndarray,
                 dtype: dt.DType, location: str) -> Tensor:
    host = _host_or_device(arr, dtype, Device("cpu"))
    out = fn(host, location)
    if out is None:                       # the default; never a second tensor on arr
        return host if location == "cpu" else _on_saved_device(what, arr, dtype, location)
    if not isinstance(out, Tensor):
        raise TypeError(f"load: map_location returned a {type(out).__name__} for {what}; "
                        "it must return an nv.Tensor or None")
    return out


# ------------------------------------------------------------------- safe globals
# ``torch.serialization``'s registry of globals ``torch.load(weights_only=True)`` may
# build. ``nv.load`` never runs a pickle's globals: Nova files hold no pickle, and its
# reader of ``torch.save`` files builds only tensors, Parameters, OrderedDicts, torch
# dtypes, sizes and devices, and the builtins ``weights_only`` loads
# (``nova.serialization_torch``). So these calls are accepted and remembered
# (``get_safe_globals`` reads them back) and enable nothing more: a checkpoint that
# pickles a registered class (an ``argparse.Namespace`` of hyperparameters, a numpy
# scalar) is still refused, with a ``CheckpointError`` that says it is registered.


def _checked_globals(safe_globals: Any, op: str) -> list:
    """``safe_globals`` as a list, each entry a callable or a (callable, "dotted.name")
    pair (checked here; PyTorch checks the same at ``torch.load``)."""
    entries = list(safe_globals)
    for entry in entries:
        if isinstance(entry, tuple):
            if len(entry) != 2:
                raise ValueError(f"{op}: expected tuple of length 2 (global, str of "
                                 f"callable full path), but got tuple of length: {len(entry)}")
            if type(entry[1]) is not str:
                raise TypeError(f"{op}: expected second item in tuple to be str of "
                                f"callable full path, but got: {type(entry[1])}")
        elif not callable(entry):
            raise TypeError(f"{op}: expected a function or class, or a (function or class, "
                            f"str) tuple, but got {entry!r}")
    return entries


def add_safe_globals(safe_globals: list) -> None:
    """Register globals as safe for ``weights_only`` loading
    (``torch.serialization.add_safe_globals``): recorded, see above."""
    for entry in _checked_globals(safe_globals, "add_safe_globals"):
        if entry not in SAFE_GLOBALS:
            SAFE_GLOBALS.append(entry)


def get_safe_globals() -> list:
    """The registered globals, in the order they were added."""
    return list(SAFE_GLOBALS)


def clear_safe_globals() -> None:
    """Forget every registered global."""
    SAFE_GLOBALS.clear()


class safe_globals:
    """``with nv.serialization.safe_globals([...]):`` registers the globals for the
    block (``torch.serialization.safe_globals``) and restores the registry as it was on
    exit (PyTorch removes the block's globals, also ones registered before it)."""

    def __init__(self, safe_globals: list):
        self.safe_globals = _checked_globals(safe_globals, "safe_globals")
        self._before: list[list] = []

    def __enter__(self) -> None:
        self._before.append(list(SAFE_GLOBALS))
        add_safe_globals(self.safe_globals)

    def __exit__(self, *exc: Any) -> None:
        SAFE_GLOBALS[:] = self._before.pop()
