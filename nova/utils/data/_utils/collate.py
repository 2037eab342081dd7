"""``torch.utils.data._utils.collate``: how a list of samples becomes a batch.

``collate(batch, collate_fn_map=...)`` is PyTorch's extensible form: the function
registered for the type of ``batch[0]`` (or the first registered type it is an instance
of) collates the batch; mappings, named tuples and sequences are collated field by
field. ``default_collate`` is ``collate`` with ``default_collate_fn_map``, whose entries
follow PyTorch's: tensors and numpy arrays stack along a new dimension 0 (promoting
mixed dtypes, as ``torch.stack`` does), numpy scalars become a tensor of the dtype
``torch.as_tensor`` infers for the list, Python floats a float64 tensor, Python ints
(and bools) the tensor ``torch.tensor(batch)`` gives (int64; bool for all-bools; the
default float dtype as soon as one element is a float), and strings and bytes stay as
they are. Batches of realized host tensors are stacked with numpy into one new
realized tensor, so loading data never compiles a step.
"""
from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping, MutableMapping, MutableSequence, Sequence
from typing import Any

import numpy as np

from nova.core.dtypes import DType, float64, from_numpy_dtype, promote_types
from nova.tensor.creation import tensor as _tensor
from nova.tensor.movement import stack as _stack
from nova.tensor.tensor import Tensor

__all__ = ["collate", "collate_float_fn", "collate_int_fn", "collate_numpy_array_fn",
           "collate_numpy_scalar_fn", "collate_str_fn", "collate_tensor_fn",
           "default_collate", "default_collate_err_msg_format", "default_collate_fn_map",
           "default_convert"]

CollateFnMap = dict[type | tuple[type, ...], Callable]

default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
    "found {}")

# numpy dtype codes (``dtype.str``) of strings, bytes and objects: no tensor holds them
_STR_OBJ_KINDS = "SaUO"


def _refused_array(dtype: np.dtype) -> bool:
    return any(c in dtype.str for c in _STR_OBJ_KINDS)


def _promoted(dtypes: list[DType]) -> DType:
    return functools.reduce(promote_types, dtypes)


def _equal_shapes(shapes: list[tuple[int, ...]]) -> None:
    """RuntimeError (``torch.stack``'s) unless every shape is the first one."""
    for i, shape in enumerate(shapes):
        if shape != shapes[0]:
            raise RuntimeError(f"default_collate: stack expects each tensor to be equal "
                               f"size, but got {list(shapes[0])} at entry 0 and "
                               f"{list(shape)} at entry {i}")


def collate_tensor_fn(batch: Sequence[Tensor], *,
                      collate_fn_map: CollateFnMap | None = None) -> Tensor:
    """The tensors stacked along a new dimension 0, in the dtype they promote to (as
    ``torch.stack``): realized host tensors that do not require grad with numpy (one
    new realized tensor), others through ``stack`` (kept in the autograd graph)."""
    for i, b in enumerate(batch):
        if not isinstance(b, Tensor):
            raise TypeError(f"default_collate: expected Tensor as element {i} of the batch "
                            f"(element 0 is a Tensor), but got {type(b).__name__}")
    _equal_shapes([tuple(b.shape) for b in batch])
    dtype = _promoted([b.dtype for b in batch])
    if all(b.node.realized and b.node.device == "cpu" and not b.requires_grad
           and b.dtype == dtype for b in batch):
        return _tensor(np.stack([b.numpy() for b in batch]), dtype=dtype)
    return _stack(list(batch), 0)


def collate_numpy_array_fn(batch: Sequence[np.ndarray], *,
                           collate_fn_map: CollateFnMap | None = None) -> Tensor:
    """The arrays stacked as tensors are (``torch.as_tensor`` of each, then
    ``torch.stack``): numpy dtypes map to Nova's and mixed ones promote by PyTorch's
    table (int64 with float32 is float32, where numpy would say float64)."""
    elem = batch[0]
    if _refused_array(elem.dtype):
        raise TypeError(default_collate_err_msg_format.format(elem.dtype))
    arrays = [np.asarray(b) for b in batch]
    _equal_shapes([a.shape for a in arrays])
    dtype = _promoted([from_numpy_dtype(a.dtype, "default_collate") for a in arrays])
    return _tensor(np.stack(arrays), dtype=dtype)


def collate_numpy_scalar_fn(batch: Sequence[np.generic], *,
                            collate_fn_map: CollateFnMap | None = None) -> Tensor:
    """``torch.as_tensor(batch)``: the dtype PyTorch infers for the list, each numpy
    scalar counting with its own dtype and a Python number with its default one."""
    return _tensor(list(batch))


def collate_float_fn(batch: Sequence[float], *,
                     collate_fn_map: CollateFnMap | None = None) -> Tensor:
    """``torch.tensor(batch, dtype=torch.float64)``."""
    return _tensor(list(batch), dtype=float64)


def collate_int_fn(batch: Sequence[int], *,
                   collate_fn_map: CollateFnMap | None = None) -> Tensor:
    """``torch.tensor(batch)``: int64 for ints (and bools mixed with ints), bool for
    all-bools, the default float dtype once any element is a float."""
    return _tensor(list(batch))


def collate_str_fn(batch: Sequence[str | bytes], *,
                   collate_fn_map: CollateFnMap | None = None) -> Sequence[str | bytes]:
    """Strings and bytes stay as given (a tuple when they are a field of tuples)."""
    return batch


default_collate_fn_map: CollateFnMap = {
    Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,          # (and np.memmap, a subclass)
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,   # not np.str_/bytes_
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def _registered(elem: Any, collate_fn_map: CollateFnMap | None) -> Callable | None:
    """The function ``collate_fn_map`` has for ``elem``: its type's, else the first
    registered type (in insertion order) it is an instance of."""
    if collate_fn_map is None:
        return None
    if type(elem) in collate_fn_map:
        return collate_fn_map[type(elem)]
    for collate_type, fn in collate_fn_map.items():
        if isinstance(elem, collate_type):
            return fn
    return None


def collate(batch: Sequence[Any], *, collate_fn_map: CollateFnMap | None = None) -> Any:
    """PyTorch's general collate: the function ``collate_fn_map`` registers for
    ``batch[0]``'s type, else mappings, named tuples and sequences collated field by
    field (a mapping or mutable sequence keeps its type through a copy, a plain tuple
    becomes a list, sequences must be of equal size), else TypeError. Each registered
    function is called as ``fn(batch, collate_fn_map=collate_fn_map)``."""
    if len(batch) == 0:
        raise ValueError("default_collate: got an empty batch")
    elem = batch[0]
    fn = _registered(elem, collate_fn_map)
    if fn is not None:
        return fn(batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, Mapping):
        return _collate_mapping(batch, collate_fn_map)
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):    # a named tuple
        return type(elem)(*(collate(s, collate_fn_map=collate_fn_map) for s in zip(*batch)))
    if isinstance(elem, Sequence):
        return _collate_sequence(batch, collate_fn_map)
    raise TypeError(default_collate_err_msg_format.format(type(elem).__name__))


def _collate_mapping(batch: Sequence[Mapping], collate_fn_map: CollateFnMap | None) -> Any:
    elem = batch[0]
    collated = {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map)
                for key in elem}
    try:
        if isinstance(elem, MutableMapping):   # a copy keeps the mapping's extras
            clone = copy.copy(elem)
            clone.update(collated)
            return clone
        return type(elem)(collated)
    except TypeError:       # no copy()/update(), or no __init__(mapping)
        return collated


def _collate_sequence(batch: Sequence[Sequence], collate_fn_map: CollateFnMap | None) -> Any:
    elem = batch[0]
    if any(len(b) != len(elem) for b in batch):
        raise RuntimeError("default_collate: each element in list of batch should be of "
                           "equal size")
    collated = [collate(s, collate_fn_map=collate_fn_map) for s in zip(*batch)]
    if isinstance(elem, tuple):
        return collated             # a list, as PyTorch's (backwards compatibility)
    return _rebuilt(elem, collated)


def _rebuilt(sequence: Sequence[Any], items: list[Any]) -> Any:
    """``items`` in ``sequence``'s type where it can be rebuilt: a copy of a mutable
    sequence (keeping its extras) with the items put in, else the type called on them;
    the list itself when neither works (a range, a type without such a copy)."""
    try:
        if isinstance(sequence, MutableSequence):
            clone = copy.copy(sequence)
            for i, item in enumerate(items):
                clone[i] = item
            return clone
        return type(sequence)(items)
    except TypeError:
        return items


def default_collate(batch: Sequence[Any]) -> Any:
    """PyTorch's ``default_collate``: ``collate`` with ``default_collate_fn_map`` (see
    the module doc for what each element type becomes)."""
    return collate(batch, collate_fn_map=default_collate_fn_map)


def default_convert(data: Any) -> Any:
    """PyTorch's ``default_convert``, the loader's ``collate_fn`` without auto-batching
    (``batch_size=None``): numpy arrays and numpy scalars become tensors (arrays of
    strings or objects stay as they are), mappings, named tuples and sequences are
    converted field by field keeping their type where it can be rebuilt (a plain tuple
    becomes a list, as in PyTorch), everything else passes through."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray):
        return data if _refused_array(data.dtype) else _tensor(data)
    if isinstance(data, np.generic) and not isinstance(data, (np.str_, np.bytes_)):
        return _tensor(np.asarray(data))
    if isinstance(data, Mapping):
        converted = {k: default_convert(data[k]) for k in data}
        try:
            if isinstance(data, MutableMapping):   # a copy keeps the mapping's extras
                clone = copy.copy(data)
                clone.update(converted)
                return clone
            return type(data)(converted)
        except TypeError:
            return converted
    if isinstance(data, tuple) and hasattr(data, "_fields"):     # a named tuple
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        return _rebuilt(data, [default_convert(d) for d in data])
    return data
