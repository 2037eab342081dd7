"""``nv.Tensor``: a handle on a trace node.

A Tensor never computes anything when an op is called: the op records a node. Host
access (``numpy()``, ``item()``, ``print``, ``bool()``) realizes every pending value that
a live tensor still holds, through the nova dialect (see ``nova/tensor/realize.py``).

In-place ops are functionalized: the handle is rebound to a new node (``_assign``). A
tensor made by a view op (basic indexing, ``view``/``reshape``, ``permute``, ...) keeps
its base and two functions: how to re-derive itself from the base, and how to write a new
value of itself back into the base. So ``x[0].add_(1)`` updates ``x``, and a view made
before an in-place update of its base reads the updated values, as in PyTorch.
"""
from __future__ import annotations

import copy
import sys
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.core.errors import ArgumentError
from nova.core.memory_format import check_layout_rank, check_memory_format
from nova.tensor import grad_mode as _grad_mode
from nova.tensor import tape as _tape
from nova.tensor.device import BY_TYPE, device
from nova.tensor.trace import Node, live_pending


class _View:
    """How a view tensor relates to its base tensor.

    ``version`` is the base's ``_version`` and ``seen`` the base's node when this view
    last derived from it. A base that is itself a view changes without an in-place op
    of its own when its base changes (``x[0][1:]`` after ``x.add_(1)``): it re-derives,
    and ``seen`` tells the view below (``Tensor.node``).

    The base knows its live views (weakly, ``_note_view``): an in-place shape op on it
    (``t_``, ``unsqueeze_``: ``Tensor._restride``) and an assignment to its ``.data``
    move them to a hidden tensor holding the storage they view (``_move_views``).

    ``rederives``: the view's elements may alias each other (``unfold``'s overlapping
    windows), so what it shows after a write through it is its base's new value seen
    through it, which may differ from the value written (``w[0, 1] = 50`` also changes
    the other windows over that base element): such a view re-derives after a write
    (``wrote``), and so does a ``detach()`` alias of one (``_detached_alias``)."""

    __slots__ = ("base", "version", "seen", "derive", "write_back", "op", "rederives",
                 "__weakref__")

    def __init__(self, base: Tensor, derive: Callable[[Tensor], Tensor],
                 write_back: Callable[[Tensor, Tensor], Tensor] | None, op: str,
                 rederives: bool = False):
        self.base = base
        self.version = base._version
        self.seen = base.node
        self.derive = derive
        self.write_back = write_back
        self.op = op
        self.rederives = rederives
        _note_view(base, self)

    def wrote(self, base: Any) -> None:
        """Note a write through this view that reached ``base``: the view shows the value
        written, up to date with ``base``, unless its elements alias each other (then a
        version no base has, so the next read re-derives)."""
        self.version = -1 if self.rederives else base._version
        self.seen = getattr(base, "_node", None)

    def rebase(self, base: Tensor) -> None:
        """View ``base`` from now on (the storage moved there: ``_move_views``)."""
        self.base = base


def _note_view(base: Tensor, view: _View) -> None:
    """Remember ``view`` among ``base``'s views: weak references (``live_views`` reads
    those still alive), the dead ones dropped whenever the list reaches a power of
    two, so a base viewed again and again (``p.detach()`` every step) keeps a short
    list at an amortized constant cost."""
    ref = weakref.ref(view)
    try:
        refs = base._views
    except AttributeError:
        base._views = [ref]
        return
    refs.append(ref)
    n = len(refs)
    if n >= 8 and not n & (n - 1):
        refs[:] = [r for r in refs if r() is not None]


def live_views(t: Tensor) -> list[_View]:
    """The views of ``t`` that are still alive."""
    return [v for v in (r() for r in getattr(t, "_views", ())) if v is not None]


class _Gone:
    """What a ``detach()`` alias's base reads as once the base is gone: the version the
    alias last saw (so it never re-derives) and writes that go nowhere."""

    __slots__ = ("_version",)
    _view = None        # (not a view: nothing above it can change)

    def __init__(self, version: int):
        self._version = version

    def _write_outside_autograd(self, value: Tensor, op: str) -> None:
        pass


class _AliasView(_View):
    """The view ``detach()``, ``.data`` and an assignment to ``.data`` make: of the root
    of the views below it (its ``derive`` and ``write_back`` composed through them, so
    temporaries on the way -- ``x[0:2].detach()`` -- need not live).

    An alias holds its root (``held``), as PyTorch's holds the storage: it reads the
    root's later in-place updates, and shares writes with the root's other aliases,
    even after every other handle on the root is gone; it becomes a plain value once it
    is the root's only holder (``Tensor.node``). Except that a ``detach()`` or ``.data``
    alias of a root with autograd history holds it weakly, since a detached handle must
    not keep that graph alive (``preds.append(model(x).detach())``): once such a root is
    gone the alias is a value of its own, with the value it last read. (``t.data =
    other`` always holds, as PyTorch's ``t`` holds ``other``'s storage.)"""

    __slots__ = ("_base_ref", "held")

    def __init__(self, root: Tensor, derive: Callable[[Tensor], Tensor],
                 write_back: Callable[[Tensor, Tensor], Tensor], op: str,
                 hold: bool = False, rederives: bool = False):
        self._base_ref = weakref.ref(root)
        self.held = root if hold else None
        self.version = root._version
        self.seen = root.node
        self.derive = derive
        self.write_back = write_back
        self.op = op
        self.rederives = rederives
        _note_view(root, self)

    @property
    def base(self) -> Any:
        b = self._base_ref()
        return b if b is not None else _Gone(self.version)

    def rebase(self, base: Tensor) -> None:
        self._base_ref = weakref.ref(base)
        if self.held is not None:
            self.held = base

    def alone(self) -> bool:
        """Whether the view's holder is the only handle left on its held root: no other
        reference to it, no other live view of it, and the root no view itself."""
        return self.held_refs() <= _ALONE_REFS and self.held._view is None and \
            len(live_views(self.held)) == 1

    def held_refs(self) -> int:
        return sys.getrefcount(self.held)


def _is_size(v: Any) -> bool:
    """An int that sizes a dimension (Python's or numpy's; not a bool)."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _reads(node: Node, old: Node, limit: int = 64) -> bool:
    """Whether ``node`` is computed from ``old`` (within ``limit`` nodes of its inputs,
    nearest first): an in-place op's new value reads what the tensor held (``h.mul_(2)``,
    a composite ``h.sigmoid_()``), or does not (``h.copy_(w)``, ``h.zero_()``). Beyond
    the limit it answers no, which only adds a zero-slope link (``Tensor._assign``)."""
    queue, seen = [node], set()
    for n in queue:
        if n is old:
            return True
        if len(seen) >= limit:
            return False
        for i in n.inputs:
            if id(i) not in seen:
                seen.add(id(i))
                queue.append(i)
    return False


class Tensor:
    """A lazy n-dimensional array with PyTorch semantics."""

    # (set only when used: ``_views`` by the first view made of this tensor, see
    # ``_View``; the hook tables by nova.autograd.hooks. ``_grad`` is ``.grad``, whose
    # setter checks what is assigned)
    __slots__ = ("_node", "_view", "_version", "_grad_fn", "_requires_grad", "_grad",
                 "_views", "_grad_hooks", "_post_hooks", "__weakref__")
    __array_priority__ = 1000  # make ``ndarray op Tensor`` defer to Tensor's reflected op

    def __init__(self, *args: Any, dtype: Any = None, device: Any = None):
        """PyTorch's legacy constructor ``torch.Tensor(...)``, in the default dtype:
        ``Tensor()`` is empty; ``Tensor(5)``, ``Tensor(2, 3)`` and ``Tensor(nv.Size(...))``
        are tensors of that shape (old-style layers' ``Parameter(torch.Tensor(out))``),
        zeros where PyTorch leaves the memory uninitialized; ``Tensor(data)`` of a list,
        tuple or array is the data; ``Tensor(t)`` of a tensor shares its storage and keeps
        its dtype, as PyTorch's (an alias, as ``t.detach()``). A number alone is not data
        (PyTorch's ``TypeError``: a sequence is expected). ``dtype=`` is Nova's own
        (PyTorch's constructor refuses it)."""
        from nova.tensor.creation import tensor as _tensor, zeros as _zeros
        from nova.tensor.legacy import Size
        self._view = None
        self._version = 0
        self._grad_fn = None
        self._requires_grad = False
        self._grad = None
        kind = dt.get_dtype(dtype) if dtype is not None else dt.get_default_dtype()
        if len(args) == 1 and isinstance(args[0], Tensor):
            if dtype is not None or device is not None:
                raise TypeError("Tensor(): a tensor argument takes no dtype or device; use "
                                ".to(...)")
            alias = _detached_alias(args[0], "data", hold=True)
            self._view, self._node = alias._view, alias._node
        elif all(_is_size(a) for a in args) or (len(args) == 1 and type(args[0]) is Size):
            shape = tuple(args[0]) if len(args) == 1 and type(args[0]) is Size else \
                args or (0,)
            self._node = _zeros(*(int(d) for d in shape), dtype=kind, device=device)._node
        elif len(args) == 1 and isinstance(args[0], (list, tuple, np.ndarray)):
            self._node = _tensor(args[0], dtype=kind, device=device)._node
        elif len(args) == 1:
            raise TypeError(f"Tensor(): data must be a sequence (a list, tuple or array) or "
                            f"sizes, got {type(args[0]).__name__}")
        else:
            raise TypeError(f"Tensor(): expected sizes (ints) or one data argument, got "
                            f"({', '.join(type(a).__name__ for a in args)})")
        if not self._node.realized:
            live_pending.live.add(self)

    @classmethod
    def _wrap(cls, node: Node, view: _View | None = None, grad_fn: Any = None) -> Tensor:
        t = object.__new__(cls)
        t._node = node
        t._view = view
        t._version = 0
        t._grad_fn = grad_fn
        t._requires_grad = False
        t._grad = None
        if not node.realized:
            live_pending.live.add(t)
        return t

    def _grad_edge(self) -> Any:
        """Where a gradient for this value goes: its GradFn, itself (a leaf that
        requires grad), or nowhere."""
        if self._grad_fn is not None:
            return self._grad_fn
        return self if self._requires_grad else None

    # ------------------------------------------------------------ trace plumbing

    @property
    def node(self) -> Node:
        """The current node, re-derived from the base if the base changed: in place, or,
        for a base that is a view itself, by re-deriving from a base that did (its node
        is then another than the one this view saw).

        An alias (``detach()``, ``.data``, ``t.data = other``) keeps its own autograd
        history when it re-derives, as PyTorch's tensors sharing a storage do; one that
        holds its root (``t.data = other``) becomes a plain value once no other handle
        is left on the root (``_AliasView.alone``)."""
        v = self._view
        if v is not None:
            self._sync(v)
            if v.__class__ is _AliasView and v.held is not None and v.alone():
                self._view = None
        return self._node

    def _sync(self, v: _View) -> None:
        """Re-derive from the base of ``v`` (this tensor's view) if it changed."""
        base = v.base
        if base._version != v.version or \
                (base._view is not None and base.node is not v.seen):
            fresh = v.derive(base)
            self._node = fresh.node
            if v.op not in _DETACHED_ALIASES:
                old_fn = self._grad_fn
                self._grad_fn = fresh._grad_fn
                if old_fn is not None and old_fn.retained:
                    _carry_retained(self, old_fn)
            v.version, v.seen = base._version, base._node
            if not self._node.realized:
                live_pending.live.add(self)

    def _assign(self, value: Tensor, op: str) -> Tensor:
        """Rebind this handle to ``value`` (an in-place op), writing through views."""
        if value.shape != self.shape:
            raise RuntimeError(f"{op}: in-place result of shape {value.shape} cannot be "
                               f"written to a tensor of shape {self.shape}")
        if self._requires_grad and _grad_mode.STATE.enabled:
            raise RuntimeError(f"{op}: a leaf tensor that requires grad is being used in an "
                               "in-place operation; wrap the update in nv.no_grad()")
        if value.dtype != self.dtype:
            if value.dtype.category > self.dtype.category:
                raise RuntimeError(f"{op}: result type {value.dtype.name} can't be cast to "
                                   f"the in-place output type {self.dtype.name}")
            value = value.to(self.dtype)
        if value._grad_fn is None and value._requires_grad and _grad_mode.STATE.enabled:
            # a leaf's node carries no history of its own: written as it is (``copy_(a)``,
            # ``v[:] = a``), the gradient to the leaf was lost. An alias of it (no new
            # node) is the history, as PyTorch's copy_ is differentiable in its source.
            value = value.clone()
        fn = self._grad_fn
        if fn is not None and _grad_mode.STATE.enabled and (
                value._grad_fn is None or not _reads(value._node, self._node)):
            # a value that does not read what the tensor held (``h[:] = 0``,
            # ``h.zero_()``, ``h.copy_(w)``): as PyTorch's copy, it still requires grad
            # and passes a zero gradient to what the tensor held (without history it
            # raised "does not require grad"; with another's, the old value's inputs
            # got no gradient, None where PyTorch's optimizers see zeros)
            value = _ops.with_zero_slope(value, Tensor._wrap(self._node, grad_fn=fn))
        v = self._view
        if v is not None:
            if v.write_back is None:
                raise RuntimeError(f"{op}: cannot write in place into the result of "
                                   f"{v.op}, whose elements alias each other; call "
                                   ".clone() first")
            base = v.base
            if v.op in _DETACHED_ALIASES:
                if not isinstance(base, _Gone):
                    with _grad_mode.no_grad():
                        whole = v.write_back(base, Tensor._wrap(value.node))
                    base._write_outside_autograd(whole, op)
            else:
                base._assign(v.write_back(base, value), op)
            v.wrote(base)
        if self._node.device == "cuda" and value.node.device is None and \
                not value.node.realized:
            value.node.device = "cuda"   # a constant written into a GPU tensor stays there
        old_fn = self._grad_fn
        self._node = value.node
        if _grad_mode.STATE.enabled:
            self._grad_fn = value._grad_fn
            if old_fn is not None and old_fn.retained:
                _carry_retained(self, old_fn)
        # else: a write outside autograd (no_grad). As in PyTorch, it joins no history:
        # a non-leaf keeps its GradFn (gradients pass the write as if it were not
        # there: ``with no_grad(): h[h < 0] = 0``, straight-through ``y.copy_(...)``),
        # and nothing the written value was computed from becomes its history.
        self._version += 1
        if not self._node.realized:
            live_pending.live.add(self)
        return self

    def _write_outside_autograd(self, value: Tensor, op: str) -> None:
        """Take ``value`` as an in-place write made through a detached alias: outside
        autograd (no history joins, a leaf that requires grad may be written, a
        non-leaf keeps its GradFn), as PyTorch's writes through ``.data``. A view passes
        the write to its base the same way, level by level, so no base on the way loses
        its history (``x[0:2].detach().zero_()`` with ``x`` a non-leaf)."""
        fn = self._grad_fn
        v = self._view
        if v is not None and v.op not in _DETACHED_ALIASES:
            with _grad_mode.no_grad():
                whole = v.write_back(v.base, Tensor._wrap(value.node))
            v.base._write_outside_autograd(whole, op)
            v.wrote(v.base)
            self._node = value.node
            self._version += 1
            if not self._node.realized:
                live_pending.live.add(self)
        else:
            with _grad_mode.no_grad():
                self._assign(Tensor._wrap(value.node), op)
        self._grad_fn = fn

    def _restride(self, forward: Callable[[Tensor], Tensor],
                  inverse: Callable[[Tensor], Tensor], op: str) -> Tensor:
        """An in-place shape op (``t_``, ``squeeze_``...): this handle shows
        ``forward(value)`` from now on, as PyTorch's metadata change, while the
        elements stay where they were for everything that shares them.

        A tensor that is no view and has no live views is simply rebound. Otherwise
        what it held moves to a hidden storage tensor, which takes its place as the base
        of its earlier views (they keep their shape and values, as in PyTorch, and see
        later writes through either side) and as the view of its own base; this handle
        becomes a view of that storage through ``forward`` (written back through
        ``inverse``). Refused, as PyTorch refuses it, under grad mode for a leaf that
        requires grad or a view of one; and for such a leaf under ``no_grad`` while
        views of it with autograd history are alive (their history would no longer
        reach the leaf: PyTorch's views keep it)."""
        root = self
        while root._view is not None and root._view.op not in _DETACHED_ALIASES and \
                not isinstance(root._view.base, _Gone):
            root = root._view.base
        if root._requires_grad and _grad_mode.STATE.enabled:
            what = "a leaf tensor" if root is self else "a view of a leaf tensor"
            raise RuntimeError(f"{op}: {what} that requires grad is being used in an "
                               "in-place operation; wrap the update in nv.no_grad()")
        self.node                      # a view: up to date with its base first
        views = live_views(self)
        if self._requires_grad and any(v.op not in _DETACHED_ALIASES for v in views):
            raise RuntimeError(f"{op}: cannot change the shape of a leaf tensor that "
                               "requires grad in place while views of it with autograd "
                               "history are alive; delete them first")
        if self._view is not None or views:
            storage = _move_views(self, views)
            self._view = _View(storage, forward, lambda s, value: inverse(value), op)
            value = forward(storage)
        else:
            value = forward(self)
        old_fn = self._grad_fn
        self._node, self._grad_fn = value.node, value._grad_fn
        if old_fn is not None and old_fn.retained:
            _carry_retained(self, old_fn)
        self._version += 1
        if not self._node.realized:
            live_pending.live.add(self)
        return self

    # ------------------------------------------------------------ properties

    # shape, dtype and ndim are read many times per recorded op: they check the view
    # inline and go through ``node`` only when the base changed in place.
    @property
    def shape(self) -> tuple[int, ...]:
        v = self._view
        if v is not None and v.base._version != v.version:
            return self.node.shape
        return self._node.shape

    def size(self, dim: int | None = None):
        if dim is None:
            return self.shape
        from nova.core.shapes import normalize_dim
        return self.shape[normalize_dim("size", dim, self.ndim, self.shape)]

    @property
    def dtype(self) -> dt.DType:
        v = self._view
        if v is not None and v.base._version != v.version:
            return self.node.dtype
        return self._node.dtype

    @property
    def device(self) -> device:
        """Where the values live (``cpu`` or ``cuda``); a pending result is on its
        inputs' device, a constant on the CPU until it meets a device tensor."""
        return BY_TYPE[self.node.device]

    @property
    def is_cuda(self) -> bool:
        return self.node.device == "cuda"

    @property
    def ndim(self) -> int:
        v = self._view
        if v is not None and v.base._version != v.version:
            return len(self.node.shape)
        return len(self._node.shape)

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def element_size(self) -> int:
        return self.dtype.itemsize

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    @property
    def T(self) -> Tensor:
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self) -> Tensor:
        return _arrays.matrix_transpose(self, "tensor.mT")

    @property
    def mH(self) -> Tensor:
        """``mT``: the conjugate of a real tensor is itself."""
        return _arrays.matrix_transpose(self, "tensor.mH")

    @property
    def H(self) -> Tensor:
        """A matrix's conjugate transpose: its transpose (2-D only, as PyTorch's)."""
        return _arrays.matrix_H(self)

    @property
    def real(self) -> Tensor:
        """The tensor itself (every Nova dtype is real); assigning copies into it."""
        return self

    @real.setter
    def real(self, value: Any) -> None:
        if isinstance(value, Tensor):
            self.copy_(value)
        else:
            self.fill_(value)

    @property
    def imag(self) -> Tensor:
        return _arrays.imag(self)

    # ------------------------------------------------------------ what torch code asks of
    # storage: Nova values are dense, on the CPU or the GPU, never sparse, quantized,
    # nested or meta; no tensor is an inference tensor (``nv.inference_mode`` makes
    # ordinary ones, see ``nova/tensor/grad_mode.py``)

    @property
    def layout(self) -> layout:
        return strided

    is_sparse = is_sparse_csr = is_quantized = is_meta = is_nested = property(
        lambda self: False)

    def is_inference(self) -> bool:
        return False

    @property
    def output_nr(self) -> int:
        """0: which output of its ``grad_fn`` this tensor is. Nova records a
        multi-output op (``unbind``, ``max(dim)``) as one node per output, so each is
        output 0 (PyTorch numbers ``unbind``'s outputs 0, 1, ...)."""
        return 0

    def dim_order(self, *, ambiguity_check: Any = False) -> tuple[int, ...]:
        """The dimensions from outermost to innermost in memory: ``(0, 1, ..., n-1)``,
        since Nova values are row-major (``is_contiguous`` is always True).
        ``ambiguity_check=True`` (or a list of memory formats, each of which a Nova
        tensor satisfies) raises where PyTorch's would for such a tensor: a size-1
        dimension or two equal strides allow other orders."""
        from nova.tensor.layout_info import dim_order
        return dim_order(self, ambiguity_check)

    def new_empty_strided(self, size: Any, stride: Any, *, dtype: Any = None,
                          layout: Any = None, device: Any = None, requires_grad: bool = False,
                          pin_memory: bool = False) -> Tensor:
        """``nv.empty_strided`` with this tensor's dtype and device unless given."""
        from nova.tensor.creation import empty_strided
        return empty_strided(size, stride, dtype=self.dtype if dtype is None else dtype,
                             device=(self.node.device or "cpu") if device is None else device,
                             requires_grad=requires_grad)

    def is_pinned(self, device: Any = None) -> bool:
        """False: Nova pins nothing (``pin_memory``); ``device`` is PyTorch's deprecated
        argument, which changes nothing."""
        return False

    def pin_memory(self) -> Tensor:
        """``self``: Nova copies a host tensor to the GPU from wherever it lives, so
        there is nothing to pin (PyTorch returns a pinned copy). A GPU tensor is refused,
        as PyTorch refuses it."""
        if self.node.device == "cuda":
            raise RuntimeError("pin_memory: cannot pin a CUDA tensor; only CPU tensors can "
                               "be pinned")
        return self

    def share_memory_(self) -> Tensor:
        """``self``. Nova values are immutable, so a forked process (a DataLoader worker)
        reads a tensor's values as they were at the fork without moving them to shared
        memory. Unlike PyTorch's, an in-place update made in another process is not
        seen by this one (no Hogwild-style training across processes)."""
        return self

    def is_shared(self) -> bool:
        """True for a GPU tensor (as PyTorch's), False on the CPU: Nova puts nothing in
        shared memory (``share_memory_``)."""
        return self.node.device == "cuda"

    # ------------------------------------------------------------ host access

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """A copy of the values as a numpy array (realizes pending work).

        Nova values are immutable, so unlike ``torch.Tensor.numpy`` this never aliases:
        writing into the returned array does not change the tensor. It is what PyTorch's
        ``force=True`` gives for any tensor (one with history or on the GPU included),
        so ``force`` changes nothing.
        """
        values = self._host_values()
        return values if self.node.device == "cuda" else np.array(values, copy=True)

    def _host_values(self) -> np.ndarray:
        """The values as a host array that must not be written (realizes pending work):
        a host tensor's own read-only buffer, so ``item``, ``tolist`` and ``repr`` read
        it without the copy ``numpy`` makes; a device tensor's fresh host copy, viewed
        as the Nova dtype."""
        from nova.tensor.realize import realize
        realize(self)
        node = self.node
        if node.device == "cuda":
            from nova.runtime.cuda_runtime import to_host
            return to_host(node.buffer, node.dtype.np)
        return node.buffer

    def item(self) -> Any:
        if self.numel() != 1:
            # PyTorch: RuntimeError from item(), ValueError from float()/int()
            raise ArgumentError(f"item: a Tensor with {self.numel()} elements (shape "
                                f"{self.shape}) cannot be converted to a Python scalar")
        return self._host_values().reshape(()).item()

    def tolist(self) -> Any:
        arr = self._host_values()
        if self.dtype == dt.bfloat16:
            arr = arr.astype(np.float32)
        return arr.tolist()

    def __copy__(self) -> Tensor:
        """``copy.copy``: another handle on the same value, view and graph (nothing runs)."""
        t = type(self)._wrap(self._node, self._view, self._grad_fn)
        t._version, t._requires_grad, t.grad = self._version, self._requires_grad, self.grad
        return t

    def __deepcopy__(self, memo: dict) -> Tensor:
        """``copy.deepcopy`` as PyTorch's: a leaf's values (realized), ``requires_grad``
        and ``.grad`` are copied; a view is copied as the same view of its base's copy,
        so copies alias as the originals do; a non-leaf of an autograd graph refuses."""
        if id(self) in memo:
            return memo[id(self)]
        if self._grad_fn is not None:
            raise RuntimeError("deepcopy: only tensors created explicitly by the user (graph "
                               "leaves) support the deepcopy protocol; use .detach() first")
        v = self._view
        if v is not None and v.op not in _DETACHED_ALIASES:
            from nova.tensor.movement import make_view
            new = make_view(copy.deepcopy(v.base, memo), v.derive, v.write_back, v.op)
        else:
            new = _rebuild_tensor(*self._leaf_state())
        memo[id(self)] = new
        if self.grad is not None:
            new.grad = copy.deepcopy(self.grad, memo)
        return new

    def __reduce_ex__(self, protocol: Any) -> tuple:
        """Pickling (``pickle``, a DataLoader worker's batches) carries the values, dtype,
        device and ``requires_grad`` (realizing pending work), never the trace: a pending
        node, its view functions or its autograd graph mean nothing in another process.
        As with PyTorch, the copy is a leaf."""
        return (_rebuild_tensor, self._leaf_state())

    def _leaf_state(self) -> tuple[np.ndarray, str, str, bool]:
        """What a copy made as a new leaf holds: values (realized), dtype, device and
        ``requires_grad`` (``_rebuild_tensor``'s arguments)."""
        return (self.numpy(), self.dtype.name, self.node.device or "cpu", self.requires_grad)

    def __repr__(self) -> str:
        arr = self._host_values()
        if self.dtype == dt.bfloat16:
            arr = arr.astype(np.float32)
        from nova.tensor.printing import tensor_text
        # as PyTorch: a leaf that records gradients says so, a result names its backward
        grad = (f"grad_fn=<{self._grad_fn.name()}>",) if self._grad_fn is not None else \
            ("requires_grad=True",) if self._requires_grad else ()
        return tensor_text(arr, self.shape, self.dtype, self.node.device == "cuda", grad)

    def __format__(self, format_spec: str) -> str:
        """As ``torch.Tensor.__format__``: a 0-d tensor formats as its Python scalar
        (``f"{loss:.4f}"``), any other tensor only with an empty spec (its repr)."""
        if self.ndim == 0:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(f"Boolean value of Tensor with {self.numel()} elements (shape "
                               f"{self.shape}) is ambiguous")
        return bool(self.item())

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.category == dt.FLOAT or self.numel() != 1:   # (bool: 0 or 1)
            raise TypeError(f"only integer tensors of a single element can be converted to "
                            f"an index (got {self.dtype.name} of shape {self.shape})")
        return int(self.item())

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        _indexing.realize_to_iterate(self)
        return (self[i] for i in range(self.shape[0]))

    def __dlpack__(self, *, stream: Any = -1, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        """A DLPack capsule of a copy of the values (``nova.tensor.dlpack``)."""
        from nova.tensor.dlpack import to_dlpack
        return to_dlpack(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        from nova.tensor.dlpack import dlpack_device
        return dlpack_device(self)

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy()
        return arr if dtype is None else arr.astype(dtype)

    __hash__ = object.__hash__

    # ------------------------------------------------------------ conversion

    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other_tensor)``.
        As PyTorch, ``self`` itself when nothing changes, unless ``copy=True``, which
        always gives a new tensor (an in-place write to it leaves ``self`` alone)."""
        target_dtype = kwargs.pop("dtype", None)
        target_device = kwargs.pop("device", None)
        flags = [a for a in args if isinstance(a, bool)]    # (non_blocking, copy), as torch
        if len(flags) > 2:
            raise TypeError(f"to: at most two positional flags (non_blocking, copy), got "
                            f"{len(flags)}")
        fresh = kwargs.pop("copy", len(flags) == 2 and flags[1])
        kwargs.pop("non_blocking", None)
        # a layout request (channels_last...): checked, nothing to do without strides
        check_layout_rank("to", check_memory_format("to", kwargs.pop("memory_format", None)),
                          self.ndim)
        if kwargs:
            raise TypeError(f"to: unexpected arguments {sorted(kwargs)}")
        for a in (a for a in args if not isinstance(a, bool)):
            if isinstance(a, Tensor):    # its dtype and device, as torch
                target_dtype, target_device = a.dtype, a.device
            elif isinstance(a, (device, int)) or (isinstance(a, str) and
                                                  a.partition(":")[0] in ("cpu", "cuda")):
                target_device = a           # (an int: the accelerator's ordinal)
            else:
                target_dtype = a
        if target_dtype is not None and dt.get_complex_dtype(target_dtype) is not None:
            from nova.tensor.complex import from_real
            z = from_real(self, target_dtype)
            return z if target_device is None else z.to(target_device)
        out = self if target_dtype is None else _ops.cast(self, dt.get_dtype(target_dtype))
        if target_device is not None:
            from nova.tensor.device import check_device
            target = check_device(target_device, "to")
            if target.type != (self.node.device or "cpu"):
                out = _move(out, target.type)
        return out.clone() if fresh and out is self else out

    def cuda(self, device: Any = None, non_blocking: bool = False,
             memory_format: Any = None) -> Tensor:
        """A copy on the GPU (``self`` if already there); ``non_blocking`` and
        ``memory_format`` as ``to``'s."""
        return self.to("cuda" if device is None else device, non_blocking=non_blocking,
                       memory_format=memory_format)

    def type(self, dtype: Any = None, non_blocking: bool = False):
        """``x.type()``: PyTorch's type name (``'torch.FloatTensor'``); ``x.type(t)``: a
        copy in dtype ``t``, a legacy type (``nv.LongTensor``) or its name
        (``non_blocking`` as ``to``'s: nothing to do)."""
        from nova.tensor import legacy
        if dtype is None:
            return legacy.type_string(self)
        kind = legacy.as_legacy_type(dtype)
        if kind is None:
            return self.to(dtype)
        return self.to(kind.dtype).to("cuda" if kind.is_cuda else "cpu")

    def float(self, memory_format: Any = None) -> Tensor:
        return self.to(dt.float32, memory_format=memory_format)

    def double(self, memory_format: Any = None) -> Tensor:
        return self.to(dt.float64, memory_format=memory_format)

    def half(self, memory_format: Any = None) -> Tensor:
        return self.to(dt.float16, memory_format=memory_format)

    def bfloat16(self, memory_format: Any = None) -> Tensor:
        return self.to(dt.bfloat16, memory_format=memory_format)

    def byte(self, memory_format: Any = None) -> Tensor:
        """``self.to(uint8)``: values outside [0, 255] wrap (floats truncate first)."""
        return self.to(dt.uint8, memory_format=memory_format)

    def char(self, memory_format: Any = None) -> Tensor:
        """``self.to(int8)``: values outside [-128, 127] wrap (floats truncate first)."""
        return self.to(dt.int8, memory_format=memory_format)

    def short(self, memory_format: Any = None) -> Tensor:
        """``self.to(int16)``."""
        return self.to(dt.int16, memory_format=memory_format)

    def long(self, memory_format: Any = None) -> Tensor:
        return self.to(dt.int64, memory_format=memory_format)

    def int(self, memory_format: Any = None) -> Tensor:
        return self.to(dt.int32, memory_format=memory_format)

    def bool(self, memory_format: Any = None) -> Tensor:
        return self.to(dt.bool_, memory_format=memory_format)

    def cfloat(self, memory_format: Any = None) -> Any:
        """``self.to(nv.complex64)``: a complex tensor, imaginary part 0."""
        return self.to(dt.complex64)

    def cdouble(self, memory_format: Any = None) -> Any:
        """``self.to(nv.complex128)``."""
        return self.to(dt.complex128)

    def chalf(self, memory_format: Any = None) -> Any:
        raise TypeError(f"chalf: Nova has no complex32 (ComplexHalf) dtype to convert this "
                        f"{self.dtype.name} tensor to; use .cfloat() (complex64)")

    def angle(self) -> Tensor:
        """0 where ``self >= 0``, pi where negative, NaN kept (``torch.angle`` of a real
        tensor; integers give the default float dtype)."""
        from nova.tensor.complex import angle
        return angle(self)

    def cpu(self, memory_format: Any = None) -> Tensor:
        """A copy on the host (``self`` if already there); ``memory_format`` as ``to``'s."""
        return self.to("cpu", memory_format=memory_format)

    def clone(self, *, memory_format: Any = None) -> Tensor:
        """A new handle on the same value (differentiable, never aliasing);
        ``memory_format`` is checked and has nothing to do (no strides)."""
        check_layout_rank("clone", check_memory_format("clone", memory_format), self.ndim)
        node = self.node
        edge = self._grad_edge() if _grad_mode.STATE.enabled else None
        return Tensor._wrap(node, grad_fn=None if edge is None else _tape.alias_fn(edge, node))

    def detach(self) -> Tensor:
        """The same value without autograd history, shared as PyTorch shares the
        storage: an in-place update of either handle is seen by the other, and one
        made through the detached handle is outside autograd (``p.detach().zero_()``,
        an EMA's ``ema_v.copy_(...)`` over ``state_dict()`` values, update ``p``)."""
        return _detached_alias(self, "detach")

    @property
    def data(self) -> Tensor:
        """``detach()``'s alias: ``p.data.add_(...)``, ``m.weight.data.normal_(0,
        0.02)`` update the tensor itself, outside autograd, as in PyTorch."""
        return _detached_alias(self, "data")

    @data.setter
    def data(self, value: Tensor) -> None:
        """``t.data = other``, as PyTorch's: ``t`` shares ``other``'s storage from now on
        (of any shape, dtype or device), an alias of it as ``other.detach()`` is, but
        holding it: in-place updates of either are seen by the other (and by other
        views of that storage: ``p.data = vec[2:6].view(2, 2)``, then ``vec.mul_(10)``
        changes ``p``), writes through ``t`` reach it outside autograd, and ``t`` keeps
        its own ``requires_grad``, ``grad`` and history. Views and aliases made of ``t``
        before keep the storage they view (``_move_views``), and see each other's
        writes, not ``t``'s."""
        if not isinstance(value, Tensor):
            raise TypeError(f"data: Variable data has to be a tensor, but got "
                            f"{type(value).__name__}")
        if value is self:
            return
        self.node                        # (a view: its current value first)
        views = live_views(self)
        if views:
            _hold_moved(_move_views(self, views), views, self)
        alias = _detached_alias(value, "data", hold=True)
        self._view = alias._view
        self._node = alias._node
        self._version += 1
        if not self._node.realized:
            live_pending.live.add(self)

    def detach_(self) -> Tensor:
        self._grad_fn = None
        self._requires_grad = False
        return self

    # ------------------------------------------------------------ autograd

    # (the three below read ``node`` first for a view: one whose base was updated in
    # place since re-derives, and takes the history of the base's new value)
    @property
    def requires_grad(self) -> bool:
        if self._view is not None:
            self.node
        return self._requires_grad or self._grad_fn is not None

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if self._grad_fn is not None:
            if not requires_grad:
                raise RuntimeError("requires_grad_: you can only change requires_grad flags of "
                                   "leaf tensors; use .detach() for a non-leaf")
            return self
        if requires_grad and not self.dtype.is_floating_point:
            raise RuntimeError(f"requires_grad_: only tensors of floating point dtype can "
                               f"require gradients, got {self.dtype.name}")
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def grad(self) -> Tensor | None:
        """The gradient backward accumulated (None until one arrives)."""
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            _check_grad(self, value)
        self._grad = value

    @property
    def is_leaf(self) -> bool:
        if self._view is not None:
            self.node
        return self._grad_fn is None

    @property
    def grad_fn(self) -> Any:
        if self._view is not None:
            self.node
        return self._grad_fn

    def retain_grad(self) -> None:
        """Keep ``.grad`` for this non-leaf tensor after backward (a leaf keeps it
        anyway; calling it again changes nothing). As in PyTorch, it stays with the
        tensor through in-place ops: the gradient kept is that of its value when
        backward runs (``_carry_retained``)."""
        self.node               # (a view of a base updated in place: its history now)
        fn = self._grad_fn
        if fn is None:
            if not self._requires_grad:
                raise RuntimeError("retain_grad: can't retain_grad on a tensor that has "
                                   "requires_grad=False")
            return
        if not any(r() is self for r in fn.retained):
            fn.retained.append(weakref.ref(self))

    def backward(self, gradient: Tensor | None = None, retain_graph: bool | None = None,
                 create_graph: bool = False, inputs: Any = None) -> None:
        """Append the backward pass to the trace and accumulate into ``.grad`` of the
        leaves; nothing is computed until the next realization.

        The engine is ``nova.autograd.engine.backward``, reached through the hook it
        registers on import (``tape.run_backward``): autograd sits above tensor, so
        tensor never imports it."""
        _tape.run_backward([self], None if gradient is None else [gradient], retain_graph,
                           create_graph, inputs)

    # ------------------------------------------------------------ operators

    def __add__(self, o): return _ops.add(self, o)
    def __radd__(self, o): return _ops.add(o, self)
    def __sub__(self, o): return _ops.sub(self, o)
    def __rsub__(self, o): return _ops.sub(o, self)
    def __mul__(self, o): return _ops.mul(self, o)
    def __rmul__(self, o): return _ops.mul(o, self)
    def __truediv__(self, o): return _ops.div(self, o)
    def __rtruediv__(self, o): return _ops.div(o, self)
    def __floordiv__(self, o): return _numeric.floor_divide(self, o)
    def __rfloordiv__(self, o): return _numeric.floor_divide(o, self)
    def __mod__(self, o): return _numeric.remainder(self, o)
    def __rmod__(self, o): return _numeric.remainder(o, self)
    def __pow__(self, o): return _ops.pow(self, o)
    def __rpow__(self, o): return _ops.pow(o, self)
    def __matmul__(self, o): return _ops.matmul(self, o)
    def __rmatmul__(self, o): return _ops.matmul(o, self)
    def __neg__(self): return _ops.neg(self)
    def __pos__(self): return self
    def __abs__(self): return _ops.abs(self)
    # bitwise on integers, logical on bools (floats raise), as PyTorch's operators
    def __invert__(self): return _ops.bitwise_not(self)
    def __and__(self, o): return _ops.bitwise_and(self, o)
    def __rand__(self, o): return _ops.bitwise_and(o, self)
    def __or__(self, o): return _ops.bitwise_or(self, o)
    def __ror__(self, o): return _ops.bitwise_or(o, self)
    def __xor__(self, o): return _ops.bitwise_xor(self, o)
    def __rxor__(self, o): return _ops.bitwise_xor(o, self)
    def __lt__(self, o): return _ops.lt(self, o)
    def __le__(self, o): return _ops.le(self, o)
    def __gt__(self, o): return _ops.gt(self, o)
    def __ge__(self, o): return _ops.ge(self, o)
    # (``t == None`` is False and ``t != None`` True, as PyTorch answers them)
    def __eq__(self, o): return False if o is None else _ops.eq(self, o)  # type: ignore[override]
    def __ne__(self, o): return True if o is None else _ops.ne(self, o)  # type: ignore[override]

    def __iadd__(self, o): return self.add_(o)
    def __isub__(self, o): return self.sub_(o)
    def __imul__(self, o): return self.mul_(o)
    def __itruediv__(self, o): return self.div_(o)
    # (without these, ``x //= 2`` on a view would rebind the name, not write through)
    def __ifloordiv__(self, o): return self._assign(_numeric.floor_divide(self, o), "floor_divide_")
    def __imod__(self, o): return self._assign(_numeric.remainder(self, o), "remainder_")
    def __ipow__(self, o): return self._assign(_ops.pow(self, o), "pow_")
    def __iand__(self, o): return self._assign(_ops.bitwise_and(self, o), "bitwise_and_")
    def __ior__(self, o): return self._assign(_ops.bitwise_or(self, o), "bitwise_or_")
    def __ixor__(self, o): return self._assign(_ops.bitwise_xor(self, o), "bitwise_xor_")

    def __getitem__(self, index: Any) -> Tensor | _indexing.MaskedSelection:
        return _indexing.getitem(self, index)

    def __setitem__(self, index: Any, value: Any) -> None:
        _indexing.setitem(self, index, value)

    def index_put_(self, indices: Any, values: Tensor, accumulate: bool = False) -> Tensor:
        return _indexing.index_put_(self, indices, values, accumulate)

    def index_put(self, indices: Any, values: Tensor, accumulate: bool = False) -> Tensor:
        return _indexing.index_put(self, indices, values, accumulate)

    # ------------------------------------------------------------ in-place forms

    def add_(self, other: Any, alpha: Any = 1) -> Tensor:
        return self._assign(_ops.add(self, other, alpha=alpha), "add_")

    def sub_(self, other: Any, alpha: Any = 1) -> Tensor:
        return self._assign(_ops.sub(self, other, alpha=alpha), "sub_")

    def mul_(self, other: Any) -> Tensor:
        return self._assign(_ops.mul(self, other), "mul_")

    def div_(self, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        return self._assign(_numeric.div(self, other, rounding_mode=rounding_mode), "div_")

    def zero_(self) -> Tensor:
        return self.fill_(0)

    def fill_(self, value: Any) -> Tensor:
        if isinstance(value, Tensor):
            if value.ndim != 0:
                raise RuntimeError(f"fill_: value must be a 0-d tensor, got shape {value.shape}")
            return self._assign(_ops.broadcast_to(value.to(self.dtype), self.shape), "fill_")
        return self._assign(_ops.full_const(value, self.shape, self.dtype), "fill_")

    def copy_(self, src: Any, non_blocking: bool = False) -> Tensor:
        """``src``'s values written into ``self`` (broadcast, cast, across devices);
        ``non_blocking`` has nothing to do: Nova's copies are ordered by its steps."""
        if isinstance(src, (bool, int, float, np.bool_, np.integer, np.floating)):
            # a number is a 0-d tensor of its kind in 64 bits, then cast (PyTorch's
            # wrapped number): int64's copy_(2.7) is 2, float64's copy_(0.1) exact; one
            # self cannot hold raises, as fill_ (PyTorch wraps int8's copy_(300) to 44).
            # A tensor operand, not a baked-in constant: a loop of values compiles once
            from nova.tensor.constants import constant
            dt.checked_scalar(src, self.dtype, "copy_")
            kind = (dt.bool_ if isinstance(src, (bool, np.bool_)) else
                    dt.int64 if isinstance(src, (int, np.integer)) else dt.float64)
            src = constant(src, dtype=kind, device=self.device)
        elif not isinstance(src, Tensor):
            raise TypeError(f"copy_: src must be a Tensor or a real number, got "
                            f"{type(src).__name__}")
        where, there = self.node.device, src.node.device
        if (where == "cuda" and (there == "cpu" or there is None and src.node.realized)
                or where == "cpu" and there == "cuda"):
            src = src.to(BY_TYPE[where])      # copy_ crosses devices, as in torch
        src = _ops.broadcast_to(src, self.shape, op="copy_")
        return self._assign(src.to(self.dtype), "copy_")

    def clamp_(self, min: Any = None, max: Any = None) -> Tensor:
        return self._assign(_ops.clamp(self, min, max), "clamp_")

    def masked_fill_(self, mask: Tensor, value: Any) -> Tensor:
        return self._assign(_ops.masked_fill(self, mask, value, "masked_fill_"),
                            "masked_fill_")

    def masked_scatter_(self, mask: Tensor, source: Tensor) -> Tensor:
        return self._assign(_arrays.masked_scatter(self, mask, source), "masked_scatter_")

    def put_(self, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
        return self._assign(_arrays.put(self, index, source, accumulate), "put_")

    def nextafter_(self, other: Any) -> Tensor:
        return self._assign(_special.nextafter(self, other), "nextafter_")

    def addmm_(self, mat1: Tensor, mat2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        return self._assign(_arrays.addmm(self, mat1, mat2, beta=beta, alpha=alpha), "addmm_")

    def addmv_(self, mat: Tensor, vec: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        return self._assign(_arrays.addmv(self, mat, vec, beta=beta, alpha=alpha), "addmv_")

    def baddbmm_(self, batch1: Tensor, batch2: Tensor, *, beta: Any = 1,
                 alpha: Any = 1) -> Tensor:
        return self._assign(_arrays.baddbmm(self, batch1, batch2, beta=beta, alpha=alpha),
                            "baddbmm_")

    def addbmm_(self, batch1: Tensor, batch2: Tensor, *, beta: Any = 1,
                alpha: Any = 1) -> Tensor:
        return self._assign(_products.addbmm(self, batch1, batch2, beta=beta, alpha=alpha),
                            "addbmm_")

    def addr_(self, vec1: Tensor, vec2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        return self._assign(_products.addr(self, vec1, vec2, beta=beta, alpha=alpha), "addr_")

    def apply_(self, callable: Callable[[Any], Any]) -> Tensor:
        """Each element replaced by ``callable(element)`` on the host
        (``nova.tensor.host_maps``)."""
        from nova.tensor.host_maps import apply_
        return apply_(self, callable)

    def map_(self, tensor: Tensor, callable: Callable[[Any, Any], Any]) -> Tensor:
        from nova.tensor.host_maps import map_
        return map_(self, tensor, callable)

    def map2_(self, x: Tensor, y: Tensor, callable: Callable[[Any, Any, Any], Any]) -> Tensor:
        from nova.tensor.host_maps import map2_
        return map2_(self, x, y, callable)

    def igamma(self, other: Tensor) -> Tensor:
        """``torch.igamma``: the regularized lower incomplete gamma function."""
        from nova.tensor.sampling_ops import gammainc
        if not isinstance(other, Tensor):
            raise TypeError(f"igamma(): argument 'other' (position 1) must be Tensor, not "
                            f"{type(other).__name__}")
        return gammainc(self, other)

    def igammac(self, other: Tensor) -> Tensor:
        """``torch.igammac``: the regularized upper incomplete gamma function."""
        from nova.tensor.sampling_ops import gammaincc
        if not isinstance(other, Tensor):
            raise TypeError(f"igammac(): argument 'other' (position 1) must be Tensor, not "
                            f"{type(other).__name__}")
        return gammaincc(self, other)

    def igamma_(self, other: Tensor) -> Tensor:
        return self._assign(self.igamma(other), "igamma_")

    def igammac_(self, other: Tensor) -> Tensor:
        return self._assign(self.igammac(other), "igammac_")

    # ------------------------------------------------------------ more of torch's methods
    # (nova/tensor/more_ops.py)

    def __contains__(self, element: Any) -> bool:
        return _more_ops.contains(self, element)

    def __lshift__(self, o): return _more_ops.bitwise_left_shift(self, o)
    def __rlshift__(self, o): return _more_ops.bitwise_left_shift(o, self)
    def __rshift__(self, o): return _more_ops.bitwise_right_shift(self, o)
    def __rrshift__(self, o): return _more_ops.bitwise_right_shift(o, self)
    def __ilshift__(self, o): return self.bitwise_left_shift_(o)
    def __irshift__(self, o): return self.bitwise_right_shift_(o)

    def bitwise_left_shift(self, other: Any) -> Tensor:
        return _more_ops.bitwise_left_shift(self, other)

    def bitwise_right_shift(self, other: Any) -> Tensor:
        return _more_ops.bitwise_right_shift(self, other)

    def bitwise_left_shift_(self, other: Any) -> Tensor:
        return self._assign(_more_ops.bitwise_left_shift(self, other), "bitwise_left_shift_")

    def bitwise_right_shift_(self, other: Any) -> Tensor:
        return self._assign(_more_ops.bitwise_right_shift(self, other), "bitwise_right_shift_")

    def gcd(self, other: Tensor) -> Tensor:
        return _more_ops.gcd(self, other)

    def lcm(self, other: Tensor) -> Tensor:
        return _more_ops.lcm(self, other)

    def gcd_(self, other: Tensor) -> Tensor:
        return self._assign(_more_ops.gcd(self, other), "gcd_")

    def lcm_(self, other: Tensor) -> Tensor:
        return self._assign(_more_ops.lcm(self, other), "lcm_")

    def mode(self, dim: int = -1, keepdim: bool = False) -> Any:
        return _more_ops.mode(self, dim, keepdim)

    def unfold(self, dimension: int, size: int, step: int) -> Tensor:
        return _more_ops.unfold(self, dimension, size, step)

    def scatter_reduce(self, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                       include_self: bool = True) -> Tensor:
        return _more_ops.scatter_reduce(self, dim, index, src, reduce,
                                        include_self=include_self)

    def scatter_reduce_(self, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                        include_self: bool = True) -> Tensor:
        return self._assign(_more_ops.scatter_reduce(self, dim, index, src, reduce,
                                                     include_self=include_self),
                            "scatter_reduce_")

    def index_reduce(self, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                     include_self: bool = True) -> Tensor:
        return _more_ops.index_reduce(self, dim, index, source, reduce,
                                      include_self=include_self)

    def index_reduce_(self, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                      include_self: bool = True) -> Tensor:
        return self._assign(_more_ops.index_reduce(self, dim, index, source, reduce,
                                                   include_self=include_self),
                            "index_reduce_")


class layout:
    """How a tensor's elements are stored (``torch.layout``). Nova has one kind,
    ``nv.strided`` (dense; where each element lives is the compiler's choice)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"nova.{self.name}"

    def __reduce__(self) -> str:
        return self.name      # (unpickles as this module's object of that name)


strided = layout("strided")


def _carry_retained(t: Tensor, old_fn: Any) -> None:
    """``t`` got a new history (an in-place op, or a view re-deriving from a base
    updated in place): if it called ``retain_grad``, move that from ``old_fn`` to its
    GradFn now, as PyTorch moves its retains-grad hook, so ``t.grad`` is the gradient
    of ``t``'s current value (not of the value it replaced). A history taken away (an
    update under ``no_grad``) keeps the old registration, which backward then skips."""
    new_fn = t._grad_fn
    if new_fn is None or new_fn is old_fn:
        return
    mine = [r for r in old_fn.retained if r() is t]
    if mine:
        old_fn.retained = [r for r in old_fn.retained if r() is not t]
        if not any(r() is t for r in new_fn.retained):
            new_fn.retained.append(mine[0])


# The view ops of ``detach()`` and ``.data``: writes through them reach the base outside
# autograd (``Tensor._write_outside_autograd``).
_DETACHED_ALIASES = frozenset({"detach", "data"})


def _detached_alias(t: Tensor, op: str, hold: bool = False) -> Tensor:
    """``t``'s value without history, as an alias of the tensor whose storage ``t``
    views (``op``: "detach" or "data"; ``hold``: for ``.data``'s setter, see
    ``_AliasView``)."""
    chain: list[_View] = []
    root = t
    while True:
        v = root._view
        if v is None or v.write_back is None or isinstance(v.base, _Gone):
            break
        chain.append(v)
        root = v.base
    alias = Tensor._wrap(t.node)
    hold = hold or root._grad_fn is None     # (no graph to keep alive)
    if not chain:
        alias._view = _AliasView(t, _no_history, _whole_value, op, hold)
        return alias
    views = list(reversed(chain))          # the root's view first

    def derive(r: Tensor) -> Tensor:
        for w in views:
            r = w.derive(r)
        return Tensor._wrap(r.node)

    def write_back(r: Tensor, value: Tensor) -> Tensor:
        bases = [r]
        for w in views[:-1]:
            bases.append(w.derive(bases[-1]))
        for w, b in zip(reversed(views), reversed(bases)):
            value = w.write_back(b, value)
        return value

    alias._view = _AliasView(root, derive, write_back, op, hold,
                             rederives=any(w.rederives for w in views))
    return alias


def _move_views(t: Tensor, views: list[_View]) -> Tensor:
    """Give the storage ``t`` shows a hidden tensor of its own, which ``views`` (``t``'s
    live views) view from now on: it holds ``t``'s value, view relation (to ``t``'s own
    base) and history. ``t`` can then show something else (``_restride``, the ``.data``
    setter) while they keep their values and see each other's writes, as PyTorch's
    views of one storage do."""
    storage = Tensor._wrap(t._node, t._view, t._grad_fn)
    storage._version = t._version
    refs = getattr(t, "_views", None)
    if refs is not None:
        storage._views = refs
        del t._views
    for v in views:
        v.rebase(storage)
    return storage


def _hold_moved(storage: Tensor, views: list[_View], t: Tensor) -> None:
    """After ``t.data = other``, for the views of ``t`` made before (now of
    ``storage``): a view with history that re-derives (after a write through another of
    them) still reaches ``t``'s GradFn, or ``t`` itself for a leaf that requires grad,
    as PyTorch's views keep their autograd link to ``t``; without such views the
    history goes. The aliases then hold ``storage``, since no handle is left on it but
    its views (``p.detach()`` twice, then ``p.data = ...``: the two still share a
    storage, as in PyTorch), unless that would keep a graph alive (views with history
    of a non-leaf or of a view): those views hold it then."""
    if all(v.op in _DETACHED_ALIASES for v in views):
        storage._grad_fn = None
    elif t._grad_fn is None and t._requires_grad:
        storage._grad_fn = _tape.alias_fn(t, storage._node)
    elif t._grad_fn is not None or storage._view is not None:
        return
    for v in views:
        if isinstance(v, _AliasView):
            v.held = storage


def _check_grad(t: Tensor, g: Any) -> None:
    """What PyTorch checks of a tensor assigned to ``t.grad``: a tensor, of ``t``'s
    dtype, device type and size (a later backward adds into it in place)."""
    if not isinstance(g, Tensor):
        raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type "
                        f"{type(g).__name__}")
    if g.dtype != t.dtype:
        raise RuntimeError(f"attempting to assign a gradient with dtype '{g.dtype.name}' to a "
                           f"tensor with dtype '{t.dtype.name}'. Please ensure that the "
                           "gradient and the tensor have the same dtype")
    where, there = t.node.device, g.node.device
    if where is not None and there is not None and where != there:
        raise RuntimeError(f"attempting to assign a gradient with device type '{there}' to a "
                           f"tensor with device type '{where}'. Please ensure that the "
                           "gradient and the tensor are on the same device")
    if g.shape != t.shape:
        raise RuntimeError(f"attempting to assign a gradient of size '{list(g.shape)}' to a "
                           f"tensor of size '{list(t.shape)}'. Please ensure that the "
                           "gradient and the tensor are the same size")


def _alone_refs() -> int:
    """``sys.getrefcount`` of a held root, as ``_AliasView.alone`` reads it, when the
    view is all that holds it (measured, as the count depends on the interpreter)."""
    probe = _AliasView.__new__(_AliasView)
    probe.held = object()
    return probe.held_refs()


def _no_history(base: Tensor) -> Tensor:
    return Tensor._wrap(base.node)


_ALONE_REFS = _alone_refs()


def clear_grad(t: Tensor, set_to_none: bool) -> None:
    """What ``zero_grad`` does to one parameter, as PyTorch does it: drop ``t.grad``, or
    zero that same tensor in place (its history dropped first), so a reference held to
    ``t.grad`` sees the zeros rather than keeping the old gradient."""
    g = t.grad
    if g is None:
        return
    if set_to_none:
        t.grad = None
        return
    if g.grad_fn is not None:
        g.detach_()
    else:
        g.requires_grad_(False)
    with _grad_mode.no_grad():
        g.zero_()


def unaliased_detach(t: Tensor) -> Tensor:
    """A new handle on ``t``'s value without history that does NOT alias ``t`` (values
    are immutable, so it is a copy at no cost): what internal code wants where
    ``detach()``'s shared storage would only add a view (gradients handed to
    ``.grad``, constants derived from a value)."""
    return Tensor._wrap(t.node)


def _whole_value(base: Tensor, value: Tensor) -> Tensor:
    return value


# Late imports: these modules build Tensors, so they import this one first.
from nova.tensor import indexing as _indexing  # noqa: E402
from nova.tensor import movement as _movement  # noqa: E402
from nova.tensor import ops as _ops  # noqa: E402
from nova.tensor import sorting as _sorting  # noqa: E402
from nova.tensor import numeric as _numeric  # noqa: E402
from nova.tensor import scan as _scan  # noqa: E402
from nova.tensor import elementary as _elementary  # noqa: E402
from nova.tensor import arrays as _arrays  # noqa: E402
from nova.tensor import special as _special  # noqa: E402
from nova.tensor import products as _products  # noqa: E402
from nova.tensor import statistics as _statistics  # noqa: E402
from nova.tensor import more_ops as _more_ops  # noqa: E402
from nova.tensor import strided as _strided  # noqa: E402

# Methods that are the module-level ops with the tensor first (``x.exp()``, ``x.sum(1)``).
for _mod in (_ops, _movement, _sorting, _numeric, _scan, _elementary, _arrays, _special,
             _products, _statistics, _strided):
    for _name in _mod.TENSOR_METHODS:
        setattr(Tensor, _name, getattr(_mod, _name))
# The in-place shape ops (``x.t_()``, ``x.unsqueeze_(0)``: ``Tensor._restride``).
for _name in _movement.RESTRIDE_METHODS:
    setattr(Tensor, _name, getattr(_movement, _name))

# Then factory methods, layout queries, aliases and the generated in-place forms, which
# wrap the methods above.
from nova.tensor import compat as _compat  # noqa: E402

_compat.install()

# Complex operands: a real tensor's arithmetic with a complex tensor or a Python complex
# is computed by ``nova.tensor.complex`` (which adds its tensor type here when it
# loads; this module cannot import it). One type lookup per operator call.
COMPLEX_OPERAND_TYPES: set[type] = {complex, np.complex64, np.complex128}
_COMPLEX_OPERATORS = {"__add__": ("add", False), "__radd__": ("add", True),
                      "__sub__": ("sub", False), "__rsub__": ("sub", True),
                      "__mul__": ("mul", False), "__rmul__": ("mul", True),
                      "__truediv__": ("div", False), "__rtruediv__": ("div", True),
                      "__matmul__": ("matmul", False), "__rmatmul__": ("matmul", True),
                      "__pow__": ("pow", False), "__rpow__": ("pow", True),
                      "__eq__": ("eq", False), "__ne__": ("ne", False)}


def _complex_aware(name: str, fn_name: str, reflected: bool) -> Any:
    real_op = getattr(Tensor, name)

    def op(self: Tensor, o: Any) -> Any:
        if type(o) in COMPLEX_OPERAND_TYPES:
            from nova.tensor import complex as _complex
            fn = getattr(_complex, fn_name)
            return fn(o, self) if reflected else fn(self, o)
        return real_op(self, o)
    op.__name__ = op.__qualname__ = name
    return op


for _name, (_fn_name, _reflected) in _COMPLEX_OPERATORS.items():
    setattr(Tensor, _name, _complex_aware(_name, _fn_name, _reflected))


def _rebuild_tensor(values: np.ndarray, dtype: str, device: str,
                    requires_grad: bool) -> Tensor:
    """Unpickling: a realized leaf holding ``values`` (see ``Tensor.__reduce_ex__``)."""
    from nova.tensor.creation import tensor
    return tensor(values, dtype=dtype, device=device, requires_grad=requires_grad)


def _multinomial(self: Tensor, num_samples: int, replacement: bool = False, *,
                 generator: Any = None) -> Tensor:
    from nova.tensor.creation import multinomial
    return multinomial(self, num_samples, replacement, generator=generator)


Tensor.multinomial = _multinomial


def _move(t: Tensor, target: str) -> Tensor:
    """``t``'s value copied to ``target`` as a new leaf (realizing it first).

    Autograd does not cross devices: a gradient would have to flow back through the
    copy into another device's step. So a tensor with history, or one that requires
    grad, is refused with the ways to get what the user wants (``Module.to`` moves
    parameters in place, keeping their identity and ``requires_grad``)."""
    if t._grad_fn is not None or t._requires_grad:
        raise RuntimeError(
            f"to: cannot move a tensor that requires grad from {t.device} to {target} "
            "(autograd does not cross devices). Move leaves before computing: "
            "model.to('cuda') moves parameters in place; for a single leaf use "
            "x.detach().to(device).requires_grad_()")
    from nova.runtime import cuda_runtime
    from nova.tensor.trace import buffer_node, device_buffer_node
    host = t.numpy()   # realizes; a host copy in the Nova dtype
    if target == "cuda":
        return Tensor._wrap(device_buffer_node(cuda_runtime.to_device(host), t.dtype, "cuda"))
    return Tensor._wrap(buffer_node(host, t.dtype))
