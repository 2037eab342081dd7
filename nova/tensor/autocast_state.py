"""The autocast state the op front end reads (``nv.autocast``, ``nova.amp``).

It lives in ``nova.tensor`` because recording reads it (``matmul`` lowers its operands,
the float32 ops raise theirs) and ``nova.tensor`` must not import the public ``nova.amp``.
A ``ContextVar``: per thread (and per asyncio task), as autocast is in PyTorch.

Which ops run in float32 follows PyTorch's lists, which differ by device: losses
(cross_entropy, nll_loss, mse_loss, ...) everywhere; softmax, log_softmax and the norms
on CUDA only (PyTorch's CPU autocast keeps them in the half type). The matmul-like ops
lower their operands where they are written (``matmul``, ``F.linear``, the
convolutions); the other listed ops take their policy from ``POLICIES`` through the
``autocast_op`` decorator.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from nova.core import dtypes as dt

# (the dtype matmul-like ops compute in, the device_type) inside an enabled ``autocast``
# block, else None.
LOWER: ContextVar[tuple[dt.DType, str] | None] = ContextVar("nova_autocast", default=None)

_HALF = (dt.float16, dt.bfloat16)


def lowered(t):
    """``t`` for a matmul-like op under autocast: float32 cast to the autocast dtype
    (float64 and integers stay as they are, as in PyTorch)."""
    state = LOWER.get()
    if state is None or t.dtype != dt.float32:
        return t
    from nova.tensor.ops import cast
    return cast(t, state[0])


def full_precision(t, cuda_only: bool = False):
    """``t`` for an op PyTorch's autocast runs in float32: a half input raised to
    float32 inside an autocast block (for ``cuda_only`` ops, a ``cuda`` block only)."""
    state = LOWER.get()
    if state is None or t.dtype not in _HALF or (cuda_only and state[1] != "cuda"):
        return t
    from nova.tensor.ops import cast
    return cast(t, dt.float32)


@contextmanager
def suspended() -> Iterator[None]:
    """Autocast off for the ops recorded inside: a composite that cast its operands
    itself (its inner matmul must not lower them again), or that PyTorch does not
    autocast although it is built from ops Nova's autocast lowers."""
    token = LOWER.set(None)
    try:
        yield
    finally:
        LOWER.reset(token)


def rounded_once(fn: Callable[..., Any], *tensors: Any,
                 halves: tuple[dt.DType, ...] = _HALF) -> Any:
    """``fn(*tensors)`` with one rounding, as PyTorch's CPU kernels compute a
    half-precision product and what they add to it (``linear``, ``addmm``,
    ``baddbmm``, the convolutions): tensors all of one half type in ``halves`` go in as
    their float32 values (``fn`` runs with autocast off, so its products stay float32)
    and the result is rounded to the half type once. Rounding the half product, then
    its sum with the bias (what the ops written out do) is up to 1 ulp off on a quarter
    of the elements. Anything else runs as written."""
    from nova.tensor.ops import cast
    from nova.tensor.tensor import Tensor
    half = getattr(tensors[0], "dtype", None) if tensors else None
    if half not in halves or any(not isinstance(t, Tensor) or t.dtype != half
                                 for t in tensors):
        return fn(*tensors)
    with suspended():
        return cast(fn(*(cast(t, dt.float32) for t in tensors)), half)


def biased_product(product: Callable[..., Any], operands: Sequence[Any], bias: Any,
                   halves: tuple[dt.DType, ...] = _HALF) -> Any:
    """``product(*operands) + bias`` rounded once (``rounded_once``); ``halves``: the
    half types PyTorch rounds once for this op (its float16 transposed convolutions
    round the product first)."""
    from nova.tensor.ops import add
    return rounded_once(lambda b, *xs: add(product(*xs), b), bias, *operands, halves=halves)


# PyTorch's autocast policy per op and device type, for the Nova ops whose policy is not
# written where they are (the matmul-like ops lower in ``matmul``, ``F.linear`` and the
# convolutions; the losses and norms raise in ``nn.functional``):
#   "lower"    float32 tensor arguments cast to the autocast dtype (PyTorch's
#              lower_precision_fp list), the result in it;
#   "fp32"     half tensor arguments raised to float32 (its fp32 list);
#   "promote"  floating arguments cast to the widest floating type among them (its
#              promote list);
#   "none"     no autocast: the arguments as given. For Nova ops built from ops that
#              autocast would lower (a ``mv`` from ``matmul``) where PyTorch's op is not
#              in a list, so the result keeps the inputs' precision as PyTorch's does.
# Under every policy the op's own body runs with autocast off. The "cpu" column is
# torch 2.13's CPU autocast as observed op by op (tests/test_amp_lists.py compares each
# with torch where it is installed); the "cuda" column is PyTorch's CUDA lists where
# they name the op, else "none" (a device missing from an entry: no policy there).
POLICIES: dict[str, dict[str, str]] = {
    # lower_precision_fp on both devices
    **{op: {"cpu": "lower", "cuda": "lower"}
       for op in ("addmm", "baddbmm", "addbmm", "prelu")},
    # lower_precision_fp on CUDA only; not autocast on the CPU
    **{op: {"cpu": "none", "cuda": "lower"} for op in ("mv", "addmv", "addr")},
    # in no list
    **{op: {"cpu": "none", "cuda": "none"}
       for op in ("dot", "vdot", "linalg.lu_solve", "linalg.solve_triangular")},
    # fp32 on both devices
    **{op: {"cpu": "fp32", "cuda": "fp32"}
       for op in ("prod", "cdist", "kl_div", "poisson_nll_loss", "cosine_embedding_loss",
                  "triplet_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
                  "grid_sample")},
    # fp32 on the CPU
    **{op: {"cpu": "fp32", "cuda": "none"}
       for op in ("trace", "quantile", "nanquantile", "ctc_loss", "avg_pool3d",
                  "max_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d",
                  "max_unpool1d", "max_unpool2d", "max_unpool3d", "reflection_pad1d",
                  "reflection_pad2d", "replication_pad1d", "replication_pad2d",
                  "replication_pad3d", "linalg.inv", "linalg.cholesky", "linalg.solve",
                  "linalg.lstsq", "linalg.qr", "linalg.svd", "linalg.svdvals",
                  "linalg.eigh", "linalg.eigvalsh", "linalg.cond", "linalg.matrix_rank")},
    # promote on the CPU
    "index_copy": {"cpu": "promote", "cuda": "none"},
}

_F = Callable[..., Any]


def autocast_op(name: str) -> Callable[[_F], _F]:
    """Decorate the Nova op PyTorch's autocast lists as ``name`` (``POLICIES``): inside
    an enabled ``autocast`` of a device type with a policy for it, its tensor arguments
    (also those in a list or tuple) are cast by that policy and its body runs with
    autocast off; elsewhere it runs as written."""
    if name not in POLICIES:
        raise KeyError(f"autocast_op: no autocast policy for {name!r} (known: "
                       f"{sorted(POLICIES)})")
    policies = POLICIES[name]

    def decorate(fn: _F) -> _F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            state = LOWER.get()
            policy = None if state is None else policies.get(state[1])
            if policy is None:
                return fn(*args, **kwargs)
            args, kwargs = cast_arguments(policy, state[0], args, kwargs)
            with suspended():
                return fn(*args, **kwargs)
        return wrapper
    return decorate


def cast_arguments(policy: str, lower: dt.DType, args: tuple,
                   kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """``args`` and ``kwargs`` with their tensors cast by ``policy`` (``lower``: the
    autocast dtype)."""
    from nova.tensor.ops import cast
    from nova.tensor.tensor import Tensor

    def tensors(v: Any) -> Iterator[Any]:
        if isinstance(v, Tensor):
            yield v
        elif isinstance(v, (list, tuple)):
            for x in v:
                yield from tensors(x)
    if policy == "promote":
        floats = [t.dtype for v in (*args, *kwargs.values()) for t in tensors(v)
                  if t.dtype.is_floating_point]
        target = functools.reduce(dt.promote_types, floats) if floats else None
    else:
        target = {"lower": lower, "fp32": dt.float32}.get(policy)

    def convert(v: Any) -> Any:
        if isinstance(v, Tensor):
            return cast(v, target) if _eligible(policy, v.dtype, target) else v
        if isinstance(v, (list, tuple)) and any(True for _ in tensors(v)):
            return type(v)(convert(x) for x in v)
        return v
    return tuple(convert(a) for a in args), {k: convert(v) for k, v in kwargs.items()}


def _eligible(policy: str, dtype: dt.DType, target: dt.DType | None) -> bool:
    """Whether a tensor of ``dtype`` is cast under ``policy`` (PyTorch's: float64 and
    integers never; lowering casts float32, raising the half types, promoting any
    narrower float)."""
    if target is None or dtype == target or not dtype.is_floating_point or \
            dtype == dt.float64:
        return False
    if policy == "lower":
        return dtype == dt.float32
    if policy == "fp32":
        return dtype in _HALF
    return policy == "promote"
