"""Convolution and pooling (``F.conv1d/2d/3d``, ``F.max_pool*``, ``F.avg_pool*``,
``F.adaptive_avg_pool*``, ``F.adaptive_max_pool*``), PyTorch's semantics, built on :mod:`nova.nn.windows`.

A convolution is im2col and matmul. With many output positions ``P`` per image
(``PER_IMAGE_MIN_POSITIONS``) the window stack ``(N, C*K, P)`` is contracted image by
image with the weight flattened to ``(O, C*K)``, which gives ``(N, O, P)`` directly;
with few, the batch folds into the columns: the channels-first stack ``(C, K, N, *out)``
flattened to ``(C*K, N*P)``, one wide product, and the ``(O, N, *out)`` result
transposed back. A float32 per-image convolution with unit strides uses shifted
windows instead (``_shifted_product``, ``_shifted_form``): its window matrix is a table
view of the padded input, which the CPU GEMMs pack from directly, so no im2col copy is
stored. From ``TRANSPOSED_GRADIENT_MIN_CHANNELS`` input channels (and up to
``MAX_TRANSPOSED_OFFSETS`` kernel offsets) its input gradient is the transposed
convolution, shifted windows of the output gradient (``_ShiftedConvolution``), so no
window gradients are stored either; with fewer channels, up to ``MAX_SHIFTED_OFFSETS``
offsets, it is the gradient autograd derives.
With ``groups`` the channels split into ``G`` groups of ``C/G*K`` and
the weight into ``(G, O/G, C/G*K)``, one batched matmul over the groups. Max pooling takes the first
maximum of each window (``argmax``, NaN counting as the largest, as PyTorch's kernels
do) and gathers it, so the gradient goes to that one element as in PyTorch; average
pooling sums the window and divides by PyTorch's divisor (``count_include_pad``,
``ceil_mode``'s partial windows, ``divisor_override``), precomputed as a constant.
Adaptive average pooling is separable: per spatial dim one ``(out, in)`` averaging
matrix over PyTorch's bins ``[floor(i*in/out), ceil((i+1)*in/out))``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from nova.autograd.function import Function
from nova.core.errors import DTypeError, ShapeError
from nova.core import dtypes as dt
from nova.nn.windows import WindowSpec, as_tuple, batched, window_stack
from nova.tensor import ops
from nova.tensor.constants import constant
from nova.tensor.autocast_state import autocast_op, biased_product, lowered
from nova.tensor.tensor import Tensor


# Output positions per image from which a convolution runs one product per image
# rather than folding the batch into one product's columns. Folding costs two extra
# passes over output-sized tensors (the output and its gradient transposed between
# (O, N, P) and (N, O, P)); per image, each GEMM is only P columns wide and packs the
# weight again. Measured on the shapes of ``python -m benchmarks.bench_conv`` (batch 8,
# 2 cores; forward + both gradients, kernels only): per image wins from P = 784 up
# (7x7/2 stem 83 -> 54 ms, 1x1 to 256 channels at 56x56 21 -> 10 ms, 3x3 at 28x28
# 22 -> 20 ms, 3x3 at 56x56 ~29 -> ~27 ms) and loses at P = 196 (3x3 at 14x14, 256
# channels: 17 -> 21 ms).
PER_IMAGE_MIN_POSITIONS = 512


def _conv(op: str, nd: int, x: Tensor, weight: Tensor, bias: Tensor | None, stride: Any,
          padding: Any, dilation: Any, groups: int) -> Tensor:
    x, unbatched = batched(op, x, nd)
    if not isinstance(weight, Tensor) or weight.ndim != nd + 2:
        raise ValueError(f"{op}: weight must be a {nd + 2}-D tensor (out_channels, "
                         f"in_channels/groups, *kernel), got "
                         f"{getattr(weight, 'shape', type(weight).__name__)}")
    if not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    x, weight = lowered(x), lowered(weight)          # autocast (no-op outside it)
    n, c = x.shape[:2]
    o, cg = weight.shape[:2]
    if c != cg * groups or o % groups:
        raise ShapeError(f"{op}: input {x.shape} has {c} channels but weight {weight.shape} "
                         f"with groups={groups} expects {cg * groups} (and out_channels "
                         f"divisible by groups)")
    if x.dtype != weight.dtype:
        raise DTypeError(f"{op}: input ({x.dtype.name}) and weight ({weight.dtype.name}) "
                         "must have the same dtype")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: expected floating point input, got {x.dtype.name}")
    spec = WindowSpec.make(op, tuple(x.shape[2:]), tuple(weight.shape[2:]), stride,
                           padding, dilation)
    if bias is None:
        out = _conv_product(x, weight, spec, groups)
    else:
        if bias.shape != (o,):
            raise ValueError(f"{op}: bias must have shape ({o},), got {bias.shape}")
        # autocast: the bias joins the product's precision; a half product and its bias
        # are summed in float32 and rounded once, as PyTorch's CPU convolutions do
        out = biased_product(lambda a, w: _conv_product(a, w, spec, groups), (x, weight),
                             lowered(bias).reshape((o,) + (1,) * nd))
    return out.squeeze(0) if unbatched else out


def _conv_product(x: Tensor, weight: Tensor, spec: WindowSpec, groups: int) -> Tensor:
    """The convolution of batched ``x`` by ``weight`` (no bias): im2col and matmul."""
    n = x.shape[0]
    o, cg = weight.shape[:2]
    depth = cg * spec.count
    positions = math.prod(spec.out)
    form = _shifted_form(x, spec, groups, positions)
    if form == "transposed":
        return _ShiftedConvolution.apply(x, weight, spec, _transposed_spec(spec))
    if form == "derived":
        return _shifted_product(x, weight, spec)
    if positions >= PER_IMAGE_MIN_POSITIONS:
        # One product per image against the shared weight: (N, G, C/G*K, P) windows give
        # (N, G, O/G, P), already the output's layout, and the output's gradient is read
        # as it comes; the weight's gradient is a per-image product summed over N.
        cols = window_stack(x, spec).reshape(n, groups, depth, positions)
        w = weight.reshape(1, groups, o // groups, depth)
        out = ops.matmul(w, cols).reshape((n, o) + spec.out)
    else:
        # The batch folds into the product's columns: (C, K, N, *out) windows are one
        # (C*K, N*P) operand per group, so the forward, the input gradient and the
        # weight gradient are each one GEMM wide enough to run at full speed, at the
        # price of transposing the output and its gradient between (O, N) and (N, O).
        cols = window_stack(x.transpose(0, 1), spec, dim=1) \
            .reshape(groups, depth, n * positions)
        w = weight.reshape(groups, o // groups, depth)
        out = ops.matmul(w, cols).reshape((o, n) + spec.out).transpose(0, 1)
    return out


# At most this many kernel offsets for the shifted-window form (``_shifted_product``)
# whose input gradient autograd derives: it sums that many shifted copies of the window
# gradient along one flattened axis, split where each starts and ends
# (``targets.cpu.llvm._regions``, two cuts per offset).
MAX_SHIFTED_OFFSETS = 9

# At most this many with the transposed input gradient (``_ShiftedConvolution``), whose
# products read table views however many offsets there are: 7 x 7, measured below.
MAX_TRANSPOSED_OFFSETS = 49


def _shifted_form(x: Tensor, spec: WindowSpec, groups: int, positions: int) -> str | None:
    """How a shifted-window convolution computes this one, if it does (float32, one
    group, unit strides, one or two spatial dims, several kernel offsets, the
    per-image product of ``PER_IMAGE_MIN_POSITIONS``): ``"transposed"`` -- the input
    gradient a transposed convolution (``_ShiftedConvolution``), from
    ``TRANSPOSED_GRADIENT_MIN_CHANNELS`` input channels and up to
    ``MAX_TRANSPOSED_OFFSETS`` offsets -- or ``"derived"`` (``_shifted_product``, up to
    ``MAX_SHIFTED_OFFSETS``); None: the stored window stack."""
    if not (x.dtype == dt.float32 and groups == 1 and len(spec.spatial) in (1, 2)
            and all(s == 1 for s in spec.stride) and spec.count > 1
            and positions >= PER_IMAGE_MIN_POSITIONS):
        return None
    if x.shape[1] >= TRANSPOSED_GRADIENT_MIN_CHANNELS and \
            spec.count <= MAX_TRANSPOSED_OFFSETS and _transposed_spec(spec) is not None:
        return "transposed"
    return "derived" if spec.count <= MAX_SHIFTED_OFFSETS else None


def _shifted_windows(x: Tensor, spec: WindowSpec) -> tuple[Tensor, tuple[int, ...]]:
    """The window matrix of ``_shifted_product`` -- ``(N, 1, C*K, span)``, a table view
    of the padded input -- and the output grid it spans (``spec.out`` with the last
    dim widened to the padded width)."""
    n, c = x.shape[:2]
    from nova.nn.functional import _pad_constant   # (functional imports this module)
    wide = spec.spatial[-1] + spec.low[-1] + spec.high[-1]          # W'
    reach = spec.dilation[-1] * (spec.kernel[-1] - 1)                # past a row's end
    extra = -(-reach // wide) if len(spec.spatial) == 2 else 0
    pads = list(zip(spec.low, spec.high))
    if extra:
        pads[0] = (pads[0][0], pads[0][1] + extra)
    padded = _pad_constant(x, [(0, 0), (0, 0)] + pads, 0.0)
    length = math.prod(padded.shape[2:])
    flat = ops.prim("reshape", [padded], {}, (n, c, length), x.dtype)
    grid = spec.out[:-1] + (wide,) if len(spec.spatial) == 2 else spec.out
    span = math.prod(grid)
    pieces = []
    for k in spec.offsets():
        start = sum(ki * di * stride for ki, di, stride in
                    zip(k, spec.dilation, (wide, 1)[-len(k):]))
        piece = ops.prim("slice", [flat], {"start": (0, 0, start),
                                            "limit": (n, c, start + span),
                                            "stride": (1, 1, 1)}, (n, c, span), x.dtype)
        pieces.append(ops.prim("reshape", [piece], {}, (n, c, 1, span), x.dtype))
    stack = ops.prim("concat", pieces, {"dim": 2}, (n, c, spec.count, span), x.dtype)
    return ops.prim("reshape", [stack], {}, (n, 1, c * spec.count, span), x.dtype), grid


def _shifted_product(x: Tensor, weight: Tensor, spec: WindowSpec) -> Tensor:
    """The convolution as one product per image whose window matrix is a stack of
    shifted ranges of the flattened padded input: with unit strides, output position
    ``(i, j)`` reads ``x_padded[i + a, j + b]``, which in the padded image flattened row
    by row is position ``i * W' + j`` shifted by ``a * W' + b`` (``W'`` the padded
    width). Over the positions ``p = i * W' + j`` of a ``W'``-wide output grid, each
    kernel offset's window is one contiguous range, so the window matrix is a view of
    the padded input with a table of start offsets (``lowering.views.TableView``), and
    the CPU GEMM packs it straight from the input instead of reading a stored im2col
    copy 9x the input's size. The ``W' - W_out`` columns past each output row are
    computed and dropped (3.5% more work at 56 wide); one more zero row keeps the last
    ranges inside the input."""
    n = x.shape[0]
    o, c = weight.shape[:2]
    cols, grid = _shifted_windows(x, spec)
    w = weight.reshape(1, 1, o, c * spec.count)
    out = ops.matmul(w, cols).reshape((n, o) + grid)
    if grid != spec.out:
        out = out[..., :spec.out[-1]]
    return out


# Input channels from which a shifted-window convolution's input gradient is computed as
# the transposed convolution (``_ShiftedConvolution``): a product with M = C_in rows,
# K = C_out x K columns. Below, the autograd-derived gradient -- (C_in x K, P) window
# gradients summed back by shifted ranges -- is kept (and more than
# ``MAX_SHIFTED_OFFSETS`` offsets take the stored stack). Kernel time of forward + both
# gradients, batch 8, the two forms paired rep by rep in one process (median ratio of
# 12; shape C_in, HxW, C_out, kernel): transposed / derived 0.88 at (16, 56, 16, 3x3),
# 0.93 at (32, 56, 32, 3x3), 0.92 at (8, 32, 16, 3x3), 1.33 at (3, 32, 16, 3x3);
# transposed / stored stack 0.88 at (16, 28, 32, 5x5), 0.83 at (32, 28, 64, 5x5), 0.73
# at (64, 28, 64, 5x5), 0.75 at (32, 28, 32, 7x7), 1.0 at (8, 28, 16, 5x5). So 16, where
# the gain is clear in every form measured (at 8 it was 0.92 and 1.0; at 3, a loss).
TRANSPOSED_GRADIENT_MIN_CHANNELS = 16


def _transposed_spec(spec: WindowSpec) -> WindowSpec | None:
    """The windows of the input gradient of a unit-stride convolution as a convolution
    of the output gradient: over the output (``spec.out``), padded by ``d (k - 1)``
    less the forward's padding on each side, the same kernel (flipped by the caller)
    and dilation, giving the input's size; None where the forward pads more than
    that (the gradient would need cropping)."""
    reach = [d * (k - 1) for d, k in zip(spec.dilation, spec.kernel)]
    low = tuple(r - lo for r, lo in zip(reach, spec.low))
    high = tuple(r - hi for r, hi in zip(reach, spec.high))
    if min(low + high) < 0:
        return None
    return WindowSpec(spec.op, spec.out, spec.kernel, (1,) * len(spec.out), spec.dilation,
                      low, high, spec.spatial)


class _ShiftedConvolution(Function):
    """A shifted-window convolution (``_shifted_product``) whose input gradient is the
    transposed convolution -- the output gradient's shifted windows against the
    flipped weight with its channels swapped, another ``_shifted_product`` -- instead
    of what autograd derives from the forward's ops: the window gradients, a stored
    ``(N, C x K, P)`` product (31 MB for a 3x3 of 128 channels at 28x28, batch 8),
    summed back into the input by ``K`` shifted ranges. Both are the same sums of the
    same products, in another order. The weight gradient is the one autograd derives:
    the output gradient against the same table view of the input. The backward only
    builds ops from the saved input and weight (``pure_backward``); under
    ``create_graph`` those ops are differentiated like any."""

    pure_backward = True

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, spec: WindowSpec,
                transposed: WindowSpec) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.spec, ctx.transposed = spec, transposed
        return _shifted_product(x, weight, spec)

    @staticmethod
    def template_key(ctx: Any) -> tuple[WindowSpec, WindowSpec]:
        return ctx.spec, ctx.transposed

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None, None]:
        x, weight = ctx.saved_tensors
        spec = ctx.spec
        gx = gw = None
        if ctx.needs_input_grad[0]:
            nd = len(spec.kernel)
            flipped = weight.transpose(0, 1).flip(tuple(range(2, 2 + nd)))
            gx = _shifted_product(grad, flipped, ctx.transposed)
        if ctx.needs_input_grad[1]:
            gw = _shifted_weight_gradient(x, grad, weight.shape, spec)
        return gx, gw, None, None


def _shifted_weight_gradient(x: Tensor, grad: Tensor, shape: tuple[int, ...],
                             spec: WindowSpec) -> Tensor:
    """The weight gradient of ``_shifted_product``: the output gradient, widened to
    the grid with zeros (the dropped columns), against the input's table view, summed
    over the batch."""
    from nova.nn.functional import _pad_constant   # (functional imports this module)
    n, o = grad.shape[:2]
    cols, grid = _shifted_windows(x, spec)
    if grid != spec.out:
        widths = [(0, 0)] * (grad.ndim - 1) + [(0, grid[-1] - spec.out[-1])]
        grad = _pad_constant(grad, widths, 0.0)
    g = grad.reshape(n, 1, o, math.prod(grid))
    return ops.matmul(g, cols.transpose(-2, -1)).sum(0).reshape(shape)


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """``torch.nn.functional.conv1d``: input ``(N, C, L)`` or ``(C, L)``."""
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """``torch.nn.functional.conv2d``: input ``(N, C, H, W)`` or ``(C, H, W)``."""
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """``torch.nn.functional.conv3d``: input ``(N, C, D, H, W)`` or ``(C, D, H, W)``."""
    return _conv("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


def _pool_spec(op: str, nd: int, x: Tensor, kernel_size: Any, stride: Any, padding: Any,
               dilation: Any, ceil_mode: bool) -> WindowSpec:
    kernel = as_tuple(op, "kernel_size", kernel_size, nd, 1)
    stride = kernel if stride is None or stride == () or stride == [] else stride
    pad = as_tuple(op, "padding", padding, nd, 0)
    dil = as_tuple(op, "dilation", dilation, nd, 1)
    if any(p > (d * (k - 1) + 1) // 2 for p, k, d in zip(pad, kernel, dil)):
        raise ValueError(f"{op}: padding {pad} should be at most half of the effective "
                         f"kernel size {tuple(d * (k - 1) + 1 for k, d in zip(kernel, dil))}")
    return WindowSpec.make(op, tuple(x.shape[2:]), kernel, stride, pad, dil, ceil_mode)


def _lowest(dtype: dt.DType) -> Any:
    if dtype.is_floating_point:
        return -math.inf
    return False if dtype == dt.bool_ else int(np.iinfo(dtype.np).min)


def _max_pool(op: str, nd: int, x: Tensor, kernel_size: Any, stride: Any, padding: Any,
              dilation: Any, ceil_mode: bool, return_indices: bool) -> Any:
    x, unbatched = batched(op, x, nd)
    spec = _pool_spec(op, nd, x, kernel_size, stride, padding, dilation, ceil_mode)
    windows = window_stack(x, spec, _lowest(x.dtype))
    first = ops.argmax(windows, 2, keepdim=True)
    out = ops.gather(windows, 2, first).squeeze(2)
    if not return_indices:
        return out.squeeze(0) if unbatched else out
    indices = _input_positions(spec, first.squeeze(2), x.device)
    if unbatched:
        out, indices = out.squeeze(0), indices.squeeze(0)
    return out, indices


def _input_positions(spec: WindowSpec, offset: Tensor, device: Any) -> Tensor:
    """The flat index into each input plane of the element that kernel offset
    ``offset`` (an index into the row-major kernel) reads at each output position, as
    ``max_pool``'s ``return_indices`` gives it."""
    nd = len(spec.spatial)
    flat = None
    inner = math.prod(spec.kernel)
    plane = math.prod(spec.spatial)
    for d in range(nd):
        inner //= spec.kernel[d]
        plane //= spec.spatial[d]
        k_d = (offset // inner) % spec.kernel[d]
        shape = [1] * (nd + 2)
        shape[2 + d] = spec.out[d]
        start = constant((np.arange(spec.out[d]) * spec.stride[d] - spec.low[d])
                       .reshape(shape), dtype=dt.int64, device=device)
        coord = start + k_d * spec.dilation[d]
        flat = coord * plane if flat is None else flat + coord * plane
    return flat


def max_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation,
                     ceil_mode, return_indices)


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """``torch.nn.functional.max_pool2d``: the first maximum of each window (NaN counts
    as the largest); ``return_indices`` gives flat indices into each ``H*W`` plane."""
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation,
                     ceil_mode, return_indices)


@autocast_op("max_pool3d")
def max_pool3d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    return _max_pool("max_pool3d", 3, input, kernel_size, stride, padding, dilation,
                     ceil_mode, return_indices)


def _avg_divisor(spec: WindowSpec, padding: tuple[int, ...], count_include_pad: bool
                 ) -> np.ndarray:
    """PyTorch's divisor per output position: the window clipped to the padded input
    (``count_include_pad``) or to the input itself; separable, so an outer product."""
    total = np.ones((), np.float64)
    for n, k, s, p, o in zip(spec.spatial, spec.kernel, spec.stride, padding, spec.out):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, n + p)
        if not count_include_pad:
            start, end = np.maximum(start, 0), np.minimum(end, n)
        total = np.multiply.outer(total, (end - start).astype(np.float64))
    return total


def _avg_pool(op: str, nd: int, x: Tensor, kernel_size: Any, stride: Any, padding: Any,
              ceil_mode: bool, count_include_pad: bool, divisor_override: Any) -> Tensor:
    x, unbatched = batched(op, x, nd)
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: expected floating point input, got {x.dtype.name}")
    spec = _pool_spec(op, nd, x, kernel_size, stride, padding, 1, ceil_mode)
    total = ops.sum(window_stack(x, spec), 2)
    if divisor_override is not None:
        if not isinstance(divisor_override, int) or divisor_override == 0:
            raise ValueError(f"{op}: divisor_override must be a nonzero int, got "
                             f"{divisor_override!r}")
        out = ops.div(total, float(divisor_override))
    else:
        pad = as_tuple(op, "padding", padding, nd, 0)
        divisor = _avg_divisor(spec, pad, count_include_pad)
        if np.all(divisor == divisor.flat[0]):
            out = ops.mul(total, 1.0 / float(divisor.flat[0]))
        else:
            out = ops.div(total, constant(divisor.astype(x.dtype.np), device=x.device))
    return out.squeeze(0) if unbatched else out


def avg_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, None)


def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    """``torch.nn.functional.avg_pool2d``, with PyTorch's divisor rules."""
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


@autocast_op("avg_pool3d")
def avg_pool3d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    return _avg_pool("avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def _bins(n: int, out: int) -> np.ndarray:
    """The ``(out, n)`` matrix averaging PyTorch's adaptive bins of a dim of size ``n``."""
    m = np.zeros((out, n), np.float64)
    for i in range(out):
        start, end = (i * n) // out, -(-((i + 1) * n) // out)
        m[i, start:end] = 1.0 / (end - start)
    return m


def _adaptive_sizes(op: str, nd: int, x: Tensor, output_size: Any) -> tuple[int, ...]:
    """``output_size`` (an int, or ``nd`` ints or Nones, None keeping the input's size)
    as ``nd`` positive ints, checked against the input."""
    sizes = (output_size,) * nd if isinstance(output_size, int) or output_size is None \
        else tuple(output_size)
    if len(sizes) != nd:
        raise ValueError(f"{op}: output_size must be an int or a tuple of {nd} (ints or "
                         f"None), got {output_size!r}")
    sizes = tuple(x.shape[2 + d] if s is None else s for d, s in enumerate(sizes))
    if any(not isinstance(s, int) or s < 1 for s in sizes) or 0 in x.shape[2:]:
        raise ValueError(f"{op}: output_size {sizes} must be positive ints, and the input "
                         f"{x.shape} non-empty")
    return sizes


def _adaptive_avg_pool(op: str, nd: int, x: Tensor, output_size: Any) -> Tensor:
    x, unbatched = batched(op, x, nd)
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{op}: expected floating point input, got {x.dtype.name}")
    sizes = _adaptive_sizes(op, nd, x, output_size)
    out = x
    if all(s == 1 for s in sizes):          # global average: one reduction
        out = ops.mean(x, tuple(range(2, nd + 2)), keepdim=True)
    else:
        for d, s in enumerate(sizes):
            n = x.shape[2 + d]
            if s == n:
                continue
            axis = 2 + d
            if n % s == 0:                  # equal, disjoint bins: a reshape and a mean
                shape = out.shape[:axis] + (s, n // s) + out.shape[axis + 1:]
                out = ops.mean(out.reshape(shape), axis + 1)
            else:
                bins = constant(_bins(n, s).T.astype(x.dtype.np), device=x.device)
                out = ops.matmul(out.transpose(axis, -1), bins).transpose(axis, -1)
    # (to the same size, or through transposes: a new tensor, never a view of the input)
    return ops.unshared(out.squeeze(0) if unbatched else out, x)


def _bin_taps(n: int, out: int) -> np.ndarray:
    """``(out, k)`` input positions of PyTorch's adaptive bins of a dim of size ``n``
    (``k`` the widest bin); a narrower bin repeats its last position, which can never
    be the first maximum in row-major order before the real one."""
    start = np.arange(out) * n // out
    end = -(-(np.arange(1, out + 1) * n) // out)
    k = int((end - start).max())
    return start[:, None] + np.minimum(np.arange(k), (end - start - 1)[:, None])


def _adaptive_max_pool(op: str, nd: int, x: Tensor, output_size: Any,
                       return_indices: bool) -> Any:
    """Every output position reads its bin (PyTorch's bins, as ``adaptive_avg_pool``)
    through one gather from the flattened spatial dims, ``(N, C, *out, K)`` with the
    bin's positions in row-major order; the first maximum (NaN counting as the largest)
    is gathered, so its gradient goes to that one element as in ``max_pool``.
    ``return_indices`` gives flat indices into each input plane, as PyTorch's."""
    x, unbatched = batched(op, x, nd)
    sizes = _adaptive_sizes(op, nd, x, output_size)
    spatial = x.shape[2:]
    flat = np.zeros((1,) * (2 * nd), np.int64)
    plane = math.prod(spatial)
    for d, (n, s) in enumerate(zip(spatial, sizes)):
        plane //= n
        taps = _bin_taps(n, s) * plane                          # (s, k) offsets in the plane
        shape = [1] * (2 * nd)
        shape[d], shape[nd + d] = taps.shape
        flat = flat + taps.reshape(shape)
    table = flat.reshape(sizes + (-1,))                          # (*out, K)
    k = table.shape[-1]
    n_, c = x.shape[:2]
    index = constant(table.reshape(1, 1, -1), dtype=dt.int64, device=x.device)
    windows = ops.gather(x.reshape(n_, c, math.prod(spatial)), 2,
                         index.expand(n_, c, table.size)).reshape((n_, c) + sizes + (k,))
    first = ops.argmax(windows, -1, keepdim=True)
    out = ops.gather(windows, -1, first).squeeze(-1)
    if not return_indices:
        return out.squeeze(0) if unbatched else out
    positions = constant(table.reshape((1, 1) + table.shape), dtype=dt.int64,
                         device=x.device)
    indices = ops.gather(positions.expand(*windows.shape), -1, first).squeeze(-1)
    if unbatched:
        out, indices = out.squeeze(0), indices.squeeze(0)
    return out, indices


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    return _adaptive_max_pool("adaptive_max_pool1d", 1, input, output_size, return_indices)


def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """``torch.nn.functional.adaptive_max_pool2d``: the first maximum of each of
    PyTorch's bins; ``return_indices`` gives flat indices into each ``H*W`` plane."""
    return _adaptive_max_pool("adaptive_max_pool2d", 2, input, output_size, return_indices)


@autocast_op("adaptive_max_pool3d")
def adaptive_max_pool3d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    return _adaptive_max_pool("adaptive_max_pool3d", 3, input, output_size, return_indices)


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    return _adaptive_avg_pool("adaptive_avg_pool1d", 1, input, output_size)


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """``torch.nn.functional.adaptive_avg_pool2d``: PyTorch's bins per dim."""
    return _adaptive_avg_pool("adaptive_avg_pool2d", 2, input, output_size)


@autocast_op("adaptive_avg_pool3d")
def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:
    return _adaptive_avg_pool("adaptive_avg_pool3d", 3, input, output_size)


__all__ = ["conv1d", "conv2d", "conv3d", "max_pool1d", "max_pool2d", "max_pool3d",
           "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
           "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
           "adaptive_max_pool2d", "adaptive_max_pool3d"]
