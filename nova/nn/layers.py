"""The standard layers and containers of ``nv.nn``."""
from __future__ import annotations

import math
import operator
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from nova.nn import functional as F
from nova.nn import init
from nova.nn.activation import _InplaceActivation
from nova.nn.interpolate import Upsample
from nova.nn.embedding_table import checked_padding_idx, given_table, init_table
from nova.nn.module import Module, _addindent
from nova.nn.parameter import Parameter
from nova.tensor.creation import ones, zeros
from nova.tensor.tensor import Tensor


class Linear(Module):
    """``y = x W^T + b``, initialized like PyTorch (kaiming-uniform W, uniform b)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(zeros(out_features, in_features, dtype=dtype, device=device))
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if bias:
            self.bias = Parameter(zeros(out_features, dtype=dtype, device=device))
            bound = 1.0 / math.sqrt(in_features) if in_features else 0.0
            init.uniform_(self.bias, -bound, bound)
        else:
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class NonDynamicallyQuantizableLinear(Linear):
    """A ``Linear`` under PyTorch's other name for ``MultiheadAttention.out_proj``
    (``torch.nn.modules.linear.NonDynamicallyQuantizableLinear``, which keeps PyTorch's
    dynamic quantization off it): the same layer and state_dict keys; the class name
    shows in the attention's ``repr`` and in ``isinstance`` checks of ported code."""


class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors, initialized N(0, 1); the
    ``padding_idx`` row starts at zero and gets no gradient (``F.embedding``). With
    ``max_norm`` each forward renorms the rows it looks up in ``weight`` itself (in
    place, as PyTorch); ``scale_grad_by_freq`` divides a row's gradient by its index's
    count in the mini-batch."""

    def __init__(self, num_embeddings: int, embedding_dim: int,
                 padding_idx: int | None = None, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight: Tensor | None = None,
                 _freeze: bool = False, device: Any = None, dtype: Any = None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        padding_idx = checked_padding_idx("Embedding", padding_idx, num_embeddings)
        self.padding_idx, self.max_norm, self.norm_type = padding_idx, max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            self.weight = Parameter(zeros(num_embeddings, embedding_dim, dtype=dtype,
                                          device=device), requires_grad=not _freeze)
            init_table(self.weight, padding_idx)
        else:
            self.weight = given_table("Embedding", _weight, num_embeddings, embedding_dim,
                                      requires_grad=not _freeze)

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        padding_idx: int | None = None, max_norm: float | None = None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False) -> Embedding:
        """An Embedding holding ``embeddings`` (2-D), frozen unless ``freeze=False``."""
        if embeddings.ndim != 2:
            raise ValueError(f"Embedding.from_pretrained: embeddings must be 2-D, got shape "
                             f"{tuple(embeddings.shape)}")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=embeddings, _freeze=freeze)

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm,
                           self.norm_type, self.scale_grad_by_freq, self.sparse)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        if self.sparse:
            s += ", sparse=True"
        return s


class LayerNorm(Module):
    def __init__(self, normalized_shape: Any, eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True, device: Any = None,
                 dtype: Any = None):
        super().__init__()
        self.normalized_shape = ((normalized_shape,) if isinstance(normalized_shape, int)
                                 else tuple(normalized_shape))
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        # absent weights are registered as None parameters (PyTorch's): a tensor assigned
        # there later raises, where a plain None attribute took it, and forward used it
        made = {"dtype": dtype, "device": device}
        self.register_parameter("weight", Parameter(ones(self.normalized_shape, **made))
                                if elementwise_affine else None)
        self.register_parameter("bias", Parameter(zeros(self.normalized_shape, **made))
                                if elementwise_affine and bias else None)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class RMSNorm(Module):
    def __init__(self, normalized_shape: Any, eps: float | None = None,
                 elementwise_affine: bool = True):
        super().__init__()
        self.normalized_shape = ((normalized_shape,) if isinstance(normalized_shape, int)
                                 else tuple(normalized_shape))
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.register_parameter("weight", Parameter(ones(self.normalized_shape))
                                if elementwise_affine else None)

    def forward(self, input: Tensor) -> Tensor:
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class _DropoutNd(Module):
    """``p`` and ``inplace``, shared by the dropout modules; active in training only."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{type(self).__name__}: probability must be in [0, 1], got {p}")
        self.p, self.inplace = p, inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """Zeroes whole channels of ``(N, C, L)`` or ``(C, L)`` input."""

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Zeroes whole channels of ``(N, C, H, W)`` input (3-D input: as ``(N, C, L)``,
    with PyTorch's warning)."""

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """Zeroes whole channels of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input."""

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    """Dropout for SELU networks: keeps the input's mean and variance."""

    def forward(self, input: Tensor) -> Tensor:
        return F.alpha_dropout(input, self.p, self.training, self.inplace)


class FeatureAlphaDropout(_DropoutNd):
    """``AlphaDropout`` of whole channels (dim 1)."""

    def forward(self, input: Tensor) -> Tensor:
        return F.feature_alpha_dropout(input, self.p, self.training, self.inplace)


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class ReLU(_InplaceActivation):
    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input, self.inplace)


class SiLU(_InplaceActivation):
    def forward(self, input: Tensor) -> Tensor:
        return F.silu(input, self.inplace)


class Tanh(Module):
    def forward(self, input: Tensor) -> Tensor:
        return F.tanh(input)


class Sigmoid(Module):
    def forward(self, input: Tensor) -> Tensor:
        return F.sigmoid(input)


class LogSigmoid(Module):
    def forward(self, input: Tensor) -> Tensor:
        return F.logsigmoid(input)


class Softmax(Module):
    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim)


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(Module):
    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Softplus(Module):
    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Mish(_InplaceActivation):
    def forward(self, input: Tensor) -> Tensor:
        return F.mish(input, self.inplace)


class Bilinear(Module):
    """``y = x1^T A x2 + b`` with weight ``A`` of shape (out_features, in1_features,
    in2_features), initialized like PyTorch (A and b uniform in +-1/sqrt(in1_features))."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, dtype: Any = None):
        super().__init__()
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        bound = 1.0 / math.sqrt(in1_features) if in1_features else 0.0
        self.weight = Parameter(zeros(out_features, in1_features, in2_features, dtype=dtype))
        init.uniform_(self.weight, -bound, bound)
        if bias:
            self.bias = Parameter(zeros(out_features, dtype=dtype))
            init.uniform_(self.bias, -bound, bound)
        else:
            self.register_parameter("bias", None)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class UpsamplingNearest2d(Upsample):
    """``Upsample`` with ``mode='nearest'``."""

    def __init__(self, size: Any = None, scale_factor: Any = None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """``Upsample`` with ``mode='bilinear'`` and ``align_corners=True``, as PyTorch's."""

    def __init__(self, size: Any = None, scale_factor: Any = None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class Flatten(Module):
    """``x.flatten(start_dim, end_dim)``; PyTorch's defaults keep the batch dim."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    def __init__(self, dim: int, unflattened_size: Iterable[int]):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input: Tensor) -> Tensor:
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Identity(Module):
    """Returns its input. Accepts and ignores any arguments, as PyTorch's (so a layer
    can be swapped for it without changing the call)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class _IndexedModules(Module):
    """Children kept in order and reached by position (Sequential, ModuleList): named
    ``"0"``, ``"1"``, ... (a Sequential built from an OrderedDict keeps its names until
    a deletion or insertion renumbers them, as PyTorch's)."""

    def _key(self, i: int) -> str:
        """The registered name at position ``i`` (negative: from the end)."""
        n = len(self._modules)
        i = operator.index(i)
        if not -n <= i < n:
            raise IndexError(f"{type(self).__name__}: index {i} is out of range for "
                             f"{n} modules")
        return list(self._modules)[i]

    def _sliced(self, items: list[tuple[str, Module]]) -> _IndexedModules:
        """A new container of this class holding ``items`` (defined by each class)."""
        raise NotImplementedError(f"{type(self).__name__} does not define slicing")

    def __getitem__(self, i: int | slice) -> Any:
        """The module at position ``i``; a slice: a new container of the same class
        holding the same modules."""
        if isinstance(i, slice):
            return self._sliced(list(self._modules.items())[i])
        return self._modules[self._key(i)]

    def __setitem__(self, i: int, module: Module) -> None:
        setattr(self, self._key(i), module)

    def __delitem__(self, i: int | slice) -> None:
        """Remove the module(s) at ``i``; the rest are renumbered from ``"0"``."""
        keys = list(self._modules)[i] if isinstance(i, slice) else [self._key(i)]
        for k in keys:
            del self._modules[k]
        self._renumber(list(self._modules.values()))

    def _renumber(self, modules: list[Module]) -> None:
        self._modules.clear()
        self._modules.update((str(j), m) for j, m in enumerate(modules))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> _IndexedModules:
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> _IndexedModules:
        if not isinstance(modules, Iterable):
            raise TypeError(f"{type(self).__name__}.extend: expected an iterable of "
                            f"modules, got {type(modules).__name__}")
        offset = len(self._modules)     # once, as PyTorch (keys renamed by hand: a
        for i, m in enumerate(modules):  # recount per module reused one key)
            self.add_module(str(offset + i), m)
        return self

    def insert(self, index: int, module: Module) -> _IndexedModules:
        """Put ``module`` before position ``index`` (``-len <= index <= len``); all
        modules are renumbered from ``"0"``."""
        if not isinstance(module, Module):
            raise TypeError(f"{type(self).__name__}.insert: {type(module).__name__} is "
                            "not a Module subclass")
        n = len(self._modules)
        index = operator.index(index)
        if not -n <= index <= n:
            raise IndexError(f"{type(self).__name__}.insert: index {index} is out of "
                             f"range for {n} modules")
        modules = list(self._modules.values())
        modules.insert(index, module)
        self._renumber(modules)
        return self

    def pop(self, i: int | slice) -> Any:
        """``self[i]``, removed (the rest renumbered)."""
        found = self[i]
        del self[i]
        return found


class Sequential(_IndexedModules):
    def __init__(self, *modules: Any):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def _sliced(self, items: list[tuple[str, Module]]) -> Sequential:
        return type(self)(OrderedDict(items))

    def __add__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError(f"Sequential +: expected a Sequential, got "
                             f"{type(other).__name__}")
        return Sequential(*self, *other)

    def __iadd__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError(f"Sequential +=: expected a Sequential, got "
                             f"{type(other).__name__}")
        return self.extend(list(other))

    def _repeat_count(self, other: Any, op: str) -> int:
        if not isinstance(other, int) or isinstance(other, bool):
            raise TypeError(f"unsupported operand type(s) for {op}: "
                            f"'{type(self).__name__}' and '{type(other).__name__}'")
        if other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for "
                             f"{type(self).__name__}")
        return other

    def __mul__(self, other: int) -> Sequential:
        """A new Sequential of this one's modules (the same objects) ``other`` times."""
        count = self._repeat_count(other, "*")
        modules = list(self._modules.values())
        return Sequential(*(modules * count))

    def __rmul__(self, other: int) -> Sequential:
        return self.__mul__(other)

    def __imul__(self, other: int) -> Sequential:
        """This Sequential with its modules repeated ``other`` times (in place)."""
        count = self._repeat_count(other, "*=")
        modules = list(self._modules.values())
        offset = len(modules)
        for m in modules * (count - 1):
            self.add_module(str(offset), m)
            offset += 1
        return self

    def forward(self, input: Any) -> Any:
        for m in self._modules.values():
            input = m(input)
        return input


class ModuleList(_IndexedModules):
    def __init__(self, modules: Iterable[Module] | None = None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _sliced(self, items: list[tuple[str, Module]]) -> ModuleList:
        return type(self)([m for _, m in items])

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        return ModuleList(list(self)).extend(other)

    def __repr__(self) -> str:
        """PyTorch 2.x's form: a run of neighbours with the same repr is printed once, as
        ``(i-j): n x repr``."""
        runs: list[list[Any]] = []   # [first index, last index, repr]
        for i, m in enumerate(self):
            r = repr(m)
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        if not runs:
            return f"{self._get_name()}()"
        lines = [_addindent(f"({a}): {r}" if a == b else f"({a}-{b}): {b - a + 1} x {r}", 2)
                 for a, b, r in runs]
        return f"{self._get_name()}(\n  " + "\n  ".join(lines) + "\n)"

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)


class ModuleDict(Module):
    def __init__(self, modules: Any = None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def pop(self, key: str) -> Module:
        return self._modules.pop(key)

    def clear(self) -> None:
        self._modules.clear()

    def update(self, modules: Any) -> None:
        """Add (or replace, in place) the modules of a mapping, in its order, or of an
        iterable of ``(key, module)`` pairs."""
        if isinstance(modules, Mapping):
            items = list(modules.items())
        elif isinstance(modules, Iterable):
            items = [tuple(kv) for kv in modules]
            if any(len(kv) != 2 for kv in items):
                raise ValueError("ModuleDict.update: expected a mapping or an iterable of "
                                 "(key, module) pairs")
        else:
            raise TypeError(f"ModuleDict.update: expected a mapping or an iterable of "
                            f"(key, module) pairs, got {type(modules).__name__}")
        for k, m in items:
            self[k] = m


def _as_parameter(value: Any) -> Any:
    """A plain Tensor wrapped in a Parameter (sharing its value), as PyTorch's parameter
    containers do; a Parameter, or any other object (stored as a plain attribute, not
    registered), as it is."""
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


def _parameters_repr(container: Module, entries: Iterable[tuple[str, Any]]) -> str:
    lines = [f"({k}): Parameter containing: [{p.dtype.name} of size "
             f"{'x'.join(map(str, p.shape)) or '()'}]" if isinstance(p, Tensor)
             else f"({k}): Object of type: {type(p).__name__}" for k, p in entries]
    body = "\n  " + "\n  ".join(lines) + "\n" if lines else ""
    return f"{type(container).__name__}({body})"


class ParameterList(Module):
    """Parameters held in order and registered as ``"0"``, ``"1"``, ...: they appear in
    ``parameters()`` and ``state_dict`` (``name.0``, ...) and move with ``.to()``. A
    Tensor is wrapped in a Parameter; any other object is kept as a plain attribute
    (listed, not registered), as PyTorch's."""

    def __init__(self, values: Iterable[Any] | None = None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def _index(self, i: int) -> str:
        n = self._size
        i = operator.index(i)
        if not -n <= i < n:
            raise IndexError(f"ParameterList: index {i} is out of range for {n} parameters")
        return str(i % n)

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return ParameterList([getattr(self, str(k)) for k in range(self._size)][i])
        return getattr(self, self._index(i))

    def __setitem__(self, i: int, value: Any) -> None:
        setattr(self, self._index(i), _as_parameter(value))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return iter([getattr(self, str(k)) for k in range(self._size)])

    def __iadd__(self, values: Iterable[Any]) -> ParameterList:
        return self.extend(values)

    def __dir__(self) -> list[str]:
        return [k for k in super().__dir__() if not k.isdigit()]

    def append(self, value: Any) -> ParameterList:
        n = self._size
        self._size += 1
        setattr(self, str(n), _as_parameter(value))
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        if not isinstance(values, Iterable) or isinstance(values, Tensor):
            raise TypeError("ParameterList.extend should be called with an iterable, but "
                            f"got {type(values).__name__}")
        for v in values:
            self.append(v)
        return self

    def __repr__(self) -> str:
        return _parameters_repr(self, ((str(k), getattr(self, str(k)))
                                       for k in range(self._size)))


class ParameterDict(Module):
    """Parameters by string key, registered under it (``parameters()``, ``state_dict``
    as ``name.key``, ``.to()``). A plain dict's items are added in sorted key order,
    an ordered one's (``OrderedDict``, ``ParameterDict``) in its order, as PyTorch's.
    A Tensor is wrapped in a Parameter; any other object is kept as a plain attribute
    (an item, not registered), as PyTorch's."""

    def __init__(self, parameters: Any = None):
        super().__init__()
        self._keys: dict[str, None] = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Any:
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict: keys must be strings, got {type(key).__name__}")
        if not key or "." in key:
            raise KeyError(f"ParameterDict: key {key!r} must be non-empty and contain no '.'")
        setattr(self, key, _as_parameter(value))
        self._keys[key] = None

    def __delitem__(self, key: str) -> None:
        if key not in self._keys:
            raise KeyError(key)
        delattr(self, key)
        del self._keys[key]

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._keys))

    def __reversed__(self) -> Iterator[str]:
        return reversed(list(self._keys))

    def _entries(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self._keys}

    def keys(self):
        return self._keys.keys()

    def values(self):
        return self._entries().values()

    def items(self):
        return self._entries().items()

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self._keys else default

    def pop(self, key: str) -> Any:
        value = self[key]
        del self[key]
        return value

    def popitem(self) -> tuple[str, Any]:
        """The last inserted ``(key, value)``, removed."""
        if not self._keys:
            raise KeyError("popitem(): ParameterDict is empty")
        key = next(reversed(self._keys))
        return key, self.pop(key)

    def setdefault(self, key: str, default: Any = None) -> Any:
        """``self[key]``, after setting it to ``default`` if absent."""
        if key not in self._keys:
            self[key] = default
        return self[key]

    def fromkeys(self, keys: Iterable[str], default: Any = None) -> ParameterDict:
        """A new ParameterDict with ``keys``, each set to ``default`` (as PyTorch's, an
        instance method)."""
        return ParameterDict((k, default) for k in keys)

    def copy(self) -> ParameterDict:
        """A new ParameterDict holding the same Parameters (shallow), in order."""
        return ParameterDict(OrderedDict(self.items()))

    def clear(self) -> None:
        for key in list(self._keys):
            del self[key]

    def update(self, parameters: Any) -> None:
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            items = list(parameters.items())
        elif isinstance(parameters, Mapping):
            items = sorted(parameters.items())
        elif isinstance(parameters, Iterable) and not isinstance(parameters, (str, Tensor)):
            items = [tuple(kv) for kv in parameters]
            if any(len(kv) != 2 for kv in items):
                raise ValueError("ParameterDict.update: expected a mapping or an iterable "
                                 "of (key, value) pairs")
        else:
            raise TypeError("ParameterDict.update should be called with an iterable of "
                            f"key/value pairs, but got {type(parameters).__name__}")
        for k, v in items:
            self[k] = v

    def __or__(self, other: ParameterDict) -> ParameterDict:
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other: ParameterDict) -> ParameterDict:
        out = other.copy()
        out.update(self)
        return out

    def __ior__(self, other: Any) -> ParameterDict:
        self.update(other)
        return self

    def __repr__(self) -> str:
        return _parameters_repr(self, self.items())


__all__ = ["Linear", "Embedding", "LayerNorm", "RMSNorm", "Dropout", "GELU", "ReLU", "SiLU",
           "Tanh", "Identity", "Sequential", "ModuleList", "ModuleDict", "Dropout1d",
           "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout", "Bilinear",
           "UpsamplingNearest2d", "UpsamplingBilinear2d", "ParameterList", "ParameterDict"]
