"""Reading checkpoints written by ``torch.save`` (PyTorch 1.6 and later), without torch.

The format. ``torch.save(obj, f)`` writes a zip archive (records stored uncompressed,
each with its CRC-32) whose records all sit under one directory, the *prefix*
(``archive`` since PyTorch 2.0, the file's stem before):

- ``<prefix>/data.pkl``: ``obj`` pickled (protocol 2 unless the caller chose another),
  with each tensor reduced to a call of ``torch._utils._rebuild_tensor_v2(storage,
  storage_offset, size, stride, requires_grad, backward_hooks[, metadata])``;
  ``_rebuild_tensor_v3`` adds a ``dtype`` argument for the dtypes kept in an untyped
  storage (uint16/32/64, float8...). A ``torch.nn.Parameter`` is
  ``torch._utils._rebuild_parameter(tensor, requires_grad, backward_hooks)``; an
  ``OrderedDict`` (every ``state_dict``) is ``collections.OrderedDict`` called with no
  arguments, then filled, then given its ``_metadata`` attribute.
- A storage is not pickled but named by a *persistent id*, the tuple ``("storage",
  torch.FloatStorage, "<key>", "cpu", numel)``: its element type (a legacy storage
  class such as ``torch.FloatStorage``, or ``torch.storage.UntypedStorage`` counting
  bytes), its key, the location it was saved from (``cpu``, ``cuda:0``) and its number
  of elements. Several tensors (views, tied weights) name the same storage; the same
  tensor object saved twice is one pickle memo entry.
- ``<prefix>/data/<key>``: each storage's raw bytes, in the byte order of
  ``<prefix>/byteorder`` (``little`` or ``big``; files without that record predate it
  and are little-endian).
- ``<prefix>/version``, ``.format_version``, ``.storage_alignment``,
  ``.data/serialization_id``: bookkeeping this reader does not need.

Safety. The pickle is read like ``torch.load(weights_only=True)`` reads it: the
unpickler resolves only the globals above (plus torch dtypes, ``torch.Size`` and
``torch.device``, and the builtins ``set``, ``complex``, ``bytearray``, ``bytes`` (empty)
and ``_codecs.encode`` -- how protocol 2 pickles ``bytes`` -- that torch's accepts too,
empty ``bytes`` aside), each with its arguments checked, and each resolves to a function of this module that records its
arguments in an inert placeholder, so unpickling runs no code of the file's choosing;
any other global (``os.system``, ``builtins.eval``, a model class) raises
:class:`CheckpointError` naming it. The placeholders are then converted into Nova
objects, each checked with its key path for messages: containers (bounded nesting, no
cycles), dtypes, and every tensor's offset, sizes and strides against its storage's
length before a byte is read, so a hostile file cannot index outside its data.
Storage records are checked against the sizes their persistent ids claim before they
are read, and zip's CRC-32 catches damaged bytes. What Nova cannot represent (sparse or
quantized tensors, complex32 and float8 dtypes, tensor subclasses) is refused by name;
complex64/complex128 tensors load as ``ComplexTensor``s.

Values: tensors come back as Nova tensors (``Parameter`` as ``nv.nn.Parameter``,
``requires_grad`` kept), in their dtype (uint8, int8 and int16 included: a uint8
buffer stays uint8); uint16 widens to int32 and uint32/uint64 to int64, exactly as
``nv.from_numpy`` does, with one ``NarrowIntegerWarning`` per dtype.
Views sharing a storage each get their own values; two tensors with the same storage,
offset, sizes, strides and ``requires_grad`` (tied weights) come back as the same
tensor object. OrderedDicts stay OrderedDicts, with their ``_metadata`` (the module
versions ``load_state_dict`` reads: BatchNorm's and spectral norm's checkpoint
conversions depend on them). ``map_location`` works
as for Nova files, with the locations the file names; a callable is given each tensor
(torch's is given each storage). The legacy pre-1.6 format (a pickle stream, not a zip)
is refused by ``nv.load`` with instructions to convert it.
"""
from __future__ import annotations

import io
import math
import pickle
import pickletools
import struct
import warnings
import zipfile
import zlib
from collections import Counter, OrderedDict
from typing import Any, BinaryIO

import numpy as np

from nova.core import dtypes as dt
from nova.nn.parameter import Parameter
from nova.checkpoint_common import MAX_HEADER, MAX_NESTING, MAX_RANK, SAFE_GLOBALS, \
    CheckpointError, Placement, safe_global_name
from nova.tensor.complex import ComplexTensor
from nova.tensor.creation import NarrowIntegerWarning
from nova.tensor.device import device as Device
from nova.tensor.legacy import Size
from nova.tensor.tensor import Tensor

# torch dtype names (as pickled: ``torch float32``) and the numpy dtype of their bytes.
_NUMPY = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
          "bfloat16": dt.bfloat16.np, "int64": np.int64, "int32": np.int32,
          "int16": np.int16, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_,
          "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
          "complex64": np.complex64, "complex128": np.complex128}
# torch dtypes that exist but have no Nova (or exact numpy) counterpart.
_FOREIGN = {"complex32", "float8_e4m3fn", "float8_e5m2",
            "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2",
            "qint8", "quint8", "qint32", "quint4x2", "quint2x4", "bits1x8", "bits2x4",
            "bits4x2", "bits8", "bits16",
            *(f"int{n}" for n in range(1, 8)), *(f"uint{n}" for n in range(1, 8))}
# Legacy storage classes (``torch FloatStorage``) name the dtype of their elements.
_STORAGES = {"FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
             "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
             "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8",
             "BoolStorage": "bool", "ComplexFloatStorage": "complex64",
             "ComplexDoubleStorage": "complex128", "QInt8Storage": "qint8",
             "QUInt8Storage": "quint8", "QInt32Storage": "qint32",
             "QUInt4x2Storage": "quint4x2", "QUInt2x4Storage": "quint2x4"}
_CHUNK = 1 << 24                # storage records are copied in pieces this large
_MAX_LOCATION = 64              # characters in a location tag ("cuda:0")
_DEFLATE_RATIO = 1032           # deflate's largest possible expansion
# What zipfile raises on a damaged archive (CheckpointError, a ValueError, is re-raised).
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError,
               NotImplementedError, RuntimeError, struct.error, zlib.error, OverflowError)


class _Inert:
    """A placeholder the unpickler builds: plain data, nothing to call; pickle's BUILD
    opcode (which would set its fields after the fact) is refused."""

    __slots__ = ()

    def __setstate__(self, state: Any) -> None:
        raise pickle.UnpicklingError(f"BUILD on a {type(self).__name__.lstrip('_')} "
                                     "(torch never writes one)")


class _DType(_Inert):
    """A torch dtype (``torch float32``), by name."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


class _StorageType(_Inert):
    """A storage class (``torch FloatStorage``, ``torch.storage UntypedStorage``)."""

    __slots__ = ("name", "dtype")

    def __init__(self, name: str, dtype: str):
        self.name, self.dtype = name, dtype


class _Storage(_Inert):
    """A storage named by a persistent id: its record ``data/<key>`` holds ``numel``
    elements of ``dtype``. ``views`` collects the distinct views of it, so a storage
    that one view covers is wrapped without a copy."""

    __slots__ = ("key", "dtype", "location", "numel", "views")

    def __init__(self, key: str, dtype: str, location: str, numel: int):
        self.key, self.dtype, self.location, self.numel = key, dtype, location, numel
        self.views: set[tuple] = set()


class _TensorRef(_Inert):
    """The arguments of one ``_rebuild_tensor_v2``/``_v3`` call (``dtype`` None: the
    storage's)."""

    __slots__ = ("storage", "offset", "size", "stride", "requires_grad", "dtype",
                 "metadata")

    def __init__(self, storage: Any, offset: Any, size: Any, stride: Any,
                 requires_grad: Any, dtype: Any, metadata: Any):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride
        self.requires_grad, self.dtype, self.metadata = requires_grad, dtype, metadata
        if isinstance(storage, _Storage):
            storage.views.add(self.signature())

    def signature(self) -> tuple:
        """What makes two rebuilt tensors the same tensor (unhashable parts by repr:
        they are rejected later, with their name)."""
        parts = (self.dtype.name if isinstance(self.dtype, _DType) else self.dtype,
                 self.offset, self.size, self.stride, self.requires_grad)
        try:
            hash(parts)
        except TypeError:
            return tuple(repr(p) for p in parts)
        return parts


class _ParamRef(_Inert):
    """The arguments of one ``_rebuild_parameter`` call."""

    __slots__ = ("data", "requires_grad")

    def __init__(self, data: Any, requires_grad: Any):
        self.data, self.requires_grad = data, requires_grad


class _Call(_Inert):
    """A call of ``torch.Size`` or ``torch.device``, converted once its arguments are
    checked."""

    __slots__ = ("kind", "args")

    def __init__(self, kind: str, args: tuple):
        self.kind, self.args = kind, args


def _rebuild_tensor_v2(storage: Any, storage_offset: Any, size: Any, stride: Any,
                       requires_grad: Any, backward_hooks: Any,
                       metadata: Any = None) -> _TensorRef:
    return _TensorRef(storage, storage_offset, size, stride, requires_grad, None, metadata)


def _rebuild_tensor_v3(storage: Any, storage_offset: Any, size: Any, stride: Any,
                       requires_grad: Any, backward_hooks: Any, dtype: Any,
                       metadata: Any = None) -> _TensorRef:
    return _TensorRef(storage, storage_offset, size, stride, requires_grad, dtype, metadata)


def _rebuild_parameter(data: Any, requires_grad: Any, backward_hooks: Any) -> _ParamRef:
    return _ParamRef(data, requires_grad)


def _size(*args: Any) -> _Call:
    return _Call("torch.Size", args)


def _device(*args: Any) -> _Call:
    return _Call("torch.device", args)


def _builtin(kind: str) -> Any:
    """An inert stand-in for the builtin ``kind`` (``set``, ``complex``, ``bytearray``,
    and ``_codecs.encode``, which protocol-2 pickles call to make ``bytes``): records the
    call, built by ``_Converter.call`` once its arguments are checked."""
    return lambda *args: _Call(kind, args)


_FUNCTIONS = {("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
              ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
              ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
              ("collections", "OrderedDict"): OrderedDict,
              ("collections", "Counter"): _builtin("Counter"),
              ("torch", "Size"): _size, ("torch", "device"): _device,
              # the builtins torch.load(weights_only=True) accepts beyond containers
              **{(module, name): _builtin(name) for module in ("builtins", "__builtin__")
                 for name in ("set", "complex", "bytearray", "bytes")},
              ("_codecs", "encode"): _builtin("encode")}


class _Unpickler(pickle.Unpickler):
    """``data.pkl``'s unpickler: the allowed globals resolve to this module's inert
    functions and placeholders, anything else raises; persistent ids become
    :class:`_Storage` records (one per key)."""

    def __init__(self, file: BinaryIO, name: str):
        super().__init__(file)
        self.name = name
        self.storages: dict[str, _Storage] = {}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _FUNCTIONS:
            return _FUNCTIONS[module, name]
        if module == "torch" and name in _STORAGES:
            return _StorageType(name, _STORAGES[name])
        if module in ("torch", "torch.storage") and name == "UntypedStorage":
            return _StorageType(name, "uint8")
        if module == "torch" and (name in _NUMPY or name in _FOREIGN):
            return _DType(name)
        registered = f"{module}.{name}" in {safe_global_name(g) for g in SAFE_GLOBALS}
        raise CheckpointError(
            f"load: {self.name} refers to the Python global {module}.{name}, which Nova "
            "does not load: a PyTorch checkpoint may hold tensors, Parameters, "
            "OrderedDicts, torch dtypes and sizes, numbers (complex too), strings, bytes "
            "and containers, sets included (what torch.load(weights_only=True) accepts); "
            "other objects could run code" + (
                " (it is registered with nv.serialization.add_safe_globals, which Nova "
                "records but does not act on: its reader builds only those objects)"
                if registered else ""))

    def persistent_load(self, pid: Any) -> _Storage:
        if type(pid) is not tuple or len(pid) != 5 or pid[0] != "storage":
            raise CheckpointError(f"load: {self.name} is corrupted: a persistent id is "
                                  f"{pid!r:.200}, not ('storage', type, key, location, "
                                  "numel)")
        _, kind, key, location, numel = pid
        if (not isinstance(kind, _StorageType) or type(key) is not str
                or type(location) is not str or not 0 < len(location) <= _MAX_LOCATION
                or type(numel) is not int or numel < 0):
            raise CheckpointError(f"load: {self.name} is corrupted: malformed storage "
                                  f"record {pid!r:.200}")
        storage = self.storages.setdefault(key, _Storage(key, kind.dtype, location, numel))
        if (storage.dtype, storage.location, storage.numel) != (kind.dtype, location, numel):
            raise CheckpointError(f"load: {self.name} is corrupted: storage {key!r} is "
                                  f"described as {storage.numel} {storage.dtype} on "
                                  f"{storage.location} and as {numel} {kind.dtype} on "
                                  f"{location}")
        return storage


def load_torch(f: BinaryIO, name: str, end: int, place: Placement) -> Any:
    """The object in the ``torch.save`` zip archive ``f`` (a seekable binary file that
    ends at byte ``end``; ``name`` names it in messages), tensors placed by ``place``."""
    archive = _Archive(f, name, end)
    try:
        return archive.load(place)
    finally:
        archive.close()


class _Archive:
    """One open archive: its prefix, byte order and records."""

    def __init__(self, f: BinaryIO, name: str, end: int):
        self.name, self.end = name, end
        try:
            self.zip = zipfile.ZipFile(f)
        except _ZIP_ERRORS as e:
            raise CheckpointError(f"load: {name} is a truncated or damaged zip archive "
                                  f"({type(e).__name__}: {e})") from None
        try:
            self.infos = {i.filename: i for i in self.zip.infolist()}
            if len(self.infos) != len(self.zip.infolist()):
                raise self.fail("holds two records of the same name")
            self.prefix = self._prefix()
            self.byteorder = self._byteorder()
        except BaseException:
            self.zip.close()
            raise

    def close(self) -> None:
        self.zip.close()

    def fail(self, what: str) -> CheckpointError:
        return CheckpointError(f"load: {self.name} is corrupted: it {what}")

    def _prefix(self) -> str:
        found = [n[:-len("/data.pkl")] for n in self.infos
                 if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(found) != 1:
            raise CheckpointError(
                f"load: {self.name} is a zip archive but not a torch.save checkpoint: "
                f"it has {len(found)} '<prefix>/data.pkl' records, expected one")
        if f"{found[0]}/constants.pkl" in self.infos:
            raise CheckpointError(
                f"load: {self.name} is a TorchScript archive (torch.jit.save), which holds "
                "code; Nova reads torch.save checkpoints: save the module's state_dict()")
        return found[0]

    def _byteorder(self) -> str:
        record = f"{self.prefix}/byteorder"
        if record not in self.infos:
            return "little"              # written before the record existed: x86 or ARM
        order = self.read(record, 16)
        if order not in (b"little", b"big"):
            raise self.fail(f"has a byteorder record {order!r:.40}, not 'little' or 'big'")
        return order.decode()

    def read(self, record: str, limit: int) -> bytes:
        """A small record, whole, after checking its size against ``limit``."""
        info = self.infos[record]
        if info.file_size > limit:
            raise self.fail(f"has a {record} record of {info.file_size} bytes, more than "
                            f"the {limit} allowed")
        self._check_readable(info)
        try:
            return self.zip.read(info)
        except _ZIP_ERRORS as e:
            raise self.fail(f"has a damaged {record} record ({type(e).__name__}: {e})") \
                from None

    def _check_readable(self, info: zipfile.ZipInfo) -> None:
        """Before reading a record: stored or deflated, unencrypted, its claimed sizes
        possible for this file (a lying size must not allocate memory)."""
        if info.flag_bits & 0x1:
            raise self.fail(f"has an encrypted record {info.filename!r}")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise self.fail(f"has a record {info.filename!r} compressed with method "
                            f"{info.compress_type}; torch writes them stored")
        most = info.compress_size if info.compress_type == zipfile.ZIP_STORED else \
            info.compress_size * _DEFLATE_RATIO + 1024
        if info.header_offset + info.compress_size > self.end or info.file_size > most:
            raise CheckpointError(f"load: {self.name} is truncated or corrupted: record "
                                  f"{info.filename!r} claims {info.file_size} bytes "
                                  f"({info.compress_size} in the file), beyond its end")

    def load(self, place: Placement) -> Any:
        pickled = self.read(f"{self.prefix}/data.pkl", MAX_HEADER)
        unpickler = _Unpickler(io.BytesIO(pickled), self.name)
        claim = None
        try:
            graph = unpickler.load()
        except CheckpointError:
            raise
        except MemoryError:
            # an opcode claiming more bytes than data.pkl holds (BINBYTES8 of 2**41: the
            # unpickler allocates before it reads) is a damaged file; a pickle whose
            # claims all fit ran out of memory for real
            claim = _overlong_claim(pickled)
            if claim is None:
                raise
        except Exception as e:   # noqa: BLE001 -- only pickle's machinery and our placeholders ran
            raise self.fail(f"has a damaged data.pkl ({type(e).__name__}: {e})") from None
        if claim is not None:      # (raised outside the handler: the failed unpickler is
            del unpickler          # freed now, not kept to exit by the error's context)
            raise self.fail(f"has a damaged data.pkl ({claim})")
        converter = _Converter(self, place)
        out = converter.convert(graph, "", 0)
        converter.warn_widened()
        return out

    def storage_bytes(self, storage: _Storage, itemsize: int) -> np.ndarray:
        """The bytes of ``storage``'s record, which must hold exactly ``numel``
        elements of ``itemsize`` bytes."""
        record = f"{self.prefix}/data/{storage.key}"
        if record not in self.infos:
            raise self.fail(f"lacks the record {record!r} of storage {storage.key!r}")
        info, nbytes = self.infos[record], storage.numel * itemsize
        if info.file_size != nbytes:
            raise self.fail(f"has {info.file_size} bytes in storage {storage.key!r}, whose "
                            f"{storage.numel} {storage.dtype} elements need {nbytes}")
        self._check_readable(info)
        out = np.empty(nbytes, np.uint8)
        try:
            with self.zip.open(info) as src:
                done = 0
                while done < nbytes:
                    got = src.readinto(memoryview(out)[done:done + _CHUNK])
                    if not got:
                        raise self.fail(f"ends inside storage {storage.key!r}")
                    done += got                  # zipfile checks the CRC-32 at the end
        except CheckpointError:
            raise
        except _ZIP_ERRORS as e:
            raise self.fail(f"has a damaged storage {storage.key!r} ({type(e).__name__}: "
                            f"{e})") from None
        return out


def _overlong_claim(pickled: bytes) -> str | None:
    """Why ``pickled`` is not a whole pickle (an opcode's length past its end), or None
    (``pickletools`` reads each argument only as far as the data goes)."""
    try:
        for _ in pickletools.genops(io.BytesIO(pickled)):
            pass
    except ValueError as e:
        return str(e)
    return None


def _set_of(args: list) -> set:
    if len(args) > 1 or (args and type(args[0]) not in (list, tuple)):
        raise TypeError("expected one list of items")
    return set(args[0]) if args else set()


def _complex_of(args: list) -> complex:
    if not 1 <= len(args) <= 2 or any(type(a) not in (int, float) for a in args):
        raise TypeError("expected a real and an imaginary part, both numbers")
    return complex(*args)


def _bytes_of(args: list) -> bytes:
    if not args:
        return b""          # (``bytes()``: how protocol 2 pickles an empty bytes)
    if len(args) != 2 or type(args[0]) is not str or args[1] != "latin1":
        raise TypeError("expected a string and 'latin1'")
    return args[0].encode("latin1")


def _bytearray_of(args: list) -> bytearray:
    if len(args) > 1 or (args and type(args[0]) not in (bytes, bytearray)):
        raise TypeError("expected bytes")
    return bytearray(args[0]) if args else bytearray()


def _counter_of(args: list) -> Counter:
    """``collections.Counter`` (``MultiStepLR``'s milestones in PyTorch's state dict)."""
    if len(args) > 1 or (args and type(args[0]) is not dict) or any(
            type(n) is not int for n in (args[0].values() if args else ())):
        raise TypeError("expected one dict of integer counts")
    return Counter(args[0]) if args else Counter()


# What a checkpoint's builtin calls build (``_builtin``), arguments checked.
_BUILTIN_CALLS = {"set": _set_of, "complex": _complex_of, "encode": _bytes_of,
                  "bytes": _bytes_of, "bytearray": _bytearray_of, "Counter": _counter_of}


class _Converter:
    """Turns the unpickled placeholders into Nova objects, checking each with its key
    path (``model.fc.weight``) for messages. Shared objects stay shared (a memo by
    identity), cycles and nesting past the limit are refused."""

    def __init__(self, archive: _Archive, place: Placement):
        self.archive, self.place, self.name = archive, place, archive.name
        self.memo: dict[int, Any] = {}
        self.active: set[int] = set()
        self.tensors: dict[tuple, Tensor] = {}     # (storage key, signature) -> tensor
        self.params: dict[tuple, Parameter] = {}
        self.raw: dict[str, np.ndarray] = {}       # storage key -> bytes still needed
        self.built: dict[str, int] = {}            # storage key -> views made so far
        self.widened: dict[str, tuple[str, str]] = {}   # numpy dtype -> (tensor, dtype)

    def fail(self, where: str, what: str, noun: str = "") -> CheckpointError:
        """An error about the object at ``where``; ``noun`` says what it is."""
        label = f"{where!r:.200}" if where else "<root>"
        return CheckpointError(f"load: {self.name}: {noun}{label} {what}")

    def convert(self, obj: Any, where: str, depth: int) -> Any:
        if obj is None or type(obj) in (bool, int, float, complex, str, bytes):
            return obj
        if id(obj) in self.memo:
            return self.memo[id(obj)]
        if id(obj) in self.active:
            raise self.fail(where, "contains itself (a cycle); checkpoints are trees")
        if depth > MAX_NESTING:
            raise self.fail(where, f"is nested more than {MAX_NESTING} levels deep")
        self.active.add(id(obj))
        out = self._convert(obj, where, depth)
        self.active.discard(id(obj))
        self.memo[id(obj)] = out
        return out

    def _convert(self, obj: Any, where: str, depth: int) -> Any:
        kind = type(obj)
        if kind in (dict, OrderedDict):
            out = kind()
            for k, v in obj.items():      # keys hashed when unpickled convert to hashables
                out[self.convert(k, _child(where, k), depth + 1)] = \
                    self.convert(v, _child(where, k), depth + 1)
            extra = getattr(obj, "__dict__", {})
            if set(extra) - {"_metadata"}:
                raise self.fail(where, f"is an OrderedDict with attributes "
                                f"{sorted(extra)!r:.200}; a state_dict has only _metadata")
            if "_metadata" in extra:
                out._metadata = self.convert(extra["_metadata"], _child(where, "_metadata"),
                                             depth + 1)
            return out
        if kind in (list, tuple):
            return kind(self.convert(v, _child(where, i), depth + 1)
                        for i, v in enumerate(obj))
        if kind is set:        # (protocol 4 pickles sets natively, 2 by a call of set)
            return {self.convert(v, where, depth + 1) for v in obj}
        if kind is bytearray:  # (protocol 5 pickles one natively, 2 by a call)
            return bytearray(obj)
        if kind is _TensorRef:
            return self.tensor(obj, where)
        if kind is _ParamRef:
            return self.parameter(obj, where)
        if kind is _DType:
            np_dtype, dtype = self.dtype(obj, where, "")
            if np_dtype != dtype.np:
                raise self.fail(where, f"is the dtype torch.{obj.name}, which Nova has no "
                                "dtype for")
            return dtype
        if kind is _Call:
            return self.call(obj, where, depth)
        what = {_Storage: "a bare storage", _StorageType: f"the storage class "
                f"{getattr(obj, 'name', '')}"}.get(kind, f"a {kind.__name__}")
        raise self.fail(where, f"is {what}, which Nova does not load (it loads tensors, "
                        "numbers, strings, bytes, None, dtypes, sizes, devices and "
                        "dicts/lists/tuples/sets of them)")

    def dtype(self, ref: Any, where: str, noun: str = "tensor ") -> tuple[np.dtype, dt.DType]:
        """The numpy dtype of a torch dtype's bytes and the Nova dtype holding it."""
        name = ref.name if isinstance(ref, _DType) else ref
        if type(name) is not str:
            raise self.fail(where, f"has dtype {name!r:.40}, not a torch dtype", noun)
        if name not in _NUMPY:
            raise self.fail(where, f"has dtype torch.{name}, which Nova has no dtype for; "
                            f"Nova reads torch.{', torch.'.join(_NUMPY)}", noun)
        complex_dtype = dt.get_complex_dtype(name)
        if complex_dtype is not None:
            return np.dtype(_NUMPY[name]), complex_dtype
        return np.dtype(_NUMPY[name]), dt.from_numpy_dtype(_NUMPY[name], "load")

    def call(self, ref: _Call, where: str, depth: int) -> Any:
        args = [self.convert(a, where, depth + 1) for a in ref.args]
        try:
            if ref.kind in _BUILTIN_CALLS:
                return _BUILTIN_CALLS[ref.kind](args)
            if ref.kind == "torch.Size":
                if len(args) != 1:
                    raise TypeError(f"takes one sequence, got {len(args)} arguments")
                return Size(args[0])
            if not (1 <= len(args) <= 2 and type(args[0]) is str
                    and (len(args) == 1 or args[1] is None or type(args[1]) is int)):
                raise TypeError("expected (type string[, index])")
            return Device(*args)
        except (TypeError, ValueError) as e:
            raise self.fail(where, f"is {ref.kind}{tuple(args)!r:.100}, which Nova cannot "
                            f"build ({e})") from None

    def parameter(self, ref: _ParamRef, where: str) -> Parameter:
        if type(ref.data) is not _TensorRef or type(ref.requires_grad) is not bool:
            raise self.fail(where, f"holds a {type(ref.data).__name__} with requires_grad="
                            f"{ref.requires_grad!r:.40}; expected a tensor and a bool",
                            "Parameter ")
        data = self.tensor(ref.data, where)
        key = (ref.data.storage.key, ref.data.signature(), ref.requires_grad)
        if key not in self.params:
            if ref.requires_grad and not data.dtype.is_floating_point:
                raise self.fail(where, f"is {data.dtype.name} and requires grad; only "
                                "floating point tensors can", "Parameter ")
            self.params[key] = Parameter(data, requires_grad=ref.requires_grad)
        return self.params[key]

    def tensor(self, ref: _TensorRef, where: str) -> Tensor:
        storage = ref.storage
        if type(storage) is not _Storage:
            raise self.fail(where, f"has a {type(storage).__name__} as its storage, not a "
                            "storage record", "tensor ")
        key = (storage.key, ref.signature())
        if key not in self.tensors:
            self.tensors[key] = self._build(ref, storage, where)
        return self.tensors[key]

    def _build(self, ref: _TensorRef, storage: _Storage, where: str) -> Tensor:
        if ref.metadata:
            raise self.fail(where, f"carries metadata {ref.metadata!r:.100} (conj/neg bits), "
                            "which Nova does not have", "tensor ")
        if type(ref.requires_grad) is not bool:
            raise self.fail(where, f"has requires_grad={ref.requires_grad!r:.40}, not a bool",
                            "tensor ")
        np_dtype, dtype = self.dtype(storage.dtype if ref.dtype is None else ref.dtype,
                                     where)
        size, stride = self._shape(ref, where)
        storage_dtype = np.dtype(_NUMPY[storage.dtype]) if storage.dtype in _NUMPY \
            else None
        if storage_dtype is None:
            raise self.fail(where, f"has a storage of torch.{storage.dtype}, which Nova "
                            "has no dtype for", "tensor ")
        if ref.requires_grad and not (dtype.is_floating_point or dtype.is_complex):
            raise self.fail(where, f"is {dtype.name} and requires grad; only floating point "
                            "and complex tensors can", "tensor ")
        arr = self._values(ref, storage, storage_dtype.itemsize, np_dtype, size, stride,
                           where)
        if dtype.is_complex:        # its real and imaginary parts (nova.tensor.complex)
            parts = [self.place(f"{self.name}: tensor {where!r}", np.array(part),
                                dtype.real, storage.location) for part in (arr.real, arr.imag)]
            z = ComplexTensor(*parts)
            return z.requires_grad_() if ref.requires_grad else z
        if np_dtype != dtype.np:
            self._check_widening(arr, np_dtype, dtype, where)
        t = self.place(f"{self.name}: tensor {where!r}", arr, dtype, storage.location)
        return t.requires_grad_() if ref.requires_grad else t

    def _shape(self, ref: _TensorRef, where: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
        size, stride, offset = ref.size, ref.stride, ref.offset
        ok = (type(size) in (tuple, list) and type(stride) in (tuple, list)
              and len(size) == len(stride) <= MAX_RANK
              and all(type(s) is int and s >= 0 for s in (*size, *stride))
              and type(offset) is int and offset >= 0)
        if not ok:
            raise self.fail(where, f"has a malformed view: offset {offset!r:.40}, size "
                            f"{size!r:.100}, stride {stride!r:.100}; expected non-negative "
                            f"ints, at most {MAX_RANK} dimensions", "tensor ")
        return tuple(size), tuple(stride)

    def _values(self, ref: _TensorRef, storage: _Storage, storage_itemsize: int,
                np_dtype: np.dtype, size: tuple[int, ...], stride: tuple[int, ...],
                where: str) -> np.ndarray:
        """The view's values in an array of their own, after checking that every
        element it indexes lies inside the storage."""
        nbytes = storage.numel * storage_itemsize
        elements = nbytes // np_dtype.itemsize
        numel = math.prod(size)
        if math.prod(s for s in size if s) * np_dtype.itemsize >= 2**62:
            raise self.fail(where, f"has size {size}, too large for any array", "tensor ")
        if numel:
            last = ref.offset + sum((n - 1) * s for n, s in zip(size, stride))
            if last >= elements:
                raise self.fail(where, f"indexes element {last} of storage {storage.key!r}, "
                                f"which holds {elements} {np_dtype} elements (offset "
                                f"{ref.offset}, size {size}, stride {stride})", "tensor ")
        raw = self._storage(storage, storage_itemsize)
        if not numel:
            arr = np.empty(size, np_dtype)
        elif (len(storage.views) == 1 and ref.offset == 0 and numel == elements
              and nbytes % np_dtype.itemsize == 0 and _contiguous(size, stride)):
            arr = raw.view(np_dtype).reshape(size)   # the storage is this tensor: no copy
        else:
            flat = raw[:elements * np_dtype.itemsize].view(np_dtype)
            arr = np.lib.stride_tricks.as_strided(
                flat[ref.offset:], size, tuple(s * np_dtype.itemsize for s in stride)).copy()
        self._done_with(storage)
        if self.archive.byteorder != "little" and np_dtype.itemsize > 1:
            # each scalar swapped: a complex value's two parts each (swapping the whole
            # value exchanged them, and there is no u16 for complex128)
            unit = np_dtype.itemsize // (2 if np_dtype.kind == "c" else 1)
            arr.reshape(-1).view(f"u{unit}").byteswap(inplace=True)
        if np_dtype == np.bool_ and arr.size and arr.view(np.uint8).max() > 1:
            raise self.fail(where, "is bool but holds bytes other than 0 and 1", "tensor ")
        return arr

    def _storage(self, storage: _Storage, itemsize: int) -> np.ndarray:
        if storage.key not in self.raw:
            self.raw[storage.key] = self.archive.storage_bytes(storage, itemsize)
        return self.raw[storage.key]

    def _done_with(self, storage: _Storage) -> None:
        """Drops a storage's bytes once each of its views has its own values."""
        self.built[storage.key] = self.built.get(storage.key, 0) + 1
        if self.built[storage.key] >= len(storage.views):
            self.raw.pop(storage.key, None)

    def _check_widening(self, arr: np.ndarray, np_dtype: np.dtype, dtype: dt.DType,
                        where: str) -> None:
        """Integer dtypes Nova lacks widen as in ``nv.from_numpy`` (one warning per
        dtype, given once the whole file loaded); uint64 values past int64 are refused."""
        if np_dtype == np.uint64 and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
            raise self.fail(where, f"holds uint64 values up to {int(arr.max())}, which do "
                            "not fit int64, Nova's widest integer type", "tensor ")
        self.widened.setdefault(np_dtype.name, (where, dtype.name))

    def warn_widened(self) -> None:
        for name, (where, target) in self.widened.items():
            warnings.warn(f"load: {self.name}: tensor {where!r} is torch.{name}, which Nova "
                          f"has no dtype for; its values (and those of the file's other "
                          f"torch.{name} tensors) are held exactly as {target}, as "
                          "nv.from_numpy does", NarrowIntegerWarning, stacklevel=5)


def _contiguous(size: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """Row-major with no gaps (a dimension of size 1 may have any stride, as in torch)."""
    expected = 1
    for n, s in zip(reversed(size), reversed(stride)):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


def _child(where: str, key: Any) -> str:
    return f"{where}.{key}" if where else str(key)

