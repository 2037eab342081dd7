"""``nv.save`` / ``nv.load``: state dicts as one safetensors file.

The file is a standard safetensors container (8-byte header length, JSON header, raw
little-endian tensor bytes), so other tools can read the tensors. Everything that is not
a tensor (nesting, ints such as optimizer step counts, hyperparameters) is stored as
JSON in the header's ``__metadata__``, together with a SHA-256 of the tensor bytes.
Writes go to a temporary file that is renamed into place, so a crash never leaves a
half-written checkpoint; loading checks the header, every tensor's dtype, shape and byte
range, and the checksum, and names the file in any error.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from typing import Any

import numpy as np

from nova.tensor import dtypes as dt
from nova.tensor.creation import tensor
from nova.tensor.tensor import Tensor

FORMAT = "nova-checkpoint-1"
_CODES = {dt.float32: "F32", dt.float64: "F64", dt.float16: "F16", dt.bfloat16: "BF16",
          dt.int32: "I32", dt.int64: "I64", dt.bool_: "BOOL"}
_BY_CODE = {v: k for k, v in _CODES.items()}
_MAX_HEADER = 100 * 2**20


class CheckpointError(ValueError):
    """A checkpoint file is missing, truncated, corrupted or not a Nova checkpoint."""


def _encode(obj: Any, tensors: list[Tensor]) -> Any:
    if isinstance(obj, Tensor):
        tensors.append(obj)
        return {"__tensor__": f"t{len(tensors) - 1}"}
    if isinstance(obj, dict):
        return {"__dict__": [[_encode(k, tensors), _encode(v, tensors)] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, tensors) for v in obj]}
    if isinstance(obj, list):
        return [_encode(v, tensors) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, (np.integer, np.floating, np.bool_)):
        return obj.item()
    raise TypeError(f"save: cannot store a {type(obj).__name__}; checkpoints hold tensors, "
                    "numbers, strings, None, and lists/tuples/dicts of them")


def _decode(obj: Any, tensors: dict[str, Tensor], path: str) -> Any:
    if isinstance(obj, list):
        return [_decode(v, tensors, path) for v in obj]
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            name = obj["__tensor__"]
            if name not in tensors:
                raise CheckpointError(f"load: {path}: structure refers to missing tensor {name!r}")
            return tensors[name]
        if "__tuple__" in obj:
            return tuple(_decode(v, tensors, path) for v in obj["__tuple__"])
        if "__dict__" in obj:
            return {_decode(k, tensors, path): _decode(v, tensors, path) for k, v in obj["__dict__"]}
        raise CheckpointError(f"load: {path}: unknown structure entry {sorted(obj)}")
    return obj


def save(obj: Any, path: str | os.PathLike) -> None:
    """Write ``obj`` (a state dict, or nested containers of tensors and numbers)."""
    path = os.fspath(path)
    tensors: list[Tensor] = []
    structure = _encode(obj, tensors)
    header: dict[str, Any] = {}
    chunks, offset = [], 0
    digest = hashlib.sha256()
    for i, t in enumerate(tensors):
        data = np.ascontiguousarray(t.numpy()).astype(t.dtype.np.newbyteorder("<"), copy=False)
        raw = data.tobytes()
        header[f"t{i}"] = {"dtype": _CODES[t.dtype], "shape": list(t.shape),
                           "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        digest.update(raw)
        offset += len(raw)
    header["__metadata__"] = {"format": FORMAT, "structure": json.dumps(structure),
                              "sha256": digest.hexdigest()}
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # safetensors aligns the data section to 8 bytes
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".nova-save-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(head)))
            f.write(head)
            for c in chunks:
                f.write(c)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load(path: str | os.PathLike) -> Any:
    """Read what ``save`` wrote, validating the container before trusting it."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise CheckpointError(f"load: cannot read {path}: {e.strerror}") from None
    if len(blob) < 8:
        raise CheckpointError(f"load: {path} is truncated ({len(blob)} bytes; no header)")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > _MAX_HEADER or 8 + n > len(blob):
        raise CheckpointError(f"load: {path} is truncated or not a checkpoint (header claims "
                              f"{n} bytes, file has {len(blob) - 8})")
    try:
        header = json.loads(blob[8:8 + n].decode())
        meta = header.pop("__metadata__")
        if meta.get("format") != FORMAT:
            raise KeyError("format")
        structure = json.loads(meta["structure"])
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
        raise CheckpointError(f"load: {path} is corrupted or not a Nova checkpoint (bad "
                              "header)") from None
    data = memoryview(blob)[8 + n:]
    end = 0
    tensors: dict[str, Tensor] = {}
    for name, entry in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]
                              if isinstance(kv[1], dict) and "data_offsets" in kv[1] else -1):
        try:
            dtype = _BY_CODE[entry["dtype"]]
            shape = tuple(int(s) for s in entry["shape"])
            begin, stop = (int(o) for o in entry["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"load: {path}: tensor {name!r} has a malformed entry "
                                  f"{entry!r}") from None
        size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if any(s < 0 for s in shape) or begin != end or stop - begin != size:
            raise CheckpointError(f"load: {path}: tensor {name!r} ({entry['dtype']} {list(shape)}) "
                                  f"has byte range [{begin}, {stop}), expected [{end}, {end + size})")
        if stop > len(data):
            raise CheckpointError(f"load: {path} is truncated: tensor {name!r} needs bytes up to "
                                  f"{stop}, the data section has {len(data)}")
        end = stop
        arr = np.frombuffer(data[begin:stop], dtype=dtype.np.newbyteorder("<")).reshape(shape)
        tensors[name] = tensor(arr.astype(dtype.np), dtype=dtype)
    if end != len(data):
        raise CheckpointError(f"load: {path}: {len(data) - end} unexpected trailing bytes")
    if hashlib.sha256(data[:end]).hexdigest() != meta.get("sha256"):
        raise CheckpointError(f"load: {path} is corrupted: tensor data does not match its "
                              "checksum")
    return _decode(structure, tensors, path)
